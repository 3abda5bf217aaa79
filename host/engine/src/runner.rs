//! The one way a front end drives a session: [`spawn`] moves a
//! [`ChatSession`] onto its own task and returns a [`SessionHandle`] that
//! takes [`Op`]s, plus the stream of what happens ([`SessionEvent`]s).
//!
//! Ops that need the session's history (send, rewind, retry, clear, compact,
//! model switch) go to the task, one at a time; a send while a turn runs is
//! queued and joins at the next tool-result seam (or becomes the next turn).
//! Ops about the running turn (approve, cancel, unqueue) are answered by the
//! handle at once. Closing cancels the turn and stops the task; nothing polls.

use crate::events::{EventSink, NoSuchApproval, TurnOutcome};
use crate::session::{CancelHandle, ChatSession, EditError, MessageQueue, SessionError};
use crate::turn::ContentPart;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use turnstone_protocol::{ApproveRequest, Event, InputPart, MessageQueued, Op, Reason, UserTurn};

/// What an accepted op did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ack {
    /// The message started a turn (or retry started one).
    Started,
    /// The message waits for the running turn, at this position.
    Queued {
        /// Its id (for [`Op::Unqueue`]).
        msg_id: String,
        /// 1-based position.
        position: usize,
    },
    /// The queue is full; the message was not taken.
    QueueFull,
    /// An approval was answered (`None`: nothing was pending).
    Resolved {
        /// The cycle answered.
        cycle_id: Option<String>,
    },
    /// The running turn was told to stop.
    Cancelled {
        /// A turn was running.
        was_running: bool,
        /// Queued messages dropped (`force`).
        dropped: usize,
    },
    /// Rewound; the text of the earliest message removed (to edit and resend).
    Rewound {
        /// That message.
        text: String,
    },
    /// Done (clear, compact).
    Done,
    /// The model alias was switched; the model id now in use.
    ModelSet {
        /// Model id.
        model: String,
    },
    /// A queued message was removed (false: it already joined or never waited).
    Unqueued {
        /// Whether it was still waiting.
        removed: bool,
    },
    /// A skill was activated (`None`: the active one was dropped).
    SkillSet {
        /// The skill now active.
        skill: Option<crate::skills::SkillInfo>,
    },
}

/// Why an op was refused.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// A turn (or another edit) holds the session.
    #[error("a turn is running")]
    Busy,
    /// The session was closed.
    #[error("the workstream's session has stopped")]
    Closed,
    /// No pending approval matches.
    #[error(transparent)]
    Approval(#[from] NoSuchApproval),
    /// The session refused the edit (nothing to rewind, unknown model, …) or
    /// failed doing it.
    #[error(transparent)]
    Session(#[from] SessionError),
}

enum Command {
    Turn {
        text: String,
        parts: Vec<ContentPart>,
        /// A notice's source (the turn is marked with it).
        source: Option<String>,
    },
    Rewind {
        turns: usize,
        reply: oneshot::Sender<Result<String, SessionError>>,
    },
    Retry {
        reply: oneshot::Sender<Result<(), SessionError>>,
    },
    Clear {
        reply: oneshot::Sender<()>,
    },
    Compact {
        reply: oneshot::Sender<Result<(), SessionError>>,
    },
    UseSkill {
        name: Option<String>,
        arguments: std::collections::BTreeMap<String, String>,
        reply: oneshot::Sender<Result<Option<crate::skills::SkillInfo>, SessionError>>,
    },
    SetModel {
        alias: String,
        reply: oneshot::Sender<Result<String, SessionError>>,
    },
}

/// What the handle and the task share.
struct Shared {
    events: EventSink,
    queue: MessageQueue,
    cancel: CancelHandle,
    /// A turn or an edit holds the session; guards the send/queue hand-off.
    busy: Mutex<bool>,
    closed: CancellationToken,
    /// `sender` of queued messages that become a turn of their own.
    owner: Option<String>,
    /// Notices that arrived during a turn: each starts a turn after it.
    notices: Mutex<std::collections::VecDeque<Notice>>,
}

/// A notice waiting for the running turn to end.
struct Notice {
    content: String,
    source: String,
    meta: serde_json::Value,
}

/// What runs after a turn.
enum Next {
    Message(String),
    Notice(Notice),
}

impl Shared {
    fn busy(&self) -> std::sync::MutexGuard<'_, bool> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn claim(&self) -> bool {
        let mut b = self.busy();
        if *b {
            return false;
        }
        *b = true;
        true
    }

    fn release(&self) {
        *self.busy() = false;
    }

    /// After a turn: the next queued message, or the session is released
    /// (atomically with respect to a send deciding between start and queue).
    fn next_or_release(&self) -> Option<Next> {
        let mut b = self.busy();
        if let Some(m) = self.queue.pop() {
            return Some(Next::Message(m));
        }
        if let Some(n) = self
            .notices
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
        {
            return Some(Next::Notice(n));
        }
        *b = false;
        None
    }
}

