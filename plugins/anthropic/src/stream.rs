//! Sending a Messages request and turning its SSE stream into events. Thinking
//! blocks (with signatures) and tool_use blocks are reassembled and emitted as
//! one provider block at the end, so they can be replayed verbatim.

use crate::body::messages_body;
use serde_json::{Value, json};
use turnstone_plugin_sdk::http::{Request, Response};
use turnstone_plugin_sdk::provider::{
    CompletionRequest, DeltaBatch, FinishReason, ProviderError, ServerError, SseHandler,
    StreamEvent, ToolCallDelta, Usage, drive_sse, emit, send_streaming_json,
};

/// The Messages API version header value.
pub const API_VERSION: &str = "2023-06-01";

/// Parses one Messages stream.
pub struct MessagesStream<'a> {
    sink: &'a mut dyn FnMut(StreamEvent) -> bool,
    batch: DeltaBatch,
    blocks: Vec<Value>,
    partial_json: Vec<String>,
    tool_ordinal: Vec<Option<u32>>,
    tools_seen: u32,
    usage: Usage,
    /// `message_stop` arrived.
    pub stopped: bool,
}

impl<'a> MessagesStream<'a> {
    /// A parser emitting into `sink`.
    pub fn new(sink: &'a mut dyn FnMut(StreamEvent) -> bool) -> Self {
        Self {
            sink,
            batch: DeltaBatch::default(),
            blocks: Vec::new(),
            partial_json: Vec::new(),
            tool_ordinal: Vec::new(),
            tools_seen: 0,
            usage: Usage {
                prompt_tokens: 0,
                completion_tokens: 0,
                cached_tokens: 0,
                reasoning_tokens: 0,
            },
            stopped: false,
        }
    }

    fn send(&mut self, ev: StreamEvent) -> Result<(), ProviderError> {
        self.batch.push(ev, &mut *self.sink)
    }

    /// Sends the deltas held back from the last read.
    pub fn flush(&mut self) -> Result<(), ProviderError> {
        self.batch.flush(&mut *self.sink)
    }

