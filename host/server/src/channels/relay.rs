//! Streams one workstream's output to its chat conversation: reply text is
//! posted once and then edited in place at most once per edit interval (the
//! last edit carries the final text), long replies continue in a new
//! message, approval requests become button prompts that are settled when
//! any client resolves them, and a failed turn says so.

use super::ChannelHub;
use crate::events::Numbered;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast::error::RecvError;
use tokio::time::Instant;
use turnstone_protocol::{Event, SessionState};
use turnstone_runtime::channel::{
    ApprovalPrompt, Command, CommandResult, Conversation, Edit, Post, SettlePrompt,
};

/// Where a workstream's replies go.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) plugin: String,
    pub(crate) conversation: Conversation,
    /// The user message the next reply answers.
    pub(crate) reply_to: Option<String>,
    /// A message already posted for the next reply (a thread's first message).
    pub(crate) placeholder: Option<String>,
}

/// A running relay.
pub(crate) struct Relay {
    target: Mutex<Target>,
}

impl Relay {
    /// Points the next reply at `target`.
    pub(crate) fn retarget(&self, target: Target) {
        *self.target.lock().unwrap_or_else(|p| p.into_inner()) = target;
    }

    fn target(&self) -> Target {
        self.target
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn take_reply(&self) -> (Option<String>, Option<String>) {
        let mut t = self.target.lock().unwrap_or_else(|p| p.into_inner());
        (t.reply_to.take(), t.placeholder.take())
    }
}

/// Starts (or re-points) the relay of `ws`. Subscribes before returning,
/// so a send made afterwards cannot outrun it.
pub(crate) fn ensure(
    hub: &Arc<ChannelHub>,
    ws: &Arc<crate::workstream::Workstream>,
    target: Target,
) {
    let mut relays = hub.relays.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(r) = relays.get(&ws.core.ws_id) {
        r.retarget(target);
        return;
    }
    let relay = Arc::new(Relay {
        target: Mutex::new(target),
    });
    relays.insert(ws.core.ws_id.clone(), relay.clone());
    let (replay, rx) = ws.core.hub.subscribe(None);
    tokio::spawn(run(
        hub.clone(),
        ws.clone(),
        relay,
        rx,
        replay.covers_through(None),
    ));
}

/// The reply being streamed.
#[derive(Default)]
struct Stream {
    /// The posted message and the text it shows.
    message: Option<(String, String)>,
    /// Everything this message should show.
    text: String,
    last_edit: Option<Instant>,
    dirty: bool,
}

struct State {
    hub: Arc<ChannelHub>,
    relay: Arc<Relay>,
    stream: Stream,
    /// Prompt messages by cycle, and the cycle of each call.
    prompts: HashMap<String, (Conversation, String, String)>,
    calls: HashMap<String, String>,
    last_error: Option<String>,
}

async fn run(
    hub: Arc<ChannelHub>,
    ws: Arc<crate::workstream::Workstream>,
    relay: Arc<Relay>,
    mut rx: tokio::sync::broadcast::Receiver<Numbered>,
    mut last_id: u64,
) {
    let interval = hub.settings.edit_interval;
    let mut st = State {
        hub: hub.clone(),
        relay,
        stream: Stream::default(),
        prompts: HashMap::new(),
        calls: HashMap::new(),
        last_error: None,
    };
    loop {
        let flush_at = st.stream.dirty.then(|| {
            st.stream
                .last_edit
                .map_or_else(Instant::now, |t| t + interval)
        });
        let got = tokio::select! {
            r = rx.recv() => Some(r),
            () = async {
                match flush_at {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            } => None,
        };
        let batch = match got {
            None => {
                st.flush(false).await;
                continue;
            }
            Some(Ok(n)) => vec![n],
            // Fell behind the live channel: the ring still has the events,
            // or the newest of them if the relay fell further behind than
            // the ring reaches (the rest are logged as lost).
            Some(Err(RecvError::Lagged(_))) => {
                let catch_up = ws.core.hub.catch_up(last_id);
                if catch_up.lost > 0 {
                    tracing::warn!(
                        ws_id = %ws.core.ws_id,
                        lost = catch_up.lost,
                        "channel relay fell behind the replay ring; these events are not relayed"
                    );
                }
                catch_up.events
            }
            Some(Err(RecvError::Closed)) => break,
        };
        let mut closed = false;
        for n in batch {
            if n.id <= last_id {
                continue;
            }
            last_id = n.id;
            let Ok(event) = serde_json::from_str::<Event>(n.json()) else {
                continue;
            };
            if matches!(event, Event::WsClosed(_)) {
                closed = true;
                break;
            }
            st.on_event(event).await;
        }
        if closed {
            break;
        }
    }
    st.flush(true).await;
    hub.relays
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&ws.core.ws_id);
}

/// Cuts `text` at most `max` characters in, preferring a line or word break.
fn split_at_limit(text: &str, max: usize) -> (String, String) {
    let cut = match text.char_indices().nth(max) {
        None => return (text.to_string(), String::new()),
        Some((i, _)) => i,
    };
    let head = &text[..cut];
    let at = head
        .rfind('\n')
        .filter(|&i| i > cut / 2)
        .or_else(|| head.rfind(' ').filter(|&i| i > cut / 2))
        .unwrap_or(cut);
    (text[..at].to_string(), text[at..].trim_start().to_string())
}

impl State {
    fn max_chars(&self, plugin: &str) -> usize {
        self.hub
            .info(plugin)
            .map_or(2000, |i| i.max_message_chars as usize)
            .max(100)
    }

