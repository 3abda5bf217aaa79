//! The agent interfaces of WIT 0.2.0 are capabilities like the others: the
//! built-in `memory`, `recall` and `skills` components get a typed denial
//! naming the grant when the operator withholds or narrows it, and reach the
//! session only once granted (a direct call has none, which they report).

mod common;

use common::*;
use turnstone_runtime::PluginSettings;

async fn call(
    rt: &turnstone_runtime::Runtime,
    name: &str,
    grant_toml: &str,
    args: serde_json::Value,
) -> turnstone_runtime::ToolResult {
    let (_t, ws) = workspace();
    let p = rt
        .load(
            source("components", name, true),
            PluginSettings {
                grant: grant(grant_toml),
                workspace: Some(ws.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap_or_else(|e| panic!("loading {name}: {e}"));
    p.execute(name, &args.to_string(), &ctx(&ws), sink(), None)
        .await
        .unwrap()
}

#[tokio::test]
async fn memory_needs_its_grant_and_writing_needs_read_write() {
    let rt = runtime();
    let none = call(&rt, "memory", "", serde_json::json!({"action": "list"})).await;
    assert!(none.is_error);
    assert!(none.output.contains("memory denied"), "{}", none.output);
    assert!(
        none.output
            .contains("[plugins.grants.memory] memory = \"read-only\""),
        "{}",
        none.output
    );

    let ro = r#"memory = "read-only""#;
    // Reading passes the capability check and finds no session behind a direct call.
    let listed = call(&rt, "memory", ro, serde_json::json!({"action": "list"})).await;
    assert!(listed.is_error);
    assert!(
        listed.output.contains("no session is attached"),
        "{}",
        listed.output
    );
    // Saving needs read-write.
    let saved = call(
        &rt,
        "memory",
        ro,
        serde_json::json!({"action": "save", "name": "n", "content": "c"}),
    )
    .await;
    assert!(saved.is_error);
    assert!(
        saved
            .output
            .contains("[plugins.grants.memory] memory = \"read-write\""),
        "{}",
        saved.output
    );
}

#[tokio::test]
async fn recall_and_skills_are_denied_without_their_grants() {
    let rt = runtime();
    let r = call(&rt, "recall", "", serde_json::json!({"query": "deploy"})).await;
    assert!(r.is_error);
    assert!(
        r.output.contains("[plugins.grants.recall] history = true"),
        "{}",
        r.output
    );
    let granted = call(
        &rt,
        "recall",
        "history = true",
        serde_json::json!({"query": "deploy"}),
    )
    .await;
    assert!(
        granted.output.contains("no session is attached"),
        "{}",
        granted.output
    );

    let s = call(
        &rt,
        "skills",
        r#"skills = "read-only""#,
        serde_json::json!({"action": "create", "document": "---\nname: x\ndescription: y\n---\nz"}),
    )
    .await;
    assert!(s.is_error);
    assert!(
        s.output
            .contains("[plugins.grants.skills] skills = \"read-write\""),
        "{}",
        s.output
    );
}

#[tokio::test]
async fn writing_shared_memories_asks_and_private_ones_do_not() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = rt
        .load(
            source("components", "memory", true),
            PluginSettings {
                workspace: Some(ws.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let ask = |args: serde_json::Value| {
        let p = &p;
        let ws = ws.clone();
        async move {
            p.prepare("memory", &args.to_string(), &ctx(&ws))
                .await
                .unwrap()
                .unwrap()
                .needs_approval
        }
    };
    assert!(
        ask(serde_json::json!({"action": "save", "name": "n", "content": "c", "scope": "global"}))
            .await
    );
    assert!(ask(serde_json::json!({"action": "delete", "name": "n", "scope": "global"})).await);
    // The default scope is the user's own.
    assert!(!ask(serde_json::json!({"action": "save", "name": "n", "content": "c"})).await);
    assert!(
        !ask(serde_json::json!({"action": "delete", "name": "n", "scope": "workstream"})).await
    );
}
