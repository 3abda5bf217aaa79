//! Built-in `recall`: full-text search of the caller's own past
//! conversations (messages, tool calls and results), newest first. The host
//! searches only the calling user's workstreams.

use turnstone_plugin_sdk::agent::history;
use turnstone_plugin_sdk::prelude::*;

/// Most hits per call.
const MAX_LIMIT: u32 = 100;
/// Characters of a hit shown around the match.
const SNIPPET_CHARS: usize = 300;

/// Arguments of `recall`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RecallArgs {
    /// Words or a phrase to find in past conversations.
    pub query: String,
    /// Most results (default 20, at most 100).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Results to skip, to page through more (default 0).
    #[serde(default)]
    pub offset: Option<u32>,
}

/// `text` cut to about [`SNIPPET_CHARS`] characters around the first word
/// of `query` it contains.
pub fn snippet(text: &str, query: &str) -> String {
    let lower = text.to_lowercase();
    let at = query
        .split_whitespace()
        .filter_map(|w| lower.find(&w.to_lowercase()))
        .min()
        .unwrap_or(0);
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let centre = chars.iter().position(|(i, _)| *i >= at).unwrap_or(0);
    let start = centre.saturating_sub(SNIPPET_CHARS / 3);
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let mut out: String = chars[start..end].iter().map(|(_, c)| *c).collect();
    out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if start > 0 {
        out.insert(0, '…');
    }
    if end < chars.len() {
        out.push('…');
    }
    out
}

/// `recall`.
pub struct Recall;

impl Tool for Recall {
    type Args = RecallArgs;
    const NAME: &'static str = "recall";
    const DESCRIPTION: &'static str = "Search your past conversations with this user (messages, tool calls and tool results across workstreams) for a word or phrase. Returns matches newest first with their workstream and time; use offset to page.";

    fn meta() -> ToolMeta {
        ToolMeta {
            auto_approve: true,
            primary_key: Some("query"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &RecallArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        if args.query.trim().is_empty() {
            return Err(ToolError::new("`query` must not be empty"));
        }
        Ok(Preview::auto(format!("recall: {}", args.query.trim())))
    }

    fn execute(args: RecallArgs, _ctx: &Context) -> Result<Output, ToolError> {
        let query = args.query.trim();
        if query.is_empty() {
            return Err(ToolError::new("`query` must not be empty"));
        }
        let limit = args.limit.unwrap_or(20).clamp(1, MAX_LIMIT);
        let offset = args.offset.unwrap_or(0);
        let hits =
            history::search(query, limit, offset).map_err(|e| ToolError::new(e.to_string()))?;
        if hits.is_empty() {
            return Ok(if offset > 0 {
                format!("No more matches for {query:?}.")
            } else {
                format!("Nothing in past conversations matches {query:?}.")
            }
            .into());
        }
        let mut out = format!(
            "{} matches for {query:?} (newest first{}):\n",
            hits.len(),
            if offset > 0 {
                format!(", from {}", offset + 1)
            } else {
                String::new()
            }
        );
        for h in &hits {
            let ws = match &h.workstream_name {
                Some(n) => format!("{n} ({})", h.workstream_id),
                None => h.workstream_id.clone(),
            };
            let who = match &h.tool_name {
                Some(t) => format!("{} {t}", h.role),
                None => h.role.clone(),
            };
            out.push_str(&format!(
                "- [{}] {ws} · {who}: {}\n",
                h.timestamp,
                snippet(&h.snippet, query)
            ));
        }
        if hits.len() as u32 == limit {
            out.push_str(&format!(
                "(more may match: offset {} shows the next page)\n",
                offset + limit
            ));
        }
        Ok(out.into())
    }
}

register_tools!(Recall);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_centre_on_the_match() {
        let text = format!("{} needle here {}", "x ".repeat(300), "y ".repeat(300));
        let s = snippet(&text, "Needle");
        assert!(s.contains("needle here"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.chars().count() <= SNIPPET_CHARS + 2);
        assert_eq!(snippet("short text", "zzz"), "short text");
    }
}
