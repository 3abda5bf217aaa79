//! Records a session's events and plays the user at approval prompts.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use turnstone_engine::events::{EventSink, SessionEvent, TurnOutcome};
use turnstone_protocol::{ApproveRequest, Decision, Event, SessionState};

type PromptHook = Box<dyn FnOnce(&ApproveRequest) + Send>;

#[derive(Default)]
struct State {
    events: Mutex<Vec<SessionEvent>>,
    answers: Mutex<VecDeque<Decision>>,
    hook: Mutex<Option<PromptHook>>,
    changed: tokio::sync::Notify,
    sink: OnceLock<EventSink>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A session's event sink that keeps every event, in emission order, and
/// answers each `approve_request` with the next scripted [`Decision`] (none
/// scripted: the prompt waits, as a user who does not answer).
///
/// Events are recorded on the emitting task, so once `send` returns every
/// event of the turn is here; no settling or sleeping.
#[derive(Clone)]
pub struct Recorder {
    state: Arc<State>,
}

impl Recorder {
    /// A recorder and the sink to build sessions with (clone it for several
    /// sessions: they share the recorder and its script).
    pub fn new() -> (Self, EventSink) {
        let state = Arc::new(State::default());
        let weak = Arc::downgrade(&state);
        let sink = EventSink::with_handler(move |e| {
            if let Some(state) = weak.upgrade() {
                Self::on_event(&state, e);
            }
        });
        let _ = state.sink.set(sink.clone());
        (Self { state }, sink)
    }

    fn on_event(state: &State, e: SessionEvent) {
        let request = match &e {
            SessionEvent::Wire(Event::ApproveRequest(r)) => Some(r.clone()),
            _ => None,
        };
        lock(&state.events).push(e);
        state.changed.notify_waiters();
        let Some(request) = request else { return };
        if let Some(hook) = lock(&state.hook).take() {
            hook(&request);
        }
        let answer = lock(&state.answers).pop_front();
        if let (Some(answer), Some(sink)) = (answer, state.sink.get()) {
            // Re-entrant: `approval_resolved` is recorded right after the request.
            let _ = sink.resolve(Some(&request.cycle_id), None, answer);
        }
    }

    /// Scripts the answer to the next approval request.
    pub fn answer(&self, decision: Decision) {
        lock(&self.state.answers).push_back(decision);
    }

    /// Scripts an approval (`approved`, no feedback).
    pub fn approve(&self, approved: bool) {
        self.answer(Decision {
            approved,
            ..Decision::default()
        });
    }

    /// Runs `hook` when the next approval is asked, before it is answered
    /// (e.g. to change a file between approval and execution).
    pub fn on_next_prompt(&self, hook: impl FnOnce(&ApproveRequest) + Send + 'static) {
        *lock(&self.state.hook) = Some(Box::new(hook));
    }

    /// Every event so far.
    pub fn all(&self) -> Vec<SessionEvent> {
        lock(&self.state.events).clone()
    }

    /// The wire events so far.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.state.events)
            .iter()
            .filter_map(|e| match e {
                SessionEvent::Wire(w) => Some(w.clone()),
                SessionEvent::TurnEnded(_) => None,
            })
            .collect()
    }

    /// Forgets what was recorded (the script stays).
    pub fn clear(&self) {
        lock(&self.state.events).clear();
    }

    /// The wire `type` of every event so far.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.events().iter().map(Event::kind).collect()
    }

    /// The reply text streamed so far.
    pub fn content(&self) -> String {
        self.events()
            .iter()
            .filter_map(|e| match e {
                Event::Content(t) => Some(t.text.as_str().to_string()),
                _ => None,
            })
            .collect()
    }

    /// Every state the session went through.
    pub fn states(&self) -> Vec<SessionState> {
        self.events()
            .iter()
            .filter_map(|e| match e {
                Event::StateChange(s) => Some(s.state),
                _ => None,
            })
            .collect()
    }

    /// The approval requests asked so far.
    pub fn prompts(&self) -> Vec<ApproveRequest> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::ApproveRequest(r) => Some(r),
                _ => None,
            })
            .collect()
    }

    /// Tool results so far: (output, is_error).
    pub fn results(&self) -> Vec<(String, bool)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::ToolResult(r) => Some((r.output, r.is_error)),
                _ => None,
            })
            .collect()
    }

    /// Turn outcomes so far (turns run through a session handle).
    pub fn outcomes(&self) -> Vec<TurnOutcome> {
        lock(&self.state.events)
            .iter()
            .filter_map(|e| match e {
                SessionEvent::TurnEnded(o) => Some(o.clone()),
                SessionEvent::Wire(_) => None,
            })
            .collect()
    }

    /// Waits until an event matching `pred` has been recorded (looking at
    /// every event so far first); panics after `timeout` with what was seen.
    pub async fn wait_for_event(
        &self,
        pred: impl Fn(&SessionEvent) -> bool,
        timeout: Duration,
    ) -> SessionEvent {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let changed = self.state.changed.notified();
            if let Some(e) = lock(&self.state.events).iter().find(|e| pred(e)) {
                return e.clone();
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "no matching event within {timeout:?}; seen {:?}",
                    self.kinds()
                );
            }
        }
    }
}
