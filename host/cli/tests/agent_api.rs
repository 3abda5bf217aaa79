//! Memory and skills over HTTP against a real `turnstone serve`: the memory
//! tool and the memories API share one store and one isolation rule, skills
//! are administered (RBAC, versions, bad documents), activated with
//! `/skill` through `/v1/api/command`, and shape the next model request; an
//! opened workstream's index lists its project's memories.

use serde_json::{Value, json};
use turnstone_scripted_llm::openai;
use turnstone_test_support::memories;
use turnstone_test_support::server::Server;
use turnstone_test_support::sse;

const SKILL: &str = "---\nname: review\ndescription: Review a change carefully\ncategory: code\ntags: [git]\nallowed_tools: [read_file, memory]\narguments:\n  - name: pr\n    required: true\n  - name: depth\n    default: thorough\n---\nReview PR {{pr}} ({{depth}}).\n";

fn names(list: &Value, key: &str) -> Vec<String> {
    list[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {list}"))
        .iter()
        .filter_map(|m| m["name"].as_str().map(str::to_string))
        .collect()
}

fn system_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_tool_and_the_api_share_one_store_and_users_stay_apart() {
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "c1",
                "memory",
                &[r#"{"action": "save", "name": "deploy_notes", "content": "blue-green via make ship", "description": "how we deploy", "scope": "user"}"#],
            )),
            sse(openai::text(&["saved"])),
            sse(openai::text(&["hello again alice"])),
            sse(openai::text(&["hello bob"])),
        ],
        "",
        &[],
    )
    .await;
    let alice = srv.setup_admin().await;
    let bob = srv.user("bob", "operator").await;
    let ws_a = srv.create(&alice, json!({"name": "a"})).await;
    srv.send_and_finish(&alice, &ws_a, "remember how we deploy")
        .await;

    // The tool's save is what the API lists, for its owner.
    let (s, mine) = srv
        .call("GET", "/v1/api/memories?scope=user", Some(&alice), None)
        .await;
    assert_eq!(s, 200, "{mine}");
    assert_eq!(names(&mine, "memories"), ["deploy_notes"]);
    let (s, one) = srv
        .call(
            "GET",
            "/v1/api/memories/deploy_notes?scope=user",
            Some(&alice),
            None,
        )
        .await;
    assert_eq!(s, 200, "{one}");
    assert_eq!(one["content"], "blue-green via make ship");
    // A workstream memory of Alice's, through the API.
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/memories",
            Some(&alice),
            Some(
                json!({"name": "ws_fact", "content": "port 8443", "description": "the port",
                        "scope": "workstream", "scope_id": ws_a}),
            ),
        )
        .await;
    assert_eq!(s, 200, "{v}");

    // Bob sees none of it: not listed, not searchable, not readable, not writable.
    let (_, theirs) = srv.call("GET", "/v1/api/memories", Some(&bob), None).await;
    assert!(names(&theirs, "memories").is_empty(), "{theirs}");
    let (_, found) = srv
        .call(
            "POST",
            "/v1/api/memories/search",
            Some(&bob),
            Some(json!({"query": "deploy port"})),
        )
        .await;
    assert!(names(&found, "memories").is_empty(), "{found}");
    for path in [
        "/v1/api/memories/deploy_notes?scope=user".to_string(),
        format!("/v1/api/memories/ws_fact?scope=workstream&scope_id={ws_a}"),
    ] {
        let (s, v) = srv.call("GET", &path, Some(&bob), None).await;
        assert_eq!(s, 404, "{path}: {v}");
        let (s, v) = srv.call("DELETE", &path, Some(&bob), None).await;
        assert_eq!(s, 404, "{path}: {v}");
    }
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/memories",
            Some(&bob),
            Some(
                json!({"name": "planted", "content": "x", "description": "y",
                        "scope": "workstream", "scope_id": ws_a}),
            ),
        )
        .await;
    assert_eq!(s, 404, "{v}");

    // Alice's next session is told about her memory; Bob's is not.
    let ws_a2 = srv.create(&alice, json!({"name": "a2"})).await;
    srv.send_and_finish(&alice, &ws_a2, "how do we deploy?")
        .await;
    let ws_b = srv.create(&bob, json!({"name": "b"})).await;
    srv.send_and_finish(&bob, &ws_b, "how do we deploy?").await;
    let reqs = srv.llm.requests();
    assert_eq!(reqs.len(), 4);
    assert!(
        system_text(&reqs[2].body).contains("deploy_notes"),
        "{}",
        reqs[2].body
    );
    assert!(
        !system_text(&reqs[3].body).contains("deploy_notes"),
        "{}",
        reqs[3].body
    );
    assert!(
        !system_text(&reqs[3].body).contains("ws_fact"),
        "{}",
        reqs[3].body
    );
}

