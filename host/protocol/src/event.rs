//! Events of one workstream, as the per-workstream SSE stream carries them
//! (contract §3.3). Fields the original always sends are always present
//! (`null` when empty); fields it sends only sometimes are skipped when absent.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Session states as the wire names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Waiting for input.
    Idle,
    /// The model is generating.
    Thinking,
    /// Tools are running.
    Running,
    /// Waiting for the user (an approval).
    Attention,
    /// The last turn failed.
    Error,
}

impl SessionState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Thinking => "thinking",
            Self::Running => "running",
            Self::Attention => "attention",
            Self::Error => "error",
        }
    }
}

/// One tool call of a batch, as `tool_pending`, `tool_info` and
/// `approve_request` list it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ToolItem {
    /// The model's call id.
    pub call_id: String,
    /// One-line summary, e.g. `bash: ls -la`.
    pub header: String,
    /// Longer preview (a diff, a multi-line command).
    pub preview: Option<String>,
    /// The tool.
    pub func_name: String,
    /// What "always" would approve (the tool name).
    pub approval_label: String,
    /// Whether this call waits for the user.
    pub needs_approval: bool,
    /// Set when the call was refused before approval.
    pub error: Option<String>,
    /// A sub-agent's call, asked through this workstream's approvals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<crate::AgentOrigin>,
    /// The heuristic judge's verdict (calls that wait for approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heuristic_verdict: Option<crate::Verdict>,
    /// The LLM judge's verdict, once it arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_verdict: Option<crate::Verdict>,
    /// What the tool's plugin is allowed to touch (its effective grants),
    /// shown next to the arguments before approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<String>,
    /// The administrator's tool policy that decided this call, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

impl ToolItem {
    /// An item for a call of `func_name` with nothing decided yet.
    pub fn new(call_id: impl Into<String>, func_name: impl Into<String>) -> Self {
        let func_name = func_name.into();
        Self {
            call_id: call_id.into(),
            header: func_name.clone(),
            preview: None,
            approval_label: func_name.clone(),
            func_name,
            needs_approval: false,
            error: None,
            agent: None,
            heuristic_verdict: None,
            judge_verdict: None,
            grants: Vec::new(),
            policy: None,
        }
    }
}

/// `text` of `content` and `reasoning`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Text {
    /// The text.
    pub text: String,
}

/// `message` of `info`, `error` and `busy_error`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Message {
    /// The message.
    pub message: String,
}

/// `reason` of `clear_ui` and `ws_closed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Reason {
    /// Why.
    pub reason: String,
}

/// `connected`: the first event of a fresh stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Connected {
    /// Model id.
    pub model: String,
    /// Model alias.
    pub model_alias: String,
    /// Project (always `null` here).
    pub project_name: Option<String>,
    /// Approvals are skipped.
    pub skip_permissions: bool,
}

/// `state_change`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct StateChange {
    /// The new state.
    pub state: SessionState,
    /// The user whose action caused it (the workstream's owner).
    pub acting_user_id: Option<String>,
}

/// `user_turn`: the accepted user row (only with `?user_turn=1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UserTurn {
    /// The message text.
    pub content: String,
    /// Attachments sent with it (`AttachmentInfo` objects).
    #[schema(value_type = Vec<Object>)]
    pub attachments: Vec<serde_json::Value>,
    /// Who sent it.
    pub sender: Option<String>,
    /// The client's send ids.
    pub client_send_ids: Vec<String>,
    /// This event's own SSE id.
    #[serde(rename = "_event_id")]
    pub event_id: u64,
}

/// `message_queued`: a send while a turn runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MessageQueued {
    /// The message.
    pub message: String,
    /// Its id (for `DELETE …/send`).
    pub msg_id: String,
    /// Always `normal`.
    pub priority: String,
    /// Who sent it.
    pub sender: Option<String>,
    /// The client's send id.
    pub client_send_id: Option<String>,
}

/// `status`: usage after each model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Status {
    /// Prompt tokens of the latest call.
    pub prompt_tokens: u32,
    /// Completion tokens of the latest call.
    pub completion_tokens: u32,
    /// Their sum.
    pub total_tokens: u64,
    /// The model's context window.
    pub context_window: u32,
    /// Prompt share of the window, in percent (one decimal).
    pub pct: f64,
    /// Reasoning effort (always `null` here).
    pub effort: Option<String>,
    /// Prompt-cache writes (0: not reported).
    pub cache_creation_tokens: u64,
    /// Prompt-cache reads (0: not reported).
    pub cache_read_tokens: u64,
    /// Tool calls in the running turn.
    pub tool_calls_this_turn: u32,
    /// Turns so far.
    pub turn_count: u32,
}

/// `tool_pending` and `tool_info`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Items {
    /// The batch.
    pub items: Vec<ToolItem>,
}

