//! The Responses API lane (commercial OpenAI reasoning models): request body and
//! SSE stream.

use crate::body::DEFAULT_MAX_TOKENS;
use crate::responses_event::EventHead;
use crate::responses_input::{InputItem, Item, Output};
use crate::tools::{self, Body, Conversation, FunctionSpec, ToolEntry};
use serde_json::{Map, Value, json};
use turnstone_plugin_sdk::provider::{
    CompletionRequest, DeltaBatch, FinishReason, ProviderError, Role, ServerError, StreamEvent,
    ToolCallDelta, Usage, text_of,
};
use turnstone_plugin_sdk::request_body::stored_items;

/// Whether `model` (or an `api` override) uses the Responses API.
pub fn uses_responses(req: &CompletionRequest, caps: &Map<String, Value>) -> bool {
    match caps.get("api").and_then(Value::as_str) {
        Some("responses") => return true,
        Some("chat") => return false,
        _ => {}
    }
    if req.provider != "openai" {
        return false;
    }
    let m = req.model.to_ascii_lowercase();
    m.starts_with("gpt-5") || m.starts_with("o1") || m.starts_with("o3") || m.starts_with("o4")
}

/// The minor version of a `gpt-5.N…` model (`gpt-5` itself is 0).
pub fn gpt5_minor(model: &str) -> Option<u32> {
    let m = model.to_ascii_lowercase();
    let rest = m.strip_prefix("gpt-5")?;
    match rest.strip_prefix('.') {
        Some(minor) => minor
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok()),
        None => (rest.is_empty() || rest.starts_with('-')).then_some(0),
    }
}

/// Hosted tool search: GPT-5.4 and later on the Responses API.
pub fn supports_tool_search(model: &str) -> bool {
    gpt5_minor(model).is_some_and(|minor| minor >= 4)
}

/// Output items of this lane that are replayed with the assistant turn:
/// encrypted reasoning, and the hosted tool search's call and output (the
/// tools it loaded stay loaded only while they are in the input).
const REPLAYED_ITEMS: &[&str] = &["reasoning", "tool_search_call", "tool_search_output"];

/// GPT-5.6 and later use prompt_cache_options; earlier GPT-5 models the 24 h retention.
fn cache_params(model: &str) -> (&'static str, Value) {
    let newer = gpt5_minor(model).is_some_and(|minor| minor >= 6);
    if newer {
        ("prompt_cache_options", json!({"ttl": "30m"}))
    } else {
        ("prompt_cache_retention", json!("24h"))
    }
}

