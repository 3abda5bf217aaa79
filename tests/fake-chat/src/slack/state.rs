//! The fake Slack's state: connections, envelopes awaiting acks,
//! messages, triggers, files and the call record.

use crate::http::{Out, unix_micros};
use crate::record::ApiCall;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// One envelope pushed (or to be pushed) over Socket Mode.
pub(crate) struct Env {
    pub id: String,
    /// The frame as first built (`retry_attempt` 0 for events_api).
    pub frame: Value,
    /// Deliveries after the first.
    pub attempt: u32,
    /// When last written to a connection; `None` while waiting for one.
    pub sent_at: Option<Instant>,
    pub acked: bool,
    pub given_up: bool,
}

/// A message in a channel: injected (user) or posted by the bot.
pub(crate) struct SMsg {
    pub channel: String,
    pub ts: String,
    pub text: String,
    pub thread_ts: Option<String>,
    pub blocks: Value,
    pub user: String,
    pub bot: bool,
    pub edits: u32,
}

pub(crate) struct State {
    pub conns: HashMap<u64, mpsc::UnboundedSender<Out>>,
    pub newest: Option<u64>,
    pub next_conn: u64,
    pub ws_connects: u32,
    pub ws_rejected: u32,
    pub tickets: HashMap<u64, bool>,
    pub next_ticket: u64,
    pub open_count: u32,
    pub envelopes: Vec<Env>,
    pub next_envelope: u64,
    pub next_event: u64,
    pub acks: Vec<Value>,
    pub frames: Vec<Value>,
    pub client_closes: Vec<(u16, String)>,
    pub ack_timeout: Duration,
    pub max_retries: u32,
    pub calls: Vec<ApiCall>,
    pub limits: Vec<(String, u64)>,
    pub limited: Vec<(String, Instant, u64)>,
    pub last_ts: u128,
    pub channels: HashSet<String>,
    pub messages: Vec<SMsg>,
    /// trigger_id → (issued at, used).
    pub triggers: HashMap<String, (Instant, bool)>,
    pub trigger_ttl: Duration,
    pub next_trigger: u64,
    pub views: Vec<Value>,
    pub next_view: u64,
    pub files: HashMap<String, (Vec<u8>, String)>,
    pub file_fetches: Vec<(String, bool)>,
}

impl State {
    pub(crate) fn new() -> Self {
        Self {
            conns: HashMap::new(),
            newest: None,
            next_conn: 0,
            ws_connects: 0,
            ws_rejected: 0,
            tickets: HashMap::new(),
            next_ticket: 1000,
            open_count: 0,
            envelopes: Vec::new(),
            next_envelope: 0,
            next_event: 0,
            acks: Vec::new(),
            frames: Vec::new(),
            client_closes: Vec::new(),
            ack_timeout: Duration::from_secs(3),
            max_retries: 3,
            calls: Vec::new(),
            limits: Vec::new(),
            limited: Vec::new(),
            last_ts: 0,
            channels: HashSet::new(),
            messages: Vec::new(),
            triggers: HashMap::new(),
            trigger_ttl: Duration::from_secs(3),
            next_trigger: 0,
            views: Vec::new(),
            next_view: 0,
            files: HashMap::new(),
            file_fetches: Vec::new(),
        }
    }

    /// A fresh message ts, `<secs>.<6 digits>`, strictly increasing.
    pub(crate) fn next_ts(&mut self) -> String {
        let m = unix_micros().max(self.last_ts + 1);
        self.last_ts = m;
        format!("{}.{:06}", m / 1_000_000, m % 1_000_000)
    }

    /// A fresh UUID-shaped envelope id.
    fn envelope_id(&mut self) -> String {
        self.next_envelope += 1;
        let n = self.next_envelope;
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            0xfa4e_0000u32 | (n as u32 & 0xffff),
            (n >> 16) & 0xffff,
            n & 0xfff,
            (n >> 12) & 0xfff,
            n
        )
    }

    /// A fresh trigger id, registered as unused.
    pub(crate) fn trigger(&mut self) -> String {
        self.next_trigger += 1;
        let t = format!(
            "{}.{}.fake{:04x}",
            1_000_000 + self.next_trigger,
            333_649_436_676u64,
            self.next_trigger
        );
        self.triggers.insert(t.clone(), (Instant::now(), false));
        t
    }

    /// Builds an envelope of `kind` around `payload`, queues it and sends it
    /// to the newest connection if one is up; returns its id.
    pub(crate) fn push_envelope(
        &mut self,
        kind: &str,
        payload: Value,
        accepts_response: bool,
    ) -> String {
        let id = self.envelope_id();
        let mut frame = json!({"envelope_id": id, "type": kind, "accepts_response_payload": accepts_response,
                               "payload": payload});
        if kind == "events_api" {
            frame["retry_attempt"] = json!(0);
            frame["retry_reason"] = json!("");
        }
        self.envelopes.push(Env {
            id: id.clone(),
            frame,
            attempt: 0,
            sent_at: None,
            acked: false,
            given_up: false,
        });
        self.deliver(self.envelopes.len() - 1);
        id
    }

    /// Writes envelope `idx` to the newest connection (with its retry
    /// fields), or leaves it waiting for the next one.
    fn deliver(&mut self, idx: usize) {
        let tx = self.newest.and_then(|id| self.conns.get(&id)).cloned();
        let env = &mut self.envelopes[idx];
        let mut frame = env.frame.clone();
        if env.attempt > 0 {
            frame["retry_attempt"] = json!(env.attempt);
            frame["retry_reason"] = json!("timeout");
        }
        env.sent_at = match tx {
            Some(tx) if tx.send(Out::Text(frame.to_string())).is_ok() => Some(Instant::now()),
            _ => None,
        };
    }

    /// Delivers every envelope waiting for a connection, in order.
    pub(crate) fn flush_pending(&mut self) {
        for i in 0..self.envelopes.len() {
            let e = &self.envelopes[i];
            if !e.acked && !e.given_up && e.sent_at.is_none() {
                self.deliver(i);
            }
        }
    }

    /// Re-sends envelopes unacked for longer than `ack_timeout`.
    pub(crate) fn tick(&mut self) {
        let timeout = self.ack_timeout;
        for i in 0..self.envelopes.len() {
            let e = &mut self.envelopes[i];
            let due = !e.acked && !e.given_up && e.sent_at.is_some_and(|t| t.elapsed() >= timeout);
            if !due {
                continue;
            }
            if e.attempt >= self.max_retries {
                e.given_up = true;
                continue;
            }
            e.attempt += 1;
            self.deliver(i);
        }
    }

    /// Sends `out` to the newest connection; a close or drop also forgets it.
    pub(crate) fn send_to_newest(&mut self, out: Out) -> bool {
        let Some(id) = self.newest else { return false };
        let hang_up = matches!(out, Out::Close(..) | Out::Drop);
        let sent = self.conns.get(&id).is_some_and(|tx| tx.send(out).is_ok());
        if hang_up {
            self.conns.remove(&id);
            self.newest = self.conns.keys().max().copied();
        }
        sent
    }
}
