//! Where a session's events go, and how approvals come back: the session
//! emits [`Event`]s into a channel without knowing who listens, and waits on
//! [`Approvals`] for the answer to each `approve_request` — an answer any
//! front end gives by resolving the cycle (through
//! [`crate::runner::SessionHandle`], or directly in tests).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use turnstone_protocol::{ApprovalResolved, ApproveRequest, Decision, Event};

/// What a session's stream carries: the wire events, and the end of each
/// turn run through a [`crate::runner::SessionHandle`] (which front ends
/// render their own way: the server as `ws_state`, the terminal as a status
/// line and an exit code).
#[derive(Debug, Clone, PartialEq)]
pub enum SessionEvent {
    /// A protocol event.
    Wire(Event),
    /// A turn (with the queued messages that followed it) is over.
    TurnEnded(TurnOutcome),
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The model answered.
    Completed,
    /// It was cancelled; partial output and tool outcomes were recorded.
    Cancelled,
    /// It failed.
    Failed {
        /// What to tell the user.
        message: String,
        /// The model backend failed (provider error or provider component):
        /// health reports it down until a turn completes again.
        backend: bool,
    },
}

impl TurnOutcome {
    /// The outcome of a turn's result.
    pub fn of(result: &Result<(), crate::session::SessionError>) -> Self {
        use crate::session::SessionError;
        match result {
            Ok(()) => Self::Completed,
            Err(SessionError::Cancelled) => Self::Cancelled,
            Err(e) => Self::Failed {
                message: e.to_string(),
                backend: matches!(e, SessionError::Provider(_) | SessionError::Plugin(_)),
            },
        }
    }

    /// Whether the turn failed (not cancelled).
    pub fn failed(&self) -> bool {
        matches!(self, Self::Failed { .. })
    }
}

/// Reply text of a sub-agent is passed on in pieces of about this many
/// bytes (and whenever another event of it follows).
const NESTED_CONTENT_BATCH: usize = 256;

/// Where emitted events go.
type Out = Arc<dyn Fn(SessionEvent) + Send + Sync>;

/// The sending side of a session's event stream.
#[derive(Clone)]
pub struct EventSink {
    out: Out,
    approvals: Arc<Approvals>,
}

/// The receiving side. Events are boxed: the channel allocates its slots
/// 32 at a time and keeps a block for as long as the workstream is loaded
/// (6 KB with the events inline, 256 bytes boxed).
pub type EventStream = mpsc::UnboundedReceiver<Box<SessionEvent>>;

impl EventSink {
    /// A new stream: the sink for the session, the receiver for its front end.
    pub fn channel() -> (Self, EventStream) {
        let (tx, rx) = mpsc::unbounded_channel();
        let out: Out = Arc::new(move |e| {
            // Dropped when nobody listens any more.
            let _ = tx.send(Box::new(e));
        });
        (
            Self {
                out,
                approvals: Arc::new(Approvals::default()),
            },
            rx,
        )
    }

    /// A sink that hands every event to `handler` as it is emitted, on the
    /// emitting task (tests record them in order and answer approvals from
    /// inside the handler). The handler must not block.
    pub fn with_handler(handler: impl Fn(SessionEvent) + Send + Sync + 'static) -> Self {
        Self {
            out: Arc::new(handler),
            approvals: Arc::new(Approvals::default()),
        }
    }

    /// This sink with `observer` seeing every event first (on the emitting
    /// task; it must not block), e.g. [`crate::event_log::EventLog::tap`].
    pub fn inspect(self, observer: impl Fn(&SessionEvent) + Send + Sync + 'static) -> Self {
        let inner = self.out;
        Self {
            out: Arc::new(move |e| {
                observer(&e);
                inner(e);
            }),
            approvals: self.approvals,
        }
    }

    /// The sink of a sub-agent running under this session's tool call
    /// `origin.parent_call_id`: its events reach this stream nested in
    /// `agent_event` (its reply text batched), its context use as
    /// `agent_context`, and its approvals as this session's own cycles (the
    /// registry is shared, so whoever answers this workstream answers them),
    /// with this workstream's state following them (`attention` while one
    /// waits). `acting_user_id` is named in those state changes.
    pub fn nested(
        &self,
        origin: turnstone_protocol::AgentOrigin,
        acting_user_id: Option<String>,
    ) -> Self {
        let parent = self.out.clone();
        let parent_call_id = origin.parent_call_id.clone();
        let batch = Mutex::new(String::new());
        let asked = std::sync::atomic::AtomicBool::new(false);
        let wrap = move |event: Event| {
            SessionEvent::Wire(Event::AgentEvent(turnstone_protocol::AgentEvent {
                origin: origin.clone(),
                event: Box::new(event),
            }))
        };
        let parent_state = move |state: turnstone_protocol::SessionState| {
            SessionEvent::Wire(Event::StateChange(turnstone_protocol::StateChange {
                state,
                acting_user_id: acting_user_id.clone(),
            }))
        };
        let out: Out = Arc::new(move |e: SessionEvent| {
            let SessionEvent::Wire(event) = e else {
                // The sub-agent's turn end is the tool result, not the parent's.
                return;
            };
            let flush = |batch: &mut String| {
                if !batch.is_empty() {
                    parent(wrap(Event::content(std::mem::take(batch))));
                }
            };
            let mut text = batch.lock().unwrap_or_else(|p| p.into_inner());
            match event {
                Event::Content(t) => {
                    text.push_str(&t.text);
                    if text.len() >= NESTED_CONTENT_BATCH {
                        flush(&mut text);
                    }
                }
                Event::ApproveRequest(r) => {
                    flush(&mut text);
                    asked.store(true, std::sync::atomic::Ordering::Relaxed);
                    parent(parent_state(turnstone_protocol::SessionState::Attention));
                    parent(SessionEvent::Wire(Event::ApproveRequest(r)));
                }
                Event::StateChange(sc) => {
                    flush(&mut text);
                    let after_ask = asked.swap(false, std::sync::atomic::Ordering::Relaxed);
                    if after_ask && sc.state != turnstone_protocol::SessionState::Attention {
                        parent(parent_state(turnstone_protocol::SessionState::Running));
                    }
                    parent(wrap(Event::StateChange(sc)));
                }
                Event::Status(st) => {
                    flush(&mut text);
                    parent(SessionEvent::Wire(Event::AgentContext(
                        turnstone_protocol::AgentContext {
                            parent_call_id: parent_call_id.clone(),
                            prompt_tokens: st.prompt_tokens,
                            context_window: st.context_window,
                        },
                    )));
                    parent(wrap(Event::Status(st)));
                }
                other => {
                    flush(&mut text);
                    parent(wrap(other));
                }
            }
        });
        Self {
            out,
            approvals: self.approvals.clone(),
        }
    }

