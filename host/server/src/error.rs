//! Every error a route answers with, and every mapping from the errors of the
//! layers below (storage, the workstream manager, the session runner, provider
//! components, capability grants) into it. The status of each is decided here
//! and nowhere else; `tests` holds the table.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::time::Duration;
use turnstone_engine::runner::OpError;
use turnstone_runtime::capability::{CapabilityParseError, Denial};
use turnstone_runtime::provider_error::ProviderError;
use turnstone_storage::StorageError;

/// A failed request, typed until it is turned into a response.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: malformed path, query or body, or a value out of range.
    #[error("{0}")]
    BadRequest(String),
    /// 401: credentials missing, invalid or no longer valid.
    #[error("{0}")]
    Unauthorized(String),
    /// 403: the scope or a permission is missing, or a capability is denied.
    #[error("{0}")]
    Forbidden(String),
    /// 404: unknown, or not the caller's (the two look the same on purpose).
    #[error("{0}")]
    NotFound(String),
    /// 409: a duplicate, or a state that does not allow the request.
    #[error("{0}")]
    Conflict(String),
    /// 409 `{"error": "Workstream is busy", "status": "busy"}` (the wire
    /// contract's answer to a command refused while a turn runs).
    #[error("Workstream is busy")]
    Busy,
    /// 413: the body is over the route's limit.
    #[error("{0}")]
    TooLarge(String),
    /// 429 with `Retry-After`: rate limited or throttled.
    #[error("{message}")]
    RateLimited {
        /// What happened.
        message: String,
        /// Seconds to wait.
        secs: u64,
    },
    /// 502: a provider or plugin answered with an error that retrying will
    /// not fix.
    #[error("{0}")]
    Upstream(String),
    /// 503 with `Retry-After`: overloaded for now (password checks
    /// saturated, a provider rate limit, the database pool exhausted).
    #[error("{message}")]
    Overloaded {
        /// What happened.
        message: String,
        /// Seconds to wait.
        secs: u64,
    },
    /// 503: a part the request needs is not there (no session engine, the
    /// database is unreachable or too new, the server is at capacity).
    #[error("{0}")]
    Unavailable(String),
    /// 503 `{"error", "code": "model_not_loaded", "alias"}` (the original's
    /// answer to an unknown model alias).
    #[error("The model '{0}' isn't loaded on this server")]
    ModelNotLoaded(String),
    /// 500: a bug or an unexpected failure; details are logged, not sent.
    #[error("{0}")]
    Internal(String),
    /// A status the framework produced (405, 415, …), re-bodied as JSON by
    /// the error middleware.
    #[error("{message}")]
    Framework {
        /// The framework's status.
        status: StatusCode,
        /// Its message.
        message: String,
    },
}

impl ApiError {
    /// 404 `Workstream not found`.
    pub fn workstream_not_found() -> Self {
        Self::NotFound("Workstream not found".into())
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) => StatusCode::FORBIDDEN,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) | Self::Busy => StatusCode::CONFLICT,
            Self::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::Upstream(_) => StatusCode::BAD_GATEWAY,
            Self::Overloaded { .. } | Self::Unavailable(_) | Self::ModelNotLoaded(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::Framework { status, .. } => *status,
        }
    }

    /// Seconds the client should wait before retrying, when that is the point.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Self::RateLimited { secs, .. } | Self::Overloaded { secs, .. } => Some(*secs),
            _ => None,
        }
    }

    /// The JSON body.
    pub fn body(&self) -> WireError {
        WireError {
            error: self.to_string(),
            code: matches!(self, Self::ModelNotLoaded(_)).then(|| "model_not_loaded".into()),
            alias: match self {
                Self::ModelNotLoaded(a) => Some(a.clone()),
                _ => None,
            },
            status: matches!(self, Self::Busy).then(|| "busy".into()),
            retry_after: self.retry_after(),
        }
    }
}

