//! Migrations: run at open; a database migrated by a newer binary is refused.

use crate::error::{Result, StorageError};
use sqlx::migrate::{Migrate, MigrateError, Migrator};

/// Refuses databases newer than `migrator`, then applies pending migrations.
pub(crate) async fn check_and_run<'a, A>(
    migrator: &Migrator,
    pool: A,
    location: &str,
    backend: &str,
) -> Result<()>
where
    A: sqlx::Acquire<'a> + Copy,
    <A::Connection as std::ops::Deref>::Target: Migrate,
{
    let binary_version = migrator.iter().map(|m| m.version).max().unwrap_or(0);
    let mut conn = pool.acquire().await?;
    conn.ensure_migrations_table(&migrator.table_name)
        .await
        .map_err(|e| StorageError::Migrate(e.to_string()))?;
    let applied = conn
        .list_applied_migrations(&migrator.table_name)
        .await
        .map_err(|e| StorageError::Migrate(e.to_string()))?;
    drop(conn);
    if let Some(db_version) = applied.iter().map(|m| m.version).max()
        && db_version > binary_version
    {
        return Err(StorageError::DatabaseTooNew {
            location: location.to_string(),
            db_version,
            binary_version,
        });
    }
    migrator.run(pool).await.map_err(|e| match e {
        MigrateError::VersionMissing(v) => StorageError::DatabaseTooNew {
            location: location.to_string(),
            db_version: v,
            binary_version,
        },
        other => StorageError::Migrate(format!("{backend}: {other}")),
    })
}
