//! MCP benchmark (a bench binary; release build; medians of repeated calls):
//!
//! - the same tool (`word_count` on a short text) called directly on the
//!   component, through `turnstone mcp` over stdio, and through `/mcp` of
//!   `turnstone serve` over streamable HTTP (both via Turnstone's rmcp client);
//! - a Python MCP server's `echo` over stdio, for scale;
//! - `tool_search` over 500 tools (index build and one search);
//! - start-up: what `McpHub::start` costs the caller with 5 stdio servers
//!   configured (it must not wait for them) and how long until each connected.
//!
//! Run: `cargo xtask build-components && cargo bench -p turnstone --bench mcp`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use turnstone_mcp::config::ServerConfig;
use turnstone_mcp::search::ToolIndex;
use turnstone_mcp::{McpConfig, McpHub, McpServer, ServerEnv, ServerState};
use turnstone_runtime::{CallContext, PluginSettings, PluginSource, SecretSource};
use turnstone_test_support::mcp::{fixture_server, python};
use turnstone_test_support::server::Server;

const CALLS: usize = 300;

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

struct Secrets(String);
impl SecretSource for Secrets {
    fn secret(&self, name: &str) -> Option<String> {
        (name == "TOKEN").then(|| self.0.clone())
    }
}

fn env(ws: &Path, token: &str) -> ServerEnv {
    ServerEnv {
        workspace: ws.to_path_buf(),
        secrets: Arc::new(Secrets(token.into())),
        network: Default::default(),
    }
}

async fn hub(servers: Vec<(String, ServerConfig)>, ws: &Path, token: &str) -> Arc<McpHub> {
    let cfg = McpConfig {
        servers: servers.into_iter().collect(),
        ..Default::default()
    };
    McpHub::start(&cfg, &BTreeMap::new(), env(ws, token)).expect("MCP config")
}

async fn connected(hub: &McpHub, name: &str) -> Arc<McpServer> {
    let s = hub.wait_connected(name, Duration::from_secs(120)).await;
    assert_eq!(s, Some(ServerState::Connected), "{name}");
    hub.server(name).expect("server")
}

