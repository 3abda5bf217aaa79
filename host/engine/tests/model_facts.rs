//! What the engine learns about a model and its context: images a tool
//! returns reach a vision model and are described to a text-only one, the
//! serving endpoint's context window is probed when the operator set none,
//! and edit_file's read ledger follows the model's context across a
//! compaction.

use base64::Engine as _;
use serde_json::{Value, json};
use turnstone_engine::session::ModelBinding;
use turnstone_protocol::Event;
use turnstone_scripted_llm::{Step, openai};
use turnstone_test_support::engine::{TestSession, session as fixture};
use turnstone_test_support::sse;

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x04, 0x00, 0x00, 0x00, 0xb5, 0x1c, 0x0c,
    0x02, 0x00, 0x00, 0x00, 0x0b, 0x49, 0x44, 0x41, 0x54, 0x78, 0xda, 0x63, 0xfc, 0xff, 0x1f, 0x00,
    0x03, 0x03, 0x02, 0x00, 0xef, 0x9a, 0x86, 0x4c, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44,
    0xae, 0x42, 0x60, 0x82,
];

fn read_png_then(answer: &str) -> Vec<Step> {
    vec![
        sse(openai::tool_call(
            "c1",
            "read_file",
            &[r#"{"path": "dot.png"}"#],
        )),
        sse(openai::text(&[answer])),
    ]
}

/// Every `image_url` in a Chat Completions body.
fn image_urls(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().unwrap() {
        if let Some(parts) = m["content"].as_array() {
            for p in parts {
                if let Some(u) = p.pointer("/image_url/url").and_then(Value::as_str) {
                    out.push(u.to_string());
                }
            }
        }
    }
    out
}

fn with_capabilities(b: &ModelBinding, caps: Value) -> ModelBinding {
    ModelBinding {
        capabilities: Some(caps.to_string()),
        ..b.clone()
    }
}

async fn png_session(script: Vec<Step>) -> TestSession {
    let f = fixture(script, true).await;
    std::fs::write(f.ws.join("dot.png"), PNG).unwrap();
    f
}

#[tokio::test]
async fn a_png_read_by_a_tool_reaches_a_vision_model_as_an_image() {
    // gpt-4o-mini takes images (the openai component's model table).
    let mut f = png_session(read_png_then("A single pixel.")).await;
    f.session.send("what is in dot.png?").await.unwrap();
    let second = &f.llm.requests()[1].body;
    let want = format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(PNG)
    );
    assert_eq!(image_urls(second), [want], "{second}");
    let msgs = second["messages"].as_array().unwrap();
    let tool = msgs.iter().position(|m| m["role"] == "tool").unwrap();
    assert!(
        msgs[tool]["content"]
            .as_str()
            .unwrap()
            .starts_with("Image "),
        "the tool message keeps its text: {}",
        msgs[tool]
    );
    assert_eq!(
        msgs[tool + 1]["role"],
        "user",
        "the image follows the batch"
    );
    // The image is part of the tool turn, so it is kept with the history.
    let turn = f
        .session
        .turns()
        .iter()
        .find(|t| t.tool_call_id.as_deref() == Some("c1"))
        .unwrap()
        .clone();
    assert_eq!(turn.content.len(), 2, "{:?}", turn.content);
}

#[tokio::test]
async fn a_text_model_gets_a_description_instead_of_the_image() {
    let f = png_session(read_png_then("It is a PNG.")).await;
    let text_only = with_capabilities(&f.binding, json!({"supports_vision": false}));
    let mut s = f.another(text_only, f.config("ws_text"));
    s.send("what is in dot.png?").await.unwrap();
    let second = &f.llm.requests()[1].body;
    assert!(image_urls(second).is_empty(), "{second}");
    let tool = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("cannot view images"),
        "{tool}"
    );
}

#[tokio::test]
async fn an_image_in_history_is_described_when_the_model_cannot_see() {
    // The image arrived while a vision model answered; lowered for a model
    // without vision (a text-only fallback, a /model switch) it becomes a
    // line of text.
    let mut f = png_session(read_png_then("A pixel.")).await;
    f.session.send("what is in dot.png?").await.unwrap();
    assert_eq!(image_urls(&f.llm.requests()[1].body).len(), 1);
    let mut messages =
        turnstone_engine::lower::to_wit_messages(f.session.turns(), "openai", &NoAttachments)
            .unwrap();
    let replaced = turnstone_engine::lower::describe_images(&mut messages, "tiny-llm");
    assert_eq!(replaced, 1);
    let tool = messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("c1"))
        .unwrap();
    let text: String = tool
        .content
        .iter()
        .map(|p| match p {
            turnstone_runtime::provider_types::ContentPart::Text(t) => t.clone(),
            turnstone_runtime::provider_types::ContentPart::Image(_) => "<image>".into(),
        })
        .collect();
    assert!(
        text.contains("[image/png image, 1 KB, not shown: tiny-llm cannot view images]"),
        "{text}"
    );
}

struct NoAttachments;

impl turnstone_engine::lower::AttachmentResolver for NoAttachments {
    fn data_url(&self, _id: &str) -> Option<String> {
        None
    }
}

