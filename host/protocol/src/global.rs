//! Events of the node-wide stream (`/v1/api/events/global`, contract §3.5).

use crate::event::{ApprovalResolved, ReplayTruncated, ToolItem, WsState};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A workstream's state on the global stream (and in `node_snapshot`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GlobalWsState {
    /// The workstream.
    pub ws_id: String,
    /// Its state.
    #[serde(flatten)]
    pub state: WsState,
}

/// One workstream in `node_snapshot`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WorkstreamSnapshot {
    /// The workstream.
    pub ws_id: String,
    /// Its owner.
    pub user_id: Option<String>,
    /// Model id.
    pub model: String,
    /// Model alias.
    pub model_alias: String,
    /// Its state.
    #[serde(flatten)]
    pub state: WsState,
}

/// Node-wide totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Aggregate {
    /// Tokens over all workstreams.
    pub total_tokens: u64,
    /// Tool calls over all workstreams.
    pub total_tool_calls: u64,
    /// Workstreams running a turn.
    pub active_count: usize,
    /// Loaded workstreams.
    pub total_count: usize,
}

/// `node_snapshot`: the first event of the global stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodeSnapshot {
    /// This node.
    pub node_id: String,
    /// Loaded workstreams the subscriber may see.
    pub workstreams: Vec<WorkstreamSnapshot>,
    /// The `/health` body.
    pub health: Health,
    /// Node-wide totals.
    pub aggregate: Aggregate,
    /// Set when the stream is filtered to one user's workstreams.
    pub filtered_to_user: Option<String>,
}

/// `ws_created`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WsCreated {
    /// The workstream.
    pub ws_id: String,
    /// Display name.
    pub name: String,
    /// Model id.
    pub model: String,
    /// Model alias.
    pub model_alias: String,
    /// `interactive`.
    pub kind: String,
    /// Always `null` here.
    pub parent_ws_id: Option<String>,
    /// Owner.
    pub user_id: Option<String>,
    /// Always `null` here.
    pub project_id: Option<String>,
    /// Always `null` here.
    pub persona: Option<String>,
}

/// `ws_activity`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WsActivity {
    /// The workstream.
    pub ws_id: String,
    /// "Reasoning…", "⏳ Awaiting approval: …" or empty.
    pub activity: String,
    /// `thinking`, `approval` or empty.
    pub activity_state: String,
}

/// `ws_rename`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WsRename {
    /// The workstream.
    pub ws_id: String,
    /// New name.
    pub name: String,
}

/// The `detail` of a global `approve_request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApproveDetail {
    /// Always `approve_request`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The cycle.
    pub cycle_id: String,
    /// The batch.
    pub items: Vec<ToolItem>,
}

/// Global `approve_request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GlobalApproveRequest {
    /// The workstream.
    pub ws_id: String,
    /// The request.
    pub detail: ApproveDetail,
}

/// Global `intent_verdict`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GlobalIntentVerdict {
    /// The workstream.
    pub ws_id: String,
    /// The verdict.
    pub verdict: crate::Verdict,
}

/// Global `approval_resolved`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GlobalApprovalResolved {
    /// The workstream.
    pub ws_id: String,
    /// The answer.
    #[serde(flatten)]
    pub resolved: ApprovalResolved,
}

/// Global `ws_closed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GlobalWsClosed {
    /// The workstream.
    pub ws_id: String,
    /// Why.
    pub reason: String,
    /// Its name.
    pub name: String,
}

/// The model backend's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BackendHealth {
    /// `up` or `down`.
    pub status: String,
}

/// The default model of `/health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct DefaultModel {
    /// Its alias.
    pub alias: String,
    /// Always true (an alias that cannot load fails the start).
    pub loaded: bool,
}

/// The `/health` body (also in `node_snapshot`). The fields after `mcp` are
/// there when the server runs a session engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    /// `ok`, or `degraded` while the model backend is down.
    pub status: String,
    /// Server version.
    pub version: String,
    /// This node.
    pub node_id: String,
    /// Seconds since start.
    pub uptime_seconds: f64,
    /// The model backend.
    pub backend: BackendHealth,
    /// MCP servers (always `null` until MCP lands).
    #[schema(value_type = Option<Object>)]
    pub mcp: Option<serde_json::Value>,
    /// The default alias's model id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Most loaded workstreams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ws: Option<usize>,
    /// Loaded workstreams per state, and `total`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workstreams: Option<std::collections::BTreeMap<String, usize>>,
    /// The default model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<DefaultModel>,
    /// Whether processes plugins spawn can be sandboxed on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_sandbox: Option<ProcessSandboxHealth>,
}

/// The kernel sandbox for spawned processes on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProcessSandboxHealth {
    /// Landlock, seccomp and user + network namespaces are all available.
    pub available: bool,
    /// What is available, or what is missing.
    pub detail: String,
}

/// `health_changed`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HealthChanged {
    /// `up` or `down`.
    pub backend_status: String,
    /// `ok` or `degraded` (as `/health`).
    pub status: String,
    /// The backend.
    pub backend: BackendHealth,
    /// The default model alias.
    pub default_model: String,
}

/// One event of the global stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GlobalEvent {
    /// First event: what the node holds now.
    NodeSnapshot(NodeSnapshot),
    /// A workstream was created or loaded.
    WsCreated(WsCreated),
    /// A workstream's state changed.
    WsState(GlobalWsState),
    /// A workstream's activity line changed.
    WsActivity(WsActivity),
    /// A workstream was renamed.
    WsRename(WsRename),
    /// A workstream waits for an approval.
    ApproveRequest(GlobalApproveRequest),
    /// An approval was answered.
    ApprovalResolved(GlobalApprovalResolved),
    /// The LLM judge's verdict on a call waiting for approval.
    IntentVerdict(GlobalIntentVerdict),
    /// A workstream closed.
    WsClosed(GlobalWsClosed),
    /// Node-wide totals changed (service subscribers).
    Aggregate(Aggregate),
    /// The model backend went down or came back (service subscribers).
    HealthChanged(HealthChanged),
    /// This subscriber fell behind and missed events.
    ReplayTruncated(ReplayTruncated),
}
