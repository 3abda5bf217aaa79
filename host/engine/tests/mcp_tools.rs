//! MCP tools in a session turn: `tool_search` finds a deferred MCP tool, the
//! model calls it (after approval), and its result reaches the model; with
//! search off every MCP tool is sent directly. The MCP server is the real npm
//! `server-everything` over stdio.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use turnstone_engine::session::SessionConfig;
use turnstone_mcp::config::ServerConfig;
use turnstone_mcp::search::{SearchMode, SearchSettings};
use turnstone_mcp::{McpConfig, McpHub, ServerEnv, ServerState};
use turnstone_scripted_llm::openai;
use turnstone_test_support::engine::session;
use turnstone_test_support::mcp::{everything_server, node};
use turnstone_test_support::sse;

async fn everything(ws: &std::path::Path) -> Arc<McpHub> {
    let cfg = McpConfig {
        servers: BTreeMap::from([(
            "ev".to_string(),
            ServerConfig {
                command: Some(node().display().to_string()),
                args: vec![everything_server().display().to_string(), "stdio".into()],
                ..Default::default()
            },
        )]),
        ..Default::default()
    };
    let hub = McpHub::start(
        &cfg,
        &BTreeMap::new(),
        ServerEnv {
            workspace: ws.to_path_buf(),
            secrets: Arc::new(turnstone_runtime::plugin::EnvSecrets),
            network: Default::default(),
        },
    )
    .unwrap();
    let state = hub.wait_connected("ev", Duration::from_secs(60)).await;
    assert_eq!(state, Some(ServerState::Connected));
    hub
}

