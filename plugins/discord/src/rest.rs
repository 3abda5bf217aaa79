//! Discord REST calls with rate-limit bookkeeping.
//!
//! Buckets are learnt from `X-RateLimit-*` response headers per route
//! (method and path with message ids and tokens replaced, channel ids kept).
//! A request whose bucket is exhausted, or any request while a global limit
//! is in force, is not sent: [`RateLimits::ready_at`] says when it may go,
//! and the caller defers it (see `queue`).

use crate::util::str_at;
use serde_json::Value;
use std::collections::HashMap;
use turnstone_plugin_sdk::host::{Level, log, now_ms, sleep_ms};
use turnstone_plugin_sdk::http::{HttpError, Request};

/// The `User-Agent` Discord requires of every REST request.
pub const USER_AGENT: &str = "DiscordBot (https://example.invalid/turnstone, 0.1)";

/// The wait when a 429 names no retry time.
const DEFAULT_RETRY_MS: u64 = 1000;

/// An HTTP method used against the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PATCH.
    Patch,
}

impl Method {
    /// The method's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Patch => "PATCH",
        }
    }
}

/// One API request: method, path below the API base and JSON body.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The method.
    pub method: Method,
    /// The path below `api_base`, starting with `/`.
    pub path: String,
    /// The JSON body.
    pub body: Option<Value>,
}

impl Call {
    /// A GET.
    pub fn get(path: impl Into<String>) -> Self {
        Self {
            method: Method::Get,
            path: path.into(),
            body: None,
        }
    }

    /// A POST with a JSON body.
    pub fn post(path: impl Into<String>, body: Value) -> Self {
        Self {
            method: Method::Post,
            path: path.into(),
            body: Some(body),
        }
    }

    /// A PATCH with a JSON body.
    pub fn patch(path: impl Into<String>, body: Value) -> Self {
        Self {
            method: Method::Patch,
            path: path.into(),
            body: Some(body),
        }
    }

    /// The rate-limit route key (see [`route_key`]).
    pub fn route(&self) -> String {
        route_key(self.method, &self.path)
    }
}

/// The route of a request for rate limiting and messages: the method and
/// the path without query, message ids replaced by `{id}`, interaction ids
/// and tokens by `{id}`/`{token}`, webhook tokens by `{token}`; channel and
/// guild ids stay (they select the bucket). Never contains a token.
pub fn route_key(method: Method, path: &str) -> String {
    let path = path.split('?').next().unwrap_or("");
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    let mut i = 0;
    while i < segments.len() {
        let seg = segments[i];
        out.push(seg);
        match seg {
            "messages" if i + 1 < segments.len() => {
                out.push("{id}");
                i += 1;
            }
            "interactions" if i + 2 < segments.len() => {
                out.push("{id}");
                out.push("{token}");
                i += 2;
            }
            "webhooks" if i + 2 < segments.len() => {
                out.push(segments[i + 1]);
                out.push("{token}");
                i += 2;
            }
            _ => {}
        }
        i += 1;
    }
    format!("{} /{}", method.as_str(), out.join("/"))
}

/// The top-level resource of a path (`channels/123` → `123`), which Discord
/// counts buckets per.
pub fn major_param(path: &str) -> &str {
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    match segments.next() {
        Some("channels" | "guilds" | "webhooks") => segments.next().unwrap_or(""),
        _ => "",
    }
}

/// A 429's wait in milliseconds: the body's `retry_after` (seconds, float),
/// else the `Retry-After` header (seconds).
pub fn retry_after_ms(body: &Value, header: Option<&str>) -> Option<u64> {
    let secs = body
        .get("retry_after")
        .and_then(Value::as_f64)
        .or_else(|| header.and_then(|h| h.trim().parse::<f64>().ok()))?;
    (secs.is_finite() && secs >= 0.0).then(|| (secs * 1000.0).ceil() as u64)
}

/// Whether a 429 is the global limit (header `X-RateLimit-Global: true` or
/// body `"global": true`).
pub fn is_global(body: &Value, header: Option<&str>) -> bool {
    body.get("global").and_then(Value::as_bool) == Some(true)
        || header.is_some_and(|h| h.trim().eq_ignore_ascii_case("true"))
}

/// A readable error for a failed API response, with Discord's message and
/// code when the body has them.
pub fn describe_error(route: &str, status: u16, body: &Value, text: &str) -> String {
    let mut s = format!("Discord API {route} failed with HTTP {status}");
    match (
        str_at(body, "message"),
        body.get("code").and_then(Value::as_i64),
    ) {
        (Some(m), Some(c)) => s.push_str(&format!(": {m} (code {c})")),
        (Some(m), None) => s.push_str(&format!(": {m}")),
        (None, Some(c)) => s.push_str(&format!(" (code {c})")),
        (None, None) if !text.trim().is_empty() => {
            s.push_str(&format!(
                ": {}",
                crate::util::truncate_chars(text.trim(), 200)
            ));
        }
        (None, None) => {}
    }
    if let Some(errors) = body.get("errors") {
        s.push_str(&format!(
            " {}",
            crate::util::truncate_chars(&errors.to_string(), 300)
        ));
    }
    s
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    remaining: u64,
    reset_at: u64,
}

