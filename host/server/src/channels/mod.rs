//! Chat channels (Discord, Slack): the host side of channel adapter plugins.
//!
//! - [`ChannelHub`] supervises one long-lived instance per enabled channel
//!   plugin: it restarts a failed adapter with exponential backoff, drains
//!   and swaps it on hot reload and stops it when the plugin is disabled,
//!   and reports each adapter's connection state.
//! - [`bridge`] turns what an adapter reports into workstream operations:
//!   account linking with one-time codes, conversation → workstream routing,
//!   sends with attachments, and approval button presses.
//! - [`relay`] streams a workstream's reply back by editing the posted
//!   message at a bounded rate, and posts and settles approval prompts.

pub mod bridge;
pub mod relay;

use crate::manager::Manager;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use turnstone_runtime::LivePlugins;
use turnstone_runtime::channel::{
    ChannelError, ChannelInfo, ChannelLink, ChannelSink, Command, CommandResult, Inbound, LinkState,
};
use turnstone_runtime::plugin::LoadedPlugin;
use turnstone_runtime::registry::PluginStatus;

/// The channel delivery sessions are built with before the hub exists
/// (the hub needs the manager, the manager's sessions need delivery).
#[derive(Default)]
pub struct LateDelivery {
    hub: std::sync::OnceLock<Weak<ChannelHub>>,
}

impl LateDelivery {
    /// Points delivery at `hub`.
    pub fn attach(&self, hub: &Arc<ChannelHub>) {
        let _ = self.hub.set(Arc::downgrade(hub));
    }
}

impl turnstone_engine::session::ChannelDelivery for LateDelivery {
    fn deliver(
        &self,
        channel_type: String,
        channel_id: String,
        text: String,
    ) -> futures::future::BoxFuture<'static, Result<String, String>> {
        let hub = self.hub.get().and_then(Weak::upgrade);
        Box::pin(async move {
            let hub = hub.ok_or_else(|| "no channel adapters run on this node".to_string())?;
            hub.notify(&channel_type, &channel_id, &text).await
        })
    }
}

/// `[channels]` settings.
#[derive(Debug, Clone)]
pub struct ChannelSettings {
    /// Least time between two edits of a streamed reply.
    pub edit_interval: Duration,
    /// Largest platform attachment accepted into a workstream.
    pub max_attachment_bytes: usize,
    /// First restart delay of a failed adapter (doubles up to `backoff_max`).
    pub backoff_min: Duration,
    /// Longest restart delay.
    pub backoff_max: Duration,
    /// How long a command (post, edit) may wait for the adapter.
    pub command_timeout: Duration,
    /// `[[channels.routes]]`: per-channel routing, first match wins.
    pub routes: Vec<RoutingRule>,
}

/// How messages in a channel are routed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RouteMode {
    /// Each conversation started in the channel gets its own thread and
    /// workstream (the default).
    #[default]
    Thread,
    /// The whole channel is one workstream; replies go to the channel.
    Channel,
    /// The bot does not answer in the channel.
    Ignore,
}

/// One `[[channels.routes]]` rule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingRule {
    /// The adapter plugin it applies to (none: every adapter).
    #[serde(default)]
    pub plugin: Option<String>,
    /// The platform channel id, or `*` for every channel.
    pub channel: String,
    /// How the channel's messages are routed.
    #[serde(default)]
    pub mode: RouteMode,
    /// The model alias of workstreams the rule starts (none: the default).
    #[serde(default)]
    pub model: Option<String>,
}

impl ChannelSettings {
    /// The first rule matching `plugin`'s `channel`.
    pub fn rule_for(&self, plugin: &str, channel: &str) -> Option<&RoutingRule> {
        self.routes.iter().find(|r| {
            r.plugin.as_deref().is_none_or(|p| p == plugin)
                && (r.channel == "*" || r.channel == channel)
        })
    }
}

impl Default for ChannelSettings {
    fn default() -> Self {
        Self {
            edit_interval: Duration::from_millis(1000),
            max_attachment_bytes: 8 << 20,
            backoff_min: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            command_timeout: Duration::from_secs(30),
            routes: Vec::new(),
        }
    }
}