/// `approve_request`: the session waits for `Op::Approve`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApproveRequest {
    /// The cycle (32 hex).
    pub cycle_id: String,
    /// The batch.
    pub items: Vec<ToolItem>,
    /// The LLM judge is still reviewing the batch; its verdicts follow as
    /// `intent_verdict` (the heuristic ones are on the items already).
    pub judge_pending: bool,
}

/// `approval_resolved`: some client answered a cycle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalResolved {
    /// Approved.
    pub approved: bool,
    /// Feedback for the model.
    pub feedback: Option<String>,
    /// Approved for the rest of the session.
    pub always: bool,
    /// The cycle.
    pub cycle_id: String,
    /// Its calls.
    pub call_ids: Vec<String>,
}

/// `tool_output_chunk`: streamed tool output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolOutputChunk {
    /// The call.
    pub call_id: String,
    /// Output lines.
    pub chunk: String,
}

/// `tool_result`: the executor's receipt, and (`accepted: true`, only with
/// `?tool_turn=1`) the canonical row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ToolResult {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub name: String,
    /// The text the model sees.
    pub output: String,
    /// The call failed.
    pub is_error: bool,
    /// The accepted row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    /// `applied` or `failed` (accepted row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect_status: Option<String>,
    /// This event's own SSE id (accepted row).
    #[serde(rename = "_event_id", default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<u64>,
    /// What the call actually touched (files, hosts, processes, secrets,
    /// denials), as the host recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Box<crate::CapabilityAudit>>,
}

/// `ws_state`: the per-stream end of a turn (ours; contract §4) and the
/// global stream's state snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WsState {
    /// `idle` or `error` at a turn's end.
    pub state: SessionState,
    /// Tokens over the workstream's life.
    pub tokens: u64,
    /// Prompt share of the context window (0–1).
    pub context_ratio: f64,
    /// Activity line for dashboards.
    pub activity: String,
    /// `thinking`, `approval` or empty.
    pub activity_state: String,
    /// Workstream kind (`interactive`).
    pub kind: String,
    /// Parent workstream (always `null` here).
    pub parent_ws_id: Option<String>,
    /// Always `persisted`.
    pub persistence_state: String,
    /// Display name.
    pub name: String,
    /// The final reply text (turn end; global stream on idle/error only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// `in_progress_snapshot`: a stream is mid-flight at connect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InProgressSnapshot {
    /// Reply text so far.
    pub content: String,
    /// Reasoning so far.
    pub reasoning: String,
}

/// `replay_ok`: the events after the cursor follow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReplayOk {
    /// How many.
    pub replayed: usize,
    /// The cursor.
    pub last_event_id: Option<u64>,
}

/// `replay_truncated`: what could not be replayed, or a projection this
/// subscriber did not ask for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ReplayTruncated {
    /// `ring_evicted`, `subscriber_lagged`, `user_turn_projection_unsupported`
    /// or `tool_turn_projection_unsupported`.
    pub reason: String,
    /// Events lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_count: Option<u64>,
    /// The cursor asked for (`ring_evicted`), or the id the gap starts after
    /// (`subscriber_lagged`: the last event sent, or where the stream began).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_event_id: Option<u64>,
}

