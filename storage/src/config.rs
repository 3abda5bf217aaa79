//! `[database]` configuration and its environment overrides.

use crate::error::{Result, StorageError};
use serde::Deserialize;
use std::path::PathBuf;

/// Which backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// Embedded SQLite (default).
    #[default]
    Sqlite,
    /// PostgreSQL.
    #[serde(alias = "postgres")]
    Postgresql,
}

/// `[database]` in config.toml.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbConfig {
    /// `sqlite` or `postgresql`.
    #[serde(default)]
    pub backend: BackendKind,
    /// SQLite file (default `.turnstone.db` in the working directory).
    pub path: Option<PathBuf>,
    /// PostgreSQL URL.
    pub url: Option<String>,
    /// PostgreSQL pool size (default 5).
    pub pool_size: Option<u32>,
}

impl DbConfig {
    /// Applies `TURNSTONE_DB_BACKEND`, `TURNSTONE_DB_URL`, `TURNSTONE_DB_PATH` and
    /// `TURNSTONE_DB_POOL_SIZE` on top of the file settings.
    pub fn with_env(mut self) -> Result<Self> {
        self.apply_env(|k| std::env::var(k).ok())?;
        Ok(self)
    }

    /// [`DbConfig::with_env`] with an injectable lookup (for tests).
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        if let Some(b) = get("TURNSTONE_DB_BACKEND") {
            self.backend = match b.to_ascii_lowercase().as_str() {
                "sqlite" => BackendKind::Sqlite,
                "postgres" | "postgresql" => BackendKind::Postgresql,
                other => {
                    return Err(StorageError::Config(format!(
                        "TURNSTONE_DB_BACKEND={other:?}: expected sqlite or postgresql"
                    )));
                }
            };
        }
        if let Some(url) = get("TURNSTONE_DB_URL") {
            // A URL alone selects PostgreSQL unless the backend was set explicitly.
            if get("TURNSTONE_DB_BACKEND").is_none() && url.starts_with("postgres") {
                self.backend = BackendKind::Postgresql;
            }
            self.url = Some(url);
        }
        if let Some(p) = get("TURNSTONE_DB_PATH") {
            self.path = Some(PathBuf::from(p));
        }
        if let Some(n) = get("TURNSTONE_DB_POOL_SIZE") {
            self.pool_size = Some(n.parse().map_err(|_| {
                StorageError::Config(format!("TURNSTONE_DB_POOL_SIZE={n:?} is not a number"))
            })?);
        }
        Ok(())
    }

    /// The SQLite path in force.
    pub fn sqlite_path(&self) -> PathBuf {
        self.path
            .clone()
            .unwrap_or_else(|| PathBuf::from(".turnstone.db"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_overrides_file_settings() {
        let mut c: DbConfig = toml_like(r#"backend = "sqlite""#);
        c.apply_env(|k| match k {
            "TURNSTONE_DB_URL" => Some("postgres://localhost/x".into()),
            "TURNSTONE_DB_POOL_SIZE" => Some("9".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.backend, BackendKind::Postgresql);
        assert_eq!(c.pool_size, Some(9));
        let mut bad = DbConfig::default();
        assert!(
            bad.apply_env(|k| (k == "TURNSTONE_DB_BACKEND").then(|| "mysql".to_string()))
                .is_err()
        );
        assert_eq!(
            DbConfig::default().sqlite_path(),
            PathBuf::from(".turnstone.db")
        );
    }

    fn toml_like(s: &str) -> DbConfig {
        serde_json::from_value(serde_json::json!({
            "backend": s.split('"').nth(1).unwrap()
        }))
        .unwrap()
    }
}
