//! One Responses API stream event, decoded into just the fields the lane
//! reads.
//!
//! A Responses stream is mostly `response.output_text.delta` events of
//! about 200 bytes, and it ends with events that repeat the whole reply
//! (`response.output_text.done`, `response.content_part.done`,
//! `response.output_item.done`, and `response.completed`, whose `output`
//! holds every item again); `response.created` echoes the request's
//! instructions and tools. Decoding each into a `serde_json::Value` built a
//! map and a string for every field of every event. These structs keep the
//! event's kind, its output index, the delta (borrowed from the payload
//! unless it holds escapes), the head of an output item and the usage
//! counts; everything else is read past without being kept.
//!
//! An event this shape does not fit (a field of an unexpected type, a
//! repeated field) fails here and goes to the lane's `Value` reader, which
//! reads what it can as before; so do the rare events that need the whole
//! item or message (replayed reasoning items, errors).
//!
//! The deltas, nearly every event of a stream, are tried first by a
//! one-pass reader on the SDK's [`json_scan`] scanner: it reads the kind,
//! the output index and a delta without escapes, skips the other fields,
//! and declines (leaving the event to serde) whatever it does not read
//! exactly as serde would, including any event with an `item` or a
//! `response`.
//!
//! [`json_scan`]: turnstone_plugin_sdk::json_scan

use serde::Deserialize;
use std::borrow::Cow;
use turnstone_plugin_sdk::json_scan::{Scanner, once};
use turnstone_plugin_sdk::provider::borrowed_text;

/// The fields of one stream event the lane uses.
#[derive(Debug, Deserialize)]
pub struct EventHead<'a> {
    /// The event's `type` (`response.output_text.delta`, …).
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    /// Which output item the event belongs to.
    #[serde(default)]
    pub output_index: u32,
    /// A delta's text or arguments.
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub delta: Option<Cow<'a, str>>,
    /// An output item's head (`response.output_item.added` and `.done`).
    #[serde(default, borrow)]
    pub item: Option<ItemHead<'a>>,
    /// The response's end state (`response.completed`, `.incomplete`).
    #[serde(default)]
    pub response: Option<ResponseTail>,
}

/// The fields of an output item the lane uses.
#[derive(Debug, Deserialize)]
pub struct ItemHead<'a> {
    /// `message`, `function_call`, `reasoning`, …
    #[serde(rename = "type", default, borrow)]
    pub kind: Option<Cow<'a, str>>,
    /// A function call's id.
    #[serde(default)]
    pub call_id: Option<String>,
    /// A function call's name.
    #[serde(default)]
    pub name: Option<String>,
    /// A function call's arguments so far.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// What the lane reads of the response at its end.
#[derive(Debug, Default, Deserialize)]
pub struct ResponseTail {
    /// Token counts.
    #[serde(default)]
    pub usage: Option<UsageCounts>,
    /// Why an incomplete response stopped.
    #[serde(default)]
    pub incomplete_details: Option<Incomplete>,
}

/// A response's token counts.
#[derive(Debug, Default, Deserialize)]
pub struct UsageCounts {
    /// Tokens read.
    #[serde(default)]
    pub input_tokens: u32,
    /// Tokens written, reasoning included.
    #[serde(default)]
    pub output_tokens: u32,
    /// Of the tokens read, those from the prompt cache.
    #[serde(default)]
    pub input_tokens_details: Option<TokenDetails>,
    /// Of the tokens written, the reasoning ones.
    #[serde(default)]
    pub output_tokens_details: Option<TokenDetails>,
}

/// The breakdown under `input_tokens_details` or `output_tokens_details`.
#[derive(Debug, Default, Deserialize)]
pub struct TokenDetails {
    /// Input tokens served from the cache.
    #[serde(default)]
    pub cached_tokens: u32,
    /// Output tokens spent reasoning.
    #[serde(default)]
    pub reasoning_tokens: u32,
}

/// Why a response is incomplete.
#[derive(Debug, Deserialize)]
pub struct Incomplete {
    /// `max_output_tokens`, `content_filter`.
    #[serde(default)]
    pub reason: Option<String>,
}

impl<'a> EventHead<'a> {
    /// The event's fields, or `None` when its shape is not this one (the
    /// caller then reads it as a `Value`).
    pub fn parse(data: &'a str) -> Option<Self> {
        Self::scan(data).or_else(|| Self::parse_with_serde(data))
    }

    /// The typed reading alone.
    fn parse_with_serde(data: &'a str) -> Option<Self> {
        serde_json::from_str(data).ok()
    }

