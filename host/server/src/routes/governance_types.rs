//! Wire types of the governance routes: tool policies, usage and the audit
//! log. Every pattern and bound here is the whole check the handler makes.

use serde::{Deserialize, Serialize};
use turnstone_storage::prelude::*;
use utoipa::{IntoParams, ToSchema};

/// What a policy does with a matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum PolicyActionWire {
    /// Runs without asking.
    Allow,
    /// Refused before any approval card.
    Deny,
    /// Always asks, even for tools that would run without approval.
    Ask,
}

impl From<PolicyActionWire> for PolicyAction {
    fn from(a: PolicyActionWire) -> Self {
        match a {
            PolicyActionWire::Allow => Self::Allow,
            PolicyActionWire::Deny => Self::Deny,
            PolicyActionWire::Ask => Self::Ask,
        }
    }
}

impl From<PolicyAction> for PolicyActionWire {
    fn from(a: PolicyAction) -> Self {
        match a {
            PolicyAction::Allow => Self::Allow,
            PolicyAction::Deny => Self::Deny,
            PolicyAction::Ask => Self::Ask,
        }
    }
}

/// A built-in role a policy may be limited to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RoleName {
    /// Administrators.
    Admin,
    /// Operators.
    Operator,
    /// Viewers.
    Viewer,
}

impl RoleName {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Operator => "operator",
            Self::Viewer => "viewer",
        }
    }
}

/// A policy to create, or to replace one with.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyBody {
    /// Unique name.
    #[schema(pattern = r"^[A-Za-z0-9_.\-]{1,64}$")]
    pub name: String,
    /// Glob over tool names: `*`, `?`, `[abc]`, `[!abc]` and tool-name
    /// characters, e.g. `mcp__github__*`.
    #[schema(
        pattern = r"^([A-Za-z0-9_*?\-]|\[!?[A-Za-z0-9_\-]+\])+$",
        min_length = 1,
        max_length = 128
    )]
    pub tool_pattern: String,
    /// What a matching call gets.
    pub action: PolicyActionWire,
    /// Only for users of this role (absent: everyone).
    #[serde(default)]
    pub role: Option<RoleName>,
    /// Lower numbers are checked first (default 100).
    #[serde(default, deserialize_with = "super::integral")]
    #[schema(minimum = -1_000_000, maximum = 1_000_000)]
    pub priority: Option<i64>,
    /// Checked at all (default true).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Why the rule exists (shown to the model when it denies).
    #[serde(default)]
    #[schema(max_length = 1000)]
    pub description: Option<String>,
}

/// A tool policy.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct PolicyView {
    /// Id (32 hex).
    pub policy_id: String,
    /// Unique name.
    pub name: String,
    /// Glob over tool names.
    pub tool_pattern: String,
    /// What a match does.
    pub action: PolicyActionWire,
    /// Only for this role.
    pub role: Option<String>,
    /// Check order (lower first).
    pub priority: i64,
    /// Checked at all.
    pub enabled: bool,
    /// Why.
    pub description: String,
    /// Who created it.
    pub created_by: Option<String>,
    /// When.
    pub created: String,
    /// Last change.
    pub updated: String,
}

impl From<ToolPolicy> for PolicyView {
    fn from(p: ToolPolicy) -> Self {
        Self {
            policy_id: p.policy_id,
            name: p.name,
            tool_pattern: p.tool_pattern,
            action: p.action.into(),
            role: p.role,
            priority: p.priority,
            enabled: p.enabled,
            description: p.description,
            created_by: p.created_by,
            created: p.created,
            updated: p.updated,
        }
    }
}

/// Every policy, in the order they are checked.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct PolicyList {
    /// The policies.
    pub policies: Vec<PolicyView>,
}

/// Query of `GET /api/admin/usage`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct UsageParams {
    /// From this UTC date or time on.
    #[param(
        pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?Z?)?$"
    )]
    pub since: Option<String>,
    /// Before this UTC date or time.
    #[param(
        pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?Z?)?$"
    )]
    pub until: Option<String>,
    /// One user's usage.
    #[param(max_length = 64)]
    pub user_id: Option<String>,
    /// One model alias's usage.
    #[param(max_length = 128)]
    pub model: Option<String>,
    /// Grouping, comma-separated, in order: `user`, `model`, `day`
    /// (default `user,model,day`).
    #[param(pattern = r"^(user|model|day)(,(user|model|day))*$")]
    pub group_by: Option<String>,
}

/// Summed usage of one group.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct UsageRowView {
    /// The group's user (grouped by user).
    pub user_id: Option<String>,
    /// The group's user name, when the user exists.
    pub username: Option<String>,
    /// The group's model alias (grouped by model).
    pub model: Option<String>,
    /// The group's UTC day (grouped by day).
    pub day: Option<String>,
    /// Model calls.
    pub calls: i64,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// Prompt tokens read from a cache.
    pub cached_tokens: i64,
    /// Prompt tokens written to a cache.
    pub cache_creation_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
    /// Tool calls the replies made.
    pub tool_calls: i64,
    /// Mean latency of a call, in milliseconds.
    pub avg_latency_ms: i64,
}

/// `GET /api/admin/usage`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct UsageResponse {
    /// The grouping used.
    pub group_by: Vec<String>,
    /// One row per group.
    pub rows: Vec<UsageRowView>,
    /// Everything matched, summed.
    pub total: UsageRowView,
}

/// Query of `GET /api/admin/audit`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditParams {
    /// Entries per page (default 100, at most 1000).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// Entries older than this id (the previous page's `next_before`).
    #[param(minimum = 1, maximum = 9_007_199_254_740_991i64)]
    pub before: Option<i64>,
    /// An action (`auth.login`), or a prefix ending in `.` or `*`
    /// (`tool.`, `policy.*`).
    #[param(max_length = 100)]
    pub action: Option<String>,
    /// By this user id.
    #[param(max_length = 64)]
    pub user_id: Option<String>,
    /// On this target (a workstream id, a plugin, a username, …).
    #[param(max_length = 256)]
    pub target: Option<String>,
    /// From this UTC date or time on.
    #[param(
        pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?Z?)?$"
    )]
    pub since: Option<String>,
    /// Before this UTC date or time.
    #[param(
        pattern = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}(:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?Z?)?$"
    )]
    pub until: Option<String>,
}

/// One audit entry.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct AuditView {
    /// Id (pages go by it).
    pub id: i64,
    /// When (UTC).
    pub timestamp: String,
    /// Who.
    pub user_id: Option<String>,
    /// What, e.g. `tool.approve`, `auth.login_failed`, `policy.create`.
    pub action: String,
    /// On what.
    pub target: Option<String>,
    /// Details (JSON, as recorded).
    #[schema(value_type = Object)]
    pub detail: Option<serde_json::Value>,
    /// The client's address.
    pub ip: Option<String>,
}

impl From<AuditEntry> for AuditView {
    fn from(e: AuditEntry) -> Self {
        Self {
            id: e.id,
            timestamp: e.timestamp,
            user_id: e.user_id,
            action: e.action,
            target: e.target,
            detail: e
                .detail
                .map(|d| serde_json::from_str(&d).unwrap_or(serde_json::Value::String(d))),
            ip: e.ip,
        }
    }
}

/// `GET /api/admin/audit`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct AuditPage {
    /// Newest first.
    pub entries: Vec<AuditView>,
    /// Pass as `before` for the next (older) page; none at the end.
    pub next_before: Option<i64>,
}
