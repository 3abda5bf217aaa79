//! Host commands that become Web API calls (post, edit, prompt, settle),
//! queued per method so a rate-limited method waits out its `Retry-After`
//! while other methods go on.

use crate::blocks::{approval_blocks, approval_fallback, post_thread_ts};
use crate::events::Conv;
use crate::web::{ApiError, BOT_TOKEN, MAX_TRIES, RateLimits, Web};
use serde_json::{Value, json};
use std::collections::{HashSet, VecDeque};
use turnstone_plugin_sdk::channel::{
    ApprovalPrompt, CommandResult, Conversation, Edit, Post, Posted, SettlePrompt, complete,
};

/// What a job answers when its call succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A posted message in this conversation (thread as posted).
    Posted(Conv),
    /// An applied edit.
    Done,
}

/// One Web API call on behalf of a host command.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The host command id to complete.
    pub id: u64,
    /// Arrival order (kept when a job is requeued).
    pub seq: u64,
    /// The Web API method.
    pub method: &'static str,
    /// The JSON body.
    pub body: Value,
    /// How to answer on success.
    pub reply: Reply,
    /// Rate-limited attempts so far.
    pub tries: u32,
    /// Not to be sent before this time (epoch ms).
    pub not_before: u64,
}

/// Jobs waiting to be sent, in arrival order.
#[derive(Debug, Default)]
pub struct Queue {
    jobs: VecDeque<Job>,
    next_seq: u64,
}

impl Queue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many jobs wait.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when no job waits.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Adds a new job (it is given the next arrival number).
    pub fn push_new(&mut self, mut job: Job) {
        job.seq = self.next_seq;
        self.next_seq += 1;
        self.requeue(job);
    }

    /// Puts a job back at its arrival position.
    pub fn requeue(&mut self, job: Job) {
        let at = self
            .jobs
            .iter()
            .position(|j| j.seq > job.seq)
            .unwrap_or(self.jobs.len());
        self.jobs.insert(at, job);
    }

    /// The oldest job that may be sent at `now`: its own not-before passed,
    /// its method is not blocked, and no older job of the same method waits.
    pub fn pop_ready(&mut self, limits: &RateLimits, now: u64) -> Option<Job> {
        let mut held: HashSet<&str> = HashSet::new();
        let mut found = None;
        for (i, j) in self.jobs.iter().enumerate() {
            if held.contains(j.method) {
                continue;
            }
            if j.not_before <= now && limits.blocked_until(j.method, now).is_none() {
                found = Some(i);
                break;
            }
            held.insert(j.method);
        }
        found.and_then(|i| self.jobs.remove(i))
    }

    /// The earliest time (epoch ms) a waiting job may be sent: only the
    /// oldest job of each method counts, the younger ones wait behind it.
    pub fn next_due(&self, limits: &RateLimits, now: u64) -> Option<u64> {
        let mut seen: HashSet<&str> = HashSet::new();
        self.jobs
            .iter()
            .filter(|j| seen.insert(j.method))
            .map(|j| {
                j.not_before
                    .max(limits.blocked_until(j.method, now).unwrap_or(0))
            })
            .min()
    }
}

/// What to do with a job after a rate-limited attempt at `now`.
pub fn after_rate_limit(mut job: Job, retry_after_ms: u64, now: u64) -> Result<Job, String> {
    job.tries += 1;
    if job.tries >= MAX_TRIES {
        return Err(format!(
            "Slack rate-limited {} {} times; giving up",
            job.method, job.tries
        ));
    }
    job.not_before = now.saturating_add(retry_after_ms);
    Ok(job)
}

fn conv(c: &Conversation) -> Conv {
    Conv {
        channel_id: c.channel_id.clone(),
        thread_id: c.thread_id.clone(),
        direct: c.direct,
    }
}

fn job(id: u64, method: &'static str, body: Value, reply: Reply) -> Job {
    Job {
        id,
        seq: 0,
        method,
        body,
        reply,
        tries: 0,
        not_before: 0,
    }
}

/// `chat.postMessage` for a post.
pub fn post_job(id: u64, p: &Post) -> Job {
    let c = &p.conversation;
    let thread = post_thread_ts(
        c.thread_id.as_deref(),
        p.reply_to.as_deref(),
        p.start_thread.is_some(),
        c.direct,
    );
    let mut body = json!({"channel": c.channel_id, "text": p.text});
    if let Some(t) = &thread {
        body["thread_ts"] = json!(t);
    }
    let reply = Reply::Posted(Conv {
        thread_id: thread,
        ..conv(c)
    });
    job(id, "chat.postMessage", body, reply)
}

/// `chat.update` for an edit.
pub fn edit_job(id: u64, e: &Edit) -> Job {
    let body = json!({"channel": e.conversation.channel_id, "ts": e.message_id, "text": e.text});
    job(id, "chat.update", body, Reply::Done)
}

/// `chat.postMessage` with the approval buttons, in the conversation's thread.
pub fn prompt_job(id: u64, p: &ApprovalPrompt) -> Job {
    let c = &p.conversation;
    let mut body = json!({
        "channel": c.channel_id,
        "text": approval_fallback(&p.header),
        "blocks": approval_blocks(&p.header, p.body.as_deref(), &p.cycle_id),
    });
    if let Some(t) = &c.thread_id {
        body["thread_ts"] = json!(t);
    }
    job(id, "chat.postMessage", body, Reply::Posted(conv(c)))
}