/// The handle's side: dropping the last handle closes the command channel,
/// which ends the task once its turn is over.
struct Inner {
    /// Boxed: the channel allocates its slots 32 at a time and keeps a
    /// block for as long as the workstream is loaded (2.3 KB with the
    /// commands inline, 256 bytes boxed).
    commands: mpsc::UnboundedSender<Box<Command>>,
    shared: Arc<Shared>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Nobody can answer approvals or read events any more: stop the turn.
        self.shared.closed.cancel();
        self.shared.cancel.cancel();
        self.shared.events.approvals().deny_all();
    }
}

/// The answer to a submitted op (see [`SessionHandle::submit`]).
pub type Submitted =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Ack, OpError>> + Send>>;

enum Decided {
    Now(Result<Ack, OpError>),
    Later(Submitted),
}

/// Drives one session. Cheap to clone; every clone talks to the same task.
#[derive(Clone)]
pub struct SessionHandle {
    inner: Arc<Inner>,
}

/// Moves `session` onto its own task and returns its handle. The events go
/// where the session's sink sends them (see [`crate::events::EventSink::channel`]).
pub fn spawn(session: ChatSession) -> SessionHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        events: session.events().clone(),
        queue: session.queue(),
        cancel: session.cancel_handle(),
        busy: Mutex::new(false),
        closed: CancellationToken::new(),
        owner: session.acting_user_id().map(String::from),
        notices: Default::default(),
    });
    let task = tokio::spawn(run(Box::new(session), rx, shared.clone()));
    let inner = Arc::new(Inner {
        commands: tx,
        shared,
        task: Mutex::new(Some(task)),
    });
    SessionHandle { inner }
}

fn parts(input: Vec<InputPart>) -> Vec<ContentPart> {
    input
        .into_iter()
        .map(|p| match p {
            InputPart::Text { text } => ContentPart::Text { text },
            InputPart::Image { attachment_id, url } => ContentPart::Image { attachment_id, url },
        })
        .collect()
}

impl SessionHandle {
    /// Carries out `op`; see [`Ack`] for what each answers.
    ///
    /// The decision is taken at the call, not when the future is first
    /// polled: a send is started or queued, an edit claims the session (or
    /// is refused as busy) before `submit` returns, so a front end may spawn
    /// the future and go on knowing the order of its ops.
    pub fn submit(&self, op: Op) -> Submitted {
        match self.decide(op) {
            Decided::Now(r) => Box::pin(std::future::ready(r)),
            Decided::Later(f) => f,
        }
    }

