//! Records stored and returned by the storage API.

use crate::error::{Result, StorageError};
use serde::{Deserialize, Serialize};

/// Largest `content` of one turn (16 MiB).
pub const MAX_CONTENT_BYTES: usize = 16 << 20;
/// Largest JSON side field of one turn (tool_calls, provider_data, …).
pub const MAX_JSON_BYTES: usize = 16 << 20;

/// Lifecycle state of a workstream. `Creating` is internal: such rows are
/// hidden from ordinary reads until published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkstreamState {
    /// Hidden reservation during create/fork.
    Creating,
    /// Waiting for input.
    Idle,
    /// The model is generating.
    Thinking,
    /// Tools are running.
    Running,
    /// Waiting for the user (approval).
    Attention,
    /// The last turn failed.
    Error,
    /// Closed (reopenable).
    Closed,
}

impl WorkstreamState {
    /// Lower-case name as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Creating => "creating",
            Self::Idle => "idle",
            Self::Thinking => "thinking",
            Self::Running => "running",
            Self::Attention => "attention",
            Self::Error => "error",
            Self::Closed => "closed",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "creating" => Self::Creating,
            "idle" => Self::Idle,
            "thinking" => Self::Thinking,
            "running" => Self::Running,
            "attention" => Self::Attention,
            "error" => Self::Error,
            "closed" => Self::Closed,
            other => {
                return Err(StorageError::InvalidInput(format!(
                    "unknown workstream state {other:?}"
                )));
            }
        })
    }
}

/// A workstream row (without its private incarnation token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workstream {
    /// Identity.
    pub ws_id: String,
    /// Owning node hint.
    pub node_id: Option<String>,
    /// Owner.
    pub user_id: Option<String>,
    /// Unique alias.
    pub alias: Option<String>,
    /// Generated title.
    pub title: Option<String>,
    /// Display name.
    pub name: String,
    /// Lifecycle state.
    pub state: WorkstreamState,
    /// `interactive` or `coordinator`.
    pub kind: String,
    /// Parent for sub-agents.
    pub parent_ws_id: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// Persona.
    pub persona: Option<String>,
    /// Skill.
    pub skill_id: Option<String>,
    /// Skill version.
    pub skill_version: Option<i64>,
    /// Creation time (RFC 3339 UTC).
    pub created: String,
    /// Last update time.
    pub updated: String,
}

/// What to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewWorkstream {
    /// Explicit id (default: random 32 hex chars).
    pub ws_id: Option<String>,
    /// Owning node.
    pub node_id: Option<String>,
    /// Owner.
    pub user_id: Option<String>,
    /// Alias (unique).
    pub alias: Option<String>,
    /// Title.
    pub title: Option<String>,
    /// Display name.
    pub name: String,
    /// Kind (default `interactive`).
    pub kind: Option<String>,
    /// Parent.
    pub parent_ws_id: Option<String>,
    /// Project.
    pub project_id: Option<String>,
    /// Persona.
    pub persona: Option<String>,
    /// Skill.
    pub skill_id: Option<String>,
    /// Skill version.
    pub skill_version: Option<i64>,
}

/// A hidden `creating` row and the private token that owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The reserved id.
    pub ws_id: String,
    /// The incarnation token; only its holder may publish or discard.
    pub token: String,
}

/// A workstream with history, for listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkstreamSummary {
    /// The row.
    pub workstream: Workstream,
    /// Stored turns.
    pub message_count: i64,
    /// Timestamp of the newest turn.
    pub last_activity: String,
}

/// Conversation roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// User input.
    User,
    /// Model output.
    Assistant,
    /// Tool result.
    Tool,
    /// System prompt / notices.
    System,
}

impl Role {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
            Self::System => "system",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "user" => Self::User,
            "assistant" => Self::Assistant,
            "tool" => Self::Tool,
            "system" => Self::System,
            other => {
                return Err(StorageError::InvalidInput(format!(
                    "unknown role {other:?}"
                )));
            }
        })
    }
}

