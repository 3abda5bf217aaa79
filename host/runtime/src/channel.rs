//! Running a channel adapter (`channel@0.2.0`): one long-lived instance
//! serves the platform, and the host talks to it through a [`ChannelLink`]:
//! commands go in a queue the adapter drains in `channel-host.wait`, answers
//! come back through `complete`, inbound messages and button presses go to
//! a [`ChannelSink`]. The link outlives an adapter instance, so commands
//! queued while the adapter restarts are served by the next instance.

use crate::bindings::v0_2_0::channel::turnstone::plugin0_2_0::channel_types as wit;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use wit::{
    ApprovalAction, ApprovalPrompt, Attachment, ChannelInfo, Command, CommandResult, Conversation,
    Decision, Edit, Inbound, InboundMessage, LinkState, Post, Posted, SettlePrompt, WebhookRequest,
    WebhookResponse,
};

/// Commands waiting for an adapter (beyond this, senders wait).
const QUEUE: usize = 256;

/// Receives what a running adapter reports.
pub trait ChannelSink: Send + Sync {
    /// An inbound message or button press.
    fn inbound(&self, event: Inbound);
    /// The platform link's state changed.
    fn state(&self, state: LinkState, detail: &str);
}

/// Why a command did not get an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChannelError {
    /// The adapter answered with an error.
    #[error("{0}")]
    Failed(String),
    /// No answer in time.
    #[error("the channel adapter did not answer within {0:?}")]
    Timeout(Duration),
    /// The adapter stopped or restarted before answering.
    #[error("the channel adapter stopped before answering")]
    Gone,
}

/// The host's side of one channel plugin, shared by its instances.
pub struct ChannelLink {
    sink: Arc<dyn ChannelSink>,
    tx: mpsc::Sender<(u64, Command)>,
    pub(crate) rx: tokio::sync::Mutex<mpsc::Receiver<(u64, Command)>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<CommandResult, String>>>>,
    next_id: AtomicU64,
    stop: Mutex<CancellationToken>,
}

impl ChannelLink {
    /// A link delivering to `sink`.
    pub fn new(sink: Arc<dyn ChannelSink>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(QUEUE);
        Arc::new(Self {
            sink,
            tx,
            rx: tokio::sync::Mutex::new(rx),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            stop: Mutex::new(CancellationToken::new()),
        })
    }

    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<CommandResult, String>>>>
    {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands `command` to the adapter and waits up to `timeout` for its answer.
    pub async fn command(
        &self,
        command: Command,
        timeout: Duration,
    ) -> Result<CommandResult, ChannelError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id, tx);
        let sent = tokio::time::timeout(timeout, self.tx.send((id, command))).await;
        if !matches!(sent, Ok(Ok(()))) {
            self.pending().remove(&id);
            return Err(ChannelError::Timeout(timeout));
        }
        match tokio::time::timeout(timeout, rx).await {
            Err(_) => {
                self.pending().remove(&id);
                Err(ChannelError::Timeout(timeout))
            }
            Ok(Err(_)) => Err(ChannelError::Gone),
            Ok(Ok(Ok(r))) => Ok(r),
            Ok(Ok(Err(e))) => Err(ChannelError::Failed(e)),
        }
    }

    /// The token the current instance stops on.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Asks the running instance to stop (its `wait` returns `stop`).
    pub fn stop(&self) {
        self.stop_token().cancel();
    }

    /// Arms a fresh stop token for the next instance, cancelled with
    /// `parent` too (so a supervisor's shutdown can never be lost between
    /// two instances).
    pub fn rearm(&self, parent: &CancellationToken) {
        *self.stop.lock().unwrap_or_else(|p| p.into_inner()) = parent.child_token();
    }

    pub(crate) fn complete(&self, id: u64, outcome: Result<CommandResult, String>) {
        if let Some(tx) = self.pending().remove(&id) {
            let _ = tx.send(outcome);
        }
    }

    /// Forgets the commands taken by the instance that just ended, so their
    /// callers learn at once instead of timing out.
    pub(crate) fn drop_taken(&self, taken: &[u64]) {
        let mut p = self.pending();
        for id in taken {
            p.remove(id);
        }
    }

    pub(crate) fn sink(&self) -> &Arc<dyn ChannelSink> {
        &self.sink
    }
}

/// Busy-time accounting for a long-lived instance: the guest may compute for
/// at most the call timeout between two host waits.
#[derive(Debug, Default)]
pub(crate) struct Slice {
    /// Milliseconds since `base` when the guest last left a wait;
    /// `u64::MAX` while it is parked in one.
    pub(crate) started_ms: AtomicU64,
}

