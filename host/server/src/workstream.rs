//! One loaded workstream: the engine's session runner, and the pump that
//! turns its events into the wire contract's SSE events — batching content,
//! keeping the live status for `/workstreams/{id}` and the connect preamble,
//! adding the accepted `tool_result` row, and rendering each turn's end as
//! `ws_state` on both streams.

use crate::content_batch::ContentBatch;
use crate::events::{EventHub, Numbered, Replay};
use crate::global::GlobalHub;
use crate::metrics::Metrics;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use turnstone_engine::events::{EventStream, SessionEvent, TurnOutcome};
use turnstone_engine::runner::SessionHandle;
use turnstone_engine::session::ChatSession;
use turnstone_protocol::{
    ApproveDetail, BackendHealth, Event, GlobalApprovalResolved, GlobalApproveRequest, GlobalEvent,
    GlobalWsClosed, GlobalWsState, HealthChanged, Reason, SessionState, Text, WsActivity, WsEvent,
    WsRename, WsState,
};

/// How long a closing workstream's task gets to finish saving.
const CLOSE_GRACE: Duration = Duration::from_secs(10);

/// A random 32-hex id (hand-off tokens).
pub fn random_hex() -> String {
    turnstone_engine::random_hex()
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
    /// The latest `status` event (replayed in the connect preamble).
    pub last_status: Option<turnstone_protocol::Status>,
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

/// Everything the HTTP handlers and the event pump share about a workstream.
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
    batch: Mutex<ContentBatch>,
    /// One-shot `/history` hand-off tokens → event cursor.
    handoffs: Mutex<HashMap<String, u64>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn ratio(prompt: u32, window: u32) -> f64 {
    if window == 0 {
        0.0
    } else {
        f64::from(prompt) / f64::from(window)
    }
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
                last_status: None,
                tool_calls_this_turn: 0,
                turn_count: 0,
                content: String::new(),
                reasoning: String::new(),
                streaming: false,
                activity: String::new(),
                activity_state: "",
            }),
            batch: Mutex::new(ContentBatch::default()),
            handoffs: Mutex::new(HashMap::new()),
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

    /// Marks the workstream active now (idle close, eviction).
    pub fn touch(&self) {
        lock(&self.status).last_active = Instant::now();
    }

    /// Publishes a per-workstream event (after any batched content).
    pub fn emit(&self, event: Event) -> u64 {
        // Text events and the status text they add to change together under
        // the batch's lock (see `subscribe`).
        let mut batch = lock(&self.batch);
        self.publish_content(batch.take(Instant::now()));
        if let Event::Reasoning(t) = &event {
            lock(&self.status).reasoning.push_str(&t.text);
        }
        self.publish(event)
    }

    /// Subscribes to the per-workstream stream with the status as of that
    /// moment. No text is published between the two, so the connect
    /// preamble's in-progress snapshot holds exactly the text sent before
    /// the subscription, and what follows (batched text included) arrives
    /// once, as events.
    pub fn subscribe(&self, after: Option<u64>) -> (Replay, broadcast::Receiver<Numbered>, Status) {
        let _batch = lock(&self.batch);
        let (replay, rx) = self.hub.subscribe(after);
        (replay, rx, self.status())
    }

    fn publish(&self, event: Event) -> u64 {
        self.hub.publish(&WsEvent::new(&self.ws_id, event))
    }

    /// Sends batched content now.
    pub fn flush_content(&self) {
        // Published under the batch's lock: an event emitted from another
        // task (an HTTP handler) cannot get its id between taking the text
        // and publishing it.
        let mut batch = lock(&self.batch);
        self.publish_content(batch.take(Instant::now()));
    }

    /// Publishes taken content and adds it to the status text; called with
    /// the batch's lock held.
    fn publish_content(&self, text: Option<String>) {
        if let Some(text) = text {
            lock(&self.status).content.push_str(&text);
            self.publish(Event::Content(Text { text }));
        }
    }

    /// When batched content must go out if no event comes first.
    fn content_due(&self) -> Option<Instant> {
        lock(&self.batch).due()
    }

    /// Publishes on the global stream, tagged with this workstream's owner.
    pub fn emit_global(&self, event: &GlobalEvent) {
        self.global.publish(self.user_id.as_deref(), event);
    }

    /// The `ws_state` body (per-stream turn end and global stream).
    pub fn ws_state(&self, with_content: bool) -> WsState {
        let s = self.status();
        WsState {
            state: s.state,
            tokens: s.total_tokens,
            context_ratio: ratio(s.prompt_tokens, s.context_window),
            activity: s.activity,
            activity_state: s.activity_state.to_string(),
            kind: self.kind.clone(),
            parent_ws_id: None,
            persistence_state: "persisted".into(),
            name: self.name(),
            content: with_content.then_some(s.content),
        }
    }

    /// Records a new display name and tells the global stream.
    pub fn rename(&self, name: &str) {
        *lock(&self.name) = name.to_string();
        self.emit_global(&GlobalEvent::WsRename(WsRename {
            ws_id: self.ws_id.clone(),
            name: name.to_string(),
        }));
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
        self.emit_global(&GlobalEvent::WsActivity(WsActivity {
            ws_id: self.ws_id.clone(),
            activity,
            activity_state: kind.to_string(),
        }));
    }

    /// Batches a content token; what is due goes out at once.
    fn content(&self, text: &str) {
        let mut batch = lock(&self.batch);
        self.publish_content(batch.push(text, Instant::now()));
    }

    /// Renders one engine event onto the streams.
    fn on_event(&self, event: Event) {
        // A turn streaming for longer than the quiet period is not quiet.
        self.metrics.engine_event();
        match event {
            Event::Content(t) => return self.content(&t.text),
            Event::ThinkingStart => {
                {
                    let mut s = lock(&self.status);
                    s.content.clear();
                    s.reasoning.clear();
                    s.streaming = true;
                }
                self.emit(Event::ThinkingStart);
                self.set_activity("Reasoning…".into(), "thinking");
                return;
            }
            Event::StreamEnd => lock(&self.status).streaming = false,
            Event::TitleUpdated(ref t) => self.rename(&t.title),
            Event::Status(st) => {
                {
                    let mut s = lock(&self.status);
                    s.prompt_tokens = st.prompt_tokens;
                    s.completion_tokens = st.completion_tokens;
                    s.total_tokens += st.total_tokens;
                    s.context_window = st.context_window;
                    s.last_status = Some(st.clone());
                }
                self.metrics.tokens(st.prompt_tokens, st.completion_tokens);
                self.emit(Event::Status(st));
                return;
            }
            Event::StateChange(sc) => {
                let state = sc.state;
                lock(&self.status).state = state;
                self.emit(Event::StateChange(sc));
                if state != SessionState::Idle && state != SessionState::Error {
                    // Idle/error go out with the final content at the turn's end.
                    self.emit_global(&GlobalEvent::WsState(GlobalWsState {
                        ws_id: self.ws_id.clone(),
                        state: self.ws_state(false),
                    }));
                }
                return;
            }
            Event::ToolPending(ref items) => {
                lock(&self.status).tool_calls_this_turn += items.items.len() as u32;
                self.metrics.tool_calls(items.items.len() as u64);
            }
            Event::ApproveRequest(r) => {
                let first = r
                    .items
                    .iter()
                    .find(|p| p.needs_approval)
                    .map(|p| p.header.clone())
                    .unwrap_or_default();
                let detail = ApproveDetail {
                    kind: "approve_request".into(),
                    cycle_id: r.cycle_id.clone(),
                    items: r.items.clone(),
                };
                self.emit(Event::ApproveRequest(r));
                self.set_activity(format!("⏳ Awaiting approval: {first}"), "approval");
                self.emit_global(&GlobalEvent::ApproveRequest(GlobalApproveRequest {
                    ws_id: self.ws_id.clone(),
                    detail,
                }));
                return;
            }
            Event::IntentVerdict(v) => {
                self.emit(Event::IntentVerdict(v.clone()));
                self.emit_global(&GlobalEvent::IntentVerdict(
                    turnstone_protocol::GlobalIntentVerdict {
                        ws_id: self.ws_id.clone(),
                        verdict: *v,
                    },
                ));
                return;
            }
            Event::ApprovalResolved(r) => {
                self.emit(Event::ApprovalResolved(r.clone()));
                self.emit_global(&GlobalEvent::ApprovalResolved(GlobalApprovalResolved {
                    ws_id: self.ws_id.clone(),
                    resolved: r,
                }));
                self.set_activity(String::new(), "");
                return;
            }
            Event::ToolResult(r) => {
                let is_error = r.is_error;
                self.emit(Event::ToolResult(r.clone()));
                // The canonical row (shown only to `?tool_turn=1` subscribers).
                let mut accepted = r;
                accepted.accepted = Some(true);
                accepted.effect_status = Some(if is_error { "failed" } else { "applied" }.into());
                accepted.event_id = Some(self.hub.next_id());
                self.emit(Event::ToolResult(accepted));
                return;
            }
            Event::UserTurn(mut u) => {
                self.touch();
                lock(&self.status).tool_calls_this_turn = 0;
                u.event_id = self.hub.next_id();
                self.emit(Event::UserTurn(u));
                return;
            }
            _ => {}
        }
        self.emit(event);
    }

    /// A turn is over: `ws_state` with the final content on both streams,
    /// metrics, and the backend's health from the outcome.
    fn turn_ended(&self, outcome: &TurnOutcome) {
        self.flush_content();
        self.set_activity(String::new(), "");
        let state = if outcome.failed() {
            SessionState::Error
        } else {
            SessionState::Idle
        };
        {
            let mut s = lock(&self.status);
            s.turn_count += 1;
            s.streaming = false;
        }
        // Per-stream turn end for the SDKs' send_and_wait (never in a preamble).
        let mut fields = self.ws_state(true);
        fields.state = state;
        self.publish(Event::WsState(fields.clone()));
        self.emit_global(&GlobalEvent::WsState(GlobalWsState {
            ws_id: self.ws_id.clone(),
            state: fields,
        }));
        self.metrics.turn_finished(outcome.failed());
        // Backend health follows the latest model call: a provider failure
        // marks it down, the next completed turn up again.
        let up = match outcome {
            TurnOutcome::Completed => Some(true),
            TurnOutcome::Failed { backend: true, .. } => Some(false),
            _ => None,
        };
        if let Some(up) = up
            && self.metrics.set_backend_up(up)
        {
            let backend = if up { "up" } else { "down" };
            self.global.publish(
                None,
                &GlobalEvent::HealthChanged(HealthChanged {
                    backend_status: backend.into(),
                    status: if up { "ok" } else { "degraded" }.into(),
                    backend: BackendHealth {
                        status: backend.into(),
                    },
                    default_model: self.model.0.clone(),
                }),
            );
        }
        self.touch();
    }
}