/// One canonical turn: what is appended, and (inside [`StoredTurn`]) what is
/// read back. JSON side fields are JSON text, stored byte-exact (tool-call
/// arguments must survive unchanged).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NewTurn {
    /// Role.
    pub role: Role,
    /// Text content.
    pub content: Option<String>,
    /// Tool name (tool turns).
    pub tool_name: Option<String>,
    /// Call id a tool turn answers.
    pub tool_call_id: Option<String>,
    /// Assistant tool calls (JSON array).
    pub tool_calls: Option<String>,
    /// Opaque provider-native lane (JSON).
    pub provider_data: Option<String>,
    /// Provenance, e.g. `compaction`.
    pub source: Option<String>,
    /// SSE cursor.
    pub event_id: Option<i64>,
    /// Tool result was an error.
    pub is_error: bool,
    /// Attachment references (JSON).
    pub attachments: Option<String>,
    /// Side metadata (JSON), e.g. effect status.
    pub meta: Option<String>,
}

impl NewTurn {
    /// A turn with only role and content.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(content.into()),
            tool_name: None,
            tool_call_id: None,
            tool_calls: None,
            provider_data: None,
            source: None,
            event_id: None,
            is_error: false,
            attachments: None,
            meta: None,
        }
    }

    /// Builds a turn from raw bytes (e.g. process output), refusing invalid UTF-8.
    pub fn from_utf8(role: Role, bytes: Vec<u8>) -> Result<Self> {
        let text = String::from_utf8(bytes).map_err(|e| {
            StorageError::InvalidInput(format!(
                "content is not valid UTF-8 (first bad byte at offset {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        Ok(Self::text(role, text))
    }

    /// Checks sizes, JSON fields and NUL characters (PostgreSQL text cannot hold
    /// NUL; both backends refuse it so behaviour is identical).
    pub fn validate(&self) -> Result<()> {
        if let Some(c) = &self.content {
            if c.len() > MAX_CONTENT_BYTES {
                return Err(StorageError::TooLarge {
                    field: "content",
                    size: c.len(),
                    limit: MAX_CONTENT_BYTES,
                });
            }
            if c.contains('\0') {
                return Err(StorageError::InvalidInput(
                    "content contains a NUL character".into(),
                ));
            }
        }
        for (field, v) in [
            ("tool_calls", &self.tool_calls),
            ("provider_data", &self.provider_data),
            ("attachments", &self.attachments),
            ("meta", &self.meta),
        ] {
            let Some(v) = v else { continue };
            if v.len() > MAX_JSON_BYTES {
                return Err(StorageError::TooLarge {
                    field,
                    size: v.len(),
                    limit: MAX_JSON_BYTES,
                });
            }
            if serde_json::from_str::<serde::de::IgnoredAny>(v).is_err() {
                return Err(StorageError::InvalidInput(format!(
                    "{field} is not valid JSON"
                )));
            }
        }
        for (field, v) in [
            ("tool_name", &self.tool_name),
            ("tool_call_id", &self.tool_call_id),
            ("source", &self.source),
        ] {
            if v.as_ref()
                .is_some_and(|s| s.contains('\0') || s.len() > 4096)
            {
                return Err(StorageError::InvalidInput(format!(
                    "{field} is too long or contains NUL"
                )));
            }
        }
        Ok(())
    }
}

/// A stored turn: the row's identity plus the turn exactly as it was appended.
///
/// The turn's fields live in [`NewTurn`] only, so what is saved and what is
/// loaded cannot drift apart.
/// Serialized flat (`id`, `ws_id`, `timestamp`, then the turn's fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredTurn {
    /// Row id (monotonic per database).
    pub id: i64,
    /// Workstream.
    pub ws_id: String,
    /// When it was saved.
    pub timestamp: String,
    /// What the turn says, as appended.
    #[serde(flatten)]
    pub turn: NewTurn,
}

/// How much history to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadMode {
    /// For resuming: the latest valid compaction checkpoint's summary turns plus
    /// what follows it; the full transcript when there is no valid checkpoint.
    Resume,
    /// Every source turn (compaction summaries excluded), e.g. for export.
    Transcript,
    /// Every row, including compaction summaries.
    Everything,
}

/// The `source` value marking compaction summary turns.
pub const COMPACTION_SOURCE: &str = "compaction";

/// A compaction checkpoint: the summary turns and the last source turn they cover.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Ids of the summary turns, in order.
    pub summary_ids: Vec<i64>,
    /// Id of the last source turn the summary covers.
    pub watermark: i64,
}

