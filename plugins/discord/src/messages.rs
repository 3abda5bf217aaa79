//! MESSAGE_CREATE: which messages reach the host, and their attachments.

use crate::rest::{Rest, USER_AGENT};
use crate::util::{mentions_user, str_at, strip_mention};
use serde_json::Value;
use turnstone_plugin_sdk::channel::{Attachment, Conversation, InboundMessage};
use turnstone_plugin_sdk::http::Request;

/// An attachment to download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentRef {
    /// The file's name.
    pub filename: String,
    /// Where to fetch it (the CDN; no authorization needed).
    pub url: String,
    /// The type Discord claims.
    pub content_type: Option<String>,
}

/// A message for the host before its attachments are fetched.
#[derive(Debug, Clone)]
pub struct Draft {
    /// The message, with no attachments yet.
    pub message: InboundMessage,
    /// Attachments small enough to download.
    pub downloads: Vec<AttachmentRef>,
}

/// Whether a channel type is a thread (announcement, public, private).
pub fn is_thread_type(channel_type: Option<u64>) -> bool {
    matches!(channel_type, Some(10..=12))
}

/// The conversation of a message or interaction in `channel_id`.
pub fn conversation(channel_id: &str, channel_type: Option<u64>, in_guild: bool) -> Conversation {
    Conversation {
        channel_id: channel_id.to_string(),
        thread_id: is_thread_type(channel_type).then(|| channel_id.to_string()),
        direct: !in_guild,
    }
}

/// A user object's display name: `global_name`, else `username`.
pub fn display_name(user: &Value) -> String {
    str_at(user, "global_name")
        .filter(|n| !n.is_empty())
        .or_else(|| str_at(user, "username"))
        .unwrap_or("")
        .to_string()
}

/// The message for the host if a MESSAGE_CREATE `d` is addressed to the
/// bot `bot_id`: a DM, a mention, or a message in a thread (the host drops
/// threads it does not route). Bots, the bot itself and system messages are
/// ignored. Attachments over `max_bytes` are listed as skipped.
pub fn parse_message(d: &Value, bot_id: &str, max_bytes: u64) -> Option<Draft> {
    let author = d.get("author")?;
    let user_id = str_at(author, "id")?;
    if author.get("bot").and_then(Value::as_bool) == Some(true) || user_id == bot_id {
        return None;
    }
    // 0 DEFAULT and 19 REPLY are what people type; the rest are system messages.
    if !matches!(d.get("type").and_then(Value::as_u64), None | Some(0 | 19)) {
        return None;
    }
    let channel_id = str_at(d, "channel_id")?;
    let in_guild = str_at(d, "guild_id").is_some();
    let channel_type = d.get("channel_type").and_then(Value::as_u64);
    if in_guild && !mentions_user(d, bot_id) && !is_thread_type(channel_type) {
        return None;
    }
    let mut downloads = Vec::new();
    let mut skipped = Vec::new();
    for a in d
        .get("attachments")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let filename = str_at(a, "filename").unwrap_or("attachment").to_string();
        let size = a.get("size").and_then(Value::as_u64).unwrap_or(0);
        match str_at(a, "url") {
            _ if size > max_bytes => {
                skipped.push(format!("{filename}: larger than {max_bytes} bytes"));
            }
            Some(url) => downloads.push(AttachmentRef {
                filename,
                url: url.to_string(),
                content_type: str_at(a, "content_type").map(str::to_string),
            }),
            None => skipped.push(format!("{filename}: no download URL")),
        }
    }
    let text = strip_mention(str_at(d, "content").unwrap_or(""), bot_id);
    if text.is_empty() && downloads.is_empty() && skipped.is_empty() {
        return None;
    }
    Some(Draft {
        message: InboundMessage {
            conversation: conversation(channel_id, channel_type, in_guild),
            message_id: str_at(d, "id")?.to_string(),
            user_id: user_id.to_string(),
            user_name: display_name(author),
            text,
            attachments: Vec::new(),
            skipped_attachments: skipped,
        },
        downloads,
    })
}

