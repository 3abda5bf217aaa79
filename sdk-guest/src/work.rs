//! Work a tool hands to the host for its caller (WIT 0.2.0): [`agents`]
//! (sub-agents), [`watches`], [`notify`] targets and the [`preview`] pane.
//! Each needs its capability in `plugin.toml` (`agents = true`,
//! `watches = true`, `notify = true`, `preview = true`) and the operator's
//! grant; without it a call fails with [`AgentError::Denied`].

pub use crate::agent::AgentError;

/// Sub-agents (`agents = true`).
pub mod agents {
    use super::AgentError;
    use crate::bindings::turnstone::plugin0_2_0::agents as w;

    pub use w::{TaskRequest, TaskResult};

    /// How a sub-agent ended without an answer.
    #[derive(Debug, Clone)]
    pub enum TaskError {
        /// The capability, the request or the session.
        Agent(AgentError),
        /// It could not finish (its model failed).
        Failed(String),
        /// It was cancelled with its caller.
        Cancelled,
    }

    impl std::fmt::Display for TaskError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                Self::Agent(e) => e.fmt(f),
                Self::Failed(m) => write!(f, "the sub-agent failed: {m}"),
                Self::Cancelled => f.write_str("the sub-agent was cancelled"),
            }
        }
    }

    /// Runs a sub-agent to its answer.
    pub fn run_task(request: &TaskRequest) -> Result<TaskResult, TaskError> {
        w::run_task(request).map_err(|e| match e {
            w::AgentError::Denied(d) => TaskError::Agent(AgentError::Denied(d)),
            w::AgentError::Invalid(m) => TaskError::Agent(AgentError::Invalid(m)),
            w::AgentError::Unavailable(m) => TaskError::Agent(AgentError::Unavailable(m)),
            w::AgentError::Failed(m) => TaskError::Failed(m),
            w::AgentError::Cancelled => TaskError::Cancelled,
        })
    }
}

/// The calling workstream's watches (`watches = true`).
pub mod watches {
    use super::AgentError;
    use crate::bindings::turnstone::plugin0_2_0::watches as w;

    pub use w::{Watch, WatchSpec};

    fn err(e: w::WatchError) -> AgentError {
        match e {
            w::WatchError::Denied(d) => AgentError::Denied(d),
            w::WatchError::Invalid(m) => AgentError::Invalid(m),
            w::WatchError::Unavailable(m) => AgentError::Unavailable(m),
        }
    }

    /// Parses a stop condition; the error says what is wrong and where.
    pub fn check_condition(condition: &str) -> Result<(), String> {
        w::check_condition(condition)
    }

    /// Creates a watch.
    pub fn create(spec: &WatchSpec) -> Result<Watch, AgentError> {
        w::create(spec).map_err(err)
    }

    /// The active watches.
    pub fn list() -> Result<Vec<Watch>, AgentError> {
        w::list().map_err(err)
    }

    /// Cancels one by name or id prefix.
    pub fn cancel(name_or_id: &str) -> Result<Watch, AgentError> {
        w::cancel(name_or_id).map_err(err)
    }
}

/// The caller's notification targets (`notify = true`).
pub mod notify {
    use super::AgentError;
    use crate::bindings::turnstone::plugin0_2_0::notify_targets as w;

    pub use w::{Notification, Target, TargetKind};

    fn err(e: w::NotifyError) -> AgentError {
        match e {
            w::NotifyError::Denied(d) => AgentError::Denied(d),
            w::NotifyError::Invalid(m) => AgentError::Invalid(m),
            w::NotifyError::Unavailable(m) => AgentError::Unavailable(m),
        }
    }

    /// The targets of the calling workstream and its user.
    pub fn targets() -> Result<Vec<Target>, AgentError> {
        w::list().map_err(err)
    }

    /// Delivers to a target the host serves (a channel); returns its id.
    pub fn deliver(target: &str, notification: &Notification) -> Result<String, AgentError> {
        w::deliver(target, notification).map_err(err)
    }
}

/// The preview pane (`preview = true`).
pub mod preview {
    use super::AgentError;
    use crate::bindings::turnstone::plugin0_2_0::preview as w;

    pub use w::{AttachmentData, Content, Opened};

    fn err(e: w::PreviewError) -> AgentError {
        match e {
            w::PreviewError::Denied(d) => AgentError::Denied(d),
            w::PreviewError::Invalid(m) => AgentError::Invalid(m),
            w::PreviewError::Unavailable(m) => AgentError::Unavailable(m),
        }
    }

    /// An attachment of the calling workstream.
    pub fn attachment(id: &str) -> Result<AttachmentData, AgentError> {
        w::attachment(id).map_err(err)
    }

    /// Shows `content` in the caller's preview pane.
    pub fn open(content: &Content) -> Result<Opened, AgentError> {
        w::open(content).map_err(err)
    }
}
