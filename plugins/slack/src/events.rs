//! Pure parsing of Socket Mode frames and of the Slack payloads the adapter
//! acts on: message and app_mention events, approval button presses and the
//! deny-with-feedback modal submission.

use crate::blocks::{FEEDBACK_CALLBACK_ID, Metadata, decode_metadata};
use serde_json::{Value, json};

/// What a Socket Mode frame is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameKind {
    /// Sent right after connecting: the link is up.
    Hello,
    /// Slack asks the client to reconnect; the reason (`warning`,
    /// `refresh_requested`, `link_disabled`, …).
    Disconnect(String),
    /// An Events API envelope (`payload` is an `event_callback`).
    EventsApi,
    /// An interactivity envelope (block_actions, view_submission, …).
    Interactive,
    /// A slash command (acked only).
    SlashCommands,
    /// Anything else, by its `type`.
    Other(String),
}

/// A parsed Socket Mode frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// What it is.
    pub kind: FrameKind,
    /// The id to ack, when the frame is an envelope.
    pub envelope_id: Option<String>,
    /// The envelope's payload (`null` when absent).
    pub payload: Value,
}

/// Parses one Socket Mode text frame.
pub fn classify(text: &str) -> Result<Frame, String> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("Socket Mode frame is not JSON: {e}"))?;
    let ty = str_at(&v, "type").unwrap_or_default();
    let kind = match ty {
        "hello" => FrameKind::Hello,
        "disconnect" => FrameKind::Disconnect(str_at(&v, "reason").unwrap_or_default().into()),
        "events_api" => FrameKind::EventsApi,
        "interactive" => FrameKind::Interactive,
        "slash_commands" => FrameKind::SlashCommands,
        other => FrameKind::Other(other.into()),
    };
    Ok(Frame {
        kind,
        envelope_id: str_at(&v, "envelope_id")
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        payload: v.get("payload").cloned().unwrap_or(Value::Null),
    })
}

/// The ack frame for an envelope (no payload).
pub fn ack_frame(envelope_id: &str) -> String {
    json!({ "envelope_id": envelope_id }).to_string()
}

/// A non-empty string field of `v`.
pub fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A non-empty string at a JSON pointer.
pub fn str_ptr<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Where a message lives (a comparable copy of the WIT `conversation`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conv {
    /// The Slack channel or IM id.
    pub channel_id: String,
    /// The thread's root `ts`.
    pub thread_id: Option<String>,
    /// A direct message (IM) with the bot.
    pub direct: bool,
}

/// A file shared with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRef {
    /// The file name (or title, or id).
    pub name: String,
    /// The type Slack claims.
    pub mimetype: Option<String>,
    /// The size in bytes, when given.
    pub size: Option<u64>,
    /// `url_private_download`, else `url_private`.
    pub url: Option<String>,
}

/// A user's message the adapter passes on to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMessage {
    /// Where it was written (and where to answer).
    pub conversation: Conv,
    /// Its `ts`.
    pub message_id: String,
    /// The author's user id.
    pub user_id: String,
    /// The text with the bot's mention removed.
    pub text: String,
    /// Files to download.
    pub files: Vec<FileRef>,
}

/// True when `text` mentions `bot` (`<@U123>` or `<@U123|name>`).
pub fn mentions(text: &str, bot: &str) -> bool {
    text.contains(&format!("<@{bot}>")) || text.contains(&format!("<@{bot}|"))
}

/// `text` without mentions of `bot`, trimmed.
pub fn strip_mention(text: &str, bot: &str) -> String {
    let mut out = text.replace(&format!("<@{bot}>"), "");
    let prefix = format!("<@{bot}|");
    while let Some(start) = out.find(&prefix) {
        match out[start..].find('>') {
            Some(len) => out.replace_range(start..start + len + 1, ""),
            None => break,
        }
    }
    out.trim().to_string()
}

/// `text` without its leading mention, trimmed (an app_mention when the
/// bot's own id is not known yet starts with the bot's mention).
pub fn strip_leading_mention(text: &str) -> String {
    let t = text.trim_start();
    if t.starts_with("<@")
        && let Some(end) = t.find('>')
    {
        return t[end + 1..].trim().to_string();
    }
    text.trim().to_string()
}

