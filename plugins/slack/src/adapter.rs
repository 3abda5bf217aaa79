//! The adapter's state and what it does with Slack's events and button
//! presses (from Socket Mode or the HTTP webhook) and with host commands.

use crate::Config;
use crate::blocks::{Metadata, feedback_modal};
use crate::commands::{self, Queue};
use crate::events::{
    ActionKind, ButtonPress, Conv, UserMessage, parse_block_action, parse_feedback_submission,
    route_message, str_at,
};
use crate::util::Dedupe;
use crate::web::{ApiError, BOT_TOKEN, RateLimits, Web, download};
use serde_json::{Value, json};
use turnstone_plugin_sdk::channel::{
    ApprovalAction, Attachment, Command, Conversation, Decision, Inbound, InboundMessage, emit,
};
use turnstone_plugin_sdk::host::now_ms;

/// Everything the running adapter keeps between wake-ups.
#[derive(Debug)]
pub struct Adapter {
    /// The Web API client.
    pub web: Web,
    /// Files larger than this are not downloaded.
    pub max_attachment_bytes: u64,
    /// The bot's own user id (from `auth.test`), once known.
    pub bot_user: Option<String>,
    /// Recently handled envelopes, events and messages.
    pub seen: Dedupe,
    /// Per-method rate-limit blocks.
    pub limits: RateLimits,
    /// Commands waiting for their Web API call.
    pub queue: Queue,
}

fn sdk_conv(c: &Conv) -> Conversation {
    Conversation {
        channel_id: c.channel_id.clone(),
        thread_id: c.thread_id.clone(),
        direct: c.direct,
    }
}

impl Adapter {
    /// A fresh adapter for `config`.
    pub fn new(config: &Config) -> Self {
        Self {
            web: Web::new(&config.api_base),
            max_attachment_bytes: config.max_attachment_bytes,
            bot_user: None,
            seen: Dedupe::new(),
            limits: RateLimits::new(),
            queue: Queue::new(),
        }
    }

    /// Asks `auth.test` (bot token) for the bot's own user id.
    pub fn learn_bot_user(&mut self) -> Result<(), ApiError> {
        let v = self.web.call_json("auth.test", BOT_TOKEN, &json!({}))?;
        match str_at(&v, "user_id") {
            Some(user) => {
                crate::info(&format!("Slack bot user is {user}"));
                self.bot_user = Some(user.to_string());
                Ok(())
            }
            None => Err(ApiError::Slack(
                "auth.test answered without a user_id".into(),
            )),
        }
    }

    /// Takes a host command: a webhook is answered at once, the others are
    /// queued for their Web API call and sent when their method is free.
    pub fn on_command(&mut self, id: u64, cmd: Command) {
        let job = match cmd {
            Command::Webhook(req) => return crate::webhook::handle(self, id, &req),
            Command::Post(p) => commands::post_job(id, &p),
            Command::Edit(e) => commands::edit_job(id, &e),
            Command::Prompt(p) => commands::prompt_job(id, &p),
            Command::Settle(s) => commands::settle_job(id, &s),
        };
        self.queue.push_new(job);
        self.pump();
    }

    /// Sends the queued calls that may go now.
    pub fn pump(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        commands::pump(&mut self.queue, &mut self.limits, &self.web);
        self.limits.prune(now_ms());
    }

    /// When the next queued call may be sent (epoch ms).
    pub fn next_due(&self, now: u64) -> Option<u64> {
        self.queue.next_due(&self.limits, now)
    }

    /// Handles an `event_callback` payload (Socket Mode `events_api` or an
    /// HTTP event): passes user messages for the bot on, once each.
    pub fn on_event_callback(&mut self, payload: &Value) {
        if let Some(event_id) = str_at(payload, "event_id")
            && !self.seen.insert(&format!("ev:{event_id}"))
        {
            return;
        }
        let Some(event) = payload.get("event") else {
            return;
        };
        let Some(m) = route_message(event, self.bot_user.as_deref()) else {
            return;
        };
        // A mention arrives as both `message` and `app_mention`.
        let key = format!("msg:{}:{}", m.conversation.channel_id, m.message_id);
        if !self.seen.insert(&key) {
            return;
        }
        self.emit_message(m);
    }