fn json_step(body: Value) -> Step {
    Step::Status {
        status: 200,
        headers: Vec::new(),
        body: body.to_string(),
    }
}

fn statuses(events: &[Event]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Status(s) => Some(s.context_window),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_vllm_window_is_probed_once_and_used_in_status() {
    let mut f = fixture(
        vec![sse(openai::text(&["one"])), sse(openai::text(&["two"]))],
        true,
    )
    .await;
    f.llm.route(
        "/v1/models",
        json_step(json!({"object": "list", "data": [
            {"id": "gpt-4o-mini", "object": "model", "max_model_len": 4096},
        ]})),
    );
    f.session.send("hi").await.unwrap();
    f.session.send("again").await.unwrap();
    assert_eq!(statuses(&f.recorder.events()), [4096, 4096]);
    assert_eq!(f.session.context_window(), 4096);
    let probes: Vec<String> = f.llm.probes().iter().map(|p| p.path.clone()).collect();
    assert_eq!(probes, ["/v1/models"], "asked once, and /props not needed");
    assert_eq!(
        f.llm.probes()[0].header("authorization"),
        Some("Bearer sk-test"),
        "the alias's key goes with the probe"
    );
}

#[tokio::test]
async fn a_llama_cpp_window_comes_from_props() {
    let mut f = fixture(vec![sse(openai::text(&["ok"]))], true).await;
    // llama.cpp lists its model without max_model_len; /props has n_ctx.
    f.llm.route(
        "/v1/models",
        json_step(json!({"data": [{"id": "q.gguf", "meta": {"n_ctx_train": 131072}}]})),
    );
    f.llm.route(
        "/props",
        json_step(json!({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1})),
    );
    f.session.send("hi").await.unwrap();
    assert_eq!(statuses(&f.recorder.events()), [2048]);
    let probes: Vec<String> = f.llm.probes().iter().map(|p| p.path.clone()).collect();
    assert_eq!(probes, ["/v1/models", "/props"]);
}

#[tokio::test]
async fn a_configured_window_is_not_probed_and_silence_keeps_the_model_table() {
    let f = fixture(
        vec![sse(openai::text(&["a"])), sse(openai::text(&["b"]))],
        true,
    )
    .await;
    f.llm.route(
        "/v1/models",
        json_step(json!({"data": [{"id": "gpt-4o-mini", "max_model_len": 4096}]})),
    );
    let configured = f.binding.clone().with_context_window(9000);
    let mut s = f.another(configured, f.config("ws_conf"));
    s.send("hi").await.unwrap();
    assert!(f.llm.probes().is_empty(), "{:?}", f.llm.probes());
    assert_eq!(statuses(&f.recorder.events()), [9000]);

    // A server that says nothing (both routes 404): the provider's table.
    let g = fixture(vec![sse(openai::text(&["c"]))], true).await;
    let mut s = g.another(g.binding.clone(), g.config("ws_quiet"));
    s.send("hi").await.unwrap();
    assert_eq!(g.llm.probes().len(), 2, "both routes asked");
    assert_eq!(statuses(&g.recorder.events()), [128_000]);
}

#[tokio::test]
async fn a_compaction_resets_the_read_ledger() {
    let mut f = fixture(
        vec![
            sse(openai::tool_call(
                "c1",
                "read_file",
                &[r#"{"path": "a.txt"}"#],
            )),
            sse(openai::text(&["Read it."])),
            // The compaction summary.
            sse(openai::text(&["The user had me read a.txt."])),
            // After it, an edit without reading again is refused…
            sse(openai::tool_call(
                "c2",
                "edit_file",
                &[r#"{"path": "a.txt", "old_string": "one", "new_string": "two"}"#],
            )),
            sse(openai::text(&["I must read it first."])),
            // …and works once the file was read in the new context.
            sse(openai::tool_call(
                "c3",
                "read_file",
                &[r#"{"path": "a.txt"}"#],
            )),
            sse(openai::tool_call(
                "c4",
                "edit_file",
                &[r#"{"path": "a.txt", "old_string": "one", "new_string": "two"}"#],
            )),
            sse(openai::text(&["Edited."])),
        ],
        true,
    )
    .await;
    std::fs::write(f.ws.join("a.txt"), "one\n").unwrap();
    f.session.send("read a.txt").await.unwrap();
    f.session.compact().await.unwrap();
    f.session.send("change one to two").await.unwrap();
    let refused = f
        .session
        .turns()
        .iter()
        .find(|t| t.tool_call_id.as_deref() == Some("c2"))
        .unwrap()
        .clone();
    assert!(refused.is_error, "{refused:?}");
    assert!(
        refused.text_content().contains("before editing it"),
        "{}",
        refused.text_content()
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("a.txt")).unwrap(),
        "one\n"
    );
    f.session.send("read it, then edit").await.unwrap();
    let edited = f
        .session
        .turns()
        .iter()
        .find(|t| t.tool_call_id.as_deref() == Some("c4"))
        .unwrap()
        .clone();
    assert!(!edited.is_error, "{}", edited.text_content());
    assert_eq!(
        std::fs::read_to_string(f.ws.join("a.txt")).unwrap(),
        "two\n"
    );
}
