//! Request and response bodies of the workstream routes. The handlers parse
//! and answer these types, and `/openapi.json` is generated from them, so the
//! description cannot drift from what the server does. Request fields the
//! handler requires are `Option`s in Rust (so it can say clearly what is
//! missing) and required in the schema.

use serde::{Deserialize, Serialize};
use turnstone_protocol::{SessionState, ToolItem};
use utoipa::ToSchema;

// The patterns spell out whitespace as the handlers judge it (Python's
// `str.isspace`, see `http::is_blank`) instead of `\\s`, whose meaning
// differs between regex engines.

/// Longest title, in characters.
pub(crate) const MAX_TITLE_CHARS: usize = 200;
/// Most user messages one rewind drops.
pub(crate) const MAX_REWIND: i64 = 1_000_000;

/// The kinds of workstream this server creates.
#[derive(Deserialize, Serialize, ToSchema, Clone, Copy, PartialEq, Eq, Debug)]
#[serde(rename_all = "snake_case")]
pub(crate) enum WorkstreamKind {
    /// A conversation driven by its user.
    Interactive,
}

/// Body of `POST /api/workstreams/new`. Every field is optional, and so is
/// the body. (A `multipart/form-data` variant carries this JSON in a `meta`
/// field plus `file` parts.)
#[derive(Deserialize, Default, ToSchema)]
pub(crate) struct CreateBody {
    /// Display name (default `ws-N`).
    pub name: Option<String>,
    /// Model alias (default: the server's default).
    pub model: Option<String>,
    /// Skip approvals in this workstream.
    #[serde(default)]
    pub auto_approve: bool,
    /// Fork this saved workstream of the caller's.
    pub resume_ws: Option<String>,
    /// A first message; blank means none.
    pub initial_message: Option<String>,
    /// The id to use (32 hex).
    #[schema(pattern = "^[0-9a-fA-F]{32}$", min_length = 32, max_length = 32)]
    pub ws_id: Option<String>,
    /// A skill to start with (by name; its arguments take their defaults).
    pub skill: Option<String>,
    /// Only `interactive` is supported.
    #[allow(dead_code)] // parsed so that any other kind is refused
    pub kind: Option<WorkstreamKind>,
}

/// What `/new` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct CreateResponse {
    /// The workstream.
    pub ws_id: String,
    /// Its display name.
    pub name: String,
    /// Forked from `resume_ws`.
    pub resumed: bool,
    /// Messages copied by the fork.
    pub message_count: usize,
    /// Attachments stored from the multipart variant.
    pub attachment_ids: Vec<String>,
    /// `null`, `queue_full` or `refused_closed` for the initial message.
    pub initial_message_status: Option<String>,
}

/// One loaded workstream.
#[derive(Serialize, ToSchema)]
pub(crate) struct WorkstreamSummary {
    /// Id (32 hex).
    pub ws_id: String,
    /// Display name.
    pub name: String,
    /// Session state.
    pub state: SessionState,
    /// `interactive`.
    pub kind: String,
    /// Always `null` here.
    pub parent_ws_id: Option<String>,
    /// Owner.
    pub user_id: Option<String>,
    /// Always `null` here.
    pub project_id: Option<String>,
    /// Always `persisted`.
    pub persistence_state: String,
    /// Model id.
    pub model: String,
    /// Model alias.
    pub model_alias: String,
}

/// `GET /api/workstreams`.
#[derive(Serialize, ToSchema)]
pub(crate) struct WorkstreamList {
    /// The caller's loaded workstreams.
    pub workstreams: Vec<WorkstreamSummary>,
}

/// An approval cycle waiting for an answer.
#[derive(Serialize, ToSchema)]
pub(crate) struct PendingApprovalDetail {
    /// The cycle.
    pub cycle_id: String,
    /// Its first call.
    pub call_id: Option<String>,
    /// An LLM verdict is still coming (always false here).
    pub judge_pending: bool,
    /// The batch.
    pub items: Vec<ToolItem>,
}

/// `GET /api/workstreams/{ws_id}`.
#[derive(Serialize, ToSchema)]
pub(crate) struct WorkstreamDetail {
    /// The workstream.
    #[serde(flatten)]
    pub summary: WorkstreamSummary,
    /// Some approval waits.
    pub pending_approval: bool,
    /// The waiting approvals.
    pub pending_approval_details: Vec<PendingApprovalDetail>,
    /// Messages queued for the running turn.
    pub queued: usize,
}

/// Body of `POST …/send`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct SendBody {
    /// The message (not blank).
    #[schema(
        required = true,
        nullable = false,
        pattern = "[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    pub message: Option<String>,
    /// Pending attachments to send with it (unknown ids are reported as dropped).
    #[serde(default)]
    pub attachment_ids: Vec<String>,
    /// The client's id for this send.
    #[schema(pattern = "^[A-Za-z0-9_-]{1,128}$", min_length = 1, max_length = 128)]
    pub client_send_id: Option<String>,
}

