//! Button presses and the feedback modal, from the gateway
//! (INTERACTION_CREATE, answered with a callback POST) or from HTTP
//! interactions (the webhook command, answered in the response body).

use crate::messages::{conversation, display_name};
use crate::rest::Rest;
use crate::util::str_at;
use serde_json::{Value, json};
use turnstone_plugin_sdk::channel::{
    ApprovalAction, Decision, Inbound, WebhookRequest, WebhookResponse, emit, verify_ed25519,
};
use turnstone_plugin_sdk::host::{Level, log};

/// What a `custom_id` of ours asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A decision button.
    Decide(Decision),
    /// "Deny with feedback…": open the modal.
    DenyWithFeedback,
    /// The modal's submit.
    Feedback,
}

/// Parses `ts:<kind>:<cycle>` into the kind and the cycle id.
pub fn parse_custom_id(id: &str) -> Option<(Kind, &str)> {
    let rest = id.strip_prefix("ts:")?;
    let (kind, cycle) = rest.split_once(':')?;
    if cycle.is_empty() {
        return None;
    }
    let kind = match kind {
        "approve" => Kind::Decide(Decision::Approve),
        "always" => Kind::Decide(Decision::Always),
        "deny" => Kind::Decide(Decision::Deny),
        "denyfb" => Kind::DenyWithFeedback,
        "fb" => Kind::Feedback,
        _ => return None,
    };
    Some((kind, cycle))
}

/// The value of the text input `custom_id` in a modal submit's `data`
/// (inside label components, or inside legacy action rows).
pub fn modal_value(data: &Value, custom_id: &str) -> Option<String> {
    fn find(c: &Value, custom_id: &str) -> Option<String> {
        if str_at(c, "custom_id") == Some(custom_id)
            && let Some(v) = str_at(c, "value")
        {
            return Some(v.to_string());
        }
        if let Some(inner) = c.get("component")
            && let Some(v) = find(inner, custom_id)
        {
            return Some(v);
        }
        c.get("components")
            .and_then(Value::as_array)?
            .iter()
            .find_map(|inner| find(inner, custom_id))
    }
    find(data, custom_id)
}

/// The feedback modal for `cycle`.
pub fn feedback_modal(cycle: &str) -> Value {
    json!({"type": 9, "data": {
        "custom_id": format!("ts:fb:{cycle}"),
        "title": "Deny with feedback",
        "components": [{
            "type": 18,
            "label": "What should the agent do instead?",
            "component": {"type": 4, "custom_id": "feedback", "style": 2, "max_length": 2000, "required": true}
        }]
    }})
}

/// How to answer an interaction and what to tell the host.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The interaction response (callback body).
    pub response: Value,
    /// The decision to emit after answering.
    pub action: Option<ApprovalAction>,
}

/// What an interaction is to us.
#[derive(Debug, Clone)]
pub enum Handling {
    /// A PING (HTTP interactions only).
    Ping,
    /// One of our buttons or our modal.
    Plan(Plan),
    /// Not ours (other custom ids, commands).
    Ignore,
}

/// Decides how to handle the interaction `d`.
pub fn plan(d: &Value) -> Handling {
    let kind = d.get("type").and_then(Value::as_u64);
    if kind == Some(1) {
        return Handling::Ping;
    }
    let Some(data) = d.get("data") else {
        return Handling::Ignore;
    };
    let Some((parsed, cycle)) = str_at(data, "custom_id").and_then(parse_custom_id) else {
        return Handling::Ignore;
    };
    let (decision, feedback) = match (kind, parsed) {
        (Some(3), Kind::Decide(decision)) => (decision, None),
        (Some(3), Kind::DenyWithFeedback) => {
            return Handling::Plan(Plan {
                response: feedback_modal(cycle),
                action: None,
            });
        }
        (Some(5), Kind::Feedback) => (Decision::Deny, modal_value(data, "feedback")),
        _ => return Handling::Ignore,
    };
    let user = d
        .get("member")
        .and_then(|m| m.get("user"))
        .or_else(|| d.get("user"))
        .unwrap_or(&Value::Null);
    let channel_id = str_at(d, "channel_id")
        .or_else(|| d.get("channel").and_then(|c| str_at(c, "id")))
        .unwrap_or("");
    let channel_type = d
        .get("channel")
        .and_then(|c| c.get("type"))
        .and_then(Value::as_u64);
    let message_id = d.get("message").and_then(|m| str_at(m, "id")).unwrap_or("");
    Handling::Plan(Plan {
        response: json!({"type": 6}),
        action: Some(ApprovalAction {
            conversation: conversation(channel_id, channel_type, str_at(d, "guild_id").is_some()),
            message_id: message_id.to_string(),
            user_id: str_at(user, "id").unwrap_or("").to_string(),
            user_name: display_name(user),
            cycle_id: cycle.to_string(),
            decision,
            feedback,
        }),
    })
}

/// Handles a gateway INTERACTION_CREATE: answers it first (within Discord's
/// 3 s), then emits the decision. `budget_ms` bounds any rate-limit wait.
pub fn on_gateway_interaction(d: &Value, rest: &mut Rest, budget_ms: u64) {
    let Handling::Plan(plan) = plan(d) else {
        return;
    };
    let id = str_at(d, "id").unwrap_or("");
    let token = str_at(d, "token").unwrap_or("");
    if let Err(e) = rest.interaction_callback(id, token, &plan.response, budget_ms) {
        log(
            Level::Warn,
            &format!("answering interaction {id} failed: {e}"),
        );
    }
    if let Some(action) = plan.action {
        emit(&Inbound::Action(action));
    }
}

