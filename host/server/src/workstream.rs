//! One loaded workstream: its session worker, its event hub and the bridge
//! ([`WebUi`]) that turns engine callbacks into the wire contract's SSE events.

use crate::events::EventHub;
use crate::global::GlobalHub;
use crate::metrics::Metrics;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use turnstone_engine::session::{CancelHandle, ChatSession, MessageQueue, SessionError};
use turnstone_engine::ui::{Approval, PendingTool, SessionState, SessionUi};

/// Content tokens are batched for this long (the original's window).
const CONTENT_BATCH: Duration = Duration::from_millis(25);
/// And at most this many characters per event.
const CONTENT_BATCH_MAX: usize = 4096;

/// The wire name of a state.
pub fn state_name(s: SessionState) -> &'static str {
    match s {
        SessionState::Idle => "idle",
        SessionState::Thinking => "thinking",
        SessionState::Running => "running",
        SessionState::Attention => "attention",
        SessionState::Error => "error",
    }
}

/// A random 32-hex id (cycle ids, handoff tokens).
pub fn random_hex() -> String {
    let mut b = [0u8; 16];
    // The OS RNG failing is not recoverable in any useful way; fall back to
    // time-derived bytes rather than abort the request.
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b = t.to_le_bytes();
    }
    hex::encode(b)
}

/// An approval cycle waiting for a client.
struct Cycle {
    cycle_id: String,
    call_ids: Vec<String>,
    event: Value,
    reply: oneshot::Sender<Approval>,
}

/// Live, frequently changing facts about a workstream.
#[derive(Debug, Clone)]
pub struct Status {
    /// Engine state.
    pub state: SessionState,
    /// Last activity (for idle close and eviction).
    pub last_active: Instant,
    /// Latest prompt tokens.
    pub prompt_tokens: u32,
    /// Latest completion tokens.
    pub completion_tokens: u32,
    /// Tokens over the workstream's life.
    pub total_tokens: u64,
    /// Context window of the model in use.
    pub context_window: u32,
    /// Tool calls in the running (or last) turn.
    pub tool_calls_this_turn: u32,
    /// Turns run.
    pub turn_count: u32,
    /// Reply text of the current model segment.
    pub content: String,
    /// Reasoning text of the current model segment.
    pub reasoning: String,
    /// A model stream is in flight.
    pub streaming: bool,
    /// Activity line for dashboards.
    pub activity: String,
    /// Activity kind: thinking / approval / "".
    pub activity_state: &'static str,
}

/// Pending content awaiting its batch window.
#[derive(Default)]
struct Batch {
    text: String,
    since: Option<Instant>,
}

