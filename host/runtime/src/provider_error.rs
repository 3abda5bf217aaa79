//! The WIT `provider-error`, as the host reasons about it: whether a retry
//! can help, how long the provider asked us to wait, and a message for people
//! (the generated `Display` is the `Debug` form).

use std::time::Duration;

pub use crate::provider_types::{ProviderError, RateLimit, ServerError};

impl ProviderError {
    /// A retry of the same request may succeed: rate limits, network
    /// failures and 5xx answers. Authentication, bad requests, an overlong
    /// context and cancellations fail the same way again.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::RateLimit(_) | Self::Network(_) => true,
            Self::Server(s) => s.status >= 500,
            Self::Auth(_) | Self::BadRequest(_) | Self::ContextLength(_) | Self::Cancelled => false,
        }
    }

    /// The wait the provider asked for (`Retry-After` of a rate limit).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimit(r) => r.retry_after_ms.map(Duration::from_millis),
            _ => None,
        }
    }

    /// Whether the model itself is unreachable through this provider (a
    /// non-5xx server answer such as 404 for an unknown model): a fallback
    /// model may serve where a retry would not.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Server(s) if s.status < 500)
    }

    /// A short name of the kind (`auth`, `rate-limit`, …), as in the WIT.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Auth(_) => "auth",
            Self::ContextLength(_) => "context-length",
            Self::RateLimit(_) => "rate-limit",
            Self::Server(_) => "server",
            Self::Network(_) => "network",
            Self::BadRequest(_) => "bad-request",
            Self::Cancelled => "cancelled",
        }
    }

    /// What went wrong, for people.
    pub fn message(&self) -> String {
        match self {
            Self::Auth(m) => format!("authentication failed: {m}"),
            Self::ContextLength(m) => format!("the conversation is too long for the model: {m}"),
            Self::RateLimit(r) => match r.retry_after_ms {
                Some(ms) => format!(
                    "rate limited: {} (retry after {:.1} s)",
                    r.message,
                    ms as f64 / 1000.0
                ),
                None => format!("rate limited: {}", r.message),
            },
            Self::Server(s) => format!("the provider answered {}: {}", s.status, s.message),
            Self::Network(m) => format!("network error: {m}"),
            Self::BadRequest(m) => format!("the provider refused the request: {m}"),
            Self::Cancelled => "cancelled".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        let rl = ProviderError::RateLimit(RateLimit {
            message: "slow down".into(),
            retry_after_ms: Some(1500),
        });
        assert!(rl.is_retryable());
        assert_eq!(rl.retry_after(), Some(Duration::from_millis(1500)));
        assert_eq!(rl.message(), "rate limited: slow down (retry after 1.5 s)");
        let s503 = ProviderError::Server(ServerError {
            status: 503,
            message: "down".into(),
        });
        assert!(s503.is_retryable() && !s503.is_unreachable());
        let s404 = ProviderError::Server(ServerError {
            status: 404,
            message: "no such model".into(),
        });
        assert!(!s404.is_retryable() && s404.is_unreachable());
        assert_eq!(s404.message(), "the provider answered 404: no such model");
        for fatal in [
            ProviderError::Auth("bad key".into()),
            ProviderError::BadRequest("x".into()),
            ProviderError::ContextLength("y".into()),
            ProviderError::Cancelled,
        ] {
            assert!(!fatal.is_retryable(), "{fatal:?}");
            assert_eq!(fatal.retry_after(), None);
        }
        assert!(ProviderError::Network("reset".into()).is_retryable());
    }
}
