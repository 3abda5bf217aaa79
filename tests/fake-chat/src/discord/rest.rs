//! The REST routes under `/api/v10` (channels-wire.md A1, A2, A6-A8, A10)
//! and the fake CDN.

use super::payloads::bot_message;
use super::{BOT_ID, BOT_NAME, Channel, Posted, Shared, State};
use crate::http::{
    empty_response, header, header_list, iso_now, lock, parse_body, respond, unix_micros,
};
use crate::record::RestCall;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Instant;

/// An answer: status, JSON body (ignored for 204), extra headers.
struct Reply {
    status: u16,
    body: Value,
    headers: Vec<(&'static str, String)>,
}

fn ok(status: u16, body: Value) -> Reply {
    Reply {
        status,
        body,
        headers: Vec::new(),
    }
}

fn err(status: u16, message: &str, code: u32) -> Reply {
    ok(status, json!({"message": message, "code": code}))
}

fn no_content() -> Reply {
    ok(204, Value::Null)
}

/// `GET /cdn/{name}`: a file registered with `add_file`, or 404.
pub(crate) async fn cdn(
    AxState(shared): AxState<Arc<Shared>>,
    Path(name): Path<String>,
) -> Response {
    let mut st = lock(&shared.state);
    st.cdn_fetches.push(name.clone());
    match st.files.get(&name) {
        Some((bytes, ct)) => respond(200, ct, &[], bytes.clone()),
        None => respond(404, "text/plain", &[], "404: Not Found"),
    }
}

/// Every other request: the REST API (recorded, then answered).
pub(crate) async fn handle(
    AxState(shared): AxState<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
    let full = uri.path().to_string();
    let rel = full.strip_prefix("/api/v10").map(str::to_string);
    let parsed = parse_body(header(&headers, "content-type"), &body);
    let mut st = lock(&shared.state);
    let reply = route(
        &shared,
        &mut st,
        method.as_str(),
        &full,
        rel.as_deref(),
        &headers,
        &parsed,
    );
    st.rest.push(RestCall {
        method: method.as_str().to_string(),
        path: rel.unwrap_or(full),
        query: uri.query().map(str::to_string),
        headers: header_list(&headers),
        body: parsed,
        status: reply.status,
        response: reply.body.clone(),
        at,
    });
    drop(st);
    if reply.status == 204 {
        empty_response(204)
    } else {
        respond(
            reply.status,
            "application/json",
            &reply.headers,
            reply.body.to_string(),
        )
    }
}

fn route(
    shared: &Shared,
    st: &mut State,
    method: &str,
    full: &str,
    rel: Option<&str>,
    headers: &HeaderMap,
    body: &Value,
) -> Reply {
    let Some(rel) = rel else {
        return err(404, "404: Not Found", 0);
    };
    let segs: Vec<&str> = rel.trim_start_matches('/').split('/').collect();
    let needs_auth = !matches!(
        segs.as_slice(),
        ["interactions", _, _, "callback"] | ["gateway"]
    );
    if needs_auth
        && header(headers, "authorization") != Some(format!("Bot {}", shared.token).as_str())
    {
        return err(401, "401: Unauthorized", 0);
    }
    let (route_s, full_s) = (format!("{method} {rel}"), format!("{method} {full}"));
    if let Some(i) = st
        .limits
        .iter()
        .position(|l| route_s.starts_with(&l.prefix) || full_s.starts_with(&l.prefix))
    {
        let limit = st.limits.remove(i);
        st.limited
            .push((route_s, Instant::now(), limit.retry_after));
        return rate_limited(limit.retry_after);
    }
    match (method, segs.as_slice()) {
        ("GET", ["gateway", "bot"]) => ok(
            200,
            json!({"url": shared.ws_url(), "shards": 1, "session_start_limit":
                {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}}),
        ),
        ("GET", ["gateway"]) => ok(200, json!({"url": shared.ws_url()})),
        ("GET", ["users", "@me"]) => ok(
            200,
            json!({"id": BOT_ID, "username": BOT_NAME, "discriminator": "0", "bot": true, "avatar": null}),
        ),
        ("GET", ["channels", cid]) => match st.channels.get(*cid) {
            Some(c) => ok(200, channel_json(cid, c)),
            None => err(404, "Unknown Channel", 10003),
        },
        ("POST", ["channels", cid, "typing"]) => {
            if st.channels.contains_key(*cid) {
                no_content()
            } else {
                err(404, "Unknown Channel", 10003)
            }
        }
        ("POST", ["channels", cid, "messages"]) => create_message(shared, st, cid, body),
        ("GET", ["channels", cid, "messages", mid]) => {
            match st
                .posted
                .iter()
                .find(|p| p.id == *mid && p.channel_id == *cid)
            {
                Some(p) => ok(200, p.message.clone()),
                None => match st.injected.get(*mid) {
                    Some((c, m)) if c == cid => ok(200, m.clone()),
                    _ => err(404, "Unknown Message", 10008),
                },
            }
        }
        ("PATCH", ["channels", cid, "messages", mid]) => edit_message(st, cid, mid, body),
        ("POST", ["channels", cid, "messages", mid, "threads"]) => start_thread(st, cid, mid, body),
        ("POST", ["interactions", iid, token, "callback"]) => callback(st, iid, token, body),
        _ => err(404, "404: Not Found", 0),
    }
}

fn rate_limited(retry_after: f64) -> Reply {
    let reset = unix_micros() as f64 / 1e6 + retry_after;
    Reply {
        status: 429,
        body: json!({"message": "You are being rate limited.", "retry_after": retry_after, "global": false}),
        headers: vec![
            ("retry-after", format!("{}", retry_after.ceil() as u64)),
            ("x-ratelimit-limit", "5".into()),
            ("x-ratelimit-remaining", "0".into()),
            ("x-ratelimit-reset", format!("{reset:.3}")),
            ("x-ratelimit-reset-after", format!("{retry_after:.3}")),
            ("x-ratelimit-bucket", "abcd1234".into()),
            ("x-ratelimit-scope", "user".into()),
        ],
    }
}

fn channel_json(id: &str, c: &Channel) -> Value {
    let mut v = json!({"id": id, "type": c.kind});
    if let Some(g) = &c.guild_id {
        v["guild_id"] = json!(g);
    }
    if let Some(p) = &c.parent_id {
        v["parent_id"] = json!(p);
    }
    if let Some(n) = &c.name {
        v["name"] = json!(n);
    }
    v
}

fn too_long(content: &str) -> Option<Reply> {
    (content.chars().count() > 2000).then(|| {
        ok(
            400,
            json!({"message": "Invalid Form Body", "code": 50035, "errors": {"content": {"_errors":
                [{"code": "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}),
        )
    })
}

fn is_empty_list(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array).is_none_or(|a| a.is_empty())
}

fn create_message(shared: &Shared, st: &mut State, cid: &str, body: &Value) -> Reply {
    let Some(channel) = st.channels.get(cid).cloned() else {
        return err(404, "Unknown Channel", 10003);
    };
    let content = body.get("content").and_then(Value::as_str).unwrap_or("");
    if let Some(r) = too_long(content) {
        return r;
    }
    if content.is_empty()
        && is_empty_list(body.get("components"))
        && is_empty_list(body.get("embeds"))
        && is_empty_list(body.get("_files"))
        && is_empty_list(body.get("sticker_ids"))
    {
        return err(400, "Cannot send an empty message", 50006);
    }
    let id = st.message_id();
    let components = body.get("components").cloned().unwrap_or(json!([]));
    let embeds = body.get("embeds").cloned().unwrap_or(json!([]));
    let mut msg = bot_message(&id, cid, content, components, embeds);
    if let Some(files) = body.get("_files").and_then(Value::as_array) {
        let atts: Vec<Value> = files
            .iter()
            .enumerate()
            .map(|(n, f)| {
                let name = f["filename"].as_str().unwrap_or("file");
                let url = format!("http://{}/cdn/attachments/{cid}/{id}/{name}", shared.addr);
                json!({"id": format!("{id}{n}"), "filename": name, "size": f["size"],
                       "content_type": f["content_type"], "url": url, "proxy_url": url})
            })
            .collect();
        msg["attachments"] = json!(atts);
    }
    if let Some(flags) = body.get("flags") {
        msg["flags"] = flags.clone();
    }
    if let Some(r) = body.get("message_reference").filter(|r| r.is_object()) {
        msg["type"] = json!(19);
        let mut reference = json!({"type": 0, "message_id": r["message_id"], "channel_id": cid});
        if let Some(g) = &channel.guild_id {
            reference["guild_id"] = json!(g);
        }
        msg["message_reference"] = reference;
    }
    st.posted.push(Posted {
        id: id.clone(),
        channel_id: cid.to_string(),
        message: msg.clone(),
        edits: 0,
    });
    if st.echo_own {
        let mut d = msg.clone();
        d["channel_type"] = json!(channel.kind);
        if let Some(g) = &channel.guild_id {
            d["guild_id"] = json!(g);
        }
        st.dispatch("MESSAGE_CREATE", d);
    }
    ok(200, msg)
}

/// Applies the editable fields present in `data` to `msg` (null clears).
fn apply_edit(msg: &mut Value, data: &Value) {
    for key in ["content", "components", "embeds", "flags", "attachments"] {
        if let Some(v) = data.get(key) {
            msg[key] = match (key, v) {
                ("content", Value::Null) => json!(""),
                ("flags", Value::Null) => json!(0),
                (_, Value::Null) => json!([]),
                _ => v.clone(),
            };
        }
    }
    msg["edited_timestamp"] = json!(iso_now());
}

fn edit_message(st: &mut State, cid: &str, mid: &str, body: &Value) -> Reply {
    if !st.channels.contains_key(cid) {
        return err(404, "Unknown Channel", 10003);
    }
    if let Some(r) = too_long(body.get("content").and_then(Value::as_str).unwrap_or("")) {
        return r;
    }
    let Some(p) = st
        .posted
        .iter_mut()
        .find(|p| p.id == mid && p.channel_id == cid)
    else {
        return match st.injected.get(mid) {
            Some((c, _)) if c == cid => {
                err(403, "Cannot edit a message authored by another user", 50005)
            }
            _ => err(404, "Unknown Message", 10008),
        };
    };
    apply_edit(&mut p.message, body);
    p.edits += 1;
    let msg = p.message.clone();
    if st.echo_own {
        st.dispatch("MESSAGE_UPDATE", msg.clone());
    }
    ok(200, msg)
}

fn start_thread(st: &mut State, cid: &str, mid: &str, body: &Value) -> Reply {
    let Some(parent) = st.channels.get(cid).cloned() else {
        return err(404, "Unknown Channel", 10003);
    };
    let exists = st.posted.iter().any(|p| p.id == mid && p.channel_id == cid)
        || st.injected.get(mid).is_some_and(|(c, _)| c == cid);
    if !exists {
        return err(404, "Unknown Message", 10008);
    }
    if st.threads.contains(mid) {
        return err(
            400,
            "A thread has already been created for this message",
            160_004,
        );
    }
    let name = body
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let auto_archive = body
        .get("auto_archive_duration")
        .cloned()
        .unwrap_or(json!(1440));
    st.threads.insert(mid.to_string());
    st.channels.insert(
        mid.to_string(),
        Channel {
            kind: 11,
            guild_id: parent.guild_id.clone(),
            parent_id: Some(cid.to_string()),
            name: Some(name.clone()),
        },
    );
    let mut thread = json!({
        "id": mid, "type": 11, "parent_id": cid, "owner_id": BOT_ID, "name": name,
        "thread_metadata": {"archived": false, "auto_archive_duration": auto_archive,
                            "archive_timestamp": iso_now(), "locked": false},
        "message_count": 0, "member_count": 1, "rate_limit_per_user": 0, "flags": 0,
    });
    if let Some(g) = &parent.guild_id {
        thread["guild_id"] = json!(g);
    }
    if st.echo_own {
        let mut d = thread.clone();
        d["newly_created"] = json!(true);
        st.dispatch("THREAD_CREATE", d);
    }
    ok(201, thread)
}

fn callback(st: &mut State, iid: &str, token: &str, body: &Value) -> Reply {
    let Some(it) = st.interactions.get_mut(iid) else {
        return err(404, "Unknown interaction", 10062);
    };
    if it.token != token {
        return err(401, "Invalid Webhook Token", 50027);
    }
    let kind = body.get("type").and_then(Value::as_u64);
    if !matches!(kind, Some(1 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 12)) {
        return ok(
            400,
            json!({"message": "Invalid Form Body", "code": 50035,
                   "errors": {"type": {"_errors": [{"code": "BASE_TYPE_CHOICES", "message": "Value must be one of {1, 4, 5, 6, 7, 8, 9, 10, 12}."}]}}}),
        );
    }
    if it.acked {
        return err(400, "Interaction has already been acknowledged.", 40060);
    }
    it.acked = true;
    it.callbacks.push(body.clone());
    let (channel_id, message_id) = (it.channel_id.clone(), it.message_id.clone());
    let data = body.get("data").cloned().unwrap_or(Value::Null);
    match kind {
        // UPDATE_MESSAGE edits the message the component was on.
        Some(7) => {
            if let Some(mid) = message_id.as_deref()
                && let Some(p) = st.posted.iter_mut().find(|p| p.id == mid)
            {
                apply_edit(&mut p.message, &data);
                p.edits += 1;
            }
        }
        // CHANNEL_MESSAGE_WITH_SOURCE posts a message (unless ephemeral).
        Some(4) if data["flags"].as_u64().unwrap_or(0) & 64 == 0 => {
            let id = st.message_id();
            let content = data.get("content").and_then(Value::as_str).unwrap_or("");
            let components = data.get("components").cloned().unwrap_or(json!([]));
            let embeds = data.get("embeds").cloned().unwrap_or(json!([]));
            let mut msg = bot_message(&id, &channel_id, content, components, embeds);
            msg["type"] = json!(20);
            msg["interaction_metadata"] = json!({"id": iid, "type": 3});
            st.posted.push(Posted {
                id,
                channel_id,
                message: msg,
                edits: 0,
            });
        }
        _ => {}
    }
    no_content()
}
