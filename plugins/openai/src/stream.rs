//! Sending a Chat Completions request and turning its SSE stream into events.

use crate::body::{Api, request_body_of};
use crate::chunk::Chunk;
use crate::responses::ResponsesStream;
#[cfg(test)]
use crate::sse::SseDecoder;
use crate::sse::ThinkSplitter;
use serde_json::Value;
use turnstone_plugin_sdk::http::{Request, Response};
use turnstone_plugin_sdk::provider::{
    CompletionRequest, DeltaBatch, FinishReason, ProviderError, ServerError, StreamEvent,
    ToolCallDelta, Usage, emit,
};
use turnstone_plugin_sdk::provider::{SseHandler, drive_sse, send_streaming_json};

/// Parses one stream's events; `sink` returns false to stop.
pub struct ChatStream<'a> {
    sink: &'a mut dyn FnMut(StreamEvent) -> bool,
    batch: DeltaBatch,
    think: ThinkSplitter,
    /// A `finish_reason` arrived.
    pub finished: bool,
    /// `[DONE]` arrived.
    pub done: bool,
}

impl<'a> ChatStream<'a> {
    /// A parser emitting into `sink`.
    pub fn new(sink: &'a mut dyn FnMut(StreamEvent) -> bool) -> Self {
        Self {
            sink,
            batch: DeltaBatch::default(),
            think: ThinkSplitter::default(),
            finished: false,
            done: false,
        }
    }

    fn send(&mut self, ev: StreamEvent) -> Result<(), ProviderError> {
        self.batch.push(ev, &mut *self.sink)
    }

    /// Sends the deltas held back from the last read.
    pub fn flush(&mut self) -> Result<(), ProviderError> {
        self.batch.flush(&mut *self.sink)
    }

    fn text(&mut self, text: &str) -> Result<(), ProviderError> {
        // The common delta (no tag in it or held back) joins the batch
        // without a copy of its own.
        if let Some(reasoning) = self.think.passes(text) {
            return self.batch.push_text(reasoning, text, &mut *self.sink);
        }
        for (reasoning, piece) in self.think.push(text.to_string()) {
            self.send(if reasoning {
                StreamEvent::ReasoningDelta(piece)
            } else {
                StreamEvent::TextDelta(piece)
            })?;
        }
        Ok(())
    }

    /// Handles one SSE `data` payload.
    pub fn handle(&mut self, data: &str) -> Result<(), ProviderError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk = Chunk::parse(data)
            .map_err(|e| ProviderError::Network(format!("malformed stream chunk: {e}")))?;
        if let Some(err) = chunk.error {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("stream error")
                .to_string();
            return Err(ProviderError::Server(ServerError {
                status: 500,
                message: msg,
            }));
        }
        if let Some(choice) = chunk.choice {
            let delta = choice.delta.unwrap_or_default();
            for r in [delta.reasoning_content, delta.reasoning] {
                if let Some(r) = r.filter(|s| !s.is_empty()) {
                    self.batch.push_text(true, &r, &mut *self.sink)?;
                }
            }
            if let Some(t) = delta.content.filter(|s| !s.is_empty()) {
                self.text(&t)?;
            }
            for (pos, c) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                let index = c.index.unwrap_or(pos as u64) as u32;
                let function = c.function.unwrap_or_default();
                self.send(StreamEvent::ToolCallDelta(ToolCallDelta {
                    index,
                    id: c.id,
                    name: function.name,
                    arguments_delta: function.arguments.unwrap_or_default(),
                }))?;
            }
            if let Some(reason) = choice.finish_reason {
                self.flush_think()?;
                self.finished = true;
                self.send(StreamEvent::Finish(match reason.as_str() {
                    "stop" => FinishReason::Stop,
                    "tool_calls" | "function_call" => FinishReason::ToolCalls,
                    "length" => FinishReason::Length,
                    "content_filter" => FinishReason::ContentFilter,
                    _ => FinishReason::Other,
                }))?;
            }
        }
        if let Some(u) = chunk.usage {
            let n = |v: Option<u64>| v.unwrap_or(0) as u32;
            self.send(StreamEvent::Usage(Usage {
                prompt_tokens: n(u.prompt_tokens),
                completion_tokens: n(u.completion_tokens),
                cached_tokens: n(u.prompt_tokens_details.and_then(|d| d.cached_tokens)),
                reasoning_tokens: n(u.completion_tokens_details.and_then(|d| d.reasoning_tokens)),
            }))?;
        }
        Ok(())
    }

    fn flush_think(&mut self) -> Result<(), ProviderError> {
        if let Some((reasoning, piece)) = self.think.finish() {
            self.send(if reasoning {
                StreamEvent::ReasoningDelta(piece)
            } else {
                StreamEvent::TextDelta(piece)
            })?;
        }
        Ok(())
    }

    /// Called at end of body: a stream that stopped before any terminal signal
    /// is an error the engine may retry.
    pub fn end(&mut self) -> Result<(), ProviderError> {
        self.flush_think()?;
        self.flush()?;
        if self.finished || self.done {
            Ok(())
        } else {
            Err(ProviderError::Network(
                "the stream ended before the response was complete".into(),
            ))
        }
    }
}