/// `compaction`: context compaction progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Compaction {
    /// `start` or `end`.
    pub phase: String,
    /// One id per compaction.
    pub compaction_id: String,
    /// Always `workstream` here.
    pub target: String,
    /// `auto` (the window filled) or `manual` (`/compact`).
    pub trigger: String,
    /// Between turns (`turn_boundary`) or inside a tool loop (`tool_loop`).
    #[serde(rename = "where")]
    pub where_: String,
    /// Whether it succeeded (end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// Why it failed (end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One event of a workstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// First event of a fresh connect (the only one without `ws_id`).
    Connected(Connected),
    /// Refetch `/history`: preamble, rewind, retry, `/clear`.
    ClearUi(Reason),
    /// Every state transition; `idle` is the per-stream turn end.
    StateChange(StateChange),
    /// The accepted user row.
    UserTurn(UserTurn),
    /// A send waited for the next tool-result seam.
    MessageQueued(MessageQueued),
    /// A model request starts.
    ThinkingStart,
    /// Thinking ends (at the first answer token, and after `stream_end`).
    ThinkingStop,
    /// Reasoning tokens.
    Reasoning(Text),
    /// Reply tokens (batched by the server: one event per 25 ms window, or
    /// sooner once a batch reaches 4096 bytes; the token that reaches the cap
    /// goes out with it).
    Content(Text),
    /// One model stream ended (not the turn).
    StreamEnd,
    /// Usage after a model call.
    Status(Status),
    /// A tool batch, before approval.
    ToolPending(Items),
    /// The batch was auto-approved.
    ToolInfo(Items),
    /// The human gate.
    ApproveRequest(ApproveRequest),
    /// A cycle was answered.
    ApprovalResolved(ApprovalResolved),
    /// Streamed tool output.
    ToolOutputChunk(ToolOutputChunk),
    /// A tool finished.
    ToolResult(ToolResult),
    /// End of a turn (ours; never in the preamble).
    WsState(WsState),
    /// Context compaction.
    Compaction(Compaction),
    /// An informational line.
    Info(Message),
    /// A turn error.
    Error(Message),
    /// A command refused while busy.
    BusyError(Message),
    /// The turn was cancelled.
    Cancelled,
    /// Mid-stream state at connect.
    InProgressSnapshot(InProgressSnapshot),
    /// Replay follows.
    ReplayOk(ReplayOk),
    /// Replay gap or unsupported projection.
    ReplayTruncated(ReplayTruncated),
    /// The workstream closed; the stream ends.
    WsClosed(Reason),
    /// A title was generated for the workstream (also sent as the global
    /// `ws_rename`).
    TitleUpdated(TitleUpdated),
    /// An event of a sub-agent, nested under its `task_agent` call.
    AgentEvent(crate::AgentEvent),
    /// A sub-agent's context use.
    AgentContext(crate::AgentContext),
    /// A notice joined the conversation (a watch result).
    SystemTurn(crate::SystemTurn),
    /// A watch was created, polled or ended.
    WatchChanged(crate::WatchChanged),
    /// Content for the preview pane.
    Preview(crate::Preview),
    /// The LLM judge's verdict on a call waiting for approval.
    IntentVerdict(Box<crate::Verdict>),
    /// An output guard's finding in a tool's output.
    OutputWarning(Box<crate::OutputWarning>),
}

/// `title_updated`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TitleUpdated {
    /// The new title.
    pub title: String,
}

impl Event {
    /// The wire `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Connected(_) => "connected",
            Self::ClearUi(_) => "clear_ui",
            Self::StateChange(_) => "state_change",
            Self::UserTurn(_) => "user_turn",
            Self::MessageQueued(_) => "message_queued",
            Self::ThinkingStart => "thinking_start",
            Self::ThinkingStop => "thinking_stop",
            Self::Reasoning(_) => "reasoning",
            Self::Content(_) => "content",
            Self::StreamEnd => "stream_end",
            Self::Status(_) => "status",
            Self::ToolPending(_) => "tool_pending",
            Self::ToolInfo(_) => "tool_info",
            Self::ApproveRequest(_) => "approve_request",
            Self::ApprovalResolved(_) => "approval_resolved",
            Self::ToolOutputChunk(_) => "tool_output_chunk",
            Self::ToolResult(_) => "tool_result",
            Self::WsState(_) => "ws_state",
            Self::Compaction(_) => "compaction",
            Self::Info(_) => "info",
            Self::Error(_) => "error",
            Self::BusyError(_) => "busy_error",
            Self::Cancelled => "cancelled",
            Self::InProgressSnapshot(_) => "in_progress_snapshot",
            Self::ReplayOk(_) => "replay_ok",
            Self::ReplayTruncated(_) => "replay_truncated",
            Self::WsClosed(_) => "ws_closed",
            Self::TitleUpdated(_) => "title_updated",
            Self::AgentEvent(_) => "agent_event",
            Self::AgentContext(_) => "agent_context",
            Self::SystemTurn(_) => "system_turn",
            Self::WatchChanged(_) => "watch_changed",
            Self::Preview(_) => "preview",
            Self::IntentVerdict(_) => "intent_verdict",
            Self::OutputWarning(_) => "output_warning",
        }
    }

    /// `content` / `reasoning` / `info` / `error` helpers for emitters.
    pub fn content(text: impl Into<String>) -> Self {
        Self::Content(Text { text: text.into() })
    }

    /// A `reasoning` event.
    pub fn reasoning(text: impl Into<String>) -> Self {
        Self::Reasoning(Text { text: text.into() })
    }

    /// An `info` event.
    pub fn info(message: impl Into<String>) -> Self {
        Self::Info(Message {
            message: message.into(),
        })
    }

    /// An `error` event.
    pub fn error(message: impl Into<String>) -> Self {
        Self::Error(Message {
            message: message.into(),
        })
    }
}

/// A workstream event as it goes on the wire: the event plus the workstream
/// it belongs to (absent only on `connected`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WsEvent {
    /// The workstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws_id: Option<String>,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

impl WsEvent {
    /// `event` of workstream `ws_id` (`connected` carries none, as in the original).
    pub fn new(ws_id: &str, event: Event) -> Self {
        let ws_id = (!matches!(event, Event::Connected(_))).then(|| ws_id.to_string());
        Self { ws_id, event }
    }
}
