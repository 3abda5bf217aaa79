//! The agent interfaces of WIT 0.2.0 — `session-info`, `memory`, `history`
//! and `skills` — on the host side: each call checks the plugin's capability
//! (a denial carries the grant to add) and is answered by the calling
//! session ([`SessionHost`], lent through the call's
//! [`crate::ToolOutputSink`]). Who may see what is the session's business:
//! the host never lets a plugin name another user, workstream or project.

use crate::bindings::v0_2_0::host::turnstone::plugin0_2_0::{
    history, memory, session_info, skills,
};
use crate::capability::{Access, Denial};
use crate::state::HostState;
use futures::future::BoxFuture;
use std::sync::Arc;

pub use history::{HistoryError, Hit};
pub use memory::{Memory, MemoryError, MemoryType, SaveRequest, Scope};
pub use session_info::{Session, SessionKind};
pub use skills::{Skill, SkillArgument, SkillInfo, SkillsError};

/// Why an agent call had no session to answer it.
pub const NO_SESSION: &str =
    "no session is attached to this call (a direct call such as `turnstone tool` or an MCP client)";

/// What the calling session lends a tool call: its identity and the stores
/// it reaches on its user's behalf. Every method answers for the caller only.
pub trait SessionHost: Send + Sync {
    /// Who and where the caller is.
    fn info(&self) -> Session;
    /// Saves (upserts) a memory in one of the caller's scopes.
    fn memory_save(&self, req: SaveRequest) -> BoxFuture<'static, Result<Memory, MemoryError>>;
    /// One memory of the caller's scope.
    fn memory_get(
        &self,
        name: String,
        scope: Scope,
    ) -> BoxFuture<'static, Result<Option<Memory>, MemoryError>>;
    /// Memories the caller may see matching `query`, best first.
    fn memory_search(
        &self,
        query: String,
        scope: Option<Scope>,
        limit: u32,
    ) -> BoxFuture<'static, Result<Vec<Memory>, MemoryError>>;
    /// Memories the caller may see, newest first.
    fn memory_list(
        &self,
        scope: Option<Scope>,
        kind: Option<MemoryType>,
        limit: u32,
    ) -> BoxFuture<'static, Result<Vec<Memory>, MemoryError>>;
    /// Deletes a memory of the caller's scope.
    fn memory_delete(
        &self,
        name: String,
        scope: Scope,
    ) -> BoxFuture<'static, Result<bool, MemoryError>>;
    /// Full-text search of the caller's own conversations.
    fn history_search(
        &self,
        query: String,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, Result<Vec<Hit>, HistoryError>>;
    /// Every skill.
    fn skills_list(&self) -> BoxFuture<'static, Result<Vec<SkillInfo>, SkillsError>>;
    /// The best skills for `query`.
    fn skills_search(
        &self,
        query: String,
        limit: u32,
    ) -> BoxFuture<'static, Result<Vec<SkillInfo>, SkillsError>>;
    /// One skill with its body.
    fn skills_get(&self, name: String) -> BoxFuture<'static, Result<Option<Skill>, SkillsError>>;
    /// Activates a skill in the calling session.
    fn skills_activate(
        &self,
        name: String,
        arguments: Vec<(String, String)>,
    ) -> BoxFuture<'static, Result<SkillInfo, SkillsError>>;
    /// Saves a `SKILL.md` document as the next version of its skill.
    fn skills_save(&self, document: String) -> BoxFuture<'static, Result<SkillInfo, SkillsError>>;

    // The work interfaces (`agents`, `watches`, `notify-targets`,
    // `preview`): a session that does not offer one keeps the default,
    // which says so.

    /// Runs a sub-agent for tool call `call_id` of the caller.
    fn run_task(
        &self,
        call_id: String,
        request: super::work::TaskRequest,
    ) -> BoxFuture<'static, Result<super::work::TaskResult, super::work::AgentError>> {
        let _ = (call_id, request);
        Box::pin(async {
            Err(super::work::AgentError::Unavailable(
                "sub-agents are not available in this session".into(),
            ))
        })
    }

    /// Creates a watch of the caller's workstream whose command runs with
    /// `plugin`'s grants.
    fn watch_create(
        &self,
        plugin: String,
        spec: super::work::WatchSpec,
    ) -> BoxFuture<'static, Result<super::work::Watch, super::work::WatchError>> {
        let _ = (plugin, spec);
        Box::pin(async { Err(super::work::watches_unavailable()) })
    }

    /// The caller's workstream's active watches.
    fn watch_list(
        &self,
    ) -> BoxFuture<'static, Result<Vec<super::work::Watch>, super::work::WatchError>> {
        Box::pin(async { Err(super::work::watches_unavailable()) })
    }

    /// Cancels one of them by name or id prefix.
    fn watch_cancel(
        &self,
        name_or_id: String,
    ) -> BoxFuture<'static, Result<super::work::Watch, super::work::WatchError>> {
        let _ = name_or_id;
        Box::pin(async { Err(super::work::watches_unavailable()) })
    }

    /// The caller's notification targets.
    fn notify_targets(
        &self,
    ) -> BoxFuture<'static, Result<Vec<super::work::Target>, super::work::NotifyError>> {
        Box::pin(async {
            Err(super::work::NotifyError::Unavailable(
                "no notification targets are configured for this session".into(),
            ))
        })
    }

    /// Delivers to a target the host serves.
    fn notify_deliver(
        &self,
        target: String,
        notification: super::work::Notification,
    ) -> BoxFuture<'static, Result<String, super::work::NotifyError>> {
        let _ = (target, notification);
        Box::pin(async {
            Err(super::work::NotifyError::Unavailable(
                "no channel adapter delivers notifications here".into(),
            ))
        })
    }

    /// An attachment of the caller's workstream.
    fn preview_attachment(
        &self,
        id: String,
    ) -> BoxFuture<'static, Result<super::work::AttachmentData, super::work::PreviewError>> {
        let _ = id;
        Box::pin(async { Err(super::work::preview_unavailable()) })
    }

    /// Opens content in the caller's preview pane for tool call `call_id`.
    fn preview_open(
        &self,
        call_id: String,
        content: super::work::Content,
    ) -> BoxFuture<'static, Result<super::work::Opened, super::work::PreviewError>> {
        let _ = (call_id, content);
        Box::pin(async { Err(super::work::preview_unavailable()) })
    }
}