/// The Responses request body.
pub fn responses_body<'a>(
    req: &'a CompletionRequest,
    caps: &Map<String, Value>,
) -> Result<Body<'a>, ProviderError> {
    let mut instructions = Vec::new();
    let mut input = Vec::new();
    for m in &req.messages {
        match m.role {
            Role::System => instructions.push(text_of(&m.content)),
            Role::User => input.push(InputItem::Built(Item::Message {
                role: "user",
                content: Output::of(&m.content),
            })),
            Role::Assistant => {
                // This lane's own reasoning items (encrypted) replay before the turn.
                if let Some(items) = m.provider_data.as_deref().and_then(stored_items) {
                    // Reasoning only when the operator's setting allows;
                    // the tool search's items always (they keep its tools loaded).
                    input.extend(
                        items
                            .into_iter()
                            .filter(|i| match i.kind() {
                                Some("reasoning") => req.replay_reasoning,
                                Some(t) => REPLAYED_ITEMS.contains(&t),
                                None => false,
                            })
                            .map(|i| InputItem::Replayed(i.raw)),
                    );
                }
                let text = turnstone_plugin_sdk::provider::text_cow(&m.content);
                if !text.is_empty() {
                    input.push(InputItem::Built(Item::Message {
                        role: "assistant",
                        content: Output::Text(text),
                    }));
                }
                for c in &m.tool_calls {
                    input.push(InputItem::Built(Item::FunctionCall {
                        call_id: &c.id,
                        name: &c.name,
                        arguments: &c.arguments,
                    }));
                }
            }
            Role::Tool => input.push(InputItem::Built(Item::FunctionCallOutput {
                call_id: m.tool_call_id.as_deref().unwrap_or_default(),
                output: Output::of(&m.content),
            })),
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    body.insert("stream".into(), json!(true));
    // Stateless: reasoning comes back encrypted so it can be replayed.
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    body.insert(
        "max_output_tokens".into(),
        json!(req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
    );
    let (cache_key, cache_value) = cache_params(&req.model);
    body.insert(cache_key.into(), cache_value);
    if !instructions.is_empty() {
        body.insert("instructions".into(), json!(instructions.join("\n\n")));
    }
    let mut reasoning = Map::new();
    if let Some(e) = &req.reasoning_effort {
        reasoning.insert("effort".into(), json!(e));
    }
    if let Some(mode) = caps.get("reasoning_mode").and_then(Value::as_str) {
        reasoning.insert("mode".into(), json!(mode));
    }
    if !reasoning.is_empty() {
        body.insert("reasoning".into(), Value::Object(reasoning));
    }
    if let Some(v) = caps.get("verbosity").and_then(Value::as_str) {
        body.insert("text".into(), json!({"verbosity": v}));
    }
    let mut tools = Vec::with_capacity(req.tools.len() + 1);
    if !req.tools.is_empty() {
        // Hosted tool search over the deferred tools, where the model has it.
        let native = req.tool_search
            && req.provider == "openai"
            && supports_tool_search(&req.model)
            && req.tools.iter().any(|t| t.defer_loading);
        for t in &req.tools {
            let spec = FunctionSpec::of(t)?;
            tools.push(ToolEntry::Flat {
                kind: "function",
                name: spec.name,
                description: spec.description,
                parameters: spec.parameters,
                strict: false,
                defer_loading: native && t.defer_loading,
            });
        }
        if native {
            tools.push(ToolEntry::Hosted {
                kind: "tool_search",
            });
        }
    }
    let mut body = tools::body(body, tools).with_conversation("input", Conversation::Input(input));
    if let Some(extra) = &req.extra {
        body.merge_extra(extra)?;
    }
    Ok(body)
}

/// Parses one Responses stream.
pub struct ResponsesStream<'a> {
    sink: &'a mut dyn FnMut(StreamEvent) -> bool,
    batch: DeltaBatch,
    calls: Vec<u32>,
    reasoning_items: Vec<Value>,
    /// A terminal event arrived.
    pub finished: bool,
}

impl<'a> ResponsesStream<'a> {
    /// A parser emitting into `sink`.
    pub fn new(sink: &'a mut dyn FnMut(StreamEvent) -> bool) -> Self {
        Self {
            sink,
            batch: DeltaBatch::default(),
            calls: Vec::new(),
            reasoning_items: Vec::new(),
            finished: false,
        }
    }

    fn send(&mut self, ev: StreamEvent) -> Result<(), ProviderError> {
        self.batch.push(ev, &mut *self.sink)
    }

    /// Sends the deltas held back from the last read.
    pub fn flush(&mut self) -> Result<(), ProviderError> {
        self.batch.flush(&mut *self.sink)
    }

    fn ordinal(&mut self, output_index: u32) -> u32 {
        match self.calls.iter().position(|&i| i == output_index) {
            Some(p) => p as u32,
            None => {
                self.calls.push(output_index);
                (self.calls.len() - 1) as u32
            }
        }
    }

    /// Handles one SSE `data` payload: the common events through their
    /// typed fields ([`EventHead`]), anything else as a `Value`.
    pub fn handle(&mut self, data: &str) -> Result<(), ProviderError> {
        match EventHead::parse(data) {
            Some(head) => self.handle_head(head, data),
            None => self.handle_value(data),
        }
    }

    /// An event whose typed fields were read. Replayed items and errors need
    /// the whole event, so they go to [`Self::handle_value`].
    fn handle_head(&mut self, e: EventHead<'_>, data: &str) -> Result<(), ProviderError> {
        let delta = e.delta.as_deref().unwrap_or("");
        match e.kind.as_ref() {
            "response.output_text.delta" => self.batch.push_text(false, delta, &mut *self.sink),
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                self.batch.push_text(true, delta, &mut *self.sink)
            }
            "response.function_call_arguments.delta" => {
                let index = self.ordinal(e.output_index);
                self.send(StreamEvent::ToolCallDelta(ToolCallDelta {
                    index,
                    id: None,
                    name: None,
                    arguments_delta: delta.to_string(),
                }))
            }
            "response.output_item.added" => match e.item {
                Some(item) if item.kind.as_deref() == Some("function_call") => {
                    let index = self.ordinal(e.output_index);
                    self.send(StreamEvent::ToolCallDelta(ToolCallDelta {
                        index,
                        id: Some(item.call_id.unwrap_or_default()),
                        name: Some(item.name.unwrap_or_default()),
                        arguments_delta: item.arguments.unwrap_or_default(),
                    }))
                }
                _ => Ok(()),
            },
            "response.output_item.done" => match e.item.and_then(|i| i.kind) {
                Some(kind) if REPLAYED_ITEMS.contains(&kind.as_ref()) => self.handle_value(data),
                _ => Ok(()),
            },
            kind @ ("response.completed" | "response.incomplete") => {
                let tail = e.response.unwrap_or_default();
                let reason = tail.incomplete_details.and_then(|d| d.reason);
                let usage = tail.usage.unwrap_or_default();
                self.finish(
                    kind == "response.incomplete",
                    reason.as_deref().unwrap_or(""),
                    Usage {
                        prompt_tokens: usage.input_tokens,
                        completion_tokens: usage.output_tokens,
                        cached_tokens: usage.input_tokens_details.map_or(0, |d| d.cached_tokens),
                        reasoning_tokens: usage
                            .output_tokens_details
                            .map_or(0, |d| d.reasoning_tokens),
                    },
                )
            }
            "response.failed" | "error" => self.handle_value(data),
            _ => Ok(()),
        }
    }

    /// The end of the response: its finish reason, usage, and the items to
    /// replay with the turn.
    fn finish(
        &mut self,
        incomplete: bool,
        incomplete_reason: &str,
        usage: Usage,
    ) -> Result<(), ProviderError> {
        self.finished = true;
        let reason = if incomplete {
            match incomplete_reason {
                "content_filter" => FinishReason::ContentFilter,
                _ => FinishReason::Length,
            }
        } else if self.calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        self.send(StreamEvent::Finish(reason))?;
        self.send(StreamEvent::Usage(usage))?;
        if !self.reasoning_items.is_empty() {
            let items = json!(self.reasoning_items).to_string();
            self.send(StreamEvent::ProviderBlock(items))?;
        }
        Ok(())
    }

    /// Reads an event as a `Value`: lenient about field types (a missing or
    /// mistyped field reads as empty or zero), for the events
    /// [`EventHead`] does not fit and those that need the whole event.
    pub(crate) fn handle_value(&mut self, data: &str) -> Result<(), ProviderError> {
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Network(format!("malformed stream event: {e}")))?;
        let s = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let output_index = v.get("output_index").and_then(Value::as_u64).unwrap_or(0) as u32;
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "response.output_text.delta" => self.send(StreamEvent::TextDelta(s("/delta")))?,
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                self.send(StreamEvent::ReasoningDelta(s("/delta")))?
            }
            "response.output_item.added"
                if v.pointer("/item/type") == Some(&json!("function_call")) =>
            {
                let index = self.ordinal(output_index);
                self.send(StreamEvent::ToolCallDelta(ToolCallDelta {
                    index,
                    id: Some(s("/item/call_id")),
                    name: Some(s("/item/name")),
                    arguments_delta: s("/item/arguments"),
                }))?;
            }
            "response.function_call_arguments.delta" => {
                let index = self.ordinal(output_index);
                self.send(StreamEvent::ToolCallDelta(ToolCallDelta {
                    index,
                    id: None,
                    name: None,
                    arguments_delta: s("/delta"),
                }))?;
            }
            "response.output_item.done"
                if v.pointer("/item/type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| REPLAYED_ITEMS.contains(&t)) =>
            {
                if let Some(item) = v.get("item") {
                    if item["type"] == "tool_search_output" {
                        let found: Vec<&str> = item["tools"]
                            .as_array()
                            .map(|ts| ts.iter().filter_map(|t| t["name"].as_str()).collect())
                            .unwrap_or_default();
                        self.send(StreamEvent::Info(if found.is_empty() {
                            "Tool search found nothing.".into()
                        } else {
                            format!("Tool search found: {}", found.join(", "))
                        }))?;
                    }
                    self.reasoning_items.push(item.clone());
                }
            }
            kind @ ("response.completed" | "response.incomplete") => {
                let n = |p: &str| v.pointer(p).and_then(Value::as_u64).unwrap_or(0) as u32;
                self.finish(
                    kind == "response.incomplete",
                    &s("/response/incomplete_details/reason"),
                    Usage {
                        prompt_tokens: n("/response/usage/input_tokens"),
                        completion_tokens: n("/response/usage/output_tokens"),
                        cached_tokens: n("/response/usage/input_tokens_details/cached_tokens"),
                        reasoning_tokens: n(
                            "/response/usage/output_tokens_details/reasoning_tokens",
                        ),
                    },
                )?;
            }
            "response.failed" | "error" => {
                let message = v
                    .pointer("/response/error/message")
                    .or_else(|| v.pointer("/message"))
                    .or_else(|| v.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .unwrap_or("the response failed")
                    .to_string();
                return Err(ProviderError::Server(ServerError {
                    status: 500,
                    message,
                }));
            }
            _ => {}
        }
        Ok(())
    }

    /// End of body: without a terminal event the response is incomplete (retryable).
    pub fn end(&mut self) -> Result<(), ProviderError> {
        self.flush()?;
        if self.finished {
            Ok(())
        } else {
            Err(ProviderError::Network(
                "the stream ended before response.completed".into(),
            ))
        }
    }
}

