//! Request bodies for the Chat Completions API.

use crate::chat_messages::chat_messages;
use crate::tools::{self, Body, Conversation, FunctionSpec, ToolEntry};
use serde_json::{Map, Value, json};
use turnstone_plugin_sdk::provider::{CompletionRequest, ModelCapabilities, ProviderError};

/// Default output budget when the request sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Capabilities by model name; unknown models get permissive defaults without vision.
pub fn capabilities(model: &str) -> ModelCapabilities {
    let m = model.to_ascii_lowercase();
    let vision = m.starts_with("gpt-4o")
        || m.starts_with("gpt-4.1")
        || m.starts_with("gpt-5")
        || m.starts_with("gemini");
    let reasoning =
        m.starts_with("o1") || m.starts_with("o3") || m.starts_with("o4") || m.starts_with("gpt-5");
    let context_window = if m.starts_with("gemini") {
        2_000_000
    } else if m.starts_with("gpt-4.1") || m.starts_with("gpt-5") {
        400_000
    } else {
        128_000
    };
    ModelCapabilities {
        context_window,
        max_output_tokens: if m.starts_with("gemini") {
            65_536
        } else {
            16_384
        },
        supports_tools: true,
        supports_vision: vision,
        supports_reasoning: reasoning,
        supports_temperature: !reasoning,
        supports_streaming: true,
        // Hosted tool search is a Responses API feature of GPT-5.4 and later.
        supports_tool_search: crate::responses::supports_tool_search(&m),
    }
}

fn bad(msg: impl Into<String>) -> ProviderError {
    ProviderError::BadRequest(msg.into())
}

/// Operator capability overrides relevant to the body.
fn overrides(req: &CompletionRequest) -> Result<Map<String, Value>, ProviderError> {
    match &req.capabilities {
        None => Ok(Map::new()),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(bad("capabilities must be a JSON object")),
        },
    }
}

/// Which API a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `/chat/completions`.
    Chat,
    /// `/responses`.
    Responses,
}

/// The body's JSON text for whichever API serves `req`.
pub fn request_body(req: &CompletionRequest) -> Result<(Api, String), ProviderError> {
    let (api, body) = request_body_of(req)?;
    Ok((api, body.to_json()?))
}

/// The body for whichever API serves `req`, to be serialized.
pub fn request_body_of(req: &CompletionRequest) -> Result<(Api, Body<'_>), ProviderError> {
    let caps = overrides(req)?;
    if crate::responses::uses_responses(req, &caps) {
        if req.model.is_empty() {
            return Err(bad("no model given"));
        }
        Ok((
            Api::Responses,
            crate::responses::responses_body(req, &caps)?,
        ))
    } else {
        Ok((Api::Chat, chat_body(req)?))
    }
}

