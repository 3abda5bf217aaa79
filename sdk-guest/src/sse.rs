//! Server-sent events decoding for streaming HTTP APIs (provider adapters).

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
        // Walk the lines with a cursor and drop the consumed prefix once, so a
        // large chunk of many small events costs linear time.
        let buf = std::mem::take(&mut self.buf);
        let mut start = 0;
        while let Some(nl) = buf[start..].iter().position(|&b| b == b'\n') {
            let mut line = &buf[start..start + nl];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            self.line(&String::from_utf8_lossy(line), &mut out);
            start += nl + 1;
        }
        self.buf = buf;
        self.buf.drain(..start);
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
            // One data line (nearly every event) is moved out, not joined.
            match self.data.len() {
                0 => {}
                1 => out.extend(self.data.pop()),
                _ => out.push(std::mem::take(&mut self.data).join("\n")),
            }
            return;
        }
        if let Some(rest) = line.strip_prefix("data:") {
            self.data
                .push(rest.strip_prefix(' ').unwrap_or(rest).to_string());
        }
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
}
