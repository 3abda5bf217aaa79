//! Helpers shared by the MCP client tests (real peers only).

#![allow(dead_code)] // each test binary uses a subset

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use turnstone_mcp::config::ServerConfig;
use turnstone_mcp::{McpConfig, McpHub, ServerEnv, ServerState};
use turnstone_runtime::Capabilities;
use turnstone_test_support::mcp::{fixture_server, python};

pub const CONNECT: Duration = Duration::from_secs(60);

pub fn env(workspace: &std::path::Path) -> ServerEnv {
    ServerEnv {
        workspace: workspace.to_path_buf(),
        secrets: Arc::new(turnstone_runtime::plugin::EnvSecrets),
        network: Default::default(),
    }
}

pub fn args(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

pub fn stdio(command: std::path::PathBuf, a: &[&str]) -> ServerConfig {
    ServerConfig {
        command: Some(command.display().to_string()),
        args: a.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn hub(
    servers: Vec<(&str, ServerConfig)>,
    grants: BTreeMap<String, Capabilities>,
    ws: &std::path::Path,
) -> Arc<McpHub> {
    let cfg = McpConfig {
        servers: servers
            .into_iter()
            .map(|(n, s)| (n.to_string(), s))
            .collect(),
        call_timeout_secs: Some(30),
        ..Default::default()
    };
    McpHub::start(&cfg, &grants, env(ws)).unwrap()
}

pub async fn connected(hub: &McpHub, name: &str) {
    let state = hub.wait_connected(name, CONNECT).await;
    assert_eq!(state, Some(ServerState::Connected), "{name}: {state:?}");
}

pub fn no_progress() -> impl Fn(String) + Send + Sync {
    |_| {}
}

pub fn fixture(extra_env: &[(&str, &str)]) -> ServerConfig {
    let mut cfg = stdio(
        python(),
        &[&fixture_server().display().to_string(), "stdio"],
    );
    cfg.env = extra_env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    cfg
}

/// The fixture's grant: its own request (workspace read-only, its
/// virtualenv and script), with `extra` applied.
pub fn fixture_grant(
    ws: &std::path::Path,
    extra: impl FnOnce(&mut Capabilities),
) -> BTreeMap<String, Capabilities> {
    let transport = fixture(&[]).transport("fx").expect("transport");
    let mut g = turnstone_mcp::grants::requested(&transport, ws);
    extra(&mut g);
    BTreeMap::from([("fx".to_string(), g)])
}

/// The fixture's grant with the workspace read-write (its markers go there).
pub fn fixture_rw(ws: &std::path::Path) -> BTreeMap<String, Capabilities> {
    let ws = std::fs::canonicalize(ws).expect("workspace");
    fixture_grant(&ws, |g| {
        g.filesystem.push(turnstone_runtime::FsGrant {
            path: ws.display().to_string(),
            access: turnstone_runtime::Access::ReadWrite,
        })
    })
}
