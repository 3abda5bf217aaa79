//! One watch scheduler per node: it claims due watches in the database (so
//! two nodes never poll the same one), runs each command with the grants of
//! the plugin that created the watch, evaluates the stop condition, records
//! the poll, and hands a result to its workstream as a notice (which wakes
//! an idle one). Results survive a restart: they stay in the database until
//! delivered. It sleeps until the next watch is due (at most
//! [`MAX_IDLE`]), or until woken because one was created.

use super::info;
use futures::StreamExt;
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use turnstone_protocol::WatchInfo;
use turnstone_runtime::PluginSet;
use turnstone_storage::Storage;
use turnstone_storage::types::{PollRecord, Watch};
use turnstone_storage::util::format_ts;
use turnstone_watch::{Condition, Poll, trim_output};

/// Longest sleep between two looks at the database (new watches of other
/// nodes, lapsed claims).
pub const MAX_IDLE: Duration = Duration::from_secs(15);
/// Longest one poll's command may run.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(120);
/// Watches claimed per cycle.
const CLAIM_BATCH: i64 = 64;
/// Of a poll's output, the end shown in the result turn.
const RESULT_OUTPUT_CHARS: usize = 8 * 1024;

/// Where a scheduler's results go.
pub trait NoticeDelivery: Send + Sync {
    /// Delivers `content` to workstream `ws_id` as a notice (loading it if
    /// needed; it starts a turn when idle). `Ok(false)`: the workstream is
    /// gone and never will take it.
    fn deliver(
        &self,
        ws_id: String,
        content: String,
        meta: serde_json::Value,
    ) -> BoxFuture<'static, Result<bool, String>>;
    /// Shows a watch's new state to whoever watches the workstream live.
    fn changed(&self, ws_id: &str, watch: WatchInfo);
    /// The workstreams this node serves (`None`: every one in the database).
    fn scope(&self) -> Option<Vec<String>> {
        None
    }
}

/// Polls the watches of one node.
pub struct WatchScheduler {
    db: Storage,
    node: String,
    plugins: PluginSet,
    workspace: PathBuf,
    delivery: Arc<dyn NoticeDelivery>,
    wake: Arc<Notify>,
    concurrency: usize,
    stop: CancellationToken,
}

/// The end of `output`, at most [`RESULT_OUTPUT_CHARS`] characters.
fn tail(output: &str) -> String {
    let n = output.chars().count();
    if n <= RESULT_OUTPUT_CHARS {
        return output.to_string();
    }
    let skip = n - RESULT_OUTPUT_CHARS;
    format!("…{}", output.chars().skip(skip).collect::<String>())
}

/// What one poll found, and what becomes of the watch.
struct Outcome {
    record: PollRecord,
    ended: bool,
}

impl WatchScheduler {
    /// A scheduler for node `node`: watch commands run in `workspace` with
    /// the grants their plugin has in `plugins`; results go to `delivery`;
    /// `wake` (given to sessions) starts a cycle at once.
    pub fn new(
        db: Storage,
        node: impl Into<String>,
        plugins: PluginSet,
        workspace: PathBuf,
        delivery: Arc<dyn NoticeDelivery>,
        wake: Arc<Notify>,
    ) -> Self {
        Self {
            db,
            node: node.into(),
            plugins,
            workspace,
            delivery,
            wake,
            concurrency: 4,
            stop: CancellationToken::new(),
        }
    }

    /// Runs until `stop` is cancelled.
    pub fn spawn(mut self, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
        self.stop = stop;
        tokio::spawn(async move { self.run().await })
    }