/// Decides whether a `message` or `app_mention` event is for the bot and,
/// if so, where it lives. `bot_user` is the bot's own user id (from
/// `auth.test`), when known.
pub fn route_message(event: &Value, bot_user: Option<&str>) -> Option<UserMessage> {
    let ty = str_at(event, "type")?;
    if ty != "message" && ty != "app_mention" {
        return None;
    }
    if event.get("bot_id").is_some_and(|b| !b.is_null()) {
        return None;
    }
    if let Some(sub) = str_at(event, "subtype")
        && sub != "file_share"
    {
        return None;
    }
    let user = str_at(event, "user")?;
    if bot_user == Some(user) {
        return None;
    }
    let channel = str_at(event, "channel")?;
    let ts = str_at(event, "ts")?;
    let text = str_at(event, "text").unwrap_or_default();
    let thread_ts = str_at(event, "thread_ts");
    let mentioned = ty == "app_mention" || bot_user.is_some_and(|b| mentions(text, b));
    let conversation = if str_at(event, "channel_type") == Some("im") {
        Conv {
            channel_id: channel.into(),
            thread_id: None,
            direct: true,
        }
    } else if let Some(root) = thread_ts {
        Conv {
            channel_id: channel.into(),
            thread_id: Some(root.into()),
            direct: false,
        }
    } else if mentioned {
        // The host answers in the thread rooted at this message's ts.
        Conv {
            channel_id: channel.into(),
            thread_id: None,
            direct: false,
        }
    } else {
        return None;
    };
    let files = event
        .get("files")
        .and_then(Value::as_array)
        .map(|fs| fs.iter().map(file_ref).collect())
        .unwrap_or_default();
    let text = match bot_user {
        Some(bot) => strip_mention(text, bot),
        None if ty == "app_mention" => strip_leading_mention(text),
        None => text.trim().to_string(),
    };
    Some(UserMessage {
        conversation,
        message_id: ts.into(),
        user_id: user.into(),
        text,
        files,
    })
}

fn file_ref(f: &Value) -> FileRef {
    let name = str_at(f, "name")
        .or_else(|| str_at(f, "title"))
        .or_else(|| str_at(f, "id"))
        .unwrap_or("file");
    FileRef {
        name: name.into(),
        mimetype: str_at(f, "mimetype").map(str::to_string),
        size: f.get("size").and_then(Value::as_u64),
        url: str_at(f, "url_private_download")
            .or_else(|| str_at(f, "url_private"))
            .map(str::to_string),
    }
}

/// Which approval button was pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// `ts_approve`.
    Approve,
    /// `ts_always`.
    Always,
    /// `ts_deny`.
    Deny,
    /// `ts_denyfb`: open the feedback modal.
    DenyWithFeedback,
}

impl ActionKind {
    /// The button for an `action_id`.
    pub fn from_action_id(id: &str) -> Option<Self> {
        match id {
            "ts_approve" => Some(Self::Approve),
            "ts_always" => Some(Self::Always),
            "ts_deny" => Some(Self::Deny),
            "ts_denyfb" => Some(Self::DenyWithFeedback),
            _ => None,
        }
    }
}

/// An approval button press (`block_actions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ButtonPress {
    /// The button.
    pub kind: ActionKind,
    /// The prompt's cycle id (the button's value).
    pub cycle_id: String,
    /// Where the prompt lives.
    pub conversation: Conv,
    /// The prompt message's ts.
    pub message_id: String,
    /// Who pressed it.
    pub user_id: String,
    /// Their user name (or display name, or id).
    pub user_name: String,
    /// For opening the feedback modal.
    pub trigger_id: Option<String>,
}

/// The presser's id and name in an interactive payload.
fn user_of(payload: &Value) -> Option<(String, String)> {
    let id = str_ptr(payload, "/user/id")?;
    let name = str_ptr(payload, "/user/username")
        .or_else(|| str_ptr(payload, "/user/name"))
        .unwrap_or(id);
    Some((id.into(), name.into()))
}

/// An IM channel id starts with `D`.
pub fn is_direct(channel_id: &str) -> bool {
    channel_id.starts_with('D')
}