/// Fetches `url` (no authorization), failing past `max_bytes`.
fn download(url: &str, max_bytes: u64) -> Result<Vec<u8>, String> {
    let mut resp = Request::get(url)
        .header("user-agent", USER_AGENT)
        .send()
        .map_err(|e| e.to_string())?;
    if resp.status != 200 {
        return Err(format!("download failed with HTTP {}", resp.status));
    }
    let mut data = Vec::new();
    while let Some(chunk) = resp.next_chunk().map_err(|e| e.to_string())? {
        data.extend_from_slice(&chunk);
        if data.len() as u64 > max_bytes {
            return Err(format!("larger than {max_bytes} bytes"));
        }
    }
    Ok(data)
}

/// The draft's message with its attachments downloaded (failures listed as
/// skipped). A global rate limit longer than `budget_ms` skips downloads.
pub fn fetch_attachments(
    draft: Draft,
    rest: &Rest,
    max_bytes: u64,
    budget_ms: u64,
) -> InboundMessage {
    let mut message = draft.message;
    for a in draft.downloads {
        if !rest.wait_global(budget_ms) {
            message.skipped_attachments.push(format!(
                "{}: not downloaded (Discord rate limit)",
                a.filename
            ));
            continue;
        }
        match download(&a.url, max_bytes) {
            Ok(data) => message.attachments.push(Attachment {
                filename: a.filename,
                content_type: a.content_type,
                data,
            }),
            Err(e) => {
                turnstone_plugin_sdk::host::log(
                    turnstone_plugin_sdk::host::Level::Warn,
                    &format!("attachment {} not downloaded: {e}", a.filename),
                );
                message
                    .skipped_attachments
                    .push(format!("{}: {e}", a.filename));
            }
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(extra: Value) -> Value {
        let mut d = json!({
            "id": "m1", "channel_id": "c1", "guild_id": "g", "channel_type": 0, "type": 0,
            "content": "hello <@111>", "mentions": [{"id": "111"}],
            "author": {"id": "333", "username": "alice", "global_name": "Alice"},
            "attachments": []
        });
        if let (Some(d), Some(extra)) = (d.as_object_mut(), extra.as_object()) {
            for (k, v) in extra {
                d.insert(k.clone(), v.clone());
            }
        }
        d
    }

    #[test]
    fn mentions_in_guilds_are_delivered_stripped() {
        let draft = parse_message(&msg(json!({})), "111", 100);
        let Some(draft) = draft else {
            panic!("expected a message")
        };
        assert_eq!(draft.message.text, "hello");
        assert_eq!(draft.message.user_name, "Alice");
        assert_eq!(draft.message.conversation.channel_id, "c1");
        assert!(draft.message.conversation.thread_id.is_none());
        assert!(!draft.message.conversation.direct);
    }

    #[test]
    fn unaddressed_bot_and_system_messages_are_ignored() {
        let plain = json!({"content": "hello", "mentions": []});
        assert!(parse_message(&msg(plain.clone()), "111", 100).is_none());
        let bot = json!({"author": {"id": "444", "username": "b", "bot": true}});
        assert!(parse_message(&msg(bot), "111", 100).is_none());
        let me = json!({"author": {"id": "111", "username": "me"}});
        assert!(parse_message(&msg(me), "111", 100).is_none());
        assert!(parse_message(&msg(json!({"type": 18})), "111", 100).is_none());
        // DMs and threads need no mention.
        let mut dm = msg(plain.clone());
        if let Some(o) = dm.as_object_mut() {
            o.remove("guild_id");
        }
        let Some(d) = parse_message(&dm, "111", 100) else {
            panic!("dm")
        };
        assert!(d.message.conversation.direct);
        let mut thread = plain;
        thread["channel_type"] = json!(11);
        let Some(t) = parse_message(&msg(thread), "111", 100) else {
            panic!("thread")
        };
        assert_eq!(t.message.conversation.thread_id.as_deref(), Some("c1"));
    }

    #[test]
    fn large_attachments_are_skipped() {
        let d = msg(json!({"attachments": [
            {"filename": "a.txt", "size": 10, "url": "https://cdn.discordapp.com/a", "content_type": "text/plain"},
            {"filename": "b.bin", "size": 1000, "url": "https://cdn.discordapp.com/b"}
        ]}));
        let Some(draft) = parse_message(&d, "111", 100) else {
            panic!("expected a message")
        };
        assert_eq!(draft.downloads.len(), 1);
        assert_eq!(draft.downloads[0].filename, "a.txt");
        assert_eq!(
            draft.message.skipped_attachments,
            vec!["b.bin: larger than 100 bytes"]
        );
    }
}
