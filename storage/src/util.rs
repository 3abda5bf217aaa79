//! Timestamps and ids.

use rand::RngCore;
use std::time::{Duration, SystemTime};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Formats a time as fixed-width RFC 3339 UTC with milliseconds, which sorts as text.
pub fn format_ts(t: SystemTime) -> String {
    let dt = OffsetDateTime::from(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.millisecond()
    )
}

/// Now, formatted.
pub fn now() -> String {
    format_ts(SystemTime::now())
}

/// `age` ago, formatted (for "older than" comparisons).
pub fn ago(age: Duration) -> String {
    format_ts(
        SystemTime::now()
            .checked_sub(age)
            .unwrap_or(SystemTime::UNIX_EPOCH),
    )
}

/// Parses a stored timestamp.
pub fn parse_ts(s: &str) -> Option<SystemTime> {
    OffsetDateTime::parse(s, &Rfc3339)
        .ok()
        .map(SystemTime::from)
}

/// `n` random bytes as lower-case hex.
pub fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    rand::rng().fill_bytes(&mut buf);
    hex::encode(buf)
}

/// Escapes `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern.
pub fn like_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Splits a search query into lower-case word tokens (letters and digits), the
/// same way on every backend.
pub fn search_tokens(q: &str) -> Vec<String> {
    q.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .take(32)
        .map(str::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_fixed_width_and_round_trip() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let s = format_ts(t);
        assert_eq!(s, "2023-11-14T22:13:20.123Z");
        assert_eq!(parse_ts(&s), Some(t));
        assert!(ago(Duration::from_secs(10)) < now());
    }

    #[test]
    fn tokens_and_like_escape() {
        assert_eq!(
            search_tokens("Hello, wörld! foo-bar"),
            ["hello", "wörld", "foo", "bar"]
        );
        assert_eq!(like_escape("50%_a\\b"), "50\\%\\_a\\\\b");
    }
}
