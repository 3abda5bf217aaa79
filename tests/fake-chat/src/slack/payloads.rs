//! Socket Mode envelope payloads (channels-wire.md B2): events_api
//! `message` / `app_mention`, interactive `block_actions` /
//! `view_submission`, and `slash_commands`.

use super::{APP_ID, BOT_USER_ID, SLACK_BOT_ID, SMsg, State, TEAM_ID};
use crate::http::unix_secs;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::Instant;

const VERIFICATION_TOKEN: &str = "fake-verification-token";

/// A file object as it appears in `event.files[]` (B2), with
/// `url_private` and `url_private_download` both set to `url` (from
/// [`FakeSlack::add_file`](crate::FakeSlack::add_file)).
pub fn slack_file(id: &str, name: &str, mimetype: &str, size: u64, url: &str) -> Value {
    let filetype = match name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
    {
        Some(ext) if ext == "txt" => "text".to_string(),
        Some(ext) => ext,
        None => "binary".to_string(),
    };
    json!({
        "id": id, "name": name, "title": name, "mimetype": mimetype, "filetype": filetype,
        "size": size, "mode": "hosted", "is_external": false, "is_public": false,
        "url_private": url, "url_private_download": url,
    })
}

fn user_obj(user: &str) -> Value {
    let name = user.to_ascii_lowercase();
    json!({"id": user, "username": name, "name": name, "team_id": TEAM_ID})
}

fn client_msg_id(n: u64) -> String {
    format!("c11e7a55-0000-4000-8000-{n:012x}")
}

