//! Assembling a command's output the way the model reads it: stdout as is,
//! stderr lines prefixed with `[stderr] `, streamed to the front end line by
//! line, and capped at 256 KB (head and tail kept, with a notice between).

/// Most output returned to the model, in bytes.
pub const MAX_OUTPUT: usize = 256 * 1024;

/// Splits streamed bytes into complete lines and keeps the transcript bounded.
#[derive(Default)]
pub struct Transcript {
    head: String,
    tail: std::collections::VecDeque<String>,
    tail_bytes: usize,
    dropped: usize,
    partial_out: Vec<u8>,
    partial_err: Vec<u8>,
}

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Out,
    /// Standard error.
    Err,
}

impl Transcript {
    /// Adds bytes; returns the complete lines they finished (for streaming).
    pub fn push(&mut self, stream: Stream, data: &[u8]) -> Vec<String> {
        let partial = match stream {
            Stream::Out => &mut self.partial_out,
            Stream::Err => &mut self.partial_err,
        };
        partial.extend_from_slice(data);
        let mut lines = Vec::new();
        while let Some(i) = partial.iter().position(|b| *b == b'\n') {
            let raw: Vec<u8> = partial.drain(..=i).collect();
            lines.push(Self::format(stream, &raw));
        }
        for l in &lines {
            self.record(l.clone());
        }
        lines
    }

    /// Flushes unterminated final lines; returns them.
    pub fn finish(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        for stream in [Stream::Out, Stream::Err] {
            let partial = match stream {
                Stream::Out => std::mem::take(&mut self.partial_out),
                Stream::Err => std::mem::take(&mut self.partial_err),
            };
            if !partial.is_empty() {
                let mut raw = partial;
                raw.push(b'\n');
                lines.push(Self::format(stream, &raw));
            }
        }
        for l in &lines {
            self.record(l.clone());
        }
        lines
    }

    fn format(stream: Stream, raw: &[u8]) -> String {
        let text = String::from_utf8_lossy(raw);
        match stream {
            Stream::Out => text.into_owned(),
            Stream::Err => format!("[stderr] {text}"),
        }
    }

    fn record(&mut self, line: String) {
        // First half of the budget fills the head; then a rolling tail.
        if self.head.len() + line.len() <= MAX_OUTPUT / 2 && self.tail.is_empty() {
            self.head.push_str(&line);
            return;
        }
        self.tail_bytes += line.len();
        self.tail.push_back(line);
        while self.tail_bytes > MAX_OUTPUT / 2 {
            match self.tail.pop_front() {
                Some(old) => {
                    self.tail_bytes -= old.len();
                    self.dropped += old.len();
                }
                None => break,
            }
        }
    }

    /// The text for the model.
    pub fn text(&self) -> String {
        let mut out = self.head.clone();
        if self.dropped > 0 {
            out.push_str(&format!(
                "\n... [{} bytes of output truncated — output exceeded {} KB] ...\n\n",
                self.dropped,
                MAX_OUTPUT / 1024
            ));
        }
        for l in &self.tail {
            out.push_str(l);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_across_chunks_and_stderr_is_prefixed() {
        let mut t = Transcript::default();
        assert!(t.push(Stream::Out, b"hel").is_empty());
        assert_eq!(t.push(Stream::Out, b"lo\nwor"), ["hello\n"]);
        assert_eq!(t.push(Stream::Err, b"oops\n"), ["[stderr] oops\n"]);
        assert_eq!(t.finish(), ["wor\n"]);
        assert_eq!(t.text(), "hello\n[stderr] oops\nwor\n");
    }

    #[test]
    fn huge_output_keeps_head_and_tail_with_a_notice() {
        let mut t = Transcript::default();
        for i in 0..20_000 {
            t.push(
                Stream::Out,
                format!("line {i:06} {}\n", "x".repeat(20)).as_bytes(),
            );
        }
        let text = t.text();
        assert!(text.len() <= MAX_OUTPUT + 200, "{}", text.len());
        assert!(text.starts_with("line 000000"));
        assert!(
            text.trim_end()
                .ends_with(&format!("line 019999 {}", "x".repeat(20)))
        );
        assert!(text.contains("bytes of output truncated"));
    }
}
