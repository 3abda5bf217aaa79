//! Delegated and scheduled work over HTTP against a real `turnstone serve`:
//! a sub-agent's progress on the parent's SSE stream, its approval answered
//! through the parent's `/approve`, its transcript under `/children`.

use serde_json::json;
use turnstone_scripted_llm::openai;
use turnstone_test_support::server::Server;
use turnstone_test_support::sse;

fn task(id: &str, prompt: &str) -> turnstone_scripted_llm::Step {
    let args = json!({ "prompt": prompt }).to_string();
    sse(openai::tool_call(id, "task_agent", &[&args]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_streams_under_its_call_asks_through_the_parent_and_is_kept() {
    let srv = Server::start(
        vec![
            task("t1", "Write hello.txt saying hi."),
            sse(openai::tool_call(
                "c1",
                "bash",
                &[r#"{"command": "printf hi > hello.txt"}"#],
            )),
            sse(openai::text(&["Wrote hello.txt."])),
            sse(openai::text(&["Done: the sub-agent wrote it."])),
        ],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&admin),
            Some(json!({"message": "please write hello.txt"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let approve = |cycle: String| {
        let srv = &srv;
        let admin = admin.clone();
        let ws = ws.clone();
        async move {
            let (s, v) = srv
                .call(
                    "POST",
                    &format!("/v1/api/workstreams/{ws}/approve"),
                    Some(&admin),
                    Some(json!({"cycle_id": cycle, "approved": true})),
                )
                .await;
            assert_eq!(s, 200, "{v}");
        }
    };
    // The task_agent call asks first.
    let first = ev.until(20, |f| f.kind() == "approve_request").await;
    assert_eq!(first.data["items"][0]["func_name"], "task_agent");
    approve(first.data["cycle_id"].as_str().unwrap().to_string()).await;
    // Then the sub-agent's bash, as a cycle of this workstream, marked.
    let second = ev.until(20, |f| f.kind() == "approve_request").await;
    let item = &second.data["items"][0];
    assert_eq!(item["func_name"], "bash");
    assert_eq!(item["agent"]["parent_call_id"], "t1");
    assert_eq!(item["agent"]["depth"], 1);
    let agent_ws = item["agent"]["agent_ws_id"].as_str().unwrap().to_string();
    assert!(
        !srv.dir.path().join("ws/hello.txt").exists(),
        "not run before the answer"
    );
    approve(second.data["cycle_id"].as_str().unwrap().to_string()).await;
    let end = ev.turn_end().await;
    assert_eq!(end.data["content"], "Done: the sub-agent wrote it.");
    assert_eq!(
        std::fs::read_to_string(srv.dir.path().join("ws/hello.txt")).unwrap(),
        "hi"
    );
    let kinds = ev.kinds();
    assert!(kinds.iter().any(|k| k == "agent_event"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "agent_context"), "{kinds:?}");
    // The sub-agent's transcript: listed under the parent, readable, its
    // parent call named; not among the saved workstreams.
    let (s, kids) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/children"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{kids}");
    let c = &kids["children"][0];
    assert_eq!(c["ws_id"], agent_ws.as_str());
    assert_eq!(c["kind"], "task_agent");
    assert_eq!(c["parent_call_id"], "t1");
    let (s, h) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{agent_ws}/history"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{h}");
    let contents: Vec<&str> = h["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        contents.contains(&"Write hello.txt saying hi."),
        "{contents:?}"
    );
    assert!(contents.contains(&"Wrote hello.txt."), "{contents:?}");
    let (_, saved) = srv
        .call("GET", "/v1/api/workstreams/saved", Some(&admin), None)
        .await;
    let saved_ids: Vec<&str> = saved["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["ws_id"].as_str())
        .collect();
    assert!(!saved_ids.contains(&agent_ws.as_str()), "{saved_ids:?}");
    // Another user sees neither the children nor the transcript.
    let bob = srv.user("bob", "operator").await;
    let (s, _) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/children"),
            Some(&bob),
            None,
        )
        .await;
    assert_eq!(s, 404);
    let (s, _) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{agent_ws}/history"),
            Some(&bob),
            None,
        )
        .await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_result_wakes_an_idle_workstream_over_sse() {
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "w1",
                "watch",
                &[
                    &json!({"action": "create", "name": "build", "command": "cat status.txt",
                          "poll_every": "10s", "stop_on": "'green' in output"})
                    .to_string(),
                ],
            )),
            sse(openai::text(&["I will tell you when the build is green."])),
            sse(openai::text(&["The build is green."])),
        ],
        "",
        &["--skip-permissions"],
    )
    .await;
    std::fs::write(srv.dir.path().join("ws/status.txt"), "green\n").unwrap();
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv.send_and_finish(&admin, &ws, "watch the build").await;
    // The scheduler polls the new watch at once; the condition holds, the
    // result arrives and the idle workstream answers it by itself.
    let notice = ev.until(30, |f| f.kind() == "system_turn").await;
    assert_eq!(notice.data["source"], "watch");
    assert_eq!(notice.data["meta"]["name"], "build");
    assert!(
        notice.data["content"]
            .as_str()
            .unwrap()
            .starts_with("Watch \"build\" fired after 1 poll(s)"),
        "{}",
        notice.data
    );
    let end = ev.turn_end().await;
    assert_eq!(end.data["content"], "The build is green.");
    let reqs = srv.llm.requests();
    assert_eq!(reqs.len(), 3);
    // The watch list shows it ended; history keeps the notice.
    let (s, w) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/watches?all=true"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{w}");
    assert_eq!(w["watches"][0]["state"], "fired");
    let (_, active) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/watches"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(active["watches"].as_array().unwrap().len(), 0);
    let (_, h) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/history"),
            Some(&admin),
            None,
        )
        .await;
    assert!(
        h["messages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["source"] == "watch"),
        "{h}"
    );
    let (s, _) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/watches/build/cancel"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 404, "nothing active to cancel");
}
