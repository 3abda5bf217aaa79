//! Host commands as REST jobs, queued so rate limits defer them instead of
//! blocking the gateway loop.
//!
//! Every post, edit, prompt and settle becomes a [`Job`] in the [`Queue`].
//! [`Queue::pump`] sends whatever may go now in order (requests on the same
//! route keep their order), leaves the rest with a not-before time, and
//! answers each command once with `complete`.

use crate::rest::{Call, Outcome, Rest, major_param};
use crate::util::{MAX_CONTENT_CHARS, prompt_content, str_at, truncate_chars};
use serde_json::{Value, json};
use std::collections::HashMap;
use turnstone_plugin_sdk::channel::{Command, CommandResult, Conversation, Posted, complete};
use turnstone_plugin_sdk::host::now_ms;

/// Sends of one request (429s included) before its command fails.
pub const MAX_TRIES: u32 = 5;

/// The longest thread name Discord takes.
const MAX_THREAD_NAME: usize = 100;

/// One step of a command.
#[derive(Debug, Clone)]
pub enum Job {
    /// Start a thread on `reply_to` in `channel`, then post `text` in it.
    StartThread {
        /// The parent channel.
        channel: String,
        /// The message the thread starts from.
        reply_to: String,
        /// The thread's name (1-100 characters).
        name: String,
        /// The text to post in the new thread.
        text: String,
    },
    /// Post a message; the command's result is [`CommandResult::Posted`].
    Post {
        /// Where the message goes; also the result's conversation.
        conversation: Conversation,
        /// The JSON body.
        body: Value,
    },
    /// Edit a message; the command's result is [`CommandResult::Done`].
    Patch {
        /// The message's channel.
        channel: String,
        /// The message.
        message_id: String,
        /// The JSON body.
        body: Value,
    },
}

/// What a finished request means for its command.
#[derive(Debug)]
pub enum Step {
    /// The command is done.
    Done(CommandResult),
    /// The command continues with another request.
    Next(Job),
    /// The command failed.
    Fail(String),
}

/// A JSON body for a plain message.
pub fn message_body(text: &str, reply_to: Option<&str>) -> Value {
    let mut body = json!({
        "content": crate::util::truncate_chars(text, crate::util::MAX_CONTENT_CHARS),
        "allowed_mentions": {"parse": []},
    });
    if let Some(id) = reply_to {
        body["message_reference"] = json!({"message_id": id, "fail_if_not_exists": false});
    }
    body
}

/// The buttons of an approval prompt for `cycle`.
pub fn prompt_components(cycle: &str) -> Value {
    let button = |style: u8, label: &str, kind: &str| json!({"type": 2, "style": style, "label": label, "custom_id": format!("ts:{kind}:{cycle}")});
    json!([{"type": 1, "components": [
        button(3, "Approve", "approve"),
        button(1, "Always", "always"),
        button(4, "Deny", "deny"),
        button(2, "Deny with feedback…", "denyfb"),
    ]}])
}

impl Job {
    /// The job for a host command (`None` for webhooks, which are not REST).
    pub fn from_command(command: Command) -> Option<Job> {
        Some(match command {
            Command::Post(p) => {
                let conv = p.conversation;
                match (p.start_thread, p.reply_to) {
                    (Some(name), Some(reply_to)) if conv.thread_id.is_none() && !conv.direct => {
                        let name = name.trim();
                        let name = if name.is_empty() { "Turnstone" } else { name };
                        Job::StartThread {
                            channel: conv.channel_id,
                            reply_to,
                            name: truncate_chars(name, MAX_THREAD_NAME),
                            text: p.text,
                        }
                    }
                    (_, reply_to) => Job::Post {
                        body: message_body(&p.text, reply_to.as_deref()),
                        conversation: conv,
                    },
                }
            }
            Command::Edit(e) => Job::Patch {
                channel: e.conversation.channel_id,
                message_id: e.message_id,
                body: json!({"content": truncate_chars(&e.text, MAX_CONTENT_CHARS)}),
            },
            Command::Prompt(p) => {
                let mut body = message_body(&prompt_content(&p.header, p.body.as_deref()), None);
                body["components"] = prompt_components(&p.cycle_id);
                Job::Post {
                    conversation: p.conversation,
                    body,
                }
            }
            Command::Settle(s) => Job::Patch {
                channel: s.conversation.channel_id,
                message_id: s.message_id,
                body: json!({
                    "content": truncate_chars(&s.text, MAX_CONTENT_CHARS),
                    "components": [],
                }),
            },
            Command::Webhook(_) => return None,
        })
    }