/// A saved workstream of a project, opened on the server, lists that
/// project's memories in its first request's index, and not another
/// project's: the project comes from the row the open read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opened_workstream_lists_its_projects_memories() {
    use turnstone_storage::prelude::*;
    let srv = Server::start(vec![sse(openai::text(&["shipping"]))], "", &[]).await;
    let admin = srv.setup_admin().await;
    let (s, me) = srv
        .call("GET", "/v1/api/auth/whoami", Some(&admin), None)
        .await;
    assert_eq!(s, 200, "{me}");
    let db = turnstone_storage::open(&DbConfig {
        path: Some(srv.dir.path().join("t.db")),
        ..Default::default()
    })
    .await
    .unwrap();
    let ws = memories::project_workstream(&db, me["user_id"].as_str().map(String::from)).await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/open"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    srv.send_and_finish(&admin, &ws, "how do we ship?").await;
    let reqs = srv.llm.requests();
    assert_eq!(reqs.len(), 1);
    let index = system_text(&reqs[0].body);
    assert!(index.contains(memories::PROJECT_MEMORY_LINE), "{index}");
    assert!(!index.contains(memories::OTHER_PROJECT_MEMORY), "{index}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_are_administered_with_versions_and_a_skill_shapes_the_next_request() {
    let srv = Server::start(vec![sse(openai::text(&["on it"]))], "", &[]).await;
    let admin = srv.setup_admin().await;
    let bob = srv.user("bob", "operator").await;

    // Only administrators write skills; a bad document says what is wrong.
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/skills",
            Some(&bob),
            Some(json!({"document": SKILL})),
        )
        .await;
    assert_eq!(s, 403, "{v}");
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/skills",
            Some(&admin),
            Some(json!({"document": "---\nname: Bad Name\n---\nx"})),
        )
        .await;
    assert_eq!(s, 400, "{v}");
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/skills",
            Some(&admin),
            Some(json!({"document": SKILL})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["version"], "1");
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/skills",
            Some(&admin),
            Some(json!({"document": SKILL})),
        )
        .await;
    assert_eq!(s, 409, "a second create is refused: {v}");
    let updated = SKILL.replace("Review PR", "Carefully review PR");
    let (s, v) = srv
        .call(
            "PUT",
            "/v1/api/admin/skills/review",
            Some(&admin),
            Some(json!({"document": updated})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["version"], "2");
    let (s, v) = srv
        .call(
            "GET",
            "/v1/api/admin/skills/review/versions",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let versions: Vec<i64> = v["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["version"].as_i64().unwrap())
        .collect();
    assert_eq!(versions, [2, 1]);

    // Every user sees the catalogue.
    let (s, list) = srv.call("GET", "/v1/api/skills", Some(&bob), None).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(names(&list, "skills"), ["review"]);
    assert_eq!(list["skills"][0]["version"], "2");

    // A new workstream naming an unknown skill is 404 like `/skill`; one
    // missing an argument is 400.
    for (skill, status) in [("nope", 404), ("review", 400)] {
        let (s, v) = srv
            .call(
                "POST",
                "/v1/api/workstreams/new",
                Some(&bob),
                Some(json!({"name": "s", "skill": skill})),
            )
            .await;
        assert_eq!(s, status, "{skill}: {v}");
    }

    // `/skill` through the command route: unknown is 404, incomplete 400.
    let ws = srv.create(&bob, json!({"name": "r"})).await;
    for (cmd, status) in [
        ("/skill nope", 404),
        ("/skill review", 400),
        ("/skill review 1 2 3", 400),
        ("/skill review 42 depth=quick", 200),
    ] {
        let (s, v) = srv
            .call(
                "POST",
                "/v1/api/command",
                Some(&bob),
                Some(json!({"ws_id": ws, "command": cmd})),
            )
            .await;
        assert_eq!(s, status, "{cmd}: {v}");
    }
    srv.send_and_finish(&bob, &ws, "go").await;
    let reqs = srv.llm.requests();
    let body = &reqs[0].body;
    assert!(
        system_text(body).contains("Carefully review PR 42 (quick)."),
        "{body}"
    );
    let mut tools = tool_names(body);
    tools.sort();
    assert_eq!(tools, ["memory", "read_file"]);

    // Dropped: the next request offers every tool again.
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/command",
            Some(&bob),
            Some(json!({"ws_id": ws, "command": "/skill off"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");

    // Deleted: gone from the catalogue and its versions.
    let (s, v) = srv
        .call("DELETE", "/v1/api/admin/skills/review", Some(&admin), None)
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, list) = srv.call("GET", "/v1/api/skills", Some(&bob), None).await;
    assert!(names(&list, "skills").is_empty(), "{list}");
    let (s, _) = srv
        .call(
            "GET",
            "/v1/api/admin/skills/review/versions",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_workstream_gets_a_title_on_both_streams() {
    let srv = Server::start(
        vec![
            sse(openai::text(&["Use a canary."])),
            sse(openai::text(&["Canary release plan"])),
        ],
        "[titles]\nenabled = true\n",
        &[],
    )
    .await;
    let token = srv.setup_admin().await;
    let mut global = srv.events("/v1/api/events/global", &token, None).await;
    let ws = srv.create(&token, json!({"name": "ws-1"})).await;
    let mut events = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &token, None)
        .await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&token),
            Some(json!({"message": "how do we release safely?"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let titled = events.until(20, |f| f.kind() == "title_updated").await;
    assert_eq!(titled.data["title"], "Canary release plan");
    let renamed = global
        .until(20, |f| {
            f.kind() == "ws_rename" && f.data["ws_id"] == ws.as_str()
        })
        .await;
    assert_eq!(renamed.data["name"], "Canary release plan");
    // Stored: the saved listing shows it once the workstream is closed.
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/close"),
            Some(&token),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, saved) = srv
        .call("GET", "/v1/api/workstreams/saved", Some(&token), None)
        .await;
    let row = saved["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["ws_id"] == ws.as_str())
        .unwrap_or_else(|| panic!("{saved}"))
        .clone();
    assert_eq!(row["title"], "Canary release plan");
    assert_eq!(srv.llm.requests().len(), 2);
}