/// Wraps `event` in an `event_callback` payload and pushes it as an
/// `events_api` envelope; returns the envelope id.
fn push_event(st: &mut State, event: Value) -> String {
    st.next_event += 1;
    let n = st.next_event;
    let kind = event["type"].as_str().unwrap_or("message").to_string();
    let channel = event["channel"].as_str().unwrap_or("").to_string();
    let payload = json!({
        "token": VERIFICATION_TOKEN, "team_id": TEAM_ID, "context_team_id": TEAM_ID,
        "api_app_id": APP_ID, "type": "event_callback",
        "event_id": format!("Ev{n:08}"), "event_time": unix_secs(),
        "event_context": format!("1-{kind}-{TEAM_ID}-{channel}"),
        "authorizations": [{"enterprise_id": null, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                            "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false,
        "event": event,
    });
    st.push_envelope("events_api", payload, false)
}

/// A `message` event; records the message and returns its ts.
pub(crate) fn message(
    st: &mut State,
    channel: &str,
    user: &str,
    text: &str,
    thread_ts: Option<&str>,
    channel_type: &str,
    files: Vec<Value>,
) -> String {
    st.channels.insert(channel.to_string());
    let ts = st.next_ts();
    let mut event = json!({
        "type": "message", "client_msg_id": client_msg_id(st.next_event + 1),
        "user": user, "text": text, "team": TEAM_ID, "channel": channel,
        "channel_type": channel_type, "ts": ts, "event_ts": ts,
    });
    if let Some(t) = thread_ts {
        event["thread_ts"] = json!(t);
        let parent = st
            .messages
            .iter()
            .find(|m| m.channel == channel && m.ts == t);
        if let Some(p) = parent {
            event["parent_user_id"] = json!(p.user);
        }
    }
    if !files.is_empty() {
        event["files"] = Value::Array(files);
        event["upload"] = json!(false);
    }
    st.messages.push(SMsg {
        channel: channel.to_string(),
        ts: ts.clone(),
        text: text.to_string(),
        thread_ts: thread_ts.map(str::to_string),
        blocks: json!([]),
        user: user.to_string(),
        bot: false,
        edits: 0,
    });
    push_event(st, event);
    ts
}

/// An `app_mention` event for message `ts`; returns the envelope id.
pub(crate) fn app_mention(
    st: &mut State,
    channel: &str,
    user: &str,
    text: &str,
    thread_ts: Option<&str>,
    ts: &str,
) -> String {
    st.channels.insert(channel.to_string());
    if !st
        .messages
        .iter()
        .any(|m| m.channel == channel && m.ts == ts)
    {
        st.messages.push(SMsg {
            channel: channel.to_string(),
            ts: ts.to_string(),
            text: text.to_string(),
            thread_ts: thread_ts.map(str::to_string),
            blocks: json!([]),
            user: user.to_string(),
            bot: false,
            edits: 0,
        });
    }
    let mut event = json!({
        "type": "app_mention", "client_msg_id": client_msg_id(st.next_event + 1),
        "user": user, "text": text, "team": TEAM_ID, "channel": channel,
        "ts": ts, "event_ts": ts, "blocks": [],
    });
    if let Some(t) = thread_ts {
        event["thread_ts"] = json!(t);
    }
    push_event(st, event)
}

/// The block_id of the block holding element `action_id`, if any.
fn block_of(blocks: &Value, action_id: &str) -> Option<(String, Value)> {
    for block in blocks.as_array()? {
        let elements = block["elements"].as_array().cloned().unwrap_or_default();
        let accessory = block.get("accessory").cloned().into_iter();
        for el in elements.into_iter().chain(accessory) {
            if el["action_id"].as_str() == Some(action_id) {
                return Some((block["block_id"].as_str().unwrap_or("").to_string(), el));
            }
        }
    }
    None
}

/// A `block_actions` interactive envelope; returns the envelope id.
#[allow(clippy::too_many_arguments)]
pub(crate) fn block_action(
    st: &mut State,
    addr: SocketAddr,
    channel: &str,
    message_ts: &str,
    thread_ts: Option<&str>,
    user: &str,
    action_id: &str,
    value: &str,
    trigger_id: &str,
) -> String {
    st.channels.insert(channel.to_string());
    st.triggers
        .insert(trigger_id.to_string(), (Instant::now(), false));
    let found = st
        .messages
        .iter()
        .find(|m| m.channel == channel && m.ts == message_ts);
    let mut message = match found {
        Some(m) if m.bot => {
            json!({"type": "message", "subtype": "bot_message", "user": BOT_USER_ID,
            "bot_id": SLACK_BOT_ID, "app_id": APP_ID, "text": m.text, "ts": m.ts, "blocks": m.blocks})
        }
        Some(m) => {
            json!({"type": "message", "user": m.user, "text": m.text, "ts": m.ts, "blocks": m.blocks})
        }
        None => json!({"type": "message", "user": BOT_USER_ID, "bot_id": SLACK_BOT_ID,
            "text": "", "ts": message_ts, "blocks": []}),
    };
    let thread = thread_ts
        .map(str::to_string)
        .or_else(|| found.and_then(|m| m.thread_ts.clone()));
    let (block_id, element) = block_of(&message["blocks"], action_id).unwrap_or_default();
    let text = element
        .get("text")
        .cloned()
        .unwrap_or_else(|| json!({"type": "plain_text", "text": value, "emoji": true}));
    let mut container = json!({"type": "message", "message_ts": message_ts, "channel_id": channel,
                               "is_ephemeral": false});
    if let Some(t) = &thread {
        message["thread_ts"] = json!(t);
        container["thread_ts"] = json!(t);
    }
    let action_ts = st.next_ts();
    let payload = json!({
        "type": "block_actions", "api_app_id": APP_ID, "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id, "team": {"id": TEAM_ID, "domain": "fake"},
        "enterprise": null, "is_enterprise_install": false, "user": user_obj(user),
        "container": container, "channel": {"id": channel, "name": "general"},
        "message": message,
        "response_url": format!("http://{addr}/hooks/actions/{TEAM_ID}/{}/fake", st.next_envelope + 1),
        "actions": [{"type": "button", "action_id": action_id, "block_id": block_id, "value": value,
                     "text": text, "action_ts": action_ts}],
        "state": {"values": {}},
    });
    st.push_envelope("interactive", payload, false)
}

/// A `view_submission` interactive envelope; returns the envelope id.
pub(crate) fn view_submission(
    st: &mut State,
    callback_id: &str,
    private_metadata: &str,
    block_id: &str,
    action_id: &str,
    value: &str,
    user: &str,
) -> String {
    let mut view = st
        .views
        .iter()
        .rev()
        .find(|v| v["callback_id"].as_str() == Some(callback_id))
        .cloned()
        .unwrap_or_else(|| {
            json!({"id": "V00000000", "team_id": TEAM_ID, "type": "modal", "blocks": [],
                   "title": {"type": "plain_text", "text": "Modal"}, "app_id": APP_ID,
                   "bot_id": SLACK_BOT_ID, "hash": "1.fake"})
        });
    view["callback_id"] = json!(callback_id);
    view["private_metadata"] = json!(private_metadata);
    view["state"] =
        json!({"values": {block_id: {action_id: {"type": "plain_text_input", "value": value}}}});
    let trigger_id = st.trigger();
    let payload = json!({
        "type": "view_submission", "team": {"id": TEAM_ID, "domain": "fake"},
        "user": user_obj(user), "api_app_id": APP_ID, "token": VERIFICATION_TOKEN,
        "trigger_id": trigger_id, "view": view, "response_urls": [],
        "is_enterprise_install": false, "enterprise": null,
    });
    st.push_envelope("interactive", payload, true)
}

/// A `slash_commands` envelope; returns the envelope id.
pub(crate) fn slash_command(
    st: &mut State,
    addr: SocketAddr,
    channel: &str,
    user: &str,
    command: &str,
    text: &str,
    trigger_id: &str,
) -> String {
    st.channels.insert(channel.to_string());
    st.triggers
        .insert(trigger_id.to_string(), (Instant::now(), false));
    let payload = json!({
        "token": VERIFICATION_TOKEN, "team_id": TEAM_ID, "team_domain": "fake",
        "channel_id": channel, "channel_name": "general", "user_id": user,
        "user_name": user.to_ascii_lowercase(), "command": command, "text": text,
        "api_app_id": APP_ID, "is_enterprise_install": "false",
        "response_url": format!("http://{addr}/hooks/commands/{TEAM_ID}/{}/fake", st.next_envelope + 1),
        "trigger_id": trigger_id,
    });
    st.push_envelope("slash_commands", payload, true)
}
