//! The fake Discord: gateway v10 over WebSocket plus the REST routes a bot
//! adapter uses, on loopback.

mod gateway;
mod payloads;
mod rest;

pub use payloads::MessageSpec;

use crate::http::{Out, lock};
use crate::record::RestCall;
use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The fake bot's user id (READY `user.id`, `author.id` of messages it posts).
pub const BOT_ID: &str = "1100000000000000001";
/// The fake bot's username.
pub const BOT_NAME: &str = "turnstone-bot";

/// A channel the fake knows (posting to an unknown one is 404, code 10003).
#[derive(Debug, Clone)]
pub(crate) struct Channel {
    pub kind: u8,
    pub guild_id: Option<String>,
    pub parent_id: Option<String>,
    pub name: Option<String>,
}

/// A live gateway connection.
pub(crate) struct Conn {
    pub tx: mpsc::UnboundedSender<Out>,
    /// The session it identified or resumed, once it has.
    pub session: Option<String>,
}

/// A gateway session and its dispatch log (full frames, rising `s`).
pub(crate) struct Session {
    pub seq: u64,
    pub log: Vec<Value>,
}

/// A message the bot posted (or an interaction response created).
pub(crate) struct Posted {
    pub id: String,
    pub channel_id: String,
    pub message: Value,
    pub edits: u32,
}

/// An injected interaction.
pub(crate) struct Interaction {
    pub token: String,
    pub channel_id: String,
    pub message_id: Option<String>,
    pub acked: bool,
    pub callbacks: Vec<Value>,
}

/// A 429 armed by `rate_limit_next`.
pub(crate) struct Limit {
    pub prefix: String,
    pub retry_after: f64,
}

pub(crate) struct State {
    pub heartbeat_ms: u64,
    pub ack: bool,
    pub echo_own: bool,
    pub conns: HashMap<u64, Conn>,
    pub newest: Option<u64>,
    pub next_conn: u64,
    pub connections: u32,
    pub sessions: HashMap<String, Session>,
    pub current_session: Option<String>,
    pub next_session: u64,
    /// Dispatches injected before any session existed: sent after the next READY.
    pub pending: Vec<(String, Value)>,
    pub identify_count: u32,
    pub resume_count: u32,
    pub frames: Vec<Value>,
    pub client_closes: Vec<(u16, String)>,
    pub queries: Vec<Option<String>>,
    pub intents: Vec<Value>,
    pub rest: Vec<RestCall>,
    pub limits: Vec<Limit>,
    pub limited: Vec<(String, Instant, f64)>,
    pub next_message: u64,
    pub next_interaction: u64,
    pub next_attachment: u64,
    pub channels: HashMap<String, Channel>,
    pub posted: Vec<Posted>,
    /// Injected (user) message id → its channel and JSON.
    pub injected: HashMap<String, (String, Value)>,
    pub threads: HashSet<String>,
    pub interactions: HashMap<String, Interaction>,
    pub usernames: HashMap<String, String>,
    pub files: HashMap<String, (Vec<u8>, String)>,
    pub cdn_fetches: Vec<String>,
}

impl State {
    fn new() -> Self {
        Self {
            heartbeat_ms: 1000,
            ack: true,
            echo_own: false,
            conns: HashMap::new(),
            newest: None,
            next_conn: 0,
            connections: 0,
            sessions: HashMap::new(),
            current_session: None,
            next_session: 0,
            pending: Vec::new(),
            identify_count: 0,
            resume_count: 0,
            frames: Vec::new(),
            client_closes: Vec::new(),
            queries: Vec::new(),
            intents: Vec::new(),
            rest: Vec::new(),
            limits: Vec::new(),
            limited: Vec::new(),
            next_message: 1_300_000_000_000_000_100,
            next_interaction: 1_500_000_000_000_000_000,
            next_attachment: 1_400_000_000_000_000_000,
            channels: HashMap::new(),
            posted: Vec::new(),
            injected: HashMap::new(),
            threads: HashSet::new(),
            interactions: HashMap::new(),
            usernames: HashMap::new(),
            files: HashMap::new(),
            cdn_fetches: Vec::new(),
        }
    }

    pub(crate) fn message_id(&mut self) -> String {
        self.next_message += 1;
        (self.next_message - 1).to_string()
    }

    /// Logs a dispatch in the current session and sends it to the newest
    /// connection bound to that session; before any session, queues it for
    /// after the next READY.
    pub(crate) fn dispatch(&mut self, t: &str, d: Value) {
        let Some(sid) = self.current_session.clone() else {
            self.pending.push((t.to_string(), d));
            return;
        };
        let Some(session) = self.sessions.get_mut(&sid) else {
            self.pending.push((t.to_string(), d));
            return;
        };
        session.seq += 1;
        let frame = json!({"op": 0, "s": session.seq, "t": t, "d": d});
        session.log.push(frame.clone());
        if let Some(conn) = self.conn_for_session(&sid) {
            let _ = conn.tx.send(Out::Text(frame.to_string()));
        }
    }

