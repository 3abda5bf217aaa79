//! `turnstone mcp` and `/mcp` on `turnstone serve`: our tool components
//! served to MCP clients, driven by two independent clients — rmcp (through
//! Turnstone's own MCP client) and the PyPI `mcp` SDK.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use turnstone_mcp::config::ServerConfig;
use turnstone_mcp::content::tool_result_text;
use turnstone_mcp::{McpCallError, McpConfig, McpHub, ServerEnv, ServerState};
use turnstone_runtime::SecretSource;
use turnstone_test_support::mcp::python;
use turnstone_test_support::server::{Server, turnstone_bin};

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// `turnstone … mcp` arguments with the staged components and word_count.
fn serve_args(ws: &Path) -> Vec<String> {
    [
        "--builtin-dir".into(),
        target().join("components").display().to_string(),
        "--plugin-dir".into(),
        target().join("example-plugins").display().to_string(),
        "--cache-dir".into(),
        target().join("test-cache/cli").display().to_string(),
        "--workspace".into(),
        ws.display().to_string(),
        "mcp".into(),
    ]
    .to_vec()
}

fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("config.toml"), "").unwrap();
    std::fs::write(ws.path().join("notes.txt"), "alpha beta\n").unwrap();
    ws
}

struct Secrets(String);
impl SecretSource for Secrets {
    fn secret(&self, name: &str) -> Option<String> {
        (name == "TS_MCP_TOKEN").then(|| self.0.clone())
    }
}

async fn hub_for(
    name: &str,
    server: ServerConfig,
    ws: &Path,
    token: Option<String>,
) -> Arc<McpHub> {
    let cfg = McpConfig {
        servers: BTreeMap::from([(name.to_string(), server)]),
        ..Default::default()
    };
    let hub = McpHub::start(
        &cfg,
        &BTreeMap::new(),
        ServerEnv {
            workspace: ws.to_path_buf(),
            secrets: Arc::new(Secrets(token.unwrap_or_default())),
            network: Default::default(),
        },
    )
    .unwrap();
    let state = hub.wait_connected(name, Duration::from_secs(90)).await;
    let srv = hub.server(name).unwrap();
    assert_eq!(
        state,
        Some(ServerState::Connected),
        "{:?}",
        srv.last_error()
    );
    hub
}

/// The served tools: auto-approved ones (word_count, read_file) but not the
/// ones that ask (bash, write_file); calls, a denial with the grant hint, and
/// a tool that is not served.
async fn check_served_tools(hub: &McpHub, name: &str) {
    let names: Vec<String> = hub.tools().iter().map(|(_, t)| t.name.clone()).collect();
    assert_eq!(hub.tool_count(), names.len(), "the count of what is listed");
    assert!(names.iter().any(|n| n == "word_count"), "{names:?}");
    assert!(names.iter().any(|n| n == "read_file"), "{names:?}");
    assert!(
        !names.iter().any(|n| n == "bash"),
        "bash asks, so it is not served: {names:?}"
    );
    let server = hub.server(name).unwrap();
    let tool = hub.tool(&format!("mcp__{name}__word_count")).unwrap().1;
    let schema: serde_json::Value =
        serde_json::from_str(&tool.schema_text).expect("the schema text is JSON");
    assert!(
        schema["properties"]["text"].is_object(),
        "schema from describe"
    );
    let never = CancellationToken::new();
    let noop = |_: String| {};
    let r = server
        .call_tool(
            "word_count",
            serde_json::json!({"text": "one two three"})
                .as_object()
                .cloned()
                .unwrap(),
            &never,
            &noop,
        )
        .await
        .unwrap();
    assert_ne!(r.is_error, Some(true));
    assert!(tool_result_text(&r).contains("words: 3"), "{r:?}");
    // word_count requests the workspace but, as a third-party plugin, holds no grant.
    let r = server
        .call_tool(
            "word_count",
            serde_json::json!({"path": "notes.txt"})
                .as_object()
                .cloned()
                .unwrap(),
            &never,
            &noop,
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    let text = tool_result_text(&r);
    assert!(text.contains("outside the directories granted"), "{text}");
    assert!(
        text.contains("[plugins.grants.word_count] filesystem"),
        "{text}"
    );
    let e = server
        .call_tool("bash", serde_json::Map::new(), &never, &noop)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, McpCallError::Rpc { message, .. } if message.contains("is served here")),
        "{e:?}"
    );
}

#[tokio::test]
async fn turnstone_mcp_over_stdio_with_the_rmcp_client() {
    let ws = workspace();
    let server = ServerConfig {
        command: Some(turnstone_bin().display().to_string()),
        args: serve_args(ws.path()),
        env: BTreeMap::from([(
            "TURNSTONE_CONFIG".to_string(),
            ws.path().join("config.toml").display().to_string(),
        )]),
        ..Default::default()
    };
    let hub = hub_for("ts", server, ws.path(), None).await;
    check_served_tools(&hub, "ts").await;
    hub.shutdown();
}

