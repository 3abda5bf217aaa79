//! What the fakes record, and a polling helper.

use serde_json::Value;
use std::time::{Duration, Instant};

/// One request the fake Discord REST API (or its `/gateway/bot`) received.
#[derive(Debug, Clone)]
pub struct RestCall {
    /// HTTP method, upper case (`"POST"`).
    pub method: String,
    /// Path relative to [`FakeDiscord::api_base`](crate::FakeDiscord::api_base),
    /// without the query: `"/channels/1200/messages"`.
    pub path: String,
    /// The raw query string, if any (`"with_response=true"`).
    pub query: Option<String>,
    /// Request headers, names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body: parsed JSON; for `multipart/form-data`, the parsed
    /// `payload_json` part plus `"_files": [{"field", "filename", "size",
    /// "content_type"}]`; `Null` when empty or unparseable.
    pub body: Value,
    /// The status the fake answered with.
    pub status: u16,
    /// The JSON the fake answered with (`Null` for 204).
    pub response: Value,
    /// When the request arrived.
    pub at: Instant,
}

impl RestCall {
    /// A request header by lower-case name.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// `"METHOD /path"`, as matched by `rate_limit_next`.
    pub fn route(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// One Slack Web API call the fake received.
#[derive(Debug, Clone)]
pub struct ApiCall {
    /// The Web API method name (`"chat.postMessage"`).
    pub method: String,
    /// Arguments: JSON body, or form fields as strings (`blocks`, `view`,
    /// `attachments` and `metadata` decoded from their JSON strings), merged
    /// with query-string fields.
    pub body: Value,
    /// Request headers, names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The HTTP status the fake answered with (200 or 429).
    pub status: u16,
    /// The JSON the fake answered with.
    pub response: Value,
    /// When the call arrived.
    pub at: Instant,
}

impl ApiCall {
    /// A request header by lower-case name.
    pub fn header(&self, name: &str) -> Option<&str> {
        find_header(&self.headers, name)
    }

    /// Whether the fake answered `"ok": true`.
    pub fn ok(&self) -> bool {
        self.response.get("ok").and_then(Value::as_bool) == Some(true)
    }
}

fn find_header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    let name = name.to_ascii_lowercase();
    headers
        .iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.as_str())
}

/// Polls `cond` every 10 ms until it holds (true) or `timeout` passes (false).
///
/// `wait_until(|| discord.identify_count() == 2, Duration::from_secs(5)).await`
pub async fn wait_until(mut cond: impl FnMut() -> bool, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
