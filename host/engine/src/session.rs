//! The conversation loop: stream the model, prepare and approve tool calls, run
//! them (at most four at once), append the results, and loop until the model
//! answers without tool calls.
//!
//! Not yet here: compaction in the middle of a tool loop.

use crate::lower::{AttachmentResolver, to_wit_messages};
use crate::repair::{CANCELLED_UNKNOWN, repair_orphans};
use crate::truncate::{default_limit, truncate_output};
use crate::turn::{EffectStatus, ProviderNative, Role, ToolCall, Turn};
use crate::ui::{Approval, PendingTool, SessionState, SessionUi};
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;
use turnstone_runtime::bindings::v0_1_0::provider::turnstone::plugin::provider_types as wit;
use turnstone_runtime::plugin::ProviderEventSink;
use turnstone_runtime::{
    CallContext, CallError, LoadedPlugin, PluginRegistry, SecretSource, ToolOutputSink,
};

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

/// Everything needed to call one model.
#[derive(Clone)]
pub struct ModelBinding {
    /// The provider component.
    pub plugin: Arc<LoadedPlugin>,
    /// Provider flavour (openai, anthropic, google, …-compatible).
    pub provider: String,
    /// API base URL.
    pub base_url: String,
    /// Model id.
    pub model: String,
    /// Context window in tokens.
    pub context_window: u32,
    /// Per-call secrets (the alias's `api_key`).
    pub secrets: Option<Arc<dyn SecretSource>>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output cap.
    pub max_tokens: Option<u32>,
    /// Reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Capability overrides (JSON object).
    pub capabilities: Option<String>,
    /// Replay stored reasoning to the provider that produced it.
    pub replay_reasoning: bool,
    /// The alias's FIFO admission gate (at most `max_concurrency` generations).
    pub admission: Option<Arc<tokio::sync::Semaphore>>,
}

/// The per-call secret source carrying an alias's API key.
struct AliasKey(String);

impl SecretSource for AliasKey {
    fn secret(&self, name: &str) -> Option<String> {
        (name == "api_key").then(|| self.0.clone())
    }
}

impl ModelBinding {
    /// The binding for a registry alias served by `plugin`.
    pub fn from_alias(alias: &crate::models::Alias, plugin: Arc<LoadedPlugin>) -> Self {
        let c = &alias.config;
        Self {
            plugin,
            provider: alias.provider.clone(),
            base_url: alias.base_url.clone(),
            model: c.model.clone(),
            context_window: c.context_window.unwrap_or(128_000),
            secrets: alias
                .api_key
                .clone()
                .map(|k| Arc::new(AliasKey(k)) as Arc<dyn SecretSource>),
            temperature: c.temperature,
            max_tokens: c.max_tokens,
            reasoning_effort: c.reasoning_effort.clone(),
            capabilities: c
                .capabilities
                .as_ref()
                .map(|m| serde_json::Value::Object(m.clone()).to_string()),
            replay_reasoning: false,
            admission: alias.admission.clone(),
        }
    }
}

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
        }
    }
}

/// How a failed model call may be recovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recovery {
    /// Retry the same model (after the given minimum wait).
    Retry(Option<std::time::Duration>),
    /// Give up on this model; a fallback may serve.
    Unreachable,
    /// Give up.
    Fatal,
}

fn recovery(e: &wit::ProviderError) -> Recovery {
    use std::time::Duration;
    match e {
        wit::ProviderError::RateLimit(r) => {
            Recovery::Retry(r.retry_after_ms.map(Duration::from_millis))
        }
        wit::ProviderError::Network(_) => Recovery::Retry(None),
        wit::ProviderError::Server(s) if s.status >= 500 => Recovery::Retry(None),
        wit::ProviderError::Auth(_) | wit::ProviderError::BadRequest(_) => Recovery::Fatal,
        wit::ProviderError::ContextLength(_) | wit::ProviderError::Cancelled => Recovery::Fatal,
        wit::ProviderError::Server(_) => Recovery::Unreachable,
    }
}

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The provider answered with an error.
    #[error("model request failed: {0}")]
    Provider(String),
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
}

