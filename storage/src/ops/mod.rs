//! The SQL behind every storage trait, one file per domain.
//!
//! SQLite and PostgreSQL must behave identically, so each domain's queries are
//! written once, as the body of a `macro_rules!` macro, and expanded for both
//! backends in `sqlite.rs` and `postgres.rs`:
//!
//! ```text
//! impl_workstream_store!(SqliteStore, sqlx::Sqlite);
//! ```
//!
//! A macro rather than generic code: a body generic over `sqlx::Database` would
//! need encode/decode/executor bounds on every query, while the expansion sees
//! concrete driver types and plain `sqlx::query` calls.
//!
//! Every macro takes `($store:ty, $db:ty)`: the store type (which has a `pool`
//! field and the `begin_write` method, and per domain what the macro names,
//! such as `write_conn` or `record_usage_row`) and its `sqlx::Database`. The SQL uses
//! `$N` placeholders, which both drivers bind by number. Column lists are
//! macros too (`workstream_columns!()`, …) so they can be spliced into query
//! text with `concat!` at compile time.
//!
//! | File             | Macro                     | Trait              |
//! |------------------|---------------------------|--------------------|
//! | `workstreams.rs` | `impl_workstream_store!`  | `WorkstreamStore`  |
//! | `turns.rs`       | `impl_turn_store!`        | `TurnStore`        |
//! | `memories.rs`    | `impl_memory_store!`      | `MemoryStore`      |
//! | `identity.rs`    | `impl_identity_store!`    | `IdentityStore`    |
//! | `plugins.rs`     | `impl_plugin_store!`      | `PluginStore`      |
//! | `skills.rs`      | `impl_skill_store!`       | `SkillStore`       |
//! | `operations.rs`  | `impl_ops_store!`         | `OpsStore`         |
//! | `policies.rs`    | `impl_policy_store!`      | `PolicyStore`      |
//! | `attachments.rs` | `impl_attachment_store!`  | `AttachmentStore`  |
//! | `watches.rs`     | `impl_watch_store!`       | `WatchStore`       |
//! | `notify.rs`      | `impl_notify_store!`      | `NotifyStore`      |
//! | `previews.rs`    | `impl_preview_store!`     | `PreviewStore`     |
//! | `channels.rs`    | `impl_channel_store!`     | `ChannelStore`     |
//!
//! The one cross-domain dependency: forking a workstream copies its turns, so
//! `impl_workstream_store!` calls the turn row helpers that `impl_turn_store!`
//! defines; a backend must expand both.

pub(crate) mod attachments;
pub(crate) mod channels;
pub(crate) mod identity;
pub(crate) mod memories;
pub(crate) mod notify;
pub(crate) mod operations;
pub(crate) mod plugins;
pub(crate) mod policies;
pub(crate) mod previews;
pub(crate) mod skills;
pub(crate) mod turns;
pub(crate) mod watches;
pub(crate) mod workstreams;
