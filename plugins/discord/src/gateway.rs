//! The Discord gateway (v10, JSON): HELLO, heartbeats with zombie
//! detection, IDENTIFY/RESUME, dispatches, RECONNECT, INVALID_SESSION and
//! close codes, with backoff between reconnects.

use crate::util::{fraction, gateway_url, str_at};
use serde_json::{Value, json};
use turnstone_plugin_sdk::channel::{LinkState, Message, Socket, WsError, connect, set_state};
use turnstone_plugin_sdk::describe_denial;
use turnstone_plugin_sdk::host::{Level, log};

/// The first reconnect delay.
const BACKOFF_START_MS: u64 = 100;
/// The longest reconnect delay.
const BACKOFF_MAX_MS: u64 = 30_000;
/// How long a fresh connection may take to say HELLO.
const HELLO_TIMEOUT_MS: u64 = 20_000;
/// Used when HELLO names no interval.
const DEFAULT_HEARTBEAT_MS: u64 = 41_250;

/// What to do after the server closed the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseAction {
    /// Reconnect and RESUME the session.
    Resume,
    /// Reconnect with a new session (IDENTIFY).
    NewSession,
    /// Do not reconnect: the configuration is wrong (the message says how).
    Fatal(String),
}

/// Classifies a close code (`None`: no close frame, or a dropped connection).
pub fn classify_close(code: Option<u16>) -> CloseAction {
    let fatal = |why: &str| {
        CloseAction::Fatal(format!(
            "the Discord gateway closed the connection with code {}: {why}",
            code.unwrap_or_default()
        ))
    };
    match code {
        Some(4004) => fatal("authentication failed; check the bot token"),
        Some(4010) => fatal("invalid shard"),
        Some(4011) => fatal("sharding required; the bot is in too many guilds for one shard"),
        Some(4012) => fatal("invalid API version"),
        Some(4013) => fatal("invalid intents; check the intents setting"),
        Some(4014) => fatal(
            "disallowed intents; enable the privileged intents (Message Content) in the \
             Developer Portal or remove them from the intents setting",
        ),
        Some(4007 | 4009) => CloseAction::NewSession,
        _ => CloseAction::Resume,
    }
}

/// A heartbeat frame carrying the last sequence number.
pub fn heartbeat_frame(seq: Option<u64>) -> Value {
    json!({"op": 1, "d": seq})
}

/// An IDENTIFY frame (`token` is the secret reference, substituted by the host).
pub fn identify_frame(token: &str, intents: u64) -> Value {
    json!({"op": 2, "d": {
        "token": token,
        "intents": intents,
        "properties": {"os": "linux", "browser": "turnstone", "device": "turnstone"},
    }})
}

/// A RESUME frame.
pub fn resume_frame(token: &str, session_id: &str, seq: Option<u64>) -> Value {
    json!({"op": 6, "d": {"token": token, "session_id": session_id, "seq": seq}})
}

/// A dispatch the adapter acts on.
#[derive(Debug, Clone)]
pub enum Event {
    /// MESSAGE_CREATE's `d`.
    Message(Value),
    /// INTERACTION_CREATE's `d`.
    Interaction(Value),
}

struct Session {
    id: String,
    resume_url: String,
}

struct Heartbeat {
    interval: u64,
    next_at: u64,
    awaiting_ack: bool,
}

/// The gateway connection and its session.
pub struct Gateway {
    identify_url: String,
    token_ref: String,
    intents: u64,
    socket: Option<Socket>,
    session: Option<Session>,
    seq: Option<u64>,
    heartbeat: Option<Heartbeat>,
    hello_by: Option<u64>,
    reconnect_at: Option<u64>,
    backoff_ms: u64,
    failed_connects: u32,
    rng: u64,
    bot_id: String,
}

