//! The environment of a stdio MCP server: only granted names, never a
//! credential. Its own test binary: it sets host variables, which must not
//! race other tests' threads reading the environment.

use serde_json::Map;
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;
use turnstone_mcp::content::tool_result_text;
use turnstone_runtime::Capabilities;
use turnstone_test_support::mcp::python;

mod common;
use common::{connected, fixture, hub, no_progress};

#[test]
fn the_fixture_sees_only_granted_names_and_never_a_credential() {
    // Set before any thread exists (the runtime is built below).
    unsafe {
        std::env::set_var("TS_FIXTURE_VISIBLE", "yes");
        std::env::set_var("TS_FIXTURE_HIDDEN", "no");
        std::env::set_var("TS_FIXTURE_TOKEN", "leak");
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ws = tempfile::tempdir().unwrap();
        let py = python();
        let cfg = fixture(&[("FIXTURE_MODE", "set-by-operator")]);
        let requested_exec = py.file_name().unwrap().to_string_lossy().into_owned();
        let grants = BTreeMap::from([(
            "fx".to_string(),
            Capabilities {
                exec: vec![requested_exec],
                env: vec!["TS_FIXTURE_VISIBLE".into(), "TS_FIXTURE_TOKEN".into()],
                // An explicit grant replaces the request: it names what the
                // sandboxed server reads (its virtualenv and its script).
                filesystem: [
                    ws.path().to_path_buf(),
                    std::fs::canonicalize(py.parent().unwrap().parent().unwrap()).unwrap(),
                    std::fs::canonicalize(turnstone_test_support::root().join("tests/mcp"))
                        .unwrap(),
                ]
                .into_iter()
                .map(|p| turnstone_runtime::FsGrant {
                    path: p.display().to_string(),
                    access: turnstone_runtime::Access::ReadOnly,
                })
                .collect(),
                ..Default::default()
            },
        )]);
        let hub = hub(vec![("fx", cfg)], grants, ws.path());
        connected(&hub, "fx").await;
        let (server, _) = hub.tool("mcp__fx__env_names").unwrap();
        let r = server
            .call_tool(
                "env_names",
                Map::new(),
                &CancellationToken::new(),
                &no_progress(),
            )
            .await
            .unwrap();
        let text = tool_result_text(&r);
        let names: Vec<&str> = text.lines().collect();
        assert!(names.contains(&"TS_FIXTURE_VISIBLE"), "{names:?}");
        assert!(names.contains(&"FIXTURE_MODE"), "{names:?}");
        assert!(
            !names.contains(&"TS_FIXTURE_HIDDEN"),
            "ungranted: {names:?}"
        );
        assert!(
            !names.contains(&"TS_FIXTURE_TOKEN"),
            "credential-like: {names:?}"
        );
        assert!(
            names
                .iter()
                .all(|n| !n.ends_with("_TOKEN") && !n.ends_with("_KEY")),
            "{names:?}"
        );
        hub.shutdown();
    });
}