async fn time_calls(server: &McpServer, tool: &str, args: serde_json::Value) -> f64 {
    let args = args.as_object().cloned().unwrap_or_default();
    let never = CancellationToken::new();
    let noop = |_: String| {};
    let mut t = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 20 {
        let start = Instant::now();
        let r = server
            .call_tool(tool, args.clone(), &never, &noop)
            .await
            .expect("call");
        assert_ne!(r.is_error, Some(true), "{r:?}");
        if i >= 20 {
            t.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    median(t)
}

fn serve_args(ws: &Path, cache: &Path) -> Vec<String> {
    vec![
        "--builtin-dir".into(),
        target().join("components").display().to_string(),
        "--plugin-dir".into(),
        target().join("example-plugins").display().to_string(),
        "--cache-dir".into(),
        cache.display().to_string(),
        "--workspace".into(),
        ws.display().to_string(),
        "mcp".into(),
    ]
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ws = tempfile::tempdir().expect("tmp");
    std::fs::write(ws.path().join("config.toml"), "").expect("config");
    let text = serde_json::json!({"text": "one two three four five"});

    // Direct: the component in this process.
    let rt = turnstone_test_support::engine::test_runtime();
    let plugin = rt
        .load(
            PluginSource {
                dir: target().join("example-plugins/word_count"),
                builtin: false,
            },
            PluginSettings::default(),
        )
        .await
        .expect("word_count is staged (cargo xtask build-components)");
    let ctx = CallContext {
        call_id: "b".into(),
        session_id: "b".into(),
        workspace_dir: None,
        working_dir: "/".into(),
        supports_vision: false,
    };
    let sink: Arc<dyn turnstone_runtime::ToolOutputSink> = Arc::new(NoSink);
    let raw = text.to_string();
    let mut t = Vec::new();
    for i in 0..CALLS + 20 {
        let start = Instant::now();
        let r = plugin
            .execute("word_count", &raw, &ctx, sink.clone(), None)
            .await
            .expect("direct call");
        assert!(!r.is_error);
        if i >= 20 {
            t.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    let direct = median(t);

    // stdio: `turnstone mcp`.
    let bin = env!("CARGO_BIN_EXE_turnstone");
    let cache = target().join("test-cache/cli");
    let stdio_cfg = ServerConfig {
        command: Some(bin.into()),
        args: serve_args(ws.path(), &cache),
        env: BTreeMap::from([(
            "TURNSTONE_CONFIG".into(),
            ws.path().join("config.toml").display().to_string(),
        )]),
        ..Default::default()
    };
    let h = hub(vec![("ts".into(), stdio_cfg)], ws.path(), "").await;
    let s = connected(&h, "ts").await;
    let stdio = time_calls(&s, "word_count", text.clone()).await;
    h.shutdown();

    // HTTP: `/mcp` of `turnstone serve`.
    let example = target().join("example-plugins").display().to_string();
    let srv = Server::start(vec![], "", &["--plugin-dir", &example]).await;
    srv.setup_admin().await;
    let token = srv.token("admin", "read,write,approve");
    let http_cfg = ServerConfig {
        url: Some(srv.url("/mcp")),
        bearer_secret: Some("TOKEN".into()),
        ..Default::default()
    };
    let h = hub(vec![("node".into(), http_cfg)], ws.path(), &token).await;
    let s = connected(&h, "node").await;
    let http = time_calls(&s, "word_count", text.clone()).await;
    h.shutdown();
    drop(srv);

    // A Python MCP server, for scale.
    let py_cfg = |_: usize| ServerConfig {
        command: Some(python().display().to_string()),
        args: vec![fixture_server().display().to_string(), "stdio".into()],
        ..Default::default()
    };
    let h = hub(vec![("py".into(), py_cfg(0))], ws.path(), "").await;
    let s = connected(&h, "py").await;
    let py = time_calls(&s, "echo", serde_json::json!({"text": "x"})).await;
    h.shutdown();

    // tool_search over 500 tools.
    let verbs = [
        "create", "list", "delete", "update", "search", "get", "merge", "sync",
    ];
    let nouns = [
        "issue",
        "repository",
        "branch",
        "invoice",
        "customer",
        "ticket",
        "document",
        "table",
        "record",
        "message",
        "channel",
        "calendar",
        "event",
        "file",
        "image",
        "report",
        "metric",
        "alert",
        "user",
        "order",
        "shipment",
        "payment",
        "contract",
        "note",
        "task",
    ];
    let tools: Vec<(String, String)> = (0..500)
        .map(|i| {
            let v = verbs[i % verbs.len()];
            let n = nouns[(i / verbs.len()) % nouns.len()];
            (
                format!("mcp__srv{}__{v}_{n}", i / 50),
                format!("{v} a {n} in service {} (variant {i})", i / 50),
            )
        })
        .collect();
    let mut builds = Vec::new();
    let mut searches = Vec::new();
    for _ in 0..30 {
        let start = Instant::now();
        let idx = ToolIndex::new(tools.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        builds.push(start.elapsed().as_secs_f64() * 1e6);
        for q in [
            "create a new invoice for a customer",
            "merge branch",
            "payment report",
        ] {
            let start = Instant::now();
            let hits = idx.search(q, 5);
            searches.push(start.elapsed().as_secs_f64() * 1e6);
            assert!(!hits.is_empty());
        }
    }

    // Start-up: five stdio servers.
    let five: Vec<(String, ServerConfig)> = (0..5).map(|i| (format!("py{i}"), py_cfg(i))).collect();
    let start = Instant::now();
    let h = hub(five, ws.path(), "").await;
    let start_call = start.elapsed().as_secs_f64() * 1e6;
    let mut to_connected = Vec::new();
    for i in 0..5 {
        connected(&h, &format!("py{i}")).await;
        to_connected.push(start.elapsed().as_secs_f64() * 1e3);
    }
    h.shutdown();

    println!("MCP benchmark (medians; {CALLS} calls each after 20 warm-up)");
    println!("  word_count direct (component in process)   {direct:>9.1} µs");
    println!(
        "  word_count via `turnstone mcp` (stdio)      {stdio:>9.1} µs  (+{:.1} µs, {:.1}x)",
        stdio - direct,
        stdio / direct
    );
    println!(
        "  word_count via /mcp (streamable HTTP)       {http:>9.1} µs  (+{:.1} µs, {:.1}x)",
        http - direct,
        http / direct
    );
    println!("  echo of a Python MCP server (stdio)         {py:>9.1} µs");
    println!(
        "  tool_search, 500 tools: index build {:.1} µs, one search {:.1} µs",
        median(builds),
        median(searches)
    );
    println!(
        "  McpHub::start with 5 stdio servers returns in {start_call:.1} µs; connected after {} ms",
        to_connected
            .iter()
            .map(|t| format!("{t:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

struct NoSink;
impl turnstone_runtime::ToolOutputSink for NoSink {
    fn chunk(&self, _: &str) -> bool {
        true
    }
}
