//! A scripted LLM server for tests: a loopback HTTP/1.1 server that answers
//! each request with the next scripted [`Step`] — SSE streams in the exact
//! OpenAI Chat Completions / Responses and Anthropic Messages formats, error
//! statuses with headers, mid-stream disconnects, slow first bytes — and records
//! every request for assertions. A `GET` (a provider probing the server, e.g.
//! `/v1/models` or llama.cpp's `/props`) is answered from the routes set with
//! [`ScriptedLlm::route`] (404 otherwise) without taking a scripted step, and
//! is recorded apart, in [`ScriptedLlm::probes`]. It is the one stand-in the test suite uses,
//! because no real model is reachable here.

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One scripted response.
#[derive(Debug, Clone)]
pub enum Step {
    /// `200 text/event-stream`, sending each frame (already `data: …\n\n`
    /// formatted) as its own HTTP chunk, with an optional pause before each.
    Sse {
        /// SSE frames.
        frames: Vec<String>,
        /// Pause before each frame.
        gap: Duration,
    },
    /// Like [`Step::Sse`], each frame after a pause of its own (a model
    /// that streams a few tokens, then goes quiet).
    Paced {
        /// Pause before each frame, and the frame.
        frames: Vec<(Duration, String)>,
    },
    /// A non-streaming response.
    Status {
        /// HTTP status.
        status: u16,
        /// Extra headers.
        headers: Vec<(String, String)>,
        /// Body.
        body: String,
    },
    /// Sends these frames, then drops the connection without ending the body.
    Disconnect {
        /// Frames sent before the drop.
        frames: Vec<String>,
    },
    /// Waits before answering with the inner step.
    Delay(Duration, Box<Step>),
}

/// A recorded request.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// Body as JSON (Null if not JSON).
    pub body: Value,
}

impl Recorded {
    /// A header value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The running server.
pub struct ScriptedLlm {
    addr: SocketAddr,
    script: Arc<Mutex<VecDeque<Step>>>,
    shared: Arc<Shared>,
}

/// What the connections share besides the script.
#[derive(Default)]
struct Shared {
    requests: Mutex<Vec<Recorded>>,
    probes: Mutex<Vec<Recorded>>,
    routes: Mutex<Vec<(String, Step)>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ScriptedLlm {
    /// Starts on 127.0.0.1 with `script`.
    pub async fn start(script: Vec<Step>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let shared = Arc::new(Shared::default());
        let (s, r) = (script.clone(), shared.clone());
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (s, r) = (s.clone(), r.clone());
                tokio::spawn(async move {
                    let _ = serve(sock, s, r).await;
                });
            }
        });
        Ok(Self {
            addr,
            script,
            shared,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The port (for grants).
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Appends a step.
    pub fn push(&self, step: Step) {
        lock(&self.script).push_back(step);
    }

    /// Requests received so far (every method but `GET`).
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.requests).clone()
    }

    /// Answers every `GET path` with `step` from now on (a `Status` step;
    /// the path includes any query).
    pub fn route(&self, path: &str, step: Step) {
        let mut routes = lock(&self.shared.routes);
        routes.retain(|(p, _)| p != path);
        routes.push((path.to_string(), step));
    }

    /// `GET` requests received so far.
    pub fn probes(&self) -> Vec<Recorded> {
        lock(&self.shared.probes).clone()
    }
}

async fn read_request(sock: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or("").split_whitespace();
    let method = first.next().unwrap_or("").to_string();
    let path = first.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    }))
}

async fn write_chunk(sock: &mut TcpStream, data: &str) -> std::io::Result<()> {
    sock.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
        .await?;
    sock.flush().await
}

