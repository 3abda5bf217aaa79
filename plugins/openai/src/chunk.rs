//! One Chat Completions stream chunk, parsed into just the fields the adapter
//! reads.
//!
//! A stream is thousands of small chunks, so the common shape is decoded
//! straight into typed structs (unknown fields skipped without allocating,
//! only the first choice kept, text borrowed from the payload unless it holds
//! escapes): a text delta costs no allocation of its own. A chunk that is
//! valid JSON of an unexpected shape (a number where a string was expected, a
//! `reasoning` object) falls back to a lenient walk over a
//! `serde_json::Value` that keeps what it can read, as servers vary. Before
//! either, [`crate::fast_chunk`] reads the commonest shape in one pass.

use serde::Deserialize;
use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::marker::PhantomData;
use turnstone_plugin_sdk::provider::borrowed_text;

/// The fields of one chunk the adapter uses.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct Chunk<'a> {
    /// A server-side error sent mid-stream.
    #[serde(default)]
    pub error: Option<Value>,
    /// The first choice (the adapter asks for one); any others are skipped.
    #[serde(default, rename = "choices", deserialize_with = "first", borrow)]
    pub choice: Option<Choice<'a>>,
    /// Token counts, usually in a final chunk with no choices.
    #[serde(default)]
    pub usage: Option<UsageChunk>,
}

/// The first element of a JSON list, the rest read past without keeping them.
fn first<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct First<T>(PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for First<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let first = seq.next_element()?;
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(first)
        }
    }
    d.deserialize_seq(First(PhantomData))
}

/// One choice of a chunk.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct Choice<'a> {
    /// What this chunk adds.
    #[serde(default, borrow)]
    pub delta: Option<Delta<'a>>,
    /// Set on the choice's last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// What a chunk adds to the reply.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct Delta<'a> {
    /// Visible text.
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub content: Option<Cow<'a, str>>,
    /// Reasoning text (vLLM, DeepSeek, llama.cpp).
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// Reasoning text (OpenRouter, Ollama).
    #[serde(default, borrow, deserialize_with = "borrowed_text")]
    pub reasoning: Option<Cow<'a, str>>,
    /// Pieces of tool calls.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallChunk>>,
}

/// A piece of one tool call.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct ToolCallChunk {
    /// Which call this piece belongs to (position in the list when absent).
    #[serde(default)]
    pub index: Option<u64>,
    /// The call's id, on its first piece.
    #[serde(default)]
    pub id: Option<String>,
    /// Name and argument text.
    #[serde(default)]
    pub function: Option<FunctionChunk>,
}