    async fn command(&self, plugin: &str, cmd: Command) -> Option<CommandResult> {
        match self.hub.command(plugin, cmd).await {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(plugin, "channel command failed: {e}");
                None
            }
        }
    }

    async fn on_event(&mut self, event: Event) {
        match event {
            Event::Content(t) => {
                self.stream.text.push_str(&t.text);
                self.stream.dirty = true;
                // The first words go out at once; later ones at the edit rate.
                if self.stream.message.is_none() {
                    self.flush(false).await;
                }
            }
            Event::ApproveRequest(req) => {
                self.flush(true).await;
                self.stream = Stream::default();
                let target = self.relay.target();
                let header = req
                    .items
                    .iter()
                    .filter(|i| i.needs_approval)
                    .map(|i| i.header.clone())
                    .collect::<Vec<_>>()
                    .join("\n");
                let body = req
                    .items
                    .iter()
                    .filter(|i| i.needs_approval)
                    .filter_map(|i| i.preview.clone())
                    .collect::<Vec<_>>()
                    .join("\n");
                for i in req.items.iter().filter(|i| i.needs_approval) {
                    self.calls.insert(i.call_id.clone(), req.cycle_id.clone());
                }
                let cmd = Command::Prompt(ApprovalPrompt {
                    conversation: target.conversation.clone(),
                    cycle_id: req.cycle_id.clone(),
                    header: header.clone(),
                    body: (!body.is_empty()).then_some(body),
                });
                if let Some(CommandResult::Posted(p)) = self.command(&target.plugin, cmd).await {
                    self.prompts
                        .insert(req.cycle_id.clone(), (p.conversation, p.message_id, header));
                }
            }
            Event::ApprovalResolved(r) => {
                if !r.approved {
                    // Denied calls report a result too; it is not an output.
                    self.calls.retain(|_, c| c != &r.cycle_id);
                }
                let text = if !r.approved {
                    match &r.feedback {
                        Some(f) => format!("❌ Denied — feedback: {f}"),
                        None => "❌ Denied".to_string(),
                    }
                } else if r.always {
                    "✅ Approved (always, for these tools in this workstream)".to_string()
                } else {
                    "✅ Approved".to_string()
                };
                self.settle(&r.cycle_id, text).await;
            }
            Event::ToolResult(r) if r.accepted.is_none() => {
                let Some(cycle) = self.calls.remove(&r.call_id) else {
                    return;
                };
                let excerpt: String = r.output.chars().take(300).collect();
                let mark = if r.is_error { "⚠️" } else { "↳" };
                if let Some((_, _, header)) = self.prompts.get(&cycle).cloned() {
                    let text = format!("✅ Approved: {header}\n{mark} {excerpt}");
                    self.settle(&cycle, text).await;
                }
            }
            Event::Error(m) => self.last_error = Some(m.message),
            Event::StateChange(s)
                if matches!(s.state, SessionState::Idle | SessionState::Error) =>
            {
                let failed = s.state == SessionState::Error;
                if failed && self.stream.text.trim().is_empty() {
                    let why = self
                        .last_error
                        .take()
                        .unwrap_or_else(|| "the turn failed".to_string());
                    self.stream.text = format!("⚠️ {why}");
                    self.stream.dirty = true;
                }
                self.flush(true).await;
                self.stream = Stream::default();
                self.last_error = None;
            }
            _ => {}
        }
    }

