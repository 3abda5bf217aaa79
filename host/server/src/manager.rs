//! The loaded workstreams of this node: creation (with capacity eviction),
//! lookup with owner isolation, close, idle close and shutdown.

use crate::global::GlobalHub;
use crate::metrics::Metrics;
use crate::workstream::{Core, Workstream};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use turnstone_engine::SessionState;
use turnstone_engine::events::EventSink;
use turnstone_engine::models::LiveModels;
use turnstone_engine::session::{ChatSession, SessionConfig};
use turnstone_protocol::{Aggregate, GlobalEvent, WsCreated};
use turnstone_runtime::LivePlugins;
use turnstone_storage::Storage;
use turnstone_storage::prelude::*;

/// Lifecycle settings (`[server]`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Most loaded workstreams (default 50).
    pub max_workstreams: usize,
    /// Idle workstreams are closed after this (None: never).
    pub idle_timeout: Option<Duration>,
    /// Events kept per workstream for replay.
    pub event_ring: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_workstreams: 50,
            idle_timeout: Some(Duration::from_secs(120 * 60)),
            event_ring: crate::events::DEFAULT_RING,
        }
    }
}

/// What sessions are built from.
pub struct Deps {
    /// Storage.
    pub db: Storage,
    /// Tool and provider components.
    pub registry: Arc<LivePlugins>,
    /// Model aliases.
    pub models: Arc<LiveModels>,
    /// Workspace directory for tools.
    pub workspace: PathBuf,
    /// `--skip-permissions`.
    pub skip_permissions: bool,
    /// Tool output limit.
    pub tool_truncation: Option<usize>,
    /// This node.
    pub node_id: String,
    /// `--event-log`: every session event, as JSON lines.
    pub event_log: Option<turnstone_engine::event_log::EventLog>,
    /// MCP servers whose tools every session gets.
    pub mcp: Option<Arc<turnstone_mcp::McpHub>>,
    /// Tool search settings.
    pub tool_search: turnstone_mcp::search::SearchSettings,
    /// `[mcp.serve] allow`: tools `/mcp` serves besides the auto-approved ones.
    pub mcp_serve_allow: Vec<String>,
    /// The skills catalogue (files and database).
    pub skills: Option<Arc<turnstone_engine::skills::SkillLibrary>>,
    /// `[titles]`.
    pub titles: Titles,
    /// `[agents]`: what each sub-agent may spend.
    pub task_budget: turnstone_engine::session::Budget,
    /// `[notify] complete_after_secs` (none: no completion notifications).
    pub notify_after: Option<std::time::Duration>,
    /// Wakes the node's watch scheduler (none: watches are not available).
    pub watch_wake: Option<Arc<tokio::sync::Notify>>,
    /// Policies, guards and the audit of decisions.
    pub safety: Arc<turnstone_engine::safety::Safety>,
    /// Delivers notifications to chat channel targets (none: channels off).
    pub channels: Option<Arc<dyn turnstone_engine::session::ChannelDelivery>>,
}

/// `[titles]`: whether new workstreams are named after their first
/// exchange, and by which model alias.
#[derive(Debug, Clone, Default)]
pub struct Titles {
    /// On.
    pub enabled: bool,
    /// The alias that writes titles (`None`: the workstream's own).
    pub model: Option<String>,
}

/// Why a workstream could not be created or loaded.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// Unknown model alias.
    #[error("The model '{0}' isn't loaded on this server")]
    ModelNotLoaded(String),
    /// At capacity and nothing idle to evict.
    #[error("at capacity: {0} workstreams are loaded and none is idle; close one or try later")]
    AtCapacity(usize),
    /// Not found.
    #[error("Workstream not found")]
    NotFound,
    /// The id is already loaded.
    #[error("workstream {0} already exists")]
    Exists(String),
    /// Invalid input.
    #[error("{0}")]
    Invalid(String),
    /// The skill asked for does not exist.
    #[error("{0}")]
    UnknownSkill(String),
    /// Storage failed.
    #[error(transparent)]
    Storage(#[from] turnstone_storage::StorageError),
    /// The session could not be built.
    #[error("{0}")]
    Session(String),
}