    fn read_usage(&mut self, u: &Value) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).map(|v| v as u32);
        let input = n("input_tokens");
        let cache_read = n("cache_read_input_tokens");
        let cache_write = n("cache_creation_input_tokens");
        if input.is_some() || cache_read.is_some() || cache_write.is_some() {
            self.usage.prompt_tokens =
                input.unwrap_or(0) + cache_read.unwrap_or(0) + cache_write.unwrap_or(0);
            self.usage.cached_tokens = cache_read.unwrap_or(0);
        }
        if let Some(o) = n("output_tokens") {
            self.usage.completion_tokens = o;
        }
    }

    /// One `content_block_delta`: `field` gives the delta's `type` and text
    /// fields ("" when absent). Merged text deltas are copied once, into the
    /// batch.
    fn block_delta<'d>(
        &mut self,
        index: usize,
        field: impl Fn(&str) -> &'d str,
    ) -> Result<(), ProviderError> {
        if index >= self.blocks.len() {
            return Err(ProviderError::Network(
                "delta for an unknown content block".into(),
            ));
        }
        match field("type") {
            "text_delta" => {
                let t = field("text");
                append(&mut self.blocks[index], "text", t);
                self.batch.push_text(false, t, &mut *self.sink)?;
            }
            "thinking_delta" => {
                let t = field("thinking");
                append(&mut self.blocks[index], "thinking", t);
                self.batch.push_text(true, t, &mut *self.sink)?;
            }
            "signature_delta" => append(&mut self.blocks[index], "signature", field("signature")),
            "input_json_delta" => {
                let part = field("partial_json").to_string();
                self.partial_json[index].push_str(&part);
                if let Some(ordinal) = self.tool_ordinal[index] {
                    self.send(StreamEvent::ToolCallDelta(ToolCallDelta {
                        index: ordinal,
                        id: None,
                        name: None,
                        arguments_delta: part,
                    }))?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Handles one SSE `data` payload.
    pub fn handle(&mut self, data: &str) -> Result<(), ProviderError> {
        // Nearly every event is a block delta: read typed, its text borrowed.
        if let Some(event) = crate::delta_event::parse(data) {
            let delta = event.delta.unwrap_or_default();
            let index = event.index.unwrap_or(0) as usize;
            return self.block_delta(index, |k| delta.field(k));
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| ProviderError::Network(format!("malformed stream event: {e}")))?;
        match v.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                if let Some(u) = v.pointer("/message/usage") {
                    self.read_usage(&u.clone());
                }
            }
            "content_block_start" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                let block = v.get("content_block").cloned().unwrap_or(Value::Null);
                while self.blocks.len() <= index {
                    self.blocks.push(Value::Null);
                    self.partial_json.push(String::new());
                    self.tool_ordinal.push(None);
                }
                if block.get("type").and_then(Value::as_str) == Some("tool_search_tool_result") {
                    // The API searched the deferred tools: say what it found.
                    let found: Vec<&str> = block
                        .pointer("/content/tool_references")
                        .and_then(Value::as_array)
                        .map(|refs| {
                            refs.iter()
                                .filter_map(|r| r.get("tool_name").and_then(Value::as_str))
                                .collect()
                        })
                        .unwrap_or_default();
                    let note = if found.is_empty() {
                        "Tool search found nothing.".to_string()
                    } else {
                        format!("Tool search found: {}", found.join(", "))
                    };
                    self.send(StreamEvent::Info(note))?;
                }
                if block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let ordinal = self.tools_seen;
                    self.tools_seen += 1;
                    self.tool_ordinal[index] = Some(ordinal);
                    self.send(StreamEvent::ToolCallDelta(ToolCallDelta {
                        index: ordinal,
                        id: block.get("id").and_then(Value::as_str).map(str::to_string),
                        name: block
                            .get("name")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        arguments_delta: String::new(),
                    }))?;
                }
                self.blocks[index] = block;
            }
            // A block delta the typed reading declined (an odd shape).
            "content_block_delta" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                let null = Value::Null;
                let delta = v.get("delta").unwrap_or(&null);
                return self.block_delta(index, |k| {
                    delta.get(k).and_then(Value::as_str).unwrap_or("")
                });
            }
            "content_block_stop" => {
                let index = v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize;
                if let Some(json) = self.partial_json.get(index).filter(|s| !s.is_empty())
                    && let Ok(input) = serde_json::from_str::<Value>(json)
                {
                    self.blocks[index]["input"] = input;
                }
            }
            "message_delta" => {
                if let Some(u) = v.get("usage") {
                    self.read_usage(&u.clone());
                }
                if let Some(reason) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.send(StreamEvent::Finish(match reason {
                        "end_turn" | "stop_sequence" | "pause_turn" => FinishReason::Stop,
                        "tool_use" => FinishReason::ToolCalls,
                        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
                        "refusal" => FinishReason::ContentFilter,
                        _ => FinishReason::Other,
                    }))?;
                }
            }
            "message_stop" => {
                self.stopped = true;
                let u = Usage { ..self.usage };
                self.send(StreamEvent::Usage(u))?;
                // Keep the exact blocks (thinking signatures included) for replay.
                let has_native = self.blocks.iter().any(|b| {
                    matches!(
                        b.get("type").and_then(Value::as_str),
                        Some("thinking" | "redacted_thinking" | "server_tool_use")
                    )
                });
                if has_native {
                    let blocks: Vec<Value> = self
                        .blocks
                        .iter()
                        .filter(|b| !b.is_null())
                        .cloned()
                        .collect();
                    self.send(StreamEvent::ProviderBlock(json!(blocks).to_string()))?;
                }
            }
            "error" => {
                let msg = v
                    .pointer("/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("stream error");
                let kind = v
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let status = if kind == "overloaded_error" { 529 } else { 500 };
                return Err(ProviderError::Server(ServerError {
                    status,
                    message: msg.to_string(),
                }));
            }
            _ => {} // ping and future event types
        }
        Ok(())
    }

    /// End of body: without `message_stop` the response is incomplete (retryable).
    pub fn end(&mut self) -> Result<(), ProviderError> {
        self.flush()?;
        if self.stopped {
            Ok(())
        } else {
            Err(ProviderError::Network(
                "the stream ended before message_stop".into(),
            ))
        }
    }
}

/// Adds `text` to the string at `block[key]`, in place.
///
/// A block's text grows by every delta of it: copying it whole each time
/// (as this did) made a reply quadratic in its length. A key holding
/// something other than a string is replaced by `text`; a block that is not
/// an object (the server sent no `content_block`, or another kind of value)
/// becomes one only if it was null, and is otherwise left as it came.
fn append(block: &mut Value, key: &str, text: &str) {
    if block.is_null() {
        *block = Value::Object(serde_json::Map::new());
    }
    let Some(fields) = block.as_object_mut() else {
        return;
    };
    match fields.get_mut(key) {
        Some(Value::String(s)) => s.push_str(text),
        _ => {
            fields.insert(key.to_string(), Value::String(text.to_string()));
        }
    }
}