/// What the API told us about its limits.
#[derive(Debug, Default)]
pub struct RateLimits {
    route_bucket: HashMap<String, String>,
    buckets: HashMap<String, Bucket>,
    route_until: HashMap<String, u64>,
    global_until: u64,
}

impl RateLimits {
    /// When a request on `route` (top-level resource `major`) may be sent,
    /// if not now.
    pub fn ready_at(&self, route: &str, major: &str, now: u64) -> Option<u64> {
        let mut at = self.global_until;
        if let Some(&t) = self.route_until.get(route) {
            at = at.max(t);
        }
        if let Some(b) = self
            .route_bucket
            .get(route)
            .and_then(|id| self.buckets.get(&format!("{id}:{major}")))
            && b.remaining == 0
        {
            at = at.max(b.reset_at);
        }
        (at > now).then_some(at)
    }

    /// The end of a global limit in force at `now`.
    pub fn global_until(&self, now: u64) -> Option<u64> {
        (self.global_until > now).then_some(self.global_until)
    }

    /// Records the bucket headers of a response (`header` looks one up).
    pub fn record<'a>(
        &mut self,
        route: &str,
        major: &str,
        header: impl Fn(&str) -> Option<&'a str>,
        now: u64,
    ) {
        let Some(bucket) = header("x-ratelimit-bucket").map(str::trim) else {
            return;
        };
        let remaining = header("x-ratelimit-remaining").and_then(|v| v.trim().parse().ok());
        let reset_after = header("x-ratelimit-reset-after")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0);
        if self.buckets.len() > 1000 {
            self.buckets.retain(|_, b| b.reset_at > now);
            self.route_until.retain(|_, t| *t > now);
        }
        self.route_bucket
            .insert(route.to_string(), bucket.to_string());
        if let (Some(remaining), Some(after)) = (remaining, reset_after) {
            self.buckets.insert(
                format!("{bucket}:{major}"),
                Bucket {
                    remaining,
                    reset_at: now + (after * 1000.0).ceil() as u64,
                },
            );
        }
    }

    /// Records a 429: nothing on `route` (or anywhere, when `global`) goes
    /// out before `now + retry_ms`.
    pub fn record_429(&mut self, route: &str, retry_ms: u64, global: bool, now: u64) {
        let until = now + retry_ms;
        if global {
            self.global_until = self.global_until.max(until);
        } else {
            let t = self.route_until.entry(route.to_string()).or_insert(0);
            *t = (*t).max(until);
        }
    }
}

/// The result of one API request.
#[derive(Debug)]
pub enum Outcome {
    /// 2xx with its JSON body (`null` when empty).
    Ok(Value),
    /// 429: try again after this many milliseconds.
    Limited(u64),
    /// Any other failure, with its status when there was a response.
    Failed {
        /// The HTTP status, if a response came.
        status: Option<u16>,
        /// A readable explanation (no secrets).
        message: String,
    },
}

/// The REST client.
pub struct Rest {
    api_base: String,
    authorization: String,
    /// What Discord told us about its limits.
    pub limits: RateLimits,
}

impl Rest {
    /// A client for `api_base` authorizing with the secret reference `token_ref`.
    pub fn new(api_base: &str, token_ref: &str) -> Self {
        Self {
            api_base: api_base.to_string(),
            authorization: format!("Bot {token_ref}"),
            limits: RateLimits::default(),
        }
    }

