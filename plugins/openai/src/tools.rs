//! The entries of the `tools` list, each schema kept as the text the host
//! sent (see [`turnstone_plugin_sdk::request_body`]).

use crate::chat_messages::ChatMessage;
use crate::responses_input::InputItem;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use turnstone_plugin_sdk::provider::{ProviderError, ToolDefinition};
use turnstone_plugin_sdk::request_body::{ConversationBody, RequestBody, tool_schema};

/// A request body: its fields and this adapter's tool entries, and the
/// conversation (Chat Completions' `messages` or the Responses API's
/// `input`), serialised straight from the request.
pub type Body<'a> = ConversationBody<ToolEntry<'a>, Conversation<'a>>;

/// The conversation of either API.
#[derive(Serialize)]
#[serde(untagged)]
pub enum Conversation<'a> {
    /// Chat Completions' `messages`.
    Messages(Vec<ChatMessage<'a>>),
    /// The Responses API's `input`.
    Input(Vec<InputItem<'a>>),
}

/// A body of `fields` and `tools`, without a conversation yet.
pub fn body<'a>(fields: Map<String, Value>, tools: Vec<ToolEntry<'a>>) -> Body<'a> {
    ConversationBody::new(RequestBody { fields, tools })
}

/// One entry of the `tools` list.
#[derive(Serialize)]
#[serde(untagged)]
pub enum ToolEntry<'a> {
    /// Chat Completions: `{"type": "function", "function": {…}}`.
    Chat {
        /// Always `function`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// Name, description and schema.
        function: FunctionSpec<'a>,
    },
    /// Responses: the function's fields at the top level.
    Flat {
        /// Always `function`.
        #[serde(rename = "type")]
        kind: &'static str,
        /// The tool's name.
        name: &'a str,
        /// What it does.
        description: &'a str,
        /// Its parameter schema, as sent by the host.
        parameters: &'a RawValue,
        /// Always false: schemas are not rewritten for strict mode.
        strict: bool,
        /// Loaded only when the hosted tool search finds it.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        defer_loading: bool,
    },
    /// A hosted tool that takes no definition (`{"type": "tool_search"}`).
    Hosted {
        /// The hosted tool's type.
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

/// A function tool's name, description and parameter schema.
#[derive(Serialize)]
pub struct FunctionSpec<'a> {
    /// The tool's name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// Its parameter schema, as sent by the host.
    pub parameters: &'a RawValue,
}

impl<'a> FunctionSpec<'a> {
    /// `tool`'s spec; its schema must be JSON.
    pub fn of(tool: &'a ToolDefinition) -> Result<Self, ProviderError> {
        Ok(Self {
            name: &tool.name,
            description: &tool.description,
            parameters: tool_schema(tool)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_and_flat_entries_take_their_shapes_and_mark_only_deferred_tools() {
        let t = ToolDefinition {
            name: "search".into(),
            description: "does search".into(),
            parameters: r#"{"type":"object"}"#.into(),
            defer_loading: false,
        };
        let spec = FunctionSpec::of(&t).expect("spec");
        let flat = |defer_loading| ToolEntry::Flat {
            kind: "function",
            name: spec.name,
            description: spec.description,
            parameters: spec.parameters,
            strict: false,
            defer_loading,
        };
        let body = body(
            Map::new(),
            vec![
                ToolEntry::Chat {
                    kind: "function",
                    function: FunctionSpec::of(&t).expect("spec"),
                },
                flat(false),
                flat(true),
                ToolEntry::Hosted {
                    kind: "tool_search",
                },
            ],
        );
        let v: Value = serde_json::from_str(&body.to_json().expect("serialises")).expect("JSON");
        let schema = json!({"type": "object"});
        assert_eq!(
            v["tools"],
            json!([
                {"type": "function", "function": {"name": "search", "description": "does search", "parameters": schema}},
                {"type": "function", "name": "search", "description": "does search", "parameters": schema, "strict": false},
                {"type": "function", "name": "search", "description": "does search", "parameters": schema, "strict": false, "defer_loading": true},
                {"type": "tool_search"},
            ])
        );
    }
}
