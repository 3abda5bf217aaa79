//! Block Kit builders (the approval prompt and the deny-with-feedback modal),
//! the modal's `private_metadata`, and where a post is threaded.

use serde_json::{Value, json};

/// The feedback modal's `callback_id`.
pub const FEEDBACK_CALLBACK_ID: &str = "ts_feedback";
/// The approval actions block's `block_id`.
pub const APPROVAL_BLOCK_ID: &str = "ts_approval";
/// Slack's limit on a section block's text.
pub const SECTION_MAX_CHARS: usize = 3000;

/// What the feedback modal carries about the prompt it answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The prompt's channel.
    pub channel_id: String,
    /// The prompt message's ts.
    pub message_ts: String,
    /// The thread the prompt lives in.
    pub thread_ts: Option<String>,
    /// The prompt's cycle id.
    pub cycle_id: String,
}

/// `<channel>|<message_ts>|<thread_ts or empty>|<cycle>`.
pub fn encode_metadata(m: &Metadata) -> String {
    format!(
        "{}|{}|{}|{}",
        m.channel_id,
        m.message_ts,
        m.thread_ts.as_deref().unwrap_or_default(),
        m.cycle_id
    )
}

/// Parses [`encode_metadata`]'s form (the cycle id may itself contain `|`).
pub fn decode_metadata(s: &str) -> Option<Metadata> {
    let mut parts = s.splitn(4, '|');
    let channel_id = parts.next().filter(|p| !p.is_empty())?;
    let message_ts = parts.next().filter(|p| !p.is_empty())?;
    let thread_ts = parts.next()?;
    let cycle_id = parts.next().filter(|p| !p.is_empty())?;
    Some(Metadata {
        channel_id: channel_id.into(),
        message_ts: message_ts.into(),
        thread_ts: (!thread_ts.is_empty()).then(|| thread_ts.to_string()),
        cycle_id: cycle_id.into(),
    })
}

/// Escapes `&`, `<` and `>` for mrkdwn, stopping before the escaped text
/// would exceed `budget` characters; the flag says whether it was cut.
fn escape_within(s: &str, budget: usize) -> (String, bool) {
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let piece = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            _ => "",
        };
        let len = if piece.is_empty() { 1 } else { piece.len() };
        if used + len > budget {
            return (out, true);
        }
        used += len;
        if piece.is_empty() {
            out.push(c);
        } else {
            out.push_str(piece);
        }
    }
    (out, false)
}

/// The prompt's section text: `*Approval needed*`, the header, and the
/// body in a code block, at most [`SECTION_MAX_CHARS`] characters.
pub fn approval_text(header: &str, body: Option<&str>) -> String {
    let title = "*Approval needed*\n";
    let (head, cut) = escape_within(header, 1000);
    let mut text = format!("{title}{head}{}", if cut { "…" } else { "" });
    if let Some(body) = body.filter(|b| !b.trim().is_empty()) {
        let open = "\n```\n";
        let close = "\n```";
        let used = text.chars().count() + open.len() + close.len();
        // Room for the body, keeping one character for the ellipsis.
        let budget = SECTION_MAX_CHARS.saturating_sub(used + 1);
        let (b, cut) = escape_within(body.trim_end(), budget);
        text.push_str(open);
        text.push_str(&b);
        if cut {
            text.push('…');
        }
        text.push_str(close);
    }
    text
}

fn button(action_id: &str, label: &str, cycle_id: &str, style: Option<&str>) -> Value {
    let mut b = json!({
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": label},
        "value": cycle_id,
    });
    if let Some(style) = style {
        b["style"] = json!(style);
    }
    b
}

/// The prompt's blocks: the section and the four buttons.
pub fn approval_blocks(header: &str, body: Option<&str>, cycle_id: &str) -> Value {
    json!([
        {"type": "section", "text": {"type": "mrkdwn", "text": approval_text(header, body)}},
        {"type": "actions", "block_id": APPROVAL_BLOCK_ID, "elements": [
            button("ts_approve", "Approve", cycle_id, Some("primary")),
            button("ts_always", "Always", cycle_id, None),
            button("ts_deny", "Deny", cycle_id, Some("danger")),
            button("ts_denyfb", "Deny with feedback…", cycle_id, None),
        ]},
    ])
}

/// The prompt's notification text.
pub fn approval_fallback(header: &str) -> String {
    format!("Approval needed: {header}")
}