    fn decide(&self, op: Op) -> Decided {
        let inner = &self.inner;
        if inner.shared.closed.is_cancelled() {
            return Decided::Now(Err(OpError::Closed));
        }
        Decided::Now(match op {
            Op::Send {
                text,
                parts: extra,
                client_send_id,
                sender,
                attachments,
            } => {
                // Under the busy lock: start a turn or queue, never both, never neither.
                let mut busy = inner.shared.busy();
                if !*busy {
                    *busy = true;
                    inner.shared.events.emit(Event::UserTurn(UserTurn {
                        content: text.clone(),
                        attachments,
                        sender,
                        client_send_ids: client_send_id.into_iter().collect(),
                        event_id: 0,
                    }));
                    let sent = inner.commands.send(Box::new(Command::Turn {
                        text,
                        parts: parts(extra),
                        source: None,
                    }));
                    if sent.is_err() {
                        *busy = false;
                        return Decided::Now(Err(OpError::Closed));
                    }
                    return Decided::Now(Ok(Ack::Started));
                }
                let msg_id = crate::random_hex();
                match inner.shared.queue.push(msg_id.clone(), text.clone()) {
                    Ok(position) => {
                        inner
                            .shared
                            .events
                            .emit(Event::MessageQueued(MessageQueued {
                                message: text,
                                msg_id: msg_id.clone(),
                                priority: "normal".into(),
                                sender,
                                client_send_id,
                            }));
                        Ok(Ack::Queued { msg_id, position })
                    }
                    Err(_) => Ok(Ack::QueueFull),
                }
            }
            Op::Notice {
                content,
                source,
                meta,
            } => {
                let mut busy = inner.shared.busy();
                if *busy {
                    let mut notices = inner
                        .shared
                        .notices
                        .lock()
                        .unwrap_or_else(|p| p.into_inner());
                    notices.push_back(Notice {
                        content,
                        source,
                        meta,
                    });
                    return Decided::Now(Ok(Ack::Queued {
                        msg_id: crate::random_hex(),
                        position: notices.len(),
                    }));
                }
                *busy = true;
                inner
                    .shared
                    .events
                    .emit(Event::SystemTurn(turnstone_protocol::SystemTurn {
                        content: content.clone(),
                        source: source.clone(),
                        meta,
                    }));
                if inner
                    .commands
                    .send(Box::new(Command::Turn {
                        text: content,
                        parts: Vec::new(),
                        source: Some(source),
                    }))
                    .is_err()
                {
                    *busy = false;
                    return Decided::Now(Err(OpError::Closed));
                }
                Ok(Ack::Started)
            }
            Op::Approve {
                cycle_id,
                call_id,
                decision,
            } => inner
                .shared
                .events
                .resolve(cycle_id.as_deref(), call_id.as_deref(), decision)
                .map(|cycle_id| Ack::Resolved { cycle_id })
                .map_err(OpError::from),
            Op::Cancel { force } => {
                let was_running = *inner.shared.busy();
                // A forced cancel also drops what was queued behind the turn.
                let dropped = if force {
                    inner.shared.queue.drain().len()
                } else {
                    0
                };
                inner.shared.cancel.cancel();
                Ok(Ack::Cancelled {
                    was_running,
                    dropped,
                })
            }
            Op::Unqueue { msg_id } => Ok(Ack::Unqueued {
                removed: inner.shared.queue.remove(&msg_id).is_some(),
            }),
            Op::Rewind { turns } => {
                return self.edit(
                    |reply| Command::Rewind { turns, reply },
                    |r| r.map(|text| Ack::Rewound { text }),
                );
            }
            Op::Retry => {
                return self.edit(
                    |reply| Command::Retry { reply },
                    |r| r.map(|()| Ack::Started),
                );
            }
            Op::Clear => {
                return self.edit(
                    |reply| Command::Clear { reply },
                    |()| Ok::<_, OpError>(Ack::Done),
                );
            }
            Op::Compact => {
                return self.edit(
                    |reply| Command::Compact { reply },
                    |r| r.map(|()| Ack::Done),
                );
            }
            Op::UseSkill { name, arguments } => {
                return self.edit(
                    |reply| Command::UseSkill {
                        name,
                        arguments,
                        reply,
                    },
                    |r| r.map(|skill| Ack::SkillSet { skill }),
                );
            }
            Op::SetModel { alias } => {
                return self.edit(
                    |reply| Command::SetModel { alias, reply },
                    |r| r.map(|model| Ack::ModelSet { model }),
                );
            }
        })
    }

    /// Claims the session for an edit now; the future waits for the task's
    /// answer and maps it with `done`.
    fn edit<T: Send + 'static, E>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Command,
        done: impl FnOnce(T) -> Result<Ack, E> + Send + 'static,
    ) -> Decided
    where
        OpError: From<E>,
    {
        if !self.inner.shared.claim() {
            return Decided::Now(Err(OpError::Busy));
        }
        let (tx, rx) = oneshot::channel();
        if self.inner.commands.send(Box::new(command(tx))).is_err() {
            self.inner.shared.release();
            return Decided::Now(Err(OpError::Closed));
        }
        Decided::Later(Box::pin(async move {
            let answer = rx.await.map_err(|_| OpError::Closed)?;
            done(answer).map_err(OpError::from)
        }))
    }

    /// Whether a turn or an edit holds the session.
    pub fn is_busy(&self) -> bool {
        *self.inner.shared.busy()
    }

    /// Messages waiting for the running turn.
    pub fn queued(&self) -> usize {
        self.inner.shared.queue.len()
    }

    /// Approval requests waiting for an answer.
    pub fn pending_approvals(&self) -> Vec<ApproveRequest> {
        self.inner.shared.events.approvals().waiting()
    }

    /// Whether the session was closed.
    pub fn is_closed(&self) -> bool {
        self.inner.shared.closed.is_cancelled()
    }

    /// Closes: cancels any turn, denies pending approvals, and waits (up to
    /// `grace`) for the task to finish saving. Idempotent.
    pub async fn close(&self, grace: std::time::Duration) {
        let inner = &self.inner;
        inner.shared.closed.cancel();
        inner.shared.cancel.cancel();
        inner.shared.events.approvals().deny_all();
        let task = inner.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = task {
            let abort = t.abort_handle();
            if tokio::time::timeout(grace, t).await.is_err() {
                abort.abort();
            }
        }
    }
}