async fn serve(
    mut sock: TcpStream,
    script: Arc<Mutex<VecDeque<Step>>>,
    shared: Arc<Shared>,
) -> std::io::Result<()> {
    while let Some(req) = read_request(&mut sock).await? {
        let mut step = if req.method == "GET" {
            let routed = lock(&shared.routes)
                .iter()
                .find(|(p, _)| *p == req.path)
                .map(|(_, s)| s.clone());
            lock(&shared.probes).push(req);
            routed.unwrap_or(Step::Status {
                status: 404,
                headers: Vec::new(),
                body: json!({"error": {"message": "not found"}}).to_string(),
            })
        } else {
            lock(&shared.requests).push(req);
            lock(&script).pop_front().unwrap_or(Step::Status {
                status: 500,
                headers: Vec::new(),
                body: json!({"error": {"message": "script exhausted"}}).to_string(),
            })
        };
        while let Step::Delay(d, inner) = step {
            tokio::time::sleep(d).await;
            step = *inner;
        }
        match step {
            Step::Status {
                status,
                headers,
                body,
            } => {
                let mut head = format!(
                    "HTTP/1.1 {status} Scripted\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
                    body.len()
                );
                for (k, v) in headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                sock.write_all(head.as_bytes()).await?;
                sock.write_all(body.as_bytes()).await?;
            }
            Step::Sse { frames, gap } => {
                sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await?;
                for f in frames {
                    if !gap.is_zero() {
                        tokio::time::sleep(gap).await;
                    }
                    write_chunk(&mut sock, &f).await?;
                }
                sock.write_all(b"0\r\n\r\n").await?;
            }
            Step::Paced { frames } => {
                sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await?;
                for (pause, f) in frames {
                    tokio::time::sleep(pause).await;
                    write_chunk(&mut sock, &f).await?;
                }
                sock.write_all(b"0\r\n\r\n").await?;
            }
            Step::Disconnect { frames } => {
                sock.write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await?;
                for f in frames {
                    write_chunk(&mut sock, &f).await?;
                }
                return Ok(()); // drop mid-body
            }
            Step::Delay(..) => {}
        }
    }
    Ok(())
}

/// One SSE frame with a JSON payload.
pub fn frame(v: &Value) -> String {
    format!("data: {v}\n\n")
}

/// OpenAI Chat Completions stream builders.
pub mod openai {
    use super::*;

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        frame(&json!({
            "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }))
    }

    fn usage(prompt: u32, completion: u32) -> String {
        frame(&json!({
            "id": "chatcmpl-scripted", "object": "chat.completion.chunk", "model": "scripted", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }))
    }

    /// A text reply split into `parts`, then finish `stop`, usage and `[DONE]`.
    pub fn text(parts: &[&str]) -> Vec<String> {
        let mut f = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        f.extend(parts.iter().map(|p| chunk(json!({"content": p}), None)));
        f.push(chunk(json!({}), Some("stop")));
        f.push(usage(11, parts.len() as u32));
        f.push("data: [DONE]\n\n".into());
        f
    }

    /// One tool call whose arguments arrive in `arg_parts`.
    pub fn tool_call(id: &str, name: &str, arg_parts: &[&str]) -> Vec<String> {
        let mut f = vec![chunk(
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            None,
        )];
        f.extend(arg_parts.iter().map(|p| {
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                None,
            )
        }));
        f.push(chunk(json!({}), Some("tool_calls")));
        f.push(usage(20, 5));
        f.push("data: [DONE]\n\n".into());
        f
    }
}

/// Anthropic Messages stream builders.
pub mod anthropic {
    use super::*;

    fn ev(kind: &str, mut v: Value) -> String {
        v["type"] = json!(kind);
        format!("event: {kind}\ndata: {v}\n\n")
    }