/// The body of every error answer: `error` always, the rest when it applies.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct WireError {
    /// What went wrong.
    pub error: String,
    /// A machine-readable reason (`model_not_loaded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The model alias asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// `busy`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Seconds to wait (also in `Retry-After`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if matches!(self, Self::Internal(_)) {
            tracing::error!("request failed: {self}");
        }
        let secs = self.retry_after();
        let mut resp = (self.status(), Json(self.body())).into_response();
        if let Some(v) = secs.and_then(|s| HeaderValue::from_str(&s.to_string()).ok()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

/// Whole seconds for `Retry-After`, at least one.
pub fn retry_secs(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

impl From<StorageError> for ApiError {
    fn from(e: StorageError) -> Self {
        use StorageError as S;
        match e {
            S::UnknownWorkstream(_) | S::NotFound(_) => Self::workstream_not_found(),
            S::UnknownUser(_) => Self::NotFound(e.to_string()),
            S::WorkstreamExists(_)
            | S::DuplicateAlias(_)
            | S::DuplicateUsername(_)
            | S::McpServerExists(_)
            | S::TokenMismatch(_) => Self::Conflict(e.to_string()),
            S::Ambiguous { .. } | S::InvalidInput(_) => Self::BadRequest(e.to_string()),
            S::TooLarge { .. } => Self::TooLarge(e.to_string()),
            _ if e.is_transient() => Self::Overloaded {
                message: "the database is busy".into(),
                secs: 1,
            },
            _ if e.is_unavailable() => {
                tracing::error!("storage: {e}");
                Self::Unavailable("the database is unavailable".into())
            }
            _ => {
                tracing::error!("storage: {e}");
                Self::Internal("storage error".into())
            }
        }
    }
}

impl From<crate::manager::ManagerError> for ApiError {
    fn from(e: crate::manager::ManagerError) -> Self {
        use crate::manager::ManagerError as M;
        match e {
            M::ModelNotLoaded(alias) => Self::ModelNotLoaded(alias),
            M::AtCapacity(_) => Self::Overloaded {
                message: e.to_string(),
                secs: 5,
            },
            M::NotFound => Self::workstream_not_found(),
            M::Exists(_) => Self::Conflict(e.to_string()),
            M::Invalid(m) => Self::BadRequest(m),
            M::UnknownSkill(m) => Self::NotFound(m),
            M::Storage(s) => s.into(),
            M::Session(m) => Self::Internal(format!("the session could not be built: {m}")),
        }
    }
}

impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        use turnstone_engine::session::{EditError, SessionError};
        match e {
            OpError::Busy => Self::Busy,
            OpError::Closed => Self::workstream_not_found(),
            OpError::Approval(a) => Self::NotFound(a.to_string()),
            // An unknown skill or bad arguments are the caller's to fix.
            OpError::Session(SessionError::Edit(EditError::Skill(e))) => Self::BadRequest(e),
            OpError::Session(SessionError::Edit(edit)) => Self::Conflict(edit.to_string()),
            OpError::Session(SessionError::Model(m)) => Self::BadRequest(m.to_string()),
            OpError::Session(SessionError::Storage(s)) => s.into(),
            OpError::Session(SessionError::Provider(p)) => p.into(),
            OpError::Session(s) => Self::Internal(s.to_string()),
        }
    }
}

impl From<ProviderError> for ApiError {
    fn from(e: ProviderError) -> Self {
        let message = format!("model request failed: {}", e.message());
        match e.retry_after() {
            Some(wait) => Self::Overloaded {
                message,
                secs: retry_secs(wait),
            },
            None if e.is_retryable() => Self::Overloaded { message, secs: 1 },
            None => Self::Upstream(message),
        }
    }
}

impl From<CapabilityParseError> for ApiError {
    fn from(e: CapabilityParseError) -> Self {
        Self::BadRequest(e.to_string())
    }
}

impl From<Denial> for ApiError {
    fn from(e: Denial) -> Self {
        Self::Forbidden(e.to_string())
    }
}

impl From<crate::passwords::PoolBusy> for ApiError {
    fn from(e: crate::passwords::PoolBusy) -> Self {
        Self::Overloaded {
            message: e.to_string(),
            secs: 1,
        }
    }
}

impl From<axum::extract::multipart::MultipartError> for ApiError {
    fn from(e: axum::extract::multipart::MultipartError) -> Self {
        let status = e.status();
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            Self::TooLarge(format!("invalid multipart body: {}", e.body_text()))
        } else {
            Self::BadRequest(format!("invalid multipart body: {}", e.body_text()))
        }
    }
}

#[cfg(test)]
mod tests;
