//! The storage API, as traits implemented identically by both backends.
//! Import them with `use turnstone_storage::prelude::*`.

use crate::error::Result;
use crate::types::*;
use async_trait::async_trait;
use std::time::Duration;

/// Workstream lifecycle: atomic create, publish, fork, resolve, list, prune.
#[async_trait]
pub trait WorkstreamStore: Send + Sync {
    /// Inserts a hidden `creating` row carrying a fresh private token.
    async fn create_workstream(&self, new: &NewWorkstream) -> Result<Reservation>;
    /// Compare-and-swap `creating` → `idle` for the row carrying `token`.
    async fn publish_workstream(&self, r: &Reservation) -> Result<bool>;
    /// Deletes the reservation only if it still carries `token` and is unpublished.
    async fn discard_workstream(&self, r: &Reservation) -> Result<bool>;
    /// A published workstream by exact id.
    async fn get_workstream(&self, ws_id: &str) -> Result<Option<Workstream>>;
    /// Resolves an alias, exact id or unique id prefix (published rows only).
    async fn resolve_workstream(&self, query: &str) -> Result<Workstream>;
    /// Sets a published workstream's state (never to or from `creating`).
    async fn set_workstream_state(&self, ws_id: &str, state: WorkstreamState) -> Result<()>;
    /// Sets or clears the alias.
    async fn set_alias(&self, ws_id: &str, alias: Option<&str>) -> Result<()>;
    /// The workstreams started by `parent_ws_id` (its sub-agents), oldest first.
    async fn list_children(&self, parent_ws_id: &str) -> Result<Vec<Workstream>>;
    /// Sets the title.
    async fn set_title(&self, ws_id: &str, title: Option<&str>) -> Result<()>;
    /// Sets the title only while the workstream has neither title nor alias
    /// (one statement, so a name given meanwhile is never overwritten);
    /// false when it had one.
    async fn set_title_if_unnamed(&self, ws_id: &str, title: &str) -> Result<bool>;
    /// Published workstreams with at least one turn, newest activity first
    /// (sub-agents' transcripts are listed under their parent instead).
    async fn list_workstreams_with_history(
        &self,
        user_id: Option<&str>,
        limit: i64,
        offset: i64,
    ) -> Result<Vec<WorkstreamSummary>>;
    /// Hard-deletes a workstream with its history and config.
    async fn delete_workstream(&self, ws_id: &str) -> Result<bool>;
    /// Copies `source`'s resume view (checkpoint-bounded turns) and config into the
    /// empty reservation `dest`, in one transaction. Returns turns copied.
    async fn fork_workstream(&self, source: &str, dest: &Reservation) -> Result<usize>;
    /// Removes empty published workstreams idle for `empty_grace`, and unnamed
    /// ones not updated for `retention`. Never aliased rows, never `creating`.
    async fn prune_workstreams(
        &self,
        retention: Option<Duration>,
        empty_grace: Duration,
    ) -> Result<Vec<String>>;
    /// Deletes `creating` rows older than `older_than` that are not in `exclude`.
    async fn reap_abandoned_creates(
        &self,
        older_than: Duration,
        exclude: &[String],
    ) -> Result<Vec<String>>;
    /// Sets a config value (keys starting `_turnstone.` are reserved).
    async fn set_config(&self, ws_id: &str, key: &str, value: Option<&str>) -> Result<()>;
    /// Reads a config value.
    async fn get_config(&self, ws_id: &str, key: &str) -> Result<Option<String>>;
    /// All ordinary config values (reserved keys filtered).
    async fn list_config(&self, ws_id: &str) -> Result<Vec<(String, Option<String>)>>;
}

