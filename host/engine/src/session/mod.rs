//! The conversation loop: stream the model, prepare and approve tool calls, run
//! them (at most four at once), append the results, and loop until the model
//! answers without tool calls.

mod agent;
mod approve;
mod binding;
mod compact;
mod edit;
mod mcp;
mod model_access;
mod notify;
mod preview;
mod prompt;
mod queue;
mod skill;
mod stream;
mod task;
mod title;
mod tools;
mod usage;

pub use agent::{AgentContext, ChannelDelivery, LOCAL_USER, save_skill};
pub use binding::{DEFAULT_CONTEXT_WINDOW, ModelBinding, ReportedCapabilities, ServedWindow};
pub use edit::{EditError, MODEL_ALIAS_KEY};
pub use preview::{preview_cap, preview_url};
pub use prompt::{MEMORY_INDEX_BUDGET, memory_index};
pub use queue::{CancelHandle, MAX_QUEUED, MessageQueue, QueueFull};
pub use skill::{ActiveSkill, SKILL_KEY, SkillChoice, SkillRenderError, SkillSlot};
pub use task::{AlwaysSet, Budget, MAX_DEPTH, PARENT_CALL_KEY, TASK_KIND};
pub use title::{TitleJob, clean as clean_title};

use crate::events::EventSink;
use crate::turn::{Role, Turn};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use stream::StreamFailure;
use tokio_util::sync::CancellationToken;
use turnstone_protocol::{Event, SessionState, StateChange};

use turnstone_runtime::PluginSet;

/// Tool calls that may run at the same time.
pub const MAX_PARALLEL_TOOLS: usize = 4;
/// Result text of a call that was cancelled before it started.
pub const NOT_STARTED: &str =
    "Tool execution was cancelled before this call started; it did not run.";
/// The user-side label of a compaction summary.
pub const COMPACTION_LABEL: &str =
    "[Summary of the earlier conversation — the original turns were compacted]";
/// What the model is asked when compacting.
pub const COMPACTION_PROMPT: &str = "Summarize the conversation so far for your own future reference: the user's goals, decisions made, facts learned (files, commands, results), open questions and next steps. Be concise but keep every detail needed to continue the work. Reply with the summary only.";
/// Re-issues of a stream that died after it had started, per attempt.
pub const MAX_REISSUES: u32 = 2;
/// Attempts per model call (1 + 3 retries).
pub const MAX_ATTEMPTS: u32 = 4;

/// Session settings.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Workstream id.
    pub session_id: String,
    /// Workspace directory.
    pub workspace: PathBuf,
    /// Skip every approval prompt.
    pub skip_permissions: bool,
    /// Tool output limit in characters (default: half the context window).
    pub tool_truncation: Option<usize>,
    /// Base of the retry backoff (`base · 2^attempt`; default 1 s).
    pub retry_base: std::time::Duration,
    /// Compact when a prompt reaches this share of the context window (percent;
    /// default 80, 0 disables).
    pub auto_compact_pct: u8,
    /// Named in every `state_change` (the workstream's owner).
    pub acting_user_id: Option<String>,
    /// `[tools] search`: deferring MCP tools behind `tool_search`.
    pub tool_search: turnstone_mcp::search::SearchSettings,
    /// Set for a sub-agent: whose tool call runs it, at what depth.
    pub task: Option<turnstone_protocol::AgentOrigin>,
    /// Instructions that lead every request (a sub-agent's brief).
    pub instructions: Option<String>,
}

