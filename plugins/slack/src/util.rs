//! Small pure helpers: the dedupe window, the reconnect backoff, form
//! decoding and text truncation.

use std::collections::{HashSet, VecDeque};

/// How many recent keys [`Dedupe`] remembers.
pub const DEDUPE_WINDOW: usize = 256;

/// Remembers the last [`DEDUPE_WINDOW`] keys (envelope ids, event ids,
/// `channel:ts` pairs) so redelivered or doubled events are handled once.
#[derive(Debug, Default)]
pub struct Dedupe {
    order: VecDeque<String>,
    keys: HashSet<String>,
}

impl Dedupe {
    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `key` was seen recently (does not record it).
    pub fn contains(&self, key: &str) -> bool {
        self.keys.contains(key)
    }

    /// Records `key`; true when it is new, false when it was seen recently.
    pub fn insert(&mut self, key: &str) -> bool {
        if self.keys.contains(key) {
            return false;
        }
        self.keys.insert(key.to_string());
        self.order.push_back(key.to_string());
        while self.order.len() > DEDUPE_WINDOW {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
        true
    }

    /// How many keys are remembered.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// The first reconnect delay.
pub const BACKOFF_START_MS: u64 = 100;
/// The longest reconnect delay.
pub const BACKOFF_MAX_MS: u64 = 30_000;

/// Reconnect delays: 0.1 s doubling to 30 s, reset after a `hello`.
#[derive(Debug, Clone)]
pub struct Backoff {
    next_ms: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Backoff {
    /// A backoff at its first delay.
    pub fn new() -> Self {
        Self {
            next_ms: BACKOFF_START_MS,
        }
    }

    /// The delay to use now; the following one doubles (up to the maximum).
    pub fn next_delay(&mut self) -> u64 {
        let d = self.next_ms;
        self.next_ms = (self.next_ms.saturating_mul(2)).min(BACKOFF_MAX_MS);
        d
    }

    /// Back to the first delay (after a successful `hello`).
    pub fn reset(&mut self) {
        self.next_ms = BACKOFF_START_MS;
    }
}

/// Decodes `application/x-www-form-urlencoded` text (`+` is a space,
/// `%XX` a byte); invalid escapes are kept as they are.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let hi = bytes.get(i + 1).and_then(|b| hex_val(*b));
                let lo = bytes.get(i + 2).and_then(|b| hex_val(*b));
                match (hi, lo) {
                    (Some(h), Some(l)) => {
                        out.push(h * 16 + l);
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The fields of a form-encoded body, decoded, in order.
pub fn parse_form(body: &str) -> Vec<(String, String)> {
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(pair), String::new()),
        })
        .collect()
}

/// `s` cut to at most `max` characters (on a character boundary).
pub fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedupe_keeps_the_last_256_keys() {
        let mut d = Dedupe::new();
        assert!(d.is_empty());
        assert!(d.insert("a"));
        assert!(!d.insert("a"));
        for i in 0..DEDUPE_WINDOW {
            assert!(d.insert(&format!("k{i}")));
        }
        assert_eq!(d.len(), DEDUPE_WINDOW);
        // "a" was the oldest and fell out of the window.
        assert!(!d.contains("a"));
        assert!(d.insert("a"));
        // k0 fell out when "a" came back; k1 is still there.
        assert!(!d.contains("k0"));
        assert!(d.contains("k1"));
        assert!(!d.insert("k255"));
    }

    #[test]
    fn backoff_doubles_to_thirty_seconds_and_resets() {
        let mut b = Backoff::new();
        let delays: Vec<u64> = (0..11).map(|_| b.next_delay()).collect();
        assert_eq!(
            delays,
            vec![
                100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000
            ]
        );
        b.reset();
        assert_eq!(b.next_delay(), 100);
    }

    #[test]
    fn form_bodies_decode() {
        assert_eq!(percent_decode("a+b%20c%7B%22x%22%7D"), "a b c{\"x\"}");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("caf%C3%A9"), "café");
        let f = parse_form("payload=%7B%22type%22%3A%22block_actions%22%7D&x=1&flag");
        assert_eq!(
            f,
            vec![
                (
                    "payload".to_string(),
                    "{\"type\":\"block_actions\"}".to_string()
                ),
                ("x".to_string(), "1".to_string()),
                ("flag".to_string(), String::new()),
            ]
        );
    }

    #[test]
    fn truncation_respects_characters() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("hi", 5), "hi");
        assert_eq!(truncate_chars("", 0), "");
    }
}