impl turnstone_plugin_sdk::provider::SseHandler for ResponsesStream<'_> {
    fn handle(&mut self, data: &str) -> Result<(), ProviderError> {
        ResponsesStream::handle(self, data)
    }
    fn done(&self) -> bool {
        self.finished
    }
    fn end(&mut self) -> Result<(), ProviderError> {
        ResponsesStream::end(self)
    }
    fn flush(&mut self) -> Result<(), ProviderError> {
        ResponsesStream::flush(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_plugin_sdk::provider::{ContentPart, Message};

    fn as_value(body: Body<'_>) -> Value {
        serde_json::from_str(&body.to_json().unwrap()).unwrap()
    }

    // The `input` list as a `Value` tree, as it was built before
    // `responses_input`: the reference its output is held equal to.
    /// Text alone as a string; with images, `input_text` / `input_image` parts
    /// (the shape both a user message and a `function_call_output` take).
    fn tool_output(parts: &[ContentPart]) -> Value {
        if parts.iter().all(|p| matches!(p, ContentPart::Text(_))) {
            return json!(text_of(parts));
        }
        Value::Array(
            parts
                .iter()
                .map(|p| match p {
                    ContentPart::Text(t) => json!({"type": "input_text", "text": t}),
                    ContentPart::Image(i) => json!({
                        "type": "input_image",
                        "image_url": format!("data:{};base64,{}", i.media_type, i.data_base64),
                    }),
                })
                .collect(),
        )
    }

    fn input_value(req: &CompletionRequest) -> Vec<Value> {
        let mut instructions: Vec<String> = Vec::new();
        let mut input = Vec::new();
        for m in &req.messages {
            match m.role {
                Role::System => instructions.push(text_of(&m.content)),
                Role::User => {
                    let content = tool_output(&m.content);
                    input.push(json!({"type": "message", "role": "user", "content": content}));
                }
                Role::Assistant => {
                    // This lane's own reasoning items (encrypted) replay before the turn.
                    if let Some(items) = m
                        .provider_data
                        .as_deref()
                        .and_then(|d| serde_json::from_str::<Vec<Value>>(d).ok())
                    {
                        // Reasoning only when the operator's setting allows;
                        // the tool search's items always (they keep its tools loaded).
                        input.extend(items.into_iter().filter(|i| match i["type"].as_str() {
                            Some("reasoning") => req.replay_reasoning,
                            Some(t) => REPLAYED_ITEMS.contains(&t),
                            None => false,
                        }));
                    }
                    let text = text_of(&m.content);
                    if !text.is_empty() {
                        input
                            .push(json!({"type": "message", "role": "assistant", "content": text}));
                    }
                    for c in &m.tool_calls {
                        input.push(json!({
                                "type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments,
                            }));
                    }
                }
                Role::Tool => input.push(json!({
                    "type": "function_call_output",
                    "call_id": m.tool_call_id.clone().unwrap_or_default(),
                    "output": tool_output(&m.content),
                })),
            }
        }
        let _ = instructions;
        input
    }

    fn request_of(messages: Vec<Message>, replay_reasoning: bool) -> CompletionRequest {
        CompletionRequest {
            replay_reasoning,
            ..crate::body::tests::request("gpt-5", messages)
        }
    }

    /// Every kind of message (the chat lane's corpus), and assistant turns
    /// carrying replayed items: reasoning, the tool search's, other kinds,
    /// items without a type, and data that is not a list.
    fn corpus() -> Vec<Message> {
        let mut out = crate::body::tests::corpus();
        for data in [
            r#"[{"type":"reasoning","id":"rs_1","encrypted_content":"gAAA\"=","summary":[]},{"type":"tool_search_call","id":"ts_1"},{"type":"tool_search_output","tools":[{"type":"function","name":"x"}]},{"type":"message","content":[]},{"id":"no type"},7]"#,
            r#"{"type":"reasoning"}"#,
            "not json",
            "[]",
        ] {
            let mut m = crate::body::tests::msg(Role::Assistant, "after replay");
            m.provider_data = Some(data.into());
            out.push(m);
            out.push(crate::body::tests::msg(Role::User, "next"));
        }
        out
    }

    #[test]
    fn input_serialises_as_the_value_tree_did() {
        for replay in [false, true] {
            let corpus = corpus();
            for n in 0..=corpus.len() {
                let req = request_of(corpus[..n].to_vec(), replay);
                let body = as_value(responses_body(&req, &Map::new()).unwrap());
                assert_eq!(
                    body["input"],
                    Value::Array(input_value(&req)),
                    "{n} {replay}"
                );
            }
        }
    }

    #[test]
    fn extra_fields_are_merged_and_may_replace_the_input() {
        let mut req = request_of(crate::body::tests::image_batch(), false);
        req.extra = Some(r#"{"service_tier":"flex"}"#.into());
        let body = as_value(responses_body(&req, &Map::new()).unwrap());
        assert_eq!(body["service_tier"], "flex");
        assert_eq!(body["input"], Value::Array(input_value(&req)));
        req.extra = Some(r#"{"input":"just this"}"#.into());
        let body = as_value(responses_body(&req, &Map::new()).unwrap());
        assert_eq!(body["input"], "just this");
        req.extra = Some("[1]".into());
        assert!(responses_body(&req, &Map::new()).is_err());
    }

    #[test]
    fn a_tool_image_rides_in_its_function_call_output() {
        let req = crate::body::tests::request("gpt-5", crate::body::tests::image_batch());
        let body = as_value(responses_body(&req, &Map::new()).unwrap());
        let outputs: Vec<&Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "function_call_output")
            .collect();
        assert_eq!(
            outputs[0]["output"],
            json!([
                {"type": "input_text", "text": "Image dot.png"},
                {"type": "input_image", "image_url": "data:image/png;base64,iVBO"},
            ])
        );
        assert_eq!(outputs[1]["output"], "1\tfn main() {}");
    }

    #[test]
    fn function_calls_reasoning_and_usage() {
        let mut args = String::new();
        let mut kinds = Vec::new();
        let mut native = None;
        let mut sink = |ev: StreamEvent| {
            match ev {
                StreamEvent::ToolCallDelta(d) => {
                    args.push_str(&d.arguments_delta);
                    kinds.push(format!("tool{}", d.index));
                }
                StreamEvent::TextDelta(t) => kinds.push(format!("text:{t}")),
                StreamEvent::Finish(f) => kinds.push(format!(
                    "tools_finish:{}",
                    matches!(f, FinishReason::ToolCalls)
                )),
                StreamEvent::Usage(u) => kinds.push(format!(
                    "usage:{}/{}/{}",
                    u.prompt_tokens, u.completion_tokens, u.reasoning_tokens
                )),
                StreamEvent::ProviderBlock(b) => native = Some(b),
                _ => kinds.push("other".into()),
            }
            true
        };
        let mut p = ResponsesStream::new(&mut sink);
        for e in [
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "encrypted_content": "gAAA"}}),
            json!({"type": "response.output_text.delta", "output_index": 1, "delta": "Checking"}),
            json!({"type": "response.output_item.added", "output_index": 2, "item": {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": ""}}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{\"city\":"}),
            json!({"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "\"Oslo\"}"}),
            json!({"type": "response.completed", "response": {"usage": {"input_tokens": 5, "output_tokens": 9, "output_tokens_details": {"reasoning_tokens": 3}}}}),
        ] {
            p.handle(&e.to_string()).unwrap();
            p.flush().unwrap();
        }
        assert!(p.end().is_ok());
        assert_eq!(args, "{\"city\":\"Oslo\"}");
        assert_eq!(
            kinds,
            [
                "text:Checking",
                "tool0",
                "tool0",
                "tool0",
                "tools_finish:true",
                "usage:5/9/3"
            ]
        );
        assert!(native.unwrap().contains("gAAA"));
    }

    fn request(model: &str, tool_search: bool) -> CompletionRequest {
        use turnstone_plugin_sdk::provider::{Message, ToolDefinition};
        let tool = |name: &str, defer_loading: bool| ToolDefinition {
            name: name.into(),
            description: format!("{name} tool"),
            parameters: r#"{"type":"object"}"#.into(),
            defer_loading,
        };
        CompletionRequest {
            provider: "openai".into(),
            base_url: String::new(),
            model: model.into(),
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentPart::Text("hi".into())],
                tool_calls: Vec::new(),
                tool_call_id: None,
                tool_name: None,
                is_error: false,
                reasoning: None,
                provider_data: None,
                source: None,
            }],
            tools: vec![tool("read_file", false), tool("mcp__gh__search", true)],
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            replay_reasoning: false,
            capabilities: None,
            extra: None,
            tool_search,
        }
    }

    #[test]
    fn hosted_tool_search_defers_the_marked_tools_on_gpt_5_4_and_later() {
        let body = as_value(responses_body(&request("gpt-5.4", true), &Map::new()).unwrap());
        let tools = body["tools"].as_array().unwrap();
        assert_eq!(tools.len(), 3);
        assert_eq!(tools[0]["name"], "read_file");
        assert!(tools[0].get("defer_loading").is_none());
        assert_eq!(tools[1]["defer_loading"], true);
        assert_eq!(tools[2], json!({"type": "tool_search"}));
        // Older models, or no search asked: plain functions.
        for (model, search) in [("gpt-5.2", true), ("gpt-5.4", false)] {
            let body = as_value(responses_body(&request(model, search), &Map::new()).unwrap());
            let tools = body["tools"].as_array().unwrap();
            assert_eq!(tools.len(), 2, "{model}");
            assert!(tools.iter().all(|t| t.get("defer_loading").is_none()));
        }
        assert_eq!(gpt5_minor("gpt-5"), Some(0));
        assert_eq!(gpt5_minor("gpt-5-mini"), Some(0));
        assert_eq!(gpt5_minor("gpt-5.10-pro"), Some(10));
        assert_eq!(gpt5_minor("gpt-50"), None);
        assert!(supports_tool_search("GPT-5.6") && !supports_tool_search("gpt-4.1"));
    }

    #[test]
    fn tool_search_items_are_kept_and_replayed_in_order() {
        let mut info = Vec::new();
        let mut native = None;
        let mut sink = |ev: StreamEvent| {
            match ev {
                StreamEvent::Info(i) => info.push(i),
                StreamEvent::ProviderBlock(b) => native = Some(b),
                _ => {}
            }
            true
        };
        let mut p = ResponsesStream::new(&mut sink);
        for e in [
            json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "tool_search_call", "id": "tsc_1", "execution": "server", "call_id": null, "status": "completed", "arguments": {"query": "github"}}}),
            json!({"type": "response.output_item.done", "output_index": 1, "item": {"type": "tool_search_output", "id": "tso_1", "execution": "server", "call_id": null, "status": "completed", "tools": [{"type": "function", "name": "mcp__gh__search", "parameters": {}}]}}),
            json!({"type": "response.output_item.added", "output_index": 2, "item": {"type": "function_call", "call_id": "call_1", "name": "mcp__gh__search", "arguments": "{}"}}),
            json!({"type": "response.completed", "response": {"usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ] {
            p.handle(&e.to_string()).unwrap();
            p.flush().unwrap();
        }
        assert_eq!(info, ["Tool search found: mcp__gh__search"]);
        let items: Vec<Value> = serde_json::from_str(&native.unwrap()).unwrap();
        assert_eq!(items[0]["type"], "tool_search_call");
        assert_eq!(items[1]["type"], "tool_search_output");
        // The next request replays both before the assistant's call.
        let mut req = request("gpt-5.4", true);
        req.messages.push(turnstone_plugin_sdk::provider::Message {
            role: Role::Assistant,
            content: Vec::new(),
            tool_calls: vec![turnstone_plugin_sdk::provider::ToolCall {
                id: "call_1".into(),
                name: "mcp__gh__search".into(),
                arguments: "{}".into(),
            }],
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            reasoning: None,
            provider_data: Some(json!(items).to_string()),
            source: None,
        });
        let body = as_value(responses_body(&req, &Map::new()).unwrap());
        let kinds: Vec<&str> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "message",
                "tool_search_call",
                "tool_search_output",
                "function_call"
            ]
        );
    }

    #[test]
    fn failures_and_truncation() {
        let mut sink = |_ev: StreamEvent| true;
        let mut p = ResponsesStream::new(&mut sink);
        let r = p.handle(r#"{"type":"response.failed","response":{"error":{"message":"boom"}}}"#);
        assert!(
            matches!(r, Err(ProviderError::Server(ServerError { ref message, .. })) if message == "boom")
        );
        assert!(p.end().is_err());
    }
}