    fn conn_for_session(&self, sid: &str) -> Option<&Conn> {
        self.conns
            .iter()
            .filter(|(_, c)| c.session.as_deref() == Some(sid))
            .max_by_key(|(id, _)| **id)
            .map(|(_, c)| c)
    }

    /// Forgets a session: a RESUME of it gets op 9 `false` from now on.
    pub(crate) fn invalidate(&mut self, sid: &str) {
        self.sessions.remove(sid);
        if self.current_session.as_deref() == Some(sid) {
            self.current_session = None;
        }
    }

    /// Registers a channel unless known.
    pub(crate) fn know_channel(&mut self, id: &str, kind: u8, guild_id: Option<&str>) {
        self.channels
            .entry(id.to_string())
            .or_insert_with(|| Channel {
                kind,
                guild_id: guild_id.map(str::to_string),
                parent_id: None,
                name: None,
            });
    }

    /// Sends `out` to the newest connection and, for a close or drop,
    /// forgets that connection at once. False when none is connected.
    fn send_to_newest(&mut self, out: Out) -> bool {
        let Some(id) = self.newest else { return false };
        let hang_up = matches!(out, Out::Close(..) | Out::Drop);
        let sent = self.conns.get(&id).is_some_and(|c| c.tx.send(out).is_ok());
        if hang_up {
            self.conns.remove(&id);
            self.newest = self.conns.keys().max().copied();
        }
        sent
    }
}

pub(crate) struct Shared {
    pub token: String,
    pub addr: SocketAddr,
    pub state: Mutex<State>,
}

impl Shared {
    pub(crate) fn ws_url(&self) -> String {
        format!("ws://{}/gateway", self.addr)
    }
}