    /// The request this step sends.
    pub fn call(&self) -> Call {
        match self {
            Job::StartThread {
                channel,
                reply_to,
                name,
                ..
            } => Call::post(
                format!("/channels/{channel}/messages/{reply_to}/threads"),
                json!({"name": name, "auto_archive_duration": 1440}),
            ),
            Job::Post { conversation, body } => Call::post(
                format!("/channels/{}/messages", conversation.channel_id),
                body.clone(),
            ),
            Job::Patch {
                channel,
                message_id,
                body,
            } => Call::patch(
                format!("/channels/{channel}/messages/{message_id}"),
                body.clone(),
            ),
        }
    }

    /// What the successful `response` of this step's request means.
    pub fn advance(self, response: &Value) -> Step {
        match self {
            Job::StartThread { text, .. } => match str_at(response, "id") {
                Some(thread) => Step::Next(Job::Post {
                    conversation: Conversation {
                        channel_id: thread.to_string(),
                        thread_id: Some(thread.to_string()),
                        direct: false,
                    },
                    body: json!({
                        "content": truncate_chars(&text, MAX_CONTENT_CHARS),
                        "allowed_mentions": {"parse": []},
                    }),
                }),
                None => Step::Fail("Discord created the thread but returned no id".into()),
            },
            Job::Post { conversation, .. } => match str_at(response, "id") {
                Some(id) => Step::Done(CommandResult::Posted(Posted {
                    message_id: id.to_string(),
                    conversation,
                })),
                None => Step::Fail("Discord accepted the message but returned no id".into()),
            },
            Job::Patch { .. } => Step::Done(CommandResult::Done),
        }
    }
}

struct Pending {
    id: u64,
    job: Job,
    tries: u32,
    not_before: u64,
}

/// Commands waiting to be sent.
#[derive(Default)]
pub struct Queue {
    items: Vec<Pending>,
}

impl Queue {
    /// Queues command `id`'s job.
    pub fn push(&mut self, id: u64, job: Job) {
        self.items.push(Pending {
            id,
            job,
            tries: 0,
            not_before: 0,
        });
    }

    /// When the earliest deferred job may go.
    pub fn next_deadline(&self) -> Option<u64> {
        self.items.iter().map(|p| p.not_before).min()
    }

    /// Sends every job that may go now, in order, and answers the commands
    /// that finished or failed.
    pub fn pump(&mut self, rest: &mut Rest) {
        // Routes held back in this pass, with the time they may go: later
        // jobs on the same route wait behind the first.
        let mut held: HashMap<String, u64> = HashMap::new();
        let mut i = 0;
        while i < self.items.len() {
            let now = now_ms();
            let call = self.items[i].job.call();
            let route = call.route();
            if let Some(&until) = held.get(&route) {
                let item = &mut self.items[i];
                item.not_before = item.not_before.max(until);
                i += 1;
                continue;
            }
            let ready = rest
                .limits
                .ready_at(&route, major_param(&call.path), now)
                .unwrap_or(0)
                .max(self.items[i].not_before);
            if ready > now {
                self.items[i].not_before = ready;
                held.insert(route, ready);
                i += 1;
                continue;
            }
            let mut item = self.items.remove(i);
            item.tries += 1;
            match rest.send(&call, true) {
                Outcome::Ok(response) => match item.job.advance(&response) {
                    Step::Done(result) => complete(item.id, Ok(result)),
                    Step::Next(job) => self.items.insert(
                        i,
                        Pending {
                            id: item.id,
                            job,
                            tries: 0,
                            not_before: 0,
                        },
                    ),
                    Step::Fail(message) => complete(item.id, Err(message)),
                },
                Outcome::Limited(_) if item.tries >= MAX_TRIES => complete(
                    item.id,
                    Err(format!(
                        "Discord API {route} is still rate limited after {MAX_TRIES} tries"
                    )),
                ),
                Outcome::Limited(retry) => {
                    item.not_before = now_ms() + retry;
                    held.insert(route, item.not_before);
                    self.items.insert(i, item);
                    i += 1;
                }
                Outcome::Failed { message, .. } => complete(item.id, Err(message)),
            }
        }
    }