    /// Sends `event`.
    pub fn emit(&self, event: Event) {
        (self.out)(SessionEvent::Wire(event));
    }

    /// Announces the end of a turn.
    pub fn turn_ended(&self, outcome: TurnOutcome) {
        (self.out)(SessionEvent::TurnEnded(outcome));
    }

    /// The approvals waiting for an answer.
    pub fn approvals(&self) -> &Arc<Approvals> {
        &self.approvals
    }

    /// Resolves a cycle (by id, by one of its call ids, or the oldest) and
    /// announces it with `approval_resolved`. `Ok(None)` when nothing was
    /// pending and nothing was named.
    pub fn resolve(
        &self,
        cycle_id: Option<&str>,
        call_id: Option<&str>,
        decision: Decision,
    ) -> Result<Option<String>, NoSuchApproval> {
        let Some(cycle) = self.approvals.take(cycle_id, call_id)? else {
            return Ok(None);
        };
        self.emit(Event::ApprovalResolved(ApprovalResolved {
            approved: decision.approved,
            feedback: decision.feedback.clone(),
            always: decision.always,
            cycle_id: cycle.request.cycle_id.clone(),
            call_ids: cycle.call_ids(),
        }));
        let id = cycle.request.cycle_id.clone();
        // The session may have been cancelled meanwhile; then nobody waits.
        let _ = cycle.reply.send(decision);
        Ok(Some(id))
    }
}

/// A cycle or call id that matches no pending approval.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no pending approval matches that cycle_id or call_id")]
pub struct NoSuchApproval;

struct Pending {
    request: ApproveRequest,
    reply: oneshot::Sender<Decision>,
}

impl Pending {
    fn call_ids(&self) -> Vec<String> {
        self.request
            .items
            .iter()
            .map(|i| i.call_id.clone())
            .collect()
    }
}

/// Approval cycles waiting for a front end, oldest first.
#[derive(Default)]
pub struct Approvals {
    pending: Mutex<VecDeque<Pending>>,
}

impl Approvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers `request` before it is announced, so an answer can never
    /// arrive for a cycle not yet known.
    pub(crate) fn register(&self, request: ApproveRequest) -> oneshot::Receiver<Decision> {
        let (reply, rx) = oneshot::channel();
        self.lock().push_back(Pending { request, reply });
        rx
    }

    /// Forgets a cycle that ended without an answer (the turn was cancelled).
    pub(crate) fn forget(&self, cycle_id: &str) {
        self.lock().retain(|p| p.request.cycle_id != cycle_id);
    }

    fn take(
        &self,
        cycle_id: Option<&str>,
        call_id: Option<&str>,
    ) -> Result<Option<Pending>, NoSuchApproval> {
        let mut pending = self.lock();
        let pos = match (cycle_id, call_id) {
            (Some(id), _) => pending.iter().position(|p| p.request.cycle_id == id),
            (None, Some(call)) => pending
                .iter()
                .position(|p| p.request.items.iter().any(|i| i.call_id == call)),
            (None, None) => (!pending.is_empty()).then_some(0),
        };
        match pos {
            Some(p) => Ok(pending.remove(p)),
            None if cycle_id.is_some() || call_id.is_some() => Err(NoSuchApproval),
            None => Ok(None),
        }
    }

    /// Records the LLM judge's verdict on a waiting cycle's call, so a
    /// client that connects later sees it on the card.
    pub(crate) fn set_judge_verdict(&self, cycle_id: &str, verdict: &turnstone_protocol::Verdict) {
        let mut pending = self.lock();
        if let Some(p) = pending.iter_mut().find(|p| p.request.cycle_id == cycle_id)
            && let Some(item) = p
                .request
                .items
                .iter_mut()
                .find(|i| i.call_id == verdict.call_id)
        {
            item.judge_verdict = Some(verdict.clone());
        }
    }

    /// Marks a waiting cycle's LLM review finished (or not).
    pub(crate) fn set_judge_pending(&self, cycle_id: &str, pending_judge: bool) {
        if let Some(p) = self
            .lock()
            .iter_mut()
            .find(|p| p.request.cycle_id == cycle_id)
        {
            p.request.judge_pending = pending_judge;
        }
    }

    /// The requests waiting now (for a reconnecting client's preamble).
    pub fn waiting(&self) -> Vec<ApproveRequest> {
        self.lock().iter().map(|p| p.request.clone()).collect()
    }

    /// Denies every waiting cycle (closing, cancelling).
    pub fn deny_all(&self) {
        for p in self.lock().drain(..) {
            let _ = p.reply.send(Decision::deny());
        }
    }
}