impl SessionConfig {
    /// Defaults for `session_id` in `workspace`.
    pub fn new(session_id: impl Into<String>, workspace: PathBuf) -> Self {
        Self {
            session_id: session_id.into(),
            workspace,
            skip_permissions: false,
            tool_truncation: None,
            retry_base: std::time::Duration::from_secs(1),
            auto_compact_pct: 80,
            acting_user_id: None,
            tool_search: Default::default(),
            task: None,
            instructions: None,
        }
    }
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The provider answered with an error (the last one, after retries and
    /// fallbacks).
    #[error("model request failed: {}", .0.message())]
    Provider(turnstone_runtime::provider_error::ProviderError),
    /// The model answered a compaction request with nothing.
    #[error("the model returned an empty summary; the conversation was not compacted")]
    EmptySummary,
    /// No model could be asked (every binding was skipped).
    #[error("no model is available")]
    NoModel,
    /// The provider component itself failed.
    #[error(transparent)]
    Plugin(#[from] turnstone_runtime::CallError),
    /// History could not be lowered for the provider.
    #[error(transparent)]
    Lower(#[from] crate::lower::LowerError),
    /// A turn could not be saved or loaded; the turn was not lost from memory.
    #[error("storage: {0}")]
    Storage(#[from] turnstone_storage::StorageError),
    /// A stored turn could not be decoded.
    #[error(transparent)]
    Decode(#[from] crate::persist::DecodeError),
    /// The turn was cancelled; partial output and tool outcomes were recorded.
    #[error("cancelled")]
    Cancelled,
    /// The model registry cannot serve the session's alias.
    #[error(transparent)]
    Model(#[from] crate::models::ModelError),
    /// A rewind, retry or model switch was refused.
    #[error(transparent)]
    Edit(#[from] EditError),
}

/// One conversation.
pub struct ChatSession {
    binding: ModelBinding,
    fallbacks: Vec<ModelBinding>,
    store: Option<(turnstone_storage::Storage, String)>,
    /// Live: every model request and tool batch takes the current snapshot.
    tools: PluginSet,
    events: EventSink,
    cfg: SessionConfig,
    turns: Vec<Turn>,
    always: AlwaysSet,
    next_call: u64,
    cancel: CancelHandle,
    token: CancellationToken,
    /// Id of the newest saved row.
    last_saved_id: i64,
    /// Row id of each turn in `turns` (0 when it was not saved).
    row_ids: Vec<i64>,
    /// Prompt tokens of the latest model request (sizes the remaining budget).
    last_prompt_tokens: Option<u32>,
    queue: MessageQueue,
    compact_due: bool,
    /// While compacting: the request history used instead of `turns`.
    request_override: Option<Vec<Turn>>,
    /// The last attempt received at least one stream event before failing.
    stream_started: bool,
    /// Where bindings come from when the registry can be reloaded.
    live: Option<(Arc<crate::models::LiveModels>, Option<String>)>,
    /// Counters the `status` event reports.
    usage: Usage,
    /// MCP servers whose tools join the session's.
    mcp: Option<Arc<turnstone_mcp::McpHub>>,
    /// Deferred tools found by `tool_search`: visible from then on.
    found_tools: HashSet<String>,
    /// What the agent interfaces (memory, history, skills) reach.
    agent: AgentContext,
    /// The active skill, shared with tool calls.
    skill: SkillSlot,
    /// The memory index, once built (`Some(None)`: nothing to list).
    memory_index: Option<Option<String>>,
    /// Compactions so far in this process (names the context without storage).
    compactions: u32,
    /// A sub-agent stopped at its budget.
    exhausted: bool,
    /// The workstream's project, once looked up.
    project: Option<Option<String>>,
    /// Titles on (`Some`), with their own binding or the session's (`None`).
    titles: Option<Option<ModelBinding>>,
    /// The title call was considered (once per session).
    titled: bool,
    /// Policies, guards, Smart Approvals and the audit of decisions.
    safety: Arc<crate::safety::Safety>,
    /// The acting user's role and when it was read (policies may name roles).
    role: Option<(std::time::Instant, Option<String>)>,
}

/// What `status` reports besides the latest call's tokens.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    tool_calls_this_turn: u32,
    turn_count: u32,
    /// Over the session's life (what a sub-agent's budget counts).
    model_calls: u32,
    tool_calls: u32,
    tokens: u64,
}

impl ChatSession {
    /// A new, empty session.
    pub fn new(
        binding: ModelBinding,
        tools: impl Into<PluginSet>,
        events: EventSink,
        cfg: SessionConfig,
    ) -> Self {
        Self {
            binding,
            fallbacks: Vec::new(),
            store: None,
            tools: tools.into(),
            events,
            cfg,
            turns: Vec::new(),
            always: AlwaysSet::default(),
            next_call: 1,
            cancel: CancelHandle::default(),
            token: CancellationToken::new(),
            last_saved_id: 0,
            row_ids: Vec::new(),
            last_prompt_tokens: None,
            queue: MessageQueue::default(),
            compact_due: false,
            request_override: None,
            stream_started: false,
            live: None,
            usage: Usage::default(),
            mcp: None,
            found_tools: HashSet::new(),
            agent: AgentContext::default(),
            skill: SkillSlot::default(),
            memory_index: None,
            compactions: 0,
            exhausted: false,
            project: None,
            titles: None,
            titled: false,
            safety: Arc::new(crate::safety::Safety::default()),
            role: None,
        }
    }

    /// Checks tool calls against `safety`'s policies and guards (default:
    /// the guards with default settings, no policies, no audit).
    pub fn with_safety(mut self, safety: Arc<crate::safety::Safety>) -> Self {
        self.safety = safety;
        self
    }

    /// Sets what the agent interfaces reach: the skills catalogue, the
    /// alias's name, whether the database is one local user's.
    pub fn with_agent(mut self, agent: AgentContext) -> Self {
        self.agent = agent;
        self
    }

    /// The skill active now.
    pub fn active_skill(&self) -> Option<ActiveSkill> {
        self.skill.get()
    }

    /// Activates skill `name` with `arguments` (the next requests carry its
    /// instructions and follow its `allowed_tools`); recorded with the
    /// workstream. The error says what is wrong.
    pub async fn activate_skill(
        &mut self,
        name: &str,
        arguments: &std::collections::BTreeMap<String, String>,
    ) -> Result<crate::skills::SkillInfo, String> {
        let lib = self
            .agent
            .skills
            .clone()
            .ok_or_else(|| "no skills are configured here".to_string())?;
        let mut vars = std::collections::BTreeMap::new();
        if let Some(m) = &self.agent.model_alias {
            vars.insert("model", m.clone());
        }
        if let Some(ws) = self.ws_id() {
            vars.insert("ws_id", ws.to_string());
        }
        vars.insert("workspace", self.cfg.workspace.display().to_string());
        let active = ActiveSkill::render(&lib, name, arguments, &vars).await?;
        if let Some((db, ws)) = &self.store {
            active.persist(db, ws).await;
        }
        let info = active.info.clone();
        self.skill.set(Some(active));
        Ok(info)
    }

    /// Drops the active skill (and its record with the workstream).
    pub async fn deactivate_skill(&mut self) {
        self.skill.set(None);
        if let Some((db, ws)) = &self.store
            && let Err(e) = db.set_config(ws, SKILL_KEY, None).await
        {
            tracing::warn!(
                workstream = ws.as_str(),
                "cannot clear the active skill: {e}"
            );
        }
    }

    /// Adds the tools of these MCP servers (live: a list change applies to
    /// the next model request).
    pub fn with_mcp(mut self, hub: Arc<turnstone_mcp::McpHub>) -> Self {
        self.mcp = Some(hub);
        self
    }

    /// Models to fall back to, in order, when the primary is unreachable.
    pub fn with_fallbacks(mut self, fallbacks: Vec<ModelBinding>) -> Self {
        self.fallbacks = fallbacks;
        self
    }

    /// Takes bindings from a live registry (alias `None` = its default), resolved
    /// at the start of every turn so reloads apply from the next turn on.
    pub fn with_live_models(
        mut self,
        live: Arc<crate::models::LiveModels>,
        alias: Option<String>,
    ) -> Self {
        self.live = Some((live, alias));
        self
    }

    /// Persists every turn to workstream `ws_id` as it is appended.
    pub fn with_storage(
        mut self,
        storage: turnstone_storage::Storage,
        ws_id: impl Into<String>,
    ) -> Self {
        self.store = Some((storage, ws_id.into()));
        self
    }

    /// The workstream's project, as the caller read it with the workstream's
    /// row (`None`: it has none), so the first model request does not read
    /// the row again for the memory index. Without it the session looks the
    /// project up once, when first needed.
    pub fn with_project(mut self, project_id: Option<String>) -> Self {
        self.project = Some(project_id);
        self
    }

    /// Loads the workstream's history (bounded by its latest valid compaction
    /// checkpoint) so the session continues where it stopped. An interrupted
    /// tool batch is repaired before the next model request.
    pub async fn resume(mut self) -> Result<Self, SessionError> {
        use turnstone_storage::types::LoadMode;
        let Some((db, ws_id)) = &self.store else {
            return Ok(self);
        };
        let rows = db.load_turns(ws_id, LoadMode::Resume).await?;
        self.last_saved_id = rows.iter().map(|r| r.id).max().unwrap_or(0);
        self.row_ids = rows.iter().map(|r| r.id).collect();
        self.turns = rows
            .iter()
            .map(crate::persist::from_row)
            .collect::<Result<_, _>>()?;
        // The alias chosen with `/model` comes back with the workstream; one
        // that no longer exists falls back to the default, with a notice.
        let saved = db.get_config(ws_id, edit::MODEL_ALIAS_KEY).await?;
        let saved_skill = db.get_config(ws_id, SKILL_KEY).await?;
        if let Some(alias) = saved
            && self.live.is_some()
            && let Err(e) = self.apply_model_alias(&alias)
        {
            self.emit(Event::info(format!(
                "saved model {alias:?} is not available ({e}); using the default"
            )));
        }
        // The skill the workstream was using comes back with it, in its
        // current version (an operator's fix applies to running work); a
        // version change is said.
        if let Some(choice) = saved_skill.and_then(|s| serde_json::from_str::<SkillChoice>(&s).ok())
            && self.agent.skills.is_some()
        {
            match self.activate_skill(&choice.name, &choice.arguments).await {
                Ok(info) if info.version != choice.version => {
                    self.emit(Event::info(format!(
                        "skill {:?} is now version {} (this workstream used version {})",
                        choice.name, info.version, choice.version
                    )));
                }
                Ok(_) => {}
                Err(e) => self.emit(Event::info(format!(
                    "saved skill {:?} is not available ({e}); continuing without it",
                    choice.name
                ))),
            }
        }
        Ok(self)
    }

    async fn append(&mut self, turn: Turn) -> Result<(), SessionError> {
        let saved = match &self.store {
            Some((db, ws_id)) => db.save_turn(ws_id, &crate::persist::to_row(&turn)).await,
            None => Ok(0),
        };
        // Keep the turn in memory even when saving failed: nothing is lost, and
        // the caller sees the error.
        self.turns.push(turn);
        self.row_ids.push(*saved.as_ref().unwrap_or(&0));
        let id = saved.map_err(SessionError::from)?;
        self.last_saved_id = self.last_saved_id.max(id);
        Ok(())
    }

    /// The queue for messages sent while a turn runs.
    pub fn queue(&self) -> MessageQueue {
        self.queue.clone()
    }

    /// A handle that cancels the running turn from another task.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// The workstream this session persists to, if any.
    pub fn ws_id(&self) -> Option<&str> {
        self.store.as_ref().map(|(_, id)| id.as_str())
    }

    /// Where this session's model usage is recorded (sessions that persist).
    pub(crate) fn ledger(&self) -> Option<usage::UsageLedger> {
        self.store.as_ref().map(|(db, ws)| {
            usage::UsageLedger::new(
                db.clone(),
                self.cfg.acting_user_id.clone(),
                Some(ws.clone()),
            )
        })
    }

    /// The canonical history.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    fn state(&self, state: SessionState) {
        self.emit(Event::StateChange(StateChange {
            state,
            acting_user_id: self.cfg.acting_user_id.clone(),
        }));
    }

    fn emit(&self, event: Event) {
        self.events.emit(event);
    }

    /// The user named in this session's `state_change` events.
    pub fn acting_user_id(&self) -> Option<&str> {
        self.cfg.acting_user_id.as_deref()
    }

    /// The sink this session emits into (its approvals included).
    pub fn events(&self) -> &EventSink {
        &self.events
    }

    /// Sends user input and runs the loop until the model stops calling tools.
    pub async fn send(&mut self, input: &str) -> Result<(), SessionError> {
        self.send_with(input, Vec::new()).await
    }

    /// Like [`Self::send`], with extra parts (images as `data:` URLs) in the
    /// user turn.
    pub async fn send_with(
        &mut self,
        input: &str,
        extra: Vec<crate::ContentPart>,
    ) -> Result<(), SessionError> {
        self.send_marked(input, extra, None).await
    }

    /// Runs a turn on a notice (a watch's result): it joins the
    /// conversation as a user-side turn marked with `source`, so the model
    /// answers it, while front ends show it as a system notice.
    pub async fn send_notice(&mut self, content: &str, source: &str) -> Result<(), SessionError> {
        self.send_marked(content, Vec::new(), Some(source.to_string()))
            .await
    }

    async fn send_marked(
        &mut self,
        input: &str,
        extra: Vec<crate::ContentPart>,
        source: Option<String>,
    ) -> Result<(), SessionError> {
        self.usage.tool_calls_this_turn = 0;
        let started = std::time::Instant::now();
        let result = self.send_inner(input, extra, source).await;
        if result.is_ok() {
            self.notify_completion(started.elapsed()).await;
        }
        if let Err(e) = &result
            && !matches!(
                e,
                SessionError::Provider(_) | SessionError::Plugin(_) | SessionError::Cancelled
            )
        {
            self.emit(Event::error(e.to_string()));
            self.state(SessionState::Error);
        }
        self.usage.turn_count += 1;
        result
    }

    async fn send_inner(
        &mut self,
        input: &str,
        extra: Vec<crate::ContentPart>,
        source: Option<String>,
    ) -> Result<(), SessionError> {
        self.token = self.cancel.fresh();
        if let Some((live, alias)) = &self.live {
            let (primary, fallbacks) = live.bindings(alias.as_deref())?;
            self.binding = primary;
            self.fallbacks = fallbacks;
        }
        // Compact between turns, so the new input follows the summary verbatim.
        if self.compact_due {
            self.compact_inner(compact::Tail::None, "auto").await?;
        }
        let mut user = Turn::text(Role::User, input);
        user.content.extend(extra);
        user.meta.source = source;
        self.append(user).await?;
        // A context-length refusal compacts and retries once per turn.
        let mut overflow_recovered = false;
        loop {
            let assistant = match self.stream_turn().await {
                Ok(t) => t,
                Err(StreamFailure::Cancelled(partial)) => {
                    // Keep what was said, marked as interrupted; its tool calls never ran.
                    let mut turn = Turn::text(Role::Assistant, partial);
                    turn.meta.interrupted = true;
                    self.append(turn).await?;
                    self.emit(Event::info("Cancelled."));
                    self.state(SessionState::Idle);
                    return Err(SessionError::Cancelled);
                }
                Err(StreamFailure::Error(e)) => {
                    if !overflow_recovered && compact::is_overflow(&e) {
                        overflow_recovered = true;
                        if self.recover_from_overflow().await {
                            continue;
                        }
                    }
                    self.emit(Event::error(e.to_string()));
                    self.state(SessionState::Error);
                    return Err(e);
                }
            };
            let calls = assistant.tool_calls.clone();
            self.append(assistant).await?;
            if calls.is_empty() {
                self.state(SessionState::Idle);
                return Ok(());
            }
            let results = self.run_tools(&calls).await;
            for r in results {
                self.append(r).await?;
            }
            // A sub-agent at its budget stops here; its caller is told.
            if self.budget_spent() {
                self.exhausted = true;
                self.emit(Event::info("The sub-agent's budget is spent."));
                self.state(SessionState::Idle);
                return Ok(());
            }
            if self.token.is_cancelled() {
                self.emit(Event::info("Cancelled."));
                self.state(SessionState::Idle);
                return Err(SessionError::Cancelled);
            }
            // The tool-result seam: messages sent meanwhile join the conversation here.
            for text in self.queue.drain() {
                self.append(Turn::text(Role::User, text)).await?;
            }
            // A long tool loop can fill the window before the model stops:
            // compact here, keeping the in-flight batch verbatim.
            if self.compact_due {
                self.compact_inner(compact::Tail::InFlightBatch, "auto")
                    .await?;
            }
        }
    }
}