/// What a send did.
#[derive(Serialize, ToSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SendStatus {
    /// A turn started.
    Ok,
    /// It waits for the running turn (`msg_id`, `position`).
    Queued,
    /// The queue is full; nothing was taken.
    QueueFull,
}

/// What `POST …/send` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct SendResponse {
    /// What happened.
    pub status: SendStatus,
    /// `normal` (queued).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<String>,
    /// The queued message's id (for `DELETE …/send`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg_id: Option<String>,
    /// Its place in the queue (1-based).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// Attachments sent with the message.
    pub attached_ids: Vec<String>,
    /// Attachments not sent (unknown, already sent, or the message was queued).
    pub dropped_attachment_ids: Vec<String>,
}

/// Body of `DELETE …/send`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct UnsendBody {
    /// The queued message.
    #[schema(required = true, nullable = false)]
    pub msg_id: Option<String>,
}

/// Whether the message was still waiting.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum UnsendStatus {
    /// Retracted.
    Removed,
    /// It already joined the conversation (or never waited).
    NotFound,
}

/// What `DELETE …/send` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct UnsendResponse {
    /// What happened.
    pub status: UnsendStatus,
    /// The message.
    pub msg_id: String,
}

/// Body of `POST …/approve`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct ApproveBody {
    /// Run the batch.
    #[schema(required = true, nullable = false)]
    pub approved: Option<bool>,
    /// Passed to the model with the results (blank: none).
    pub feedback: Option<String>,
    /// Approve these tools for the rest of the session.
    #[serde(default)]
    pub always: bool,
    /// The cycle (else by `call_id`, else the oldest).
    pub cycle_id: Option<String>,
    /// A call of the cycle.
    pub call_id: Option<String>,
}

/// What `POST …/approve` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct ApproveResponse {
    /// Always `ok`.
    pub status: &'static str,
    /// The cycle answered (`null`: nothing was pending).
    pub cycle_id: Option<String>,
}

/// Body of `POST …/cancel` (optional).
#[derive(Deserialize, Default, ToSchema)]
pub(crate) struct CancelBody {
    /// Also drop queued messages.
    #[serde(default)]
    pub force: bool,
}

/// What a cancel stopped.
#[derive(Serialize, ToSchema)]
pub(crate) struct Dropped {
    /// A turn was running.
    pub was_running: bool,
    /// Queued messages dropped (`force`).
    pub queued: usize,
}

/// What `POST …/cancel` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct CancelResponse {
    /// Always `ok`.
    pub status: &'static str,
    /// What was stopped.
    pub dropped: Dropped,
}

/// Body of `POST …/close` (optional).
#[derive(Deserialize, Default, ToSchema)]
pub(crate) struct CloseBody {
    /// Shown in `ws_closed` (default `closed`).
    pub reason: Option<String>,
}

/// What `POST …/open` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct OpenResponse {
    /// The workstream.
    pub ws_id: String,
    /// Its display name.
    pub name: String,
}

/// What `POST …/delete` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct DeleteResponse {
    /// Whether a workstream was deleted.
    pub deleted: bool,
}

/// Body of `POST …/title`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct TitleBody {
    /// 1-200 characters, not blank.
    #[schema(
        required = true,
        nullable = false,
        pattern = "[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]",
        max_length = 200
    )]
    pub title: Option<String>,
}

/// What `POST …/title` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct TitleResponse {
    /// Always `ok`.
    pub status: &'static str,
    /// The title as stored (trimmed).
    pub title: String,
}

/// Body of `POST …/rewind`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct RewindBody {
    /// User messages to drop (with what followed them).
    #[schema(required = true, nullable = false, minimum = 1, maximum = 1_000_000)]
    #[serde(default, deserialize_with = "super::integral")]
    pub turns: Option<i64>,
}

/// Whether an edit ran.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EditStatus {
    /// Done (retry: the new turn started).
    Ok,
    /// A turn is running; nothing was changed.
    Busy,
}

/// What `rewind` and `retry` answer.
#[derive(Serialize, ToSchema)]
pub(crate) struct EditResponse {
    /// What happened.
    pub status: EditStatus,
    /// Rewind: the earliest message removed (to edit and resend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Body of `POST /api/command`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct CommandBody {
    /// The workstream.
    #[schema(required = true, nullable = false)]
    pub ws_id: Option<String>,
    /// `/clear`, `/compact` (or `/new`, the same as `/clear`), `/name <title>`,
    /// or `/skill NAME [ARGS]` / `/skill off`.
    #[schema(
        required = true,
        nullable = false,
        pattern = "^[\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*(/clear|/new|/compact)(( [\\s\\S]*)?|[\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*)$|^[\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*/(name|title) [\\s\\S]*[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]|^[\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]*/skill [\\s\\S]*[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000][\\s\\S]*$"
    )]
    pub command: Option<String>,
}

/// 409 for a command refused while a turn runs.
#[derive(Serialize, ToSchema)]
pub(crate) struct BusyBody {
    /// `Workstream is busy`.
    pub error: String,
    /// Always `busy`.
    pub status: String,
}