/// `chat.update` replacing a prompt's text and removing its buttons.
pub fn settle_job(id: u64, s: &SettlePrompt) -> Job {
    let body = json!({
        "channel": s.conversation.channel_id,
        "ts": s.message_id,
        "text": s.text,
        "blocks": [],
    });
    job(id, "chat.update", body, Reply::Done)
}

/// The command result for a successful call.
pub fn result_of(reply: &Reply, answer: &Value) -> Result<CommandResult, String> {
    match reply {
        Reply::Done => Ok(CommandResult::Done),
        Reply::Posted(c) => {
            let ts = answer
                .get("ts")
                .and_then(Value::as_str)
                .ok_or("Slack answered chat.postMessage without a ts")?;
            let channel = answer
                .get("channel")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or(&c.channel_id);
            Ok(CommandResult::Posted(Posted {
                message_id: ts.to_string(),
                conversation: Conversation {
                    channel_id: channel.to_string(),
                    thread_id: c.thread_id.clone(),
                    direct: c.direct,
                },
            }))
        }
    }
}

/// Sends every job that may go now; rate-limited ones go back in the queue
/// (or fail after [`MAX_TRIES`]), the rest are completed.
pub fn pump(queue: &mut Queue, limits: &mut RateLimits, web: &Web) {
    loop {
        let now = turnstone_plugin_sdk::host::now_ms();
        let Some(job) = queue.pop_ready(limits, now) else {
            break;
        };
        match web.call_json(job.method, BOT_TOKEN, &job.body) {
            Ok(answer) => complete(job.id, result_of(&job.reply, &answer)),
            Err(ApiError::RateLimited { retry_after_ms }) => {
                let now = turnstone_plugin_sdk::host::now_ms();
                crate::warn(&format!(
                    "{} rate-limited; retrying in {retry_after_ms} ms",
                    job.method
                ));
                limits.block(job.method, now.saturating_add(retry_after_ms));
                match after_rate_limit(job.clone(), retry_after_ms, now) {
                    Ok(again) => queue.requeue(again),
                    Err(e) => complete(job.id, Err(e)),
                }
            }
            Err(e) => {
                crate::warn(&format!("{} failed: {e}", job.method));
                complete(job.id, Err(format!("{}: {e}", job.method)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(method: &'static str, not_before: u64) -> Job {
        let mut job = job(1, method, json!({}), Reply::Done);
        job.not_before = not_before;
        job
    }

    #[test]
    fn blocked_methods_wait_and_others_pass() {
        let mut q = Queue::new();
        let mut limits = RateLimits::new();
        q.push_new(j("chat.postMessage", 0));
        q.push_new(j("chat.update", 0));
        q.push_new(j("chat.postMessage", 0));
        limits.block("chat.postMessage", 2000);
        // The update is not blocked by postMessage's limit.
        let first = q.pop_ready(&limits, 1000).unwrap();
        assert_eq!(first.method, "chat.update");
        assert!(q.pop_ready(&limits, 1000).is_none());
        assert_eq!(q.next_due(&limits, 1000), Some(2000));
        // Never before the retry-after elapses.
        assert!(q.pop_ready(&limits, 1999).is_none());
        let a = q.pop_ready(&limits, 2000).unwrap();
        assert_eq!(a.seq, 0);
        let b = q.pop_ready(&limits, 2000).unwrap();
        assert_eq!(b.seq, 2);
        assert!(q.is_empty());
    }

    #[test]
    fn requeued_jobs_keep_their_place() {
        let mut q = Queue::new();
        let limits = RateLimits::new();
        q.push_new(j("chat.postMessage", 0));
        q.push_new(j("chat.postMessage", 0));
        let first = q.pop_ready(&limits, 0).unwrap();
        let again = after_rate_limit(first, 1000, 500).unwrap();
        assert_eq!(again.not_before, 1500);
        assert_eq!(again.tries, 1);
        q.requeue(again);
        // The younger job of the same method waits behind the requeued one.
        assert!(q.pop_ready(&limits, 600).is_none());
        assert_eq!(q.next_due(&limits, 600), Some(1500));
        let next = q.pop_ready(&limits, 1500).unwrap();
        assert_eq!(next.seq, 0);
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn give_up_after_five_tries() {
        let mut job = j("chat.update", 0);
        for i in 1..MAX_TRIES {
            job = after_rate_limit(job, 1000, 0).unwrap();
            assert_eq!(job.tries, i);
        }
        assert!(after_rate_limit(job, 1000, 0).is_err());
    }

    #[test]
    fn posts_thread_and_report_the_thread() {
        let p = Post {
            conversation: Conversation {
                channel_id: "C1".into(),
                thread_id: None,
                direct: false,
            },
            text: "hi".into(),
            reply_to: Some("9.9".into()),
            start_thread: None,
        };
        let job = post_job(7, &p);
        assert_eq!(job.method, "chat.postMessage");
        assert_eq!(job.body["thread_ts"], "9.9");
        let r = result_of(
            &job.reply,
            &json!({"ok": true, "channel": "C1", "ts": "10.1"}),
        )
        .unwrap();
        match r {
            CommandResult::Posted(p) => {
                assert_eq!(p.message_id, "10.1");
                assert_eq!(p.conversation.thread_id.as_deref(), Some("9.9"));
            }
            _ => panic!("expected posted"),
        }
        let s = settle_job(
            1,
            &SettlePrompt {
                conversation: p.conversation.clone(),
                message_id: "10.1".into(),
                text: "Approved".into(),
            },
        );
        assert_eq!(s.body["blocks"], json!([]));
        assert_eq!(s.method, "chat.update");
    }
}
