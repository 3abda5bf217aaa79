//! Turnstone persistence: one API over embedded SQLite (default, zero config)
//! and PostgreSQL (production), with the same behaviour on both.
//!
//! ```no_run
//! # async fn demo() -> turnstone_storage::error::Result<()> {
//! use turnstone_storage::prelude::*;
//! let db = turnstone_storage::open(&DbConfig::default().with_env()?).await?;
//! let r = db.create_workstream(&NewWorkstream { name: "demo".into(), ..Default::default() }).await?;
//! db.publish_workstream(&r).await?;
//! db.save_turn(&r.ws_id, &NewTurn::text(Role::User, "hello")).await?;
//! # Ok(()) }
//! ```

pub mod backend;
pub mod config;
pub mod error;
mod group_commit;
mod migrate;
mod ops;
pub mod postgres;
pub mod sqlite;
mod sqlite_busy;
mod sqlite_checkpoint;
mod sqlite_plans;
pub mod types;
pub mod util;
pub mod write_gate;

use std::sync::Arc;

pub use backend::Backend;
pub use config::{BackendKind, DbConfig};
pub use error::{Result, StorageError};

/// A shared handle to the configured backend.
pub type Storage = Arc<dyn Backend>;

/// Everything callers usually need, including the storage traits.
pub mod prelude {
    pub use crate::backend::{
        AttachmentStore, Backend, ChannelStore, IdentityStore, MemoryStore, NotifyStore, OpsStore,
        PluginStore, PolicyStore, PreviewStore, SkillStore, TurnStore, WatchStore, WorkstreamStore,
    };
    pub use crate::config::{BackendKind, DbConfig};
    pub use crate::types::*;
    pub use crate::{Storage, StorageError};
}

/// Default PostgreSQL pool size.
pub const DEFAULT_PG_POOL: u32 = 5;

/// Opens the configured backend and runs migrations.
pub async fn open(cfg: &DbConfig) -> Result<Storage> {
    match cfg.backend {
        BackendKind::Sqlite => Ok(Arc::new(
            sqlite::SqliteStore::open(&cfg.sqlite_path()).await?,
        )),
        BackendKind::Postgresql => {
            let url = cfg
                .url
                .as_deref()
                .filter(|u| !u.is_empty())
                .ok_or_else(|| {
                    StorageError::Config(
                    "backend is postgresql but no URL is set ([database] url or TURNSTONE_DB_URL)"
                        .into(),
                )
                })?;
            Ok(Arc::new(
                postgres::PgStore::open(url, cfg.pool_size.unwrap_or(DEFAULT_PG_POOL)).await?,
            ))
        }
    }
}