/// The append-only conversation log.
#[async_trait]
pub trait TurnStore: Send + Sync {
    /// Appends one turn; returns its id once durable.
    async fn save_turn(&self, ws_id: &str, turn: &NewTurn) -> Result<i64>;
    /// Appends several turns in one transaction.
    async fn save_turns(&self, ws_id: &str, turns: &[NewTurn]) -> Result<Vec<i64>>;
    /// Loads history (see [`LoadMode`]).
    async fn load_turns(&self, ws_id: &str, mode: LoadMode) -> Result<Vec<StoredTurn>>;
    /// Number of stored rows.
    async fn count_turns(&self, ws_id: &str) -> Result<i64>;
    /// Appends summary turns and records them as the latest checkpoint covering
    /// source turns up to `watermark`, atomically.
    async fn save_compaction(
        &self,
        ws_id: &str,
        watermark: i64,
        summary: &[NewTurn],
    ) -> Result<Checkpoint>;
    /// Deletes every turn after `keep_through` (a rewind or retry). A compaction
    /// checkpoint that covers or consists of deleted rows is dropped with them,
    /// so resume falls back to the surviving transcript. Returns rows deleted.
    async fn truncate_turns(&self, ws_id: &str, keep_through: i64) -> Result<u64>;
    /// The latest checkpoint if it is valid.
    async fn checkpoint(&self, ws_id: &str) -> Result<Option<Checkpoint>>;
    /// Full-text search over turn content, newest first.
    async fn search_history(&self, query: &str, filter: &SearchFilter) -> Result<Vec<SearchHit>>;
}