/// One full-text search hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SearchHit {
    /// Turn id.
    pub turn_id: i64,
    /// Workstream.
    pub ws_id: String,
    /// The workstream's title, else its alias, else its name.
    pub ws_name: Option<String>,
    /// The tool of a tool result.
    pub tool_name: Option<String>,
    /// Role.
    pub role: Role,
    /// The message text.
    pub message: String,
    /// When it was saved.
    pub timestamp: String,
}

/// Filters for history search.
#[derive(Debug, Clone, Default)]
pub struct SearchFilter {
    /// Only this workstream.
    pub ws_id: Option<String>,
    /// Only workstreams of this user.
    pub user_id: Option<String>,
    /// Max hits (default 20, max 1000).
    pub limit: Option<i64>,
    /// Hits to skip (newest first), for paging.
    pub offset: Option<i64>,
}

/// Memory types.
pub const MEMORY_TYPES: &[&str] = &["user", "general", "feedback", "reference"];
/// Memory scopes.
pub const MEMORY_SCOPES: &[&str] = &["global", "workstream", "user", "project"];

/// Whose memories one caller may see: the global ones, plus those of its
/// user, workstream and project (each when it has one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryView {
    /// The caller's user.
    pub user_id: Option<String>,
    /// The caller's workstream.
    pub ws_id: Option<String>,
    /// The caller's project.
    pub project_id: Option<String>,
}

/// A skill version to save (the next version of its name).
#[derive(Debug, Clone, Default)]
pub struct NewSkill {
    /// Skill name.
    pub name: String,
    /// One-line description (for listings).
    pub description: String,
    /// The `SKILL.md` document.
    pub content: String,
    /// Who saved it.
    pub created_by: Option<String>,
}

/// One saved version of a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillRecord {
    /// Row id.
    pub template_id: String,
    /// Skill name.
    pub name: String,
    /// 1, 2, …
    pub version: i64,
    /// One-line description.
    pub description: String,
    /// The `SKILL.md` document.
    pub content: String,
    /// When it was saved.
    pub created: String,
    /// Who saved it.
    pub created_by: Option<String>,
}

/// A structured memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Memory {
    /// Id.
    pub memory_id: String,
    /// Short snake_case name.
    pub name: String,
    /// Relevance description.
    pub description: String,
    /// user | general | feedback | reference.
    pub memory_type: String,
    /// global | workstream | user | project.
    pub scope: String,
    /// Workstream or user id for scoped memories ("" for global).
    pub scope_id: String,
    /// Content.
    pub content: String,
    /// Created.
    pub created: String,
    /// Updated.
    pub updated: String,
    /// Last read.
    pub last_accessed: Option<String>,
    /// Reads.
    pub access_count: i64,
}

/// A memory to save (upsert by name + scope + scope_id).
#[derive(Debug, Clone, Default)]
pub struct NewMemory {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Type (default `general` for a new memory; an update keeps the old one).
    pub memory_type: Option<String>,
    /// Scope (default `global`).
    pub scope: Option<String>,
    /// Scope id.
    pub scope_id: String,
    /// Content.
    pub content: String,
}