impl HostState {
    /// Counts and logs a denial; returns the WIT error for the guest.
    pub(super) fn deny(
        &self,
        d: &Denial,
    ) -> crate::bindings::v0_1_0::host::turnstone::plugin::types::CapabilityError {
        self.plugin.counters.denial();
        tracing::warn!(plugin = %self.plugin.name, "{d}");
        self.audit.denial(d.to_string());
        super::denial_to_wit(d)
    }

    pub(super) fn session_host(&self) -> Option<Arc<dyn SessionHost>> {
        self.tool_sink.session()
    }
}

impl session_info::Host for HostState {
    async fn current(
        &mut self,
    ) -> wasmtime::Result<Result<Session, session_info::CapabilityError>> {
        if let Err(d) = self.plugin.caps.check_session() {
            return Ok(Err(self.deny(&d)));
        }
        Ok(Ok(match self.session_host() {
            Some(s) => s.info(),
            None => Session {
                workstream_id: None,
                user_id: None,
                model_alias: None,
                workspace: None,
                project_id: None,
                kind: SessionKind::None,
                context_id: String::new(),
            },
        }))
    }
}

/// Checks `need` on the memory capability, then asks the session.
macro_rules! memory_call {
    ($self:ident, $need:expr, |$s:ident| $call:expr) => {{
        if let Err(d) = $self.plugin.caps.check_memory($need) {
            return Ok(Err(MemoryError::Denied($self.deny(&d))));
        }
        match $self.session_host() {
            Some($s) => Ok($call.await),
            None => Ok(Err(MemoryError::Unavailable(NO_SESSION.into()))),
        }
    }};
}

impl memory::Host for HostState {
    async fn save(
        &mut self,
        request: SaveRequest,
    ) -> wasmtime::Result<Result<Memory, MemoryError>> {
        memory_call!(self, Access::ReadWrite, |s| s.memory_save(request))
    }

    async fn get(
        &mut self,
        name: String,
        scope: Scope,
    ) -> wasmtime::Result<Result<Option<Memory>, MemoryError>> {
        memory_call!(self, Access::ReadOnly, |s| s.memory_get(name, scope))
    }

    async fn search(
        &mut self,
        query: String,
        scope: Option<Scope>,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<Memory>, MemoryError>> {
        memory_call!(self, Access::ReadOnly, |s| s
            .memory_search(query, scope, limit))
    }

    async fn list(
        &mut self,
        scope: Option<Scope>,
        kind: Option<MemoryType>,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<Memory>, MemoryError>> {
        memory_call!(self, Access::ReadOnly, |s| s
            .memory_list(scope, kind, limit))
    }

    async fn delete(
        &mut self,
        name: String,
        scope: Scope,
    ) -> wasmtime::Result<Result<bool, MemoryError>> {
        memory_call!(self, Access::ReadWrite, |s| s.memory_delete(name, scope))
    }
}

impl history::Host for HostState {
    async fn search(
        &mut self,
        query: String,
        limit: u32,
        offset: u32,
    ) -> wasmtime::Result<Result<Vec<Hit>, HistoryError>> {
        if let Err(d) = self.plugin.caps.check_history() {
            return Ok(Err(HistoryError::Denied(self.deny(&d))));
        }
        match self.session_host() {
            Some(s) => Ok(s.history_search(query, limit, offset).await),
            None => Ok(Err(HistoryError::Unavailable(NO_SESSION.into()))),
        }
    }
}

/// Checks `need` on the skills capability, then asks the session.
macro_rules! skills_call {
    ($self:ident, $need:expr, |$s:ident| $call:expr) => {{
        if let Err(d) = $self.plugin.caps.check_skills($need) {
            return Ok(Err(SkillsError::Denied($self.deny(&d))));
        }
        match $self.session_host() {
            Some($s) => Ok($call.await),
            None => Ok(Err(SkillsError::Unavailable(NO_SESSION.into()))),
        }
    }};
}

impl skills::Host for HostState {
    async fn list(&mut self) -> wasmtime::Result<Result<Vec<SkillInfo>, SkillsError>> {
        skills_call!(self, Access::ReadOnly, |s| s.skills_list())
    }

    async fn search(
        &mut self,
        query: String,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<SkillInfo>, SkillsError>> {
        skills_call!(self, Access::ReadOnly, |s| s.skills_search(query, limit))
    }

    async fn get(&mut self, name: String) -> wasmtime::Result<Result<Option<Skill>, SkillsError>> {
        skills_call!(self, Access::ReadOnly, |s| s.skills_get(name))
    }

    async fn activate(
        &mut self,
        name: String,
        arguments: Vec<(String, String)>,
    ) -> wasmtime::Result<Result<SkillInfo, SkillsError>> {
        // Activating changes what the session offers and may approve:
        // a write, not a read.
        skills_call!(self, Access::ReadWrite, |s| s
            .skills_activate(name, arguments))
    }

    async fn save(&mut self, document: String) -> wasmtime::Result<Result<SkillInfo, SkillsError>> {
        skills_call!(self, Access::ReadWrite, |s| s.skills_save(document))
    }
}
