//! A strict single-pass JSON scanner for a stream reader's fast path.
//!
//! A model stream is thousands of small JSON events of one or two shapes.
//! Under wasm, serde's derived visitors (matching every key against every
//! field, then skipping the unknown ones through `IgnoredAny`) are the
//! largest share of an adapter's time per event. A reader built on this
//! scanner walks an event's bytes once, borrows the strings it keeps, and
//! declines (`None`) whatever it does not read exactly as serde would: an
//! escape in any string or key, a value of an unexpected type, nesting
//! deeper than [`MAX_DEPTH`], or invalid JSON. A declined event goes to the
//! adapter's serde path, which then decides, so the fast path only ever
//! gives serde's answer sooner; an adapter should hold the two equal over
//! mutations of real events (see [`crate::edits::one_edit_variants`]).
//!
//! ```
//! use turnstone_plugin_sdk::json_scan::{Scanner, once};
//!
//! // The `text` of `{"type":"delta","text":"..."}`, or `None` for serde.
//! fn delta_text(event: &str) -> Option<&str> {
//!     let mut s = Scanner::new(event);
//!     let (mut kind, mut text) = (None, None);
//!     s.object(|s, key| match key {
//!         "type" => once(&mut kind, s.plain_str()?),
//!         "text" => once(&mut text, s.plain_str()?),
//!         _ => s.skip(0),
//!     })?;
//!     s.finish()?;
//!     (kind? == "delta").then_some(text?)
//! }
//!
//! assert_eq!(delta_text(r#"{"type":"delta","n":[1,{}],"text":"hi"}"#), Some("hi"));
//! // An escape is serde's to decode.
//! assert_eq!(delta_text(r#"{"type":"delta","text":"a\nb"}"#), None);
//! ```

/// Nesting [`Scanner::skip`] follows before declining.
pub const MAX_DEPTH: usize = 16;