/// The Chat Completions request body.
pub fn chat_body(req: &CompletionRequest) -> Result<Body<'_>, ProviderError> {
    if req.model.is_empty() {
        return Err(bad("no model given"));
    }
    let caps = overrides(req)?;
    let model_caps = capabilities(&req.model);
    // OpenAI's own API wants max_completion_tokens; Gemini's endpoint and most
    // local servers take max_tokens. An operator can override either way.
    let default_param = if req.provider == "openai" {
        "max_completion_tokens"
    } else {
        "max_tokens"
    };
    let token_param = caps
        .get("token_param")
        .and_then(Value::as_str)
        .unwrap_or(default_param)
        .to_string();
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert(
        token_param,
        json!(req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    let supports_temperature = caps
        .get("supports_temperature")
        .and_then(Value::as_bool)
        .unwrap_or(model_caps.supports_temperature);
    if let Some(t) = req.temperature
        && supports_temperature
    {
        body.insert("temperature".into(), json!(t));
    }
    if let Some(effort) = &req.reasoning_effort {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    let mut tools = Vec::with_capacity(req.tools.len());
    for t in &req.tools {
        tools.push(ToolEntry::Chat {
            kind: "function",
            function: FunctionSpec::of(t)?,
        });
    }
    let mut body = tools::body(body, tools).with_conversation(
        "messages",
        Conversation::Messages(chat_messages(&req.messages)),
    );
    if let Some(extra) = &req.extra {
        body.merge_extra(extra)?;
    }
    Ok(body)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use turnstone_plugin_sdk::provider::{
        ContentPart, ImageData, Message, Role, ToolCall, text_of,
    };

    // The `Value` tree the `messages` array was built as before
    // `chat_messages`: the reference its output is held equal to.
    fn content_value(parts: &[ContentPart]) -> Value {
        if parts.iter().all(|p| matches!(p, ContentPart::Text(_))) {
            return Value::String(text_of(parts));
        }
        Value::Array(
            parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text(t) => json!({"type": "text", "text": t}),
                    ContentPart::Image(img) => image_part(img),
                })
                .collect(),
        )
    }

    fn image_part(img: &ImageData) -> Value {
        json!({
            "type": "image_url",
            "image_url": {"url": format!("data:{};base64,{}", img.media_type, img.data_base64)}
        })
    }

    fn message_value(m: &Message) -> Value {
        match m.role {
            Role::System => json!({"role": "system", "content": text_of(&m.content)}),
            Role::User => json!({"role": "user", "content": content_value(&m.content)}),
            Role::Tool => json!({
                "role": "tool",
                "tool_call_id": m.tool_call_id.clone().unwrap_or_default(),
                "content": text_of(&m.content),
            }),
            Role::Assistant => {
                let mut v = json!({"role": "assistant", "content": text_of(&m.content)});
                if !m.tool_calls.is_empty() {
                    v["tool_calls"] = Value::Array(
                        m.tool_calls
                            .iter()
                            .map(|c| {
                                json!({
                                    "id": c.id,
                                    "type": "function",
                                    "function": {"name": c.name, "arguments": c.arguments},
                                })
                            })
                            .collect(),
                    );
                }
                v
            }
        }
    }

    /// The `messages` array. Chat Completions takes images only in user
    /// messages, so images a tool returned follow its batch of results as one
    /// user message that names the call each came from.
    fn messages_value(messages: &[Message]) -> Vec<Value> {
        let mut out = Vec::with_capacity(messages.len());
        let mut pending: Vec<Value> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            out.push(message_value(m));
            if m.role != Role::Tool {
                continue;
            }
            let images: Vec<Value> = m
                .content
                .iter()
                .filter_map(|p| match p {
                    ContentPart::Image(img) => Some(image_part(img)),
                    ContentPart::Text(_) => None,
                })
                .collect();
            if !images.is_empty() {
                pending.push(json!({
                    "type": "text",
                    "text": format!(
                        "Image{} returned by tool call {}:",
                        if images.len() == 1 { "" } else { "s" },
                        m.tool_call_id.as_deref().unwrap_or("?")
                    ),
                }));
                pending.extend(images);
            }
            let batch_ends = messages.get(i + 1).is_none_or(|n| n.role != Role::Tool);
            if batch_ends && !pending.is_empty() {
                out.push(json!({"role": "user", "content": std::mem::take(&mut pending)}));
            }
        }
        out
    }

    pub(crate) fn msg(role: Role, text: &str) -> Message {
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

    /// An `openai` request for `model` with `messages` and nothing else set.
    pub(crate) fn request(model: &str, messages: Vec<Message>) -> CompletionRequest {
        CompletionRequest {
            provider: "openai".into(),
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

    /// A user request, two read_file calls and their results, the first
    /// with an image.
    pub(crate) fn image_batch() -> Vec<Message> {
        let mut assistant = msg(Role::Assistant, "");
        assistant.tool_calls = ["c1", "c2"]
            .iter()
            .map(|id| ToolCall {
                id: (*id).into(),
                name: "read_file".into(),
                arguments: "{}".into(),
            })
            .collect();
        let mut first = msg(Role::Tool, "Image dot.png");
        first.tool_call_id = Some("c1".into());
        first.content.push(ContentPart::Image(ImageData {
            media_type: "image/png".into(),
            data_base64: "iVBO".into(),
        }));
        let mut second = msg(Role::Tool, "1\tfn main() {}");
        second.tool_call_id = Some("c2".into());
        vec![msg(Role::User, "look"), assistant, first, second]
    }

    /// `chat_messages`' output, read back as JSON.
    fn serialised(messages: &[Message]) -> Vec<Value> {
        let text = serde_json::to_string(&chat_messages(messages)).expect("serialises");
        serde_json::from_str(&text).expect("JSON")
    }

    /// Every kind of message and content, and text that must be escaped.
    pub(crate) fn corpus() -> Vec<Message> {
        let odd = "quote \" backslash \\ newline \n tab \t nul \u{0} bell \u{7} é ☕ 日本 \u{2028}";
        let mut out = vec![
            msg(Role::System, "You are terse."),
            msg(Role::User, odd),
            msg(Role::Assistant, ""),
        ];
        let mut parts = msg(Role::User, "first ");
        parts.content.push(ContentPart::Text("second".into()));
        out.push(parts);
        let mut with_image = msg(Role::User, "what is this?");
        with_image.content.push(ContentPart::Image(ImageData {
            media_type: "image/jpeg".into(),
            data_base64: "/9j/4AAQ+/=".into(),
        }));
        // Nothing a host sends, but the URL must be escaped as any string.
        with_image.content.push(ContentPart::Image(ImageData {
            media_type: "image/\"x\\y\n".into(),
            data_base64: "é\u{1}".into(),
        }));
        with_image.content.push(ContentPart::Text(odd.into()));
        out.push(with_image);
        let mut empty = msg(Role::User, "");
        empty.content.clear();
        out.push(empty);
        let mut called = msg(Role::Assistant, odd);
        called.content.push(ContentPart::Text(" more".into()));
        called.tool_calls.push(ToolCall {
            id: "call_\"1".into(),
            name: "bash".into(),
            arguments: r#"{"command":"echo \"hi\"\n"}"#.into(),
        });
        out.push(called);
        let mut no_id = msg(Role::Tool, odd);
        no_id.tool_call_id = None;
        out.push(no_id);
        out.extend(image_batch());
        // A batch whose two results each bring two images.
        let mut assistant = msg(Role::Assistant, "two");
        assistant.tool_calls = ["a", "b"]
            .iter()
            .map(|id| ToolCall {
                id: (*id).into(),
                name: "view".into(),
                arguments: "{}".into(),
            })
            .collect();
        out.push(assistant);
        for id in ["a", "b"] {
            let mut result = msg(Role::Tool, id);
            result.tool_call_id = Some(id.into());
            for n in 0..2 {
                result.content.push(ContentPart::Image(ImageData {
                    media_type: "image/png".into(),
                    data_base64: format!("{id}{n}"),
                }));
            }
            out.push(result);
        }
        out.push(msg(Role::User, "thanks"));
        out
    }

    #[test]
    fn messages_serialise_as_the_value_tree_did() {
        let corpus = corpus();
        assert_eq!(serialised(&corpus), messages_value(&corpus));
        // Every prefix too: a batch cut short ends the conversation.
        for n in 0..corpus.len() {
            assert_eq!(
                serialised(&corpus[..n]),
                messages_value(&corpus[..n]),
                "{n}"
            );
        }
    }

    #[test]
    fn the_body_carries_the_messages_unless_extra_replaces_them() {
        let mut req = request("gpt-4o", image_batch());
        let body = |req: &CompletionRequest| -> Value {
            serde_json::from_str(&chat_body(req).expect("body").to_json().expect("JSON"))
                .expect("JSON")
        };
        let v = body(&req);
        assert_eq!(v["messages"], Value::Array(messages_value(&req.messages)));
        assert_eq!(v["model"], "gpt-4o");
        assert_eq!(v["stream"], true);
        req.extra = Some(r#"{"messages":[{"role":"user","content":"replaced"}],"seed":7}"#.into());
        let v = body(&req);
        assert_eq!(
            v["messages"],
            json!([{"role": "user", "content": "replaced"}])
        );
        assert_eq!(v["seed"], 7);
    }

    #[test]
    fn tool_images_follow_their_batch_as_one_user_message() {
        let m = serialised(&image_batch());
        assert_eq!(m.len(), 5, "{m:?}");
        assert_eq!(m[2]["role"], "tool");
        assert_eq!(
            m[2]["content"], "Image dot.png",
            "a tool message carries text only"
        );
        assert_eq!(m[3]["role"], "tool");
        assert_eq!(
            m[4]["role"], "user",
            "after the whole batch, not between results"
        );
        assert_eq!(
            m[4]["content"],
            json!([
                {"type": "text", "text": "Image returned by tool call c1:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
            ])
        );
        let plain: Vec<Message> = image_batch()
            .into_iter()
            .map(|mut m| {
                m.content.retain(|p| matches!(p, ContentPart::Text(_)));
                m
            })
            .collect();
        assert_eq!(serialised(&plain).len(), 4, "no images, no extra message");
    }
}