/// Everything the HTTP handlers and the [`WebUi`] share about a workstream.
pub struct Core {
    /// Id (32 hex).
    pub ws_id: String,
    /// Owner.
    pub user_id: Option<String>,
    /// Kind (`interactive`).
    pub kind: String,
    /// Display name.
    pub name: Mutex<String>,
    /// Model alias and model id.
    pub model: (String, String),
    /// Whether approvals are skipped.
    pub skip_permissions: bool,
    /// Numbered events for the per-workstream stream.
    pub hub: EventHub,
    global: Arc<GlobalHub>,
    metrics: Arc<Metrics>,
    status: Mutex<Status>,
    cycles: Mutex<VecDeque<Cycle>>,
    batch: Mutex<Batch>,
    /// A turn holds the worker (guards the send/queue hand-off).
    busy: Mutex<bool>,
    /// One-shot `/history` hand-off tokens → event cursor.
    handoffs: Mutex<HashMap<String, u64>>,
    /// Closed: no more sends.
    closed: std::sync::atomic::AtomicBool,
    /// Cancelled on close: wakes the worker (no polling).
    closing: tokio_util::sync::CancellationToken,
    /// Queued messages by `msg_id` (for `DELETE …/send`).
    queued_ids: Mutex<HashMap<String, String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Core {
    /// A fresh core.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        ws_id: String,
        user_id: Option<String>,
        name: String,
        model: (String, String),
        context_window: u32,
        skip_permissions: bool,
        ring: usize,
        seed: u64,
        global: Arc<GlobalHub>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            ws_id,
            user_id,
            kind: "interactive".into(),
            name: Mutex::new(name),
            model,
            skip_permissions,
            hub: EventHub::new(ring, seed),
            global,
            metrics,
            status: Mutex::new(Status {
                state: SessionState::Idle,
                last_active: Instant::now(),
                prompt_tokens: 0,
                completion_tokens: 0,
                total_tokens: 0,
                context_window,
                tool_calls_this_turn: 0,
                turn_count: 0,
                content: String::new(),
                reasoning: String::new(),
                streaming: false,
                activity: String::new(),
                activity_state: "",
            }),
            cycles: Mutex::new(VecDeque::new()),
            batch: Mutex::new(Batch::default()),
            busy: Mutex::new(false),
            handoffs: Mutex::new(HashMap::new()),
            closed: Default::default(),
            closing: Default::default(),
            queued_ids: Mutex::new(HashMap::new()),
        }
    }

    /// A copy of the live status.
    pub fn status(&self) -> Status {
        lock(&self.status).clone()
    }

    /// The display name.
    pub fn name(&self) -> String {
        lock(&self.name).clone()
    }

    /// Whether a turn holds the worker.
    pub fn is_busy(&self) -> bool {
        *lock(&self.busy)
    }

    /// Whether the workstream was closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    fn touch(&self) {
        lock(&self.status).last_active = Instant::now();
    }

    /// Publishes a per-workstream event (`type` and `ws_id` added).
    pub fn emit(&self, kind: &str, fields: Value) -> u64 {
        self.flush_content();
        self.emit_raw(kind, fields)
    }

    fn emit_raw(&self, kind: &str, fields: Value) -> u64 {
        let mut obj = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        obj.insert("type".into(), kind.into());
        obj.insert("ws_id".into(), self.ws_id.clone().into());
        self.hub.publish(&Value::Object(obj))
    }

    /// Sends batched content now.
    pub fn flush_content(&self) {
        let text = {
            let mut b = lock(&self.batch);
            b.since = None;
            std::mem::take(&mut b.text)
        };
        if !text.is_empty() {
            self.emit_raw("content", json!({"text": text}));
        }
    }

    /// Publishes on the global stream, tagged with this workstream and owner.
    pub fn emit_global(&self, kind: &str, fields: Value) {
        let mut obj = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        obj.insert("type".into(), kind.into());
        obj.insert("ws_id".into(), self.ws_id.clone().into());
        self.global
            .publish(self.user_id.as_deref(), &Value::Object(obj));
    }

    /// The `ws_state` event body (per-stream turn end and global stream).
    pub fn ws_state_fields(&self, with_content: bool) -> Value {
        let s = self.status();
        let mut v = json!({
            "state": state_name(s.state),
            "tokens": s.total_tokens,
            "context_ratio": ratio(s.prompt_tokens, s.context_window),
            "activity": s.activity,
            "activity_state": s.activity_state,
            "kind": self.kind,
            "parent_ws_id": null,
            "persistence_state": "persisted",
            "name": self.name(),
        });
        if with_content {
            v["content"] = s.content.into();
        }
        v
    }

    /// Records a new display name and tells both streams.
    pub fn rename(&self, name: &str) {
        *lock(&self.name) = name.to_string();
        self.emit_global("ws_rename", json!({"name": name}));
    }

    /// Claims the worker for a new turn; false when one is running.
    pub fn try_claim(&self) -> bool {
        let mut b = lock(&self.busy);
        if *b {
            return false;
        }
        *b = true;
        self.touch();
        self.metrics.aggregate_touched();
        true
    }

    /// Under the busy lock: either claims the worker or queues `text`.
    pub fn claim_or_queue(&self, queue: &MessageQueue, text: &str) -> SendOutcome {
        let mut b = lock(&self.busy);
        self.touch();
        if !*b {
            *b = true;
            self.metrics.aggregate_touched();
            return SendOutcome::Start;
        }
        match queue.push(text) {
            Ok(()) => SendOutcome::Queued(queue.len()),
            Err(_) => SendOutcome::Full,
        }
    }

    /// Called by the worker after a turn: the next queued message, or the
    /// worker is released (atomically with respect to [`Self::claim_or_queue`]).
    fn next_or_release(&self, queue: &MessageQueue) -> Option<String> {
        let mut b = lock(&self.busy);
        match queue.remove(0) {
            Some(m) => Some(m),
            None => {
                *b = false;
                self.metrics.aggregate_touched();
                None
            }
        }
    }

    /// Releases a claim that did not start a turn.
    pub fn release(&self) {
        *lock(&self.busy) = false;
        self.metrics.aggregate_touched();
    }

    /// Pending approval cards (for the connect preamble and details).
    pub fn pending_cycles(&self) -> Vec<Value> {
        lock(&self.cycles).iter().map(|c| c.event.clone()).collect()
    }

    /// Resolves a cycle: by id, by one of its call ids, else the oldest.
    /// Returns the resolved cycle id, or `None` when nothing was pending.
    pub fn resolve(
        &self,
        cycle_id: Option<&str>,
        call_id: Option<&str>,
        answer: Approval,
    ) -> Result<Option<String>, String> {
        let cycle = {
            let mut cycles = lock(&self.cycles);
            let pos = match (cycle_id, call_id) {
                (Some(id), _) => cycles.iter().position(|c| c.cycle_id == id),
                (None, Some(call)) => cycles
                    .iter()
                    .position(|c| c.call_ids.iter().any(|x| x == call)),
                (None, None) => (!cycles.is_empty()).then_some(0),
            };
            match pos {
                Some(p) => cycles.remove(p),
                None if cycle_id.is_some() || call_id.is_some() => {
                    return Err("no pending approval matches that cycle_id or call_id".into());
                }
                None => return Ok(None),
            }
        };
        let Some(cycle) = cycle else { return Ok(None) };
        let fields = json!({
            "approved": answer.approved,
            "feedback": answer.feedback,
            "always": answer.always,
            "cycle_id": cycle.cycle_id,
            "call_ids": cycle.call_ids,
        });
        self.emit("approval_resolved", fields.clone());
        self.emit_global("approval_resolved", fields);
        let id = cycle.cycle_id.clone();
        // The session may have been cancelled meanwhile; then nobody listens.
        let _ = cycle.reply.send(answer);
        Ok(Some(id))
    }

    /// A one-shot token that resumes the stream right after `/history`.
    pub fn handoff(&self) -> String {
        let token = random_hex();
        let cursor = self.hub.next_id().saturating_sub(1);
        let mut h = lock(&self.handoffs);
        // Unused tokens must not pile up.
        if h.len() > 64 {
            h.clear();
        }
        h.insert(token.clone(), cursor);
        token
    }

    /// Remembers which text a queued `msg_id` stands for.
    pub fn remember_queued(&self, msg_id: &str, text: &str) {
        let mut q = lock(&self.queued_ids);
        if q.len() > 256 {
            q.clear();
        }
        q.insert(msg_id.to_string(), text.to_string());
    }

    /// Forgets a queued `msg_id`, returning its text.
    pub fn forget_queued(&self, msg_id: &str) -> Option<String> {
        lock(&self.queued_ids).remove(msg_id)
    }

    /// Redeems a hand-off token (once).
    pub fn redeem(&self, token: &str) -> Option<u64> {
        lock(&self.handoffs).remove(token)
    }

    fn set_activity(&self, activity: String, kind: &'static str) {
        {
            let mut s = lock(&self.status);
            s.activity = activity.clone();
            s.activity_state = kind;
        }
        self.emit_global(
            "ws_activity",
            json!({"activity": activity, "activity_state": kind}),
        );
    }
}