/// An adapter's state as `plugins list` and the console show it.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct AdapterStatus {
    /// `starting`, `connecting`, `connected`, `reconnecting`, `failed`
    /// (waiting to restart) or `stopped`.
    pub state: String,
    /// The adapter's or the supervisor's last word on it.
    pub detail: String,
    /// The platform (`discord`, `slack`) once known.
    pub platform: Option<String>,
    /// Restarts after failures since the plugin was enabled.
    pub restarts: u32,
    /// Seconds since the state last changed.
    pub since_secs: u64,
}

struct Adapter {
    name: String,
    link: Arc<ChannelLink>,
    plugin: Mutex<Arc<LoadedPlugin>>,
    info: Mutex<Option<ChannelInfo>>,
    state: Mutex<(String, String, Instant)>,
    restarts: std::sync::atomic::AtomicU32,
    /// Set when the plugin was reloaded: restart at once with the new one.
    swap: std::sync::atomic::AtomicBool,
    /// Ends the supervisor (disable, removal, shutdown).
    done: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Adapter {
    fn set_state(&self, state: &str, detail: &str) {
        *lock(&self.state) = (state.to_string(), detail.to_string(), Instant::now());
    }

    fn status(&self) -> AdapterStatus {
        let (state, detail, since) = lock(&self.state).clone();
        AdapterStatus {
            state,
            detail,
            platform: lock(&self.info).as_ref().map(|i| i.platform.clone()),
            restarts: self.restarts.load(std::sync::atomic::Ordering::Relaxed),
            since_secs: since.elapsed().as_secs(),
        }
    }
}

/// The channel adapters of this node.
pub struct ChannelHub {
    pub(crate) mgr: Arc<Manager>,
    pub(crate) settings: ChannelSettings,
    live: Arc<LivePlugins>,
    adapters: Mutex<HashMap<String, Arc<Adapter>>>,
    /// Workstreams whose replies are being relayed, by ws id.
    pub(crate) relays: Mutex<HashMap<String, Arc<relay::Relay>>>,
    /// Serialises route decisions per conversation.
    routing: Mutex<HashMap<String, std::sync::Weak<tokio::sync::Mutex<()>>>>,
    /// Inbound events being handled (beyond this, new ones are dropped:
    /// a platform-side flood must not grow the host without bound).
    pub(crate) inbound: Arc<tokio::sync::Semaphore>,
    /// Webhook requests in flight (beyond this, 503 at once).
    webhooks: Arc<tokio::sync::Semaphore>,
    /// What the shared route helpers (attachments, sends) need.
    pub(crate) state: crate::http::AppState,
    me: Weak<ChannelHub>,
}

/// Routes an adapter's reports to the hub.
struct HubSink {
    hub: Weak<ChannelHub>,
    plugin: String,
}

/// Inbound events handled at once, per node.
const MAX_INBOUND: usize = 64;
/// Webhook requests in flight, per node.
const MAX_WEBHOOKS: usize = 16;
/// How long a webhook caller waits for the adapter.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

impl ChannelSink for HubSink {
    fn inbound(&self, event: Inbound) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        let Ok(permit) = hub.inbound.clone().try_acquire_owned() else {
            tracing::warn!(plugin = %self.plugin, "too many inbound chat events in flight; one was dropped");
            return;
        };
        let plugin = self.plugin.clone();
        tokio::spawn(async move {
            bridge::handle(hub, plugin, event).await;
            drop(permit);
        });
    }

    fn state(&self, state: LinkState, detail: &str) {
        let Some(hub) = self.hub.upgrade() else {
            return;
        };
        if let Some(a) = hub.adapter(&self.plugin) {
            let name = match state {
                LinkState::Connecting => "connecting",
                LinkState::Connected => "connected",
                LinkState::Reconnecting => "reconnecting",
                LinkState::Failed => "failed",
            };
            tracing::info!(plugin = %self.plugin, state = name, "{detail}");
            a.set_state(name, detail);
        }
    }
}

