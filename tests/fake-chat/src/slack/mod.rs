//! The fake Slack: Socket Mode over WebSocket plus the Web API methods a
//! bot adapter uses, on loopback.

mod payloads;
mod socket;
mod state;
mod web;

use crate::http::{Out, lock};
use crate::record::ApiCall;
use axum::Router;
use axum::routing::get;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

pub use payloads::slack_file;
pub(crate) use state::{SMsg, State};

/// The workspace (team) id in every payload.
pub const TEAM_ID: &str = "T111";
/// The app id (`api_app_id`, hello's `connection_info.app_id`).
pub const APP_ID: &str = "A111";
/// The bot's user id (`auth.test` `user_id`).
pub const BOT_USER_ID: &str = "UBOT";
/// The bot id (`auth.test` `bot_id`, `bot_id` of messages it posts).
pub const SLACK_BOT_ID: &str = "BBOT";

pub(crate) struct Shared {
    pub app_token: String,
    pub bot_token: String,
    pub addr: SocketAddr,
    pub state: Mutex<State>,
}

/// A fake Slack on `127.0.0.1`: the Web API under `/api/{method}`, Socket
/// Mode at `/link/?ticket=N`, private files at `/files-pri/{path}`, and
/// `response_url`s under `/hooks/`. Dropping it stops the server, the
/// retry timer, and every WebSocket.
pub struct FakeSlack {
    shared: Arc<Shared>,
    server: JoinHandle<()>,
    ticker: JoinHandle<()>,
}

impl Drop for FakeSlack {
    fn drop(&mut self) {
        self.server.abort();
        self.ticker.abort();
        let mut st = lock(&self.shared.state);
        for (_, tx) in st.conns.drain() {
            let _ = tx.send(Out::Drop);
        }
        st.newest = None;
    }
}

