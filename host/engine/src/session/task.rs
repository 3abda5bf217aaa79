//! Sub-agents: a tool call (`task_agent`, through the WIT `agents`
//! interface) hands a task to a fresh session that works through it alone
//! and answers once. The sub-agent acts for the same user in the same
//! workspace with the tools meant for sub-agents; it streams its progress
//! into the parent's stream under the calling tool call, asks for approvals
//! through the parent's own cycles, is cancelled with the parent, and stops
//! at its budget. Its transcript is a workstream of kind `task_agent` whose
//! parent is the calling workstream.

use super::{AgentContext, ChatSession, ModelBinding, SessionConfig, SessionError};
use crate::events::EventSink;
use crate::turn::Role;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use turnstone_protocol::AgentOrigin;
use turnstone_runtime::PluginSet;
use turnstone_runtime::host::work::{AgentError, TaskRequest, TaskResult};

/// How deep sub-agents nest: a workstream's sub-agent is at depth 1, its
/// own sub-agent at 2, and that one may not start another.
pub const MAX_DEPTH: u32 = 2;

/// The workstream kind of a sub-agent's transcript.
pub const TASK_KIND: &str = "task_agent";

/// Config key of a sub-agent's workstream: the parent's tool call it ran for.
pub const PARENT_CALL_KEY: &str = "task.parent_call_id";

/// What one sub-agent may spend before it must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Model calls.
    pub max_model_calls: u32,
    /// Tokens (prompt and completion of every call).
    pub max_tokens: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_model_calls: 40,
            max_tokens: 1_000_000,
        }
    }
}

/// Tool names approved for the rest of the session (`always`), shared by a
/// session and its sub-agents: an "always" given to a sub-agent's call
/// counts for the workstream, and the workstream's for its sub-agents.
pub type AlwaysSet = Arc<Mutex<HashSet<String>>>;

/// What a sub-agent is told before its task.
const PREAMBLE: &str = "You are a sub-agent: another assistant delegated the task below to you. Work through it on your own with the tools you have (nobody will answer questions), then reply with the final result only — what was done or found, concretely, in a form the delegating assistant can use directly. If you cannot finish, say what is missing.";

/// Everything a tool batch needs to start sub-agents for its calls.
pub(super) struct TaskSpawner {
    pub(super) depth: u32,
    pub(super) parent_ws: Option<String>,
    pub(super) binding: ModelBinding,
    pub(super) fallbacks: Vec<ModelBinding>,
    pub(super) live: Option<Arc<crate::models::LiveModels>>,
    pub(super) tools: PluginSet,
    pub(super) mcp: Option<Arc<turnstone_mcp::McpHub>>,
    pub(super) events: EventSink,
    pub(super) store: Option<turnstone_storage::Storage>,
    pub(super) cfg: SessionConfig,
    pub(super) agent: AgentContext,
    pub(super) always: AlwaysSet,
    /// The parent's turn: cancelling it cancels every sub-agent.
    pub(super) token: CancellationToken,
    /// Policies, guards and audit, as the parent's.
    pub(super) safety: Arc<crate::safety::Safety>,
}

fn invalid(msg: impl Into<String>) -> AgentError {
    AgentError::Invalid(msg.into())
}

impl TaskSpawner {
    /// The bindings for `alias`, else `[model] agent_model`, else the
    /// parent's own.
    fn bindings(
        &self,
        alias: Option<&str>,
    ) -> Result<(ModelBinding, Vec<ModelBinding>, Option<String>), AgentError> {
        let Some(live) = &self.live else {
            return match alias {
                Some(a) => Err(invalid(format!(
                    "model {a:?} cannot be chosen here: this session has one fixed model"
                ))),
                None => Ok((self.binding.clone(), self.fallbacks.clone(), None)),
            };
        };
        let chosen = alias
            .map(str::to_string)
            .or_else(|| live.snapshot().agent_model.clone());
        match chosen {
            Some(a) => {
                let (b, f) = live
                    .bindings(Some(&a))
                    .map_err(|e| invalid(e.to_string()))?;
                Ok((b, f, Some(a)))
            }
            None => Ok((self.binding.clone(), self.fallbacks.clone(), None)),
        }
    }

    /// A workstream for the sub-agent's transcript, child of the caller's.
    async fn transcript(
        &self,
        prompt: &str,
        call_id: &str,
    ) -> Result<Option<(turnstone_storage::Storage, String)>, AgentError> {
        let Some(db) = &self.store else {
            return Ok(None);
        };
        let first_line = prompt.lines().next().unwrap_or("").trim();
        let mut name: String = first_line.chars().take(60).collect();
        if name.len() < first_line.len() {
            name.push('…');
        }
        let failed = |e: turnstone_storage::StorageError| {
            AgentError::Failed(format!("cannot keep the sub-agent's transcript: {e}"))
        };
        let r = db
            .create_workstream(&turnstone_storage::types::NewWorkstream {
                user_id: self.cfg.acting_user_id.clone(),
                name: format!("task: {name}"),
                kind: Some(TASK_KIND.into()),
                parent_ws_id: self.parent_ws.clone(),
                ..Default::default()
            })
            .await
            .map_err(failed)?;
        db.publish_workstream(&r).await.map_err(failed)?;
        db.set_config(&r.ws_id, PARENT_CALL_KEY, Some(call_id))
            .await
            .map_err(failed)?;
        Ok(Some((db.clone(), r.ws_id)))
    }

