//! Socket Mode WebSocket (channels-wire.md B1-B3): single-use tickets,
//! `hello`, envelope delivery and acks.

use super::{APP_ID, Shared};
use crate::http::{In, Out, form_decode, json_response, lock, run_socket};
use axum::extract::ws::{WebSocket, WebSocketUpgrade};
use axum::extract::{RawQuery, State as AxState};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::sync::mpsc;

/// `GET /link/?ticket=N`: upgrades when `N` was issued by
/// `apps.connections.open` and not used yet; otherwise 401.
pub(crate) async fn upgrade(
    AxState(shared): AxState<Arc<Shared>>,
    RawQuery(query): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    let ticket = query
        .as_deref()
        .map(form_decode)
        .unwrap_or_default()
        .into_iter()
        .find(|(k, _)| k == "ticket")
        .and_then(|(_, v)| v.parse::<u64>().ok());
    {
        let mut st = lock(&shared.state);
        let valid = match ticket.and_then(|t| st.tickets.get(&t).copied().map(|used| (t, used))) {
            Some((t, false)) => {
                st.tickets.insert(t, true);
                true
            }
            _ => false,
        };
        if !valid {
            st.ws_rejected += 1;
            return json_response(401, &json!({"ok": false, "error": "invalid_ticket"}));
        }
    }
    ws.on_upgrade(move |socket| connection(socket, shared))
}

async fn connection(socket: WebSocket, shared: Arc<Shared>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let id = {
        let mut st = lock(&shared.state);
        st.next_conn += 1;
        st.ws_connects += 1;
        let id = st.next_conn;
        let hello = json!({
            "type": "hello", "num_connections": st.conns.len() + 1,
            "debug_info": {"host": "fake-slack", "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": APP_ID},
        });
        let _ = tx.send(Out::Text(hello.to_string()));
        st.conns.insert(id, tx);
        st.newest = Some(id);
        st.flush_pending();
        id
    };
    run_socket(socket, rx, move |input| on_input(&shared, id, input)).await;
}

fn on_input(shared: &Shared, id: u64, input: In<'_>) {
    let mut st = lock(&shared.state);
    match input {
        In::Text(text) => {
            let v: Value =
                serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()));
            st.frames.push(v.clone());
            if let Some(eid) = v.get("envelope_id").and_then(Value::as_str) {
                st.acks.push(v.clone());
                if let Some(e) = st.envelopes.iter_mut().find(|e| e.id == eid) {
                    e.acked = true;
                }
            }
        }
        In::ClientClose(code, reason) => st.client_closes.push((code, reason)),
        In::Gone => {
            st.conns.remove(&id);
            if st.newest == Some(id) {
                st.newest = st.conns.keys().max().copied();
            }
        }
    }
}
