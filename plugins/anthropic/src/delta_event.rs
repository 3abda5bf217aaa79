//! The Messages stream's commonest event, `content_block_delta`, read typed.
//!
//! A reply is thousands of these against a handful of other events. Read
//! into a `serde_json::Value` tree, each one allocated its two maps and every
//! key and string; read into these structs its text is borrowed from the
//! payload (copied only when it holds escapes) and other fields are skipped.
//! An event that does not fit them (another type of event, a field of an
//! unexpected type, a repeated field) is read as a `Value` as before, so the
//! typed reading is only ever taken where it agrees with that one (a test
//! holds them equal).
//!
//! Before serde, a one-pass reader on the SDK's [`json_scan`] scanner tries
//! the event: it reads the same fields when they hold no escapes and skips
//! the rest, and declines (leaving the event to serde) whatever it does not
//! read exactly as serde would.
//!
//! [`json_scan`]: turnstone_plugin_sdk::json_scan

use serde::Deserialize;
use std::borrow::Cow;
use turnstone_plugin_sdk::json_scan::{Scanner, once};
use turnstone_plugin_sdk::provider::borrowed_text;

/// A `content_block_delta` event, when `data` is one of the expected shape.
pub fn parse(data: &str) -> Option<BlockDeltaEvent<'_>> {
    scan(data)
        .or_else(|| parse_with_serde(data))
        .filter(|e| e.kind == "content_block_delta")
}

/// The typed reading alone, of any kind of event.
fn parse_with_serde(data: &str) -> Option<BlockDeltaEvent<'_>> {
    serde_json::from_str(data).ok()
}

/// The one-pass reading of any kind of event, or `None` for serde to decide.
fn scan(data: &str) -> Option<BlockDeltaEvent<'_>> {
    let mut s = Scanner::new(data);
    let (mut kind, mut index, mut delta) = (None, None, None);
    s.object(|s, key| match key {
        "type" => once(&mut kind, s.plain_str()?),
        "index" => {
            let n = if s.null() { None } else { Some(s.u64()?) };
            once(&mut index, n)
        }
        "delta" => {
            let d = if s.null() { None } else { Some(scan_delta(s)?) };
            once(&mut delta, d)
        }
        _ => s.skip(0),
    })?;
    s.finish()?;
    Some(BlockDeltaEvent {
        kind: Cow::Borrowed(kind?),
        index: index.flatten(),
        delta: delta.flatten(),
    })
}

fn scan_delta<'a>(s: &mut Scanner<'a>) -> Option<BlockDelta<'a>> {
    let mut fields: [Option<Option<&'a str>>; 5] = [None; 5];
    s.object(|s, key| {
        let slot = match key {
            "type" => 0,
            "text" => 1,
            "thinking" => 2,
            "signature" => 3,
            "partial_json" => 4,
            _ => return s.skip(1),
        };
        let text = s.opt_str()?;
        fields.get_mut(slot).and_then(|f| once(f, text))
    })?;
    let [kind, text, thinking, signature, partial_json] =
        fields.map(|f| f.flatten().map(Cow::Borrowed));
    Some(BlockDelta {
        kind,
        text,
        thinking,
        signature,
        partial_json,
    })
}

/// The fields of a block delta event that the adapter reads.
#[derive(Debug, Deserialize)]
pub struct BlockDeltaEvent<'a> {
    /// The event's type.
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    /// The content block the delta belongs to (0 when absent or null).
    #[serde(default)]
    pub index: Option<u64>,
    /// The delta itself (none when absent or null).
    #[serde(default, borrow)]
    pub delta: Option<BlockDelta<'a>>,
}

/// A delta's kind and its text fields; a missing or null one reads as "".
#[derive(Debug, Default, Deserialize)]
pub struct BlockDelta<'a> {
    /// `text_delta`, `thinking_delta`, `signature_delta`, `input_json_delta`.
    #[serde(rename = "type", default, borrow, deserialize_with = "borrowed_text")]
    pub kind: Option<Cow<'a, str>>,
    /// Visible text.
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub text: Option<Cow<'a, str>>,
    /// Reasoning text.
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub thinking: Option<Cow<'a, str>>,
    /// A thinking block's signature.
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub signature: Option<Cow<'a, str>>,
    /// A piece of a tool call's input.
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub partial_json: Option<Cow<'a, str>>,
}