/// A user account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    /// Id.
    pub user_id: String,
    /// Login name.
    pub username: String,
    /// Display name.
    pub display_name: String,
    /// Password hash (argon2/bcrypt string); never the password.
    #[serde(skip)]
    pub password_hash: String,
    /// RBAC role.
    pub role: String,
    /// Created.
    pub created: String,
}

/// An API token record (the raw token is shown once, at creation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiToken {
    /// Id.
    pub token_id: String,
    /// First 8 characters, for display.
    pub token_prefix: String,
    /// Owner.
    pub user_id: String,
    /// Label.
    pub name: String,
    /// Scopes.
    pub scopes: Vec<String>,
    /// Created.
    pub created: String,
    /// Expiry, if any.
    pub expires: Option<String>,
    /// Last successful use.
    pub last_used: Option<String>,
}

/// Persisted plugin state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PluginRecord {
    /// Plugin name.
    pub name: String,
    /// Version.
    pub version: String,
    /// tool | provider | channel.
    pub kind: String,
    /// Operator toggle.
    pub enabled: bool,
    /// Granted capabilities as JSON; `None` = default for its origin.
    pub granted: Option<String>,
    /// Plugin config as a JSON object.
    pub config: String,
    /// loaded | failed | update_failed | disabled | unknown.
    pub state: String,
    /// Last load/update error.
    pub last_error: Option<String>,
    /// Last change.
    pub updated: String,
    /// Bumped to ask every node to reload the plugin from disk.
    pub reload_seq: i64,
}

/// An MCP server defined at run time (admin API, console); servers in
/// `config.toml` have no row. Enabled, grant and reload requests are in the
/// `plugins` row of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpServerRecord {
    /// Server name (the `{server}` of `mcp__{server}__{tool}`).
    pub name: String,
    /// The `[mcp.servers.NAME]` entry as a JSON object.
    pub definition: String,
    /// Who created it.
    pub created_by: Option<String>,
    /// Created.
    pub created: String,
    /// Last definition change.
    pub updated: String,
}

/// An audit log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// Row id (0 before insert).
    pub id: i64,
    /// When.
    pub timestamp: String,
    /// Acting user.
    pub user_id: Option<String>,
    /// What, e.g. `plugin.disable`.
    pub action: String,
    /// On what.
    pub target: Option<String>,
    /// Details (JSON).
    pub detail: Option<String>,
    /// Client address.
    pub ip: Option<String>,
}

/// Token usage of one model call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageEvent {
    /// User.
    pub user_id: Option<String>,
    /// Workstream.
    pub ws_id: Option<String>,
    /// Model id.
    pub model: Option<String>,
    /// Model alias the call was made through.
    pub model_alias: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// Prompt tokens read from the provider's cache.
    pub cached_tokens: i64,
    /// Prompt tokens written to the provider's cache.
    pub cache_creation_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
    /// Tool calls the reply made.
    pub tool_calls: i64,
    /// Request to last byte, in milliseconds.
    pub latency_ms: i64,
    /// What the call was for: `turn`, `compaction`, `title`, `judge`,
    /// `tool` (a tool asked the model) or `agent` (a sub-agent's turn).
    pub purpose: String,
}

/// How usage is grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UsageGroup {
    /// By user.
    User,
    /// By model alias.
    Model,
    /// By UTC day.
    Day,
}

/// Which usage to sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageQuery {
    /// From this timestamp on (inclusive; RFC 3339 or a date).
    pub since: Option<String>,
    /// Before this timestamp.
    pub until: Option<String>,
    /// One user's.
    pub user_id: Option<String>,
    /// One model alias's.
    pub model_alias: Option<String>,
    /// Grouping, in order (none: one total row).
    pub group_by: Vec<UsageGroup>,
}

/// Summed usage of one group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsageRow {
    /// The group's user (when grouped by user).
    pub user_id: Option<String>,
    /// The group's model alias (when grouped by model).
    pub model: Option<String>,
    /// The group's UTC day, `YYYY-MM-DD` (when grouped by day).
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
    /// Tool calls made.
    pub tool_calls: i64,
    /// Mean latency, in milliseconds.
    pub avg_latency_ms: i64,
}