    /// Answers every queued command with `reason` (the adapter is stopping).
    pub fn fail_all(&mut self, reason: &str) {
        for item in self.items.drain(..) {
            complete(item.id, Err(reason.to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_plugin_sdk::channel::{Edit, Post};

    fn conv(channel: &str, thread: Option<&str>, direct: bool) -> Conversation {
        Conversation {
            channel_id: channel.into(),
            thread_id: thread.map(Into::into),
            direct,
        }
    }

    fn post(c: Conversation, reply_to: Option<&str>, thread: Option<&str>) -> Option<Job> {
        Job::from_command(Command::Post(Post {
            conversation: c,
            text: "hello".into(),
            reply_to: reply_to.map(Into::into),
            start_thread: thread.map(Into::into),
        }))
    }

    #[test]
    fn posts_start_threads_only_in_plain_guild_channels() {
        let job = post(
            conv("1", None, false),
            Some("9"),
            Some("n".repeat(150).as_str()),
        );
        let Some(job @ Job::StartThread { .. }) = job else {
            panic!("expected a thread start");
        };
        let call = job.call();
        assert_eq!(call.path, "/channels/1/messages/9/threads");
        let body = call.body.unwrap_or_default();
        assert_eq!(body["name"].as_str().map(|s| s.chars().count()), Some(100));
        assert_eq!(body["auto_archive_duration"], 1440);
        let Step::Next(next) = job.advance(&json!({"id": "77"})) else {
            panic!("expected the post into the thread");
        };
        assert_eq!(next.call().path, "/channels/77/messages");
        let Step::Done(CommandResult::Posted(p)) = next.advance(&json!({"id": "78"})) else {
            panic!("expected posted");
        };
        assert_eq!(p.message_id, "78");
        assert_eq!(p.conversation.thread_id.as_deref(), Some("77"));

        for c in [conv("1", Some("5"), false), conv("1", None, true)] {
            let Some(Job::Post { body, .. }) = post(c, Some("9"), Some("x")) else {
                panic!("expected a plain post");
            };
            assert_eq!(body["message_reference"]["message_id"], "9");
        }
    }

    #[test]
    fn edits_and_prompts() {
        let job = Job::from_command(Command::Edit(Edit {
            conversation: conv("1", None, false),
            message_id: "2".into(),
            text: "new".into(),
        }));
        let call = job.map(|j| j.call());
        assert_eq!(
            call.map(|c| (c.route(), c.body)),
            Some((
                "PATCH /channels/1/messages/{id}".to_string(),
                Some(json!({"content": "new"}))
            ))
        );
        let c = prompt_components("c1");
        assert_eq!(c[0]["components"][0]["custom_id"], "ts:approve:c1");
        assert_eq!(c[0]["components"][3]["custom_id"], "ts:denyfb:c1");
        assert_eq!(c[0]["components"][2]["style"], 4);
    }

    #[test]
    fn message_bodies() {
        let b = message_body("hi", Some("5"));
        assert_eq!(b["message_reference"]["message_id"], "5");
        assert_eq!(b["allowed_mentions"]["parse"], serde_json::json!([]));
        let b = message_body(&"x".repeat(3000), None);
        assert_eq!(b["content"].as_str().map(|s| s.chars().count()), Some(2000));
        assert!(b.get("message_reference").is_none());
    }
}
