//! Provider components streaming from the scripted LLM server over loopback:
//! real components, real wasi:http through the host's egress gate, API keys
//! injected by the host per call.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use turnstone_runtime::plugin::ProviderEventSink;
use turnstone_runtime::provider_types as wit;
use turnstone_runtime::{
    LoadedPlugin, PluginSettings, PluginSource, Runtime, RuntimeOptions, SecretSource,
};
use turnstone_scripted_llm::{ScriptedLlm, Step, anthropic, openai, responses};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Key(&'static str);

impl SecretSource for Key {
    fn secret(&self, name: &str) -> Option<String> {
        (name == "api_key").then(|| self.0.to_string())
    }
}

#[derive(Default)]
struct Events {
    text: Mutex<String>,
    reasoning: Mutex<String>,
    args: Mutex<String>,
    finish: Mutex<Vec<String>>,
    usage: Mutex<Option<(u32, u32)>>,
    native: Mutex<Option<String>>,
    /// Each text delta as it arrived.
    text_events: Mutex<Vec<String>>,
}

impl Events {
    /// The provider block kept for replay; the test fails without one.
    fn replayed(&self) -> String {
        let block = self.native.lock().unwrap().clone();
        block.expect("a provider block to replay")
    }
}

impl ProviderEventSink for Events {
    fn event(&self, e: wit::StreamEvent) -> bool {
        match e {
            wit::StreamEvent::TextDelta(t) => {
                self.text.lock().unwrap().push_str(&t);
                self.text_events.lock().unwrap().push(t);
            }
            wit::StreamEvent::ReasoningDelta(t) => self.reasoning.lock().unwrap().push_str(&t),
            wit::StreamEvent::ToolCallDelta(d) => {
                self.args.lock().unwrap().push_str(&d.arguments_delta)
            }
            wit::StreamEvent::Finish(f) => self.finish.lock().unwrap().push(format!("{f:?}")),
            wit::StreamEvent::Usage(u) => {
                *self.usage.lock().unwrap() = Some((u.prompt_tokens, u.completion_tokens))
            }
            wit::StreamEvent::ProviderBlock(b) => *self.native.lock().unwrap() = Some(b),
            wit::StreamEvent::Info(_) => {}
        }
        true
    }
}

async fn provider(name: &str, port: u16) -> LoadedPlugin {
    provider_at(root().join("target/components").join(name), port).await
}

async fn provider_at(dir: PathBuf, port: u16) -> LoadedPlugin {
    let name = dir.display().to_string();
    let rt = Runtime::new(RuntimeOptions {
        cache_dir: Some(root().join("target/test-cache")),
        ..Default::default()
    })
    .unwrap();
    let grant = toml::from_str(&format!(
        "http = [\"127.0.0.1:{port}\"]\nsecrets = [\"api_key\"]"
    ))
    .unwrap();
    rt.load(
        PluginSource { dir, builtin: true },
        PluginSettings {
            grant: Some(grant),
            ..Default::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("load {name}: {e}"))
}

fn request(provider: &str, base_url: String, model: &str) -> wit::CompletionRequest {
    wit::CompletionRequest {
        provider: provider.into(),
        base_url,
        model: model.into(),
        messages: vec![wit::Message {
            role: wit::Role::User,
            content: vec![wit::ContentPart::Text("Weather in Paris?".into())],
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            reasoning: None,
            provider_data: None,
            source: None,
        }],
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

async fn complete(
    p: &LoadedPlugin,
    req: &wit::CompletionRequest,
) -> (Arc<Events>, Result<(), wit::ProviderError>) {
    let events = Arc::new(Events::default());
    let r = p
        .provider_complete(
            req,
            events.clone(),
            Some(Arc::new(Key("sk-scripted"))),
            None,
        )
        .await
        .expect("the call itself must not trap");
    (events, r)
}

#[tokio::test]
async fn openai_chat_streams_text_with_the_key_injected_by_the_host() {
    let llm = ScriptedLlm::start(vec![Step::Sse {
        frames: openai::text(&["It is ", "18C ", "and clear."]),
        gap: Duration::from_millis(5),
    }])
    .await
    .unwrap();
    let p = provider("openai", llm.port()).await;
    let (ev, r) = complete(
        &p,
        &request("openai", format!("{}/v1", llm.base_url()), "gpt-4o-mini"),
    )
    .await;
    r.unwrap();
    assert_eq!(*ev.text.lock().unwrap(), "It is 18C and clear.");
    assert_eq!(*ev.finish.lock().unwrap(), ["FinishReason::Stop"]);
    assert_eq!(*ev.usage.lock().unwrap(), Some((11, 3)));
    let reqs = llm.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(
        (reqs[0].method.as_str(), reqs[0].path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-scripted"));
    assert_eq!(reqs[0].body["model"], "gpt-4o-mini");
    assert_eq!(reqs[0].body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn openai_merges_the_deltas_of_one_read_and_sends_each_read_at_once() {
    // Frames 1-3 (role, "It is ", "18C ") leave the server as one HTTP chunk,
    // so the component reads them at once; "and clear." comes 150 ms later.
    let f = openai::text(&["It is ", "18C ", "and clear."]);
    let mut frames = vec![f[..3].concat()];
    frames.extend(f[3..].iter().cloned());
    let llm = ScriptedLlm::start(vec![Step::Sse {
        frames,
        gap: Duration::from_millis(150),
    }])
    .await
    .unwrap();
    let p = provider("openai", llm.port()).await;
    let events = Arc::new(Events::default());
    let seen = events.clone();
    let call = tokio::spawn(async move {
        let req = request("openai", format!("{}/v1", llm.base_url()), "gpt-4o-mini");
        let r = p
            .provider_complete(&req, events, Some(Arc::new(Key("sk-scripted"))), None)
            .await
            .expect("the call itself must not trap");
        (r, llm)
    });
    // The first read's text reaches the host before the server sends more:
    // nothing is held back waiting for the next read.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while seen.text_events.lock().unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no text arrived");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(*seen.text_events.lock().unwrap(), ["It is 18C "]);
    let (r, _llm) = call.await.unwrap();
    r.unwrap();
    assert_eq!(
        *seen.text_events.lock().unwrap(),
        ["It is 18C ", "and clear."]
    );
    assert_eq!(*seen.finish.lock().unwrap(), ["FinishReason::Stop"]);
}

#[tokio::test]
async fn openai_tool_call_arguments_arrive_split_across_chunks() {
    let llm = ScriptedLlm::start(vec![Step::Sse {
        frames: openai::tool_call("call_1", "get_weather", &["{\"ci", "ty\": \"Pa", "ris\"}"]),
        gap: Duration::ZERO,
    }])
    .await
    .unwrap();
    let p = provider("openai", llm.port()).await;
    let (ev, r) = complete(
        &p,
        &request("openai", format!("{}/v1", llm.base_url()), "gpt-4o-mini"),
    )
    .await;
    r.unwrap();
    assert_eq!(*ev.args.lock().unwrap(), "{\"city\": \"Paris\"}");
    assert_eq!(*ev.finish.lock().unwrap(), ["FinishReason::ToolCalls"]);
}

/// The Responses lane (a `gpt-5` model) through the real component: the
/// text, the reasoning kept for replay, the usage, the request's path and
/// stateless body; then a call with a reasoning summary, a response cut at
/// the output limit, one that fails mid-stream and one that ends early.
#[tokio::test]
async fn openai_responses_lane_streams_text_calls_and_end_states() {
    let sse = |frames| Step::Sse {
        frames,
        gap: Duration::from_millis(2),
    };
    let llm = ScriptedLlm::start(vec![
        sse(responses::text(&["It is ", "18C ", "and \"clear\"."])),
        sse(responses::reasoning_then_call(
            "gAAAAcall-reasoning",
            &["**Looking** ", "it up"],
            "call_7",
            "get_weather",
            &["{\"city\":", "\"Paris\"}"],
        )),
        sse(responses::incomplete(&["Cut"])),
        sse(responses::failed(&["Par"], "The model failed.")),
        sse(responses::text(&["never ends"])[..8].to_vec()),
    ])
    .await
    .unwrap();
    let p = provider("openai", llm.port()).await;
    let req = request("openai", format!("{}/v1", llm.base_url()), "gpt-5");

    let (ev, r) = complete(&p, &req).await;
    r.unwrap();
    assert_eq!(*ev.text.lock().unwrap(), "It is 18C and \"clear\".");
    assert_eq!(*ev.finish.lock().unwrap(), ["FinishReason::Stop"]);
    assert_eq!(*ev.usage.lock().unwrap(), Some((11, 67)));
    let native = ev.replayed();
    let items: serde_json::Value = serde_json::from_str(&native).unwrap();
    assert_eq!(items[0]["type"], "reasoning");
    assert_eq!(items[0]["encrypted_content"], "gAAAAscripted-reasoning");
    let reqs = llm.requests();
    assert_eq!(reqs[0].path, "/v1/responses");
    assert_eq!(reqs[0].header("authorization"), Some("Bearer sk-scripted"));
    assert_eq!(reqs[0].body["store"], false);
    assert_eq!(reqs[0].body["include"][0], "reasoning.encrypted_content");
    assert_eq!(reqs[0].body["input"][0]["content"], "Weather in Paris?");

    let (ev, r) = complete(&p, &req).await;
    r.unwrap();
    assert_eq!(*ev.reasoning.lock().unwrap(), "**Looking** it up");
    assert_eq!(*ev.args.lock().unwrap(), "{\"city\":\"Paris\"}");
    assert_eq!(*ev.finish.lock().unwrap(), ["FinishReason::ToolCalls"]);
    assert_eq!(*ev.usage.lock().unwrap(), Some((20, 42)));
    let native = ev.replayed();
    assert!(native.contains("gAAAAcall-reasoning"), "{native}");

    let (ev, r) = complete(&p, &req).await;
    r.unwrap();
    assert_eq!(*ev.text.lock().unwrap(), "Cut");
    assert_eq!(*ev.finish.lock().unwrap(), ["FinishReason::Length"]);

    let (ev, r) = complete(&p, &req).await;
    match r {
        Err(wit::ProviderError::Server(e)) => assert_eq!(e.message, "The model failed."),
        other => panic!("response.failed: {other:?}"),
    }
    assert_eq!(
        *ev.text.lock().unwrap(),
        "Par",
        "text before the failure was streamed"
    );

    let (ev, r) = complete(&p, &req).await;
    assert!(
        matches!(r, Err(wit::ProviderError::Network(_))),
        "no terminal event: {r:?}"
    );
    assert_eq!(*ev.text.lock().unwrap(), "never ends");
    assert!(ev.finish.lock().unwrap().is_empty());
}

#[tokio::test]
async fn provider_errors_come_back_typed() {
    let llm = ScriptedLlm::start(vec![
        Step::Status {
            status: 429,
            headers: vec![("retry-after".into(), "3".into())],
            body: r#"{"error":{"message":"Rate limit reached"}}"#.into(),
        },
        Step::Status {
            status: 500,
            headers: Vec::new(),
            body: "upstream exploded".into(),
        },
        Step::Status {
            status: 401,
            headers: Vec::new(),
            body: r#"{"error":{"message":"bad key"}}"#.into(),
        },
        Step::Disconnect {
            frames: openai::text(&["half"])[..2].to_vec(),
        },
        Step::Sse {
            frames: openai::text(&["no end"])[..2].to_vec(),
            gap: Duration::ZERO,
        },
        Step::Delay(
            Duration::from_millis(400),
            Box::new(Step::Sse {
                frames: openai::text(&["late"]),
                gap: Duration::ZERO,
            }),
        ),
    ])
    .await
    .unwrap();
    let p = provider("openai", llm.port()).await;
    let req = request("openai", format!("{}/v1", llm.base_url()), "gpt-4o-mini");
    match complete(&p, &req).await.1 {
        Err(wit::ProviderError::RateLimit(r)) => {
            assert_eq!(r.retry_after_ms, Some(3000));
            assert_eq!(r.message, "Rate limit reached");
        }
        other => panic!("429: {other:?}"),
    }
    assert!(matches!(
        complete(&p, &req).await.1,
        Err(wit::ProviderError::Server(wit::ServerError {
            status: 500,
            ..
        }))
    ));
    assert!(matches!(
        complete(&p, &req).await.1,
        Err(wit::ProviderError::Auth(_))
    ));
    let (ev, r) = complete(&p, &req).await;
    assert!(
        matches!(r, Err(wit::ProviderError::Network(_))),
        "mid-stream disconnect: {r:?}"
    );
    assert_eq!(
        *ev.text.lock().unwrap(),
        "half",
        "what arrived before the drop was streamed"
    );
    assert!(ev.finish.lock().unwrap().is_empty());
    assert!(
        matches!(
            complete(&p, &req).await.1,
            Err(wit::ProviderError::Network(_))
        ),
        "no terminal event"
    );
    let (ev, r) = complete(&p, &req).await;
    r.unwrap();
    assert_eq!(
        *ev.text.lock().unwrap(),
        "late",
        "a slow first byte is fine"
    );
}

#[tokio::test]
async fn anthropic_streams_thinking_with_its_signature_for_replay() {
    let llm = ScriptedLlm::start(vec![Step::Sse {
        frames: anthropic::thinking_then_text(
            "Weather lookup needed.",
            "sig-xyz",
            &["Paris: ", "18C."],
        ),
        gap: Duration::ZERO,
    }])
    .await
    .unwrap();
    let p = provider("anthropic", llm.port()).await;
    // A pasted trailing /v1 is tolerated.
    let (ev, r) = complete(
        &p,
        &request(
            "anthropic",
            format!("{}/v1", llm.base_url()),
            "claude-sonnet-4-6",
        ),
    )
    .await;
    r.unwrap();
    assert_eq!(*ev.text.lock().unwrap(), "Paris: 18C.");
    assert_eq!(*ev.reasoning.lock().unwrap(), "Weather lookup needed.");
    assert_eq!(*ev.finish.lock().unwrap(), ["FinishReason::Stop"]);
    assert_eq!(*ev.usage.lock().unwrap(), Some((30, 12)));
    let native: serde_json::Value =
        serde_json::from_str(ev.native.lock().unwrap().as_deref().unwrap()).unwrap();
    assert_eq!(native[0]["signature"], "sig-xyz");
    let reqs = llm.requests();
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(reqs[0].header("x-api-key"), Some("sk-scripted"));
    assert_eq!(reqs[0].header("anthropic-version"), Some("2023-06-01"));
    assert!(reqs[0].header("authorization").is_none());
}

#[tokio::test]
async fn a_provider_cannot_reach_hosts_it_was_not_granted() {
    let llm = ScriptedLlm::start(vec![]).await.unwrap();
    let p = provider("openai", llm.port() + 1).await; // granted a different port
    let (_, r) = complete(
        &p,
        &request("openai", format!("{}/v1", llm.base_url()), "gpt-4o-mini"),
    )
    .await;
    match r {
        Err(wit::ProviderError::Auth(msg)) => assert!(msg.contains("http denied"), "{msg}"),
        other => panic!("{other:?}"),
    }
    assert!(llm.requests().is_empty(), "no request reached the server");
}

/// The committed `openai` provider built with SDK 0.1.0 (it exports
/// `provider@0.1.0`) is adapted by the host: it streams as it always did, its
/// capabilities never claim native tool search, and a request asking for it
/// reaches the old component as plain tools; the current build of the same
/// provider does search natively.
#[tokio::test]
async fn a_provider_built_against_0_1_0_is_adapted_to_the_current_host() {
    let llm = ScriptedLlm::start(vec![Step::Sse {
        frames: openai::text(&["Still ", "here."]),
        gap: Duration::from_millis(1),
    }])
    .await
    .unwrap();
    let old = provider_at(root().join("tests/fixtures/wit-0.1.0/openai"), llm.port()).await;
    let new = provider("openai", llm.port()).await;
    assert_eq!(old.manifest.plugin.wit, "0.1.0");
    assert_eq!(new.manifest.plugin.wit, "0.2.0");

    let caps_old = old.provider_capabilities("gpt-5.4").await.unwrap();
    let caps_new = new.provider_capabilities("gpt-5.4").await.unwrap();
    assert!(!caps_old.supports_tool_search);
    assert!(caps_new.supports_tool_search);
    assert_eq!(caps_old.context_window, caps_new.context_window);

    let mut req = request("openai", format!("{}/v1", llm.base_url()), "gpt-5.4");
    let tool = |name: &str, defer_loading: bool| wit::ToolDefinition {
        name: name.into(),
        description: format!("{name} tool").into(),
        parameters: r#"{"type":"object","properties":{}}"#.into(),
        defer_loading,
    };
    req.tools = vec![tool("read_file", false), tool("mcp__gh__search", true)];
    req.tool_search = true;
    async fn body(p: &LoadedPlugin, req: &wit::CompletionRequest) -> serde_json::Value {
        let text = p.provider_build_request(req).await.unwrap().unwrap();
        serde_json::from_str(&text).unwrap()
    }
    let old_body = body(&old, &req).await;
    let old_tools = old_body["tools"].as_array().unwrap();
    assert_eq!(old_tools.len(), 2, "{old_body}");
    assert!(old_tools.iter().all(|t| t.get("defer_loading").is_none()));
    let new_body = body(&new, &req).await;
    let new_tools = new_body["tools"].as_array().unwrap();
    assert_eq!(new_tools.len(), 3, "{new_body}");
    assert_eq!(new_tools[1]["defer_loading"], true);
    assert_eq!(new_tools[2]["type"], "tool_search");

    // A completion through the adapter: same stream, key still injected.
    let (ev, r) = complete(
        &old,
        &request("openai", format!("{}/v1", llm.base_url()), "gpt-4o-mini"),
    )
    .await;
    r.unwrap();
    assert_eq!(*ev.text.lock().unwrap(), "Still here.");
    assert_eq!(
        llm.requests()[0].header("authorization"),
        Some("Bearer sk-scripted")
    );
}

/// A request many times the size of one body write (4 KiB), with text of
/// more than one byte per character: each adapter serializes its body
/// straight into the request stream, and it must arrive whole, with a
/// Content-Length that counts its bytes (not chunked), the same JSON that
/// `build-request` returns.
#[tokio::test]
async fn a_large_request_body_is_streamed_whole_with_its_length() {
    for name in ["openai", "anthropic"] {
        let frames = match name {
            "openai" => openai::text(&["ok"]),
            _ => anthropic::text(&["ok"]),
        };
        let llm = ScriptedLlm::start(vec![Step::Sse {
            frames,
            gap: Duration::ZERO,
        }])
        .await
        .unwrap();
        let p = provider(name, llm.port()).await;
        let base = match name {
            "openai" => format!("{}/v1", llm.base_url()),
            _ => llm.base_url(),
        };
        let mut req = request(name, base, "m");
        req.tools = (0..60)
            .map(|i| wit::ToolDefinition {
                name: format!("tool_{i}").into(),
                description: format!("Prüft „{i}“ — ünïcödé in every description ✓").into(),
                parameters: format!(
                    r#"{{"type":"object","properties":{{"path":{{"type":"string","description":"Pfad Nr. {i} – {}"}}}},"required":["path"]}}"#,
                    "ä".repeat(100)
                )
                .into(),
                defer_loading: false,
            })
            .collect();
        let text = p.provider_build_request(&req).await.unwrap().unwrap();
        let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
        let expected_len = text.len();
        assert!(expected_len > 5 * 4096, "{name}: {expected_len} bytes");
        let (ev, r) = complete(&p, &req).await;
        r.unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(*ev.text.lock().unwrap(), "ok", "{name}");
        let reqs = llm.requests();
        assert_eq!(reqs.len(), 1, "{name}");
        assert_eq!(reqs[0].header("transfer-encoding"), None, "{name}");
        // The scripted server reads exactly Content-Length bytes: a count
        // short of the body leaves JSON that does not parse (Null here).
        assert_eq!(reqs[0].body, expected, "{name}: the body arrived whole");
        let announced: usize = reqs[0]
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no content-length"));
        // The same body as `build-request`'s text, byte for byte long.
        assert_eq!(announced, expected_len, "{name}");
    }
}
