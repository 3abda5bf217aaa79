//! The Web API (channels-wire.md B4-B5), private file downloads and
//! `response_url` hooks.

use super::{APP_ID, BOT_USER_ID, SLACK_BOT_ID, SMsg, Shared, State, TEAM_ID};
use crate::http::{form_decode, header, header_list, lock, parse_body, respond};
use crate::record::ApiCall;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Instant;

const LOGIN_PAGE: &str = "<!DOCTYPE html><html><head><title>Slack</title></head><body>\
<h1>Sign in to Fake Workspace</h1><form action=\"/signin\" method=\"post\">\
<input type=\"email\" name=\"email\"><input type=\"password\" name=\"password\">\
<button type=\"submit\">Sign In</button></form></body></html>";

/// `GET /files-pri/{path}`: the bytes with the bot token, else a login page.
pub(crate) async fn files(
    AxState(shared): AxState<Arc<Shared>>,
    Path(path): Path<String>,
    headers: HeaderMap,
) -> Response {
    let expected = format!("Bearer {}", shared.bot_token);
    let authorized = header(&headers, "authorization") == Some(expected.as_str());
    let mut st = lock(&shared.state);
    st.file_fetches.push((path.clone(), authorized));
    if !authorized {
        return respond(200, "text/html; charset=utf-8", &[], LOGIN_PAGE);
    }
    match st.files.get(&path) {
        Some((bytes, mime)) => respond(200, mime, &[], bytes.clone()),
        None => respond(
            404,
            "text/html; charset=utf-8",
            &[],
            "<html><body>Not found</body></html>",
        ),
    }
}

/// Fields that form bodies carry as JSON strings.
const JSON_FIELDS: [&str; 4] = ["blocks", "view", "attachments", "metadata"];

/// The call's arguments: the body (JSON or form) merged over the query,
/// with JSON-string fields decoded.
fn arguments(content_type: Option<&str>, body: &[u8], query: Option<&str>) -> Value {
    let mut args = Map::new();
    for (k, v) in query.map(form_decode).unwrap_or_default() {
        args.insert(k, Value::String(v));
    }
    match parse_body(content_type, body) {
        Value::Object(m) => args.extend(m),
        Value::Null => {}
        other => {
            args.insert("_body".into(), other);
        }
    }
    for key in JSON_FIELDS {
        let decoded = args
            .get(key)
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str::<Value>(s).ok())
            .filter(|v| v.is_array() || v.is_object());
        if let Some(v) = decoded {
            args.insert(key.to_string(), v);
        }
    }
    Value::Object(args)
}

/// Everything else: `/api/{method}` and `/hooks/...` (recorded, then answered).
pub(crate) async fn handle(
    AxState(shared): AxState<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let path = uri.path().to_string();
    let args = arguments(header(&headers, "content-type"), &body, uri.query());
    let mut st = lock(&shared.state);
    let (method, (status, response, extra)) = if let Some(m) = path.strip_prefix("/api/") {
        (m.to_string(), api(&shared, &mut st, m, &headers, &args))
    } else if path.starts_with("/hooks/") {
        (path.clone(), (200, json!({"ok": true}), Vec::new()))
    } else {
        return respond(404, "text/plain", &[], "not found");
    };
    st.calls.push(ApiCall {
        method,
        body: args,
        headers: header_list(&headers),
        status,
        response: response.clone(),
        at,
    });
    drop(st);
    respond(
        status,
        "application/json; charset=utf-8",
        &extra,
        response.to_string(),
    )
}

