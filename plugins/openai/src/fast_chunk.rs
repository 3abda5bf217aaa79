//! A strict single-pass reader for the common Chat Completions chunk shape,
//! tried before serde.
//!
//! A stream is thousands of chunks of about 150 bytes, nearly all of them the
//! same shape: an id, a model name and a few other fields the adapter skips,
//! then one choice whose delta holds a short plain string. Under wasm, serde's
//! derived visitors (matching every key against every field, then skipping
//! the unknown ones through `IgnoredAny`) cost about 0.4 µs per chunk, the
//! largest share of the adapter's time per stream. This reader walks the
//! bytes once and borrows the text.
//!
//! It is deliberately narrow (the SDK's [`json_scan`] scanner). It accepts
//! only well-formed JSON and answers `None` for anything it does not read
//! exactly as the serde path would: an escape in any string or key, a
//! non-null `error`, `usage` or `tool_calls`, a value of an unexpected type,
//! a repeated field, nesting deeper than [`json_scan::MAX_DEPTH`], or
//! trailing bytes. `None` means "ask serde", which then decides, so every
//! chunk gets serde's result; a test holds the two paths equal over
//! mutations of real chunks.
//!
//! [`json_scan`]: turnstone_plugin_sdk::json_scan
//! [`json_scan::MAX_DEPTH`]: turnstone_plugin_sdk::json_scan::MAX_DEPTH

use crate::chunk::{Choice, Chunk, Delta};
use std::borrow::Cow;
use turnstone_plugin_sdk::json_scan::{Scanner, once};

/// Reads `data` if it has the common shape; `None` hands it to serde.
pub fn parse(data: &str) -> Option<Chunk<'_>> {
    let mut s = Scanner::new(data);
    let chunk = chunk(&mut s)?;
    s.finish()?;
    Some(chunk)
}

fn chunk<'a>(s: &mut Scanner<'a>) -> Option<Chunk<'a>> {
    let mut choices: Option<Option<Choice<'a>>> = None;
    let (mut error, mut usage) = (false, false);
    s.object(|s, key| match key {
        "choices" => {
            let mut first = None;
            s.array(|s, n| {
                if n == 0 {
                    first = Some(choice(s)?);
                    Some(())
                } else {
                    s.skip(1)
                }
            })?;
            once(&mut choices, first)
        }
        // Present but null is the same as absent; anything else is rare
        // (once per stream) and read by serde.
        "error" => s.null_field(&mut error),
        "usage" => s.null_field(&mut usage),
        _ => s.skip(0),
    })?;
    Some(Chunk {
        error: None,
        choice: choices.flatten(),
        usage: None,
    })
}

fn choice<'a>(s: &mut Scanner<'a>) -> Option<Choice<'a>> {
    let (mut delta_seen, mut finish) = (None, None);
    s.object(|s, key| match key {
        "delta" => {
            let d = if s.null() { None } else { Some(delta(s)?) };
            once(&mut delta_seen, d)
        }
        "finish_reason" => {
            let reason = s.opt_str()?.map(str::to_string);
            once(&mut finish, reason)
        }
        _ => s.skip(1),
    })?;
    Some(Choice {
        delta: delta_seen.flatten(),
        finish_reason: finish.flatten(),
    })
}