    /// Runs a sub-agent for the parent's tool call `call_id` to its answer.
    pub(super) async fn run(
        self: Arc<Self>,
        call_id: String,
        req: TaskRequest,
    ) -> Result<TaskResult, AgentError> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(invalid(format!(
                "sub-agents nest at most {MAX_DEPTH} deep and this session is already a sub-agent at depth {}: do the task yourself",
                self.depth
            )));
        }
        if req.prompt.trim().is_empty() {
            return Err(invalid("the task prompt is empty"));
        }
        let (binding, fallbacks, alias) = self.bindings(req.model.as_deref())?;
        let transcript = self.transcript(&req.prompt, &call_id).await?;
        let agent_ws = transcript
            .as_ref()
            .map(|(_, ws)| ws.clone())
            .unwrap_or_else(|| format!("task_{}", crate::random_hex()));
        let origin = AgentOrigin {
            parent_call_id: call_id,
            agent_ws_id: agent_ws.clone(),
            depth,
        };
        let mut instructions = PREAMBLE.to_string();
        if let Some(p) = req.persona.as_deref().filter(|p| !p.trim().is_empty()) {
            instructions.push_str("\n\n");
            instructions.push_str(p.trim());
        }
        let cfg = SessionConfig {
            session_id: agent_ws.clone(),
            tool_search: turnstone_mcp::search::SearchSettings {
                mode: turnstone_mcp::search::SearchMode::Off,
                ..self.cfg.tool_search
            },
            task: Some(origin.clone()),
            instructions: Some(instructions),
            ..self.cfg.clone()
        };
        let events = self.events.nested(origin, self.cfg.acting_user_id.clone());
        let mut agent = self.agent.clone();
        if alias.is_some() {
            agent.model_alias = alias.clone();
        }
        let mut child = ChatSession::new(binding, self.tools.clone(), events, cfg)
            .with_fallbacks(fallbacks)
            .with_agent(agent)
            .with_safety(self.safety.clone());
        if let (Some(live), Some(a)) = (&self.live, alias) {
            child = child.with_live_models(live.clone(), Some(a));
        }
        if let Some(hub) = &self.mcp {
            child = child.with_mcp(hub.clone());
        }
        if let Some((db, ws)) = transcript {
            child = child.with_storage(db, ws);
        }
        child.always = self.always.clone();
        if let Some(skill) = req.skill.as_deref().filter(|s| !s.trim().is_empty()) {
            let args = req.skill_arguments.iter().cloned().collect();
            child
                .activate_skill(skill, &args)
                .await
                .map_err(|e| invalid(format!("skill {skill:?}: {e}")))?;
        }
        // Cancelling the parent's turn cancels the sub-agent (its running
        // tools' process groups die with their stores).
        let handle = child.cancel_handle();
        let parent = self.token.clone();
        let link = tokio::spawn(async move {
            parent.cancelled().await;
            handle.cancel();
        });
        let outcome = child.send(&req.prompt).await;
        link.abort();
        let usage = child.usage;
        let last = child
            .turns()
            .iter()
            .rev()
            .find(|t| t.role == Role::Assistant && !t.text_content().trim().is_empty())
            .map(|t| t.text_content());
        let exhausted = child.exhausted;
        match outcome {
            Ok(()) => {}
            Err(SessionError::Cancelled) => return Err(AgentError::Cancelled),
            Err(e) => return Err(AgentError::Failed(e.to_string())),
        }
        let answer = match (exhausted, last) {
            (false, Some(a)) => a,
            (false, None) => "(the sub-agent finished without a reply)".to_string(),
            (true, last) => format!(
                "The sub-agent reached its budget ({} model calls, {} tokens) before it finished.{}",
                usage.model_calls,
                usage.tokens,
                last.map(|l| format!(" Its last message:\n\n{l}"))
                    .unwrap_or_default()
            ),
        };
        Ok(TaskResult {
            answer,
            workstream_id: agent_ws,
            model_calls: usage.model_calls,
            tool_calls: usage.tool_calls,
            tokens: usage.tokens,
            exhausted,
        })
    }
}

impl ChatSession {
    /// The sub-agent budget this session is held to, if it is one.
    pub(super) fn budget_spent(&self) -> bool {
        let Some(b) = self.cfg.task.as_ref().map(|_| self.agent.task_budget) else {
            return false;
        };
        self.usage.model_calls >= b.max_model_calls || self.usage.tokens >= b.max_tokens
    }

    /// How deep this session is (0: a workstream, 1+: a sub-agent).
    pub(super) fn depth(&self) -> u32 {
        self.cfg.task.as_ref().map_or(0, |t| t.depth)
    }

    /// Whether tool `t` is offered in this session: every interactive tool
    /// in a workstream; in a sub-agent only those meant for sub-agents (and
    /// not `task_agent` itself at the deepest level).
    pub(super) fn offers(&self, t: &turnstone_runtime::ToolSpec) -> bool {
        match self.depth() {
            0 => !t.coordinator || t.interactive,
            d => t.task_agent && !(d >= MAX_DEPTH && t.name == "task_agent"),
        }
    }

    /// What this batch's tool calls may use to start sub-agents.
    pub(super) fn task_spawner(&self) -> Arc<TaskSpawner> {
        Arc::new(TaskSpawner {
            depth: self.depth(),
            parent_ws: self.store.as_ref().map(|(_, ws)| ws.clone()),
            binding: self.binding.clone(),
            fallbacks: self.fallbacks.clone(),
            live: self.live.as_ref().map(|(l, _)| l.clone()),
            tools: self.tools.clone(),
            mcp: self.mcp.clone(),
            events: self.events.clone(),
            store: self.store.as_ref().map(|(db, _)| db.clone()),
            cfg: self.cfg.clone(),
            agent: self.agent.clone(),
            always: self.always.clone(),
            token: self.token.clone(),
            safety: self.safety.clone(),
        })
    }
}