    /// Replaces a prompt's text and removes its buttons.
    async fn settle(&mut self, cycle: &str, text: String) {
        let Some((conversation, message_id, _)) = self.prompts.get(cycle).cloned() else {
            return;
        };
        let plugin = self.relay.target().plugin;
        let cmd = Command::Settle(SettlePrompt {
            conversation,
            message_id,
            text,
        });
        self.command(&plugin, cmd).await;
    }

    /// Shows the buffered text: posts the message, or edits it when the
    /// interval has passed (`force`: now). Text beyond the platform's limit
    /// continues in a new message.
    async fn flush(&mut self, force: bool) {
        if !self.stream.dirty {
            return;
        }
        if !force
            && let Some(t) = self.stream.last_edit
            && t.elapsed() < self.hub.settings.edit_interval
            && self.stream.message.is_some()
        {
            return;
        }
        let target = self.relay.target();
        let max = self.max_chars(&target.plugin);
        loop {
            let (head, rest) = split_at_limit(&self.stream.text, max);
            if head.trim().is_empty() && rest.is_empty() {
                self.stream.dirty = false;
                return;
            }
            match self.stream.message.clone() {
                None => {
                    let (reply_to, placeholder) = self.relay.take_reply();
                    let posted = match placeholder {
                        Some(id) => {
                            let cmd = Command::Edit(Edit {
                                conversation: target.conversation.clone(),
                                message_id: id.clone(),
                                text: head.clone(),
                            });
                            self.command(&target.plugin, cmd).await.map(|_| id)
                        }
                        None => {
                            let cmd = Command::Post(Post {
                                conversation: target.conversation.clone(),
                                text: head.clone(),
                                reply_to,
                                start_thread: None,
                            });
                            match self.command(&target.plugin, cmd).await {
                                Some(CommandResult::Posted(p)) => Some(p.message_id),
                                _ => None,
                            }
                        }
                    };
                    match posted {
                        Some(id) => self.stream.message = Some((id, head.clone())),
                        None => {
                            // Lost (the adapter is down): keep the text for
                            // the next attempt at the edit rate.
                            self.stream.last_edit = Some(Instant::now());
                            return;
                        }
                    }
                }
                Some((id, shown)) if shown != head => {
                    let cmd = Command::Edit(Edit {
                        conversation: target.conversation.clone(),
                        message_id: id.clone(),
                        text: head.clone(),
                    });
                    if self.command(&target.plugin, cmd).await.is_some() {
                        self.stream.message = Some((id, head.clone()));
                    }
                }
                Some(_) => {}
            }
            self.stream.last_edit = Some(Instant::now());
            if rest.is_empty() {
                self.stream.dirty = false;
                return;
            }
            // The message is full: the rest starts a new one.
            self.stream.text = rest;
            self.stream.message = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_at_limit;

    #[test]
    fn long_text_splits_at_a_break_within_the_limit() {
        let text = format!("{}\n{}", "a".repeat(80), "b".repeat(80));
        let (head, rest) = split_at_limit(&text, 100);
        assert_eq!(head, "a".repeat(80));
        assert_eq!(rest, "b".repeat(80));
        let (head, rest) = split_at_limit("short", 100);
        assert_eq!((head.as_str(), rest.as_str()), ("short", ""));
        // No break in reach: a hard cut at the limit, on a char boundary.
        let (head, rest) = split_at_limit(&"é".repeat(150), 100);
        assert_eq!(head.chars().count(), 100);
        assert_eq!(rest.chars().count(), 50);
    }
}