/// Structured memories.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Creates or updates (by name + scope + scope_id).
    async fn save_memory(&self, m: &NewMemory) -> Result<Memory>;
    /// Reads one memory and counts the access.
    async fn get_memory(&self, name: &str, scope: &str, scope_id: &str) -> Result<Option<Memory>>;
    /// Deletes one memory.
    async fn delete_memory(&self, name: &str, scope: &str, scope_id: &str) -> Result<bool>;
    /// Lists memories `owner` may see (global, their user's, their
    /// workstreams'; `None`: all), newest first, optionally filtered.
    async fn list_memories(
        &self,
        owner: Option<&str>,
        memory_type: Option<&str>,
        scope: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Memory>>;
    /// Memories `owner` may see (as for [`Self::list_memories`]) whose name,
    /// description or content contain every query word; counts as reading
    /// them.
    async fn search_memories(
        &self,
        owner: Option<&str>,
        query: &str,
        limit: i64,
    ) -> Result<Vec<Memory>>;
    /// The memories `view` may see (optionally one scope and type), newest first.
    async fn list_visible_memories(
        &self,
        view: &MemoryView,
        scope: Option<&str>,
        memory_type: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Memory>>;
    /// The memories `view` may see containing any query word (candidates for
    /// ranking), newest first. Does not count as reading them.
    async fn search_visible_memories(
        &self,
        query: &str,
        view: &MemoryView,
        scope: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Memory>>;
}

/// Skills saved in the database: every save is the next version of its name.
#[async_trait]
pub trait SkillStore: Send + Sync {
    /// Saves the next version of `s.name`.
    async fn save_skill(&self, s: &NewSkill) -> Result<SkillRecord>;
    /// The latest version of every skill, by name.
    async fn latest_skills(&self) -> Result<Vec<SkillRecord>>;
    /// Every version of one skill, newest first.
    async fn skill_versions(&self, name: &str) -> Result<Vec<SkillRecord>>;
    /// One version (the latest when `version` is `None`).
    async fn get_skill(&self, name: &str, version: Option<i64>) -> Result<Option<SkillRecord>>;
    /// Deletes every version; returns how many there were.
    async fn delete_skill(&self, name: &str) -> Result<u64>;
}

/// Users, API tokens and channel identities.
#[async_trait]
pub trait IdentityStore: Send + Sync {
    /// Creates a user.
    async fn create_user(
        &self,
        username: &str,
        display_name: &str,
        password_hash: &str,
        role: &str,
    ) -> Result<User>;
    /// A user by id.
    async fn get_user(&self, user_id: &str) -> Result<Option<User>>;
    /// A user by username.
    async fn get_user_by_name(&self, username: &str) -> Result<Option<User>>;
    /// All users.
    async fn list_users(&self) -> Result<Vec<User>>;
    /// Number of users (setup-once check).
    async fn count_users(&self) -> Result<i64>;
    /// Deletes a user and their tokens.
    async fn delete_user(&self, user_id: &str) -> Result<bool>;
    /// Issues a token (`ts_` + 64 hex); returns the raw token once and the record.
    async fn create_api_token(
        &self,
        user_id: &str,
        name: &str,
        scopes: &[String],
        expires: Option<&str>,
    ) -> Result<(String, ApiToken)>;
    /// Looks up an unexpired token by its raw value and records the use.
    async fn verify_api_token(&self, raw: &str) -> Result<Option<(ApiToken, User)>>;
    /// Tokens, optionally of one user.
    async fn list_api_tokens(&self, user_id: Option<&str>) -> Result<Vec<ApiToken>>;
    /// Revokes a token.
    async fn revoke_api_token(&self, token_id: &str) -> Result<bool>;
    /// Links a chat-platform identity to a user.
    async fn link_channel_user(
        &self,
        channel_type: &str,
        channel_user_id: &str,
        user_id: &str,
    ) -> Result<()>;
    /// Resolves a chat-platform identity.
    async fn channel_user(
        &self,
        channel_type: &str,
        channel_user_id: &str,
    ) -> Result<Option<String>>;
}

/// Persisted plugin state: records, grants, load state and reload requests.
#[async_trait]
pub trait PluginStore: Send + Sync {
    /// Inserts or replaces a plugin record.
    async fn upsert_plugin(&self, p: &PluginRecord) -> Result<()>;
    /// One plugin record.
    async fn get_plugin(&self, name: &str) -> Result<Option<PluginRecord>>;
    /// All plugin records.
    async fn list_plugins(&self) -> Result<Vec<PluginRecord>>;
    /// Enables or disables.
    async fn set_plugin_enabled(&self, name: &str, enabled: bool) -> Result<bool>;
    /// Sets the grant JSON (`None` = default for the plugin's origin).
    async fn set_plugin_grants(&self, name: &str, granted: Option<&str>) -> Result<bool>;
    /// Records load state and last error.
    async fn set_plugin_state(&self, name: &str, state: &str, error: Option<&str>) -> Result<bool>;
    /// Asks every node to reload the plugin (bumps `reload_seq`).
    async fn request_plugin_reload(&self, name: &str) -> Result<bool>;
    /// Forgets a plugin.
    async fn delete_plugin(&self, name: &str) -> Result<bool>;
    /// Creates a run-time MCP server and, in the same transaction, a fresh
    /// `plugins` row for it (kind `mcp`, `enabled`, nothing granted): a stale
    /// row of a deleted namesake never lends the new server its grant.
    /// [`crate::StorageError::McpServerExists`] when the name is taken.
    async fn create_mcp_server(&self, s: &McpServerRecord, enabled: bool) -> Result<()>;
    /// Replaces a server's definition; false when there is none.
    async fn update_mcp_server(&self, name: &str, definition: &str) -> Result<bool>;
    /// Deletes a server and its `plugins` row together; false when there is none.
    async fn delete_mcp_server(&self, name: &str) -> Result<bool>;
    /// One run-time MCP server.
    async fn get_mcp_server(&self, name: &str) -> Result<Option<McpServerRecord>>;
    /// Every run-time MCP server, by name.
    async fn list_mcp_servers(&self) -> Result<Vec<McpServerRecord>>;
}

/// Operational records: the audit log, model usage and the service registry.
#[async_trait]
pub trait OpsStore: Send + Sync {
    /// Appends an audit entry; returns its id.
    async fn append_audit(&self, e: &AuditEntry) -> Result<i64>;
    /// Audit entries matching `q`, newest first.
    async fn query_audit(&self, q: &AuditQuery) -> Result<Vec<AuditEntry>>;
    /// The newest `limit` audit entries.
    async fn list_audit(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        self.query_audit(&AuditQuery {
            limit,
            ..AuditQuery::default()
        })
        .await
    }
    /// Records one model call's usage.
    async fn record_usage(&self, u: &UsageEvent) -> Result<()>;
    /// Usage summed per group.
    async fn usage_summary(&self, q: &UsageQuery) -> Result<Vec<UsageRow>>;
    /// Registers or refreshes a service heartbeat. No caller yet: the seam for
    /// the cluster console's node registry; tested on both backends.
    async fn heartbeat(&self, s: &ServiceRecord) -> Result<()>;
    /// Services whose heartbeat is newer than `within`.
    async fn live_services(&self, within: Duration) -> Result<Vec<ServiceRecord>>;
}

/// Admin tool policies.
#[async_trait]
pub trait PolicyStore: Send + Sync {
    /// Creates a policy; [`crate::StorageError::PolicyExists`] when the name
    /// is taken, `InvalidInput` for a bad name, pattern or role.
    async fn create_policy(&self, p: &NewToolPolicy) -> Result<ToolPolicy>;
    /// Replaces a policy; `None` when there is none.
    async fn update_policy(&self, policy_id: &str, p: &NewToolPolicy)
    -> Result<Option<ToolPolicy>>;
    /// Deletes a policy; false when there is none.
    async fn delete_policy(&self, policy_id: &str) -> Result<bool>;
    /// One policy.
    async fn get_policy(&self, policy_id: &str) -> Result<Option<ToolPolicy>>;
    /// Every policy in the order they are checked (priority, then age).
    async fn list_policies(&self) -> Result<Vec<ToolPolicy>>;
}

/// Uploaded attachments: stored with the workstream, consumed by a send.
#[async_trait]
pub trait AttachmentStore: Send + Sync {
    /// Stores an upload (≤ [`MAX_ATTACHMENT_BYTES`]); unknown workstream → error.
    async fn save_attachment(&self, a: &NewAttachment) -> Result<Attachment>;
    /// One attachment of `ws_id` with its bytes.
    async fn get_attachment(
        &self,
        ws_id: &str,
        attachment_id: &str,
    ) -> Result<Option<(Attachment, Vec<u8>)>>;
    /// Attachments of `ws_id`, oldest first (only unconsumed ones when `pending_only`).
    async fn list_attachments(&self, ws_id: &str, pending_only: bool) -> Result<Vec<Attachment>>;
    /// Deletes an unconsumed attachment; false when unknown or already consumed.
    async fn delete_attachment(&self, ws_id: &str, attachment_id: &str) -> Result<bool>;
    /// Marks the pending ones among `ids` consumed and returns them with their
    /// bytes (ids that are unknown or already consumed are left out).
    async fn consume_attachments(
        &self,
        ws_id: &str,
        ids: &[String],
    ) -> Result<Vec<(Attachment, Vec<u8>)>>;
}

/// Watches: durable, claimed by one node's scheduler at a time.
#[async_trait]
pub trait WatchStore: Send + Sync {
    /// Creates an active watch due now; refused when the workstream already
    /// has `max_active` active watches or an active one of that name.
    async fn create_watch(&self, w: &NewWatch, max_active: i64) -> Result<Watch>;
    /// The workstream's watches (active ones only, or all), oldest first.
    async fn list_watches(&self, ws_id: &str, active_only: bool) -> Result<Vec<Watch>>;
    /// One watch.
    async fn get_watch(&self, watch_id: &str) -> Result<Option<Watch>>;
    /// Cancels the workstream's active watch named `name_or_id` (or whose id
    /// starts with it); `None` when there is none.
    async fn cancel_watch(&self, ws_id: &str, name_or_id: &str) -> Result<Option<Watch>>;
    /// Claims up to `limit` active watches due by `now` for `node` until
    /// `until` (unclaimed, or their claim lapsed), in `ws_ids` when given.
    async fn claim_due_watches(
        &self,
        node: &str,
        now: &str,
        until: &str,
        limit: i64,
        ws_ids: Option<&[String]>,
    ) -> Result<Vec<Watch>>;
    /// Records a poll of a watch `node` holds and releases it; false when
    /// the claim was lost (another node took it over, or it was cancelled).
    async fn record_poll(&self, watch_id: &str, node: &str, poll: &PollRecord) -> Result<bool>;
    /// Ended watches whose result has not reached their workstream yet, in
    /// `ws_ids` when given.
    async fn undelivered_watches(&self, ws_ids: Option<&[String]>) -> Result<Vec<Watch>>;
    /// Marks a result delivered; false when it already was (so of two
    /// nodes, one delivers it).
    async fn mark_watch_delivered(&self, watch_id: &str) -> Result<bool>;
    /// Takes the mark back after a delivery failed, to try again later.
    async fn unmark_watch_delivered(&self, watch_id: &str) -> Result<()>;
    /// When the next active watch is due (in `ws_ids` when given).
    async fn next_watch_due(&self, ws_ids: Option<&[String]>) -> Result<Option<String>>;
}

/// Notification targets of users and workstreams.
#[async_trait]
pub trait NotifyStore: Send + Sync {
    /// Saves a target (replacing the one of that name in the same place).
    async fn save_notify_target(&self, t: &NewNotifyTarget) -> Result<NotifyTarget>;
    /// The targets of `user_id` (their own) and of `ws_id`, by name.
    async fn list_notify_targets(
        &self,
        user_id: Option<&str>,
        ws_id: Option<&str>,
    ) -> Result<Vec<NotifyTarget>>;
    /// Deletes a user's target (`ws_id` none) or a workstream's.
    async fn delete_notify_target(
        &self,
        user_id: Option<&str>,
        ws_id: Option<&str>,
        name: &str,
    ) -> Result<bool>;
}

/// Content shown in a workstream's preview pane.
#[async_trait]
pub trait PreviewStore: Send + Sync {
    /// Stores a preview under the digest of its bytes (the same bytes in the
    /// same workstream are one row; a second open updates its title). Fails
    /// with `TooLarge` when the workstream's previews would pass
    /// [`MAX_PREVIEW_BYTES_PER_WORKSTREAM`].
    async fn save_preview(&self, p: &NewPreview) -> Result<PreviewInfo>;
    /// One preview of `ws_id` with its bytes.
    async fn get_preview(
        &self,
        ws_id: &str,
        preview_id: &str,
    ) -> Result<Option<(PreviewInfo, Vec<u8>)>>;
    /// The previews of `ws_id`, oldest first, without their bytes.
    async fn list_previews(&self, ws_id: &str) -> Result<Vec<PreviewInfo>>;
}

/// Chat channels: conversation routes and account link codes.
#[async_trait]
pub trait ChannelStore: Send + Sync {
    /// The workstream a conversation is routed to (`thread_id` "" for none).
    async fn channel_route(
        &self,
        plugin: &str,
        channel_id: &str,
        thread_id: &str,
    ) -> Result<Option<ChannelRoute>>;
    /// Routes a conversation (replacing an older route).
    async fn set_channel_route(&self, route: &ChannelRoute) -> Result<()>;
    /// The conversations routed to `ws_id`, oldest first.
    async fn channel_routes_of(&self, ws_id: &str) -> Result<Vec<ChannelRoute>>;
    /// Stores a link code's hash for `user_id` until `expires` (replacing
    /// the user's older code).
    async fn create_link_code(&self, code_hash: &str, user_id: &str, expires: &str) -> Result<()>;
    /// Consumes an unexpired code: the user it links to, once.
    async fn redeem_link_code(&self, code_hash: &str, now: &str) -> Result<Option<String>>;
    /// A user's linked platform accounts: (channel type, platform user id, created).
    async fn channel_links(&self, user_id: &str) -> Result<Vec<(String, String, String)>>;
    /// Removes one of a user's links; false when it was not theirs.
    async fn unlink_channel_user(
        &self,
        channel_type: &str,
        channel_user_id: &str,
        user_id: &str,
    ) -> Result<bool>;
}

/// Everything: what `Storage` hands out.
pub trait Backend:
    WorkstreamStore
    + ChannelStore
    + TurnStore
    + MemoryStore
    + SkillStore
    + WatchStore
    + NotifyStore
    + PreviewStore
    + IdentityStore
    + PluginStore
    + OpsStore
    + PolicyStore
    + AttachmentStore
{
    /// `sqlite` or `postgresql`.
    fn backend_name(&self) -> &'static str;
    /// Closes the pool, flushing pending work.
    fn close(&self) -> futures_lite_close::CloseFuture<'_>;
}

/// A tiny boxed-future alias so `Backend` stays object-safe.
pub mod futures_lite_close {
    /// Future returned by `Backend::close`.
    pub type CloseFuture<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;
}
