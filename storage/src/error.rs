//! Storage errors: every client mistake is a typed variant, never a panic.

use thiserror::Error;

/// Everything that can go wrong in storage.
#[derive(Debug, Error)]
pub enum StorageError {
    /// The workstream does not exist (or is not visible in this state).
    #[error("unknown workstream {0}")]
    UnknownWorkstream(String),
    /// A workstream with this id already exists.
    #[error("workstream {0} already exists")]
    WorkstreamExists(String),
    /// Another workstream already has this alias.
    #[error("alias {0:?} is already used by another workstream")]
    DuplicateAlias(String),
    /// Another user already has this username.
    #[error("username {0:?} is already taken")]
    DuplicateUsername(String),
    /// An MCP server of this name already exists.
    #[error("an MCP server named {0:?} already exists")]
    McpServerExists(String),
    /// A tool policy of this name already exists.
    #[error("a tool policy named {0:?} already exists")]
    PolicyExists(String),
    /// The user does not exist.
    #[error("unknown user {0}")]
    UnknownUser(String),
    /// An id prefix matched several workstreams.
    #[error("{query:?} matches {count} workstreams; use more characters or the alias")]
    Ambiguous {
        /// What was searched.
        query: String,
        /// How many matched.
        count: usize,
    },
    /// Nothing matched.
    #[error("no workstream matches {0:?}")]
    NotFound(String),
    /// A reservation token did not match (the row changed hands or was published).
    #[error("workstream {0} is not the reservation this token belongs to")]
    TokenMismatch(String),
    /// Input rejected before touching the database.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// Content exceeds the size limit.
    #[error("{field} is {size} bytes; the limit is {limit} bytes")]
    TooLarge {
        /// Which field.
        field: &'static str,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The database was written by a newer Turnstone.
    #[error(
        "the database at {location} has schema version {db_version}, newer than this binary supports ({binary_version}); upgrade Turnstone or point it at another database"
    )]
    DatabaseTooNew {
        /// Where the database is.
        location: String,
        /// Highest applied migration.
        db_version: i64,
        /// Highest migration this binary knows.
        binary_version: i64,
    },
    /// Configuration is wrong (backend name, missing URL, …).
    #[error("database configuration: {0}")]
    Config(String),
    /// Migration failure.
    #[error("database migration failed: {0}")]
    Migrate(String),
    /// Any other database error.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

impl StorageError {
    /// The database cannot serve requests at all right now: unreachable,
    /// misconfigured, written by a newer Turnstone, or not migrated.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::DatabaseTooNew { .. } | Self::Config(_) | Self::Migrate(_) => true,
            Self::Database(e) => matches!(
                e,
                sqlx::Error::PoolClosed | sqlx::Error::Io(_) | sqlx::Error::Tls(_)
            ),
            _ => false,
        }
    }

    /// Every connection is busy for now; the same request may succeed soon.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Database(sqlx::Error::PoolTimedOut))
    }
}

/// Result alias.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// Maps constraint violations to typed errors; `subject` names the value.
pub(crate) fn classify(err: sqlx::Error, subject: &str) -> StorageError {
    if let sqlx::Error::Database(db) = &err {
        let msg = db.message().to_ascii_lowercase();
        let constraint = db.constraint().unwrap_or_default().to_ascii_lowercase();
        let mentions = |s: &str| msg.contains(s) || constraint.contains(s);
        if db.is_unique_violation() {
            if mentions("alias") {
                return StorageError::DuplicateAlias(subject.to_string());
            }
            if mentions("username") {
                return StorageError::DuplicateUsername(subject.to_string());
            }
            if mentions("workstreams.ws_id") || mentions("workstreams_pkey") {
                return StorageError::WorkstreamExists(subject.to_string());
            }
        }
        if db.is_foreign_key_violation() {
            return StorageError::UnknownWorkstream(subject.to_string());
        }
    }
    StorageError::Database(err)
}

/// Like [`classify`], for inserts whose foreign key points at `users`.
pub(crate) fn classify_user(err: sqlx::Error, user_id: &str) -> StorageError {
    match &err {
        sqlx::Error::Database(db) if db.is_foreign_key_violation() => {
            StorageError::UnknownUser(user_id.to_string())
        }
        _ => classify(err, user_id),
    }
}

/// Which unique column a violation is about, if recognisable.
pub(crate) fn classify_peek(err: &sqlx::Error) -> Option<&'static str> {
    let sqlx::Error::Database(db) = err else {
        return None;
    };
    if !db.is_unique_violation() {
        return None;
    }
    let text =
        format!("{} {}", db.message(), db.constraint().unwrap_or_default()).to_ascii_lowercase();
    if text.contains("alias") {
        Some("alias")
    } else if text.contains("username") {
        Some("username")
    } else {
        None
    }
}
