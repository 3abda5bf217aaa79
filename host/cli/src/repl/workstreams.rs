//! Workstream slots: each runs its session through the engine's session
//! runner, so a background workstream keeps working while another is in
//! front. The slot's [`WsUi`] renders the session's events as they happen.

use super::ui::WsUi;
use std::sync::Arc;
use std::time::Duration;
use turnstone_engine::events::EventSink;
use turnstone_engine::runner::{Ack, OpError, SessionHandle, Submitted};
use turnstone_engine::session::ChatSession;
use turnstone_protocol::{ApproveRequest, Decision, Op, SessionState};

/// How long replacing a slot's session waits for the old one to save.
const REPLACE_GRACE: Duration = Duration::from_secs(5);

/// The sink a slot's sessions are built with: events go straight to its UI.
pub fn sink_for(ui: &Arc<WsUi>) -> EventSink {
    let ui = ui.clone();
    EventSink::with_handler(move |e| ui.handle(e))
}

/// One workstream in this terminal.
pub struct Slot {
    /// Stable slot id (events are addressed by it).
    pub id: u64,
    /// Display name.
    pub name: String,
    /// Storage id.
    pub ws_id: String,
    /// Its UI.
    pub ui: Arc<WsUi>,
    session: SessionHandle,
    /// Approval waiting for an answer.
    pub approval: Option<ApproveRequest>,
    open: crate::app::OpenSessions,
}

fn lock_open(
    open: &crate::app::OpenSessions,
) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, SessionHandle>> {
    open.lock().unwrap_or_else(|p| p.into_inner())
}

impl Slot {
    /// Runs `session` (built on [`sink_for`] this slot's `ui`), listed in
    /// `open` while it runs.
    pub fn spawn(
        id: u64,
        name: String,
        session: ChatSession,
        ui: Arc<WsUi>,
        open: crate::app::OpenSessions,
    ) -> Self {
        let ws_id = session.ws_id().unwrap_or_default().to_string();
        let handle = turnstone_engine::runner::spawn(session);
        lock_open(&open).insert(ws_id.clone(), handle.clone());
        Self {
            id,
            name,
            ws_id,
            ui,
            session: handle,
            approval: None,
            open,
        }
    }

    /// Whether a turn or an edit holds the session.
    pub fn busy(&self) -> bool {
        self.session.is_busy()
    }

    /// Submits `op` (decided now; see [`SessionHandle::submit`]).
    pub fn submit(&self, op: Op) -> Submitted {
        self.session.submit(op)
    }

    /// Submits `op` and reports a refusal or failure on this slot's UI,
    /// without waiting (for long edits such as `/compact`).
    pub fn submit_in_background(&self, op: Op) {
        let done = self.session.submit(op);
        let ui = self.ui.clone();
        tokio::spawn(async move {
            if let Err(e) = done.await {
                ui.on_error(&e.to_string());
            }
        });
    }

    /// Answers the pending approval.
    pub async fn answer(&mut self, decision: Decision) -> Result<Ack, OpError> {
        let cycle_id = self.approval.take().map(|r| r.cycle_id);
        let op = Op::Approve {
            cycle_id,
            call_id: None,
            decision,
        };
        self.session.submit(op).await
    }

    /// Cancels the running turn (and with it a pending approval).
    pub fn cancel(&mut self) {
        self.approval = None;
        // Decided at the call; the answer (already complete) is not needed.
        drop(self.session.submit(Op::Cancel { force: false }));
    }

    /// Adopts a new session in this slot; the old one is closed first (it is
    /// idle: callers check).
    pub async fn replace(&mut self, session: ChatSession, name: String) {
        self.session.close(REPLACE_GRACE).await;
        lock_open(&self.open).remove(&self.ws_id);
        self.ws_id = session.ws_id().unwrap_or_default().to_string();
        self.name = name;
        self.approval = None;
        self.session = turnstone_engine::runner::spawn(session);
        lock_open(&self.open).insert(self.ws_id.clone(), self.session.clone());
    }

    /// Stops the session, letting it record what it was doing.
    pub async fn close(&self, grace: Duration) {
        lock_open(&self.open).remove(&self.ws_id);
        self.session.close(grace).await;
    }

    /// A one-word state for lists.
    pub fn state_label(&self) -> &'static str {
        if self.approval.is_some() {
            return "approval";
        }
        match self.ui.state() {
            SessionState::Idle if self.busy() => "busy",
            SessionState::Idle => "idle",
            SessionState::Thinking => "thinking",
            SessionState::Running => "running",
            SessionState::Attention => "approval",
            SessionState::Error => "error",
        }
    }
}
