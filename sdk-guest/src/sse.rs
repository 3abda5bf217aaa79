//! Server-sent events decoding for streaming HTTP APIs (provider adapters).

use std::convert::Infallible;

/// Incremental SSE decoder: feed body chunks, get the `data` payload of each
/// complete event (multi-line data joined with `\n`; comments and other fields
/// ignored). Handles `\n`, `\r\n` and events split anywhere across chunks.
#[derive(Default)]
pub struct SseDecoder {
    /// Bytes after the last complete line.
    buf: Vec<u8>,
    /// Data lines of the event being read that arrived in an earlier push.
    data: Vec<String>,
}

/// The data lines of the event being read within one push: a stream is
/// thousands of one-line events, so that line is borrowed from the buffer
/// rather than copied into a `String` of its own.
enum Pending {
    None,
    /// One data line, as a range of the buffer (not yet checked as UTF-8).
    Borrowed(usize, usize),
    /// Moved into `SseDecoder::data`.
    Owned,
}

impl SseDecoder {
    /// Feeds bytes; returns the events completed by them.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        let Ok(()) = self.push_each(bytes, |data| {
            out.push(data.to_string());
            Ok::<(), Infallible>(())
        });
        out
    }

    /// Feeds bytes and hands the `data` payload of each event they complete to
    /// `each`, borrowed: the common one-line event costs no allocation. Stops
    /// at the first error `each` returns (the decoder keeps the unread rest).
    pub fn push_each<E>(
        &mut self,
        bytes: &[u8],
        mut each: impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), E> {
        self.buf.extend_from_slice(bytes);
        let buf = std::mem::take(&mut self.buf);
        let mut pending = if self.data.is_empty() {
            Pending::None
        } else {
            Pending::Owned
        };
        // Walk the lines with a cursor and drop the consumed prefix once, so a
        // large chunk of many small events costs linear time.
        let mut start = 0;
        let mut result = Ok(());
        while let Some(nl) = memchr::memchr(b'\n', &buf[start..]) {
            let (from, mut to) = (start, start + nl);
            start = to + 1;
            if to > from && buf[to - 1] == b'\r' {
                to -= 1;
            }
            if from == to {
                result = self.dispatch(&buf, &mut pending, &mut each);
                if result.is_err() {
                    break;
                }
                continue;
            }
            let Some(value) = data_value(&buf[from..to]) else {
                continue;
            };
            // The value runs to the end of the line.
            let from = to - value.len();
            // UTF-8 is checked once: when the event is handed out, or when
            // the line is copied (`own`), which replaces invalid bytes.
            match pending {
                Pending::None => pending = Pending::Borrowed(from, to),
                _ => {
                    self.own(&buf, &mut pending);
                    self.data
                        .push(String::from_utf8_lossy(&buf[from..to]).into_owned());
                    pending = Pending::Owned;
                }
            }
        }
        // An event whose blank line has not arrived yet keeps its data.
        self.own(&buf, &mut pending);
        self.buf = buf;
        self.buf.drain(..start);
        result
    }

    /// Flushes a final event not followed by a blank line.
    pub fn finish(&mut self) -> Vec<String> {
        // Whole lines a push stopped by an error left behind come first.
        let mut out = self.push(b"");
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let line = rest.strip_suffix(b"\r").unwrap_or(&rest);
            if let Some(value) = data_value(line) {
                self.data.push(String::from_utf8_lossy(value).into_owned());
            }
        }
        // One data line (nearly every event) is moved out, not joined.
        match self.data.len() {
            0 => {}
            1 => out.extend(self.data.pop()),
            _ => out.push(std::mem::take(&mut self.data).join("\n")),
        }
        out
    }

    /// Moves a borrowed data line into `self.data`.
    fn own(&mut self, buf: &[u8], pending: &mut Pending) {
        if let Pending::Borrowed(from, to) = *pending {
            self.data
                .push(String::from_utf8_lossy(&buf[from..to]).into_owned());
            *pending = Pending::Owned;
        }
    }

    /// A blank line ends the event: its data (if any) goes to `each`.
    fn dispatch<E>(
        &mut self,
        buf: &[u8],
        pending: &mut Pending,
        each: &mut impl FnMut(&str) -> Result<(), E>,
    ) -> Result<(), E> {
        match std::mem::replace(pending, Pending::None) {
            Pending::None => Ok(()),
            Pending::Borrowed(from, to) => match std::str::from_utf8(&buf[from..to]) {
                Ok(data) => each(data),
                // Invalid bytes are replaced, as `own` replaces them.
                Err(_) => each(&String::from_utf8_lossy(&buf[from..to])),
            },
            Pending::Owned => {
                let data = std::mem::take(&mut self.data);
                if data.len() == 1 {
                    each(&data[0])
                } else {
                    each(&data.join("\n"))
                }
            }
        }
    }
}

/// The value of a `data` field line (one leading space removed), or `None`
/// for any other line. A bare `data` line is an empty data line.
fn data_value(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"data")?;
    if rest.is_empty() {
        return Some(rest);
    }
    let rest = rest.strip_prefix(b":")?;
    Some(rest.strip_prefix(b" ").unwrap_or(rest))
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

    /// Every event of a stream with one- and many-line events, other fields,
    /// comments, a bare `data` line, CRLF and non-UTF-8 bytes, cut at every
    /// byte into two pushes.
    #[test]
    fn every_cut_of_a_stream_gives_the_same_events() {
        let stream: &[u8] =
            b"event: x\ndata: {\"a\":1}\n\n: ping\r\n\r\ndata:no space\r\nid: 7\r\n\r\n\
            data: one\ndata\ndata: three\n\ndata: caf\xc3\xa9\n\ndata: bad \xff byte\n\n\
            retry: 5\ndataX: not data\n\ndata: [DONE]";
        let want = [
            "{\"a\":1}",
            "no space",
            "one\n\nthree",
            "café",
            "bad \u{fffd} byte",
            "[DONE]",
        ];
        for cut in 0..=stream.len() {
            let mut d = SseDecoder::default();
            let mut got = d.push(&stream[..cut]);
            got.extend(d.push(&stream[cut..]));
            got.extend(d.finish());
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    #[test]
    fn an_error_from_the_handler_stops_at_that_event_and_keeps_the_rest() {
        let mut d = SseDecoder::default();
        let mut seen = Vec::new();
        let r = d.push_each(b"data: 1\n\ndata: 2\n\ndata: 3\n\n", |e| {
            seen.push(e.to_string());
            if e == "2" { Err("stop") } else { Ok(()) }
        });
        assert_eq!(r, Err("stop"));
        assert_eq!(seen, ["1", "2"]);
        assert_eq!(d.push(b""), ["3"], "the unread event is still there");

        let mut d = SseDecoder::default();
        let r = d.push_each(b"data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4", |e| {
            if e == "1" { Err("stop") } else { Ok(()) }
        });
        assert_eq!(r, Err("stop"));
        assert_eq!(
            d.finish(),
            ["2", "3", "4"],
            "finish reads the lines left behind"
        );
    }
}