/// A fake Discord on `127.0.0.1`: the gateway at `/gateway` (also `/` and
/// `/gateway/`), REST under `/api/v10`, a CDN at `/cdn/{name}`. Dropping it
/// stops the server and hangs up every gateway connection.
pub struct FakeDiscord {
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl Drop for FakeDiscord {
    fn drop(&mut self) {
        self.server.abort();
        let mut st = lock(&self.shared.state);
        for (_, c) in st.conns.drain() {
            let _ = c.tx.send(Out::Drop);
        }
        st.newest = None;
    }
}

impl FakeDiscord {
    /// Starts on `127.0.0.1:0`, accepting bot token `token` (without the
    /// `Bot ` prefix). Panics if it cannot bind.
    pub async fn start(token: &str) -> FakeDiscord {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            token: token.to_string(),
            addr,
            state: Mutex::new(State::new()),
        });
        let app = Router::new()
            .route("/", get(gateway::upgrade))
            .route("/gateway", get(gateway::upgrade))
            .route("/gateway/", get(gateway::upgrade))
            .route("/cdn/{*name}", get(rest::cdn))
            .fallback(rest::handle)
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeDiscord { shared, server }
    }

    fn st(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.shared.state)
    }

    /// `http://127.0.0.1:P/api/v10`.
    pub fn api_base(&self) -> String {
        format!("http://{}/api/v10", self.shared.addr)
    }

    /// `ws://127.0.0.1:P/gateway` (what `/gateway/bot` and READY's
    /// `resume_gateway_url` return).
    pub fn gateway_url(&self) -> String {
        self.shared.ws_url()
    }

    /// `http://127.0.0.1:P/cdn/{name}`.
    pub fn cdn_url(&self, name: &str) -> String {
        format!("http://{}/cdn/{name}", self.shared.addr)
    }

    /// Serves `bytes` at [`cdn_url(name)`](Self::cdn_url) with `content_type`
    /// (no auth, like Discord's CDN); returns that URL.
    pub fn add_file(&self, name: &str, bytes: &[u8], content_type: &str) -> String {
        self.st()
            .files
            .insert(name.to_string(), (bytes.to_vec(), content_type.to_string()));
        self.cdn_url(name)
    }

    /// Names fetched from the CDN so far, in order (unknown names included).
    pub fn cdn_fetches(&self) -> Vec<String> {
        self.st().cdn_fetches.clone()
    }

    /// Makes `channel_id` known to REST (type 0 guild text, 1 DM, 11 thread).
    /// Channels seen in injected messages and interactions, and threads
    /// created through REST, are known already.
    pub fn add_channel(&self, channel_id: &str, channel_type: u8, guild_id: Option<&str>) {
        self.st().know_channel(channel_id, channel_type, guild_id);
    }

    /// Makes `thread_id` a known public thread (type 11) of `parent_id`, so
    /// `GET /channels/{thread_id}` reports its `parent_id`.
    pub fn add_thread(&self, thread_id: &str, parent_id: &str, guild_id: &str) {
        self.st().channels.insert(
            thread_id.to_string(),
            Channel {
                kind: 11,
                guild_id: Some(guild_id.to_string()),
                parent_id: Some(parent_id.to_string()),
                name: None,
            },
        );
    }

    /// The `heartbeat_interval` sent in later HELLOs (default 1000 ms).
    pub fn set_heartbeat_interval(&self, ms: u64) {
        self.st().heartbeat_ms = ms;
    }

    /// Whether op 1 heartbeats get op 11 ACKs (default true). Off, the
    /// client should see a zombie connection and reconnect.
    pub fn set_ack(&self, ack: bool) {
        self.st().ack = ack;
    }

    /// Whether messages the bot posts through REST come back as
    /// MESSAGE_CREATE dispatches, as on real Discord (default false).
    pub fn set_echo_own_messages(&self, echo: bool) {
        self.st().echo_own = echo;
    }

    /// IDENTIFYs received (valid or not).
    pub fn identify_count(&self) -> u32 {
        self.st().identify_count
    }

    /// RESUMEs received (successful or not).
    pub fn resume_count(&self) -> u32 {
        self.st().resume_count
    }

    /// Gateway WebSocket connections accepted so far.
    pub fn connection_count(&self) -> u32 {
        self.st().connections
    }

    /// Whether a gateway connection is up.
    pub fn connected(&self) -> bool {
        self.st().newest.is_some()
    }

    /// Every gateway frame received, in order (non-JSON text as a string).
    pub fn gateway_frames(&self) -> Vec<Value> {
        self.st().frames.clone()
    }

    /// Close frames the client sent: `(code, reason)`, in order (1005 when
    /// the frame carried no code). A zombie reconnect should close with a
    /// code other than 1000/1001.
    pub fn client_closes(&self) -> Vec<(u16, String)> {
        self.st().client_closes.clone()
    }

    /// The query string of each gateway connection, in order
    /// (`Some("v=10&encoding=json")`).
    pub fn gateway_queries(&self) -> Vec<Option<String>> {
        self.st().queries.clone()
    }

    /// The `intents` of each IDENTIFY, in order.
    pub fn identify_intents(&self) -> Vec<Value> {
        self.st().intents.clone()
    }

    /// The current session id (from the latest successful IDENTIFY or RESUME).
    pub fn session_id(&self) -> Option<String> {
        self.st().current_session.clone()
    }

    /// The current session's dispatch log (full frames, rising `s`).
    pub fn dispatch_log(&self) -> Vec<Value> {
        let st = self.st();
        st.current_session
            .as_ref()
            .and_then(|s| st.sessions.get(s))
            .map(|s| s.log.clone())
            .unwrap_or_default()
    }

    /// Injects MESSAGE_CREATE (payload as in channels-wire.md A5); returns
    /// the message id. Sent to the connection of the current session, or
    /// only logged for a RESUME to replay when that connection is down;
    /// before any IDENTIFY it is held until the next READY.
    pub fn message_create(&self, spec: MessageSpec) -> String {
        let mut st = self.st();
        let id = st.message_id();
        let d = payloads::message_create(&mut st, &id, &spec);
        st.injected
            .insert(id.clone(), (spec.channel_id.clone(), d.clone()));
        st.dispatch("MESSAGE_CREATE", d);
        id
    }

    /// Injects INTERACTION_CREATE type 3 (a button click on `message_id`,
    /// channels-wire.md A8); returns `(interaction_id, token)`.
    pub fn interaction_button(
        &self,
        channel_id: &str,
        guild_id: Option<&str>,
        message_id: &str,
        user_id: &str,
        custom_id: &str,
    ) -> (String, String) {
        let mut st = self.st();
        let data = json!({"custom_id": custom_id, "component_type": 2});
        payloads::interaction(
            &mut st,
            3,
            channel_id,
            guild_id,
            Some(message_id),
            user_id,
            data,
        )
    }

    /// Injects INTERACTION_CREATE type 5 (a modal submit: one label (18)
    /// wrapping text input `field_custom_id` with `value`; `message` is
    /// present when `message_id` is given); returns `(interaction_id, token)`.
    #[allow(clippy::too_many_arguments)]
    pub fn interaction_modal_submit(
        &self,
        channel_id: &str,
        guild_id: Option<&str>,
        message_id: Option<&str>,
        user_id: &str,
        custom_id: &str,
        field_custom_id: &str,
        value: &str,
    ) -> (String, String) {
        let mut st = self.st();
        let data = json!({"custom_id": custom_id, "components": [{"type": 18, "id": 1,
            "component": {"type": 4, "id": 2, "custom_id": field_custom_id, "value": value}}]});
        payloads::interaction(&mut st, 5, channel_id, guild_id, message_id, user_id, data)
    }

    /// Injects any dispatch `t` with data `d` (logged and sequenced like the others).
    pub fn dispatch(&self, t: &str, d: Value) {
        self.st().dispatch(t, d);
    }

    /// The callback bodies posted for interaction `interaction_id`, in order.
    pub fn interaction_callbacks(&self, interaction_id: &str) -> Vec<Value> {
        self.st()
            .interactions
            .get(interaction_id)
            .map(|i| i.callbacks.clone())
            .unwrap_or_default()
    }

    /// Ends the newest gateway connection abruptly: TCP closes, no close
    /// frame. The session stays resumable. False if none was up.
    pub fn drop_connection(&self) -> bool {
        self.st().send_to_newest(Out::Drop)
    }

    /// Closes the newest gateway connection with `code` and `reason`
    /// (4000: resume expected; 4004/4014: no reconnect expected). The
    /// session stays resumable. False if none was up.
    pub fn close_with(&self, code: u16, reason: &str) -> bool {
        self.st()
            .send_to_newest(Out::Close(code, reason.to_string()))
    }

    /// Sends op 7 RECONNECT on the newest connection (which stays open
    /// until the client closes it). False if none was up.
    pub fn send_reconnect(&self) -> bool {
        self.st()
            .send_to_newest(Out::Text(gateway::frame(7, Value::Null)))
    }

    /// Sends op 9 INVALID SESSION with `d: resumable`; when not resumable,
    /// the connection's session is forgotten (a RESUME of it gets op 9
    /// `false`). False if none was up.
    pub fn send_invalid_session(&self, resumable: bool) -> bool {
        let mut st = self.st();
        if !resumable {
            let sid = st
                .newest
                .and_then(|id| st.conns.get(&id))
                .and_then(|c| c.session.clone());
            if let Some(sid) = sid {
                st.invalidate(&sid);
            }
        }
        st.send_to_newest(Out::Text(gateway::frame(9, Value::Bool(resumable))))
    }

    /// Sends op 1 (the server asking for an immediate heartbeat).
    pub fn request_heartbeat(&self) -> bool {
        let mut st = self.st();
        let s = st
            .current_session
            .as_ref()
            .and_then(|s| st.sessions.get(s))
            .map(|s| s.seq);
        st.send_to_newest(Out::Text(gateway::frame(1, json!(s))))
    }

    /// Every REST request so far (auth failures and 429s included).
    pub fn rest_calls(&self) -> Vec<RestCall> {
        self.st().rest.clone()
    }

    /// Polls (every 10 ms) until a REST request matching `pred` has been
    /// received, returning the first such; `None` after `timeout`.
    pub async fn wait_rest(
        &self,
        pred: impl Fn(&RestCall) -> bool,
        timeout: Duration,
    ) -> Option<RestCall> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.st().rest.iter().find(|c| pred(c)).cloned();
            if found.is_some() {
                return found;
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The current state of each message the bot posted in `channel_id`
    /// (REST, or an interaction callback of type 4), in posting order; each
    /// carries an extra `"edit_count"` (PATCHes and type 7 callbacks applied).
    pub fn messages_in(&self, channel_id: &str) -> Vec<Value> {
        self.st()
            .posted
            .iter()
            .filter(|p| p.channel_id == channel_id)
            .map(|p| {
                let mut m = p.message.clone();
                m["edit_count"] = json!(p.edits);
                m
            })
            .collect()
    }

    /// Makes the next REST request whose `"METHOD /path"` starts with
    /// `route_prefix` answer 429 (Discord's headers and body, `retry_after`
    /// = `retry_after_secs`). The path is relative to `/api/v10`
    /// (`"POST /channels/1200/messages"`); the full path matches too.
    pub fn rate_limit_next(&self, route_prefix: &str, retry_after_secs: f64) {
        self.st().limits.push(Limit {
            prefix: route_prefix.to_string(),
            retry_after: retry_after_secs,
        });
    }

    /// When the latest 429 was sent.
    pub fn limited_at(&self) -> Option<Instant> {
        self.st().limited.last().map(|(_, at, _)| *at)
    }

    /// Every 429 sent: `("METHOD /path", when, retry_after secs)`.
    pub fn limited(&self) -> Vec<(String, Instant, f64)> {
        self.st().limited.clone()
    }
}