/// Sends the request and waits for the response's head; the body is freed
/// on return.
pub fn send(req: &CompletionRequest) -> Result<(Api, Response), ProviderError> {
    let (api, body) = request_body_of(req)?;
    let path = match api {
        Api::Chat => "chat/completions",
        Api::Responses => "responses",
    };
    let url = format!("{}/{path}", req.base_url.trim_end_matches('/'));
    let base = Request::post_json(url)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream");
    // Local servers often run without a key: no granted key, no header.
    let request = base.bearer_secret_if_granted("api_key");
    // Written into the request stream as it is serialized, never whole.
    Ok((api, send_streaming_json(request, &body)?))
}

/// Streams the response's events to the host.
pub fn read(api: Api, resp: &mut Response) -> Result<(), ProviderError> {
    let mut sink = |ev: StreamEvent| emit(&ev);
    match api {
        Api::Chat => drive_sse(resp, &mut ChatStream::new(&mut sink)),
        Api::Responses => drive_sse(resp, &mut ResponsesStream::new(&mut sink)),
    }
}

impl SseHandler for ChatStream<'_> {
    fn handle(&mut self, data: &str) -> Result<(), ProviderError> {
        ChatStream::handle(self, data)
    }
    fn done(&self) -> bool {
        self.done
    }
    fn end(&mut self) -> Result<(), ProviderError> {
        ChatStream::end(self)
    }
    fn flush(&mut self) -> Result<(), ProviderError> {
        ChatStream::flush(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_plugin_sdk::provider::status_error;

    #[derive(Default, Debug)]
    struct Seen {
        text: String,
        reasoning: String,
        args: String,
        ids: Vec<String>,
        names: Vec<String>,
        finish: Vec<FinishReason>,
        usage: Option<(u32, u32, u32)>,
        order: Vec<&'static str>,
    }

    fn run(chunks: &[&str]) -> (Seen, Result<(), ProviderError>) {
        let mut seen = Seen::default();
        let mut sink = |ev: StreamEvent| {
            match ev {
                StreamEvent::TextDelta(t) => {
                    seen.text.push_str(&t);
                    seen.order.push("text");
                }
                StreamEvent::ReasoningDelta(t) => {
                    seen.reasoning.push_str(&t);
                    seen.order.push("reasoning");
                }
                StreamEvent::ToolCallDelta(d) => {
                    assert_eq!(d.index, 0);
                    seen.args.push_str(&d.arguments_delta);
                    seen.ids.extend(d.id);
                    seen.names.extend(d.name);
                    seen.order.push("tool");
                }
                StreamEvent::Finish(f) => {
                    seen.finish.push(f);
                    seen.order.push("finish");
                }
                StreamEvent::Usage(u) => {
                    seen.usage = Some((u.prompt_tokens, u.completion_tokens, u.cached_tokens));
                    seen.order.push("usage");
                }
                _ => seen.order.push("other"),
            }
            true
        };
        let mut p = ChatStream::new(&mut sink);
        let mut d = SseDecoder::default();
        let mut result = Ok(());
        for c in chunks {
            for data in d.push(c.as_bytes()) {
                if result.is_ok() {
                    result = p.handle(&data);
                }
            }
            // As `drive_sse` does after each read.
            if result.is_ok() {
                result = p.flush();
            }
        }
        if result.is_ok() {
            result = p.end();
        }
        (seen, result)
    }

    #[test]
    fn tool_call_deltas_split_across_chunks_and_usage() {
        let (seen, r) = run(&[
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\": \"}}]}}]}\n\ndata: {\"choices\":[{\"del",
            "ta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\ndata: [DONE]\n\n",
        ]);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(seen.args, "{\"city\": \"Paris\"}");
        assert_eq!(
            (seen.ids.as_slice(), seen.names.as_slice()),
            (
                &["call_1".to_string()][..],
                &["get_weather".to_string()][..]
            )
        );
        assert!(matches!(seen.finish.as_slice(), [FinishReason::ToolCalls]));
        assert_eq!(seen.usage, Some((12, 7, 4)));
        assert_eq!(seen.order.last(), Some(&"usage"));
    }

    #[test]
    fn reasoning_content_and_think_tags() {
        let (seen, r) = run(&[
            "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm \"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"<thi\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"nk>deep</think>Hello\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        ]);
        assert!(r.is_ok());
        assert_eq!(
            (seen.reasoning.as_str(), seen.text.as_str()),
            ("hmm deep", "Hello")
        );
        assert_eq!(seen.order, ["reasoning", "reasoning", "text", "finish"]);
        assert!(matches!(seen.finish.as_slice(), [FinishReason::Stop]));
    }

    #[test]
    fn the_deltas_of_one_read_reach_the_host_as_one_event_in_order() {
        let delta = |field: &str, text: &str| {
            format!("data: {{\"choices\":[{{\"delta\":{{\"{field}\":\"{text}\"}}}}]}}\n\n")
        };
        let burst: String = [
            delta("reasoning_content", "a"),
            delta("reasoning_content", "b"),
            delta("content", "Hel"),
            delta("content", "lo, "),
            delta("content", "world"),
        ]
        .concat();
        let (seen, r) = run(&[
            &burst,
            &delta("content", "!"),
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
        ]);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(
            (seen.reasoning.as_str(), seen.text.as_str()),
            ("ab", "Hello, world!")
        );
        // The next read's delta is its own event: nothing waits for more input.
        assert_eq!(seen.order, ["reasoning", "text", "text", "finish"]);
    }

    #[test]
    fn a_stream_without_terminal_signal_is_a_retryable_error() {
        let (seen, r) = run(&["data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"]);
        assert_eq!(seen.text, "Hel");
        assert!(matches!(r, Err(ProviderError::Network(_))));
        let (_, r) = run(&["data: {\"error\":{\"message\":\"overloaded\"}}\n\n"]);
        assert!(matches!(r, Err(ProviderError::Server(_))));
        let (_, r) = run(&["data: {not json\n\n"]);
        assert!(matches!(r, Err(ProviderError::Network(_))));
    }

    #[test]
    fn http_statuses_map_to_typed_errors() {
        assert!(matches!(
            status_error(401, "{}", None),
            ProviderError::Auth(_)
        ));
        match status_error(429, r#"{"error":{"message":"slow down"}}"#, Some("2")) {
            ProviderError::RateLimit(r) => {
                assert_eq!(
                    (r.message.as_str(), r.retry_after_ms),
                    ("slow down", Some(2000))
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            status_error(
                400,
                r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#,
                None
            ),
            ProviderError::ContextLength(_)
        ));
        assert!(matches!(
            status_error(400, "bad", None),
            ProviderError::BadRequest(_)
        ));
        assert!(matches!(
            status_error(503, "down", None),
            ProviderError::Server(ServerError { status: 503, .. })
        ));
    }
}
