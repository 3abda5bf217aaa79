//! The calling session's identity and the stores it reaches on its user's
//! behalf (WIT 0.2.0): [`session`], [`memory`], [`history`], [`skills`].
//! Each needs its capability in `plugin.toml` (`session = true`,
//! `memory = "read-only" | "read-write"`, `history = true`,
//! `skills = "read-only" | "read-write"`) and the operator's grant; without
//! it a call fails with [`AgentError::Denied`] naming the grant to add.

use crate::CapabilityError;
use std::fmt;

/// Why an agent call failed.
#[derive(Debug, Clone)]
pub enum AgentError {
    /// The capability is not granted (the error says which grant allows it).
    Denied(CapabilityError),
    /// The request is wrong (unknown skill, a scope the session has not, …).
    Invalid(String),
    /// No session, or its store failed.
    Unavailable(String),
}

impl fmt::Display for AgentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied(d) => f.write_str(&crate::describe_denial(d)),
            Self::Invalid(m) => f.write_str(m),
            Self::Unavailable(m) => write!(f, "unavailable: {m}"),
        }
    }
}

impl std::error::Error for AgentError {}

/// Who and where the caller is (`session = true`).
pub mod session {
    use super::AgentError;
    use crate::bindings::turnstone::plugin0_2_0::session_info as w;

    pub use w::{Session, SessionKind};

    /// The calling session.
    pub fn current() -> Result<Session, AgentError> {
        w::current().map_err(AgentError::Denied)
    }
}

/// Structured memories the caller may see (`memory = "read-only"` to read,
/// `"read-write"` to save and delete).
pub mod memory {
    use super::AgentError;
    use crate::bindings::turnstone::plugin0_2_0::memory as w;

    pub use w::{Memory, MemoryType, SaveRequest, Scope};

    fn err(e: w::MemoryError) -> AgentError {
        match e {
            w::MemoryError::Denied(d) => AgentError::Denied(d),
            w::MemoryError::Invalid(m) => AgentError::Invalid(m),
            w::MemoryError::Unavailable(m) => AgentError::Unavailable(m),
        }
    }

    /// Saves (upserts by name and scope).
    pub fn save(request: &SaveRequest) -> Result<Memory, AgentError> {
        w::save(request).map_err(err)
    }

    /// One memory.
    pub fn get(name: &str, scope: Scope) -> Result<Option<Memory>, AgentError> {
        w::get(name, scope).map_err(err)
    }

    /// Best matches for `query`.
    pub fn search(
        query: &str,
        scope: Option<Scope>,
        limit: u32,
    ) -> Result<Vec<Memory>, AgentError> {
        w::search(query, scope, limit).map_err(err)
    }

    /// Newest first.
    pub fn list(
        scope: Option<Scope>,
        kind: Option<MemoryType>,
        limit: u32,
    ) -> Result<Vec<Memory>, AgentError> {
        w::list(scope, kind, limit).map_err(err)
    }

    /// Deletes; false when there was none.
    pub fn delete(name: &str, scope: Scope) -> Result<bool, AgentError> {
        w::delete(name, scope).map_err(err)
    }
}

/// The caller's own past conversations (`history = true`).
pub mod history {
    use super::AgentError;
    use crate::bindings::turnstone::plugin0_2_0::history as w;

    pub use w::Hit;

    /// Full-text search, newest first; `offset` pages through more.
    pub fn search(query: &str, limit: u32, offset: u32) -> Result<Vec<Hit>, AgentError> {
        w::search(query, limit, offset).map_err(|e| match e {
            w::HistoryError::Denied(d) => AgentError::Denied(d),
            w::HistoryError::Invalid(m) => AgentError::Invalid(m),
            w::HistoryError::Unavailable(m) => AgentError::Unavailable(m),
        })
    }
}

/// The skills catalogue (`skills = "read-only"` to list, search, get and
/// activate; `"read-write"` to save).
pub mod skills {
    use super::AgentError;
    use crate::bindings::turnstone::plugin0_2_0::skills as w;

    pub use w::{Skill, SkillArgument, SkillInfo};

    fn err(e: w::SkillsError) -> AgentError {
        match e {
            w::SkillsError::Denied(d) => AgentError::Denied(d),
            w::SkillsError::Invalid(m) => AgentError::Invalid(m),
            w::SkillsError::Unavailable(m) => AgentError::Unavailable(m),
        }
    }

    /// Every skill.
    pub fn list() -> Result<Vec<SkillInfo>, AgentError> {
        w::list().map_err(err)
    }

    /// The best matches for `query`.
    pub fn search(query: &str, limit: u32) -> Result<Vec<SkillInfo>, AgentError> {
        w::search(query, limit).map_err(err)
    }

    /// One skill with its body.
    pub fn get(name: &str) -> Result<Option<Skill>, AgentError> {
        w::get(name).map_err(err)
    }

    /// Activates a skill in the calling session.
    pub fn activate(name: &str, arguments: &[(String, String)]) -> Result<SkillInfo, AgentError> {
        w::activate(name, arguments).map_err(err)
    }

    /// Saves a `SKILL.md` document as the next version of its skill.
    pub fn save(document: &str) -> Result<SkillInfo, AgentError> {
        w::save(document).map_err(err)
    }
}