    /// Plain text, then `end_turn`.
    pub fn text(parts: &[&str]) -> Vec<String> {
        let mut f = vec![
            ev(
                "message_start",
                json!({"message": {"id": "msg_t", "role": "assistant", "usage": {"input_tokens": 30, "output_tokens": 1}}}),
            ),
            ev(
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
        ];
        f.extend(parts.iter().map(|p| {
            ev(
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "text_delta", "text": p}}),
            )
        }));
        f.push(ev("content_block_stop", json!({"index": 0})));
        f.push(ev(
            "message_delta",
            json!({"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        ));
        f.push(ev("message_stop", json!({})));
        f
    }

    /// The server-side tool search (`tool_search_tool_bm25` for `query`,
    /// finding `found`), then a call of `tool` with `arguments`, as the
    /// Messages API streams it.
    pub fn tool_search_then_call(
        query: &str,
        found: &[&str],
        call_id: &str,
        tool: &str,
        arguments: &str,
    ) -> Vec<String> {
        let refs: Vec<Value> = found
            .iter()
            .map(|n| json!({"type": "tool_reference", "tool_name": n}))
            .collect();
        vec![
            ev(
                "message_start",
                json!({"message": {"id": "msg_s", "role": "assistant", "usage": {"input_tokens": 40, "output_tokens": 1}}}),
            ),
            ev(
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {}}}),
            ),
            ev(
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": json!({"query": query}).to_string()}}),
            ),
            ev("content_block_stop", json!({"index": 0})),
            ev(
                "content_block_start",
                json!({"index": 1, "content_block": {"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": {"type": "tool_search_tool_search_result", "tool_references": refs}}}),
            ),
            ev("content_block_stop", json!({"index": 1})),
            ev(
                "content_block_start",
                json!({"index": 2, "content_block": {"type": "tool_use", "id": call_id, "name": tool, "input": {}}}),
            ),
            ev(
                "content_block_delta",
                json!({"index": 2, "delta": {"type": "input_json_delta", "partial_json": arguments}}),
            ),
            ev("content_block_stop", json!({"index": 2})),
            ev(
                "message_delta",
                json!({"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20, "server_tool_use": {"tool_search_requests": 1}}}),
            ),
            ev("message_stop", json!({})),
        ]
    }

    /// Thinking (with signature), text, then `end_turn`.
    pub fn thinking_then_text(thinking: &str, signature: &str, parts: &[&str]) -> Vec<String> {
        let mut f = vec![
            ev(
                "message_start",
                json!({"message": {"id": "msg_1", "role": "assistant", "usage": {"input_tokens": 30, "output_tokens": 1}}}),
            ),
            ev(
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
            ),
            ev(
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "thinking_delta", "thinking": thinking}}),
            ),
            ev(
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "signature_delta", "signature": signature}}),
            ),
            ev("content_block_stop", json!({"index": 0})),
            ev("ping", json!({})),
            ev(
                "content_block_start",
                json!({"index": 1, "content_block": {"type": "text", "text": ""}}),
            ),
        ];
        f.extend(parts.iter().map(|p| {
            ev(
                "content_block_delta",
                json!({"index": 1, "delta": {"type": "text_delta", "text": p}}),
            )
        }));
        f.push(ev("content_block_stop", json!({"index": 1})));
        f.push(ev(
            "message_delta",
            json!({"delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 12}}),
        ));
        f.push(ev("message_stop", json!({})));
        f
    }
}

/// OpenAI Responses API stream builders (`POST /v1/responses`,
/// `stream: true`), in the shape the API sends: every event named on an
/// `event:` line and in its `type`, numbered by `sequence_number`, deltas
/// padded with an `obfuscation` string, and the done events repeating the
/// text the deltas carried (`response.completed` holds the whole output).
pub mod responses {
    use super::*;

    /// Numbers events as the API does.
    struct Events {
        seq: u64,
        frames: Vec<String>,
    }

    impl Events {
        fn new() -> Self {
            Self {
                seq: 0,
                frames: Vec::new(),
            }
        }

        fn push(&mut self, kind: &str, mut v: Value) {
            v["type"] = json!(kind);
            v["sequence_number"] = json!(self.seq);
            self.seq += 1;
            self.frames.push(format!("event: {kind}\ndata: {v}\n\n"));
        }

        /// `response.created` and `response.in_progress`.
        fn start(&mut self) {
            for kind in ["response.created", "response.in_progress"] {
                self.push(
                    kind,
                    json!({"response": response("in_progress", json!([]), Value::Null)}),
                );
            }
        }

        /// An encrypted reasoning item at `index`, with a summary streamed in `summary`.
        fn reasoning(&mut self, index: u32, encrypted: &str, summary: &[&str]) -> Value {
            let id = "rs_scripted";
            self.push(
                "response.output_item.added",
                json!({"output_index": index, "item": {"id": id, "type": "reasoning", "summary": []}}),
            );
            for p in summary {
                self.push(
                    "response.reasoning_summary_text.delta",
                    json!({"item_id": id, "output_index": index, "summary_index": 0, "delta": p, "obfuscation": "Qx7"}),
                );
            }
            let text = summary.concat();
            let summary = if text.is_empty() {
                json!([])
            } else {
                json!([{"type": "summary_text", "text": text}])
            };
            let item = json!({"id": id, "type": "reasoning", "encrypted_content": encrypted, "summary": summary});
            self.push(
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
            item
        }

        /// `response.completed` with `output` and token counts.
        fn complete(
            &mut self,
            output: Value,
            input_tokens: u32,
            output_tokens: u32,
            reasoning_tokens: u32,
        ) {
            let usage = json!({
                "input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                "total_tokens": input_tokens + output_tokens,
            });
            self.push(
                "response.completed",
                json!({"response": response("completed", output, usage)}),
            );
        }
    }