impl ChannelHub {
    /// A hub over `mgr`'s workstreams and the plugins in `live`.
    pub fn new(
        mgr: Arc<Manager>,
        live: Arc<LivePlugins>,
        settings: ChannelSettings,
        state: crate::http::AppState,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            mgr,
            routing: Mutex::new(HashMap::new()),
            inbound: Arc::new(tokio::sync::Semaphore::new(MAX_INBOUND)),
            webhooks: Arc::new(tokio::sync::Semaphore::new(MAX_WEBHOOKS)),
            state,
            settings,
            live,
            adapters: Mutex::new(HashMap::new()),
            relays: Mutex::new(HashMap::new()),
            me: me.clone(),
        })
    }

    fn adapter(&self, name: &str) -> Option<Arc<Adapter>> {
        lock(&self.adapters).get(name).cloned()
    }

    /// Every supervised adapter's status, by plugin name.
    pub fn statuses(&self) -> HashMap<String, AdapterStatus> {
        lock(&self.adapters)
            .iter()
            .map(|(k, a)| (k.clone(), a.status()))
            .collect()
    }

    /// The platform facts of a running adapter.
    pub fn info(&self, plugin: &str) -> Option<ChannelInfo> {
        self.adapter(plugin).and_then(|a| lock(&a.info).clone())
    }

    /// The adapter serving `platform` (`discord`, `slack`), if one runs.
    pub fn plugin_for(&self, platform: &str) -> Option<String> {
        let adapters = lock(&self.adapters);
        let mut names: Vec<&String> = adapters
            .iter()
            .filter(|(_, a)| {
                lock(&a.info)
                    .as_ref()
                    .is_some_and(|i| i.platform == platform)
            })
            .map(|(k, _)| k)
            .collect();
        names.sort();
        names.first().map(|n| n.to_string())
    }

    /// Hands a command to `plugin`'s adapter.
    pub async fn command(
        &self,
        plugin: &str,
        command: Command,
    ) -> Result<CommandResult, ChannelError> {
        let Some(a) = self.adapter(plugin) else {
            return Err(ChannelError::Gone);
        };
        a.link.command(command, self.settings.command_timeout).await
    }

    /// Posts a notification into `channel_id` through the adapter named
    /// `channel_type` (the plugin name, as in user links); long text is cut
    /// to the platform's limit.
    pub async fn notify(
        &self,
        channel_type: &str,
        channel_id: &str,
        text: &str,
    ) -> Result<String, String> {
        if self.adapter(channel_type).is_none() {
            return Err(format!(
                "no channel adapter named {channel_type:?} runs on this node"
            ));
        }
        let max = self
            .info(channel_type)
            .map_or(2000, |i| i.max_message_chars as usize);
        let text: String = text.chars().take(max).collect();
        let cmd = Command::Post(turnstone_runtime::channel::Post {
            conversation: turnstone_runtime::channel::Conversation {
                channel_id: channel_id.to_string(),
                thread_id: None,
                direct: false,
            },
            text,
            reply_to: None,
            start_thread: None,
        });
        match self.command(channel_type, cmd).await {
            Ok(CommandResult::Posted(p)) => Ok(p.message_id),
            Ok(_) => Ok(String::new()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Hands a webhook request to `plugin`'s adapter: at most a few at once
    /// per node (`None`: too many in flight), each waiting briefly.
    pub async fn webhook(
        &self,
        plugin: &str,
        command: Command,
    ) -> Option<Result<CommandResult, ChannelError>> {
        let _permit = self.webhooks.clone().try_acquire_owned().ok()?;
        let Some(a) = self.adapter(plugin) else {
            return Some(Err(ChannelError::Gone));
        };
        Some(a.link.command(command, WEBHOOK_TIMEOUT).await)
    }

    /// The lock that serialises routing decisions for one conversation.
    pub(crate) fn conversation_lock(&self, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = lock(&self.routing);
        if let Some(l) = map.get(key).and_then(std::sync::Weak::upgrade) {
            return l;
        }
        map.retain(|_, w| w.strong_count() > 0);
        let l = Arc::new(tokio::sync::Mutex::new(()));
        map.insert(key.to_string(), Arc::downgrade(&l));
        l
    }

    /// Follows the plugin registry until `stop`: starts a supervisor for
    /// every loaded channel adapter, swaps reloaded ones and stops the ones
    /// that were disabled or removed.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut seen = u64::MAX;
        loop {
            let generation = self.live.generation();
            if generation != seen {
                seen = generation;
                self.reconcile();
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(Duration::from_millis(250)) => {}
            }
        }
        let adapters: Vec<Arc<Adapter>> = lock(&self.adapters).drain().map(|(_, a)| a).collect();
        for a in adapters {
            a.done.cancel();
            a.link.stop();
        }
    }

    fn reconcile(&self) {
        let registry = self.live.snapshot();
        let mut wanted: HashMap<String, Arc<LoadedPlugin>> = HashMap::new();
        for entry in registry.entries() {
            if let PluginStatus::Loaded(p) = &entry.status
                && p.is_channel_adapter()
            {
                wanted.insert(p.name().to_string(), p.clone());
            }
        }
        let mut adapters = lock(&self.adapters);
        adapters.retain(|name, a| {
            if wanted.contains_key(name) {
                return true;
            }
            tracing::info!(plugin = %name, "channel adapter stopped (plugin disabled or removed)");
            a.done.cancel();
            a.link.stop();
            false
        });
        for (name, plugin) in wanted {
            match adapters.get(&name) {
                Some(a) => {
                    let mut current = lock(&a.plugin);
                    if !Arc::ptr_eq(&current, &plugin) {
                        tracing::info!(plugin = %name, "channel adapter reloaded: draining and reconnecting");
                        *current = plugin;
                        a.swap.store(true, std::sync::atomic::Ordering::Release);
                        a.link.stop();
                    }
                }
                None => {
                    let sink = Arc::new(HubSink {
                        hub: self.me.clone(),
                        plugin: name.clone(),
                    });
                    let a = Arc::new(Adapter {
                        name: name.clone(),
                        link: ChannelLink::new(sink),
                        plugin: Mutex::new(plugin),
                        info: Mutex::new(None),
                        state: Mutex::new(("starting".into(), String::new(), Instant::now())),
                        restarts: Default::default(),
                        swap: Default::default(),
                        done: CancellationToken::new(),
                    });
                    adapters.insert(name, a.clone());
                    tokio::spawn(supervise(a, self.settings.clone()));
                }
            }
        }
    }
}

/// Runs one adapter until its plugin is disabled: restart with backoff
/// after a failure, at once after a reload.
async fn supervise(a: Arc<Adapter>, settings: ChannelSettings) {
    let mut delay = settings.backoff_min;
    loop {
        if a.done.is_cancelled() {
            break;
        }
        a.link.rearm(&a.done);
        a.swap.store(false, std::sync::atomic::Ordering::Release);
        let plugin = lock(&a.plugin).clone();
        match plugin.channel_info().await {
            Ok(info) => *lock(&a.info) = Some(info),
            Err(e) => tracing::warn!(plugin = %a.name, "channel info: {e}"),
        }
        a.set_state("connecting", "");
        let started = Instant::now();
        let outcome = plugin
            .channel_serve(a.link.clone(), Duration::from_secs(5))
            .await;
        if a.done.is_cancelled() {
            break;
        }
        if a.swap.load(std::sync::atomic::Ordering::Acquire) {
            delay = settings.backoff_min;
            continue;
        }
        let reason = match outcome {
            Ok(Ok(())) => "the adapter stopped on its own".to_string(),
            Ok(Err(e)) => e,
            Err(e) => e.to_string(),
        };
        // A run that stayed up a while starts the backoff over.
        if started.elapsed() > settings.backoff_max {
            delay = settings.backoff_min;
        }
        let restarts = a
            .restarts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            + 1;
        tracing::warn!(plugin = %a.name, restarts, "channel adapter failed: {reason}; restarting in {delay:?}");
        a.set_state(
            "failed",
            &format!(
                "{reason} (restart {restarts} in {:.1} s)",
                delay.as_secs_f64()
            ),
        );
        tokio::select! {
            () = a.done.cancelled() => break,
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(settings.backoff_max);
    }
    a.set_state("stopped", "");
}