impl Gateway {
    /// A gateway that connects to `base_url` (from `/gateway/bot`) first thing.
    pub fn new(base_url: &str, token_ref: &str, intents: u64, now: u64) -> Self {
        Self {
            identify_url: gateway_url(base_url),
            token_ref: token_ref.to_string(),
            intents,
            socket: None,
            session: None,
            seq: None,
            heartbeat: None,
            hello_by: None,
            reconnect_at: Some(now),
            backoff_ms: BACKOFF_START_MS,
            failed_connects: 0,
            rng: now ^ 0x5DEE_CE66_D1CE_4E5B,
            bot_id: String::new(),
        }
    }

    /// The open socket, if any.
    pub fn socket(&self) -> Option<&Socket> {
        self.socket.as_ref()
    }

    /// The bot's user id (empty before READY).
    pub fn bot_id(&self) -> &str {
        &self.bot_id
    }

    /// When the gateway next needs attention (heartbeat, reconnect, HELLO timeout).
    pub fn next_deadline(&self) -> Option<u64> {
        [
            self.heartbeat.as_ref().map(|h| h.next_at),
            self.reconnect_at,
            self.hello_by,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// How long other work may block now without starving the gateway
    /// (at most `cap_ms`).
    pub fn slack_ms(&self, now: u64, cap_ms: u64) -> u64 {
        self.heartbeat
            .as_ref()
            .map_or(cap_ms, |h| h.next_at.saturating_sub(now).min(cap_ms))
    }

    /// Opens the connection when a (re)connect is due. `Err` only when the
    /// connection is not granted (fatal).
    pub fn connect_if_due(&mut self, now: u64) -> Result<(), String> {
        if self.socket.is_some() || self.reconnect_at.is_none_or(|t| t > now) {
            return Ok(());
        }
        self.reconnect_at = None;
        let (url, mode) = match &self.session {
            // A resume URL that keeps failing: resume through the main gateway.
            Some(s) if self.failed_connects < 3 => (gateway_url(&s.resume_url), "resume"),
            Some(_) => (self.identify_url.clone(), "resume"),
            None => (self.identify_url.clone(), "identify"),
        };
        log(
            Level::Info,
            &format!("connecting to the Discord gateway ({mode})"),
        );
        match connect(&url, &[]) {
            Ok(socket) => {
                self.socket = Some(socket);
                self.heartbeat = None;
                self.hello_by = Some(now + HELLO_TIMEOUT_MS);
                Ok(())
            }
            Err(WsError::Denied(e)) => Err(format!(
                "connecting to the Discord gateway was denied: {}",
                describe_denial(&e)
            )),
            Err(e) => {
                self.failed_connects += 1;
                self.lost(now, &format!("connecting to the gateway failed: {e:?}"));
                Ok(())
            }
        }
    }

    /// Sends heartbeats when due; closes a zombie connection (no ACK since
    /// the last heartbeat) or one that never said HELLO, and resumes.
    pub fn tick(&mut self, now: u64) -> Result<(), String> {
        if self.socket.is_none() {
            return Ok(());
        }
        if self.hello_by.is_some_and(|t| t <= now) {
            self.hello_by = None;
            self.drop_socket(4000, "no hello");
            self.lost(now, "the gateway sent no HELLO");
            return Ok(());
        }
        let Some(hb) = &mut self.heartbeat else {
            return Ok(());
        };
        if hb.next_at > now {
            return Ok(());
        }
        if hb.awaiting_ack {
            log(
                Level::Warn,
                "no heartbeat ACK from the Discord gateway; resuming",
            );
            self.drop_socket(4000, "zombie connection");
            self.set_reconnect(now, 0, "no heartbeat ACK; resuming");
            return Ok(());
        }
        hb.awaiting_ack = true;
        hb.next_at = now + hb.interval;
        self.send(&heartbeat_frame(self.seq), now)
    }

    /// Handles one socket message; returns the dispatch to act on, or
    /// `Err` when the link failed for good.
    pub fn on_message(&mut self, message: Message, now: u64) -> Result<Option<Event>, String> {
        let text = match message {
            Message::Text(t) => t,
            Message::Binary(_) => return Ok(None),
            Message::Close(frame) => {
                self.socket = None;
                self.heartbeat = None;
                self.hello_by = None;
                let (code, reason) =
                    frame.map_or((None, String::new()), |f| (Some(f.code), f.reason));
                return self.on_close(code, &reason, now).map(|()| None);
            }
        };
        let Ok(frame) = serde_json::from_str::<Value>(&text) else {
            log(
                Level::Warn,
                "the Discord gateway sent a frame that is not JSON",
            );
            return Ok(None);
        };
        let d = frame.get("d").cloned().unwrap_or(Value::Null);
        match frame.get("op").and_then(Value::as_u64) {
            Some(10) => {
                let interval = d
                    .get("heartbeat_interval")
                    .and_then(Value::as_u64)
                    .filter(|i| *i > 0)
                    .unwrap_or(DEFAULT_HEARTBEAT_MS);
                let first = (interval as f64 * fraction(&mut self.rng)) as u64;
                self.hello_by = None;
                self.heartbeat = Some(Heartbeat {
                    interval,
                    next_at: now + first,
                    awaiting_ack: false,
                });
                let hello = match &self.session {
                    Some(s) => resume_frame(&self.token_ref, &s.id, self.seq),
                    None => identify_frame(&self.token_ref, self.intents),
                };
                self.send(&hello, now)?;
            }
            Some(11) => {
                if let Some(hb) = &mut self.heartbeat {
                    hb.awaiting_ack = false;
                }
            }
            Some(1) => {
                if let Some(hb) = &mut self.heartbeat {
                    hb.awaiting_ack = true;
                }
                self.send(&heartbeat_frame(self.seq), now)?;
            }
            Some(0) => {
                if let Some(s) = frame.get("s").and_then(Value::as_u64) {
                    self.seq = Some(s);
                }
                return Ok(self.on_dispatch(str_at(&frame, "t").unwrap_or(""), d));
            }
            Some(7) => {
                log(
                    Level::Info,
                    "the Discord gateway asked to reconnect; resuming",
                );
                self.drop_socket(4000, "reconnect requested");
                self.set_reconnect(now, 0, "reconnect requested by Discord");
            }
            Some(9) => {
                self.drop_socket(4000, "invalid session");
                if d.as_bool() == Some(true) {
                    log(Level::Info, "Discord invalidated the connection; resuming");
                    self.set_reconnect(now, 0, "session invalidated; resuming");
                } else {
                    log(
                        Level::Warn,
                        "Discord invalidated the session; identifying again",
                    );
                    self.session = None;
                    self.seq = None;
                    let delay = 1000 + (fraction(&mut self.rng) * 4000.0) as u64;
                    self.set_reconnect(now, delay, "session invalidated; starting a new one");
                }
            }
            _ => {}
        }
        Ok(None)
    }

    fn on_dispatch(&mut self, t: &str, d: Value) -> Option<Event> {
        match t {
            "READY" => {
                let user = d.get("user").unwrap_or(&Value::Null);
                self.bot_id = str_at(user, "id").unwrap_or("").to_string();
                let name = str_at(user, "username").unwrap_or("the bot").to_string();
                self.session = Some(Session {
                    id: str_at(&d, "session_id").unwrap_or("").to_string(),
                    resume_url: str_at(&d, "resume_gateway_url")
                        .map_or_else(|| self.identify_url.clone(), str::to_string),
                });
                self.connected(&format!("ready as {name}"));
                None
            }
            "RESUMED" => {
                self.connected("resumed");
                None
            }
            "MESSAGE_CREATE" => Some(Event::Message(d)),
            "INTERACTION_CREATE" => Some(Event::Interaction(d)),
            _ => None,
        }
    }

    fn connected(&mut self, detail: &str) {
        self.backoff_ms = BACKOFF_START_MS;
        self.failed_connects = 0;
        log(Level::Info, &format!("Discord gateway {detail}"));
        set_state(LinkState::Connected, detail);
    }

    fn on_close(&mut self, code: Option<u16>, reason: &str, now: u64) -> Result<(), String> {
        let what = match code {
            Some(c) if reason.is_empty() => format!("the gateway closed the connection ({c})"),
            Some(c) => format!("the gateway closed the connection ({c}: {reason})"),
            None => "the gateway connection dropped".to_string(),
        };
        match classify_close(code) {
            CloseAction::Fatal(message) => {
                log(Level::Error, &message);
                Err(message)
            }
            CloseAction::NewSession => {
                self.session = None;
                self.seq = None;
                self.lost(now, &format!("{what}; starting a new session"));
                Ok(())
            }
            CloseAction::Resume => {
                self.lost(now, &what);
                Ok(())
            }
        }
    }

    /// Sends a frame; a failed send counts as a lost connection, a denied
    /// one (the token's `ws-frame` grant is missing) is fatal.
    fn send(&mut self, frame: &Value, now: u64) -> Result<(), String> {
        let Some(socket) = &self.socket else {
            return Ok(());
        };
        match socket.send_text(&frame.to_string()) {
            Ok(()) => Ok(()),
            Err(WsError::Denied(e)) => Err(format!(
                "sending to the Discord gateway was denied: {}",
                describe_denial(&e)
            )),
            Err(e) => {
                self.drop_socket(4000, "send failed");
                self.lost(now, &format!("sending to the gateway failed: {e:?}"));
                Ok(())
            }
        }
    }

    fn drop_socket(&mut self, code: u16, reason: &str) {
        if let Some(socket) = self.socket.take() {
            socket.close(code, reason);
        }
        self.heartbeat = None;
        self.hello_by = None;
    }

    /// Schedules a reconnect after the current backoff, then doubles it.
    fn lost(&mut self, now: u64, why: &str) {
        log(
            Level::Warn,
            &format!("Discord: {why}; reconnecting in {} ms", self.backoff_ms),
        );
        let delay = self.backoff_ms;
        self.backoff_ms = (self.backoff_ms * 2).min(BACKOFF_MAX_MS);
        self.set_reconnect(now, delay, why);
    }

    fn set_reconnect(&mut self, now: u64, delay: u64, why: &str) {
        self.reconnect_at = Some(now + delay);
        set_state(LinkState::Reconnecting, why);
    }

    /// Closes the connection with 1000 (the adapter is stopping).
    pub fn shutdown(&mut self) {
        self.drop_socket(1000, "shutting down");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes() {
        assert_eq!(classify_close(None), CloseAction::Resume);
        assert_eq!(classify_close(Some(1000)), CloseAction::Resume);
        assert_eq!(classify_close(Some(4000)), CloseAction::Resume);
        assert_eq!(classify_close(Some(4008)), CloseAction::Resume);
        assert_eq!(classify_close(Some(4007)), CloseAction::NewSession);
        assert_eq!(classify_close(Some(4009)), CloseAction::NewSession);
        for code in [4004, 4010, 4011, 4012, 4013, 4014] {
            let CloseAction::Fatal(m) = classify_close(Some(code)) else {
                panic!("{code} should be fatal");
            };
            assert!(m.contains(&code.to_string()), "{m}");
        }
    }

    #[test]
    fn frames() {
        assert_eq!(heartbeat_frame(None), json!({"op": 1, "d": null}));
        assert_eq!(heartbeat_frame(Some(7))["d"], 7);
        let id = identify_frame("REF", 37377);
        assert_eq!(id["op"], 2);
        assert_eq!(id["d"]["token"], "REF");
        assert_eq!(id["d"]["intents"], 37377);
        assert_eq!(id["d"]["properties"]["browser"], "turnstone");
        let r = resume_frame("REF", "s1", Some(9));
        assert_eq!(
            r,
            json!({"op": 6, "d": {"token": "REF", "session_id": "s1", "seq": 9}})
        );
    }
}
