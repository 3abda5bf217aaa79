//! MCP from the real `turnstone` binary: `--mcp-config` with the standard
//! `mcpServers` file, `turnstone tool mcp__…`, and MCP servers listed by
//! `plugins list|info` as plugins of kind `mcp`. Peers: the PyPI `mcp`
//! fixture and npm `server-everything`.

use std::path::{Path, PathBuf};
use std::process::Command;
use turnstone_test_support::mcp::{everything_server, fixture_server, node, python};

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn turnstone(ws: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_turnstone"));
    c.arg("--builtin-dir")
        .arg(target().join("components"))
        .arg("--cache-dir")
        .arg(ws.join("cache"))
        .arg("--workspace")
        .arg(ws)
        .arg("--mcp-config")
        .arg(ws.join("mcp.json"))
        .env("TURNSTONE_CONFIG", ws.join("config.toml"))
        .env_remove("TURNSTONE_BUILTIN_PLUGINS");
    c
}

fn setup() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("config.toml"), "").unwrap();
    let doc = serde_json::json!({"mcpServers": {
        "fx": {"command": python(), "args": [fixture_server(), "stdio"]},
        "ev": {"command": node(), "args": [everything_server(), "stdio"]},
        "broken": {"command": "/nonexistent/mcp-server"}
    }});
    std::fs::write(ws.path().join("mcp.json"), doc.to_string()).unwrap();
    ws
}

#[test]
fn turnstone_tool_calls_an_mcp_tool_and_reports_its_error() {
    let ws = setup();
    let out = turnstone(ws.path())
        .args(["tool", "mcp__fx__echo", r#"{"text": "through the CLI"}"#])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "through the CLI");

    let out = turnstone(ws.path())
        .args(["tool", "mcp__fx__fail", r#"{"message": "bad input"}"#])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a tool error fails the command");
    assert!(String::from_utf8_lossy(&out.stdout).contains("bad input"));

    let out = turnstone(ws.path())
        .args(["tool", "mcp__fx__echo", "[1]"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("must be a JSON object"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn plugins_list_shows_mcp_servers_as_plugins_with_state_and_tools() {
    let ws = setup();
    let out = turnstone(ws.path())
        .args(["plugins", "list", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let by = |n: &str| all.iter().find(|p| p["name"] == n).cloned().unwrap();
    let fx = by("fx");
    assert_eq!(fx["kind"], "mcp");
    assert_eq!(fx["state"], "connected");
    assert_eq!(fx["transport"], "stdio");
    let tools: Vec<&str> = fx["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp__fx__echo"), "{tools:?}");
    assert_eq!(by("ev")["state"], "connected");
    assert!(!by("ev")["prompts"].as_array().unwrap().is_empty());
    let broken = by("broken");
    // Failed, or already an open circuit after repeated failed starts.
    let st = broken["state"].as_str().unwrap();
    assert!(st == "failed" || st == "open circuit", "{broken}");
    assert!(
        broken["reason"]
            .as_str()
            .unwrap()
            .contains("cannot start /nonexistent/mcp-server"),
        "{broken}"
    );
    // Components are still listed beside them.
    assert!(all.iter().any(|p| p["name"] == "files"));

    let out = turnstone(ws.path())
        .args(["plugins", "list"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let fx_line = table.lines().find(|l| l.starts_with("fx ")).unwrap();
    assert!(
        fx_line.contains(" mcp ") && fx_line.contains("connected"),
        "{table}"
    );

    let out = turnstone(ws.path())
        .args(["plugins", "info", "fx"])
        .output()
        .unwrap();
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["origin"], "config");
    assert_eq!(info["granted"]["exec"][0], "python");
}