/// Messages sent while a turn runs; injected at the next tool-result seam.
#[derive(Clone, Default)]
pub struct MessageQueue {
    inner: Arc<Mutex<std::collections::VecDeque<String>>>,
}

/// Most messages that may wait in a session's queue.
pub const MAX_QUEUED: usize = 10;

/// The queue already holds [`MAX_QUEUED`] messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("queue_full: {MAX_QUEUED} messages are already waiting")]
pub struct QueueFull;

impl MessageQueue {
    /// Queues `text`.
    pub fn push(&self, text: impl Into<String>) -> Result<(), QueueFull> {
        let mut q = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= MAX_QUEUED {
            return Err(QueueFull);
        }
        q.push_back(text.into());
        Ok(())
    }

    /// Removes and returns a queued message by position (`DELETE …/send`).
    pub fn remove(&self, index: usize) -> Option<String> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(index)
    }

    /// Messages waiting.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn drain(&self) -> Vec<String> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect()
    }
}

/// Cancels whatever the session is doing (stream, approval wait, tools).
#[derive(Clone, Default)]
pub struct CancelHandle {
    current: Arc<Mutex<CancellationToken>>,
}

impl CancelHandle {
    /// Cancels the running turn, if any.
    pub fn cancel(&self) {
        self.current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .cancel();
    }

    fn fresh(&self) -> CancellationToken {
        let token = CancellationToken::new();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = token.clone();
        token
    }
}

#[derive(Default)]
struct Accum {
    text: String,
    reasoning: String,
    calls: BTreeMap<u32, (Option<String>, Option<String>, String)>,
    finish: Option<wit::FinishReason>,
    usage: Option<wit::Usage>,
    native: Option<String>,
}

/// Forwards stream events to the UI while assembling the assistant turn.
struct Collector {
    ui: Arc<dyn SessionUi>,
    acc: Mutex<Accum>,
}

