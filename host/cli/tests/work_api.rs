//! Delegated and scheduled work over HTTP against a real `turnstone serve`:
//! a sub-agent's progress on the parent's SSE stream, its approval answered
//! through the parent's `/approve`, its transcript under `/children`; a
//! watch waking its workstream; previews and notification targets.

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn previews_open_on_sse_and_are_served_sandboxed_to_their_owner_only() {
    let open = |id: &str, target: &str| {
        sse(openai::tool_call(
            id,
            "open_preview",
            &[&json!({ "target": target }).to_string()],
        ))
    };
    let srv = Server::start(
        vec![
            open("p1", "report.html"),
            sse(openai::text(&["The report is open."])),
            open("p2", "numbers.csv"),
            sse(openai::text(&["The table is open."])),
        ],
        "",
        &[],
    )
    .await;
    let page = "<html><head><title>Q3 report</title></head><body><script>parent.document.title='owned'</script><img src=\"http://127.0.0.1:9/beacon\"></body></html>";
    std::fs::write(srv.dir.path().join("ws/report.html"), page).unwrap();
    std::fs::write(srv.dir.path().join("ws/numbers.csv"), "a,b\n1,2\n").unwrap();
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    // Files run unprompted (local reads): no approval.
    srv.send_and_finish(&admin, &ws, "show me the report").await;
    let (_, h) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/previews"),
            Some(&admin),
            None,
        )
        .await;
    let list = h["previews"].as_array().unwrap().clone();
    assert_eq!(list.len(), 1, "{h}");
    assert_eq!(list[0]["kind"], "html");
    assert_eq!(list[0]["title"], "Q3 report");
    assert_eq!(list[0]["call_id"], "p1");
    let url = list[0]["url"].as_str().unwrap().to_string();
    assert_eq!(
        url,
        format!(
            "/v1/api/workstreams/{ws}/previews/{}",
            list[0]["preview_id"].as_str().unwrap()
        )
    );
    // The model was told it opened, nothing of the content.
    let result = srv.llm.requests()[1].body.to_string();
    assert!(
        result.contains("Opened \\\"Q3 report\\\" in the preview pane (html"),
        "{result}"
    );
    assert!(!result.contains("parent.document"), "{result}");

    // Served as a sandboxed page that can fetch nothing.
    let resp = srv
        .http
        .get(srv.url(&url))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let csp = resp.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.starts_with("sandbox;") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert!(
        !csp.contains("allow-scripts") && !csp.contains("script-src"),
        "{csp}"
    );
    assert_eq!(resp.headers()["x-content-type-options"], "nosniff");
    assert_eq!(resp.headers()["content-type"], "text/html; charset=utf-8");
    assert_eq!(resp.text().await.unwrap(), page);
    // Behind auth, and the owner's only.
    let anon = srv.http.get(srv.url(&url)).send().await.unwrap();
    assert_eq!(anon.status(), 401);
    let other = srv.user("mallory", "operator").await;
    let (s, _) = srv.call("GET", &url, Some(&other), None).await;
    assert_eq!(s, 404);
    let (s, _) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/previews"),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(s, 404);

    // A table arrives as a `preview` event and is served as inert text.
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&admin),
            Some(json!({"message": "and the numbers"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let p = ev.until(20, |f| f.kind() == "preview").await;
    assert_eq!(p.data["kind"], "table");
    assert_eq!(p.data["media_type"], "text/csv");
    assert_eq!(p.data["call_id"], "p2");
    let resp = srv
        .http
        .get(srv.url(p.data["url"].as_str().unwrap()))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    assert!(
        resp.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("sandbox")
    );
    let (s, _) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/previews/{}", "0".repeat(32)),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_targets_are_checked_and_kept_per_user_and_workstream() {
    let srv = Server::start(vec![], "", &[]).await;
    let admin = srv.setup_admin().await;
    let other = srv.user("bob", "operator").await;
    let ws = srv.create(&admin, json!({})).await;
    let hook = json!({"name": "phone", "kind": "webhook", "url": "https://hooks.example/t", "secret": "HOOK_TOKEN"});
    let (s, v) = srv
        .call("POST", "/v1/api/notify-targets", Some(&admin), Some(hook))
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["scope"], "user");
    assert_eq!(v["secret"], "HOOK_TOKEN");
    for (bad, why) in [
        (json!({"name": "x", "kind": "webhook"}), "url"),
        (
            json!({"name": "x", "kind": "webhook", "url": "ftp://h/x"}),
            "http or https",
        ),
        (
            json!({"name": "x", "kind": "webhook", "url": "https://u:p@h/x"}),
            "credentials",
        ),
        (
            json!({"name": "bad name", "kind": "webhook", "url": "https://h/x"}),
            "letters, digits",
        ),
        (
            json!({"name": "x", "kind": "webhook", "url": "https://h/x", "secret": "a b"}),
            "name of a host secret",
        ),
        (
            json!({"name": "x", "kind": "channel", "channel_type": "discord"}),
            "channel_id",
        ),
        (json!({"name": "x", "kind": "pager"}), "unknown variant"),
    ] {
        let (s, v) = srv
            .call(
                "POST",
                "/v1/api/notify-targets",
                Some(&admin),
                Some(bad.clone()),
            )
            .await;
        assert_eq!(s, 400, "{bad}: {v}");
        assert!(
            v["error"].as_str().unwrap_or("").contains(why),
            "{bad}: {v}"
        );
    }
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/notify-targets"),
            Some(&admin),
            Some(json!({"name": "build", "kind": "channel", "channel_type": "slack", "channel_id": "C1"})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["scope"], "workstream");
    let (_, v) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/notify-targets"),
            Some(&admin),
            None,
        )
        .await;
    let names: Vec<&str> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["build", "phone"]);
    // Bob sees none of it and cannot touch the workstream's.
    let (_, v) = srv
        .call("GET", "/v1/api/notify-targets", Some(&other), None)
        .await;
    assert_eq!(v["targets"], json!([]));
    let (s, _) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/notify-targets"),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(s, 404);
    let (s, _) = srv
        .call(
            "DELETE",
            &format!("/v1/api/workstreams/{ws}/notify-targets/build"),
            Some(&other),
            None,
        )
        .await;
    assert_eq!(s, 404);
    let (s, _) = srv
        .call("DELETE", "/v1/api/notify-targets/phone", Some(&other), None)
        .await;
    assert_eq!(s, 404);
    let (s, _) = srv
        .call("DELETE", "/v1/api/notify-targets/phone", Some(&admin), None)
        .await;
    assert_eq!(s, 200);
    let (_, v) = srv
        .call("GET", "/v1/api/notify-targets", Some(&admin), None)
        .await;
    assert_eq!(v["targets"], json!([]));
}
