//! Bodies of the read-only views (models, skills, dashboard, saved
//! workstreams, history, export); `/openapi.json` is generated from them.

use serde::{Deserialize, Serialize};
use turnstone_protocol::SessionState;
use utoipa::{IntoParams, ToSchema};

/// One configured model alias.
#[derive(Serialize, ToSchema)]
pub(crate) struct ModelInfo {
    /// The alias.
    pub alias: String,
    /// The provider's model id.
    pub model: String,
    /// Provider (`openai`, `anthropic`, …).
    pub provider: String,
    /// Context window in tokens, when configured.
    pub context_window: Option<u32>,
    /// Capability overrides from the configuration.
    #[schema(value_type = Option<Object>)]
    pub capabilities: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `GET /api/models`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ModelsBody {
    /// The aliases.
    pub models: Vec<ModelInfo>,
    /// The alias new workstreams use.
    pub default_alias: String,
    /// Always `null` (channels are not built yet).
    pub channel_default_alias: Option<String>,
    /// Always `null`.
    pub judge_default_alias: Option<String>,
    /// Always `null`.
    pub stt_default_alias: Option<String>,
    /// Always `null`.
    pub tts_default_alias: Option<String>,
}

/// `GET /api/skills`.
#[derive(Serialize, ToSchema)]
pub(crate) struct SkillsBody {
    /// Skills, by name.
    pub skills: Vec<SkillSummary>,
}

/// One skill as clients of the original list them.
#[derive(Serialize, ToSchema)]
pub(crate) struct SkillSummary {
    /// Skill name.
    pub name: String,
    /// Category (`""` without one).
    pub category: String,
    /// What it is for.
    pub description: String,
    /// Search words.
    pub tags: Vec<String>,
    /// `manual` (saved through the API, the CLI or the skills tool) or
    /// `file` (a skills directory).
    pub origin: String,
    /// Who saved the latest version (`""` for files).
    pub author: String,
    /// The version, as a string.
    pub version: String,
}

/// One loaded workstream on the dashboard.
#[derive(Serialize, ToSchema)]
pub(crate) struct DashboardEntry {
    /// Id.
    pub ws_id: String,
    /// Display name.
    pub name: String,
    /// State.
    pub state: SessionState,
    /// Title (the display name).
    pub title: String,
    /// Tokens over its life.
    pub tokens: u64,
    /// Prompt tokens over the context window.
    pub context_ratio: f64,
    /// What it is doing.
    pub activity: String,
    /// `thinking`, `approval` or empty.
    pub activity_state: String,
    /// Tool calls in the running (or last) turn.
    pub tool_calls: u32,
    /// Model id.
    pub model: String,
    /// Model alias.
    pub model_alias: String,
    /// Owner.
    pub user_id: Option<String>,
    /// `interactive`.
    pub kind: String,
    /// The node it runs on.
    pub node: String,
}

/// Dashboard totals.
#[derive(Serialize, ToSchema)]
pub(crate) struct DashboardAggregate {
    /// Tokens over all workstreams.
    pub total_tokens: u64,
    /// Tool calls over all workstreams.
    pub total_tool_calls: u64,
    /// Workstreams not idle.
    pub active_count: usize,
    /// Loaded workstreams.
    pub total_count: usize,
    /// Seconds since start.
    pub uptime_seconds: f64,
    /// This node.
    pub node: String,
}

/// `GET /api/dashboard`.
#[derive(Serialize, ToSchema)]
pub(crate) struct DashboardBody {
    /// The caller's loaded workstreams.
    pub workstreams: Vec<DashboardEntry>,
    /// Totals.
    pub aggregate: DashboardAggregate,
}

/// Sort keys of the saved list (the original's, plus `created`); ties are
/// broken by `ws_id`, so pages never overlap.
#[derive(Deserialize, ToSchema, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SavedSort {
    /// Newest activity (default).
    #[default]
    Updated,
    /// Creation time.
    Created,
    /// Display name.
    Name,
    /// Stored messages.
    #[serde(alias = "messages")]
    MessageCount,
    /// Kind.
    Kind,
    /// Id.
    WsId,
    /// Persona.
    Persona,
    /// Project.
    Project,
    /// Model alias (not recorded yet: ties).
    Model,
    /// Children (none yet: ties).
    ChildCount,
    /// Context use (not recorded yet: ties).
    ContextRatio,
}

/// Sort direction.
#[derive(Deserialize, ToSchema, Clone, Copy, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SortOrder {
    /// Ascending.
    Asc,
    /// Descending (default).
    #[default]
    Desc,
}

/// Largest page of the saved list; larger `limit`s are clamped to it.
pub(crate) const MAX_SAVED_PAGE: i64 = 500;
/// Longest saved-list search.
pub(crate) const MAX_SAVED_QUERY: usize = 256;
/// Largest `limit` or `offset` accepted at all.
pub(crate) const MAX_QUERY_INT: i64 = 1_000_000_000;
/// Most messages one `/history` call returns.
pub(crate) const MAX_HISTORY: usize = 10_000;