impl Collector {
    fn acc(&self) -> std::sync::MutexGuard<'_, Accum> {
        self.acc.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ProviderEventSink for Collector {
    fn event(&self, event: wit::StreamEvent) -> bool {
        match event {
            wit::StreamEvent::TextDelta(t) => {
                self.ui.on_content_token(&t);
                self.acc().text.push_str(&t);
            }
            wit::StreamEvent::ReasoningDelta(t) => {
                self.ui.on_reasoning_token(&t);
                self.acc().reasoning.push_str(&t);
            }
            wit::StreamEvent::ToolCallDelta(d) => {
                let mut acc = self.acc();
                let entry = acc.calls.entry(d.index).or_default();
                if d.id.is_some() {
                    entry.0 = d.id;
                }
                if d.name.is_some() {
                    entry.1 = d.name;
                }
                entry.2.push_str(&d.arguments_delta);
            }
            wit::StreamEvent::Usage(u) => self.acc().usage = Some(u),
            wit::StreamEvent::Finish(f) => self.acc().finish = Some(f),
            wit::StreamEvent::ProviderBlock(b) => self.acc().native = Some(b),
            wit::StreamEvent::Info(m) => self.ui.on_info(&m),
        }
        true
    }
}

enum AttemptError {
    Provider(wit::ProviderError),
    Session(SessionError),
    Cancelled(String),
}

/// How a model turn ended without a reply.
enum StreamFailure {
    Error(SessionError),
    /// Cancelled, with the partial text streamed so far.
    Cancelled(String),
}

struct NoAttachments;

impl AttachmentResolver for NoAttachments {
    fn data_url(&self, _id: &str) -> Option<String> {
        None
    }
}

struct ChunkForwarder {
    ui: Arc<dyn SessionUi>,
    call_id: String,
}

impl ToolOutputSink for ChunkForwarder {
    fn chunk(&self, text: &str) -> bool {
        self.ui.on_tool_output_chunk(&self.call_id, text);
        true
    }
}

/// A prepared call ready to execute: its plugin and normalised arguments.
type Runnable = (Arc<LoadedPlugin>, String);

/// One conversation.
pub struct ChatSession {
    binding: ModelBinding,
    fallbacks: Vec<ModelBinding>,
    store: Option<(turnstone_storage::Storage, String)>,
    tools: Arc<PluginRegistry>,
    ui: Arc<dyn SessionUi>,
    cfg: SessionConfig,
    turns: Vec<Turn>,
    always: HashSet<String>,
    next_cycle: u64,
    next_call: u64,
    cancel: CancelHandle,
    token: CancellationToken,
    /// Id of the newest saved row (the watermark a compaction covers).
    last_saved_id: i64,
    queue: MessageQueue,
    compact_due: bool,
    /// While compacting: the request history used instead of `turns`.
    request_override: Option<Vec<Turn>>,
    /// The last attempt received at least one stream event before failing.
    stream_started: bool,
    /// Where bindings come from when the registry can be reloaded.
    live: Option<(Arc<crate::models::LiveModels>, Option<String>)>,
}

impl ChatSession {
    /// A new, empty session.
    pub fn new(
        binding: ModelBinding,
        tools: Arc<PluginRegistry>,
        ui: Arc<dyn SessionUi>,
        cfg: SessionConfig,
    ) -> Self {
        Self {
            binding,
            fallbacks: Vec::new(),
            store: None,
            tools,
            ui,
            cfg,
            turns: Vec::new(),
            always: HashSet::new(),
            next_cycle: 1,
            next_call: 1,
            cancel: CancelHandle::default(),
            token: CancellationToken::new(),
            last_saved_id: 0,
            queue: MessageQueue::default(),
            compact_due: false,
            request_override: None,
            stream_started: false,
            live: None,
        }
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
        self.turns = rows
            .iter()
            .map(crate::persist::from_row)
            .collect::<Result<_, _>>()?;
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
        let id = saved.map_err(SessionError::from)?;
        self.last_saved_id = self.last_saved_id.max(id);
        Ok(())
    }

    /// Summarizes the conversation now: the summary replaces the history sent to
    /// the model; with storage it is saved as a checkpoint (source turns are kept).
    pub async fn compact(&mut self) -> Result<(), SessionError> {
        self.token = self.cancel.fresh();
        let r = self.compact_inner().await;
        self.state(if r.is_ok() {
            SessionState::Idle
        } else {
            SessionState::Error
        });
        r
    }