    async fn run(&self) {
        loop {
            self.cycle().await;
            let due = match self
                .db
                .next_watch_due(self.delivery.scope().as_deref())
                .await
            {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!("watch scheduler: {e}");
                    None
                }
            };
            let wait = due
                .as_deref()
                .and_then(turnstone_storage::util::parse_ts)
                .map(|t| {
                    t.duration_since(SystemTime::now())
                        .unwrap_or(Duration::ZERO)
                })
                .unwrap_or(MAX_IDLE)
                .min(MAX_IDLE);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.wake.notified() => {}
                () = self.stop.cancelled() => return,
            }
        }
    }

    /// One pass: results not yet delivered are delivered, then the due
    /// watches are claimed and polled. Returns how many were polled.
    pub async fn cycle(&self) -> usize {
        self.cycle_at(SystemTime::now()).await
    }

    /// [`WatchScheduler::cycle`] as if it were `at` (tests and benches look
    /// ahead instead of waiting out poll intervals and leases).
    pub async fn cycle_at(&self, at: SystemTime) -> usize {
        self.deliver_pending().await;
        let scope = self.delivery.scope();
        let lease = POLL_TIMEOUT + Duration::from_secs(60);
        let due = match self
            .db
            .claim_due_watches(
                &self.node,
                &format_ts(at),
                &format_ts(at + lease),
                CLAIM_BATCH,
                scope.as_deref(),
            )
            .await
        {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("watch scheduler: claiming due watches failed: {e}");
                return 0;
            }
        };
        let polled = due.len();
        let ended: Vec<bool> = futures::stream::iter(due)
            .map(|w| self.poll_and_record(w, at))
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        if ended.iter().any(|e| *e) {
            self.deliver_pending().await;
        }
        polled
    }

    /// Polls `w`, records it; true when the watch ended.
    async fn poll_and_record(&self, w: Watch, at: SystemTime) -> bool {
        let outcome = self.poll(&w, at).await;
        match self
            .db
            .record_poll(&w.watch_id, &self.node, &outcome.record)
            .await
        {
            Ok(true) => {}
            // Cancelled meanwhile, or the claim lapsed and another node has it.
            Ok(false) => return false,
            Err(e) => {
                tracing::warn!(watch = %w.watch_id, "watch scheduler: recording a poll failed: {e}");
                return false;
            }
        }
        if let Ok(Some(now)) = self.db.get_watch(&w.watch_id).await {
            self.delivery.changed(&now.ws_id, info(&now));
        }
        outcome.ended
    }

    async fn poll(&self, w: &Watch, at: SystemTime) -> Outcome {
        let polls = u64::try_from(w.poll_count).unwrap_or(0) + 1;
        let interval = Duration::from_secs(u64::try_from(w.interval_secs).unwrap_or(300));
        let last_poll = polls >= u64::try_from(w.max_polls).unwrap_or(1);
        let plugin = self.plugins.snapshot().plugin(&w.plugin).cloned();
        let ran = match plugin {
            None => Err(format!(
                "plugin {:?}, whose grants the command runs with, is not loaded (disabled or removed)",
                w.plugin
            )),
            Some(p) => {
                let ws = self.workspace.to_string_lossy().into_owned();
                p.run_command(
                    "bash",
                    &["-c".to_string(), w.command.clone()],
                    Some(&ws),
                    POLL_TIMEOUT,
                    turnstone_watch::MAX_OUTPUT_BYTES,
                    Some(&self.stop),
                )
                .await
            }
        };
        let (output, exit_code, mut error) = match ran {
            Ok(o) if o.timed_out => (
                o.output,
                -1,
                Some(format!(
                    "the command ran over {} s and was stopped",
                    POLL_TIMEOUT.as_secs()
                )),
            ),
            Ok(o) => (o.output, i64::from(o.exit_code), None),
            Err(e) => (String::new(), -1, Some(e)),
        };
        let output = trim_output(&output).to_string();
        let poll = Poll {
            output: output.clone(),
            exit_code,
            prev_output: w.last_output.clone(),
            polls,
        };
        let held = if error.is_some() {
            false
        } else {
            match w.condition.as_deref().map(Condition::parse) {
                Some(Ok(c)) => c.holds(&poll).unwrap_or_else(|e| {
                    error = Some(format!("stop_on: {e}"));
                    false
                }),
                Some(Err(e)) => {
                    error = Some(format!("stop_on: {e}"));
                    false
                }
                // No condition: stop when the output changes.
                None => poll.prev_output.as_ref().is_some_and(|p| *p != poll.output),
            }
        };
        let why = match &w.condition {
            Some(c) => format!("stop_on `{c}` held"),
            None => "its output changed".to_string(),
        };
        let (state, result) = if held {
            (
                "fired",
                Some(format!(
                    "Watch \"{}\" fired after {polls} poll(s): {why}.\n\nCommand: `{}` (exit code {exit_code})\n\nOutput:\n```\n{}\n```",
                    w.name,
                    w.command,
                    tail(&output)
                )),
            )
        } else if last_poll {
            let not = match &w.condition {
                Some(c) => format!("stop_on `{c}` holding"),
                None => "its output changing".to_string(),
            };
            (
                "expired",
                Some(format!(
                    "Watch \"{}\" stopped after {polls} poll(s) (its max_polls) without {not}.{}\n\nLast command output (exit code {exit_code}):\n```\n{}\n```",
                    w.name,
                    error
                        .as_ref()
                        .map(|e| format!(" Last error: {e}."))
                        .unwrap_or_default(),
                    tail(&output)
                )),
            )
        } else {
            ("active", None)
        };
        Outcome {
            ended: state != "active",
            record: PollRecord {
                output,
                exit_code,
                error,
                state: state.into(),
                next_poll: (state == "active").then(|| format_ts(at + interval)),
                result,
            },
        }
    }

    /// Hands every ended watch's result to its workstream; a failed
    /// delivery is tried again next cycle.
    async fn deliver_pending(&self) {
        let pending = match self
            .db
            .undelivered_watches(self.delivery.scope().as_deref())
            .await
        {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!("watch scheduler: reading results failed: {e}");
                return;
            }
        };
        for w in pending {
            let Some(content) = w.result.clone() else {
                let _ = self.db.mark_watch_delivered(&w.watch_id).await;
                continue;
            };
            let meta = serde_json::json!({
                "watch_id": w.watch_id,
                "name": w.name,
                "state": w.state,
                "polls": w.poll_count,
                "exit_code": w.last_exit_code,
            });
            // Marked first: of two nodes seeing it, one delivers it.
            match self.db.mark_watch_delivered(&w.watch_id).await {
                Ok(true) => {}
                Ok(false) => continue,
                Err(e) => {
                    tracing::warn!(watch = %w.watch_id, "watch scheduler: {e}");
                    continue;
                }
            }
            if let Err(e) = self.delivery.deliver(w.ws_id.clone(), content, meta).await {
                tracing::info!(watch = %w.watch_id, "watch result not delivered yet: {e}");
                let _ = self.db.unmark_watch_delivered(&w.watch_id).await;
            }
        }
    }
}
