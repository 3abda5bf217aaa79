//! Messages API request bodies.

use crate::models::{Thinking, lookup};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use turnstone_plugin_sdk::provider::{
    CompletionRequest, ContentPart, Message, ProviderError, Role, text_of,
};
use turnstone_plugin_sdk::request_body::{RequestBody, tool_schema};

/// Default output budget when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Block types the Messages API accepts back verbatim; anything else in a
/// stored native lane (e.g. another vendor's reasoning) is rebuilt instead.
const VALID_BLOCK_TYPES: &[&str] = &[
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "server_tool_use",
    "web_search_tool_result",
    "tool_search_tool_result",
];

/// Anthropic's server-side BM25 tool search (`defer_loading` tools are found
/// through it and expanded by the API).
const TOOL_SEARCH_TOOL: &str = "tool_search_tool_bm25_20251119";

fn bad(msg: impl Into<String>) -> ProviderError {
    ProviderError::BadRequest(msg.into())
}

fn blocks_of(parts: &[ContentPart]) -> Vec<Value> {
    parts
        .iter()
        .map(|p| match p {
            ContentPart::Text(t) => json!({"type": "text", "text": t}),
            ContentPart::Image(img) => json!({
                "type": "image",
                "source": {"type": "base64", "media_type": img.media_type, "data": img.data_base64},
            }),
        })
        .collect()
}

/// One outgoing message while grouping.
struct Out {
    role: &'static str,
    blocks: Vec<Value>,
    /// A lone plain-text user/system message is sent as a string.
    plain: Option<String>,
}

fn push(out: &mut Vec<Out>, role: &'static str, blocks: Vec<Value>, plain: Option<String>) {
    if let Some(last) = out.last_mut()
        && last.role == role
        && role != "system"
    {
        // Roles must alternate: merge into the previous message.
        if let Some(text) = last.plain.take() {
            last.blocks = vec![json!({"type": "text", "text": text})];
        }
        last.blocks.extend(blocks);
        if let Some(text) = plain {
            last.blocks.push(json!({"type": "text", "text": text}));
        }
        return;
    }
    out.push(Out {
        role,
        blocks,
        plain,
    });
}

fn native_blocks(m: &Message) -> Option<Vec<Value>> {
    let blocks: Vec<Value> = serde_json::from_str(m.provider_data.as_deref()?).ok()?;
    let valid = !blocks.is_empty()
        && blocks.iter().all(|b| {
            b.get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| VALID_BLOCK_TYPES.contains(&t))
        });
    valid.then_some(blocks)
}

fn assistant_blocks(m: &Message, replay: bool) -> Vec<Value> {
    if let Some(blocks) = native_blocks(m) {
        if replay {
            return blocks;
        }
        // Server-side tool blocks (tool search, web search) stay paired with
        // their results even without reasoning replay: a tool search's
        // result is what keeps the tools it loaded loaded. Thinking stays out.
        if blocks.iter().any(|b| b["type"] == "server_tool_use") {
            return blocks
                .into_iter()
                .filter(|b| !matches!(b["type"].as_str(), Some("thinking" | "redacted_thinking")))
                .collect();
        }
    }
    let mut blocks = Vec::new();
    let text = text_of(&m.content);
    if !text.is_empty() {
        blocks.push(json!({"type": "text", "text": text}));
    }
    for c in &m.tool_calls {
        let input: Value = serde_json::from_str(&c.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
    }
    blocks
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
pub type Body<'a> = RequestBody<ToolEntry<'a>>;

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

    let mut system = Vec::new();
    let mut out: Vec<Out> = Vec::new();
    for m in &req.messages {
        match m.role {
            Role::System => {
                let text = text_of(&m.content);
                // A leading system prompt always goes to `system`; later ones stay
                // inline only for models that accept mid-conversation system turns.
                if profile.inline_system && !out.is_empty() {
                    push(&mut out, "system", Vec::new(), Some(text));
                } else {
                    system.push(text);
                }
            }
            Role::User => {
                let plain = match m.content.as_slice() {
                    [ContentPart::Text(t)] => Some(t.clone()),
                    _ => None,
                };
                let blocks = if plain.is_some() {
                    Vec::new()
                } else {
                    blocks_of(&m.content)
                };
                push(&mut out, "user", blocks, plain);
            }
            Role::Assistant => {
                let blocks = assistant_blocks(m, replay);
                if !blocks.is_empty() {
                    push(&mut out, "assistant", blocks, None);
                }
            }
            Role::Tool => {
                // Images a tool returned ride in its result as image blocks.
                let content = if m.content.iter().any(|p| matches!(p, ContentPart::Image(_))) {
                    Value::Array(blocks_of(&m.content))
                } else {
                    json!(text_of(&m.content))
                };
                let mut block = json!({
                    "type": "tool_result",
                    "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
                    "content": content,
                });
                if m.is_error {
                    block["is_error"] = json!(true);
                }
                push(&mut out, "user", vec![block], None);
            }
        }
    }
    let messages: Vec<Value> = out
        .into_iter()
        .map(|o| match o.plain {
            Some(text) => json!({"role": o.role, "content": text}),
            None => json!({"role": o.role, "content": o.blocks}),
        })
        .collect();

    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("messages".into(), Value::Array(messages));
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
    let mut body = Body {
        fields: body,
        tools,
    };
    if let Some(extra) = &req.extra {
        body.merge_extra(extra)?;
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_plugin_sdk::provider::ToolCall;

    /// The body as the JSON the server receives.
    fn body_of(r: &CompletionRequest) -> Result<Value, ProviderError> {
        let text = messages_body(r)?.to_json()?;
        Ok(serde_json::from_str(&text).expect("the body is JSON"))
    }

    fn msg(role: Role, text: &str) -> Message {
        Message {
            role,
            content: vec![ContentPart::Text(text.into())],
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            reasoning: None,
            provider_data: None,
            source: None,
        }
    }

    fn req(model: &str, messages: Vec<Message>) -> CompletionRequest {
        CompletionRequest {
            provider: "anthropic".into(),
            base_url: String::new(),
            model: model.into(),
            messages,
            tools: Vec::new(),
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            replay_reasoning: false,
            capabilities: None,
            extra: None,
            tool_search: false,
        }
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
}