type Answer = (u16, Value, Vec<(&'static str, String)>);

fn fail(error: &str) -> Answer {
    (200, json!({"ok": false, "error": error}), Vec::new())
}

fn okay(v: Value) -> Answer {
    (200, v, Vec::new())
}

fn api(shared: &Shared, st: &mut State, method: &str, headers: &HeaderMap, args: &Value) -> Answer {
    let token = if method == "apps.connections.open" {
        &shared.app_token
    } else {
        &shared.bot_token
    };
    match header(headers, "authorization") {
        None => return fail("not_authed"),
        Some(a) if a != format!("Bearer {token}") => return fail("invalid_auth"),
        Some(_) => {}
    }
    if let Some(i) = st.limits.iter().position(|(m, _)| m == method) {
        let (m, secs) = st.limits.remove(i);
        st.limited.push((m, Instant::now(), secs));
        return (
            429,
            json!({"ok": false, "error": "ratelimited"}),
            vec![("retry-after", secs.to_string())],
        );
    }
    match method {
        "apps.connections.open" => {
            st.next_ticket += 1;
            let t = st.next_ticket;
            st.tickets.insert(t, false);
            st.open_count += 1;
            okay(json!({"ok": true, "url": format!("ws://{}/link/?ticket={t}", shared.addr)}))
        }
        "auth.test" => okay(json!({
            "ok": true, "url": "https://fake.slack.com/", "team": "Fake Workspace",
            "user": "turnstone-bot", "team_id": TEAM_ID, "user_id": BOT_USER_ID,
            "bot_id": SLACK_BOT_ID, "is_enterprise_install": false,
        })),
        "chat.postMessage" => post_message(st, args),
        "chat.update" => update(st, args),
        "views.open" => views_open(st, args),
        _ => fail("unknown_method"),
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// `thread_ts`/`ts` may come as a string or (from JSON) a number.
fn ts_arg(args: &Value, key: &str) -> Option<String> {
    match args.get(key)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn has_items(args: &Value, key: &str) -> bool {
    args.get(key)
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

fn post_message(st: &mut State, args: &Value) -> Answer {
    let Some(channel) = str_arg(args, "channel").filter(|c| st.channels.contains(*c)) else {
        return fail("channel_not_found");
    };
    let text = args.get("text").and_then(Value::as_str).unwrap_or("");
    if text.is_empty() && !has_items(args, "blocks") && !has_items(args, "attachments") {
        return fail("no_text");
    }
    if text.chars().count() > 40_000 {
        return fail("msg_too_long");
    }
    let ts = st.next_ts();
    let thread_ts = ts_arg(args, "thread_ts");
    let blocks = args
        .get("blocks")
        .filter(|b| b.is_array())
        .cloned()
        .unwrap_or(json!([]));
    let mut message = json!({
        "type": "message", "subtype": "bot_message", "text": text, "user": BOT_USER_ID,
        "bot_id": SLACK_BOT_ID, "app_id": APP_ID, "team": TEAM_ID, "ts": ts, "blocks": blocks,
    });
    if let Some(t) = &thread_ts {
        message["thread_ts"] = json!(t);
        message["parent_user_id"] = json!(BOT_USER_ID);
    }
    st.messages.push(SMsg {
        channel: channel.to_string(),
        ts: ts.clone(),
        text: text.to_string(),
        thread_ts,
        blocks,
        user: BOT_USER_ID.to_string(),
        bot: true,
        edits: 0,
    });
    okay(json!({"ok": true, "channel": channel, "ts": ts, "message": message}))
}

fn update(st: &mut State, args: &Value) -> Answer {
    let Some(channel) = str_arg(args, "channel").filter(|c| st.channels.contains(*c)) else {
        return fail("channel_not_found");
    };
    let Some(ts) = ts_arg(args, "ts") else {
        return fail("message_not_found");
    };
    let Some(m) = st
        .messages
        .iter_mut()
        .find(|m| m.channel == channel && m.ts == ts)
    else {
        return fail("message_not_found");
    };
    if !m.bot {
        return fail("cant_update_message");
    }
    let text = args.get("text").and_then(Value::as_str);
    if let Some(t) = text {
        m.text = t.to_string();
    }
    match args.get("blocks").filter(|b| b.is_array()) {
        Some(b) => m.blocks = b.clone(),
        // With text and no blocks, the blocks are removed (B4).
        None if text.is_some() => m.blocks = json!([]),
        None => {}
    }
    m.edits += 1;
    okay(json!({
        "ok": true, "channel": channel, "ts": ts, "text": m.text,
        "message": {"type": "message", "text": m.text, "user": BOT_USER_ID, "bot_id": SLACK_BOT_ID,
                    "blocks": m.blocks, "edited": {"user": BOT_USER_ID, "ts": ts}},
    }))
}

fn views_open(st: &mut State, args: &Value) -> Answer {
    let Some(trigger) = str_arg(args, "trigger_id") else {
        return fail("invalid_arguments");
    };
    let Some(view) = args.get("view").filter(|v| v.is_object()) else {
        return fail("invalid_arguments");
    };
    let ttl = st.trigger_ttl;
    match st.triggers.get_mut(trigger) {
        None => return fail("invalid_trigger_id"),
        Some((_, true)) => return fail("exchanged_trigger_id"),
        Some((at, _)) if at.elapsed() > ttl => return fail("expired_trigger_id"),
        Some((_, used)) => *used = true,
    }
    st.next_view += 1;
    let id = format!("V{:08}", st.next_view);
    let mut v = view.clone();
    v["id"] = json!(id);
    v["team_id"] = json!(TEAM_ID);
    v["app_id"] = json!(APP_ID);
    v["bot_id"] = json!(SLACK_BOT_ID);
    v["hash"] = json!(format!("{}.fake{}", crate::http::unix_secs(), st.next_view));
    v["state"] = json!({"values": {}});
    v["root_view_id"] = json!(id);
    v["previous_view_id"] = Value::Null;
    st.views.push(v.clone());
    okay(json!({"ok": true, "view": v}))
}