/// Query of `GET /api/workstreams/saved`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SavedQuery {
    /// Rows per page (default 50; above 500 clamped to 500; 0 returns only
    /// the total).
    #[param(minimum = 0, maximum = 1_000_000_000)]
    pub limit: Option<i64>,
    /// Matching rows to skip (default 0).
    #[param(minimum = 0, maximum = 1_000_000_000)]
    pub offset: Option<i64>,
    /// Case-insensitive substring of the name, title or alias, or an id
    /// prefix (at most 256 characters).
    #[param(max_length = 256)]
    pub q: Option<String>,
    /// Sort key (default `updated`).
    #[param(inline)]
    pub sort: Option<SavedSort>,
    /// Direction (default `desc`).
    #[param(inline)]
    pub order: Option<SortOrder>,
}

/// One saved workstream.
#[derive(Serialize, ToSchema)]
pub(crate) struct SavedEntry {
    /// Id.
    pub ws_id: String,
    /// Alias.
    pub alias: Option<String>,
    /// Title.
    pub title: Option<String>,
    /// Display name.
    pub name: String,
    /// Created.
    pub created: String,
    /// Newest turn.
    pub updated: String,
    /// Stored messages.
    pub message_count: i64,
    /// Stored state.
    pub state: String,
    /// Kind.
    pub kind: String,
    /// Last node that ran it.
    pub node_id: Option<String>,
    /// Always `null` here.
    pub model_alias: Option<String>,
    /// Skill it was launched with.
    pub launch_skill: Option<String>,
    /// Always 0.
    pub child_count: u32,
    /// Always `null` here.
    pub context_tokens: Option<u64>,
    /// Always `null` here.
    pub context_ratio: Option<f64>,
    /// Project.
    pub project_id: Option<String>,
    /// Persona.
    pub persona: Option<String>,
}

/// `GET /api/workstreams/saved`.
#[derive(Serialize, ToSchema)]
pub(crate) struct SavedBody {
    /// The page.
    pub workstreams: Vec<SavedEntry>,
    /// Matches over all pages.
    pub total: usize,
    /// Page size used.
    pub limit: i64,
    /// Offset used.
    pub offset: i64,
}

/// An image attached to a history message.
#[derive(Serialize, ToSchema)]
pub(crate) struct HistoryAttachment {
    /// The attachment.
    #[schema(value_type = Option<String>)]
    pub attachment_id: serde_json::Value,
    /// Always `image`.
    pub kind: &'static str,
}

/// One message of `/history`.
#[derive(Serialize, ToSchema)]
pub(crate) struct HistoryMessage {
    /// `user`, `assistant`, `tool` or `system`.
    pub role: String,
    /// Text.
    pub content: Option<String>,
    /// Stored row id.
    pub event_id: i64,
    /// User messages: who sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub sender: Option<Option<String>>,
    /// Assistant messages: the tool calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<serde_json::Value>,
    /// Tool results: the call answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Tool results: what the call touched at the sandbox boundary
    /// (`CapabilityAudit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<turnstone_protocol::CapabilityAudit>)]
    pub capabilities: Option<serde_json::Value>,
    /// Tool results: what the output guard flagged (`kind:label`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<String>>)]
    pub output_flags: Option<serde_json::Value>,
    /// Tool results: the tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub name: Option<Option<String>>,
    /// Tool results: whether it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Assistant messages: the model's reasoning.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub reasoning: Option<serde_json::Value>,
    /// Where a synthetic message came from (`compaction`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Images sent with a user message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<HistoryAttachment>>,
}

/// Query of `/history`.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HistoryQuery {
    /// Newest messages to return (1-10000, default 100; others are refused).
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<usize>,
}

/// `GET /api/workstreams/{ws_id}/history`.
#[derive(Serialize, ToSchema)]
pub(crate) struct HistoryBody {
    /// The workstream.
    pub ws_id: String,
    /// Oldest first.
    pub messages: Vec<HistoryMessage>,
    /// Loaded workstreams: the last event id at the time of reading
    /// (resume the stream after it).
    pub cursor: Option<u64>,
    /// Loaded workstreams: a one-shot token for `events?handoff=`.
    pub handoff_token: Option<String>,
}

/// A tool call's function in `/export`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ExportFunction {
    /// Tool name.
    #[schema(value_type = Option<String>)]
    pub name: serde_json::Value,
    /// Arguments (JSON text).
    #[schema(value_type = Option<String>)]
    pub arguments: serde_json::Value,
}

/// A tool call in `/export`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ExportToolCall {
    /// Call id.
    #[schema(value_type = Option<String>)]
    pub id: serde_json::Value,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The call.
    pub function: ExportFunction,
}

/// One OpenAI-style message of `/export`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ExportMessage {
    /// Role.
    pub role: String,
    /// Text.
    pub content: Option<String>,
    /// Assistant tool calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ExportToolCall>>,
    /// The call a tool result answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

/// `GET /api/workstreams/{ws_id}/export`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ExportBody {
    /// The workstream.
    pub ws_id: String,
    /// The conversation.
    pub messages: Vec<ExportMessage>,
}