    /// Sends `call` now (the caller checked [`RateLimits::ready_at`]), with
    /// the bot token when `authorized`, and records the rate-limit headers.
    pub fn send(&mut self, call: &Call, authorized: bool) -> Outcome {
        let route = call.route();
        let url = format!("{}{}", self.api_base, call.path);
        let body = call.body.as_ref().map(|b| b.to_string().into_bytes());
        let mut req = match (call.method, body) {
            (Method::Get, _) => Request::get(url),
            (Method::Post, b) => Request::post(url, b.unwrap_or_default()),
            (Method::Patch, b) => Request::patch(url, b.unwrap_or_default()),
        }
        .header("user-agent", USER_AGENT);
        if call.body.is_some() {
            req = req.header("content-type", "application/json");
        }
        if authorized {
            req = req.header("authorization", self.authorization.clone());
        }
        let failed = |e: HttpError| Outcome::Failed {
            status: None,
            message: format!("Discord API {route} failed: {e}"),
        };
        let resp = match req.send() {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        let now = now_ms();
        let status = resp.status;
        let headers = resp.headers.clone();
        let header = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        let text = match resp.text() {
            Ok(t) => t,
            Err(e) => return failed(e),
        };
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let major = major_param(&call.path);
        self.limits.record(&route, major, header, now);
        match status {
            200..=299 => Outcome::Ok(json),
            429 => {
                let retry =
                    retry_after_ms(&json, header("retry-after")).unwrap_or(DEFAULT_RETRY_MS);
                let global = is_global(&json, header("x-ratelimit-global"));
                self.limits.record_429(&route, retry, global, now);
                log(
                    Level::Warn,
                    &format!(
                        "Discord rate limit on {route}{}: retry in {retry} ms",
                        if global { " (global)" } else { "" }
                    ),
                );
                Outcome::Limited(retry)
            }
            _ => Outcome::Failed {
                status: Some(status),
                message: describe_error(&route, status, &json, &text),
            },
        }
    }

    /// Waits out a global limit if it ends within `budget_ms`; false when
    /// it lasts longer (the caller gives up instead of blocking the gateway).
    pub fn wait_global(&self, budget_ms: u64) -> bool {
        let now = now_ms();
        match self.limits.global_until(now) {
            None => true,
            Some(until) if until - now <= budget_ms => sleep_ms(until - now),
            Some(_) => false,
        }
    }

    /// Answers interaction `id` with `response` at once (no queue, no
    /// Authorization header), waiting out a short global limit and retrying
    /// one short 429 within `budget_ms`.
    pub fn interaction_callback(
        &mut self,
        id: &str,
        token: &str,
        response: &Value,
        budget_ms: u64,
    ) -> Result<(), String> {
        let call = Call::post(
            format!("/interactions/{id}/{token}/callback"),
            response.clone(),
        );
        for _ in 0..2 {
            if !self.wait_global(budget_ms) {
                return Err("a global Discord rate limit is in force".into());
            }
            match self.send(&call, false) {
                Outcome::Ok(_) => return Ok(()),
                Outcome::Limited(ms) if ms <= budget_ms => {
                    sleep_ms(ms);
                }
                Outcome::Limited(ms) => return Err(format!("rate limited for {ms} ms")),
                Outcome::Failed { message, .. } => return Err(message),
            }
        }
        Err("still rate limited".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_hide_message_ids_and_tokens() {
        assert_eq!(
            route_key(Method::Patch, "/channels/123/messages/456"),
            "PATCH /channels/123/messages/{id}"
        );
        assert_eq!(
            route_key(Method::Post, "/channels/123/messages"),
            "POST /channels/123/messages"
        );
        assert_eq!(
            route_key(Method::Post, "/channels/1/messages/2/threads"),
            "POST /channels/1/messages/{id}/threads"
        );
        assert_eq!(
            route_key(Method::Post, "/interactions/9/secret-token/callback"),
            "POST /interactions/{id}/{token}/callback"
        );
        assert_eq!(
            route_key(Method::Patch, "/webhooks/7/tok/messages/@original"),
            "PATCH /webhooks/7/{token}/messages/{id}"
        );
        assert_eq!(
            route_key(Method::Get, "/gateway/bot?x=1"),
            "GET /gateway/bot"
        );
        assert_eq!(major_param("/channels/123/messages/4"), "123");
        assert_eq!(major_param("/gateway/bot"), "");
    }

    #[test]
    fn retry_after_prefers_the_body() {
        let body = serde_json::json!({"retry_after": 64.57, "global": false});
        assert_eq!(retry_after_ms(&body, Some("65")), Some(64_570));
        assert_eq!(retry_after_ms(&Value::Null, Some("2")), Some(2000));
        assert_eq!(retry_after_ms(&Value::Null, None), None);
        assert!(!is_global(&body, None));
        assert!(is_global(&body, Some("true")));
        assert!(is_global(&serde_json::json!({"global": true}), None));
    }

    #[test]
    fn exhausted_buckets_and_429s_defer() {
        let mut l = RateLimits::default();
        let route = "POST /channels/1/messages";
        let headers = [
            ("x-ratelimit-bucket", "abc"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset-after", "1.5"),
        ];
        let h = |n: &str| headers.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        l.record(route, "1", h, 1000);
        assert_eq!(l.ready_at(route, "1", 1000), Some(2500));
        assert_eq!(l.ready_at(route, "2", 1000), None);
        assert_eq!(l.ready_at(route, "1", 2500), None);
        l.record_429("PATCH /channels/1/messages/{id}", 300, false, 1000);
        assert_eq!(
            l.ready_at("PATCH /channels/1/messages/{id}", "1", 1000),
            Some(1300)
        );
        l.record_429(route, 5000, true, 1000);
        assert_eq!(l.ready_at("GET /gateway/bot", "", 1000), Some(6000));
        assert_eq!(l.global_until(7000), None);
    }

    #[test]
    fn errors_read_well() {
        let body = serde_json::json!({"message": "Missing Access", "code": 50001});
        assert_eq!(
            describe_error("POST /channels/1/messages", 403, &body, ""),
            "Discord API POST /channels/1/messages failed with HTTP 403: Missing Access (code 50001)"
        );
        assert_eq!(
            describe_error("GET /x", 502, &Value::Null, "bad gateway"),
            "Discord API GET /x failed with HTTP 502: bad gateway"
        );
    }
}