impl BlockDelta<'_> {
    /// The named field's text ("" when absent or null), as the adapter's
    /// `Value` reading gives it.
    pub fn field(&self, name: &str) -> &str {
        let f = match name {
            "type" => &self.kind,
            "text" => &self.text,
            "thinking" => &self.thinking,
            "signature" => &self.signature,
            "partial_json" => &self.partial_json,
            _ => &None,
        };
        f.as_deref().unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use turnstone_plugin_sdk::edits::one_edit_variants;

    /// What the adapter's `Value` reading of a block delta gives: the
    /// index and the fields it reads, or `None` for another event.
    fn by_value(data: &str) -> Option<(u64, [String; 5])> {
        let v: Value = serde_json::from_str(data).ok()?;
        if v.get("type").and_then(Value::as_str) != Some("content_block_delta") {
            return None;
        }
        let index = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        let null = Value::Null;
        let delta = v.get("delta").unwrap_or(&null);
        let f = |k: &str| {
            delta
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        Some((
            index,
            ["type", "text", "thinking", "signature", "partial_json"].map(f),
        ))
    }

    fn typed(data: &str) -> Option<(u64, [String; 5])> {
        let e = parse(data)?;
        let d = e.delta.unwrap_or_default();
        Some((
            e.index.unwrap_or(0),
            ["type", "text", "thinking", "signature", "partial_json"].map(|k| d.field(k).into()),
        ))
    }

    const EVENTS: &[&str] = &[
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"Let me think"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}"#,
        r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"city\": \"Par"}}"#,
        r#"{"delta":{"text":"tok1 ","type":"text_delta"},"index":0,"type":"content_block_delta"}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"line\nbreak é"}}"#,
        r#"{"type":"content_block_delta","delta":null}"#,
        r#"{"type":"content_block_delta","index":null,"delta":{}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":null}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":7}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":"x"}"#,
        r#"{"type":"content_block_delta","index":0,"index":1,"delta":{"type":"text_delta","text":"x"}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a","text":"b"}}"#,
        r#"{"type":"\u0063ontent_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}"#,
    ];

    /// What a reading gave, whatever the event's kind.
    fn fields(e: BlockDeltaEvent<'_>) -> (String, Option<u64>, Option<[String; 5]>) {
        let d = e.delta.map(|d| {
            ["type", "text", "thinking", "signature", "partial_json"].map(|k| d.field(k).into())
        });
        (e.kind.into_owned(), e.index, d)
    }

    /// Wherever the one-pass reader answers, serde's typed reading accepts
    /// the same text and reads the same fields.
    #[test]
    fn wherever_the_one_pass_reader_answers_serde_agrees() {
        let bytes: &[u8] = b"\"\\{}[],: 0-1.eEnul7\t";
        let (mut answered, mut declined) = (0, 0);
        for data in EVENTS {
            for text in one_edit_variants(data, bytes) {
                let Some(fast) = scan(&text) else {
                    declined += 1;
                    continue;
                };
                answered += 1;
                let serde = parse_with_serde(&text)
                    .unwrap_or_else(|| panic!("read what serde rejects: {text}"));
                assert_eq!(fields(fast), fields(serde), "{text}");
            }
        }
        assert!(answered > 500 && declined > 500, "{answered} {declined}");
        // The common deltas take it, their text borrowed.
        for data in &EVENTS[..3] {
            let e = scan(data).unwrap_or_else(|| panic!("declined {data}"));
            let d = e.delta.expect("delta");
            assert!(
                d.text
                    .or(d.thinking)
                    .or(d.signature)
                    .is_some_and(|t| matches!(t, Cow::Borrowed(_)))
            );
        }
    }

    #[test]
    fn block_deltas_read_typed_and_borrowed() {
        let e = parse(EVENTS[0]).expect("a text delta");
        let d = e.delta.expect("delta");
        assert!(matches!(d.text, Some(Cow::Borrowed("Hello"))));
        assert_eq!((e.index, d.field("type")), (Some(0), "text_delta"));
        assert!(parse(EVENTS[9]).is_none(), "another event");
        assert!(parse(EVENTS[12]).is_none(), "a number where text goes");
    }

    /// The typed reading, wherever it answers, equals the `Value` reading,
    /// over the events above and every text one edit away from them
    /// (`one_edit_variants`: truncations, deletions, and changes or
    /// insertions of one of a set of bytes that break or bend their shape).
    #[test]
    fn wherever_the_typed_reading_answers_it_equals_the_value_reading() {
        let bytes: &[u8] = b"\"\\{}[],: 0-1.nul7\t";
        let (mut answered, mut declined) = (0, 0);
        let mut check = |text: &str| match typed(text) {
            Some(t) => {
                answered += 1;
                assert_eq!(Some(t), by_value(text), "{text}");
            }
            None => declined += 1,
        };
        for data in EVENTS {
            for text in one_edit_variants(data, bytes) {
                check(&text);
            }
        }
        assert!(answered > 500 && declined > 500, "{answered} {declined}");
    }
}
