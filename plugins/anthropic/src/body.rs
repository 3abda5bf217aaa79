//! Messages API request bodies.

use crate::messages::{OutMessage, conversation};
use crate::models::{Thinking, lookup};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use turnstone_plugin_sdk::provider::{CompletionRequest, ProviderError};
use turnstone_plugin_sdk::request_body::{ConversationBody, RequestBody, tool_schema};

/// Default output budget when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Anthropic's server-side BM25 tool search (`defer_loading` tools are found
/// through it and expanded by the API).
const TOOL_SEARCH_TOOL: &str = "tool_search_tool_bm25_20251119";

fn bad(msg: impl Into<String>) -> ProviderError {
    ProviderError::BadRequest(msg.into())
}

/// One entry of the `tools` list; a function's schema is the text the host
/// sent (see [`turnstone_plugin_sdk::request_body`]).
#[derive(Serialize)]
#[serde(untagged)]
pub enum ToolEntry<'a> {
    /// A function the model may call.
    Function {
        /// The tool's name.
        name: &'a str,
        /// What it does.
        description: &'a str,
        /// Its parameter schema.
        input_schema: &'a RawValue,
        /// Found through the server-side tool search rather than listed.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        defer_loading: bool,
    },
    /// A server tool (the BM25 tool search).
    Server {
        /// Its versioned type.
        #[serde(rename = "type")]
        kind: &'static str,
        /// Its name.
        name: &'static str,
    },
}

/// A Messages API request body.
pub type Body<'a> = ConversationBody<ToolEntry<'a>, Vec<OutMessage<'a>>>;

