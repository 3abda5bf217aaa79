//! Provider wire conformance: every case of `../shared/conformance/wire` for the
//! lanes built so far goes through the engine's orphan repair and lowering and
//! the real provider component's `build-request`; the body must equal the
//! original's request (normalised JSON). Run with `cargo test conformance`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use turnstone_engine::lower::{AttachmentResolver, to_wit_messages};
use turnstone_engine::repair::repair_orphans;
use turnstone_engine::turn::Turn;
use turnstone_runtime::provider_types as wit;
use turnstone_runtime::{LoadedPlugin, PluginSettings, PluginSource, Runtime, RuntimeOptions};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn wire_dir() -> PathBuf {
    let dir = root().join("../shared/conformance/wire");
    assert!(
        dir.join("cases.json").is_file(),
        "conformance data missing at {} (the shared/ folder must sit beside the repository)",
        dir.display()
    );
    dir
}

struct Attachments(Value);

impl AttachmentResolver for Attachments {
    fn data_url(&self, id: &str) -> Option<String> {
        self.0
            .get(id)?
            .pointer("/image_url/url")?
            .as_str()
            .map(str::to_string)
    }
}

/// The expected file is the SDK argument set: `extra_body` keys go to the top level.
fn normalise_expected(mut v: Value) -> Value {
    if let Some(Value::Object(extra)) = v.as_object_mut().and_then(|o| o.remove("extra_body")) {
        v.as_object_mut().unwrap().extend(extra);
    }
    v
}

fn request(case: &Value, fixture: &Value, data: &Value) -> wit::CompletionRequest {
    let provider = match case["lane"].as_str().unwrap() {
        "openai-chat" | "openai-responses" => "openai",
        other => other,
    };
    let turns: Vec<Turn> = fixture["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| Turn::from_openai_json(m, "anthropic").unwrap())
        .collect();
    let opts = &fixture["opts"];
    let replay = opts["replay_reasoning_to_model"].as_bool().unwrap_or(false);
    let messages = to_wit_messages(
        &repair_orphans(&turns),
        provider,
        &Attachments(data["attachments"].clone()),
    )
    .unwrap();
    let tools = opts["tools"]
        .as_array()
        .map(|ts| {
            ts.iter()
                .map(|t| wit::ToolDefinition {
                    name: t["function"]["name"].as_str().unwrap().into(),
                    description: t["function"]["description"].as_str().unwrap_or("").into(),
                    parameters: t["function"]["parameters"].to_string().into(),
                    defer_loading: false,
                })
                .collect()
        })
        .unwrap_or_default();
    let extra = &case["extra"];
    wit::CompletionRequest {
        provider: provider.into(),
        base_url: "https://api.example.invalid/v1".into(),
        model: case["model"].as_str().unwrap().into(),
        messages,
        tools,
        temperature: None,
        max_tokens: None,
        reasoning_effort: extra["reasoning_effort"].as_str().map(str::to_string),
        replay_reasoning: replay,
        capabilities: extra.get("capabilities").map(|c| c.to_string()),
        extra: None,
        tool_search: false,
    }
}

async fn provider(rt: &Runtime, name: &str) -> LoadedPlugin {
    rt.load(
        PluginSource {
            dir: root().join("target/components").join(name),
            builtin: true,
        },
        PluginSettings::default(),
    )
    .await
    .unwrap_or_else(|e| panic!("load {name} (run `cargo xtask build-components`): {e}"))
}

/// `adjust` applies the documented deliberate differences to our body.
async fn run_lanes(lanes: &[&str], component: &str, adjust: fn(&mut Value)) -> usize {
    let dir = wire_dir();
    let data: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
    let rt = Runtime::new(RuntimeOptions {
        cache_dir: Some(root().join("target/test-cache")),
        ..Default::default()
    })
    .unwrap();
    let plugin = provider(&rt, component).await;
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in data["cases"].as_array().unwrap() {
        if !lanes.contains(&case["lane"].as_str().unwrap()) {
            continue;
        }
        let fixture = &data["fixtures"][case["fixture"].as_str().unwrap()];
        let req = request(case, fixture, &data);
        let body = plugin
            .provider_build_request(&req)
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{}: build-request failed: {e:?}", case["expected"]));
        let mut got: Value = serde_json::from_str(&body).unwrap();
        adjust(&mut got);
        let name = case["expected"].as_str().unwrap();
        let expected = normalise_expected(
            serde_json::from_str(
                &std::fs::read_to_string(dir.join("expected").join(name)).unwrap(),
            )
            .unwrap(),
        );
        if got != expected {
            failures.push(format!(
                "{name}\n  expected: {}\n  got:      {}",
                serde_json::to_string(&expected).unwrap(),
                serde_json::to_string(&got).unwrap()
            ));
        }
        checked += 1;
    }
    assert!(
        failures.is_empty(),
        "{} case(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    checked
}

#[tokio::test]
async fn conformance_openai_chat_and_google_lanes() {
    // No deliberate differences on these lanes.
    let n = run_lanes(&["openai-chat", "google"], "openai", |_| {}).await;
    assert_eq!(n, 16, "8 fixtures × 2 lanes");
}

#[tokio::test]
async fn conformance_openai_responses_lane() {
    // The `openai` component picks the Responses API for commercial reasoning
    // models (gpt-5*, o-series); no deliberate differences.
    let n = run_lanes(&["openai-responses"], "openai", |_| {}).await;
    assert_eq!(n, 11, "8 fixtures + 2 max-effort + 1 verbosity/pro");
}

#[tokio::test]
async fn conformance_anthropic_native_hoist_and_compatible_lanes() {
    // Deliberate difference: the expected files are the arguments of the SDK's
    // `messages.stream()` helper, which adds `"stream": true` to the HTTP body
    // itself. We send raw HTTP, so our body carries it; it is removed here.
    let n = run_lanes(
        &["anthropic", "anthropic-compatible"],
        "anthropic",
        |body| {
            let streamed = body.as_object_mut().and_then(|o| o.remove("stream"));
            assert_eq!(
                streamed,
                Some(Value::Bool(true)),
                "the wire body must ask for a stream"
            );
        },
    )
    .await;
    assert_eq!(n, 24, "8 fixtures × (native, hoist, compatible)");
}
