//! One Chat Completions stream chunk, parsed into just the fields the adapter
//! reads.
//!
//! A stream is thousands of small chunks, so the common shape is decoded
//! straight into typed structs (unknown fields skipped without allocating);
//! a chunk that is valid JSON of an unexpected shape (a number where a string
//! was expected, a `reasoning` object) falls back to a lenient walk over a
//! `serde_json::Value` that keeps what it can read, as servers vary.

use serde::Deserialize;
use serde_json::Value;

/// The fields of one chunk the adapter uses.
#[derive(Debug, Default, Deserialize)]
pub struct Chunk {
    /// A server-side error sent mid-stream.
    #[serde(default)]
    pub error: Option<Value>,
    /// Only the first choice is read (the adapter asks for one).
    #[serde(default)]
    pub choices: Vec<Choice>,
    /// Token counts, usually in a final chunk with no choices.
    #[serde(default)]
    pub usage: Option<UsageChunk>,
}

/// One choice of a chunk.
#[derive(Debug, Default, Deserialize)]
pub struct Choice {
    /// What this chunk adds.
    #[serde(default)]
    pub delta: Option<Delta>,
    /// Set on the choice's last chunk.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// What a chunk adds to the reply.
#[derive(Debug, Default, Deserialize)]
pub struct Delta {
    /// Visible text.
    #[serde(default)]
    pub content: Option<String>,
    /// Reasoning text (vLLM, DeepSeek, llama.cpp).
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// Reasoning text (OpenRouter, Ollama).
    #[serde(default)]
    pub reasoning: Option<String>,
    /// Pieces of tool calls.
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallChunk>>,
}

/// A piece of one tool call.
#[derive(Debug, Default, Deserialize)]
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
#[derive(Debug, Default, Deserialize)]
pub struct FunctionChunk {
    /// The tool's name, on the call's first piece.
    #[serde(default)]
    pub name: Option<String>,
    /// More argument text.
    #[serde(default)]
    pub arguments: Option<String>,
}

/// Token counts.
#[derive(Debug, Default, Deserialize)]
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
#[derive(Debug, Default, Deserialize)]
pub struct PromptDetails {
    /// Prompt tokens served from the cache.
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

/// `usage.completion_tokens_details`.
#[derive(Debug, Default, Deserialize)]
pub struct CompletionDetails {
    /// Completion tokens spent reasoning.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl Chunk {
    /// Parses one `data` payload; an error means it is not JSON at all.
    pub fn parse(data: &str) -> Result<Self, serde_json::Error> {
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
        let delta = |d: &Value| Delta {
            content: string(d.get("content")),
            reasoning_content: string(d.get("reasoning_content")),
            reasoning: string(d.get("reasoning")),
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
        let choices = v
            .get("choices")
            .and_then(|c| c.get(0))
            .map(|c| Choice {
                delta: c.get("delta").map(delta),
                finish_reason: string(c.get("finish_reason")),
            })
            .into_iter()
            .collect();
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
            choices,
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
        let delta = c.choices[0].delta.as_ref().expect("delta");
        assert_eq!(delta.content.as_deref(), Some("Hi \"you\""));
        assert!(c.choices[0].finish_reason.is_none() && c.usage.is_none() && c.error.is_none());
    }

    #[test]
    fn an_unexpected_shape_keeps_what_it_can() {
        // `reasoning` as an object and a numeric id: the typed parse fails,
        // the lenient walk still finds the content and the call.
        let c = Chunk::parse(
            r#"{"choices":[{"delta":{"reasoning":{"text":"x"},"content":"ok","tool_calls":[{"index":1,"id":7,"function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":"3","completion_tokens":2}}"#,
        )
        .expect("parse");
        let delta = c.choices[0].delta.as_ref().expect("delta");
        assert_eq!(delta.content.as_deref(), Some("ok"));
        assert_eq!(delta.reasoning, None);
        let call = &delta.tool_calls.as_ref().expect("calls")[0];
        assert_eq!((call.index, call.id.as_deref()), (Some(1), None));
        let f = call.function.as_ref().expect("function");
        assert_eq!(
            (f.name.as_deref(), f.arguments.as_deref()),
            (Some("f"), Some("{}"))
        );
        assert_eq!(c.choices[0].finish_reason.as_deref(), Some("tool_calls"));
        let u = c.usage.expect("usage");
        assert_eq!((u.prompt_tokens, u.completion_tokens), (None, Some(2)));
    }

    #[test]
    fn not_json_is_an_error() {
        assert!(Chunk::parse("{not json").is_err());
        assert!(Chunk::parse("").is_err());
    }
}