/// Ends a turn: `cancelled` for a cancel (as the original sends it), then the outcome.
fn turn_ended(events: &EventSink, result: &Result<(), SessionError>) {
    if matches!(result, Err(SessionError::Cancelled)) {
        events.emit(Event::Cancelled);
    }
    events.turn_ended(TurnOutcome::of(result));
}

async fn run(
    mut session: Box<ChatSession>,
    mut rx: mpsc::UnboundedReceiver<Box<Command>>,
    inner: Arc<Shared>,
) {
    loop {
        let command = tokio::select! {
            c = rx.recv() => c,
            () = inner.closed.cancelled() => None,
        };
        let Some(command) = command else { break };
        // Boxed: a task's future is as large as its largest state, and a
        // turn's is ~10 KB, which every loaded workstream's task would hold
        // between turns as well. The session is boxed for the same reason:
        // an async fn keeps a moved-in argument in two slots of its state.
        Box::pin(handle(&mut session, *command, &inner)).await;
    }
    inner.release();
}

/// Carries out one command.
async fn handle(session: &mut ChatSession, command: Command, inner: &Shared) {
    let events = &inner.events;
    match command {
        Command::Turn {
            text,
            parts,
            source,
        } => {
            let r = match source {
                Some(source) => session.send_notice(&text, &source).await,
                None => session.send_with(&text, parts).await,
            };
            turn_ended(events, &r);
            if r.is_ok()
                && let Some(job) = session.title_job().await
            {
                // Beside the session: the next turn need not wait for
                // it; closing the workstream stops it.
                tokio::spawn(job.stopped_by(inner.closed.child_token()).run());
            }
            run_queued(session, inner).await;
        }
        Command::Retry { reply } => {
            if let Err(e) = session.check_retry() {
                inner.release();
                let _ = reply.send(Err(e));
                return;
            }
            events.emit(Event::ClearUi(Reason {
                reason: "retry".into(),
            }));
            let _ = reply.send(Ok(()));
            let r = session.retry().await;
            turn_ended(events, &r);
            run_queued(session, inner).await;
        }
        Command::Rewind { turns, reply } => {
            let r = session.rewind(turns).await;
            if r.is_ok() {
                events.emit(Event::ClearUi(Reason {
                    reason: "rewind".into(),
                }));
            }
            inner.release();
            let _ = reply.send(r);
        }
        Command::Clear { reply } => {
            session.clear();
            events.emit(Event::ClearUi(Reason {
                reason: "clear".into(),
            }));
            inner.release();
            let _ = reply.send(());
        }
        Command::Compact { reply } => {
            let r = session.compact().await;
            inner.release();
            let _ = reply.send(r);
        }
        Command::UseSkill {
            name,
            arguments,
            reply,
        } => {
            let r = match name {
                Some(name) => session
                    .activate_skill(&name, &arguments)
                    .await
                    .map(Some)
                    .map_err(|e| SessionError::Edit(EditError::Skill(e))),
                None => {
                    session.deactivate_skill().await;
                    Ok(None)
                }
            };
            inner.release();
            let _ = reply.send(r);
        }
        Command::SetModel { alias, reply } => {
            let r = session
                .set_model_alias(&alias)
                .await
                .map(|()| session.model().1.to_string());
            inner.release();
            let _ = reply.send(r);
        }
    }
}

/// Messages queued during the last model answer had no tool-result seam to
/// join at: each becomes the next turn, announced as a `user_turn`.
async fn run_queued(session: &mut ChatSession, inner: &Shared) {
    while let Some(next) = inner.next_or_release() {
        if inner.closed.is_cancelled() {
            inner.release();
            return;
        }
        let r = match next {
            Next::Message(text) => {
                inner.events.emit(Event::UserTurn(UserTurn {
                    content: text.clone(),
                    attachments: Vec::new(),
                    sender: inner.owner.clone(),
                    client_send_ids: Vec::new(),
                    event_id: 0,
                }));
                session.send_with(&text, Vec::new()).await
            }
            Next::Notice(n) => {
                inner
                    .events
                    .emit(Event::SystemTurn(turnstone_protocol::SystemTurn {
                        content: n.content.clone(),
                        source: n.source.clone(),
                        meta: n.meta,
                    }));
                session.send_notice(&n.content, &n.source).await
            }
        };
        turn_ended(&inner.events, &r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future a function of three arguments returns.
    fn future_size<A, B, C, F>(_: impl FnOnce(A, B, C) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn a_workstreams_task_does_not_hold_a_turns_state_between_turns() {
        // Every loaded workstream's task is this future for as long as the
        // workstream is loaded; a turn's state is allocated while it runs.
        // It was 10,144 bytes with the turn's state inline.
        let task = future_size(run);
        assert!(task <= 512, "the runner's future is {task} bytes");
    }
}
