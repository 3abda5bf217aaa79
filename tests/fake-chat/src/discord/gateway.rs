//! The gateway WebSocket: HELLO, heartbeats, IDENTIFY/READY, RESUME with
//! replay, and the close codes of channels-wire.md A3-A4.

use super::{BOT_ID, BOT_NAME, Conn, Session, Shared, State};
use crate::http::{In, Out, lock, run_socket, unix_micros};
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State as AxState};
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A non-dispatch frame: `{"op", "d", "s": null, "t": null}`.
pub(crate) fn frame(op: u8, d: Value) -> String {
    json!({"op": op, "d": d, "s": null, "t": null}).to_string()
}

/// `GET /gateway` (any query): upgrades to a gateway connection.
pub(crate) async fn upgrade(
    AxState(shared): AxState<Arc<Shared>>,
    RawQuery(query): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    ws.on_upgrade(move |socket| connection(socket, shared, query))
}

async fn connection(socket: WebSocket, shared: Arc<Shared>, query: Option<String>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let id = {
        let mut st = lock(&shared.state);
        st.next_conn += 1;
        st.connections += 1;
        let id = st.next_conn;
        st.queries.push(query);
        let hello = frame(10, json!({"heartbeat_interval": st.heartbeat_ms}));
        let _ = tx.send(Out::Text(hello));
        st.conns.insert(id, Conn { tx, session: None });
        st.newest = Some(id);
        id
    };
    let shared2 = shared.clone();
    run_socket(socket, rx, move |input| on_input(&shared2, id, input)).await;
}

fn on_input(shared: &Shared, id: u64, input: In<'_>) {
    let mut st = lock(&shared.state);
    match input {
        In::Text(text) => {
            let v: Value =
                serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
            st.frames.push(v.clone());
            if st.conns.contains_key(&id) {
                handle_frame(shared, &mut st, id, &v);
            }
        }
        In::ClientClose(code, reason) => {
            st.client_closes.push((code, reason));
            // Closing with 1000/1001 ends the session (A3); other codes keep it resumable.
            if code == 1000 || code == 1001 {
                let sid = st.conns.get(&id).and_then(|c| c.session.clone());
                if let Some(sid) = sid {
                    st.invalidate(&sid);
                }
            }
        }
        In::Gone => forget(&mut st, id),
    }
}

fn forget(st: &mut State, id: u64) {
    st.conns.remove(&id);
    if st.newest == Some(id) {
        st.newest = st.conns.keys().max().copied();
    }
}

fn send_to(st: &State, id: u64, text: String) {
    if let Some(c) = st.conns.get(&id) {
        let _ = c.tx.send(Out::Text(text));
    }
}

fn close(st: &mut State, id: u64, code: u16, reason: &str) {
    if let Some(c) = st.conns.get(&id) {
        let _ = c.tx.send(Out::Close(code, reason.to_string()));
    }
    forget(st, id);
}

fn handle_frame(shared: &Shared, st: &mut State, id: u64, v: &Value) {
    let Some(op) = v.get("op").and_then(Value::as_u64) else {
        close(st, id, 4002, "Error while decoding payload.");
        return;
    };
    let d = v.get("d").cloned().unwrap_or(Value::Null);
    let identified = st.conns.get(&id).is_some_and(|c| c.session.is_some());
    match op {
        1 => {
            if st.ack {
                send_to(st, id, frame(11, Value::Null));
            }
        }
        2 => identify(shared, st, id, &d),
        6 => resume(shared, st, id, &d),
        3 | 4 | 8 if identified => {} // presence, voice state, request members: ignored
        3 | 4 | 8 => close(st, id, 4003, "Not authenticated."),
        _ => close(st, id, 4001, "Unknown opcode."),
    }
}

fn identify(shared: &Shared, st: &mut State, id: u64, d: &Value) {
    st.identify_count += 1;
    st.intents
        .push(d.get("intents").cloned().unwrap_or(Value::Null));
    if d.get("token").and_then(Value::as_str) != Some(shared.token.as_str()) {
        close(st, id, 4004, "Authentication failed.");
        return;
    }
    if st.conns.get(&id).is_some_and(|c| c.session.is_some()) {
        close(st, id, 4005, "Already authenticated.");
        return;
    }
    st.next_session += 1;
    let sid = format!(
        "fake{:04}{:08x}",
        st.next_session,
        (unix_micros() & 0xffff_ffff) as u32
    );
    st.sessions.insert(
        sid.clone(),
        Session {
            seq: 0,
            log: Vec::new(),
        },
    );
    st.current_session = Some(sid.clone());
    if let Some(c) = st.conns.get_mut(&id) {
        c.session = Some(sid.clone());
    }
    let guild_ids: BTreeSet<String> = st
        .channels
        .values()
        .filter_map(|c| c.guild_id.clone())
        .collect();
    let guilds: Vec<Value> = guild_ids
        .into_iter()
        .map(|g| json!({"id": g, "unavailable": true}))
        .collect();
    let mut ready = json!({
        "v": 10,
        "user": {"id": BOT_ID, "username": BOT_NAME, "discriminator": "0",
                 "global_name": null, "bot": true, "avatar": null},
        "guilds": guilds,
        "session_id": sid,
        "resume_gateway_url": shared.ws_url(),
        "application": {"id": BOT_ID, "flags": 0},
    });
    if let Some(shard) = d.get("shard") {
        ready["shard"] = shard.clone();
    }
    st.dispatch("READY", ready);
    for (t, d) in std::mem::take(&mut st.pending) {
        st.dispatch(&t, d);
    }
}

fn resume(shared: &Shared, st: &mut State, id: u64, d: &Value) {
    st.resume_count += 1;
    if d.get("token").and_then(Value::as_str) != Some(shared.token.as_str()) {
        close(st, id, 4004, "Authentication failed.");
        return;
    }
    let sid = d
        .get("session_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let seq = d.get("seq").and_then(Value::as_u64).unwrap_or(0);
    let replay: Option<Vec<Value>> = st.sessions.get(&sid).and_then(|s| {
        (seq <= s.seq).then(|| {
            s.log
                .iter()
                .filter(|f| f["s"].as_u64().unwrap_or(0) > seq)
                .filter(|f| !matches!(f["t"].as_str(), Some("READY" | "RESUMED")))
                .cloned()
                .collect()
        })
    });
    let Some(replay) = replay else {
        send_to(st, id, frame(9, Value::Bool(false)));
        return;
    };
    if let Some(c) = st.conns.get_mut(&id) {
        c.session = Some(sid.clone());
    }
    st.current_session = Some(sid.clone());
    for f in replay {
        send_to(st, id, f.to_string());
    }
    // RESUMED is a dispatch too (it takes the next `s`), but never replayed.
    st.dispatch("RESUMED", json!({}));
}