fn tool_names(body: &serde_json::Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_model_searches_finds_and_calls_a_deferred_mcp_tool() {
    let f = session(
        vec![
            sse(openai::tool_call(
                "call_s",
                "tool_search",
                &[r#"{"query": "sum of two numbers"}"#],
            )),
            sse(openai::tool_call(
                "call_m",
                "mcp__ev__get-sum",
                &[r#"{"a": 20, "b": 22}"#],
            )),
            sse(openai::text(&["The sum is 42."])),
        ],
        false,
    )
    .await;
    let hub = everything(&f.ws).await;
    let cfg = SessionConfig {
        tool_search: SearchSettings {
            mode: SearchMode::On,
            ..Default::default()
        },
        ..f.config("ws_mcp")
    };
    let mut s = f.another(f.binding.clone(), cfg).with_mcp(hub.clone());
    f.recorder.approve(true);
    s.send("add 20 and 22 with a tool").await.unwrap();

    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 3);
    let first = tool_names(&reqs[0].body);
    assert!(first.iter().any(|n| n == "tool_search"), "{first:?}");
    assert!(
        first.iter().any(|n| n == "read_file"),
        "components stay visible"
    );
    assert!(
        !first.iter().any(|n| n.starts_with("mcp__")),
        "MCP tools are deferred: {first:?}"
    );
    let second = tool_names(&reqs[1].body);
    assert!(second.iter().any(|n| n == "mcp__ev__get-sum"), "{second:?}");
    let found = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "call_s")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(found.contains("mcp__ev__get-sum"), "{found}");
    let result = reqs[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "call_m")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(result.contains("42"), "{result}");
    // tool_search ran without asking; the MCP tool asked.
    let prompts = f.recorder.prompts();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert_eq!(prompts[0].items[0].func_name, "mcp__ev__get-sum");
    assert!(prompts[0].items[0].header.contains("MCP: ev"));
    assert_eq!(s.turns().last().unwrap().text_content(), "The sum is 42.");
    hub.shutdown();
}

#[tokio::test]
async fn with_search_off_every_mcp_tool_is_sent_and_a_denied_call_does_not_run() {
    let f = session(
        vec![
            sse(openai::tool_call(
                "call_m",
                "mcp__ev__echo",
                &[r#"{"message": "hi"}"#],
            )),
            sse(openai::text(&["Denied."])),
        ],
        false,
    )
    .await;
    let hub = everything(&f.ws).await;
    let cfg = SessionConfig {
        tool_search: SearchSettings {
            mode: SearchMode::Off,
            ..Default::default()
        },
        ..f.config("ws_mcp_off")
    };
    let mut s = f.another(f.binding.clone(), cfg).with_mcp(hub.clone());
    f.recorder.approve(false);
    s.send("echo hi").await.unwrap();
    let reqs = f.llm.requests();
    let first = tool_names(&reqs[0].body);
    assert!(!first.iter().any(|n| n == "tool_search"), "{first:?}");
    for want in ["read_resource", "use_prompt"] {
        assert!(first.iter().any(|n| n == want), "{want} missing: {first:?}");
    }
    let all: Vec<String> = hub.tools().into_iter().map(|(_, t)| t.prefixed).collect();
    assert!(all.len() >= 10, "{all:?}");
    for want in &all {
        assert!(first.contains(want), "{want} not sent: {first:?}");
    }
    let denied = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "call_m")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(denied.contains("denied"), "{denied}");
    let calls = hub
        .server("ev")
        .unwrap()
        .counters
        .calls
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(calls, 0, "a denied call never reaches the server");
    hub.shutdown();
}

/// The Anthropic tier: a Claude model gets every MCP tool deferred behind
/// the API's own BM25 tool search (no client-side `tool_search`), the search
/// blocks are replayed with the turn, and the found tool runs as usual.
#[tokio::test]
async fn a_claude_model_searches_the_deferred_mcp_tools_itself() {
    use turnstone_engine::session::ModelBinding;
    use turnstone_scripted_llm::anthropic;
    let f = session(
        vec![
            sse(anthropic::tool_search_then_call(
                "sum of two numbers",
                &["mcp__ev__get-sum"],
                "toolu_1",
                "mcp__ev__get-sum",
                r#"{"a": 20, "b": 22}"#,
            )),
            sse(anthropic::text(&["The sum is 42."])),
        ],
        false,
    )
    .await;
    let hub = everything(&f.ws).await;
    let rt = turnstone_test_support::engine::test_runtime();
    let claude =
        turnstone_test_support::engine::provider_component(&rt, "anthropic", &[f.llm.port()]).await;
    let binding = ModelBinding::new(
        Arc::new(claude),
        "anthropic",
        &f.llm.base_url(),
        "claude-sonnet-4-5",
    )
    .with_api_key("sk-test");
    let cfg = SessionConfig {
        tool_search: SearchSettings {
            mode: SearchMode::On,
            ..Default::default()
        },
        ..f.config("ws_native")
    };
    let mut s = f.another(binding, cfg).with_mcp(hub.clone());
    f.recorder.approve(true);
    s.send("add 20 and 22 with a tool").await.unwrap();

    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 2);
    let tools = reqs[0].body["tools"].as_array().unwrap();
    assert_eq!(
        tools[0]["type"], "tool_search_tool_bm25_20251119",
        "{tools:?}"
    );
    let named = |n: &str| tools.iter().find(|t| t["name"] == n).cloned();
    assert!(named("tool_search").is_none(), "no client-side search tool");
    assert_eq!(named("mcp__ev__get-sum").unwrap()["defer_loading"], true);
    let read = named("read_file").unwrap();
    assert!(
        read.get("defer_loading").is_none(),
        "components stay loaded"
    );
    // The second request replays the search with the call, then the result.
    let messages = reqs[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let kinds: Vec<&str> = assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["server_tool_use", "tool_search_tool_result", "tool_use"]
    );
    let result = messages.last().unwrap()["content"][0]["content"].to_string();
    assert!(result.contains("42"), "{result}");
    // The search is shown to the user; the MCP tool asked for approval.
    let infos: Vec<String> = f
        .recorder
        .events()
        .iter()
        .filter_map(|e| match e {
            turnstone_protocol::Event::Info(i) => Some(i.message.clone()),
            _ => None,
        })
        .collect();
    assert!(
        infos
            .iter()
            .any(|i| i == "Tool search found: mcp__ev__get-sum"),
        "{infos:?}"
    );
    assert_eq!(
        f.recorder.prompts()[0].items[0].func_name,
        "mcp__ev__get-sum"
    );
    assert_eq!(s.turns().last().unwrap().text_content(), "The sum is 42.");
    hub.shutdown();
}
