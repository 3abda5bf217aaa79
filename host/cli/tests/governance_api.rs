//! Governance through the real server: tool policies (admin API, RBAC, a
//! deny before any card, audit), usage per model call, the audit log of
//! logins, workstreams and approvals with their verdicts, the judge's
//! events on the streams, and the `turnstone admin` commands on the same
//! database.

use serde_json::{Value, json};
use turnstone_scripted_llm::openai;
use turnstone_test_support::server::Server;
use turnstone_test_support::sse;

fn bash(id: &str, command: &str) -> turnstone_scripted_llm::Step {
    let args = json!({ "command": command }).to_string();
    sse(openai::tool_call(id, "bash", &[&args]))
}

async fn audit(srv: &Server, token: &str, query: &str) -> Vec<Value> {
    let (s, v) = srv
        .call(
            "GET",
            &format!("/v1/api/admin/audit?{query}"),
            Some(token),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v["entries"].as_array().unwrap().clone()
}

#[tokio::test]
async fn policies_usage_and_audit_through_the_api() {
    let srv = Server::start(
        vec![
            bash("c1", "echo blocked"),
            sse(openai::text(&["it was refused"])),
            bash("c2", "echo asked"),
            sse(openai::text(&["ran it"])),
        ],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let operator = srv.user("olga", "operator").await;

    // RBAC: an operator cannot read or change policies, usage or the audit log.
    for (method, path) in [
        ("GET", "/v1/api/admin/policies"),
        ("GET", "/v1/api/admin/usage"),
        ("GET", "/v1/api/admin/audit"),
    ] {
        let (s, _) = srv.call(method, path, Some(&operator), None).await;
        assert_eq!(s, 403, "{method} {path}");
    }
    let (s, _) = srv
        .call(
            "POST",
            "/v1/api/admin/policies",
            Some(&operator),
            Some(json!({"name": "x", "tool_pattern": "*", "action": "deny"})),
        )
        .await;
    assert_eq!(s, 403);

    // Bad bodies are 400 with the reason; a duplicate name 409.
    for (body, why) in [
        (
            json!({"name": "x", "tool_pattern": "[", "action": "deny"}),
            "tool pattern",
        ),
        (
            json!({"name": "x", "tool_pattern": "*", "action": "maybe"}),
            "unknown variant `maybe`",
        ),
        (
            json!({"name": "x", "tool_pattern": "*", "action": "deny", "role": "root"}),
            "unknown variant `root`",
        ),
        (
            json!({"name": "x", "tool_pattern": "*", "action": "deny", "extra": 1}),
            "unknown field `extra`",
        ),
    ] {
        let (s, v) = srv
            .call(
                "POST",
                "/v1/api/admin/policies",
                Some(&admin),
                Some(body.clone()),
            )
            .await;
        assert_eq!(s, 400, "{body}: {v}");
        assert!(v["error"].as_str().unwrap().contains(why), "{body}: {v}");
    }
    let (s, deny) = srv
        .call(
            "POST",
            "/v1/api/admin/policies",
            Some(&admin),
            Some(
                json!({"name": "no-bash-for-operators", "tool_pattern": "bash", "action": "deny",
                        "role": "operator", "priority": 10, "description": "ask an admin"}),
            ),
        )
        .await;
    assert_eq!(s, 201, "{deny}");
    assert_eq!(deny["role"], "operator");
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/policies",
            Some(&admin),
            Some(json!({"name": "no-bash-for-operators", "tool_pattern": "x", "action": "ask"})),
        )
        .await;
    assert_eq!(s, 409, "{v}");

    // The operator's bash call is refused before any card.
    let ws = srv.create(&operator, json!({"name": "ops"})).await;
    let events = srv.send_and_finish(&operator, &ws, "run it").await;
    let kinds = events.kinds();
    assert!(!kinds.iter().any(|k| k == "approve_request"), "{kinds:?}");
    let result = events
        .seen
        .iter()
        .find(|f| f.kind() == "tool_result")
        .unwrap();
    assert!(
        result.data["output"].as_str().unwrap().contains(
            "denied by the administrator's policy \"no-bash-for-operators\" (ask an admin)"
        ),
        "{}",
        result.data
    );

    // Disabled, the rule no longer applies: the call asks, with the
    // heuristic verdict and bash's grants on the card.
    let id = deny["policy_id"].as_str().unwrap();
    let (s, v) = srv
        .call(
            "PUT",
            &format!("/v1/api/admin/policies/{id}"),
            Some(&admin),
            Some(
                json!({"name": "no-bash-for-operators", "tool_pattern": "bash", "action": "deny",
                        "role": "operator", "enabled": false}),
            ),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["enabled"], false);
    let mut events = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &operator, None)
        .await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&operator),
            Some(json!({"message": "again"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let card = events.until(20, |f| f.kind() == "approve_request").await;
    let item = &card.data["items"][0];
    assert_eq!(item["heuristic_verdict"]["tier"], "heuristic");
    assert_eq!(item["heuristic_verdict"]["func_name"], "bash");
    assert!(
        item["grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "exec bash"),
        "{item}"
    );
    // The workstream's detail shows the same card to a client that reloads.
    let (_, detail) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(
        detail["pending_approval_details"][0]["items"][0]["heuristic_verdict"]["risk_level"],
        item["heuristic_verdict"]["risk_level"]
    );
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/approve"),
            Some(&operator),
            Some(json!({"approved": true})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    events.turn_end().await;
    // The accepted result carries what bash touched; the history keeps it,
    // and the verdict the call was approved on sits on the assistant's call.
    let (_, history) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/history"),
            Some(&operator),
            None,
        )
        .await;
    let msgs = history["messages"].as_array().unwrap();
    let tool = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("{history}"));
    assert_eq!(
        tool["capabilities"]["processes"][0]["program"], "bash",
        "{tool}"
    );
    let call = msgs
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
        .unwrap();
    assert_eq!(
        call["tool_calls"][0]["verdict"]["tier"], "heuristic",
        "{call}"
    );

    // Usage: one row per model call, by user and model.
    let (s, usage) = srv
        .call(
            "GET",
            "/v1/api/admin/usage?group_by=user,model",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{usage}");
    assert_eq!(usage["group_by"], json!(["user", "model"]));
    let rows = usage["rows"].as_array().unwrap();
    let olga = rows
        .iter()
        .find(|r| r["username"] == "olga")
        .expect("olga's row");
    assert_eq!(olga["calls"], 4, "{usage}");
    assert_eq!(usage["total"]["calls"], 4);
    let (s, v) = srv
        .call(
            "GET",
            "/v1/api/admin/usage?group_by=week",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 400, "{v}");

    // Close and delete, then the audit log tells the story.
    let (s, _) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/close"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/delete"),
            Some(&operator),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = srv
        .call(
            "POST",
            "/v1/api/auth/login",
            None,
            Some(json!({"username": "olga", "password": "wrong-password"})),
        )
        .await;
    assert_eq!(s, 401);
    let (s, _) = srv
        .call(
            "DELETE",
            &format!("/v1/api/admin/policies/{id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200);

    let all = audit(&srv, &admin, "limit=1000").await;
    let actions: Vec<&str> = all.iter().map(|e| e["action"].as_str().unwrap()).collect();
    for want in [
        "auth.setup",
        "auth.user_create",
        "auth.login",
        "auth.login_failed",
        "policy.create",
        "policy.update",
        "policy.delete",
        "workstream.create",
        "tool.policy_deny",
        "tool.approve",
        "workstream.close",
        "workstream.delete",
    ] {
        assert!(actions.contains(&want), "{want} missing from {actions:?}");
    }
    let approve = audit(&srv, &admin, "action=tool.approve").await;
    assert_eq!(approve.len(), 1);
    assert_eq!(approve[0]["target"], ws.as_str());
    assert_eq!(approve[0]["detail"]["source"], "user");
    assert_eq!(
        approve[0]["detail"]["calls"][0]["verdict"]["tier"],
        "heuristic"
    );
    let failed = audit(&srv, &admin, "action=auth.login_failed").await;
    assert_eq!(failed[0]["target"], "olga");
    assert_eq!(failed[0]["ip"], "127.0.0.1");
    // Prefix filters and paging.
    let ws_rows = audit(&srv, &admin, "action=workstream.").await;
    assert_eq!(ws_rows.len(), 3, "{ws_rows:?}");
    let (_, page) = srv
        .call("GET", "/v1/api/admin/audit?limit=2", Some(&admin), None)
        .await;
    let before = page["next_before"].as_i64().unwrap();
    let (_, next) = srv
        .call(
            "GET",
            &format!("/v1/api/admin/audit?limit=2&before={before}"),
            Some(&admin),
            None,
        )
        .await;
    assert!(next["entries"][0]["id"].as_i64().unwrap() < before);

    // The same log and usage from the command line, on the same database.
    let out = srv
        .db_command()
        .args(["admin", "audit", "--action", "policy.", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cli.len(), 3);
    assert_eq!(cli[0]["action"], "policy.delete");
}

#[tokio::test]
async fn policies_from_the_command_line_apply_to_the_running_server() {
    let read = json!({"path": "notes.txt"}).to_string();
    let srv = Server::start(
        vec![
            sse(openai::tool_call("c1", "read_file", &[&read])),
            sse(openai::text(&["read"])),
        ],
        "",
        &[],
    )
    .await;
    std::fs::write(srv.dir.path().join("ws/notes.txt"), "alpha").unwrap();
    let admin = srv.setup_admin().await;
    let out = srv
        .db_command()
        .args([
            "admin",
            "policy",
            "add",
            "reads-ask",
            "--tool",
            "read_*",
            "--action",
            "ask",
            "--description",
            "reads are reviewed",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = srv
        .db_command()
        .args([
            "admin", "policy", "add", "bad", "--tool", "x y", "--action", "ask",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("tool pattern"));
    // read_file runs without approval, but the policy (read by the server
    // within two seconds) asks.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let ws = srv.create(&admin, json!({"name": "r"})).await;
    let mut events = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "read the notes"})),
    )
    .await;
    let card = events.until(20, |f| f.kind() == "approve_request").await;
    assert_eq!(card.data["items"][0]["func_name"], "read_file");
    assert_eq!(card.data["items"][0]["policy"], "reads-ask");
    let out = srv
        .db_command()
        .args(["admin", "policy", "list"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("reads-ask") && text.contains("reads are reviewed"),
        "{text}"
    );
}
