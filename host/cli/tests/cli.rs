//! Drives the real `turnstone` binary against the staged components.

use std::path::{Path, PathBuf};
use std::process::Command;

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn turnstone(ws: &Path, cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_turnstone"));
    c.arg("--builtin-dir")
        .arg(target().join("components"))
        .arg("--plugin-dir")
        .arg(target().join("example-plugins"))
        .arg("--plugin-dir")
        .arg(target().join("test-components"))
        .arg("--cache-dir")
        .arg(cache)
        .arg("--workspace")
        .arg(ws)
        .env("TURNSTONE_CONFIG", ws.join("no-such-config.toml"))
        .env_remove("TURNSTONE_BUILTIN_PLUGINS");
    c
}

#[test]
fn plugins_list_reports_every_plugin_with_state_and_capabilities() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("no-such-config.toml"), "").unwrap();
    let out = turnstone(ws.path(), cache.path())
        .args(["plugins", "list", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_name = |n: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .unwrap_or_else(|| panic!("{n} listed"))
            .clone()
    };
    let rf = by_name("files");
    assert_eq!(rf["state"], "loaded");
    assert_eq!(rf["builtin"], true);
    assert_eq!(rf["wit"], "turnstone:plugin@0.2.0");
    assert_eq!(
        rf["tools"],
        serde_json::json!(["read_file", "write_file", "edit_file", "diff_file"])
    );
    assert_eq!(
        rf["granted"], rf["requested"],
        "built-ins get what they request"
    );
    let wc = by_name("word_count");
    assert_eq!(wc["state"], "loaded");
    assert_eq!(
        wc["granted"]["filesystem"],
        serde_json::json!([]),
        "third-party: nothing by default"
    );
    let fw = by_name("future_wit");
    assert_eq!(fw["state"], "failed");
    assert!(fw["error"].as_str().unwrap().contains("0.3.0"));

    let table = turnstone(ws.path(), cache.path())
        .args(["plugins", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(text.starts_with("NAME"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("files") && l.ends_with("loaded")),
        "{text}"
    );
}

#[test]
fn tool_subcommand_calls_a_tool_and_reports_errors_by_exit_code() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("no-such-config.toml"), "").unwrap();
    std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let ok = turnstone(ws.path(), cache.path())
        .args(["tool", "read_file", "notes.txt"])
        .output()
        .unwrap();
    assert!(ok.status.success());
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout),
        "     1\talpha\n     2\tbeta\n\n"
    );
    assert!(String::from_utf8_lossy(&ok.stderr).contains("read_file: notes.txt"));

    let missing = turnstone(ws.path(), cache.path())
        .args(["tool", "read_file", r#"{"path":"nope.txt"}"#])
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stdout).contains("file not found"));

    let unknown = turnstone(ws.path(), cache.path())
        .args(["tool", "no_such_tool"])
        .output()
        .unwrap();
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no loaded tool named"));
}

#[test]
fn edit_file_from_the_shell_edits_without_a_prior_read() {
    // A direct call is the operator's own edit: the read-before-edit rule
    // guards what a model edits within a session.
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("no-such-config.toml"), "").unwrap();
    std::fs::write(ws.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let out = turnstone(ws.path(), cache.path())
        .args([
            "tool",
            "edit_file",
            r#"{"path": "notes.txt", "old_string": "beta", "new_string": "gamma"}"#,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("Edited"));
    assert_eq!(
        std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
        "alpha\ngamma\n"
    );
    // Its other checks still hold: an old_string that is not there.
    let miss = turnstone(ws.path(), cache.path())
        .args([
            "tool",
            "edit_file",
            r#"{"path": "notes.txt", "old_string": "beta", "new_string": "delta"}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(miss.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&miss.stdout).contains("not found"),
        "{}",
        String::from_utf8_lossy(&miss.stdout)
    );
}

#[test]
fn a_bad_grant_in_the_config_is_refused_with_the_reason() {
    let ws = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("no-such-config.toml"),
        "[plugins.grants.word_count]\nhttp = [\"*\"]\n",
    )
    .unwrap();
    let out = turnstone(ws.path(), cache.path())
        .args(["plugins", "list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[plugins.grants.word_count]") && err.contains("would allow every host"),
        "{err}"
    );
}