/// Parses a `block_actions` payload whose first action is an approval button.
pub fn parse_block_action(payload: &Value) -> Option<ButtonPress> {
    if str_at(payload, "type") != Some("block_actions") {
        return None;
    }
    let action = payload.pointer("/actions/0")?;
    let kind = ActionKind::from_action_id(str_at(action, "action_id")?)?;
    let cycle_id = str_at(action, "value")?;
    let channel =
        str_ptr(payload, "/container/channel_id").or_else(|| str_ptr(payload, "/channel/id"))?;
    let message_ts =
        str_ptr(payload, "/container/message_ts").or_else(|| str_ptr(payload, "/message/ts"))?;
    let (user_id, user_name) = user_of(payload)?;
    Some(ButtonPress {
        kind,
        cycle_id: cycle_id.into(),
        conversation: Conv {
            channel_id: channel.into(),
            thread_id: str_ptr(payload, "/message/thread_ts").map(str::to_string),
            direct: is_direct(channel),
        },
        message_id: message_ts.into(),
        user_id,
        user_name,
        trigger_id: str_at(payload, "trigger_id").map(str::to_string),
    })
}

/// A submitted deny-with-feedback modal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedbackSubmission {
    /// The prompt it answers.
    pub meta: Metadata,
    /// Who submitted it.
    pub user_id: String,
    /// Their user name.
    pub user_name: String,
    /// The text typed (`None` when empty).
    pub feedback: Option<String>,
}