impl Slice {
    pub(crate) fn park(&self) {
        self.started_ms.store(u64::MAX, Ordering::Relaxed);
    }

    pub(crate) fn resume(&self, now_ms: u64) {
        self.started_ms.store(now_ms, Ordering::Relaxed);
    }
}

/// What one running instance keeps: its link, its stop token, the commands
/// it took and its busy-time slice.
pub(crate) struct RunState {
    pub(crate) link: Arc<ChannelLink>,
    pub(crate) stop: CancellationToken,
    pub(crate) taken: std::collections::HashSet<u64>,
    pub(crate) slice: Arc<Slice>,
    pub(crate) base: std::time::Instant,
}

impl crate::plugin::LoadedPlugin {
    fn channel_v2_pre(
        &self,
    ) -> Result<
        &crate::bindings::v0_2_0::channel::ChannelPluginPre<crate::state::HostState>,
        crate::error::CallError,
    > {
        match &self.pre {
            crate::plugin::InstancePre::ChannelV2(p) => Ok(p),
            _ => Err(crate::error::CallError::Host {
                plugin: self.name().to_string(),
                message: "not a channel@0.2.0 component".into(),
            }),
        }
    }

    /// Whether this plugin is a channel adapter the host can run.
    pub fn is_channel_adapter(&self) -> bool {
        matches!(self.pre, crate::plugin::InstancePre::ChannelV2(_))
    }

    /// The adapter's platform facts (one short call).
    pub async fn channel_info(&self) -> Result<ChannelInfo, crate::error::CallError> {
        let pre = self.channel_v2_pre()?;
        self.run(Arc::new(crate::state::NullSink), None, async |store| {
            let inst = pre.instantiate_async(&mut *store).await?;
            inst.turnstone_plugin0_2_0_channel()
                .call_info(&mut *store)
                .await
        })
        .await
    }

    /// Runs the adapter until it returns, traps, overruns its memory, computes
    /// for longer than the call timeout between two waits, or is stopped
    /// through `link` (then it gets `grace` to return before it is dropped).
    /// Commands it took but did not answer fail with [`ChannelError::Gone`].
    pub async fn channel_serve(
        &self,
        link: Arc<ChannelLink>,
        grace: Duration,
    ) -> Result<Result<(), String>, crate::error::CallError> {
        use wasmtime::UpdateDeadline;
        let pre = self.channel_v2_pre()?.clone();
        self.ctx.counters.call();
        // An adapter holds its instance for as long as it runs; stopping it
        // while it waits for one ends the wait, and it never starts.
        let stopped = link.stop_token();
        let _slot = tokio::select! {
            s = self.slots.admit() => s.map_err(|waited| {
                let e = self.at_capacity(waited);
                self.ctx.counters.failure();
                tracing::warn!(plugin = %self.name(), "{e}");
                e
            })?,
            () = stopped.cancelled() => return Ok(Ok(())),
        };
        let _active = self.epoch.enter();
        let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut store = self.new_store(Arc::new(crate::state::NullSink), cancelled.clone())?;
        let stop = link.stop_token();
        let slice = Arc::new(Slice::default());
        let base = std::time::Instant::now();
        slice.resume(0);
        let budget = self.ctx.limits.call_timeout.as_millis() as u64;
        let ticks = slice.clone();
        store.epoch_deadline_callback(move |_| {
            let started = ticks.started_ms.load(Ordering::Relaxed);
            let now = base.elapsed().as_millis() as u64;
            if started != u64::MAX && now.saturating_sub(started) > budget {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.data_mut().channel_run = Some(RunState {
            link: link.clone(),
            stop: stop.clone(),
            taken: Default::default(),
            slice,
            base,
        });
        let mut run = Box::pin(crate::admission::InstanceSlots::in_call(async {
            let inst = pre.instantiate_async(&mut store).await?;
            inst.turnstone_plugin0_2_0_channel()
                .call_run(&mut store)
                .await
        }));
        let outcome = tokio::select! {
            r = &mut run => Some(r),
            () = async {
                stop.cancelled().await;
                tokio::time::sleep(grace).await;
            } => None,
        };
        drop(run);
        store.data().limiter.publish();
        let taken: Vec<u64> = store
            .data()
            .channel_run
            .as_ref()
            .map(|r| r.taken.iter().copied().collect())
            .unwrap_or_default();
        link.drop_taken(&taken);
        let result = match outcome {
            None => {
                cancelled.store(true, Ordering::Relaxed);
                Ok(Ok(()))
            }
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(self.classify(e, &store)),
        };
        if let Err(e) = &result {
            self.ctx.counters.failure();
            tracing::warn!(plugin = %self.name(), "{e}");
        }
        result
    }
}
