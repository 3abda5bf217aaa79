//! The canonical, provider-neutral conversation turn.
//!
//! A turn is flat and role-discriminated. Assistant tool calls keep their
//! argument strings byte-exact. Tool turns link to their call by id and carry
//! an error flag and an optional effect status. Opaque provider-native blocks
//! (e.g. signed thinking blocks) ride in [`ProviderNative`] and are replayed only
//! to the provider that produced them. [`TurnMeta`] holds side facts the model
//! never sees.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who produced a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// System prompt or operator notice.
    System,
    /// User input.
    User,
    /// Model output.
    Assistant,
    /// Tool result.
    Tool,
}

/// One piece of content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, by content-addressed attachment id or inline data URL.
    Image {
        /// Attachment reference, resolved at the output boundary.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        attachment_id: Option<String>,
        /// Inline `data:` URL.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
}

/// An assistant's tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments exactly as the model produced them.
    pub arguments: String,
}

/// What a tool call did, when that matters to deterministic consumers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectStatus {
    /// It ran and its effects stand.
    Committed,
    /// It certainly did nothing (never started).
    None,
    /// It may have run.
    Unknown,
    /// It ran partly.
    Partial,
    /// It ran and was undone.
    RolledBack,
}

/// The opaque provider-native lane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderNative {
    /// The provider flavour that produced the blocks (e.g. `anthropic`).
    pub provider: String,
    /// Its blocks, verbatim.
    pub blocks: Value,
}

/// Side metadata, invisible to the model.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnMeta {
    /// Provenance, e.g. `operator` on system turns or `compaction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// SSE cursor of the event that carried this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<i64>,
    /// Effect status of a tool turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<EffectStatus>,
    /// The assistant text was cut short by a cancel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
    /// Tool turns: what the call touched at the sandbox boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<turnstone_protocol::CapabilityAudit>,
    /// Tool turns: the intent verdict the call was approved or denied on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Box<turnstone_protocol::Verdict>>,
    /// Tool turns: what the output guard flagged (`kind:label`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_flags: Vec<String>,
}

/// One canonical turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// Role.
    pub role: Role,
    /// Content parts (usually one text part).
    pub content: Vec<ContentPart>,
    /// Assistant tool calls.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For tool turns: the answered call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For tool turns: the tool name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// For tool turns: the result is an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Reasoning text the model produced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Opaque provider-native blocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<ProviderNative>,
    /// Side metadata.
    #[serde(default)]
    pub meta: TurnMeta,
}

impl Turn {
    /// A turn with one text part.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: vec![ContentPart::Text { text: text.into() }],
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            reasoning: None,
            native: None,
            meta: TurnMeta::default(),
        }
    }

    /// A tool result.
    pub fn tool_result(call: &ToolCall, output: impl Into<String>, is_error: bool) -> Self {
        Self {
            tool_call_id: Some(call.id.clone()),
            tool_name: Some(call.name.clone()),
            is_error,
            ..Self::text(Role::Tool, output)
        }
    }

    /// The concatenated text parts.
    pub fn text_content(&self) -> String {
        self.content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } => Some(text.as_str()),
                ContentPart::Image { .. } => None,
            })
            .collect()
    }

    /// Parses an OpenAI-shaped message dict (as the original engine held them and
    /// as the conformance fixtures are written): `role`, `content` (string or
    /// parts), `tool_calls`, `tool_call_id`, `_provider_content`, `_source`.
    /// `native_provider` names the lane that produced `_provider_content`.
    pub fn from_openai_json(v: &Value, native_provider: &str) -> Result<Self, String> {
        let role = match v.get("role").and_then(Value::as_str) {
            Some("system") | Some("developer") => Role::System,
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            Some("tool") => Role::Tool,
            other => return Err(format!("unknown role {other:?}")),
        };
        let content = match v.get("content") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![ContentPart::Text { text: s.clone() }],
            Some(Value::Array(parts)) => parts
                .iter()
                .map(|p| match p.get("type").and_then(Value::as_str) {
                    Some("text") => Ok(ContentPart::Text {
                        text: p.get("text").and_then(Value::as_str).unwrap_or("").into(),
                    }),
                    Some("image") => Ok(ContentPart::Image {
                        attachment_id: p
                            .get("attachment_id")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        url: None,
                    }),
                    Some("image_url") => Ok(ContentPart::Image {
                        attachment_id: None,
                        url: p
                            .pointer("/image_url/url")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    }),
                    other => Err(format!("unknown content part {other:?}")),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("content must be a string or a list, got {other}")),
        };
        let tool_calls = match v.get("tool_calls") {
            Some(Value::Array(calls)) => calls
                .iter()
                .map(|c| {
                    Ok(ToolCall {
                        id: c
                            .get("id")
                            .and_then(Value::as_str)
                            .ok_or("tool call without id")?
                            .into(),
                        name: c
                            .pointer("/function/name")
                            .and_then(Value::as_str)
                            .ok_or("tool call without name")?
                            .into(),
                        arguments: c
                            .pointer("/function/arguments")
                            .and_then(Value::as_str)
                            .unwrap_or("{}")
                            .into(),
                    })
                })
                .collect::<Result<_, &str>>()
                .map_err(str::to_string)?,
            _ => Vec::new(),
        };
        Ok(Self {
            role,
            content,
            tool_calls,
            tool_call_id: v
                .get("tool_call_id")
                .and_then(Value::as_str)
                .map(str::to_string),
            tool_name: v.get("name").and_then(Value::as_str).map(str::to_string),
            is_error: false,
            reasoning: None,
            native: v.get("_provider_content").map(|b| ProviderNative {
                provider: native_provider.to_string(),
                blocks: b.clone(),
            }),
            meta: TurnMeta {
                source: v.get("_source").and_then(Value::as_str).map(str::to_string),
                ..TurnMeta::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn openai_dicts_parse_with_exact_arguments_and_native_lane() {
        let t = Turn::from_openai_json(
            &json!({
                "role": "assistant", "content": "Let me check.",
                "_provider_content": [{"type": "thinking", "signature": "s"}],
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":  \"Paris\"}"}}]
            }),
            "anthropic",
        )
        .unwrap();
        assert_eq!(t.role, Role::Assistant);
        assert_eq!(t.tool_calls[0].arguments, "{\"city\":  \"Paris\"}");
        assert_eq!(t.native.as_ref().unwrap().provider, "anthropic");
        assert_eq!(t.text_content(), "Let me check.");
        let sys = Turn::from_openai_json(
            &json!({"role": "system", "content": "x", "_source": "operator"}),
            "",
        )
        .unwrap();
        assert_eq!(sys.meta.source.as_deref(), Some("operator"));
        assert!(Turn::from_openai_json(&json!({"role": "robot"}), "").is_err());
        assert!(Turn::from_openai_json(&json!({"role": "user", "content": 5}), "").is_err());
    }

    #[test]
    fn turns_round_trip_through_json() {
        let mut t = Turn::tool_result(
            &ToolCall {
                id: "c".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            },
            "out",
            true,
        );
        t.meta.effect = Some(EffectStatus::Unknown);
        let back: Turn = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
    }
}
