//! The Slack Web API: `POST {api_base}/<method>` with a bearer token held by
//! the host, per-method rate-limit bookkeeping (429 / `ratelimited` with
//! `Retry-After`), and file downloads.

use serde_json::Value;
use std::collections::HashMap;
use turnstone_plugin_sdk::http::{HttpError, Request};

/// The default Web API base.
pub const DEFAULT_API_BASE: &str = "https://slack.com/api";
/// The secret that opens Socket Mode connections (`xapp-…`).
pub const APP_TOKEN: &str = "SLACK_APP_TOKEN";
/// The secret for Web API calls and file downloads (`xoxb-…`).
pub const BOT_TOKEN: &str = "SLACK_BOT_TOKEN";
/// A rate-limited call is tried at most this often.
pub const MAX_TRIES: u32 = 5;

/// Error codes that mean the token will never work: the adapter fails and
/// the host restarts it with backoff.
pub const FATAL_AUTH_ERRORS: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "not_allowed_token_type",
];

/// Why a Web API call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// HTTP 429 or `ratelimited`: try again after this many milliseconds.
    RateLimited {
        /// The `Retry-After` delay in milliseconds.
        retry_after_ms: u64,
    },
    /// `{"ok": false, "error": …}`.
    Slack(String),
    /// The request did not get a Slack answer (network, HTTP status, body).
    Transport(String),
    /// The host denied the URL or the secret.
    Denied(String),
}

impl ApiError {
    /// A rejected token or a missing grant: retrying will not help.
    pub fn is_fatal(&self) -> bool {
        match self {
            ApiError::Slack(code) => FATAL_AUTH_ERRORS.contains(&code.as_str()),
            ApiError::Denied(_) => true,
            _ => false,
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::RateLimited { retry_after_ms } => {
                write!(f, "rate limited (retry after {retry_after_ms} ms)")
            }
            ApiError::Slack(code) => f.write_str(code),
            ApiError::Transport(m) | ApiError::Denied(m) => f.write_str(m),
        }
    }
}

fn http_error(e: HttpError) -> ApiError {
    match e {
        HttpError::Denied(d) => ApiError::Denied(turnstone_plugin_sdk::describe_denial(&d)),
        other => ApiError::Transport(other.to_string()),
    }
}

/// The `Retry-After` header (integer seconds; default 1 s) in milliseconds.
pub fn retry_after_ms(header: Option<&str>) -> u64 {
    let Some(h) = header.map(str::trim) else {
        return 1000;
    };
    if let Ok(secs) = h.parse::<u64>() {
        return secs.max(1).saturating_mul(1000);
    }
    match h.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => ((secs * 1000.0).ceil() as u64).max(1),
        _ => 1000,
    }
}

/// Interprets a Web API answer: its status, `Retry-After` header and body.
pub fn interpret(status: u16, retry_after: Option<&str>, body: &[u8]) -> Result<Value, ApiError> {
    if status == 429 {
        return Err(ApiError::RateLimited {
            retry_after_ms: retry_after_ms(retry_after),
        });
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return Err(ApiError::Transport(format!(
            "HTTP {status}: the answer is not JSON"
        )));
    };
    if v.get("ok").and_then(Value::as_bool) == Some(true) {
        return Ok(v);
    }
    match v.get("error").and_then(Value::as_str) {
        Some("ratelimited") => Err(ApiError::RateLimited {
            retry_after_ms: retry_after_ms(retry_after),
        }),
        Some(code) => Err(ApiError::Slack(code.to_string())),
        None if (200..300).contains(&status) => Err(ApiError::Slack("unknown_error".into())),
        None => Err(ApiError::Transport(format!("HTTP {status}"))),
    }
}

/// When each Web API method may be called again (epoch ms). Slack limits
/// per method: a limited method does not block the others.
#[derive(Debug, Default, Clone)]
pub struct RateLimits {
    until: HashMap<String, u64>,
}

impl RateLimits {
    /// No method blocked.
    pub fn new() -> Self {
        Self::default()
    }

    /// The time `method` is blocked until, when that is after `now`.
    pub fn blocked_until(&self, method: &str, now: u64) -> Option<u64> {
        self.until.get(method).copied().filter(|&t| t > now)
    }

    /// Blocks `method` until `until` (never shortens an existing block).
    pub fn block(&mut self, method: &str, until: u64) {
        let t = self.until.entry(method.to_string()).or_insert(0);
        *t = (*t).max(until);
    }

    /// Forgets blocks that ended before `now`.
    pub fn prune(&mut self, now: u64) {
        self.until.retain(|_, t| *t > now);
    }
}

/// The Web API client.
#[derive(Debug, Clone)]
pub struct Web {
    base: String,
}