/// Sends the request and waits for the response's head; the body is freed
/// on return.
pub fn send(req: &CompletionRequest) -> Result<Response, ProviderError> {
    let body = messages_body(req)?;
    // The base URL is the server root; tolerate a pasted trailing /v1.
    let base = req.base_url.trim_end_matches('/').trim_end_matches("/v1");
    let url = format!("{base}/v1/messages");
    let plain = Request::post_json(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .header("anthropic-version", API_VERSION);
    let request = match turnstone_plugin_sdk::host::secret_ref("api_key") {
        Ok(token) => plain.header("x-api-key", token),
        // Local compatible servers may run without a key.
        Err(_) => plain,
    };
    // Written into the request stream as it is serialized, never whole.
    send_streaming_json(request, &body)
}

/// Streams the response's events to the host.
pub fn read(resp: &mut Response) -> Result<(), ProviderError> {
    let mut sink = |ev: StreamEvent| emit(&ev);
    drive_sse(resp, &mut MessagesStream::new(&mut sink))
}

impl SseHandler for MessagesStream<'_> {
    fn handle(&mut self, data: &str) -> Result<(), ProviderError> {
        MessagesStream::handle(self, data)
    }
    fn done(&self) -> bool {
        self.stopped
    }
    fn end(&mut self) -> Result<(), ProviderError> {
        MessagesStream::end(self)
    }
    fn flush(&mut self) -> Result<(), ProviderError> {
        MessagesStream::flush(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        events: &[Value],
    ) -> (
        Vec<String>,
        String,
        String,
        Option<String>,
        Result<(), ProviderError>,
    ) {
        let mut kinds = Vec::new();
        let mut text = String::new();
        let mut args = String::new();
        let mut native = None;
        let mut sink = |ev: StreamEvent| {
            match ev {
                StreamEvent::TextDelta(t) => {
                    text.push_str(&t);
                    kinds.push("text".to_string());
                }
                StreamEvent::ReasoningDelta(_) => kinds.push("reasoning".into()),
                StreamEvent::ToolCallDelta(d) => {
                    args.push_str(&d.arguments_delta);
                    kinds.push(format!("tool{}", d.index));
                }
                StreamEvent::Finish(f) => {
                    kinds.push(format!("finish:{}", matches!(f, FinishReason::ToolCalls)))
                }
                StreamEvent::Usage(u) => kinds.push(format!(
                    "usage:{}/{}/{}",
                    u.prompt_tokens, u.completion_tokens, u.cached_tokens
                )),
                StreamEvent::ProviderBlock(b) => native = Some(b),
                _ => kinds.push("other".into()),
            }
            true
        };
        let mut p = MessagesStream::new(&mut sink);
        let mut r = Ok(());
        for e in events {
            if r.is_ok() {
                r = p.handle(&e.to_string());
            }
            // One event per read, as a slow server sends them.
            if r.is_ok() {
                r = p.flush();
            }
        }
        if r.is_ok() {
            r = p.end();
        }
        drop(p);
        (kinds, text, args, native, r)
    }

    #[test]
    fn thinking_text_and_tool_use_stream_and_replay_block() {
        let (kinds, text, args, native, r) = run(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 10, "cache_read_input_tokens": 90}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Hmm."}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig-1"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Checking."}}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"city\":"}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": " \"Paris\"}"}}),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}}),
            json!({"type": "message_stop"}),
        ]);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(text, "Checking.");
        assert_eq!(args, "{\"city\": \"Paris\"}");
        assert_eq!(
            kinds,
            [
                "reasoning",
                "text",
                "tool0",
                "tool0",
                "tool0",
                "finish:true",
                "usage:100/42/90"
            ]
        );
        let blocks: Value = serde_json::from_str(&native.unwrap()).unwrap();
        assert_eq!(
            blocks[0],
            json!({"type": "thinking", "thinking": "Hmm.", "signature": "sig-1"})
        );
        assert_eq!(blocks[2]["input"], json!({"city": "Paris"}));
    }

    /// The replayed blocks hold every delta's text, in order, whatever the
    /// block's shape: the text joins in place, a non-string value under the
    /// key is replaced, a missing block becomes an object, and a block that
    /// is neither an object nor null is left as it came (before, indexing it
    /// panicked, which trapped the component).
    #[test]
    fn block_text_accumulates_across_many_deltas_and_odd_blocks_are_survived() {
        let mut events = vec![
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": 7}}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "a"}}),
            json!({"type": "content_block_start", "index": 2}),
            json!({"type": "content_block_start", "index": 3, "content_block": "odd"}),
        ];
        let words: Vec<String> = (0..500).map(|i| format!("w{i} ")).collect();
        for w in &words {
            events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": w}}));
            events.push(json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": w}}));
        }
        events.extend([
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "x"}}),
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "y"}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
            json!({"type": "message_stop"}),
        ]);
        let (_, text, _, native, r) = run(&events);
        assert!(r.is_ok(), "{r:?}");
        let all: String = words.concat();
        assert_eq!(text, format!("{all}xy"));
        let blocks: Value = serde_json::from_str(&native.expect("a thinking block")).unwrap();
        assert_eq!(
            blocks[0],
            json!({"type": "thinking", "thinking": all, "signature": "s"})
        );
        assert_eq!(blocks[1]["text"], json!(format!("a{all}")));
        assert_eq!(blocks[2], json!({"text": "x"}));
        assert_eq!(blocks[3], json!("odd"));
    }

    #[test]
    fn errors_and_truncated_streams() {
        let (_, _, _, _, r) = run(&[
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}),
        ]);
        assert!(matches!(
            r,
            Err(ProviderError::Server(ServerError { status: 529, .. }))
        ));
        let (_, _, _, _, r) = run(&[json!({"type": "message_start", "message": {}})]);
        assert!(matches!(r, Err(ProviderError::Network(_))));
        let (_, _, _, _, r) = run(&[
            json!({"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "x"}}),
        ]);
        assert!(matches!(r, Err(ProviderError::Network(_))));
    }
}