/// Which audit entries to list, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// At most this many (1-1000).
    pub limit: i64,
    /// Entries older than this id (paging).
    pub before_id: Option<i64>,
    /// Actions equal to this, or starting with it when it ends in `.`
    /// or `*` (`auth.`, `tool.*`).
    pub action: Option<String>,
    /// By this user.
    pub user_id: Option<String>,
    /// On this target.
    pub target: Option<String>,
    /// From this timestamp on.
    pub since: Option<String>,
    /// Before this timestamp.
    pub until: Option<String>,
}

/// What a tool policy does with a matching call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyAction {
    /// Runs without asking.
    Allow,
    /// Refused before any approval card.
    Deny,
    /// Always asks, even for tools that would run without approval.
    Ask,
}

impl PolicyAction {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask => "ask",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "allow" => Some(Self::Allow),
            "deny" => Some(Self::Deny),
            "ask" => Some(Self::Ask),
            _ => None,
        }
    }
}

/// Compiles a policy's glob over tool names: letters, digits, `_`, `-`,
/// `*` (any run), `?` (one character) and classes `[abc]` / `[!abc]` of
/// tool-name characters, 1-128 characters in all. Runs of `*` are one `*`
/// (tool names have no path separators to cross). The error says what is
/// wrong.
pub fn tool_glob(pattern: &str) -> Result<glob::Pattern, String> {
    let bad = || {
        format!(
            "tool pattern {pattern:?} must be 1-128 characters of tool-name characters \
             (letters, digits, _ and -), * and ?, and classes such as [abc] or [!abc]"
        )
    };
    if pattern.is_empty() || pattern.len() > 128 {
        return Err(bad());
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let mut chars = pattern.chars().peekable();
    let mut collapsed = String::with_capacity(pattern.len());
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                collapsed.push('[');
                if chars.peek() == Some(&'!') {
                    collapsed.push('!');
                    chars.next();
                }
                let mut n = 0;
                loop {
                    match chars.next() {
                        Some(']') if n > 0 => break,
                        Some(c) if name_char(c) => {
                            collapsed.push(c);
                            n += 1;
                        }
                        _ => return Err(bad()),
                    }
                }
                collapsed.push(']');
            }
            '*' if collapsed.ends_with('*') => {}
            c if name_char(c) || c == '*' || c == '?' => collapsed.push(c),
            _ => return Err(bad()),
        }
    }
    glob::Pattern::new(&collapsed).map_err(|e| format!("tool pattern {pattern:?}: {e}"))
}

/// A tool policy as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolPolicy {
    /// Id (32 hex).
    pub policy_id: String,
    /// Unique name.
    pub name: String,
    /// Glob over tool names (`*`, `?`, `[..]`), e.g. `mcp__github__*`.
    pub tool_pattern: String,
    /// What a match does.
    pub action: PolicyAction,
    /// Only for users of this role (none: everyone).
    pub role: Option<String>,
    /// Lower numbers are checked first.
    pub priority: i64,
    /// Disabled rules are skipped.
    pub enabled: bool,
    /// Why the rule exists.
    pub description: String,
    /// Who created it.
    pub created_by: Option<String>,
    /// When.
    pub created: String,
    /// Last change.
    pub updated: String,
}

/// A tool policy to create or replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToolPolicy {
    /// Unique name.
    pub name: String,
    /// Glob over tool names.
    pub tool_pattern: String,
    /// What a match does.
    pub action: PolicyAction,
    /// Only for this role.
    pub role: Option<String>,
    /// Lower first.
    pub priority: i64,
    /// Checked at all.
    pub enabled: bool,
    /// Why.
    pub description: String,
    /// Who.
    pub created_by: Option<String>,
}