    async fn compact_inner(&mut self) -> Result<(), SessionError> {
        self.compact_due = false;
        if self.turns.len() < 2 {
            return Ok(());
        }
        let mut history = self.turns.clone();
        history.push(Turn::text(Role::User, COMPACTION_PROMPT));
        self.request_override = Some(history);
        let result = self.stream_turn().await;
        self.request_override = None;
        let summary = match result {
            Ok(t) => t.text_content(),
            Err(StreamFailure::Cancelled(_)) => return Err(SessionError::Cancelled),
            Err(StreamFailure::Error(e)) => return Err(e),
        };
        if summary.trim().is_empty() {
            return Err(SessionError::Provider(
                "the model returned an empty summary; the conversation was not compacted".into(),
            ));
        }
        let mut label = Turn::text(Role::User, COMPACTION_LABEL);
        let mut body = Turn::text(Role::Assistant, summary);
        for t in [&mut label, &mut body] {
            t.meta.source = Some(turnstone_storage::types::COMPACTION_SOURCE.to_string());
        }
        if let Some((db, ws_id)) = &self.store {
            let rows = [
                crate::persist::to_row(&label),
                crate::persist::to_row(&body),
            ];
            let cp = db.save_compaction(ws_id, self.last_saved_id, &rows).await?;
            self.last_saved_id = cp
                .summary_ids
                .iter()
                .copied()
                .max()
                .unwrap_or(self.last_saved_id);
        }
        let summarized = self.turns.len();
        self.turns = vec![label, body];
        self.ui.on_info(&format!(
            "Conversation compacted: {summarized} turns summarized."
        ));
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

    /// The canonical history.
    pub fn turns(&self) -> &[Turn] {
        &self.turns
    }

    fn state(&self, s: SessionState) {
        self.ui.on_state_change(s);
    }

    /// Sends user input and runs the loop until the model stops calling tools.
    pub async fn send(&mut self, input: &str) -> Result<(), SessionError> {
        let result = self.send_inner(input).await;
        if let Err(e) = &result
            && !matches!(
                e,
                SessionError::Provider(_) | SessionError::Plugin(_) | SessionError::Cancelled
            )
        {
            self.ui.on_error(&e.to_string());
            self.state(SessionState::Error);
        }
        result
    }

    async fn send_inner(&mut self, input: &str) -> Result<(), SessionError> {
        self.token = self.cancel.fresh();
        if let Some((live, alias)) = &self.live {
            let (primary, fallbacks) = live.bindings(alias.as_deref())?;
            self.binding = primary;
            self.fallbacks = fallbacks;
        }
        // Compact between turns, so the new input follows the summary verbatim.
        if self.compact_due {
            self.compact_inner().await?;
        }
        self.append(Turn::text(Role::User, input)).await?;
        loop {
            let assistant = match self.stream_turn().await {
                Ok(t) => t,
                Err(StreamFailure::Cancelled(partial)) => {
                    // Keep what was said, marked as interrupted; its tool calls never ran.
                    let mut turn = Turn::text(Role::Assistant, partial);
                    turn.meta.interrupted = true;
                    self.append(turn).await?;
                    self.ui.on_info("Cancelled.");
                    self.state(SessionState::Idle);
                    return Err(SessionError::Cancelled);
                }
                Err(StreamFailure::Error(e)) => {
                    self.ui.on_error(&e.to_string());
                    self.state(SessionState::Error);
                    return Err(e);
                }
            };
            let calls = assistant.tool_calls.clone();
            self.append(assistant).await?;
            self.ui.on_turn_commit();
            if calls.is_empty() {
                self.state(SessionState::Idle);
                return Ok(());
            }
            let results = self.run_tools(&calls).await;
            for r in results {
                self.append(r).await?;
            }
            if self.token.is_cancelled() {
                self.ui.on_info("Cancelled.");
                self.state(SessionState::Idle);
                return Err(SessionError::Cancelled);
            }
            // The tool-result seam: messages sent meanwhile join the conversation here.
            for text in self.queue.drain() {
                self.append(Turn::text(Role::User, text)).await?;
            }
        }
    }

    fn tool_definitions(&self) -> Vec<wit::ToolDefinition> {
        self.tools
            .tools()
            .filter(|t| !t.coordinator || t.interactive)
            .map(|t| {
                let mut description = t.description.clone();
                let ws = self.cfg.workspace.display().to_string();
                for note in [&t.cwd_note, &t.workspace_note].into_iter().flatten() {
                    description.push(' ');
                    description.push_str(
                        &note
                            .replace("{working_dir}", &ws)
                            .replace("{workspace_dir}", &ws),
                    );
                }
                wit::ToolDefinition {
                    name: t.name.clone(),
                    description,
                    parameters: t.parameters.to_string(),
                }
            })
            .collect()
    }

    /// One model turn with the retry ladder, then the fallback models.
    async fn stream_turn(&mut self) -> Result<Turn, StreamFailure> {
        self.ui.on_turn_start();
        self.state(SessionState::Thinking);
        let bindings: Vec<ModelBinding> = std::iter::once(self.binding.clone())
            .chain(self.fallbacks.iter().cloned())
            .collect();
        let mut last_err = None;
        for (i, b) in bindings.iter().enumerate() {
            if i > 0 {
                self.ui
                    .on_info(&format!("Falling back to {} ({}).", b.model, b.provider));
            }
            for attempt in 0..MAX_ATTEMPTS {
                match self.attempt_with_reissue(b).await {
                    Ok(turn) => return Ok(turn),
                    Err(AttemptError::Session(e)) => return Err(StreamFailure::Error(e)),
                    Err(AttemptError::Cancelled(partial)) => {
                        return Err(StreamFailure::Cancelled(partial));
                    }
                    Err(AttemptError::Provider(e)) => {
                        let message = format!("{e:?}");
                        match recovery(&e) {
                            Recovery::Fatal => {
                                return Err(StreamFailure::Error(SessionError::Provider(message)));
                            }
                            Recovery::Unreachable => {
                                last_err = Some(message);
                                break;
                            }
                            Recovery::Retry(min_wait) => {
                                last_err = Some(message.clone());
                                if attempt + 1 == MAX_ATTEMPTS {
                                    break;
                                }
                                let backoff = self.cfg.retry_base * 2u32.pow(attempt);
                                let wait = min_wait.map_or(backoff, |w| w.max(backoff));
                                self.ui.on_info(&format!(
                                    "Model call failed ({message}); retrying in {:.1} s (attempt {}/{MAX_ATTEMPTS}).",
                                    wait.as_secs_f64(),
                                    attempt + 2
                                ));
                                tokio::select! {
                                    () = tokio::time::sleep(wait) => {}
                                    () = self.token.cancelled() => {
                                        return Err(StreamFailure::Cancelled(String::new()));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        Err(StreamFailure::Error(SessionError::Provider(
            last_err.unwrap_or_else(|| "no model available".into()),
        )))
    }

    /// One attempt; a stream that dies after it started is re-issued up to
    /// [`MAX_REISSUES`] times (half the retry base, doubling) before the failure
    /// counts against the retry ladder.
    async fn attempt_with_reissue(&mut self, b: &ModelBinding) -> Result<Turn, AttemptError> {
        let mut reissues = 0;
        loop {
            match self.attempt(b).await {
                Err(AttemptError::Provider(wit::ProviderError::Network(msg)))
                    if self.stream_started && reissues < MAX_REISSUES =>
                {
                    let wait = self.cfg.retry_base / 2 * 2u32.pow(reissues);
                    reissues += 1;
                    self.ui.on_info(&format!(
                        "The stream broke off ({msg}); re-issuing the request ({reissues}/{MAX_REISSUES})."
                    ));
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.token.cancelled() => return Err(AttemptError::Cancelled(String::new())),
                    }
                }
                other => return other,
            }
        }
    }

    async fn attempt(&mut self, b: &ModelBinding) -> Result<Turn, AttemptError> {
        self.stream_started = false;
        self.ui.on_thinking_start();
        let history = self.request_override.as_ref().unwrap_or(&self.turns);
        let messages = to_wit_messages(
            &repair_orphans(history),
            &b.provider,
            b.replay_reasoning,
            &NoAttachments,
        )
        .map_err(|e| AttemptError::Session(e.into()))?;
        let request = wit::CompletionRequest {
            provider: b.provider.clone(),
            base_url: b.base_url.clone(),
            model: b.model.clone(),
            messages,
            tools: if self.request_override.is_some() {
                Vec::new()
            } else {
                self.tool_definitions()
            },
            temperature: b.temperature,
            max_tokens: b.max_tokens,
            reasoning_effort: b.reasoning_effort.clone(),
            replay_reasoning: b.replay_reasoning,
            capabilities: b.capabilities.clone(),
            extra: None,
        };
        let collector = Arc::new(Collector {
            ui: self.ui.clone(),
            acc: Mutex::new(Accum::default()),
        });
        // Hold the alias's admission permit for the whole stream; it is released
        // when this attempt ends, before any retry backoff.
        let _permit = match &b.admission {
            Some(gate) => tokio::select! {
                p = gate.clone().acquire_owned() => p.ok(),
                () = self.token.cancelled() => return Err(AttemptError::Cancelled(String::new())),
            },
            None => None,
        };
        let outcome = b
            .plugin
            .provider_complete(
                &request,
                collector.clone(),
                b.secrets.clone(),
                Some(&self.token),
            )
            .await;
        self.ui.on_thinking_stop();
        self.ui.on_stream_end();
        {
            let acc = collector.acc();
            self.stream_started = !acc.text.is_empty()
                || !acc.reasoning.is_empty()
                || !acc.calls.is_empty()
                || acc.finish.is_some();
        }
        let cancelled = matches!(outcome, Err(CallError::Cancelled { .. }))
            || matches!(outcome, Ok(Err(wit::ProviderError::Cancelled)));
        if cancelled {
            return Err(AttemptError::Cancelled(std::mem::take(
                &mut collector.acc().text,
            )));
        }
        outcome
            .map_err(|e| AttemptError::Session(e.into()))?
            .map_err(AttemptError::Provider)?;
        let acc = std::mem::take(&mut *collector.acc());
        if let Some(u) = &acc.usage {
            self.ui
                .on_status(u.prompt_tokens, u.completion_tokens, b.context_window);
            let pct = u64::from(self.cfg.auto_compact_pct);
            if pct > 0
                && self.request_override.is_none()
                && u64::from(u.prompt_tokens) * 100 >= u64::from(b.context_window) * pct
            {
                self.compact_due = true;
            }
        }
        let mut tool_calls: Vec<ToolCall> = Vec::new();
        match acc.finish {
            Some(wit::FinishReason::Length) => {
                if !acc.calls.is_empty() {
                    self.ui.on_error(
                        "The response hit the output limit; its incomplete tool calls were discarded.",
                    );
                } else {
                    self.ui
                        .on_error("The response was truncated at the output limit.");
                }
            }
            Some(wit::FinishReason::ContentFilter) => {
                self.ui
                    .on_error("The response was blocked by the provider's content filter.");
            }
            _ => {
                for (_, (id, name, args)) in acc.calls {
                    let id = id.unwrap_or_else(|| {
                        let n = self.next_call;
                        self.next_call += 1;
                        format!("call_{n}")
                    });
                    tool_calls.push(ToolCall {
                        id,
                        name: name.unwrap_or_default(),
                        arguments: args,
                    });
                }
            }
        }
        let mut turn = Turn::text(Role::Assistant, acc.text);
        turn.tool_calls = tool_calls;
        turn.reasoning = (!acc.reasoning.is_empty()).then_some(acc.reasoning);
        turn.native = acc.native.and_then(|n| {
            serde_json::from_str(&n).ok().map(|blocks| ProviderNative {
                provider: b.provider.clone(),
                blocks,
            })
        });
        Ok(turn)
    }

    async fn run_tools(&mut self, calls: &[ToolCall]) -> Vec<Turn> {
        let ws = self.cfg.workspace.display().to_string();
        let ctx = CallContext {
            call_id: String::new(),
            session_id: self.cfg.session_id.clone(),
            workspace_dir: Some(ws.clone()),
            working_dir: ws,
            supports_vision: false,
        };
        // Prepare every call: parse arguments, validate, build previews.
        let mut prepared: Vec<(PendingTool, Option<Runnable>)> = Vec::new();
        for call in calls {
            let mut item = PendingTool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                header: call.name.clone(),
                preview: None,
                needs_approval: false,
                error: None,
            };
            let Some((plugin, spec)) = self.tools.tool(&call.name) else {
                item.error = Some(format!("Error: unknown tool {:?}", call.name));
                prepared.push((item, None));
                continue;
            };
            let args = match spec.coerce_arguments(&call.arguments) {
                Ok(a) => a,
                Err(e) => {
                    item.error = Some(format!("Error: {e}"));
                    prepared.push((item, None));
                    continue;
                }
            };
            let call_ctx = CallContext {
                call_id: call.id.clone(),
                ..ctx.clone()
            };
            match plugin.prepare(&call.name, &args, &call_ctx).await {
                Ok(Ok(p)) => {
                    item.header = p.header;
                    item.preview = p.body;
                    item.needs_approval = p.needs_approval
                        && !self.cfg.skip_permissions
                        && !self.always.contains(&call.name);
                    prepared.push((item, Some((plugin.clone(), args))));
                }
                Ok(Err(refusal)) => {
                    item.error = Some(format!("Error: {refusal}"));
                    prepared.push((item, None));
                }
                Err(e) => {
                    item.error = Some(format!("Error: {e}"));
                    prepared.push((item, None));
                }
            }
        }
        // Approve: one cycle per batch that needs the user.
        let mut approval = Approval {
            approved: true,
            always: false,
            feedback: None,
        };
        if prepared.iter().any(|(p, _)| p.needs_approval) {
            self.state(SessionState::Attention);
            let cycle = self.next_cycle;
            self.next_cycle += 1;
            let items: Vec<PendingTool> = prepared.iter().map(|(p, _)| p.clone()).collect();
            approval = tokio::select! {
                a = self.ui.approve_tools(cycle, &items) => a,
                () = self.token.cancelled() => Approval { approved: false, always: false, feedback: None },
            };
            if approval.approved && approval.always {
                for (p, _) in &prepared {
                    if p.needs_approval {
                        self.always.insert(p.name.clone());
                    }
                }
            }
        }
        // Execute, at most MAX_PARALLEL_TOOLS at once; results keep call order.
        self.state(SessionState::Running);
        let limit = self
            .cfg
            .tool_truncation
            .unwrap_or_else(|| default_limit(self.binding.context_window as usize));
        let gate = Arc::new(tokio::sync::Semaphore::new(MAX_PARALLEL_TOOLS));
        let feedback = approval.feedback.clone();
        let jobs = prepared
            .into_iter()
            .zip(calls)
            .map(|((item, runnable), call)| {
                let gate = gate.clone();
                let ui = self.ui.clone();
                let ctx = CallContext {
                    call_id: call.id.clone(),
                    ..ctx.clone()
                };
                let denied = item.needs_approval && !approval.approved;
                let feedback = feedback.clone();
                let token = self.token.clone();
                async move {
                    let mut effect = None;
                    let (mut output, is_error) = if let Some(err) = item.error {
                        (err, true)
                    } else if token.is_cancelled() {
                        effect = Some(EffectStatus::None);
                        (NOT_STARTED.to_string(), true)
                    } else if denied {
                        (
                            "The user denied this tool call; it did not run.".to_string(),
                            true,
                        )
                    } else if let Some((plugin, args)) = runnable {
                        let permit = tokio::select! {
                            p = gate.acquire() => p.ok(),
                            () = token.cancelled() => None,
                        };
                        if permit.is_none() || token.is_cancelled() {
                            effect = Some(EffectStatus::None);
                            (NOT_STARTED.to_string(), true)
                        } else {
                            let sink = Arc::new(ChunkForwarder {
                                ui: ui.clone(),
                                call_id: call.id.clone(),
                            });
                            match plugin
                                .execute(&call.name, &args, &ctx, sink, Some(&token))
                                .await
                            {
                                Ok(r) => {
                                    (truncate_output(&r.output, limit).into_owned(), r.is_error)
                                }
                                Err(CallError::Cancelled { .. }) => {
                                    effect = Some(EffectStatus::Unknown);
                                    (CANCELLED_UNKNOWN.to_string(), true)
                                }
                                Err(e) => (format!("Error: {e}"), true),
                            }
                        }
                    } else {
                        ("Error: the call could not be prepared".to_string(), true)
                    };
                    if let Some(f) = feedback.filter(|f| !f.trim().is_empty()) {
                        output.push_str(&format!("\n\nUser feedback: {f}"));
                    }
                    ui.on_tool_result(&call.id, &call.name, &output, is_error);
                    let mut turn = Turn::tool_result(call, output, is_error);
                    turn.meta.effect = effect;
                    turn
                }
            });
        futures::future::join_all(jobs).await
    }
}