/// Options of a new workstream.
#[derive(Debug, Default, Clone)]
pub struct CreateOptions {
    /// Client-chosen id.
    pub ws_id: Option<String>,
    /// Display name.
    pub name: Option<String>,
    /// Model alias.
    pub model: Option<String>,
    /// Skip approvals in this workstream.
    pub auto_approve: bool,
    /// Saved workstream to fork.
    pub resume_ws: Option<String>,
    /// A skill to start with (its instructions and tool restrictions apply
    /// from the first request).
    pub skill: Option<String>,
}

/// The loaded workstreams.
pub struct Manager {
    /// Sessions' ingredients.
    pub deps: Deps,
    /// Settings.
    pub limits: Limits,
    /// Node-wide events.
    pub global: Arc<GlobalHub>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    loaded: RwLock<HashMap<String, Arc<Workstream>>>,
    /// Serialises capacity decisions (check + evict + insert).
    create_lock: tokio::sync::Mutex<()>,
}

impl Manager {
    /// A manager with nothing loaded.
    pub fn new(deps: Deps, limits: Limits, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            deps,
            limits,
            global: Arc::new(GlobalHub::new()),
            metrics,
            loaded: RwLock::new(HashMap::new()),
            create_lock: tokio::sync::Mutex::new(()),
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Workstream>>> {
        self.loaded.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Workstream>>> {
        self.loaded.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Every loaded workstream.
    pub fn all(&self) -> Vec<Arc<Workstream>> {
        let mut v: Vec<_> = self.read().values().cloned().collect();
        v.sort_by(|a, b| a.core.ws_id.cmp(&b.core.ws_id));
        v
    }

    /// A loaded workstream (no owner check).
    pub fn get(&self, ws_id: &str) -> Option<Arc<Workstream>> {
        self.read().get(ws_id).cloned()
    }

    /// Loaded workstreams.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when nothing is loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes room for one more, evicting the least recently active idle
    /// workstream when at capacity.
    async fn make_room(&self) -> Result<(), ManagerError> {
        if self.len() < self.limits.max_workstreams {
            return Ok(());
        }
        let victim = self
            .all()
            .into_iter()
            .filter(|w| {
                let s = w.core.status();
                s.state == SessionState::Idle || s.state == SessionState::Error
            })
            .filter(|w| !w.is_busy())
            .min_by_key(|w| w.core.status().last_active);
        let Some(victim) = victim else {
            return Err(ManagerError::AtCapacity(self.len()));
        };
        // Hold its start lock so no send slips in between the check and the
        // close (a send waiting on it then finds the workstream closed).
        let Ok(_starting) = victim.starting.try_lock() else {
            return Err(ManagerError::AtCapacity(self.len()));
        };
        if victim.is_busy() {
            return Err(ManagerError::AtCapacity(self.len()));
        }
        self.unload(&victim.core.ws_id, "evicted").await;
        self.metrics.evicted();
        Ok(())
    }

    /// Creates (or forks) a workstream and loads it.
    pub async fn create(
        &self,
        user_id: Option<&str>,
        opts: CreateOptions,
    ) -> Result<(Arc<Workstream>, bool, usize), ManagerError> {
        let reg = self.deps.models.snapshot();
        let alias = opts.model.clone().unwrap_or_else(|| reg.default.clone());
        if reg.alias(&alias).is_none() {
            return Err(ManagerError::ModelNotLoaded(alias));
        }
        if let Some(id) = &opts.ws_id
            && (id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return Err(ManagerError::Invalid(
                "ws_id must be 32 hex characters".into(),
            ));
        }
        if let Some(src) = &opts.resume_ws {
            let w = self
                .deps
                .db
                .get_workstream(src)
                .await?
                .ok_or(ManagerError::NotFound)?;
            if user_id.is_some() && w.user_id.as_deref() != user_id {
                return Err(ManagerError::NotFound);
            }
        }
        // A skill is checked before anything is created: unknown, or missing
        // an argument, is a bad request.
        let skill = match &opts.skill {
            Some(name) => {
                let lib = self.deps.skills.as_ref().ok_or_else(|| {
                    ManagerError::UnknownSkill(format!(
                        "no skill named {name:?} (no skills are configured on this server)"
                    ))
                })?;
                let vars = std::collections::BTreeMap::from([("model", alias.clone())]);
                let active = turnstone_engine::session::ActiveSkill::render(
                    lib,
                    name,
                    &Default::default(),
                    &vars,
                )
                .await
                .map_err(|e| match e {
                    turnstone_engine::session::SkillRenderError::Unknown(m) => {
                        ManagerError::UnknownSkill(m)
                    }
                    other => ManagerError::Invalid(other.to_string()),
                })?;
                Some(active)
            }
            None => None,
        };
        let _guard = self.create_lock.lock().await;
        let ws_id_hint = opts.ws_id.clone().map(|s| s.to_ascii_lowercase());
        if let Some(id) = &ws_id_hint {
            let holder = match self.get(id) {
                Some(w) => Some(w.core.user_id.clone()),
                None => self.deps.db.get_workstream(id).await?.map(|r| r.user_id),
            };
            match holder {
                None => {}
                // Someone else's id answers like every route does for a
                // workstream the caller cannot see: not found.
                Some(owner) if user_id.is_some() && owner.as_deref() != user_id => {
                    return Err(ManagerError::NotFound);
                }
                Some(_) => return Err(ManagerError::Exists(id.clone())),
            }
        }
        self.make_room().await?;
        let name = opts
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| format!("ws-{}", self.len() + 1));
        let new = NewWorkstream {
            ws_id: ws_id_hint,
            node_id: Some(self.deps.node_id.clone()),
            user_id: user_id.map(String::from),
            name: name.clone(),
            ..Default::default()
        };
        let r = self.deps.db.create_workstream(&new).await?;
        let mut copied = 0;
        if let Some(src) = &opts.resume_ws {
            match self.deps.db.fork_workstream(src, &r).await {
                Ok(n) => copied = n,
                Err(e) => {
                    let _ = self.deps.db.discard_workstream(&r).await;
                    return Err(e.into());
                }
            }
        }
        if opts.model.is_some() {
            self.deps
                .db
                .set_config(
                    &r.ws_id,
                    turnstone_engine::session::MODEL_ALIAS_KEY,
                    Some(&alias),
                )
                .await?;
        }
        if let Some(active) = &skill {
            active.persist(&self.deps.db, &r.ws_id).await;
        }
        self.deps.db.publish_workstream(&r).await?;
        let resumed = opts.resume_ws.is_some();
        let ws = match self
            .load(
                &r.ws_id,
                user_id,
                &name,
                &alias,
                opts.auto_approve,
                0,
                // A new workstream with a skill loads its config like a resume.
                resumed || skill.is_some(),
                new.project_id.clone(),
            )
            .await
        {
            Ok(ws) => ws,
            Err(e) => {
                let _ = self.deps.db.delete_workstream(&r.ws_id).await;
                return Err(e);
            }
        };
        self.global.publish(
            user_id,
            &GlobalEvent::WsCreated(WsCreated {
                ws_id: r.ws_id.clone(),
                name: name.clone(),
                model: ws.core.model.1.clone(),
                model_alias: alias.clone(),
                kind: "interactive".into(),
                parent_ws_id: None,
                user_id: user_id.map(String::from),
                project_id: new.project_id.clone(),
                persona: None,
            }),
        );
        Ok((ws, resumed, copied))
    }

    #[allow(clippy::too_many_arguments)]
    async fn load(
        &self,
        ws_id: &str,
        user_id: Option<&str>,
        name: &str,
        alias: &str,
        auto_approve: bool,
        seed: u64,
        resume: bool,
        project_id: Option<String>,
    ) -> Result<Arc<Workstream>, ManagerError> {
        let reg = self.deps.models.snapshot();
        let a = reg
            .alias(alias)
            .ok_or_else(|| ManagerError::ModelNotLoaded(alias.to_string()))?;
        let skip = self.deps.skip_permissions || auto_approve;
        let core = Arc::new(Core::new(
            ws_id.to_string(),
            user_id.map(String::from),
            name.to_string(),
            (alias.to_string(), a.config.model.clone()),
            // Until the first model call resolves it: configured, else what
            // the server said to an earlier workstream of this alias.
            a.config
                .context_window
                .or_else(|| a.served.get().copied().flatten())
                .unwrap_or(turnstone_engine::session::DEFAULT_CONTEXT_WINDOW),
            skip,
            self.limits.event_ring,
            seed,
            self.global.clone(),
            self.metrics.clone(),
        ));
        let (sink, events) = EventSink::channel();
        let sink = match &self.deps.event_log {
            Some(log) => log.tap(sink, Some(ws_id.to_string())),
            None => sink,
        };
        let (binding, fallbacks) = self
            .deps
            .models
            .bindings(Some(alias))
            .map_err(|e| ManagerError::Session(e.to_string()))?;
        let cfg = SessionConfig {
            skip_permissions: skip,
            tool_truncation: self.deps.tool_truncation,
            acting_user_id: user_id.map(String::from),
            tool_search: self.deps.tool_search,
            ..SessionConfig::new(ws_id, self.deps.workspace.clone())
        };
        let session = ChatSession::new(binding, self.deps.registry.clone(), sink, cfg);
        let session = match &self.deps.mcp {
            Some(hub) => session.with_mcp(hub.clone()),
            None => session,
        };
        let session = session
            .with_fallbacks(fallbacks)
            .with_live_models(self.deps.models.clone(), Some(alias.to_string()))
            .with_storage(self.deps.db.clone(), ws_id)
            .with_project(project_id)
            .with_safety(self.deps.safety.clone())
            .with_agent(turnstone_engine::session::AgentContext {
                skills: self.deps.skills.clone(),
                model_alias: Some(alias.to_string()),
                local: false,
                task_budget: self.deps.task_budget,
                watch_wake: self.deps.watch_wake.clone(),
                notify_after: self.deps.notify_after,
                // Served at their URL to the browser's pane.
                preview_dir: None,
                channels: self.deps.channels.clone(),
            });
        let session = if self.deps.titles.enabled {
            let binding = self.deps.titles.model.as_deref().and_then(|m| {
                self.deps
                    .models
                    .bindings(Some(m))
                    .map_err(|e| {
                        tracing::warn!(
                            "[titles] model {m:?}: {e}; titles use the workstream's model"
                        )
                    })
                    .ok()
                    .map(|(b, _)| b)
            });
            session.with_titles(binding)
        } else {
            session
        };
        let session = if resume {
            session
                .resume()
                .await
                .map_err(|e| ManagerError::Session(e.to_string()))?
        } else {
            session
        };
        let ws = Workstream::start(core, session, events);
        self.write().insert(ws_id.to_string(), ws.clone());
        self.metrics.aggregate_touched();
        Ok(ws)
    }

    /// Loads a saved workstream (`POST …/open`); already loaded → itself.
    pub async fn open(
        &self,
        ws_id: &str,
        user_id: Option<&str>,
    ) -> Result<Arc<Workstream>, ManagerError> {
        if let Some(w) = self.get(ws_id) {
            return Ok(w);
        }
        let row = self
            .deps
            .db
            .get_workstream(ws_id)
            .await?
            .ok_or(ManagerError::NotFound)?;
        if user_id.is_some() && row.user_id.as_deref() != user_id {
            return Err(ManagerError::NotFound);
        }
        let _guard = self.create_lock.lock().await;
        if let Some(w) = self.get(ws_id) {
            return Ok(w);
        }
        self.make_room().await?;
        let alias = self
            .deps
            .db
            .get_config(ws_id, turnstone_engine::session::MODEL_ALIAS_KEY)
            .await?
            .filter(|a| self.deps.models.snapshot().alias(a).is_some())
            .unwrap_or_else(|| self.deps.models.snapshot().default.clone());
        // Ids of a new incarnation start above any earlier one's, so a stale
        // Last-Event-ID is reported as truncated instead of matching new events.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64 * 1000)
            .unwrap_or(0);
        let ws = self
            .load(
                ws_id,
                row.user_id.as_deref(),
                &row.name,
                &alias,
                false,
                seed,
                true,
                row.project_id.clone(),
            )
            .await?;
        self.deps
            .db
            .set_workstream_state(ws_id, WorkstreamState::Idle)
            .await?;
        Ok(ws)
    }

    /// Unloads a workstream (it stays saved, state `closed`).
    pub async fn unload(&self, ws_id: &str, reason: &str) -> bool {
        let ws = self.write().remove(ws_id);
        self.metrics.aggregate_touched();
        let Some(ws) = ws else { return false };
        ws.close(reason).await;
        if let Err(e) = self
            .deps
            .db
            .set_workstream_state(ws_id, WorkstreamState::Closed)
            .await
        {
            tracing::warn!(ws_id, "could not mark the workstream closed: {e}");
        }
        true
    }

    /// Closes idle workstreams whose last activity is older than the timeout.
    pub async fn close_idle(&self, now: Instant) -> usize {
        let Some(timeout) = self.limits.idle_timeout else {
            return 0;
        };
        let stale: Vec<String> = self
            .all()
            .into_iter()
            .filter(|w| {
                let s = w.core.status();
                s.state == SessionState::Idle
                    && !w.is_busy()
                    && now.duration_since(s.last_active) >= timeout
            })
            .map(|w| w.core.ws_id.clone())
            .collect();
        let mut n = 0;
        for id in stale {
            if self.unload(&id, "idle").await {
                n += 1;
            }
        }
        n
    }

    /// Publishes `aggregate` on the global stream (service subscribers) when
    /// the node's totals changed, at most once a second, until `stop`. An idle
    /// node never wakes for it.
    pub async fn publish_aggregate(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let mut last = None;
        loop {
            // Asleep until something changes; then at most once a second.
            tokio::select! {
                () = stop.cancelled() => return,
                () = self.metrics.aggregate_change() => {}
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            let (tokens, tools) = self.metrics.totals();
            let all = self.all();
            let active = all.iter().filter(|w| w.is_busy()).count();
            let now = (tokens, tools, active, all.len());
            if last != Some(now) {
                last = Some(now);
                self.global.publish(
                    None,
                    &GlobalEvent::Aggregate(Aggregate {
                        total_tokens: tokens,
                        total_tool_calls: tools,
                        active_count: active,
                        total_count: all.len(),
                    }),
                );
            }
        }
    }

    /// Runs the idle reaper until `stop` (every timeout/4, at most 5 min).
    pub async fn reap_idle(self: Arc<Self>, stop: tokio_util::sync::CancellationToken) {
        let Some(timeout) = self.limits.idle_timeout else {
            return;
        };
        let every = (timeout / 4).clamp(Duration::from_millis(100), Duration::from_secs(300));
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            let n = self.close_idle(Instant::now()).await;
            if n > 0 {
                tracing::info!("closed {n} idle workstream(s)");
            }
        }
    }

    /// Graceful shutdown: lets running turns finish for up to `grace`, then
    /// cancels them; every workstream is closed (history is saved as it goes).
    pub async fn shutdown(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && self.all().iter().any(|w| w.is_busy()) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let ids: Vec<String> = self.all().iter().map(|w| w.core.ws_id.clone()).collect();
        for id in ids {
            self.unload(&id, "shutdown").await;
        }
    }
}