/// A node in the service registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceRecord {
    /// Id.
    pub service_id: String,
    /// server | console | channel.
    pub kind: String,
    /// Node.
    pub node_id: String,
    /// Base URL.
    pub url: Option<String>,
    /// Version.
    pub version: Option<String>,
    /// Start time.
    pub started: String,
    /// Last heartbeat.
    pub last_heartbeat: String,
}

/// Largest attachment (10 MiB).
pub const MAX_ATTACHMENT_BYTES: usize = 10 << 20;

/// An attachment to store.
#[derive(Debug, Clone, Default)]
pub struct NewAttachment {
    /// Workstream it belongs to.
    pub ws_id: String,
    /// Uploader.
    pub user_id: Option<String>,
    /// Original file name.
    pub filename: String,
    /// Sniffed MIME type.
    pub mime_type: String,
    /// `image` or `text`.
    pub kind: String,
    /// The bytes.
    pub content: Vec<u8>,
}

/// A stored attachment (without its bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attachment {
    /// Id (32 hex).
    pub attachment_id: String,
    /// Workstream.
    pub ws_id: String,
    /// Uploader.
    pub user_id: Option<String>,
    /// File name.
    pub filename: String,
    /// MIME type.
    pub mime_type: String,
    /// `image` or `text`.
    pub kind: String,
    /// Size.
    pub size_bytes: i64,
    /// Upload time.
    pub created: String,
    /// When a send consumed it.
    pub consumed: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_globs_follow_the_documented_grammar() {
        let m = |p: &str, name: &str| tool_glob(p).unwrap().matches(name);
        assert!(m("mcp__github__*", "mcp__github__create_issue"));
        assert!(m("mcp__**__create_*", "mcp__gitlab__create_mr"), "** is *");
        assert!(m("read_?ile", "read_file"));
        assert!(m("[!b]ash", "dash") && !m("[!b]ash", "bash"));
        assert!(m("*", "anything"));
        for bad in [
            "",
            "[",
            "[]",
            "[!]",
            "a b",
            "x/y",
            "{a,b}",
            "[a*]",
            &"x".repeat(129),
        ] {
            assert!(tool_glob(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn stored_turn_reads_through_to_its_turn_and_serializes_flat() {
        let t = StoredTurn {
            id: 7,
            ws_id: "w".into(),
            timestamp: "ts".into(),
            turn: NewTurn::text(Role::User, "hi"),
        };
        assert_eq!(t.turn.content.as_deref(), Some("hi"));
        assert_eq!(t.turn.role, Role::User);
        // The JSON shape predates the nesting: one flat object, same key order.
        let json = serde_json::to_string(&t).unwrap();
        assert!(
            json.starts_with(
                r#"{"id":7,"ws_id":"w","timestamp":"ts","role":"user","content":"hi","#
            ),
            "{json}"
        );
        assert!(!json.contains("\"turn\""), "{json}");
    }
}

/// A watch to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewWatch {
    /// Its workstream.
    pub ws_id: String,
    /// Unique among the workstream's active watches.
    pub name: String,
    /// The polled command.
    pub command: String,
    /// Seconds between polls.
    pub interval_secs: i64,
    /// The stop condition (none: stop when the output changes).
    pub condition: Option<String>,
    /// Polls allowed.
    pub max_polls: i64,
    /// The plugin whose grants the command runs with.
    pub plugin: String,
}

/// A stored watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Watch {
    /// Id (32 hex).
    pub watch_id: String,
    /// Its workstream.
    pub ws_id: String,
    /// Name.
    pub name: String,
    /// The polled command.
    pub command: String,
    /// Seconds between polls.
    pub interval_secs: i64,
    /// The stop condition.
    pub condition: Option<String>,
    /// Polls allowed.
    pub max_polls: i64,
    /// Polls run.
    pub poll_count: i64,
    /// The last poll's output.
    pub last_output: Option<String>,
    /// The last poll's exit code.
    pub last_exit_code: Option<i64>,
    /// Why the last poll or its condition failed.
    pub last_error: Option<String>,
    /// `active`, `fired`, `expired` or `cancelled`.
    pub state: String,
    /// When the next poll is due (active only).
    pub next_poll: Option<String>,
    /// The plugin whose grants the command runs with.
    pub plugin: String,
    /// The node polling it now.
    pub claimed_by: Option<String>,
    /// The result text for the workstream (fired or expired).
    pub result: Option<String>,
    /// When the result reached the workstream.
    pub delivered: Option<String>,
    /// Created.
    pub created: String,
    /// Last change.
    pub updated: String,
}

/// What one poll of a claimed watch found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollRecord {
    /// Its output (already trimmed to what is kept).
    pub output: String,
    /// Its exit code.
    pub exit_code: i64,
    /// Why the poll or the condition failed, if it did.
    pub error: Option<String>,
    /// `active` (poll again at `next_poll`), `fired` or `expired`.
    pub state: String,
    /// The next poll (active only).
    pub next_poll: Option<String>,
    /// The text for the workstream (fired or expired).
    pub result: Option<String>,
}