/// Parses a `view_submission` of the `ts_feedback` modal.
pub fn parse_feedback_submission(payload: &Value) -> Option<FeedbackSubmission> {
    if str_at(payload, "type") != Some("view_submission") {
        return None;
    }
    if str_ptr(payload, "/view/callback_id") != Some(FEEDBACK_CALLBACK_ID) {
        return None;
    }
    let meta = decode_metadata(str_ptr(payload, "/view/private_metadata")?)?;
    let (user_id, user_name) = user_of(payload)?;
    let feedback = str_ptr(payload, "/view/state/values/fb/text/value")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    Some(FeedbackSubmission {
        meta,
        user_id,
        user_name,
        feedback,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_classified() {
        let f = classify(r#"{"type":"hello","num_connections":1}"#).unwrap();
        assert_eq!(f.kind, FrameKind::Hello);
        assert_eq!(f.envelope_id, None);
        let f = classify(r#"{"type":"disconnect","reason":"refresh_requested"}"#).unwrap();
        assert_eq!(f.kind, FrameKind::Disconnect("refresh_requested".into()));
        let f = classify(
            r#"{"envelope_id":"e1","type":"events_api","payload":{"type":"event_callback"}}"#,
        )
        .unwrap();
        assert_eq!(f.kind, FrameKind::EventsApi);
        assert_eq!(f.envelope_id.as_deref(), Some("e1"));
        assert_eq!(f.payload["type"], "event_callback");
        let f = classify(r#"{"envelope_id":"e2","type":"interactive","payload":{}}"#).unwrap();
        assert_eq!(f.kind, FrameKind::Interactive);
        let f = classify(r#"{"envelope_id":"e3","type":"slash_commands","payload":{}}"#).unwrap();
        assert_eq!(f.kind, FrameKind::SlashCommands);
        let f = classify(r#"{"envelope_id":"e4","type":"weird"}"#).unwrap();
        assert_eq!(f.kind, FrameKind::Other("weird".into()));
        assert!(f.payload.is_null());
        assert!(classify("not json").is_err());
        assert_eq!(ack_frame("e1"), r#"{"envelope_id":"e1"}"#);
    }

    #[test]
    fn mentions_are_stripped() {
        assert_eq!(strip_mention("<@UBOT> hi there ", "UBOT"), "hi there");
        assert_eq!(strip_mention("hey <@UBOT|bot>, go", "UBOT"), "hey , go");
        assert_eq!(strip_mention("<@UOTHER> hi", "UBOT"), "<@UOTHER> hi");
        assert_eq!(strip_mention("<@UBOT>", "UBOT"), "");
        assert_eq!(strip_leading_mention(" <@UX> hello"), "hello");
        assert_eq!(strip_leading_mention("hello <@UX>"), "hello <@UX>");
        assert!(mentions("yo <@UBOT>", "UBOT"));
        assert!(mentions("yo <@UBOT|b>", "UBOT"));
        assert!(!mentions("yo <@UBOTX>", "UBOT"));
    }

    fn msg(extra: Value) -> Value {
        let mut v = json!({"type": "message", "user": "U222", "text": "<@UBOT> hi",
            "channel": "C111", "channel_type": "channel", "ts": "1.000200"});
        if let (Some(o), Some(e)) = (v.as_object_mut(), extra.as_object()) {
            for (k, val) in e {
                o.insert(k.clone(), val.clone());
            }
        }
        v
    }

    #[test]
    fn channel_mentions_threads_and_ims_are_routed() {
        let m = route_message(&msg(json!({})), Some("UBOT")).unwrap();
        assert_eq!(
            m.conversation,
            Conv {
                channel_id: "C111".into(),
                thread_id: None,
                direct: false
            }
        );
        assert_eq!(m.message_id, "1.000200");
        assert_eq!(m.text, "hi");
        assert_eq!(m.user_id, "U222");

        let m = route_message(
            &msg(json!({"text": "no mention", "thread_ts": "0.5"})),
            Some("UBOT"),
        )
        .unwrap();
        assert_eq!(m.conversation.thread_id.as_deref(), Some("0.5"));
        assert_eq!(m.text, "no mention");

        let m = route_message(
            &msg(json!({"channel": "D1", "channel_type": "im", "text": "yo"})),
            Some("UBOT"),
        )
        .unwrap();
        assert_eq!(
            m.conversation,
            Conv {
                channel_id: "D1".into(),
                thread_id: None,
                direct: true
            }
        );

        let m = route_message(&msg(json!({"type": "app_mention"})), None).unwrap();
        assert_eq!(m.text, "hi");

        // A plain channel message that does not mention the bot is ignored.
        assert!(route_message(&msg(json!({"text": "chatter"})), Some("UBOT")).is_none());
    }

    #[test]
    fn bots_subtypes_and_own_messages_are_skipped() {
        assert!(route_message(&msg(json!({"bot_id": "B1"})), Some("UBOT")).is_none());
        assert!(route_message(&msg(json!({"subtype": "message_changed"})), Some("UBOT")).is_none());
        assert!(route_message(&msg(json!({"user": "UBOT"})), Some("UBOT")).is_none());
        assert!(route_message(&msg(json!({"type": "reaction_added"})), Some("UBOT")).is_none());
        let m = route_message(
            &msg(json!({"subtype": "file_share", "files": [
                {"id": "F1", "name": "log.txt", "mimetype": "text/plain", "size": 12,
                 "url_private": "https://files.slack.com/a", "url_private_download": "https://files.slack.com/d"},
                {"id": "F2", "title": "t", "url_private": "https://files.slack.com/p"}]})),
            Some("UBOT"),
        )
        .unwrap();
        assert_eq!(m.files.len(), 2);
        assert_eq!(m.files[0].url.as_deref(), Some("https://files.slack.com/d"));
        assert_eq!(m.files[0].size, Some(12));
        assert_eq!(m.files[1].name, "t");
        assert_eq!(m.files[1].url.as_deref(), Some("https://files.slack.com/p"));
    }

    #[test]
    fn button_presses_parse() {
        let p = json!({"type": "block_actions", "trigger_id": "tr1",
            "user": {"id": "U222", "username": "alice", "name": "Alice"},
            "container": {"type": "message", "message_ts": "5.5", "channel_id": "D9"},
            "message": {"ts": "5.5", "thread_ts": "4.4"},
            "actions": [{"action_id": "ts_always", "value": "cyc-1"}]});
        let b = parse_block_action(&p).unwrap();
        assert_eq!(b.kind, ActionKind::Always);
        assert_eq!(b.cycle_id, "cyc-1");
        assert_eq!(b.message_id, "5.5");
        assert_eq!(b.user_name, "alice");
        assert_eq!(b.trigger_id.as_deref(), Some("tr1"));
        assert_eq!(
            b.conversation,
            Conv {
                channel_id: "D9".into(),
                thread_id: Some("4.4".into()),
                direct: true
            }
        );
        let mut other = p.clone();
        other["actions"][0]["action_id"] = json!("fb_up");
        assert!(parse_block_action(&other).is_none());
    }

    #[test]
    fn feedback_submissions_parse() {
        let p = json!({"type": "view_submission", "user": {"id": "U1", "name": "bob"},
            "view": {"callback_id": "ts_feedback", "private_metadata": "C1|5.5||cyc|x",
                "state": {"values": {"fb": {"text": {"type": "plain_text_input", "value": " no, use git "}}}}}});
        let s = parse_feedback_submission(&p).unwrap();
        assert_eq!(s.meta.channel_id, "C1");
        assert_eq!(s.meta.message_ts, "5.5");
        assert_eq!(s.meta.thread_ts, None);
        assert_eq!(s.meta.cycle_id, "cyc|x");
        assert_eq!(s.user_name, "bob");
        assert_eq!(s.feedback.as_deref(), Some("no, use git"));
        let mut other = p.clone();
        other["view"]["callback_id"] = json!("x");
        assert!(parse_feedback_submission(&other).is_none());
    }
}