    /// The one-pass reading of an event with neither `item` nor `response`
    /// (deltas and the like), or `None` for serde to decide.
    fn scan(data: &'a str) -> Option<Self> {
        let mut s = Scanner::new(data);
        let (mut kind, mut output_index, mut delta) = (None, None, None);
        s.object(|s, key| match key {
            "type" => once(&mut kind, s.plain_str()?),
            "output_index" => once(&mut output_index, s.u32()?),
            "delta" => once(&mut delta, s.plain_str()?),
            "item" | "response" => None,
            _ => s.skip(0),
        })?;
        s.finish()?;
        Some(Self {
            kind: Cow::Borrowed(kind?),
            output_index: output_index.unwrap_or(0),
            delta: delta.map(Cow::Borrowed),
            item: None,
            response: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::responses::ResponsesStream;
    use turnstone_plugin_sdk::edits::one_edit_variants;
    use turnstone_plugin_sdk::provider::StreamEvent;

    /// Events as the Responses API streams them (text, reasoning, a function
    /// call, hosted tool search, the end states), and this repository's
    /// scripted LLM's.
    const REAL: &[&str] = &[
        r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_68b","object":"response","created_at":1756315657,"status":"in_progress","background":false,"error":null,"incomplete_details":null,"instructions":"Be brief.","max_output_tokens":32000,"model":"gpt-5-2025-08-07","output":[],"parallel_tool_calls":true,"reasoning":{"effort":"medium","summary":null},"store":false,"temperature":1.0,"text":{"format":{"type":"text"},"verbosity":"medium"},"tool_choice":"auto","tools":[{"type":"function","description":"Read a file","name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}},"strict":false}],"top_p":1.0,"usage":null,"metadata":{}}}"#,
        r#"{"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_68b","object":"response","status":"in_progress","output":[],"usage":null}}"#,
        r#"{"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_68b","type":"reasoning","summary":[]}}"#,
        r#"{"type":"response.reasoning_summary_text.delta","sequence_number":3,"item_id":"rs_68b","output_index":0,"summary_index":0,"delta":"**Checking** the file","obfuscation":"Qx7aB"}"#,
        r#"{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"rs_68b","type":"reasoning","encrypted_content":"gAAAAABorxyz","summary":[{"type":"summary_text","text":"**Checking** the file"}]}}"#,
        r#"{"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"msg_68b","type":"message","status":"in_progress","content":[],"role":"assistant"}}"#,
        r#"{"type":"response.content_part.added","sequence_number":6,"item_id":"msg_68b","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}}"#,
        r#"{"type":"response.output_text.delta","sequence_number":7,"item_id":"msg_68b","output_index":1,"content_index":0,"delta":"Hello","logprobs":[],"obfuscation":"yfB5Jh8bH1q"}"#,
        r#"{"type":"response.output_text.delta","sequence_number":8,"item_id":"msg_68b","output_index":1,"content_index":0,"delta":" caf\u00e9\n\"ok\"","logprobs":[],"obfuscation":"k"}"#,
        r#"{"type":"response.output_text.delta","sequence_number":9,"item_id":"msg_68b","output_index":1,"content_index":0,"delta":" 日本 ☕","logprobs":[]}"#,
        r#"{"type":"response.output_text.done","sequence_number":10,"item_id":"msg_68b","output_index":1,"content_index":0,"text":"Hello café","logprobs":[]}"#,
        r#"{"type":"response.content_part.done","sequence_number":11,"item_id":"msg_68b","output_index":1,"content_index":0,"part":{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello café"}}"#,
        r#"{"type":"response.output_item.done","sequence_number":12,"output_index":1,"item":{"id":"msg_68b","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello café"}],"role":"assistant"}}"#,
        r#"{"type":"response.output_item.added","sequence_number":13,"output_index":2,"item":{"id":"fc_68b","type":"function_call","status":"in_progress","arguments":"","call_id":"call_Qz","name":"read_file"}}"#,
        r#"{"type":"response.function_call_arguments.delta","sequence_number":14,"item_id":"fc_68b","output_index":2,"delta":"{\"path\":","obfuscation":"p1"}"#,
        r#"{"type":"response.function_call_arguments.delta","sequence_number":15,"item_id":"fc_68b","output_index":2,"delta":"\"src/main.rs\"}","obfuscation":"p1"}"#,
        r#"{"type":"response.function_call_arguments.done","sequence_number":16,"item_id":"fc_68b","output_index":2,"arguments":"{\"path\":\"src/main.rs\"}"}"#,
        r#"{"type":"response.output_item.done","sequence_number":17,"output_index":2,"item":{"id":"fc_68b","type":"function_call","status":"completed","arguments":"{\"path\":\"src/main.rs\"}","call_id":"call_Qz","name":"read_file"}}"#,
        r#"{"type":"response.output_item.done","sequence_number":18,"output_index":3,"item":{"id":"tso_1","type":"tool_search_output","status":"completed","tools":[{"type":"function","name":"mcp__gh__search"}]}}"#,
        r#"{"type":"response.reasoning_text.delta","sequence_number":19,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"think"}"#,
        r#"{"type":"response.completed","sequence_number":20,"response":{"id":"resp_68b","object":"response","status":"completed","error":null,"incomplete_details":null,"output":[{"id":"msg_68b","type":"message","status":"completed","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Hello café"}],"role":"assistant"}],"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":310,"output_tokens_details":{"reasoning_tokens":256},"total_tokens":1510}}}"#,
        r#"{"type":"response.incomplete","sequence_number":21,"response":{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[],"usage":{"input_tokens":5,"output_tokens":2}}}"#,
        r#"{"type":"response.incomplete","sequence_number":21,"response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}"#,
        r#"{"type":"response.failed","sequence_number":5,"response":{"id":"resp_1","status":"failed","error":{"code":"server_error","message":"The model failed."},"output":[]}}"#,
        r#"{"type":"error","sequence_number":2,"code":"rate_limit_exceeded","message":"Slow down.","param":null}"#,
        r#"{"type":"response.web_search_call.in_progress","sequence_number":3,"output_index":0,"item_id":"ws_1"}"#,
    ];

    /// Shapes a one-byte change cannot reach: repeated fields, values of
    /// other types where the typed reader expects a number, string or object.
    const EDGES: &[&str] = &[
        r#"{"type":"response.output_text.delta","delta":"a","delta":"b"}"#,
        r#"{"type":"response.output_text.delta","type":"error","message":"x"}"#,
        r#"{"type":"response.output_text.delta","delta":7}"#,
        r#"{"type":"response.output_text.delta","delta":null}"#,
        r#"{"type":"response.output_text.delta"}"#,
        r#"{"type":"response.function_call_arguments.delta","output_index":"2","delta":"{}"}"#,
        r#"{"type":"response.function_call_arguments.delta","output_index":null,"delta":"{}"}"#,
        r#"{"type":"response.function_call_arguments.delta","output_index":4294967296,"delta":"{}"}"#,
        r#"{"type":"response.output_item.added","output_index":1,"item":"function_call"}"#,
        r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":null,"name":7}}"#,
        r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call"}}"#,
        r#"{"type":"response.output_item.done","item":{"type":"reasoning"},"item":{"type":"message"}}"#,
        r#"{"type":"response.output_item.done","item":{"type":null}}"#,
        r#"{"type":"response.completed","response":null}"#,
        r#"{"type":"response.completed"}"#,
        r#"{"type":"response.completed","response":{"usage":null}}"#,
        r#"{"type":"response.completed","response":{"usage":{"input_tokens":null,"output_tokens":-1}}}"#,
        r#"{"type":"response.completed","response":{"usage":{"input_tokens":4294967297}}}"#,
        r#"{"type":"response.completed","response":{"usage":{"input_tokens_details":{"cached_tokens":"9"}}}}"#,
        r#"{"type":"response.incomplete","response":{"incomplete_details":{"reason":7}}}"#,
        r#"{"type":"response.incomplete","response":{"incomplete_details":null}}"#,
        r#"{"type":"response.failed","response":{"error":null},"message":"m"}"#,
        r#"{"type":7}"#,
        r#"{"delta":"no type"}"#,
        r#"[]"#,
        r#"{}"#,
        "",
    ];

    /// What one stream does with `events`, read by `handle` (the typed
    /// reader first) or by `handle_value` alone: every event it emitted and
    /// each call's outcome.
    fn run(events: &[&str], typed: bool) -> Vec<String> {
        let mut out = Vec::new();
        let mut emitted = Vec::new();
        {
            let mut sink = |e: StreamEvent| {
                emitted.push(format!("{e:?}"));
                true
            };
            let mut s = ResponsesStream::new(&mut sink);
            for data in events {
                let r = if typed {
                    s.handle(data)
                } else {
                    s.handle_value(data)
                };
                out.push(format!("{r:?}"));
                out.push(format!("{:?}", s.flush()));
            }
            out.push(format!("{:?}", s.end()));
        }
        out.extend(emitted);
        out
    }

    #[test]
    fn real_events_take_the_typed_path() {
        for data in REAL {
            assert!(
                EventHead::parse(data).is_some(),
                "typed reader declined {data}"
            );
        }
        let e = EventHead::parse(REAL[7]).expect("parse");
        assert!(matches!(e.delta, Some(Cow::Borrowed("Hello"))));
        let e = EventHead::parse(REAL[8]).expect("parse");
        assert_eq!(e.delta.as_deref(), Some(" café\n\"ok\""));
        let usage = EventHead::parse(REAL[20])
            .and_then(|e| e.response)
            .and_then(|r| r.usage)
            .expect("usage");
        assert_eq!((usage.input_tokens, usage.output_tokens), (1200, 310));
        assert_eq!(
            usage.input_tokens_details.map(|d| d.cached_tokens),
            Some(1024)
        );
    }

    /// The fields the one-pass reader reads, for comparing its reading with
    /// serde's.
    fn head(e: &EventHead<'_>) -> (String, u32, Option<String>, bool, bool) {
        (
            e.kind.to_string(),
            e.output_index,
            e.delta.as_deref().map(str::to_string),
            e.item.is_some(),
            e.response.is_some(),
        )
    }

    #[test]
    fn deltas_take_the_one_pass_reader_and_borrow_their_text() {
        let read = |i: usize| {
            let fast = EventHead::scan(REAL[i]).unwrap_or_else(|| panic!("declined {}", REAL[i]));
            let serde = EventHead::parse_with_serde(REAL[i]).expect("serde reads it");
            assert_eq!(head(&fast), head(&serde), "{}", REAL[i]);
            fast
        };
        for i in [3, 7, 9, 19] {
            assert!(
                matches!(read(i).delta, Some(Cow::Borrowed(_))),
                "{}",
                REAL[i]
            );
        }
        // Events without a delta, item or response.
        for i in [6, 10, 25] {
            assert_eq!(read(i).delta, None);
        }
        let e = EventHead::scan(REAL[9]).expect("scan");
        assert_eq!(
            (e.kind.as_ref(), e.output_index),
            ("response.output_text.delta", 1)
        );
        // Escapes, items and responses are serde's.
        for i in [0, 2, 8, 14, 20] {
            assert!(EventHead::scan(REAL[i]).is_none(), "{}", REAL[i]);
        }
    }

    /// Every event and every text one edit away from it: whenever the
    /// one-pass reader answers, serde's typed reading accepts the same text
    /// and reads the same fields.
    #[test]
    fn whenever_the_one_pass_reader_answers_serde_agrees() {
        let bytes: &[u8] = b"\"\\{}[],: 0-1.eEu\x01\t";
        let (mut answered, mut declined) = (0, 0);
        for data in REAL.iter().chain(EDGES) {
            for text in one_edit_variants(data, bytes) {
                let Some(fast) = EventHead::scan(&text) else {
                    declined += 1;
                    continue;
                };
                answered += 1;
                let serde = EventHead::parse_with_serde(&text)
                    .unwrap_or_else(|| panic!("read what serde rejects: {text}"));
                assert_eq!(head(&fast), head(&serde), "{text}");
            }
        }
        assert!(answered > 1000 && declined > 1000, "{answered} {declined}");
    }

    #[test]
    fn a_whole_stream_reads_the_same_either_way() {
        let typed = run(REAL, true);
        assert_eq!(typed, run(REAL, false));
        // The stream did something: text, reasoning, a call, the end.
        let all = typed.join("\n");
        for want in [
            "Hello",
            "Checking",
            "src/main.rs",
            "call_Qz",
            "1024",
            "gAAAAABorxyz",
        ] {
            assert!(all.contains(want), "{want} missing from {all}");
        }
    }

    /// Every event alone, and every text one edit away from it
    /// (`one_edit_variants`: truncations, deletions, and changes or
    /// insertions of one of a set of bytes or of a two-byte character): the
    /// typed reader and the `Value` reader emit the same events and return
    /// the same outcomes. A typed reader that accepts what the
    /// `Value` reader rejects, or reads a field differently, fails here.
    #[test]
    fn every_event_and_its_mutations_read_as_the_value_reader_reads_them() {
        let bytes: &[u8] = b"\"\\{}[],: 0-1eu\x01";
        let mut typed_path = 0;
        let mut checked = 0;
        let mut out_of_range = 0;
        let mut check = |text: &str| {
            checked += 1;
            if EventHead::parse(text).is_some() {
                typed_path += 1;
            }
            // The one difference: a number beyond f64's range in a field the
            // lane skips. The `Value` reader rejects the event; the typed
            // reader reads past it, as it reads past the field.
            if serde_json::from_str::<serde_json::Value>(text)
                .is_err_and(|e| e.to_string().starts_with("number out of range"))
                && EventHead::parse(text).is_some()
            {
                out_of_range += 1;
                return;
            }
            assert_eq!(run(&[text], true), run(&[text], false), "{text}");
        };
        for data in REAL.iter().chain(EDGES) {
            for text in one_edit_variants(data, bytes) {
                check(&text);
            }
        }
        // Both readers were exercised, and the exception stayed one.
        assert!(
            typed_path > 1000 && checked - typed_path > 1000,
            "{typed_path} of {checked}"
        );
        assert!(out_of_range < 100, "{out_of_range} numbers out of range");
    }
}
