//! Slack's HTTP Events API and interactivity requests, delivered by the host
//! as `webhook` commands: the `v0` signature is checked with the host-held
//! signing secret, then the body is handled like a Socket Mode envelope.

use crate::adapter::Adapter;
use crate::events::str_at;
use crate::util::parse_form;
use serde_json::{Value, json};
use turnstone_plugin_sdk::channel::{
    CommandResult, WebhookRequest, WebhookResponse, complete, verify_hmac_sha256,
};

/// The secret the signatures are made with.
pub const SIGNING_SECRET: &str = "SLACK_SIGNING_SECRET";
/// Requests older (or newer) than this are rejected as replays.
pub const MAX_SKEW_SECS: u64 = 300;

/// A header's value by (lower-case) name.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// The signed text: `v0:<timestamp>:<body>`.
pub fn signature_base(timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut base = format!("v0:{timestamp}:").into_bytes();
    base.extend_from_slice(body);
    base
}

/// True when `timestamp` (Unix seconds) is within [`MAX_SKEW_SECS`] of `now_ms`.
pub fn timestamp_fresh(timestamp: &str, now_ms: u64) -> bool {
    let Ok(ts) = timestamp.trim().parse::<u64>() else {
        return false;
    };
    (now_ms / 1000).abs_diff(ts) <= MAX_SKEW_SECS
}

/// The hex digest of an `x-slack-signature` value (`v0=<hex>`).
pub fn signature_hex(value: &str) -> Option<&str> {
    value
        .trim()
        .strip_prefix("v0=")
        .filter(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What a verified webhook body asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Answer the challenge.
    UrlVerification(String),
    /// An Events API `event_callback`.
    EventCallback(Value),
    /// An interactivity payload (from the form's `payload` field).
    Interactive(Value),
    /// Nothing to do (slash commands, other event types, junk).
    Ignored,
}

/// Classifies a (verified) webhook body: JSON events or a form with `payload`.
pub fn classify_body(body: &[u8]) -> Body {
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        let Ok(v) = serde_json::from_str::<Value>(trimmed) else {
            return Body::Ignored;
        };
        return match str_at(&v, "type") {
            Some("url_verification") => {
                Body::UrlVerification(str_at(&v, "challenge").unwrap_or_default().to_string())
            }
            Some("event_callback") => Body::EventCallback(v),
            _ => Body::Ignored,
        };
    }
    parse_form(trimmed)
        .into_iter()
        .find(|(k, _)| k == "payload")
        .and_then(|(_, p)| serde_json::from_str::<Value>(&p).ok())
        .map_or(Body::Ignored, Body::Interactive)
}

fn respond(id: u64, status: u16, content_type: &str, body: Vec<u8>) {
    complete(
        id,
        Ok(CommandResult::Webhook(WebhookResponse {
            status,
            content_type: content_type.to_string(),
            body,
        })),
    );
}

fn verified(req: &WebhookRequest) -> bool {
    let (Some(ts), Some(sig)) = (
        header(&req.headers, "x-slack-request-timestamp"),
        header(&req.headers, "x-slack-signature").and_then(signature_hex),
    ) else {
        return false;
    };
    if !timestamp_fresh(ts, turnstone_plugin_sdk::host::now_ms()) {
        crate::warn("rejected a Slack webhook with a stale timestamp");
        return false;
    }
    match verify_hmac_sha256(SIGNING_SECRET, &signature_base(ts, &req.body), sig) {
        Ok(ok) => ok,
        Err(e) => {
            crate::warn(&format!(
                "cannot check Slack webhook signatures: {}",
                turnstone_plugin_sdk::describe_denial(&e)
            ));
            false
        }
    }
}

/// Answers webhook command `id`, then handles its event or payload.
pub fn handle(ad: &mut Adapter, id: u64, req: &WebhookRequest) {
    if !verified(req) {
        return respond(id, 401, "text/plain", b"invalid request signature".to_vec());
    }
    if let Some(n) = header(&req.headers, "x-slack-retry-num") {
        let reason = header(&req.headers, "x-slack-retry-reason").unwrap_or("unknown");
        crate::info(&format!("Slack webhook retry {n} ({reason})"));
    }
    // Slack wants a 2xx within 3 s: answer first, then do the work.
    match classify_body(&req.body) {
        Body::UrlVerification(challenge) => {
            let body = json!({ "challenge": challenge }).to_string().into_bytes();
            respond(id, 200, "application/json", body);
        }
        Body::EventCallback(v) => {
            respond(id, 200, "text/plain", Vec::new());
            ad.on_event_callback(&v);
        }
        Body::Interactive(v) => {
            respond(id, 200, "text/plain", Vec::new());
            ad.on_interactive(&v);
        }
        Body::Ignored => respond(id, 200, "text/plain", Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_base_string() {
        let body = b"token=xyz&team_id=T1";
        assert_eq!(
            signature_base("1531420618", body),
            b"v0:1531420618:token=xyz&team_id=T1".to_vec()
        );
        assert_eq!(signature_hex("v0=a2114d57b4"), Some("a2114d57b4"));
        assert_eq!(signature_hex("v1=a2114d57b4"), None);
        assert_eq!(signature_hex("v0="), None);
        assert_eq!(signature_hex("v0=zz"), None);
    }

    #[test]
    fn stale_timestamps_are_rejected() {
        let now_ms = 1_531_420_618_000;
        assert!(timestamp_fresh("1531420618", now_ms));
        assert!(timestamp_fresh("1531420318", now_ms));
        assert!(!timestamp_fresh("1531420317", now_ms));
        assert!(timestamp_fresh("1531420918", now_ms));
        assert!(!timestamp_fresh("1531420919", now_ms));
        assert!(!timestamp_fresh("soon", now_ms));
    }

    #[test]
    fn headers_are_found_case_insensitively() {
        let h = vec![("x-slack-signature".to_string(), "v0=ab".to_string())];
        assert_eq!(header(&h, "X-Slack-Signature"), Some("v0=ab"));
        assert_eq!(header(&h, "x-slack-request-timestamp"), None);
    }

    #[test]
    fn bodies_are_classified() {
        assert_eq!(
            classify_body(br#"{"token":"t","challenge":"3eZ","type":"url_verification"}"#),
            Body::UrlVerification("3eZ".into())
        );
        match classify_body(br#"{"type":"event_callback","event_id":"Ev1","event":{}}"#) {
            Body::EventCallback(v) => assert_eq!(v["event_id"], "Ev1"),
            other => panic!("unexpected {other:?}"),
        }
        match classify_body(b"payload=%7B%22type%22%3A%22block_actions%22%7D") {
            Body::Interactive(v) => assert_eq!(v["type"], "block_actions"),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(classify_body(b"command=%2Fjob&text=x"), Body::Ignored);
        assert_eq!(classify_body(b"{nope"), Body::Ignored);
    }
}
