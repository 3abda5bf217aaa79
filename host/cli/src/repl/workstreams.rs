//! Workstream slots: each owns a worker task running its [`ChatSession`] jobs
//! one at a time, so a background workstream keeps working while another is
//! in front.

use super::ui::{UiEvent, WsUi};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{mpsc, oneshot};
use turnstone_engine::session::{CancelHandle, ChatSession, MessageQueue, SessionError};
use turnstone_engine::ui::{Approval, PendingTool, SessionState};

/// Work for a session.
pub enum Job {
    /// A user message.
    Send(String),
    /// Ask again for the last message.
    Retry,
    /// Summarize now.
    Compact,
    /// Drop the last N messages; answers with the earliest removed text.
    Rewind(usize, oneshot::Sender<Result<String, String>>),
    /// Forget the context.
    Clear,
    /// Switch model alias.
    Model(String, oneshot::Sender<Result<String, String>>),
    /// Replace the session (after `/new` or `/resume`).
    Replace(Box<ChatSession>),
}

/// An approval waiting for the user.
pub struct PendingApproval {
    /// The batch.
    pub items: Vec<PendingTool>,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Approval>,
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
    jobs: mpsc::UnboundedSender<Job>,
    /// Messages typed while a turn runs.
    pub queue: MessageQueue,
    cancel: CancelHandle,
    busy: Arc<AtomicBool>,
    /// Approval waiting for an answer.
    pub approval: Option<PendingApproval>,
}

impl Slot {
    /// Starts the worker for `session`.
    pub fn spawn(
        id: u64,
        name: String,
        session: ChatSession,
        ui: Arc<WsUi>,
        events: mpsc::UnboundedSender<UiEvent>,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let busy = Arc::new(AtomicBool::new(false));
        let ws_id = session.ws_id().unwrap_or_default().to_string();
        let slot = Self {
            id,
            name,
            ws_id,
            ui: ui.clone(),
            jobs: tx,
            queue: session.queue(),
            cancel: session.cancel_handle(),
            busy: busy.clone(),
            approval: None,
        };
        tokio::spawn(worker(session, ui, rx, busy, events));
        slot
    }

    /// Whether a job is running or waiting.
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::SeqCst)
    }

    /// Queues a job (marks the slot busy at once so input can wait for it).
    pub fn submit(&self, job: Job) {
        self.busy.store(true, Ordering::SeqCst);
        if self.jobs.send(job).is_err() {
            self.busy.store(false, Ordering::SeqCst);
        }
    }

    /// Cancels the running turn (and with it a pending approval).
    pub fn cancel(&mut self) {
        self.cancel.cancel();
        if let Some(p) = self.approval.take() {
            let _ = p.reply.send(Approval {
                approved: false,
                always: false,
                feedback: None,
            });
        }
    }

    /// Adopts a new session in this slot (the worker swaps it in order).
    pub fn replace(&mut self, session: ChatSession, name: String) {
        self.ws_id = session.ws_id().unwrap_or_default().to_string();
        self.queue = session.queue();
        self.cancel = session.cancel_handle();
        self.name = name.clone();
        self.submit(Job::Replace(Box::new(session)));
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

async fn worker(
    mut session: ChatSession,
    ui: Arc<WsUi>,
    mut rx: mpsc::UnboundedReceiver<Job>,
    busy: Arc<AtomicBool>,
    events: mpsc::UnboundedSender<UiEvent>,
) {
    use turnstone_engine::ui::SessionUi;
    while let Some(job) = rx.recv().await {
        busy.store(true, Ordering::SeqCst);
        // `send` reports its own failures; other jobs are reported here.
        let mut engine_reports = false;
        let result = match job {
            Job::Send(text) => {
                engine_reports = true;
                session.send(&text).await
            }
            Job::Retry => {
                let r = session.retry().await;
                engine_reports = !matches!(r, Err(SessionError::Edit(_)));
                r
            }
            Job::Compact => session.compact().await,
            Job::Rewind(n, reply) => {
                let r = session.rewind(n).await.map_err(|e| e.to_string());
                let _ = reply.send(r);
                Ok(())
            }
            Job::Clear => {
                session.clear();
                Ok(())
            }
            Job::Model(alias, reply) => {
                let r = session
                    .set_model_alias(&alias)
                    .await
                    .map(|()| session.model().1.to_string())
                    .map_err(|e| e.to_string());
                let _ = reply.send(r);
                Ok(())
            }
            Job::Replace(new) => {
                session = *new;
                Ok(())
            }
        };
        // Messages typed during the last model answer had no tool-result seam
        // to join at: they become the next turn.
        let mut result = result;
        while result.is_ok() && !session.queue().is_empty() {
            let text = session.queue().drain().join("\n\n");
            engine_reports = true;
            result = session.send(&text).await;
        }
        match &result {
            Ok(()) | Err(SessionError::Cancelled) => {}
            Err(_) if engine_reports => {}
            Err(e) => ui.on_error(&e.to_string()),
        }
        // Counted before the slot goes idle: piped mode stops at end of input
        // as soon as no slot is busy, and must not miss this failure.
        let failed = !matches!(result, Ok(()) | Err(SessionError::Cancelled));
        let _ = events.send(UiEvent::Finished { failed });
        // Idle before the status line shows, so what follows it sees an idle slot.
        if rx.is_empty() {
            busy.store(false, Ordering::SeqCst);
        }
        if let Some(status) = ui.take_status_line() {
            ui.emit(vec![status]);
        }
    }
}