fn delta<'a>(s: &mut Scanner<'a>) -> Option<Delta<'a>> {
    let (mut content, mut reasoning_content, mut reasoning) = (None, None, None);
    let mut tool_calls = false;
    s.object(|s, key| {
        let slot = match key {
            "content" => &mut content,
            "reasoning_content" => &mut reasoning_content,
            "reasoning" => &mut reasoning,
            "tool_calls" => return s.null_field(&mut tool_calls),
            _ => return s.skip(2),
        };
        let text = s.opt_str()?;
        once(slot, text)
    })?;
    let text = |t: Option<Option<&'a str>>| t.flatten().map(Cow::Borrowed);
    Some(Delta {
        content: text(content),
        reasoning_content: text(reasoning_content),
        reasoning: text(reasoning),
        tool_calls: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_plugin_sdk::edits::one_edit_variants;
    use turnstone_plugin_sdk::json_scan::MAX_DEPTH;

    /// Chunks as servers send them (OpenAI, vLLM, DeepSeek, Ollama,
    /// OpenRouter, llama.cpp, Gemini), plus this repository's scripted LLM.
    const REAL: &[&str] = &[
        r#"{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_f9f4fb6dbf","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"kcGNd"}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4o","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}"#,
        r#"{"id":"cmpl-9a","object":"chat.completion.chunk","created":1730000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning_content":"Let me think"},"logprobs":null,"finish_reason":null,"stop_reason":null}]}"#,
        r#"{"id":"1f2e","object":"chat.completion.chunk","created":1730000000,"model":"deepseek-reasoner","system_fingerprint":"fp_7e73fd9a08","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Hmm"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1730000000,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"Okay"},"finish_reason":null}]}"#,
        r#"{"id":"gen-1730000000-abc","provider":"Anthropic","model":"anthropic/claude-sonnet-4","object":"chat.completion.chunk","created":1730000000,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi","reasoning":null,"reasoning_details":[]},"finish_reason":null,"native_finish_reason":null,"logprobs":null}]}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" there"}}],"created":1730000000,"id":"chatcmpl-x","model":"gguf","system_fingerprint":"b5000-abc","object":"chat.completion.chunk","timings":{"prompt_n":10,"prompt_ms":12.5,"predicted_per_second":-1.0e-3}}"#,
        r#"{"choices":[{"delta":{"content":"Hello","role":"assistant"},"index":0}],"created":1730000000,"id":"x","model":"gemini-2.0-flash","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"delta":{"content":"tok1 "},"finish_reason":null,"index":0}],"id":"chatcmpl-scripted","model":"scripted","object":"chat.completion.chunk"}"#,
        r#" { "choices" : [ { "delta" : { "content" : "spaced" } , "index" : 0 } , { "delta" : { } } ] , "x" : [ true , false , null , 0 , -1.5E+3 , { } , [ ] ] } "#,
        r#"{"choices":[],"id":"x"}"#,
        r#"{"id":"x","choices":[{"index":0,"delta":null,"finish_reason":"length"}],"error":null}"#,
        r#"{"choices":[{"delta":{"content":"café ☕ 日本"}}],"id":"ünï"}"#,
    ];

    /// Shapes a one-byte change cannot reach, answered or declined: a
    /// repeated field whose serde reading (typed parse fails, lenient walk
    /// reads `"delta":null` as an empty delta) differs from a last-wins one,
    /// and values of other types where the reader expects null, a list or an
    /// object.
    const EDGES: &[&str] = &[
        r#"{"choices":[{"delta":null,"finish_reason":null,"finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"content":"a"},"delta":null}]}"#,
        r#"{"choices":[{"delta":null}],"usage":null,"usage":null}"#,
        r#"{"choices":[{"delta":null}],"error":null,"error":null}"#,
        r#"{"choices":[{"delta":{"tool_calls":null,"tool_calls":null}}]}"#,
        r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
        r#"{"choices":[null]}"#,
        r#"{"choices":[0]}"#,
        r#"{"choices":null}"#,
        r#"{"choices":{}}"#,
        r#"{"choices":[{"delta":[]}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
        r#"{"choices":[],"usage":{}}"#,
        r#"{"choices":[],"error":"x"}"#,
        r#"{"choices":[{"finish_reason":7}]}"#,
        r#"{"choices":[{"delta":{"content":"A"}}]}"#,
        r#"[]"#,
        r#"{}"#,
        "",
    ];

    /// Chunks the fast reader hands to serde, and serde reads.
    const SERDE_ONLY: &[&str] = &[
        r#"{"choices":[{"delta":{"content":"line\nbreak"}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
        r#"{"error":{"message":"overloaded"}}"#,
        r#"{"choices":[{"delta":{"content":"a"}}],"choices":[]}"#,
        r#"{"choices":[{"delta":{"content":7}}]}"#,
        r#"{"id":"caf\u00e9","choices":[]}"#,
        r#"{"ch\u006fices":[]}"#,
    ];

    #[test]
    fn real_chunks_take_the_fast_path_and_read_as_serde_reads_them() {
        for data in REAL {
            let fast = parse(data).unwrap_or_else(|| panic!("fast path declined {data}"));
            let slow = Chunk::parse_with_serde(data).expect("serde reads it");
            assert_eq!(fast, slow, "{data}");
        }
        let c = parse(REAL[0]).expect("parse");
        let content = c.choice.and_then(|c| c.delta).and_then(|d| d.content);
        assert!(matches!(content, Some(Cow::Borrowed(" world"))));
        let c = parse(REAL[2]).expect("parse");
        assert_eq!(
            c.choice.and_then(|c| c.finish_reason).as_deref(),
            Some("stop")
        );
    }

    #[test]
    fn escapes_errors_usage_tool_calls_and_odd_shapes_are_left_to_serde() {
        for data in SERDE_ONLY {
            assert_eq!(parse(data), None, "{data}");
            assert!(Chunk::parse(data).is_ok(), "{data}");
        }
    }

    /// Every truncation and deletion, and every change or insertion of one
    /// of 31 chosen bytes (or insertion of a two-byte character), in the real
    /// chunks and the edge shapes: whenever the fast path answers, serde
    /// accepts the same text and reads the same chunk. A lenient fast path
    /// (one accepting a malformed chunk, or reading a field differently)
    /// fails here.
    #[test]
    fn whenever_the_fast_path_answers_serde_agrees() {
        let bytes: &[u8] = b"\"\\{}[],: 0-1.eE+ntfu\x01\x7fxlc\t\n\r\x0b\x0c\x1f";
        let mut answered = 0;
        let mut declined = 0;
        let mut check = |text: &str| match parse(text) {
            Some(fast) => {
                answered += 1;
                match Chunk::parse_with_serde(text) {
                    Ok(slow) => assert_eq!(fast, slow, "{text}"),
                    Err(e) => panic!("the fast path read what serde rejects ({e}): {text}"),
                }
            }
            None => declined += 1,
        };
        for data in REAL.iter().chain(EDGES) {
            for text in one_edit_variants(data, bytes) {
                check(&text);
            }
        }
        // Both outcomes happen often: the mutations exercise the reader.
        assert!(answered > 1000 && declined > 1000, "{answered} {declined}");
    }

    #[test]
    fn nesting_past_the_limit_is_left_to_serde() {
        let deep = format!(
            r#"{{"choices":[],"x":{}1{}}}"#,
            "[".repeat(MAX_DEPTH + 1),
            "]".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(parse(&deep), None);
        assert!(Chunk::parse(&deep).is_ok());
        let ok = format!(
            r#"{{"choices":[],"x":{}1{}}}"#,
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(parse(&ok).is_some());
    }
}