/// A header of a webhook request (names are lower-cased by the host).
pub fn header<'a>(req: &'a WebhookRequest, name: &str) -> Option<&'a str> {
    req.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn reply(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> WebhookResponse {
    WebhookResponse {
        status,
        content_type: content_type.to_string(),
        body: body.into(),
    }
}

/// Answers an HTTP interaction: checks its Ed25519 signature with
/// `public_key`, answers PINGs, and answers our buttons and modal in the
/// response body (emitting the decision).
pub fn on_webhook(req: &WebhookRequest, public_key: Option<&str>) -> WebhookResponse {
    let unauthorized = || reply(401, "text/plain", "invalid request signature");
    let Some(key) = public_key else {
        log(
            Level::Warn,
            "an interaction webhook arrived but public_key is not configured",
        );
        return unauthorized();
    };
    let (Some(signature), Some(timestamp)) = (
        header(req, "x-signature-ed25519"),
        header(req, "x-signature-timestamp"),
    ) else {
        return unauthorized();
    };
    let mut signed = timestamp.as_bytes().to_vec();
    signed.extend_from_slice(&req.body);
    if !verify_ed25519(key, &signed, signature.trim()) {
        return unauthorized();
    }
    let Ok(d) = serde_json::from_slice::<Value>(&req.body) else {
        return reply(400, "text/plain", "invalid JSON");
    };
    match plan(&d) {
        Handling::Ping => reply(200, "application/json", r#"{"type":1}"#),
        Handling::Plan(plan) => {
            if let Some(action) = plan.action {
                emit(&Inbound::Action(action));
            }
            reply(200, "application/json", plan.response.to_string())
        }
        Handling::Ignore => reply(400, "text/plain", "unsupported interaction"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_ids() {
        assert_eq!(
            parse_custom_id("ts:approve:c-1"),
            Some((Kind::Decide(Decision::Approve), "c-1"))
        );
        assert_eq!(
            parse_custom_id("ts:always:a:b"),
            Some((Kind::Decide(Decision::Always), "a:b"))
        );
        assert_eq!(
            parse_custom_id("ts:denyfb:x"),
            Some((Kind::DenyWithFeedback, "x"))
        );
        assert_eq!(parse_custom_id("ts:fb:x"), Some((Kind::Feedback, "x")));
        assert_eq!(parse_custom_id("ts:deny:"), None);
        assert_eq!(parse_custom_id("ts:maybe:x"), None);
        assert_eq!(parse_custom_id("fb:17:up"), None);
    }

    #[test]
    fn modal_values_in_labels_and_rows() {
        let label = json!({"custom_id": "ts:fb:1", "components": [
            {"type": 18, "id": 1, "component": {"type": 4, "id": 2, "custom_id": "feedback", "value": "use git"}}
        ]});
        assert_eq!(modal_value(&label, "feedback").as_deref(), Some("use git"));
        let rows = json!({"custom_id": "ts:fb:1", "components": [
            {"type": 1, "components": [{"type": 4, "custom_id": "other", "value": "no"}]},
            {"type": 1, "components": [{"type": 4, "custom_id": "feedback", "value": "yes"}]}
        ]});
        assert_eq!(modal_value(&rows, "feedback").as_deref(), Some("yes"));
        assert_eq!(modal_value(&json!({"components": []}), "feedback"), None);
    }

    #[test]
    fn plans() {
        let press = json!({"id": "i", "token": "t", "type": 3, "guild_id": "g", "channel_id": "c",
            "channel": {"id": "c", "type": 11},
            "member": {"user": {"id": "u", "username": "alice"}},
            "data": {"custom_id": "ts:deny:cy", "component_type": 2},
            "message": {"id": "m"}});
        let Handling::Plan(p) = plan(&press) else {
            panic!("expected a plan")
        };
        assert_eq!(p.response, json!({"type": 6}));
        let Some(a) = p.action else {
            panic!("expected an action")
        };
        assert_eq!((a.cycle_id.as_str(), a.message_id.as_str()), ("cy", "m"));
        assert!(matches!(a.decision, Decision::Deny));
        assert_eq!(a.conversation.thread_id.as_deref(), Some("c"));
        assert_eq!(a.user_name, "alice");

        let mut fb = press.clone();
        fb["data"]["custom_id"] = json!("ts:denyfb:cy");
        let Handling::Plan(p) = plan(&fb) else {
            panic!("expected a plan")
        };
        assert!(p.action.is_none());
        assert_eq!(p.response["type"], 9);
        assert_eq!(p.response["data"]["custom_id"], "ts:fb:cy");

        let submit = json!({"type": 5, "channel_id": "d", "user": {"id": "u", "global_name": "Al"},
            "data": {"custom_id": "ts:fb:cy", "components": [{"type": 18, "component": {"custom_id": "feedback", "value": "no"}}]}});
        let Handling::Plan(p) = plan(&submit) else {
            panic!("expected a plan")
        };
        let Some(a) = p.action else {
            panic!("expected an action")
        };
        assert_eq!(a.feedback.as_deref(), Some("no"));
        assert_eq!(a.message_id, "");
        assert!(a.conversation.direct);
        assert!(matches!(plan(&json!({"type": 1})), Handling::Ping));
        assert!(matches!(
            plan(&json!({"type": 3, "data": {"custom_id": "x"}})),
            Handling::Ignore
        ));
    }
}