    fn emit_message(&self, m: UserMessage) {
        let max = self.max_attachment_bytes;
        let mut attachments = Vec::new();
        let mut skipped = Vec::new();
        for f in &m.files {
            if let Some(size) = f.size.filter(|&s| s > max) {
                skipped.push(format!(
                    "{}: too large ({size} bytes; the limit is {max})",
                    f.name
                ));
                continue;
            }
            let Some(url) = &f.url else {
                skipped.push(format!("{}: Slack gave no download link", f.name));
                continue;
            };
            match download(url, max) {
                Ok(d) => attachments.push(Attachment {
                    filename: f.name.clone(),
                    content_type: f.mimetype.clone().or(d.content_type),
                    data: d.data,
                }),
                Err(e) => {
                    crate::warn(&format!("could not download Slack file {}: {e}", f.name));
                    skipped.push(format!("{}: {e}", f.name));
                }
            }
        }
        emit(&Inbound::Message(InboundMessage {
            conversation: sdk_conv(&m.conversation),
            message_id: m.message_id,
            user_id: m.user_id.clone(),
            user_name: m.user_id,
            text: m.text,
            attachments,
            skipped_attachments: skipped,
        }));
    }

    /// Handles an interactivity payload: approval buttons and the feedback
    /// modal's submission.
    pub fn on_interactive(&mut self, payload: &Value) {
        match str_at(payload, "type") {
            Some("block_actions") => {
                let Some(press) = parse_block_action(payload) else {
                    return;
                };
                let decision = match press.kind {
                    ActionKind::Approve => Decision::Approve,
                    ActionKind::Always => Decision::Always,
                    ActionKind::Deny => Decision::Deny,
                    ActionKind::DenyWithFeedback => return self.open_feedback_modal(&press),
                };
                emit(&Inbound::Action(ApprovalAction {
                    conversation: sdk_conv(&press.conversation),
                    message_id: press.message_id,
                    user_id: press.user_id,
                    user_name: press.user_name,
                    cycle_id: press.cycle_id,
                    decision,
                    feedback: None,
                }));
            }
            Some("view_submission") => {
                let Some(sub) = parse_feedback_submission(payload) else {
                    return;
                };
                let m = sub.meta;
                emit(&Inbound::Action(ApprovalAction {
                    conversation: Conversation {
                        direct: crate::events::is_direct(&m.channel_id),
                        channel_id: m.channel_id,
                        thread_id: m.thread_ts,
                    },
                    message_id: m.message_ts,
                    user_id: sub.user_id,
                    user_name: sub.user_name,
                    cycle_id: m.cycle_id,
                    decision: Decision::Deny,
                    feedback: sub.feedback,
                }));
            }
            _ => {}
        }
    }

    /// Opens the deny-with-feedback modal (`views.open`). The trigger id
    /// expires in 3 s, so a rate-limited call is dropped, not queued.
    fn open_feedback_modal(&mut self, press: &ButtonPress) {
        const METHOD: &str = "views.open";
        let Some(trigger) = &press.trigger_id else {
            crate::warn("deny-with-feedback pressed without a trigger_id");
            return;
        };
        let now = now_ms();
        if self.limits.blocked_until(METHOD, now).is_some() {
            crate::warn("views.open is rate-limited; the feedback form was not opened");
            return;
        }
        let meta = Metadata {
            channel_id: press.conversation.channel_id.clone(),
            message_ts: press.message_id.clone(),
            thread_ts: press.conversation.thread_id.clone(),
            cycle_id: press.cycle_id.clone(),
        };
        let body = json!({"trigger_id": trigger, "view": feedback_modal(&meta)});
        match self.web.call_json(METHOD, BOT_TOKEN, &body) {
            Ok(_) => {}
            Err(ApiError::RateLimited { retry_after_ms }) => {
                self.limits
                    .block(METHOD, now_ms().saturating_add(retry_after_ms));
                crate::warn("views.open was rate-limited; the feedback form was not opened");
            }
            Err(e) => crate::warn(&format!("views.open failed: {e}")),
        }
    }
}