impl Web {
    /// A client for `base` (e.g. `https://slack.com/api`).
    pub fn new(base: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// The URL of `method`.
    pub fn url(&self, method: &str) -> String {
        format!("{}/{method}", self.base)
    }

    /// Calls `method` with a JSON body and the token `secret`.
    pub fn call_json(&self, method: &str, secret: &str, body: &Value) -> Result<Value, ApiError> {
        let req = Request::post(self.url(method), body.to_string())
            .header("content-type", "application/json; charset=utf-8");
        Self::send(req, secret)
    }

    /// Calls `method` with a form body and the token `secret`.
    pub fn call_form(&self, method: &str, secret: &str, body: &str) -> Result<Value, ApiError> {
        let req = Request::post(self.url(method), body.as_bytes().to_vec())
            .header("content-type", "application/x-www-form-urlencoded");
        Self::send(req, secret)
    }

    fn send(req: Request, secret: &str) -> Result<Value, ApiError> {
        let resp = req
            .bearer_secret(secret)
            .and_then(Request::send)
            .map_err(http_error)?;
        let status = resp.status;
        let retry_after = resp.header("retry-after").map(str::to_string);
        let body = resp.bytes().map_err(http_error)?;
        interpret(status, retry_after.as_deref(), &body)
    }
}

/// A downloaded file.
#[derive(Debug, Clone)]
pub struct Download {
    /// The bytes.
    pub data: Vec<u8>,
    /// The response's content type.
    pub content_type: Option<String>,
}

/// Whether a download's content type is Slack's HTML login page.
pub fn is_login_page(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| ct.trim().to_ascii_lowercase().starts_with("text/html"))
}

/// Downloads a private file with the bot token, at most `max_bytes`.
pub fn download(url: &str, max_bytes: u64) -> Result<Download, String> {
    let mut resp = Request::get(url)
        .bearer_secret(BOT_TOKEN)
        .and_then(Request::send)
        .map_err(|e| e.to_string())?;
    if !(200..300).contains(&resp.status) {
        return Err(format!("download failed (HTTP {})", resp.status));
    }
    let content_type = resp.header("content-type").map(str::to_string);
    if is_login_page(content_type.as_deref()) {
        return Err("Slack answered with a login page instead of the file (does the bot token have files:read?)".into());
    }
    let mut data = Vec::new();
    while let Some(chunk) = resp.next_chunk().map_err(|e| e.to_string())? {
        data.extend_from_slice(&chunk);
        if data.len() as u64 > max_bytes {
            return Err(format!("larger than the {max_bytes}-byte limit"));
        }
    }
    Ok(Download { data, content_type })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_defaults_to_one_second() {
        assert_eq!(retry_after_ms(None), 1000);
        assert_eq!(retry_after_ms(Some("30")), 30_000);
        assert_eq!(retry_after_ms(Some(" 2 ")), 2000);
        assert_eq!(retry_after_ms(Some("0")), 1000);
        assert_eq!(retry_after_ms(Some("1.5")), 1500);
        assert_eq!(retry_after_ms(Some("Wed, 21 Oct 2015 07:28:00 GMT")), 1000);
    }

    #[test]
    fn answers_are_interpreted() {
        let ok = interpret(200, None, br#"{"ok":true,"ts":"1.2"}"#).unwrap();
        assert_eq!(ok["ts"], "1.2");
        assert_eq!(
            interpret(429, Some("3"), br#"{"ok":false,"error":"ratelimited"}"#),
            Err(ApiError::RateLimited {
                retry_after_ms: 3000
            })
        );
        assert_eq!(
            interpret(200, None, br#"{"ok":false,"error":"ratelimited"}"#),
            Err(ApiError::RateLimited {
                retry_after_ms: 1000
            })
        );
        let e = interpret(200, None, br#"{"ok":false,"error":"invalid_auth"}"#).unwrap_err();
        assert_eq!(e, ApiError::Slack("invalid_auth".into()));
        assert!(e.is_fatal());
        assert!(!ApiError::Slack("channel_not_found".into()).is_fatal());
        assert!(matches!(
            interpret(502, None, b"<html>"),
            Err(ApiError::Transport(_))
        ));
    }

    #[test]
    fn limits_are_per_method() {
        let mut l = RateLimits::new();
        l.block("chat.postMessage", 5000);
        assert_eq!(l.blocked_until("chat.postMessage", 1000), Some(5000));
        assert_eq!(l.blocked_until("chat.update", 1000), None);
        assert_eq!(l.blocked_until("chat.postMessage", 5000), None);
        l.block("chat.postMessage", 3000);
        assert_eq!(l.blocked_until("chat.postMessage", 1000), Some(5000));
        l.prune(6000);
        assert_eq!(l.blocked_until("chat.postMessage", 0), None);
    }

    #[test]
    fn login_pages_are_detected() {
        assert!(is_login_page(Some("text/html; charset=utf-8")));
        assert!(is_login_page(Some("TEXT/HTML")));
        assert!(!is_login_page(Some("text/plain")));
        assert!(!is_login_page(None));
        assert_eq!(
            Web::new("http://127.0.0.1:9/api/").url("auth.test"),
            "http://127.0.0.1:9/api/auth.test"
        );
    }
}