/// The length of `b`'s prefix before its first `"`, `\\` or control
/// character (all of `b` when it holds none).
///
/// Eight bytes at a time: wasm has 64-bit integers but no SIMD here, and a
/// byte loop was the chat reader's largest cost. A byte's high bit in `hits`
/// is set when it matches; bits above the lowest match can be false (a
/// borrow carries into them), the lowest cannot, and only the lowest is read.
fn plain_run(b: &[u8]) -> usize {
    const ONES: u64 = u64::MAX / 255;
    const HIGH: u64 = ONES << 7;
    let is_zero = |x: u64| x.wrapping_sub(ONES) & !x;
    let mut words = b.chunks_exact(8);
    let mut n = 0;
    for word in words.by_ref() {
        // `chunks_exact(8)` yields eight bytes; were it ever short, a run
        // ending here makes the caller see no closing quote and decline.
        let Ok(bytes) = <[u8; 8]>::try_from(word) else {
            return n;
        };
        let w = u64::from_le_bytes(bytes);
        let control = w.wrapping_sub(ONES * 0x20) & !w;
        let hits = (is_zero(w ^ (ONES * u64::from(b'"')))
            | is_zero(w ^ (ONES * u64::from(b'\\')))
            | control)
            & HIGH;
        if hits != 0 {
            return n + (hits.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + words
        .remainder()
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .unwrap_or(words.remainder().len())
}

/// Sets `slot` once. A repeated field declines: serde's derived readers
/// reject it, and the adapter's lenient reader decides what it means.
pub fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.is_none().then(|| *slot = Some(value))
}

/// A cursor over one JSON text. Every method that reads a value answers
/// `None` when the bytes are not what it reads; the cursor is then
/// somewhere inside the text and the whole read should be given up.
#[derive(Debug, Clone)]
pub struct Scanner<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Scanner<'a> {
    /// A cursor at the start of `text`.
    pub fn new(text: &'a str) -> Self {
        Self { s: text, i: 0 }
    }

    fn bytes(&self) -> &'a [u8] {
        self.s.as_bytes()
    }

    /// Whether only whitespace is left: the end of a read of one whole text.
    pub fn finish(&mut self) -> Option<()> {
        self.ws();
        (self.i == self.s.len()).then_some(())
    }

    /// Skips JSON whitespace.
    pub fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.i) {
            self.i += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    pub fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.bytes().get(self.i).copied()
    }

    /// Consumes `c` after whitespace.
    pub fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Consumes `word` (a literal's bytes) exactly.
    fn word(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i + word.len();
        (self.bytes().get(self.i..end)? == word).then(|| self.i = end)
    }

    /// Consumes `null` if it is next.
    pub fn null(&mut self) -> bool {
        self.peek() == Some(b'n') && self.word(b"null").is_some()
    }

    /// A string with no escape in it, borrowed. Control characters are
    /// invalid JSON; an escape is left to serde, which decodes it.
    pub fn plain_str(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.i;
        let end = start + plain_run(self.bytes().get(start..)?);
        (*self.bytes().get(end)? == b'"').then_some(())?;
        self.i = end + 1;
        // Both ends sit next to an ASCII quote, so they are char boundaries.
        self.s.get(start..end)
    }

    /// `null` or a plain string.
    pub fn opt_str(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            return Some(None);
        }
        self.plain_str().map(Some)
    }

    /// A JSON number, by its grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    pub fn number(&mut self) -> Option<()> {
        self.ws();
        let b = self.bytes();
        let digits = |i: &mut usize| {
            let from = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > from
        };
        let mut i = self.i;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => return None,
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            digits(&mut i).then_some(())?;
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            digits(&mut i).then_some(())?;
        }
        self.i = i;
        Some(())
    }

    /// A number written as a plain integer (`0` or `[1-9][0-9]*`) that fits
    /// a `u64`. A sign, a fraction, an exponent or a larger value declines:
    /// serde's integer reading decides those.
    pub fn u64(&mut self) -> Option<u64> {
        self.ws();
        let b = self.bytes();
        let start = self.i;
        let mut end = start;
        while b.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = b.get(start..end)?;
        let leading_zero = digits.len() > 1 && digits.first() == Some(&b'0');
        let more = matches!(b.get(end), Some(b'.' | b'e' | b'E'));
        if digits.is_empty() || leading_zero || more {
            return None;
        }
        let value = digits.iter().try_fold(0u64, |n, d| {
            n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
        })?;
        self.i = end;
        Some(value)
    }

    /// As [`u64`](Self::u64), for a value that fits a `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        self.u64().and_then(|n| u32::try_from(n).ok())
    }

    /// Skips one value of any type, checking its grammar. `depth` is how
    /// deep the value sits; past [`MAX_DEPTH`] the read declines.
    pub fn skip(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => self.plain_str().map(drop),
            b'n' => self.word(b"null"),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'{' if depth < MAX_DEPTH => self.object(|s, _| s.skip(depth + 1)),
            b'[' if depth < MAX_DEPTH => self.array(|s, _| s.skip(depth + 1)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// Walks an object, handing each key to `field` with the cursor on its
    /// value; `field` must consume the value.
    pub fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.plain_str()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Walks an array, handing each element's position to `element`, which
    /// must consume it.
    pub fn array(&mut self, mut element: impl FnMut(&mut Self, usize) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        let mut n = 0;
        loop {
            element(self, n)?;
            n += 1;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A field read only as `null`, seen once: present but null is the same
    /// as absent for most optional fields, anything else is serde's.
    pub fn null_field(&mut self, seen: &mut bool) -> Option<()> {
        (self.null() && !std::mem::replace(seen, true)).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edits::one_edit_variants;

    /// Whether `text` is one JSON value by the scanner (strings without
    /// escapes only).
    fn scans(text: &str) -> bool {
        let mut s = Scanner::new(text);
        s.skip(0).is_some() && s.finish().is_some()
    }

    /// The word-at-a-time scan finds the first stop byte at every position
    /// and alignment, whatever follows it.
    #[test]
    fn the_run_ends_at_the_first_quote_backslash_or_control_character() {
        let stops = [b'"', b'\\', 0x00, 0x1f, b'\n'];
        let others = [b'a', b' ', 0x7f, 0x80, 0xff, 0x20, b'!', b'#', b'[', b']'];
        for len in 0..20 {
            for shift in 0..others.len() {
                // A mix of the bytes that do not stop the run.
                let plain: Vec<u8> = (0..len)
                    .map(|k| others[(k + shift) % others.len()])
                    .collect();
                assert_eq!(plain_run(&plain), len);
                for at in 0..len {
                    for &stop in &stops {
                        let mut v = plain.clone();
                        v[at] = stop;
                        // Anything after the first stop, stops included.
                        for (k, b) in v.iter_mut().enumerate().skip(at + 1) {
                            *b = stops[k % stops.len()];
                        }
                        assert_eq!(plain_run(&v), at, "{v:?}");
                    }
                }
            }
        }
    }

    /// Every text one edit away from valid JSON: where the scanner accepts
    /// it, serde accepts it too (the scanner never reads invalid JSON as
    /// valid), and where serde accepts one without escapes or deep nesting,
    /// so does the scanner.
    #[test]
    fn scanning_agrees_with_serde_on_every_one_edit_variant() {
        let seeds = [
            r#"{"a":[1,-2.5e+3,true,false,null,{}],"b":{"c":"d é"},"e":[]}"#,
            r#" [ 0 , -0 , 1E9 , 0.5 , "x" , [ [ ] ] ] "#,
        ];
        let mut checked = 0;
        for seed in seeds {
            for text in one_edit_variants(seed, b"\"\\{}[],:0-.eE+ \n") {
                let by_serde = serde_json::from_str::<serde_json::Value>(&text).is_ok();
                let scanned = scans(&text);
                if scanned {
                    assert!(by_serde, "scanned invalid JSON {text:?}");
                } else if by_serde {
                    assert!(text.contains('\\'), "declined valid JSON {text:?}");
                }
                checked += 1;
            }
        }
        assert!(checked > 1_000, "{checked} variants");
    }

    #[test]
    fn integers_read_plain_in_range_and_decline_the_rest() {
        let read32 = |text: &str| {
            let mut s = Scanner::new(text);
            let n = s.u32()?;
            s.finish().map(|()| n)
        };
        let read64 = |text: &str| {
            let mut s = Scanner::new(text);
            let n = s.u64()?;
            s.finish().map(|()| n)
        };
        assert_eq!(read32("0"), Some(0));
        assert_eq!(read32(" 42 "), Some(42));
        assert_eq!(read32("4294967295"), Some(u32::MAX));
        assert_eq!(read64("4294967296"), Some(1 << 32));
        assert_eq!(read64("18446744073709551615"), Some(u64::MAX));
        for declined in [
            "4294967296",
            "99999999999",
            "-1",
            "-0",
            "01",
            "1.0",
            "1e2",
            "",
            "x",
        ] {
            assert_eq!(read32(declined), None, "{declined:?}");
        }
        for declined in ["18446744073709551616", "-1", "00", "2E0", "1.5"] {
            assert_eq!(read64(declined), None, "{declined:?}");
        }
        // Whatever they read, serde reads as the same number.
        for seed in ["4294967", "42949672950", "1844674407370955161"] {
            for text in one_edit_variants(seed, b"0-.e9 ") {
                if let Some(n) = read32(&text) {
                    assert_eq!(serde_json::from_str::<u32>(&text).ok(), Some(n), "{text:?}");
                }
                if let Some(n) = read64(&text) {
                    assert_eq!(serde_json::from_str::<u64>(&text).ok(), Some(n), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn nesting_past_the_limit_declines() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        // The outermost array sits at depth 0, so MAX_DEPTH arrays fit.
        assert!(scans(&nested(MAX_DEPTH)));
        assert!(!scans(&nested(MAX_DEPTH + 1)));
    }

    #[test]
    fn a_repeated_field_declines() {
        let mut slot = None;
        assert_eq!(once(&mut slot, 1), Some(()));
        assert_eq!(once(&mut slot, 2), None);
        assert_eq!(slot, Some(1));
        let mut s = Scanner::new("null null 1");
        let mut seen = false;
        assert_eq!(s.null_field(&mut seen), Some(()));
        assert_eq!(s.null_field(&mut seen), None);
    }
}