    fn response(status: &str, output: Value, usage: Value) -> Value {
        json!({
            "id": "resp_scripted", "object": "response", "created_at": 1_760_000_000, "status": status,
            "model": "gpt-5-2025-08-07", "output": output, "parallel_tool_calls": true,
            "reasoning": {"effort": "medium", "summary": null}, "store": false,
            "text": {"format": {"type": "text"}, "verbosity": "medium"}, "usage": usage,
        })
    }

    /// Encrypted reasoning, then a message whose text arrives in `parts`.
    pub fn text(parts: &[&str]) -> Vec<String> {
        reasoned_text("gAAAAscripted-reasoning", parts)
    }

    /// [`text`] with `encrypted` as the reasoning item's encrypted content
    /// (a real one is a few kilobytes of base64, replayed on later turns).
    pub fn reasoned_text(encrypted: &str, parts: &[&str]) -> Vec<String> {
        let mut ev = Events::new();
        ev.start();
        let reasoning = ev.reasoning(0, encrypted, &[]);
        let id = "msg_scripted";
        ev.push(
            "response.output_item.added",
            json!({"output_index": 1, "item": {"id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}}),
        );
        let part = |text: &str| json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text});
        ev.push(
            "response.content_part.added",
            json!({"item_id": id, "output_index": 1, "content_index": 0, "part": part("")}),
        );
        for p in parts {
            ev.push(
                "response.output_text.delta",
                json!({"item_id": id, "output_index": 1, "content_index": 0, "delta": p, "logprobs": [], "obfuscation": "yfB5Jh8b"}),
            );
        }
        let text = parts.concat();
        ev.push(
            "response.output_text.done",
            json!({"item_id": id, "output_index": 1, "content_index": 0, "text": text, "logprobs": []}),
        );
        ev.push(
            "response.content_part.done",
            json!({"item_id": id, "output_index": 1, "content_index": 0, "part": part(&text)}),
        );
        let message = json!({"id": id, "type": "message", "status": "completed", "content": [part(&text)], "role": "assistant"});
        ev.push(
            "response.output_item.done",
            json!({"output_index": 1, "item": message}),
        );
        ev.complete(json!([reasoning, message]), 11, parts.len() as u32 + 64, 64);
        ev.frames
    }

    /// Reasoning with a streamed summary, then one function call whose
    /// arguments arrive in `arg_parts`.
    pub fn reasoning_then_call(
        encrypted: &str,
        summary: &[&str],
        call_id: &str,
        name: &str,
        arg_parts: &[&str],
    ) -> Vec<String> {
        let mut ev = Events::new();
        ev.start();
        let reasoning = ev.reasoning(0, encrypted, summary);
        let id = "fc_scripted";
        let call = |status: &str, arguments: &str| json!({"id": id, "type": "function_call", "status": status, "arguments": arguments, "call_id": call_id, "name": name});
        ev.push(
            "response.output_item.added",
            json!({"output_index": 1, "item": call("in_progress", "")}),
        );
        for p in arg_parts {
            ev.push(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": 1, "delta": p, "obfuscation": "k2"}),
            );
        }
        let arguments = arg_parts.concat();
        ev.push(
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": 1, "arguments": arguments}),
        );
        let done = call("completed", &arguments);
        ev.push(
            "response.output_item.done",
            json!({"output_index": 1, "item": done}),
        );
        ev.complete(json!([reasoning, done]), 20, 42, 30);
        ev.frames
    }

    /// A response cut short at the output limit after `parts`: the
    /// message's events, then `response.incomplete` with the reason.
    pub fn incomplete(parts: &[&str]) -> Vec<String> {
        let mut frames = text(parts);
        frames.pop();
        let mut ev = Events {
            seq: frames.len() as u64,
            frames,
        };
        let mut r = response(
            "incomplete",
            json!([]),
            json!({"input_tokens": 11, "output_tokens": parts.len()}),
        );
        r["incomplete_details"] = json!({"reason": "max_output_tokens"});
        ev.push("response.incomplete", json!({"response": r}));
        ev.frames
    }

    /// A response that fails mid-stream with `message`.
    pub fn failed(parts: &[&str], message: &str) -> Vec<String> {
        let mut frames = text(parts);
        frames.truncate(frames.len() - 4);
        let mut ev = Events {
            seq: frames.len() as u64,
            frames,
        };
        let mut r = response("failed", json!([]), Value::Null);
        r["error"] = json!({"code": "server_error", "message": message});
        ev.push("response.failed", json!({"response": r}));
        ev.frames
    }
}