/// The Messages API request body.
pub fn messages_body(req: &CompletionRequest) -> Result<Body<'_>, ProviderError> {
    if req.model.is_empty() {
        return Err(bad("no model given"));
    }
    let overrides = match &req.capabilities {
        None => None,
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Some(m),
            _ => return Err(bad("capabilities must be a JSON object")),
        },
    };
    let profile = lookup(&req.model, &req.provider, overrides.as_ref());
    let replay = req.replay_reasoning && profile.reasoning_replay;

    let (system, messages) = conversation(req, profile.inline_system, replay);

    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert(
        "max_tokens".into(),
        json!(req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    body.insert("stream".into(), json!(true));
    // Automatic prompt caching: the API places the breakpoint on the last block.
    body.insert("cache_control".into(), json!({"type": "ephemeral"}));
    if !system.is_empty() {
        body.insert("system".into(), json!(system.join("\n\n")));
    }
    let mut tools = Vec::new();
    if !req.tools.is_empty() {
        // Native search only where it exists (not on compatible local
        // servers) and only with something left undeferred: a request whose
        // every tool is deferred is refused by the API.
        let native = req.tool_search
            && profile.tool_search
            && req.provider == "anthropic"
            && req.tools.iter().any(|t| t.defer_loading)
            && req.tools.iter().any(|t| !t.defer_loading);
        tools.reserve(req.tools.len() + 1);
        if native {
            tools.push(ToolEntry::Server {
                kind: TOOL_SEARCH_TOOL,
                name: "tool_search_tool_bm25",
            });
        }
        for t in &req.tools {
            tools.push(ToolEntry::Function {
                name: &t.name,
                description: &t.description,
                input_schema: tool_schema(t)?,
                defer_loading: native && t.defer_loading,
            });
        }
    }
    match &profile.thinking {
        Thinking::None => {}
        Thinking::Native(v) => {
            body.insert("thinking".into(), v.clone());
        }
        Thinking::TemplateFlag(param) => {
            let mut kwargs = Map::new();
            kwargs.insert(param.clone(), json!(true));
            if let Some(e) = &req.reasoning_effort {
                kwargs.insert("reasoning_effort".into(), json!(e));
            }
            body.insert("chat_template_kwargs".into(), Value::Object(kwargs));
        }
    }
    let temperature = req.temperature.or(profile.default_temperature);
    if let Some(t) = temperature
        && profile.supports_temperature
    {
        body.insert("temperature".into(), json!(t));
    }
    let mut body = Body::new(RequestBody {
        fields: body,
        tools,
    })
    .with_conversation("messages", messages);
    if let Some(extra) = &req.extra {
        body.merge_extra(extra)?;
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::tests::{msg, req};
    use turnstone_plugin_sdk::provider::ToolCall;
    use turnstone_plugin_sdk::provider::{ContentPart, Role};

    /// The body as the JSON the server receives.
    fn body_of(r: &CompletionRequest) -> Result<Value, ProviderError> {
        let text = messages_body(r)?.to_json()?;
        Ok(serde_json::from_str(&text).expect("the body is JSON"))
    }

    fn tool(name: &str, defer_loading: bool) -> turnstone_plugin_sdk::provider::ToolDefinition {
        turnstone_plugin_sdk::provider::ToolDefinition {
            name: name.into(),
            description: format!("{name} tool"),
            parameters: r#"{"type":"object"}"#.into(),
            defer_loading,
        }
    }

    #[test]
    fn native_tool_search_defers_marked_tools_on_models_that_have_it() {
        let mut r = req("claude-sonnet-4-5", vec![msg(Role::User, "hi")]);
        r.tools = vec![tool("read_file", false), tool("mcp__gh__search", true)];
        r.tool_search = true;
        let body = body_of(&r).unwrap();
        let tools = body["tools"].as_array().unwrap();
        assert_eq!(
            tools[0],
            json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"})
        );
        assert!(tools[1].get("defer_loading").is_none());
        assert_eq!(tools[2]["defer_loading"], true);
        // Not on a compatible local server, not for an old model, not when
        // every tool would be deferred, not when nobody asked.
        let cases: [(&str, &str, Vec<_>, bool); 4] = [
            (
                "anthropic-compatible",
                "claude-sonnet-4-5",
                vec![tool("a", false), tool("b", true)],
                true,
            ),
            (
                "anthropic",
                "claude-3-5-sonnet-latest",
                vec![tool("a", false), tool("b", true)],
                true,
            ),
            (
                "anthropic",
                "claude-sonnet-4-5",
                vec![tool("b", true)],
                true,
            ),
            (
                "anthropic",
                "claude-sonnet-4-5",
                vec![tool("a", false), tool("b", true)],
                false,
            ),
        ];
        for (provider, model, tools, search) in cases {
            let mut r = req(model, vec![msg(Role::User, "hi")]);
            r.provider = provider.into();
            r.tools = tools;
            r.tool_search = search;
            let body = body_of(&r).unwrap();
            let tools = body["tools"].as_array().unwrap();
            assert!(
                tools
                    .iter()
                    .all(|t| t.get("defer_loading").is_none() && t.get("type").is_none()),
                "{provider} {model} {search}: {body}"
            );
        }
    }

    #[test]
    fn server_tool_search_blocks_are_replayed() {
        let mut a = msg(Role::Assistant, "");
        a.provider_data = Some(
            json!([
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "github"}},
                {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": {"type": "tool_search_tool_search_result", "tool_references": [{"type": "tool_reference", "tool_name": "mcp__gh__search"}]}},
                {"type": "tool_use", "id": "toolu_1", "name": "mcp__gh__search", "input": {}}
            ])
            .to_string(),
        );
        a.tool_calls = vec![ToolCall {
            id: "toolu_1".into(),
            name: "mcp__gh__search".into(),
            arguments: "{}".into(),
        }];
        let body = body_of(&req("claude-sonnet-4-5", vec![msg(Role::User, "q"), a])).unwrap();
        let blocks = body["messages"][1]["content"].as_array().unwrap();
        let kinds: Vec<&str> = blocks.iter().map(|b| b["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["server_tool_use", "tool_search_tool_result", "tool_use"]
        );
    }

    #[test]
    fn a_tool_image_rides_in_its_tool_result() {
        let mut assistant = msg(Role::Assistant, "");
        assistant.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        }];
        let mut tool = msg(Role::Tool, "Image dot.png");
        tool.tool_call_id = Some("c1".into());
        tool.content.push(ContentPart::Image(
            turnstone_plugin_sdk::provider::ImageData {
                media_type: "image/png".into(),
                data_base64: "iVBO".into(),
            },
        ));
        let body = body_of(&req(
            "claude-opus-4-8",
            vec![msg(Role::User, "look"), assistant, tool],
        ))
        .unwrap();
        let result = &body["messages"][2]["content"][0];
        assert_eq!(result["type"], "tool_result");
        assert_eq!(
            result["content"],
            json!([
                {"type": "text", "text": "Image dot.png"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
            ])
        );
    }

    #[test]
    fn roles_alternate_by_merging_and_leading_system_is_hoisted() {
        let mut assistant = msg(Role::Assistant, "");
        assistant.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: "not json".into(),
        }];
        let mut tool = msg(Role::Tool, "out");
        tool.tool_call_id = Some("c1".into());
        tool.is_error = true;
        let body = body_of(&req(
            "claude-opus-4-8",
            vec![
                msg(Role::System, "be brief"),
                msg(Role::User, "a"),
                msg(Role::User, "b"),
                assistant,
                tool,
                msg(Role::User, "c"),
            ],
        ))
        .unwrap();
        assert_eq!(body["system"], "be brief");
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(
            m[0]["content"],
            json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
        );
        assert_eq!(
            m[1]["content"][0]["input"],
            json!({}),
            "unparsable arguments become an empty input"
        );
        assert_eq!(m[2]["content"][0]["is_error"], true);
        assert_eq!(m[2]["content"][1], json!({"type": "text", "text": "c"}));
        assert!(body_of(&req("", vec![])).is_err());
    }

    #[test]
    fn extra_may_replace_the_messages_and_they_are_written_once() {
        let mut r = req("claude-sonnet-4-5", vec![msg(Role::User, "hi")]);
        r.extra = Some(r#"{"messages": [{"role": "user", "content": "mine"}], "top_k": 5}"#.into());
        let text = messages_body(&r).expect("a body").to_json().expect("JSON");
        assert_eq!(text.matches("\"messages\"").count(), 1, "{text}");
        let body: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": "mine"}])
        );
        assert_eq!(body["top_k"], 5);
        r.extra = Some(r#"{"top_k": 5}"#.into());
        let body = body_of(&r).expect("a body");
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
    }
}
