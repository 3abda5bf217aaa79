//! Small pure helpers: text limits, mentions, pseudo-random jitter, URLs.

use serde_json::Value;

/// The longest message `content` Discord accepts.
pub const MAX_CONTENT_CHARS: usize = 2000;

/// `s` cut to at most `max` characters, ending in "…" when it was cut.
pub fn truncate_chars(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// Whether a message (`d` of MESSAGE_CREATE) mentions the user `bot_id`,
/// in its `mentions` list or as `<@id>` / `<@!id>` in the content.
pub fn mentions_user(d: &Value, bot_id: &str) -> bool {
    if bot_id.is_empty() {
        return false;
    }
    let listed = d
        .get("mentions")
        .and_then(Value::as_array)
        .is_some_and(|m| m.iter().any(|u| str_at(u, "id") == Some(bot_id)));
    let content = str_at(d, "content").unwrap_or("");
    listed
        || content.contains(&format!("<@{bot_id}>"))
        || content.contains(&format!("<@!{bot_id}>"))
}

/// `content` without mentions of `bot_id` (`<@id>`, `<@!id>`), trimmed.
pub fn strip_mention(content: &str, bot_id: &str) -> String {
    if bot_id.is_empty() {
        return content.trim().to_string();
    }
    content
        .replace(&format!("<@{bot_id}>"), "")
        .replace(&format!("<@!{bot_id}>"), "")
        .trim()
        .to_string()
}

/// A string field of a JSON object.
pub fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// The next value of a SplitMix64 sequence whose state is `state`.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A pseudo-random fraction in `[0, 1)` from the sequence `state`.
pub fn fraction(state: &mut u64) -> f64 {
    (splitmix64(state) >> 11) as f64 / (1u64 << 53) as f64
}

/// The gateway URL to open for a base URL from `/gateway/bot` or READY:
/// `?v=10&encoding=json` appended, with a `/` path when the URL has none.
pub fn gateway_url(base: &str) -> String {
    let base = base.trim();
    if base.contains('?') {
        return format!("{base}&v=10&encoding=json");
    }
    let after_scheme = base.split_once("://").map_or(base, |(_, rest)| rest);
    if after_scheme.contains('/') {
        format!("{base}?v=10&encoding=json")
    } else {
        format!("{base}/?v=10&encoding=json")
    }
}

/// The text of an approval prompt: a bold title, the header and the body in
/// a code block, at most [`MAX_CONTENT_CHARS`] in all.
pub fn prompt_content(header: &str, body: Option<&str>) -> String {
    const TITLE: &str = "**Approval needed**\n";
    const OPEN: &str = "\n```\n";
    const CLOSE: &str = "\n```";
    let title_len = TITLE.chars().count();
    let mut out = format!(
        "{TITLE}{}",
        truncate_chars(header, MAX_CONTENT_CHARS - title_len)
    );
    if let Some(body) = body.filter(|b| !b.trim().is_empty()) {
        // A fence inside the body would end the block early.
        let safe = body.replace("```", "``\u{200b}`");
        let used = out.chars().count() + OPEN.chars().count() + CLOSE.chars().count();
        let room = MAX_CONTENT_CHARS.saturating_sub(used);
        if room > 0 {
            out.push_str(OPEN);
            out.push_str(&truncate_chars(&safe, room));
            out.push_str(CLOSE);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate_chars("hello", 5), "hello");
        assert_eq!(truncate_chars("hello!", 5), "hell…");
        assert_eq!(truncate_chars("ééééé", 3), "éé…");
        assert_eq!(truncate_chars("abc", 0), "");
    }

    #[test]
    fn mentions_are_found_and_stripped() {
        let d = json!({"content": "hi <@!111> there", "mentions": []});
        assert!(mentions_user(&d, "111"));
        let d = json!({"content": "hi", "mentions": [{"id": "111"}]});
        assert!(mentions_user(&d, "111"));
        let d = json!({"content": "hi <@222>", "mentions": [{"id": "222"}]});
        assert!(!mentions_user(&d, "111"));
        assert!(!mentions_user(&d, ""));
        assert_eq!(strip_mention("<@111> do it", "111"), "do it");
        assert_eq!(strip_mention("  do <@!111> it <@111> ", "111"), "do  it");
        assert_eq!(strip_mention("<@222> hi", "111"), "<@222> hi");
    }

    #[test]
    fn gateway_urls_get_the_query() {
        assert_eq!(
            gateway_url("wss://gateway.discord.gg/"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            gateway_url("wss://gateway-us-east1-b.discord.gg"),
            "wss://gateway-us-east1-b.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            gateway_url("ws://127.0.0.1:9/gw"),
            "ws://127.0.0.1:9/gw?v=10&encoding=json"
        );
    }

    #[test]
    fn fractions_stay_in_range() {
        let mut s = 42;
        for _ in 0..1000 {
            let f = fraction(&mut s);
            assert!((0.0..1.0).contains(&f));
        }
    }

    #[test]
    fn prompts_fit_the_limit() {
        let p = prompt_content("bash: ls", Some("ls -la"));
        assert_eq!(p, "**Approval needed**\nbash: ls\n```\nls -la\n```");
        assert_eq!(prompt_content("x", None), "**Approval needed**\nx");
        let long = "y".repeat(5000);
        let p = prompt_content("bash", Some(&long));
        assert_eq!(p.chars().count(), MAX_CONTENT_CHARS);
        assert!(p.ends_with("…\n```"));
        let p = prompt_content(&long, Some("z"));
        assert!(p.chars().count() <= MAX_CONTENT_CHARS);
        assert!(!prompt_content("h", Some("a```b")).contains("a```b"));
    }
}