fn ratio(prompt: u32, window: u32) -> f64 {
    if window == 0 {
        0.0
    } else {
        f64::from(prompt) / f64::from(window)
    }
}

/// What `send` did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// The caller starts a turn.
    Start,
    /// Queued at this position.
    Queued(usize),
    /// The queue is full.
    Full,
}

/// A job for the worker that owns the session.
pub enum Job {
    /// Run a turn (text, extra parts such as images).
    Send(String, Vec<turnstone_engine::ContentPart>),
    /// Drop the last `n` user turns.
    Rewind(usize, oneshot::Sender<Result<String, String>>),
    /// Re-run the last user message.
    Retry(oneshot::Sender<Result<(), String>>),
    /// Clear the conversation.
    Clear(oneshot::Sender<()>),
    /// Compact now.
    Compact(oneshot::Sender<Result<(), String>>),
}

/// A loaded workstream: its core and the channels to its worker.
pub struct Workstream {
    /// Shared state.
    pub core: Arc<Core>,
    /// Messages waiting for the tool-result seam.
    pub queue: MessageQueue,
    /// Cancels the running turn.
    pub cancel: CancelHandle,
    jobs: mpsc::Sender<Job>,
    worker: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Workstream {
    /// Starts the worker owning `session`.
    pub fn start(core: Arc<Core>, session: ChatSession) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(16);
        let queue = session.queue();
        let cancel = session.cancel_handle();
        let handle = tokio::spawn(worker(core.clone(), session, rx));
        Arc::new(Self {
            core,
            queue,
            cancel,
            jobs: tx,
            worker: Mutex::new(Some(handle)),
        })
    }