impl FakeSlack {
    /// Starts on `127.0.0.1:0`, accepting app-level token `app_token`
    /// (`xapp-…`, for `apps.connections.open`) and bot token `bot_token`
    /// (`xoxb-…`, everything else). Panics if it cannot bind.
    pub async fn start(app_token: &str, bot_token: &str) -> FakeSlack {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            app_token: app_token.to_string(),
            bot_token: bot_token.to_string(),
            addr,
            state: Mutex::new(State::new()),
        });
        let app = Router::new()
            .route("/link", get(socket::upgrade))
            .route("/link/", get(socket::upgrade))
            .route("/files-pri/{*path}", get(web::files))
            .fallback(web::handle)
            .with_state(shared.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let weak: Weak<Shared> = Arc::downgrade(&shared);
        let ticker = tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(50));
            loop {
                every.tick().await;
                let Some(shared) = weak.upgrade() else { break };
                lock(&shared.state).tick();
            }
        });
        FakeSlack {
            shared,
            server,
            ticker,
        }
    }

    fn st(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.shared.state)
    }

    /// `http://127.0.0.1:P/api` (methods are `{api_base}/{method}`).
    pub fn api_base(&self) -> String {
        format!("http://{}/api", self.shared.addr)
    }

    /// `http://127.0.0.1:P`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// Successful `apps.connections.open` calls (tickets issued).
    pub fn open_count(&self) -> u32 {
        self.st().open_count
    }

    /// Socket Mode connections accepted (valid, unused ticket).
    pub fn ws_connect_count(&self) -> u32 {
        self.st().ws_connects
    }

    /// WebSocket attempts refused (missing, unknown or reused ticket).
    pub fn ws_rejected_count(&self) -> u32 {
        self.st().ws_rejected
    }

    /// Whether a Socket Mode connection is up.
    pub fn connected(&self) -> bool {
        self.st().newest.is_some()
    }

    /// How long an envelope may stay unacked before it is re-sent with
    /// `retry_attempt + 1` and `retry_reason: "timeout"` (default 3 s).
    pub fn set_ack_timeout(&self, timeout: Duration) {
        self.st().ack_timeout = timeout;
    }

    /// How many times an unacked envelope is re-sent before the fake gives
    /// up on it (default 3).
    pub fn set_max_retries(&self, retries: u32) {
        self.st().max_retries = retries;
    }

    /// How long a trigger_id stays usable for `views.open` (default 3 s;
    /// later: `expired_trigger_id`).
    pub fn set_trigger_ttl(&self, ttl: Duration) {
        self.st().trigger_ttl = ttl;
    }

    /// Makes `channel` known (unknown channels get `channel_not_found`).
    /// Channels of injected events are known already.
    pub fn add_channel(&self, channel: &str) {
        self.st().channels.insert(channel.to_string());
    }

    /// Every ack received (`{"envelope_id", "payload"?}`), in order.
    pub fn acks(&self) -> Vec<Value> {
        self.st().acks.clone()
    }

    /// Whether envelope `envelope_id` has been acked.
    pub fn is_acked(&self, envelope_id: &str) -> bool {
        self.st()
            .envelopes
            .iter()
            .any(|e| e.id == envelope_id && e.acked)
    }

    /// How many times envelope `envelope_id` was re-sent after a timeout.
    pub fn retry_count(&self, envelope_id: &str) -> u32 {
        self.st()
            .envelopes
            .iter()
            .find(|e| e.id == envelope_id)
            .map_or(0, |e| e.attempt)
    }

    /// Every frame received over Socket Mode, in order (non-JSON as a string).
    pub fn ws_frames(&self) -> Vec<Value> {
        self.st().frames.clone()
    }

    /// Close frames the client sent: `(code, reason)`, in order.
    pub fn client_closes(&self) -> Vec<(u16, String)> {
        self.st().client_closes.clone()
    }

    /// Every envelope injected, as first built, in order.
    pub fn envelopes(&self) -> Vec<Value> {
        self.st()
            .envelopes
            .iter()
            .map(|e| e.frame.clone())
            .collect()
    }

    /// Injects an `events_api` envelope with a `message` event (fields as in
    /// channels-wire.md B2; `files` from [`slack_file`] if any); returns its ts.
    pub fn message(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
        channel_type: &str,
        files: Vec<Value>,
    ) -> String {
        let mut st = self.st();
        payloads::message(&mut st, channel, user, text, thread_ts, channel_type, files)
    }

    /// Injects an `app_mention` event with a fresh ts; returns the ts.
    pub fn app_mention(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
    ) -> String {
        let mut st = self.st();
        let ts = st.next_ts();
        payloads::app_mention(&mut st, channel, user, text, thread_ts, &ts);
        ts
    }

    /// Injects an `app_mention` for an existing message `ts` (the duplicate
    /// Slack sends next to the `message` event); returns its envelope id.
    pub fn app_mention_at(
        &self,
        channel: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
        ts: &str,
    ) -> String {
        payloads::app_mention(&mut self.st(), channel, user, text, thread_ts, ts)
    }

    /// Injects an `interactive` `block_actions` envelope: `user` clicked
    /// button `action_id` (`value`) on message `message_ts` in `channel`
    /// (its block_id and message taken from the bot's posted message when
    /// known); `trigger_id` becomes usable for `views.open`. Returns the
    /// envelope id.
    #[allow(clippy::too_many_arguments)]
    pub fn block_action(
        &self,
        channel: &str,
        message_ts: &str,
        thread_ts: Option<&str>,
        user: &str,
        action_id: &str,
        value: &str,
        trigger_id: &str,
    ) -> String {
        let addr = self.shared.addr;
        payloads::block_action(
            &mut self.st(),
            addr,
            channel,
            message_ts,
            thread_ts,
            user,
            action_id,
            value,
            trigger_id,
        )
    }

    /// Injects an `interactive` `view_submission` envelope for the modal
    /// `callback_id` (the latest `views.open` view with that callback_id,
    /// else a stub), with `state.values[block_id][action_id].value = value`.
    /// Returns the envelope id.
    pub fn view_submission(
        &self,
        callback_id: &str,
        private_metadata: &str,
        block_id: &str,
        action_id: &str,
        value: &str,
        user: &str,
    ) -> String {
        payloads::view_submission(
            &mut self.st(),
            callback_id,
            private_metadata,
            block_id,
            action_id,
            value,
            user,
        )
    }

    /// Injects a `slash_commands` envelope; `trigger_id` becomes usable for
    /// `views.open`. Returns the envelope id.
    pub fn slash_command(
        &self,
        channel: &str,
        user: &str,
        command: &str,
        text: &str,
        trigger_id: &str,
    ) -> String {
        let addr = self.shared.addr;
        payloads::slash_command(
            &mut self.st(),
            addr,
            channel,
            user,
            command,
            text,
            trigger_id,
        )
    }

    /// Injects any envelope of `kind` around `payload`; returns its id.
    pub fn inject(&self, kind: &str, payload: Value, accepts_response_payload: bool) -> String {
        self.st()
            .push_envelope(kind, payload, accepts_response_payload)
    }

    /// Sends `{"type": "disconnect", "reason", "debug_info": {"host": "fake"}}`
    /// on the newest connection (which stays open). False if none was up.
    pub fn disconnect(&self, reason: &str) -> bool {
        let frame = json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}});
        self.st().send_to_newest(Out::Text(frame.to_string()))
    }

    /// Ends the newest connection abruptly (no close frame). False if none was up.
    pub fn drop_connection(&self) -> bool {
        self.st().send_to_newest(Out::Drop)
    }

    /// Closes the newest connection with a close frame. False if none was up.
    pub fn close_with(&self, code: u16, reason: &str) -> bool {
        self.st()
            .send_to_newest(Out::Close(code, reason.to_string()))
    }

    /// Every Web API call (and `response_url` POST) so far.
    pub fn calls(&self) -> Vec<ApiCall> {
        self.st().calls.clone()
    }

    /// Polls (every 10 ms) until a call matching `pred` has been received,
    /// returning the first such; `None` after `timeout`.
    pub async fn wait_call(
        &self,
        pred: impl Fn(&ApiCall) -> bool,
        timeout: Duration,
    ) -> Option<ApiCall> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.st().calls.iter().find(|c| pred(c)).cloned();
            if found.is_some() {
                return found;
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The bot's messages in `channel`, in posting order, as they are now:
    /// `{"ts", "text", "thread_ts" (or null), "blocks", "edit_count"}`.
    pub fn messages_in(&self, channel: &str) -> Vec<Value> {
        self.st()
            .messages
            .iter()
            .filter(|m| m.bot && m.channel == channel)
            .map(|m| {
                json!({"ts": m.ts, "text": m.text, "thread_ts": m.thread_ts,
                       "blocks": m.blocks, "edit_count": m.edits})
            })
            .collect()
    }

    /// Views opened with `views.open`, as returned, in order.
    pub fn views(&self) -> Vec<Value> {
        self.st().views.clone()
    }

    /// Makes the next call of Web API `method` answer 429 with
    /// `Retry-After: retry_after_secs` and `{"ok": false, "error": "ratelimited"}`.
    pub fn rate_limit_next(&self, method: &str, retry_after_secs: u64) {
        self.st()
            .limits
            .push((method.to_string(), retry_after_secs));
    }

    /// When the latest 429 was sent.
    pub fn limited_at(&self) -> Option<Instant> {
        self.st().limited.last().map(|(_, at, _)| *at)
    }

    /// Every 429 sent: `(method, when, retry_after secs)`.
    pub fn limited(&self) -> Vec<(String, Instant, u64)> {
        self.st().limited.clone()
    }

    /// Serves `bytes` as `mimetype` at `/files-pri/{path}` to requests
    /// carrying `Authorization: Bearer <bot token>` (others get an HTML
    /// login page); returns the URL.
    pub fn add_file(&self, path: &str, bytes: &[u8], mimetype: &str) -> String {
        self.st()
            .files
            .insert(path.to_string(), (bytes.to_vec(), mimetype.to_string()));
        format!("http://{}/files-pri/{path}", self.shared.addr)
    }

    /// Every file download: `(path, whether it carried the bot token)`.
    pub fn file_fetches(&self) -> Vec<(String, bool)> {
        self.st().file_fetches.clone()
    }
}