#[test]
fn turnstone_mcp_over_stdio_with_the_python_client() {
    let ws = workspace();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/mcp/client_check.py");
    let out = std::process::Command::new(python())
        .arg(script)
        .arg(turnstone_bin())
        .args(serve_args(ws.path()))
        .env("TURNSTONE_CONFIG", ws.path().join("config.toml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"word_count") && tools.contains(&"read_file"),
        "{tools:?}"
    );
    assert!(!tools.contains(&"bash"), "{tools:?}");
    let props: Vec<&str> = v["word_count_properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert!(
        props.contains(&"text") && props.contains(&"path"),
        "schema from describe: {props:?}"
    );
    assert_eq!(v["bash"]["refused"], true, "{v}");
    assert!(
        v["bash"]["message"].as_str().unwrap().contains("served"),
        "{v}"
    );
    assert_eq!(v["text"]["is_error"], false);
    assert!(
        v["text"]["text"].as_str().unwrap().contains("words: 3"),
        "{v}"
    );
    assert_eq!(v["file"]["is_error"], true);
    assert!(
        v["file"]["text"]
            .as_str()
            .unwrap()
            .contains("[plugins.grants.word_count] filesystem"),
        "{v}"
    );
}

#[tokio::test]
async fn serve_offers_mcp_at_slash_mcp_behind_a_ts_token() {
    let example = target().join("example-plugins").display().to_string();
    let srv = Server::start(vec![], "", &["--plugin-dir", &example]).await;
    let admin = srv.setup_admin().await;
    // A write-only token may not run tools unattended: 403.
    let writer = srv.token("admin", "read,write");
    let token = srv.token("admin", "read,write,approve");
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#;
    let resp = srv
        .http
        .post(srv.url("/mcp"))
        .bearer_auth(&writer)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    // Without a token: 401, before any MCP handling.
    let resp = srv
        .http
        .post(srv.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401);
    let ws = tempfile::tempdir().unwrap();
    let server = ServerConfig {
        url: Some(srv.url("/mcp")),
        bearer_secret: Some("TS_MCP_TOKEN".into()),
        ..Default::default()
    };
    let hub = hub_for("node", server, ws.path(), Some(token)).await;
    check_served_tools(&hub, "node").await;
    // The administrator's policies hold over MCP too: a denied tool does not run.
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/policies",
            Some(&admin),
            Some(serde_json::json!({"name": "no-counting", "tool_pattern": "word_*", "action": "deny"})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let never = CancellationToken::new();
    let r = hub
        .server("node")
        .unwrap()
        .call_tool(
            "word_count",
            serde_json::json!({"text": "a b"})
                .as_object()
                .cloned()
                .unwrap(),
            &never,
            &|_: String| {},
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(
        tool_result_text(&r).contains("denied by the administrator's policy \"no-counting\""),
        "{r:?}"
    );
    hub.shutdown();
}

/// A workstream on `turnstone serve` calls an MCP tool of a configured
/// server (after approval); `/health` and `/metrics` report the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_workstream_calls_an_mcp_tool_and_health_and_metrics_report_it() {
    use turnstone_scripted_llm::openai;
    use turnstone_test_support::sse;
    let config = format!(
        "[mcp.servers.fx]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\n",
        python().display().to_string(),
        turnstone_test_support::mcp::fixture_server()
            .display()
            .to_string()
    );
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "call_1",
                "mcp__fx__echo",
                &[r#"{"text": "via the server"}"#],
            )),
            sse(openai::text(&["done"])),
        ],
        &config,
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    // /health fills `mcp` once the server connected (in the background).
    let mut connected = false;
    for _ in 0..300 {
        let (_, h) = srv.call("GET", "/health", None, None).await;
        if h["mcp"]["connected"] == 1 {
            assert_eq!(h["mcp"]["servers"], 1);
            assert!(h["mcp"]["tools"].as_u64().unwrap() >= 5, "{h}");
            connected = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(connected, "the MCP server never connected");
    let ws = srv.create(&admin, serde_json::json!({"name": "mcp"})).await;
    let mut events = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(serde_json::json!({"message": "echo it"})),
    )
    .await;
    let ask = events.until(30, |f| f.kind() == "approve_request").await;
    assert_eq!(ask.data["items"][0]["func_name"], "mcp__fx__echo");
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/approve"),
        Some(&admin),
        Some(serde_json::json!({"approved": true})),
    )
    .await;
    let result = events
        .until(30, |f| {
            f.kind() == "tool_result" && f.data["call_id"] == "call_1"
        })
        .await;
    assert_eq!(result.data["output"], "via the server");
    assert_eq!(result.data["is_error"], false);
    events.turn_end().await;
    let m = srv
        .http
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains("turnstone_mcp_server_state{server=\"fx\",state=\"connected\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("turnstone_mcp_calls_total{server=\"fx\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("turnstone_mcp_breaker_openings_total{server=\"fx\"} 0"),
        "{m}"
    );
}