    /// Hands a job to the worker.
    pub async fn submit(&self, job: Job) -> Result<(), String> {
        self.jobs
            .send(job)
            .await
            .map_err(|_| "the workstream's worker has stopped".to_string())
    }

    /// Closes: cancels any turn, denies pending approvals, tells clients, and
    /// waits (bounded) for the worker to finish saving.
    pub async fn close(&self, reason: &str) {
        if self
            .core
            .closed
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return;
        }
        self.cancel.cancel();
        self.core.closing.cancel();
        lock(&self.core.cycles).clear();
        self.core.emit("ws_closed", json!({"reason": reason}));
        self.core.emit_global(
            "ws_closed",
            json!({"reason": reason, "name": self.core.name()}),
        );
        let handle = lock(&self.worker).take();
        if let Some(h) = handle {
            // Dropping the job sender ends the worker once the turn stops.
            let abort = h.abort_handle();
            if tokio::time::timeout(Duration::from_secs(10), h)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for Workstream {
    fn drop(&mut self) {
        if let Some(h) = lock(&self.worker).take() {
            h.abort();
        }
    }
}

async fn worker(core: Arc<Core>, mut session: ChatSession, mut rx: mpsc::Receiver<Job>) {
    let queue = session.queue();
    loop {
        let job = tokio::select! {
            j = rx.recv() => j,
            // Closing cancels the turn and then stops the worker even though
            // the job sender lives on in the manager.
            () = core.closing.cancelled() => None,
        };
        let Some(job) = job else { break };
        match job {
            Job::Send(first, images) => {
                let mut next = Some((first, images));
                while let Some((text, images)) = next.take() {
                    if core.is_closed() {
                        break;
                    }
                    lock(&core.status).tool_calls_this_turn = 0;
                    let r = session.send_with(&text, images).await;
                    core.turn_finished(&r);
                    next = core.next_or_release(&queue).map(|m| (m, Vec::new()));
                    if let Some((m, _)) = &next {
                        core.emit_user_turn(m, None, &[]);
                    }
                }
            }
            Job::Rewind(n, reply) => {
                let r = session.rewind(n).await.map_err(|e| e.to_string());
                if r.is_ok() {
                    core.emit("clear_ui", json!({"reason": "rewind"}));
                }
                core.release();
                let _ = reply.send(r);
            }
            Job::Retry(reply) => {
                core.emit("clear_ui", json!({"reason": "retry"}));
                let _ = reply.send(Ok(()));
                lock(&core.status).tool_calls_this_turn = 0;
                let r = session.retry().await;
                core.turn_finished(&r);
                core.release();
            }
            Job::Clear(reply) => {
                session.clear();
                core.emit("clear_ui", json!({"reason": "clear"}));
                core.release();
                let _ = reply.send(());
            }
            Job::Compact(reply) => {
                let r = session.compact().await.map_err(|e| e.to_string());
                core.release();
                let _ = reply.send(r);
            }
        }
    }
    core.release();
}

impl Core {
    /// Publishes the accepted user row.
    pub fn emit_user_turn(
        &self,
        text: &str,
        client_send_id: Option<&str>,
        attachments: &[Value],
    ) -> u64 {
        let next = self.hub.next_id();
        self.emit(
            "user_turn",
            json!({
                "content": text,
                "attachments": attachments,
                "sender": self.user_id,
                "client_send_ids": client_send_id.map(|c| vec![c]).unwrap_or_default(),
                "_event_id": next,
            }),
        )
    }

    fn turn_finished(&self, r: &Result<(), SessionError>) {
        self.flush_content();
        let state = match r {
            Ok(()) | Err(SessionError::Cancelled) => "idle",
            Err(_) => "error",
        };
        if matches!(r, Err(SessionError::Cancelled)) {
            self.emit("cancelled", json!({}));
        }
        self.set_activity(String::new(), "");
        {
            let mut s = lock(&self.status);
            s.turn_count += 1;
            s.streaming = false;
        }
        // Per-stream turn end for the SDKs' send_and_wait (never in a preamble).
        let mut fields = self.ws_state_fields(true);
        fields["state"] = state.into();
        self.emit("ws_state", fields.clone());
        self.emit_global("ws_state", fields);
        self.metrics.turn_finished(state == "error");
        // Backend health follows the latest model call: a provider failure
        // marks it down, the next completed turn up again.
        let up = match r {
            Ok(()) => Some(true),
            Err(SessionError::Provider(_) | SessionError::Plugin(_)) => Some(false),
            Err(_) => None,
        };
        if let Some(up) = up
            && self.metrics.set_backend_up(up)
        {
            let backend = if up { "up" } else { "down" };
            self.global.publish(
                None,
                &json!({
                    "type": "health_changed", "backend_status": backend,
                    "status": if up { "ok" } else { "degraded" },
                    "backend": {"status": backend}, "default_model": self.model.0,
                }),
            );
        }
        self.touch();
    }
}

/// The engine's front end for one workstream: every callback becomes an event.
pub struct WebUi {
    core: Arc<Core>,
}

impl WebUi {
    /// A bridge for `core`.
    pub fn new(core: Arc<Core>) -> Self {
        Self { core }
    }
}

fn item_json(p: &PendingTool) -> Value {
    json!({
        "call_id": p.call_id,
        "header": p.header,
        "preview": p.preview,
        "func_name": p.name,
        "approval_label": p.name,
        "needs_approval": p.needs_approval,
        "error": p.error,
    })
}

#[async_trait::async_trait]
impl SessionUi for WebUi {
    fn on_thinking_start(&self) {
        {
            let mut s = lock(&self.core.status);
            s.content.clear();
            s.reasoning.clear();
            s.streaming = true;
        }
        self.core.emit("thinking_start", json!({}));
        self.core.set_activity("Reasoning…".into(), "thinking");
    }

    fn on_thinking_stop(&self) {
        // Also sent at the first answer token: the stream goes on.
        self.core.emit("thinking_stop", json!({}));
    }

    fn on_reasoning_token(&self, text: &str) {
        lock(&self.core.status).reasoning.push_str(text);
        self.core.emit("reasoning", json!({"text": text}));
    }

    fn on_content_token(&self, text: &str) {
        lock(&self.core.status).content.push_str(text);
        let now = Instant::now();
        let due = {
            let mut b = lock(&self.core.batch);
            b.text.push_str(text);
            let since = *b.since.get_or_insert(now);
            now.duration_since(since) >= CONTENT_BATCH || b.text.len() >= CONTENT_BATCH_MAX
        };
        if due {
            self.core.flush_content();
        }
    }

    fn on_stream_end(&self) {
        lock(&self.core.status).streaming = false;
        self.core.emit("stream_end", json!({}));
    }

    fn on_tools_prepared(&self, items: &[PendingTool]) {
        let list: Vec<Value> = items.iter().map(item_json).collect();
        lock(&self.core.status).tool_calls_this_turn += items.len() as u32;
        self.core.metrics.tool_calls(items.len() as u64);
        self.core.emit("tool_pending", json!({"items": list}));
        if !items.iter().any(|p| p.needs_approval) {
            self.core.emit("tool_info", json!({"items": list}));
        }
    }

    async fn approve_tools(&self, _cycle: u64, items: &[PendingTool]) -> Approval {
        let (tx, rx) = oneshot::channel();
        let cycle_id = random_hex();
        let list: Vec<Value> = items.iter().map(item_json).collect();
        let fields = json!({"cycle_id": cycle_id, "items": list, "judge_pending": false});
        let mut event = fields.clone();
        event["type"] = "approve_request".into();
        event["ws_id"] = self.core.ws_id.clone().into();
        lock(&self.core.cycles).push_back(Cycle {
            cycle_id: cycle_id.clone(),
            call_ids: items.iter().map(|p| p.call_id.clone()).collect(),
            event,
            reply: tx,
        });
        self.core.emit("approve_request", fields.clone());
        let first = items
            .iter()
            .find(|p| p.needs_approval)
            .map(|p| p.header.clone())
            .unwrap_or_default();
        self.core
            .set_activity(format!("⏳ Awaiting approval: {first}"), "approval");
        self.core.emit_global(
            "approve_request",
            json!({"detail": {"type": "approve_request", "cycle_id": cycle_id, "items": fields["items"]}}),
        );
        let answer = rx.await.unwrap_or(Approval {
            approved: false,
            always: false,
            feedback: None,
        });
        self.core.set_activity(String::new(), "");
        answer
    }

    fn on_tool_output_chunk(&self, call_id: &str, chunk: &str) {
        if chunk.is_empty() {
            return;
        }
        self.core.emit(
            "tool_output_chunk",
            json!({"call_id": call_id, "chunk": chunk}),
        );
    }

    fn on_tool_result(&self, call_id: &str, name: &str, output: &str, is_error: bool) {
        let fields =
            json!({"call_id": call_id, "name": name, "output": output, "is_error": is_error});
        self.core.emit("tool_result", fields.clone());
        // The canonical row (shown only to `?tool_turn=1` subscribers).
        let mut accepted = fields;
        accepted["accepted"] = true.into();
        accepted["effect_status"] = if is_error { "failed" } else { "applied" }.into();
        accepted["_event_id"] = self.core.hub.next_id().into();
        self.core.emit("tool_result", accepted);
    }

    fn on_status(&self, prompt: u32, completion: u32, window: u32) {
        let fields = {
            let mut s = lock(&self.core.status);
            s.prompt_tokens = prompt;
            s.completion_tokens = completion;
            s.total_tokens += u64::from(prompt) + u64::from(completion);
            s.context_window = window;
            status_fields(&s)
        };
        self.core.metrics.tokens(prompt, completion);
        self.core.emit("status", fields);
    }

    fn on_info(&self, message: &str) {
        self.core.emit("info", json!({"message": message}));
    }

    fn on_error(&self, message: &str) {
        self.core.emit("error", json!({"message": message}));
    }

    fn on_state_change(&self, state: SessionState) {
        lock(&self.core.status).state = state;
        self.core.emit(
            "state_change",
            json!({"state": state_name(state), "acting_user_id": self.core.user_id}),
        );
        if state != SessionState::Idle && state != SessionState::Error {
            // Idle/error go out with the final content from `turn_finished`.
            self.core
                .emit_global("ws_state", self.core.ws_state_fields(false));
        }
    }
}

/// The `status` event body.
pub fn status_fields(s: &Status) -> Value {
    let total = u64::from(s.prompt_tokens) + u64::from(s.completion_tokens);
    json!({
        "prompt_tokens": s.prompt_tokens,
        "completion_tokens": s.completion_tokens,
        "total_tokens": total,
        "context_window": s.context_window,
        "pct": (ratio(s.prompt_tokens, s.context_window) * 1000.0).round() / 10.0,
        "effort": null,
        "cache_creation_tokens": 0,
        "cache_read_tokens": 0,
        "tool_calls_this_turn": s.tool_calls_this_turn,
        "turn_count": s.turn_count,
    })
}
