//! Server-sent events decoding and `<think>` tag splitting, independent of I/O.

/// Incremental SSE decoder: feed body chunks, get the `data` payload of each
/// complete event (multi-line data joined with `\n`; comments and other fields
/// ignored). Handles `\n`, `\r\n` and events split anywhere across chunks.
#[derive(Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    data: Vec<String>,
}

impl SseDecoder {
    /// Feeds bytes; returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            self.line(&String::from_utf8_lossy(&line), &mut out);
        }
        out
    }

    /// Flushes a final event not followed by a blank line.
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.buf.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.buf)).into_owned();
            self.line(rest.trim_end_matches('\r'), &mut out);
        }
        self.line("", &mut out);
        out
    }

    fn line(&mut self, line: &str, out: &mut Vec<String>) {
        if line.is_empty() {
            if !self.data.is_empty() {
                out.push(std::mem::take(&mut self.data).join("\n"));
            }
            return;
        }
        if let Some(rest) = line.strip_prefix("data:") {
            self.data
                .push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
        }
    }
}

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
    /// Feeds text; returns `(is_reasoning, text)` pieces that are certain.
    pub fn push(&mut self, text: &str) -> Vec<(bool, String)> {
        self.pending.push_str(text);
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
    fn events_split_across_chunks_and_crlf() {
        let mut d = SseDecoder::default();
        let mut got = d.push(b"data: {\"a\"");
        got.extend(d.push(b":1}\r\n\r\n: comment\n\ndata: x\ndata: y\n"));
        got.extend(d.push(b"\ndata: [DONE]"));
        got.extend(d.finish());
        assert_eq!(got, ["{\"a\":1}", "x\ny", "[DONE]"]);
    }

    #[test]
    fn think_tags_split_anywhere() {
        let text = "Hi<think>plan it</think>Answer";
        for cut in 0..text.len() {
            let mut s = ThinkSplitter::default();
            let mut pieces = s.push(&text[..cut]);
            pieces.extend(s.push(&text[cut..]));
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
        assert_eq!(s.push("a < b"), vec![(false, "a < b".to_string())]);
    }
}