/// The deny-with-feedback modal for `views.open`.
pub fn feedback_modal(meta: &Metadata) -> Value {
    json!({
        "type": "modal",
        "callback_id": FEEDBACK_CALLBACK_ID,
        "private_metadata": encode_metadata(meta),
        "title": {"type": "plain_text", "text": "Deny with feedback"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [{
            "type": "input",
            "block_id": "fb",
            "label": {"type": "plain_text", "text": "What should be done instead?"},
            "element": {"type": "plain_text_input", "action_id": "text", "multiline": true},
        }],
    })
}

/// The `thread_ts` of a post: the conversation's thread, else `reply_to`
/// when a thread is to be started or when answering in a channel (Slack
/// threads on the root message's ts); none for a top-level post.
pub fn post_thread_ts(
    thread_id: Option<&str>,
    reply_to: Option<&str>,
    start_thread: bool,
    direct: bool,
) -> Option<String> {
    if let Some(t) = thread_id {
        return Some(t.to_string());
    }
    if start_thread || !direct {
        return reply_to.map(str::to_string);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trips() {
        let m = Metadata {
            channel_id: "C1".into(),
            message_ts: "1.2".into(),
            thread_ts: Some("0.9".into()),
            cycle_id: "cyc|odd".into(),
        };
        let s = encode_metadata(&m);
        assert_eq!(s, "C1|1.2|0.9|cyc|odd");
        assert_eq!(decode_metadata(&s), Some(m.clone()));
        let top = Metadata {
            thread_ts: None,
            ..m
        };
        assert_eq!(encode_metadata(&top), "C1|1.2||cyc|odd");
        assert_eq!(decode_metadata("C1|1.2||cyc|odd"), Some(top));
        assert_eq!(decode_metadata("C1|1.2|"), None);
        assert_eq!(decode_metadata("C1|1.2||"), None);
        assert_eq!(decode_metadata(""), None);
    }

    #[test]
    fn approval_text_fits_a_section() {
        assert_eq!(
            approval_text("bash: ls", None),
            "*Approval needed*\nbash: ls"
        );
        assert_eq!(
            approval_text("edit: a<b>", Some("x & y\n")),
            "*Approval needed*\nedit: a&lt;b&gt;\n```\nx &amp; y\n```"
        );
        let long = "z".repeat(10_000);
        let t = approval_text("write_file: big", Some(&long));
        assert_eq!(t.chars().count(), SECTION_MAX_CHARS);
        assert!(t.ends_with("…\n```"));
        let amps = "&".repeat(4000);
        let t = approval_text("h", Some(&amps));
        assert!(t.chars().count() <= SECTION_MAX_CHARS);
        assert!(t.contains("&amp;…"));
    }

    #[test]
    fn approval_blocks_carry_four_buttons() {
        let b = approval_blocks("bash: ls", None, "c1");
        let els = b[1]["elements"].as_array().unwrap();
        assert_eq!(b[1]["block_id"], APPROVAL_BLOCK_ID);
        let ids: Vec<&str> = els
            .iter()
            .map(|e| e["action_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["ts_approve", "ts_always", "ts_deny", "ts_denyfb"]);
        assert!(els.iter().all(|e| e["value"] == "c1"));
        assert_eq!(els[0]["style"], "primary");
        assert_eq!(els[2]["style"], "danger");
        assert!(els[1].get("style").is_none());
        assert_eq!(els[3]["text"]["text"], "Deny with feedback…");
    }

    #[test]
    fn feedback_modal_shape() {
        let m = Metadata {
            channel_id: "C1".into(),
            message_ts: "1.2".into(),
            thread_ts: None,
            cycle_id: "c".into(),
        };
        let v = feedback_modal(&m);
        assert_eq!(v["callback_id"], FEEDBACK_CALLBACK_ID);
        assert_eq!(v["private_metadata"], "C1|1.2||c");
        assert_eq!(v["title"]["text"], "Deny with feedback");
        assert_eq!(v["submit"]["text"], "Deny");
        assert_eq!(v["blocks"][0]["block_id"], "fb");
        assert_eq!(v["blocks"][0]["element"]["action_id"], "text");
        assert_eq!(v["blocks"][0]["element"]["multiline"], true);
    }

    #[test]
    fn posts_thread_on_the_right_ts() {
        assert_eq!(
            post_thread_ts(Some("t"), Some("r"), true, false).as_deref(),
            Some("t")
        );
        assert_eq!(
            post_thread_ts(None, Some("r"), true, true).as_deref(),
            Some("r")
        );
        assert_eq!(
            post_thread_ts(None, Some("r"), false, false).as_deref(),
            Some("r")
        );
        assert_eq!(post_thread_ts(None, Some("r"), false, true), None);
        assert_eq!(post_thread_ts(None, None, true, false), None);
    }
}