/// A notification target to save: a user's (no `ws_id`) or a workstream's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewNotifyTarget {
    /// Its owner.
    pub user_id: Option<String>,
    /// The workstream it belongs to (none: the user's, for every workstream).
    pub ws_id: Option<String>,
    /// Name, unique per user or workstream.
    pub name: String,
    /// `webhook` or `channel`.
    pub kind: String,
    /// Webhook URL.
    pub url: Option<String>,
    /// Secret name sent as a bearer token (webhooks).
    pub secret: Option<String>,
    /// Channel platform.
    pub channel_type: Option<String>,
    /// Channel or user id on it.
    pub channel_id: Option<String>,
}

/// A stored notification target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotifyTarget {
    /// Id.
    pub target_id: String,
    /// Its owner.
    pub user_id: Option<String>,
    /// Its workstream (none: the user's).
    pub ws_id: Option<String>,
    /// Name.
    pub name: String,
    /// `webhook` or `channel`.
    pub kind: String,
    /// Webhook URL.
    pub url: Option<String>,
    /// Secret name.
    pub secret: Option<String>,
    /// Channel platform.
    pub channel_type: Option<String>,
    /// Channel id.
    pub channel_id: Option<String>,
    /// Created.
    pub created: String,
}

/// Total bytes of previews one workstream keeps.
pub const MAX_PREVIEW_BYTES_PER_WORKSTREAM: usize = 256 * 1024 * 1024;

/// A preview to store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPreview {
    /// Its workstream.
    pub ws_id: String,
    /// `html`, `markdown`, `text`, `image`, `table` or `pdf`.
    pub kind: String,
    /// The pane's title.
    pub title: String,
    /// Media type of the bytes.
    pub media_type: String,
    /// The content.
    pub content: Vec<u8>,
    /// The tool call that opened it.
    pub call_id: Option<String>,
}

/// A stored preview (without its bytes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreviewInfo {
    /// Its workstream.
    pub ws_id: String,
    /// Digest of the bytes (32 hex).
    pub preview_id: String,
    /// Kind.
    pub kind: String,
    /// Title.
    pub title: String,
    /// Media type.
    pub media_type: String,
    /// Bytes.
    pub size_bytes: i64,
    /// The tool call that opened it last.
    pub call_id: Option<String>,
    /// When it was first stored.
    pub created: String,
}

/// A chat conversation routed to a workstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelRoute {
    /// The channel plugin (`discord`, `slack`).
    pub plugin: String,
    /// The platform channel.
    pub channel_id: String,
    /// The thread in it ("" for none).
    pub thread_id: String,
    /// The workstream.
    pub ws_id: String,
    /// The linked user who owns it.
    pub user_id: String,
    /// When the route was made.
    pub created: String,
}