/// The function part of a tool-call piece.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct FunctionChunk {
    /// The tool's name, on the call's first piece.
    #[serde(default)]
    pub name: Option<String>,
    /// More argument text.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// Token counts.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct UsageChunk {
    /// Prompt tokens.
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    /// Completion tokens.
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    /// Cache details.
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptDetails>,
    /// Reasoning details.
    #[serde(default)]
    pub completion_tokens_details: Option<CompletionDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct PromptDetails {
    /// Prompt tokens served from the cache.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Default, PartialEq, Deserialize)]
pub struct CompletionDetails {
    /// Completion tokens spent reasoning.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl<'a> Chunk<'a> {
    /// Parses one `data` payload; an error means it is not JSON at all.
    pub fn parse(data: &'a str) -> Result<Self, serde_json::Error> {
        match crate::fast_chunk::parse(data) {
            Some(chunk) => Ok(chunk),
            None => Self::parse_with_serde(data),
        }
    }

    /// [`Chunk::parse`] without the fast path: typed, then lenient.
    pub fn parse_with_serde(data: &'a str) -> Result<Self, serde_json::Error> {
        match serde_json::from_str(data) {
            Ok(chunk) => Ok(chunk),
            Err(typed) => match serde_json::from_str::<Value>(data) {
                Ok(v) => Ok(Self::from_value(&v)),
                Err(_) => Err(typed),
            },
        }
    }

    /// Reads what it can from a chunk of unexpected shape: a field of the
    /// wrong type counts as absent.
    fn from_value(v: &Value) -> Self {
        let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let text = |v: Option<&Value>| string(v).map(Cow::Owned);
        let delta = |d: &Value| Delta {
            content: text(d.get("content")),
            reasoning_content: text(d.get("reasoning_content")),
            reasoning: text(d.get("reasoning")),
            tool_calls: d.get("tool_calls").and_then(Value::as_array).map(|calls| {
                calls
                    .iter()
                    .map(|c| ToolCallChunk {
                        index: c.get("index").and_then(Value::as_u64),
                        id: string(c.get("id")),
                        function: Some(FunctionChunk {
                            name: string(c.pointer("/function/name")),
                            arguments: string(c.pointer("/function/arguments")),
                        }),
                    })
                    .collect()
            }),
        };
        let choice = v.get("choices").and_then(|c| c.get(0)).map(|c| Choice {
            delta: c.get("delta").map(delta),
            finish_reason: string(c.get("finish_reason")),
        });
        let usage = v.get("usage").filter(|u| u.is_object()).map(|u| {
            let n = |p: &str| u.pointer(p).and_then(Value::as_u64);
            UsageChunk {
                prompt_tokens: n("/prompt_tokens"),
                completion_tokens: n("/completion_tokens"),
                prompt_tokens_details: Some(PromptDetails {
                    cached_tokens: n("/prompt_tokens_details/cached_tokens"),
                }),
                completion_tokens_details: Some(CompletionDetails {
                    reasoning_tokens: n("/completion_tokens_details/reasoning_tokens"),
                }),
            }
        });
        Self {
            error: v.get("error").filter(|e| !e.is_null()).cloned(),
            choice,
            usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_common_shape_is_read_typed() {
        let c = Chunk::parse(
            r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi \"you\""},"finish_reason":null,"logprobs":null}],"usage":null}"#,
        )
        .expect("parse");
        let choice = c.choice.as_ref().expect("choice");
        let delta = choice.delta.as_ref().expect("delta");
        assert_eq!(delta.content.as_deref(), Some("Hi \"you\""));
        assert!(choice.finish_reason.is_none() && c.usage.is_none() && c.error.is_none());
    }

    #[test]
    fn an_unexpected_shape_keeps_what_it_can() {
        // `reasoning` as an object and a numeric id: the typed parse fails,
        // the lenient walk still finds the content and the call.
        let c = Chunk::parse(
            r#"{"choices":[{"delta":{"reasoning":{"text":"x"},"content":"ok","tool_calls":[{"index":1,"id":7,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":"3","completion_tokens":2}}"#,
        )
        .expect("parse");
        let choice = c.choice.as_ref().expect("choice");
        let delta = choice.delta.as_ref().expect("delta");
        assert_eq!(delta.content.as_deref(), Some("ok"));
        assert_eq!(delta.reasoning, None);
        let call = &delta.tool_calls.as_ref().expect("calls")[0];
        assert_eq!((call.index, call.id.as_deref()), (Some(1), None));
        let f = call.function.as_ref().expect("function");
        assert_eq!(
            (f.name.as_deref(), f.arguments.as_deref()),
            (Some("f"), Some("{}"))
        );
        assert_eq!(choice.finish_reason.as_deref(), Some("tool_calls"));
        let u = c.usage.expect("usage");
        assert_eq!((u.prompt_tokens, u.completion_tokens), (None, Some(2)));
    }

    #[test]
    fn not_json_is_an_error() {
        assert!(Chunk::parse("{not json").is_err());
        assert!(Chunk::parse("").is_err());
    }

    #[test]
    fn text_is_borrowed_unless_escaped_and_only_the_first_choice_is_read() {
        // A second choice of another shape is skipped, not parsed: the typed
        // path (which borrows) still reads the first.
        let c = Chunk::parse(
            r#"{"choices":[{"delta":{"content":"plain"}},{"delta":{"content":7}},"x"]}"#,
        )
        .expect("parse");
        let content = c.choice.and_then(|c| c.delta).and_then(|d| d.content);
        assert!(
            matches!(content, Some(Cow::Borrowed("plain"))),
            "{content:?}"
        );

        let c = Chunk::parse(r#"{"choices":[{"delta":{"content":"a\nb"}}]}"#).expect("parse");
        let content = c.choice.and_then(|c| c.delta).and_then(|d| d.content);
        assert!(
            matches!(&content, Some(Cow::Owned(s)) if s == "a\nb"),
            "{content:?}"
        );

        let c = Chunk::parse(r#"{"choices":[],"usage":{"prompt_tokens":3}}"#).expect("parse");
        assert!(c.choice.is_none());
        assert_eq!(c.usage.and_then(|u| u.prompt_tokens), Some(3));
    }
}