/// A loaded workstream: its core and its session.
pub struct Workstream {
    /// Shared state.
    pub core: Arc<Core>,
    /// The session.
    pub session: SessionHandle,
    /// Serialises the routes that may start a turn (send, retry, rewind,
    /// clear, compact), so a send that sees the session idle knows it starts
    /// one and may consume its attachments.
    pub starting: tokio::sync::Mutex<()>,
    closing: std::sync::atomic::AtomicBool,
    pump: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Workstream {
    /// Runs `session` (built on the sink whose stream is `events`) and pumps
    /// its events into `core`'s streams.
    pub fn start(core: Arc<Core>, session: ChatSession, mut events: EventStream) -> Arc<Self> {
        let handle = turnstone_engine::runner::spawn(session);
        let c = core.clone();
        let pump = tokio::spawn(async move {
            // Batched content goes out when its window ends, even if the
            // model has gone quiet. One timer, moved only when the batch's
            // deadline changes: a pass per token must not make a timer each.
            let timer = tokio::time::sleep(Duration::ZERO);
            tokio::pin!(timer);
            let mut armed: Option<Instant> = None;
            loop {
                let due = c.content_due();
                if due != armed {
                    if let Some(at) = due {
                        timer.as_mut().reset(at.into());
                    }
                    armed = due;
                }
                let e = tokio::select! {
                    e = events.recv() => e,
                    () = &mut timer, if armed.is_some() => {
                        armed = None;
                        c.flush_content();
                        continue;
                    }
                };
                match e.map(|e| *e) {
                    Some(SessionEvent::Wire(event)) => c.on_event(event),
                    Some(SessionEvent::TurnEnded(outcome)) => c.turn_ended(&outcome),
                    None => break,
                }
            }
            c.flush_content();
        });
        Arc::new(Self {
            core,
            session: handle,
            starting: tokio::sync::Mutex::new(()),
            closing: Default::default(),
            pump: Mutex::new(Some(pump)),
        })
    }

    /// Whether a turn (or an edit) holds the session.
    pub fn is_busy(&self) -> bool {
        self.session.is_busy()
    }

    /// Whether the workstream was closed (or is closing).
    pub fn is_closed(&self) -> bool {
        self.closing.load(std::sync::atomic::Ordering::Acquire) || self.session.is_closed()
    }

    /// Closes: tells clients (their streams end), cancels any turn, denies
    /// pending approvals and waits (bounded) for the session to finish saving.
    pub async fn close(&self, reason: &str) {
        if self.closing.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        self.core.emit(Event::WsClosed(Reason {
            reason: reason.to_string(),
        }));
        self.core
            .emit_global(&GlobalEvent::WsClosed(GlobalWsClosed {
                ws_id: self.core.ws_id.clone(),
                reason: reason.to_string(),
                name: self.core.name(),
            }));
        self.session.close(CLOSE_GRACE).await;
    }
}

impl Drop for Workstream {
    fn drop(&mut self) {
        if let Some(p) = lock(&self.pump).take() {
            p.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> Core {
        Core::new(
            "ws".into(),
            None,
            "name".into(),
            ("m".into(), "m".into()),
            1000,
            false,
            100,
            0,
            Arc::new(GlobalHub::new()),
            Arc::new(Metrics::default()),
        )
    }

    fn text_of(n: &Numbered) -> String {
        let v: serde_json::Value = serde_json::from_str(n.json()).expect("json");
        assert_eq!(v["type"], "content", "{v}");
        v["text"].as_str().expect("text").to_string()
    }

    /// A client connecting mid-reply gets every piece of text once: what
    /// went out before it subscribed in the snapshot, what was still
    /// batched (and what follows) as events.
    #[test]
    fn the_connect_snapshot_holds_exactly_the_text_sent_before_it() {
        let c = core();
        c.content("Hel");
        c.content("lo");
        assert!(c.content_due().is_some(), "\"lo\" waits in the batch");
        let (_, mut rx, status) = c.subscribe(None);
        assert_eq!(status.content, "Hel", "the snapshot has only what was sent");
        c.flush_content();
        let live = rx.try_recv().expect("the batched text arrives as an event");
        assert_eq!(status.content + &text_of(&live), "Hello", "each piece once");
        assert_eq!(c.status().content, "Hello");
    }

    #[test]
    fn reasoning_joins_the_status_text_as_it_is_published() {
        let c = core();
        let (_, mut rx, status) = c.subscribe(None);
        assert_eq!(status.reasoning, "");
        c.emit(Event::Reasoning(Text { text: "hmm".into() }));
        assert!(rx.try_recv().expect("published").json().contains("\"hmm\""));
        assert_eq!(c.status().reasoning, "hmm");
    }
}
