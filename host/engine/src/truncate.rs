//! Tool-output truncation: keep the head and the tail, and tell the model how
//! much was cut.

use std::borrow::Cow;

/// Characters per token used to size limits from a context window.
pub const CHARS_PER_TOKEN: usize = 4;

/// Default truncation limit: half the context window, in characters.
pub fn default_limit(context_window_tokens: usize) -> usize {
    context_window_tokens * CHARS_PER_TOKEN / 2
}

/// The limit in force: the configured limit, further capped by the remaining
/// context budget (in characters) when one is known.
pub fn effective_limit(limit: usize, remaining_budget_chars: Option<usize>) -> usize {
    remaining_budget_chars.map_or(limit, |b| limit.min(b))
}

/// Truncates `output` to about `limit` characters, keeping the first and last
/// halves with a marker between them that the model can see.
pub fn truncate_output(output: &str, limit: usize) -> Cow<'_, str> {
    let total = output.chars().count();
    if total <= limit {
        return Cow::Borrowed(output);
    }
    let head_chars = limit / 2;
    let tail_chars = limit - head_chars;
    let head_end = output
        .char_indices()
        .nth(head_chars)
        .map_or(output.len(), |(i, _)| i);
    let tail_start = output
        .char_indices()
        .nth(total - tail_chars)
        .map_or(output.len(), |(i, _)| i);
    let cut = total - head_chars - tail_chars;
    Cow::Owned(format!(
        "{}\n\n... [{cut} chars truncated — output exceeded {limit} char limit] ...\n\n{}",
        &output[..head_end],
        &output[tail_start..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_untouched() {
        assert!(matches!(truncate_output("abc", 3), Cow::Borrowed("abc")));
    }

    #[test]
    fn long_output_keeps_head_and_tail_with_an_honest_marker() {
        let s: String = (0..100)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let t = truncate_output(&s, 10);
        assert_eq!(
            t,
            format!(
                "{}\n\n... [90 chars truncated — output exceeded 10 char limit] ...\n\n{}",
                &s[..5],
                &s[95..]
            )
        );
    }

    #[test]
    fn multibyte_text_is_cut_on_character_boundaries() {
        let s = "é".repeat(50);
        let t = truncate_output(&s, 4);
        assert!(t.starts_with("éé\n\n... [46 chars truncated"));
        assert!(t.ends_with("éé"));
    }

    #[test]
    fn limits_follow_the_context_window_and_budget() {
        assert_eq!(default_limit(131_072), 262_144);
        assert_eq!(effective_limit(1000, Some(300)), 300);
        assert_eq!(effective_limit(1000, None), 1000);
    }
}
