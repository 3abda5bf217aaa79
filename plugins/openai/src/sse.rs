//! `<think>` tag splitting for models that inline their reasoning.

pub use turnstone_plugin_sdk::sse::SseDecoder;

/// Splits streamed text into visible text and `<think>…</think>` reasoning,
/// even when a tag is cut across chunks.
#[derive(Default)]
pub struct ThinkSplitter {
    in_think: bool,
    pending: String,
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

impl ThinkSplitter {
    /// Whether `text` passes through whole, and as reasoning or not: nothing
    /// is held back and it holds no `<` (nearly every delta). The caller
    /// then uses `text` itself instead of calling [`ThinkSplitter::push`].
    pub fn passes(&self, text: &str) -> Option<bool> {
        (self.pending.is_empty() && !text.contains('<')).then_some(self.in_think)
    }

    /// Feeds text; returns `(is_reasoning, text)` pieces that are certain.
    pub fn push(&mut self, text: String) -> Vec<(bool, String)> {
        // Nearly every delta holds no `<` and nothing is held back: it passes
        // through as it is, without copying.
        if self.pending.is_empty() && !text.contains('<') {
            return vec![(self.in_think, text)];
        }
        self.pending.push_str(&text);
        let mut out = Vec::new();
        loop {
            let tag = if self.in_think { CLOSE } else { OPEN };
            if let Some(i) = self.pending.find(tag) {
                let before: String = self.pending.drain(..i).collect();
                self.pending.drain(..tag.len());
                if !before.is_empty() {
                    out.push((self.in_think, before));
                }
                self.in_think = !self.in_think;
                continue;
            }
            // Hold back a suffix that could be the start of the tag.
            let keep = (1..tag.len())
                .rev()
                .find(|&n| self.pending.ends_with(&tag[..n]))
                .unwrap_or(0);
            let emit_to = self.pending.len() - keep;
            if emit_to > 0 {
                let piece: String = self.pending.drain(..emit_to).collect();
                out.push((self.in_think, piece));
            }
            return out;
        }
    }

    /// Flushes held-back text at the end of the stream.
    pub fn finish(&mut self) -> Option<(bool, String)> {
        (!self.pending.is_empty()).then(|| (self.in_think, std::mem::take(&mut self.pending)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_tags_split_anywhere() {
        let text = "Hi<think>plan it</think>Answer";
        for cut in 0..text.len() {
            let mut s = ThinkSplitter::default();
            let mut pieces = s.push(text[..cut].to_string());
            pieces.extend(s.push(text[cut..].to_string()));
            pieces.extend(s.finish());
            let visible: String = pieces
                .iter()
                .filter(|p| !p.0)
                .map(|p| p.1.as_str())
                .collect();
            let reasoning: String = pieces
                .iter()
                .filter(|p| p.0)
                .map(|p| p.1.as_str())
                .collect();
            assert_eq!(
                (visible.as_str(), reasoning.as_str()),
                ("HiAnswer", "plan it"),
                "cut at {cut}"
            );
        }
        let mut s = ThinkSplitter::default();
        assert_eq!(s.push("a < b".into()), vec![(false, "a < b".to_string())]);
        assert_eq!(s.push("plain".into()), vec![(false, "plain".to_string())]);
        let mut s = ThinkSplitter::default();
        assert_eq!(s.push("<thi".into()), vec![]);
        assert_eq!(s.push("nk>x".into()), vec![(true, "x".to_string())]);
        assert_eq!(s.push("y".into()), vec![(true, "y".to_string())]);
    }
}
