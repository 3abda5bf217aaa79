//! Authentication, authorization, rate limiting, bad input, the global stream,
//! capacity and shutdown of the real `turnstone serve` binary.

mod support;

use serde_json::json;
use std::process::Command;
use std::time::Duration;
use support::{Server, sse};
use turnstone_scripted_llm::openai;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_once_login_and_api_tokens() {
    let srv = Server::start(vec![], "", &[]).await;
    let (s, v) = srv.call("GET", "/v1/api/auth/status", None, None).await;
    assert_eq!((s, v["setup_required"].as_bool()), (200, Some(true)));
    let admin = srv.setup_admin().await;
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/auth/setup",
            None,
            Some(json!({"username": "eve", "display_name": "E", "password": "password123"})),
        )
        .await;
    assert_eq!(
        (s, v["error"].as_str()),
        (409, Some("Setup already completed"))
    );
    let (s, _) = srv
        .call(
            "POST",
            "/v1/api/auth/login",
            None,
            Some(json!({"username": "admin", "password": "wrong-password"})),
        )
        .await;
    assert_eq!(s, 401);
    // An API token made offline logs in and works as a bearer.
    let token = srv.token("admin", "read,write");
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/auth/login",
            None,
            Some(json!({"token": token})),
        )
        .await;
    assert_eq!((s, v["scopes"].as_str()), (200, Some("read,write")), "{v}");
    let (s, _) = srv
        .call("GET", "/v1/api/workstreams", Some(&token), None)
        .await;
    assert_eq!(s, 200);
    // write, but not approve.
    let ws = srv.create(&admin, json!({})).await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/approve"),
            Some(&token),
            Some(json!({"approved": true})),
        )
        .await;
    assert_eq!(
        (s, v["error"].as_str()),
        (403, Some("approve scope required"))
    );
    let (s, v) = srv.call("GET", "/v1/api/workstreams", None, None).await;
    assert_eq!(
        (s, v["error"].as_str()),
        (401, Some("Unauthorized: missing or invalid token"))
    );
    let (s, _) = srv
        .call("GET", "/v1/api/workstreams?token=abc", None, None)
        .await;
    assert_eq!(s, 401, "?token= is not accepted");
}

/// Each route × identity → expected status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_table_scopes_permissions_and_owners() {
    let srv = Server::start(vec![], "", &[]).await;
    let admin = srv.setup_admin().await;
    let operator = srv.user("olivia", "operator").await;
    let viewer = srv.user("victor", "viewer").await;
    let other = srv.user("otto", "operator").await;
    let ws = srv.create(&operator, json!({"name": "mine"})).await;
    let w = |p: &str| format!("/v1/api/workstreams/{ws}{p}");
    // (method, path, body, [operator(owner), viewer, other operator, admin (not owner)])
    let table: Vec<(&str, String, Option<serde_json::Value>, [u16; 4])> = vec![
        ("GET", w(""), None, [200, 404, 404, 404]),
        ("GET", w("/history"), None, [200, 404, 404, 404]),
        ("GET", w("/export"), None, [200, 404, 404, 404]),
        (
            "GET",
            "/v1/api/workstreams".into(),
            None,
            [200, 200, 200, 200],
        ),
        ("GET", "/v1/api/models".into(), None, [200, 200, 200, 200]),
        (
            "GET",
            "/v1/api/dashboard".into(),
            None,
            [200, 200, 200, 200],
        ),
        (
            "POST",
            w("/send"),
            Some(json!({"message": "x", "client_send_id": "bad id!"})),
            [400, 403, 400, 400],
        ),
        (
            "POST",
            w("/approve"),
            Some(json!({"approved": true})),
            [200, 403, 404, 404],
        ),
        ("POST", w("/cancel"), Some(json!({})), [200, 403, 404, 404]),
        (
            "POST",
            w("/rewind"),
            Some(json!({"turns": 1})),
            // The operator's empty conversation has nothing to rewind: 409.
            [409, 403, 404, 404],
        ),
        (
            "POST",
            w("/title"),
            Some(json!({"title": "renamed"})),
            [200, 403, 404, 404],
        ),
        (
            "POST",
            "/v1/api/workstreams/new".into(),
            Some(json!({})),
            [200, 403, 200, 200],
        ),
        (
            "GET",
            "/v1/api/events/global".into(),
            None,
            [200, 200, 200, 200],
        ),
        ("POST", w("/close"), Some(json!({})), [200, 403, 404, 404]),
    ];
    for (method, path, body, expected) in table {
        for (who, token) in [&operator, &viewer, &other, &admin].into_iter().enumerate() {
            if path.ends_with("/events/global") {
                let resp = srv
                    .http
                    .get(srv.url(&path))
                    .bearer_auth(token)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(
                    resp.status().as_u16(),
                    expected[who],
                    "{method} {path} as #{who}"
                );
                continue;
            }
            let (s, v) = srv.call(method, &path, Some(token), body.clone()).await;
            assert_eq!(s, expected[who], "{method} {path} as #{who}: {v}");
            assert!(s == 200 || v["error"].is_string(), "errors are JSON: {v}");
        }
    }
    // A viewer cannot create; the listing only shows one's own workstreams.
    let (_, list) = srv
        .call("GET", "/v1/api/workstreams", Some(&other), None)
        .await;
    assert!(
        list["workstreams"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["ws_id"] != ws.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_clear_errors_and_loses_nothing() {
    let srv = Server::start(vec![sse(openai::text(&["fine"]))], "", &[]).await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let send = format!("/v1/api/workstreams/{ws}/send");
    let (s, v) = srv.post_raw(&send, &admin, "{not json").await;
    assert_eq!(s, 400);
    assert!(v["error"].as_str().unwrap().contains("invalid JSON"), "{v}");
    let (s, v) = srv
        .call("POST", &send, Some(&admin), Some(json!({"message": "   "})))
        .await;
    assert_eq!((s, v["error"].as_str()), (400, Some("message is required")));
    let (s, v) = srv
        .call("POST", &send, Some(&admin), Some(json!({"message": 5})))
        .await;
    assert_eq!(s, 400, "{v}");
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/workstreams/00000000000000000000000000000000/send",
            Some(&admin),
            Some(json!({"message": "x"})),
        )
        .await;
    assert_eq!(
        (s, v["error"].as_str()),
        (404, Some("Workstream not found"))
    );
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/workstreams/new",
            Some(&admin),
            Some(json!({"model": "nope"})),
        )
        .await;
    assert_eq!(
        (s, v["code"].as_str()),
        (503, Some("model_not_loaded")),
        "{v}"
    );
    let (s, _) = srv
        .call(
            "POST",
            "/v1/api/workstreams/new",
            Some(&admin),
            Some(json!({"kind": "coordinator"})),
        )
        .await;
    assert_eq!(s, 400);
    let (s, v) = srv
        .call(
            "GET",
            "/v1/api/workstreams/saved?limit=abc",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 400);
    assert!(v["error"].is_string(), "extractor errors are JSON too: {v}");
    let (s, _) = srv.call("GET", "/v1/api/nope", Some(&admin), None).await;
    assert_eq!(s, 404);
    // After all that, the workstream still works.
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    let (s, _) = srv
        .call("POST", &send, Some(&admin), Some(json!({"message": "hi"})))
        .await;
    assert_eq!(s, 200);
    assert_eq!(ev.turn_end().await.data["content"], "fine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_answers_429_with_retry_after_but_not_for_health() {
    let srv = Server::start(
        vec![],
        "[ratelimit]\nenabled = true\nrequests_per_second = 0.5\nburst = 3\n",
        &[],
    )
    .await;
    let mut codes = Vec::new();
    for _ in 0..5 {
        let r = srv
            .http
            .get(srv.url("/v1/api/auth/status"))
            .send()
            .await
            .unwrap();
        codes.push(r.status().as_u16());
        if r.status().as_u16() == 429 {
            let retry: u64 = r.headers()["retry-after"]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!((1..=2).contains(&retry), "{retry}");
            let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
            assert_eq!(v["error"], "Rate limit exceeded");
        }
    }
    assert_eq!(codes, [200, 200, 200, 429, 429]);
    for _ in 0..10 {
        let r = srv.http.get(srv.url("/health")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    let m = srv
        .http
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains("turnstone_ratelimit_rejected_total 2"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_stream_is_filtered_to_the_users_own_workstreams() {
    let srv = Server::start(vec![sse(openai::text(&["final words"]))], "", &[]).await;
    let admin = srv.setup_admin().await;
    let olivia = srv.user("olivia", "operator").await;
    let mut mine = srv.events("/v1/api/events/global", &olivia, None).await;
    let snap = mine.next(10).await;
    assert_eq!(snap.kind(), "node_snapshot");
    let other = srv.create(&admin, json!({"name": "admins"})).await;
    let ws = srv.create(&olivia, json!({"name": "olivias"})).await;
    let created = mine.until(10, |f| f.kind() == "ws_created").await;
    assert_eq!(
        created.data["ws_id"],
        ws.as_str(),
        "the admin's workstream is not shown to olivia"
    );
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&olivia),
        Some(json!({"message": "go"})),
    )
    .await;
    let idle = mine
        .until(30, |f| f.kind() == "ws_state" && f.data["state"] == "idle")
        .await;
    assert_eq!(idle.data["content"], "final words");
    assert!(
        idle.id.as_deref().unwrap().contains('-'),
        "global ids are <epoch>-<n>"
    );
    assert!(mine.seen.iter().all(|f| f.data["ws_id"] != other.as_str()));
    // /health counts workstreams by state; /metrics reports tokens and plugins.
    let (_, h) = srv.call("GET", "/health", None, None).await;
    assert_eq!(h["workstreams"]["total"], 2);
    assert_eq!(h["default_model"]["alias"], "default");
    let m = srv
        .http
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains("turnstone_tokens_total{kind=\"completion\"} 1"),
        "{m}"
    );
    assert!(
        // The completion, plus what is asked once per alias: the server's
        // context window (probe) and the model's capabilities.
        m.contains("turnstone_plugin_calls_total{plugin=\"openai\"} 3"),
        "{m}"
    );
    assert!(m.contains("turnstone_workstreams{state=\"idle\"} 2"), "{m}");
    assert!(m.contains("turnstone_sse_connections 1"), "{m}");
    // The allocator's view (glibc's): a server that has loaded components
    // and run turns holds megabytes in live allocations.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    let in_use: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("turnstone_heap_bytes{state=\"in_use\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no heap gauge in {m}"));
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        assert!(in_use > 1 << 20, "{in_use}");
        assert!(m.contains("turnstone_heap_bytes{state=\"free\"} "), "{m}");
    }
    // The default admission: 1,024 calls at once, nobody waiting.
    assert!(
        m.contains("turnstone_instance_slots{state=\"capacity\"} 1024"),
        "{m}"
    );
    assert!(
        m.contains("turnstone_instance_slots{state=\"in_use\"} "),
        "{m}"
    );
    assert!(
        m.contains("turnstone_instance_slots{state=\"waiting\"} 0"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_evicts_only_idle_workstreams_otherwise_503() {
    let srv = Server::start(
        vec![sse(openai::tool_call(
            "c1",
            "bash",
            &[r#"{"command": "sleep 20"}"#],
        ))],
        "",
        &["--max-workstreams", "2", "--skip-permissions"],
    )
    .await;
    let admin = srv.setup_admin().await;
    let a = srv.create(&admin, json!({"name": "a"})).await;
    let b = srv.create(&admin, json!({"name": "b"})).await;
    // a becomes busy; b is idle and older activity than nothing else.
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{a}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{a}/send"),
        Some(&admin),
        Some(json!({"message": "busy"})),
    )
    .await;
    ev.until(30, |f| {
        f.kind() == "state_change" && f.data["state"] == "running"
    })
    .await;
    let c = srv.create(&admin, json!({"name": "c"})).await;
    let (_, list) = srv
        .call("GET", "/v1/api/workstreams", Some(&admin), None)
        .await;
    let ids: Vec<_> = list["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["ws_id"].as_str().unwrap().to_string())
        .collect();
    assert!(
        ids.contains(&a) && ids.contains(&c) && !ids.contains(&b),
        "{ids:?}"
    );
    // b was evicted but not lost.
    let (_, saved) = srv
        .call("GET", "/v1/api/workstreams/saved", Some(&admin), None)
        .await;
    let _ = saved;
    let (s, _) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{b}/history"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200);
    // Make c busy too: nothing idle remains → 503 with a reason.
    srv.llm.push(sse(openai::tool_call(
        "c2",
        "bash",
        &[r#"{"command": "sleep 20"}"#],
    )));
    let mut evc = srv
        .events(&format!("/v1/api/workstreams/{c}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{c}/send"),
        Some(&admin),
        Some(json!({"message": "busy"})),
    )
    .await;
    evc.until(30, |f| {
        f.kind() == "state_change" && f.data["state"] == "running"
    })
    .await;
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/workstreams/new",
            Some(&admin),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 503, "{v}");
    assert!(v["error"].as_str().unwrap().contains("capacity"), "{v}");
    let m = srv
        .http
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains("turnstone_workstreams_evicted_total 1"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_turn_finish_and_saves_history() {
    let mut srv = Server::start(
        vec![turnstone_scripted_llm::Step::Sse {
            frames: openai::text(&["slow ", "but ", "complete"]),
            gap: Duration::from_millis(300),
        }],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "go"})),
    )
    .await;
    ev.until(10, |f| f.kind() == "thinking_start").await;
    let kill = Command::new("kill")
        .args(["-TERM", &srv.pid().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = srv
        .wait_exit(Duration::from_secs(20))
        .expect("server exits");
    assert!(status.success(), "{status:?}");
    // The finished answer was saved.
    let db = turnstone_storage::open(&turnstone_storage::DbConfig {
        path: Some(srv.dir.path().join("t.db")),
        ..Default::default()
    })
    .await
    .unwrap();
    let turns = db
        .load_turns(&ws, turnstone_storage::types::LoadMode::Transcript)
        .await
        .unwrap();
    let last = turns.last().unwrap();
    assert_eq!(last.turn.content.as_deref(), Some("slow but complete"));
}

/// Content reaches the stream as the model sends it: two tokens 5 ms apart
/// (inside one batch window), then three quiet seconds before the last one.
/// The first goes out at once, the second when its window ends while the
/// model is quiet, not with the last token (the next event), as it did
/// before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_goes_out_while_the_model_is_quiet() {
    let pauses = [0, 0, 5, 3_000, 0, 0, 0];
    let frames = openai::text(&["Hel", "lo", " there"]);
    assert_eq!(
        frames.len(),
        pauses.len(),
        "role, 3 tokens, finish, usage, done"
    );
    let paced = pauses
        .iter()
        .map(|ms| Duration::from_millis(*ms))
        .zip(frames)
        .collect();
    let srv = Server::start(
        vec![turnstone_scripted_llm::Step::Paced { frames: paced }],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv.send_streaming(&admin, &ws, "go").await;
    // "Hello" is all out well before the quiet ends (3 s after "lo" was sent).
    let first = ev.until(30, |f| f.kind() == "content").await;
    let mut so_far = first.data["text"].as_str().unwrap_or_default().to_string();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(2_000);
    while so_far != "Hello" {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(f) = ev.next_within(left).await else {
            panic!("\"Hello\" not out within 2 s of its first token: {so_far:?}");
        };
        if f.kind() == "content" {
            so_far.push_str(f.data["text"].as_str().unwrap_or_default());
        }
    }
    ev.turn_end().await;
    let contents: Vec<String> = ev
        .seen
        .iter()
        .filter(|f| f.kind() == "content")
        .map(|f| f.data["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(contents.concat(), "Hello there");
    let mut sent = String::new();
    let before_quiet = contents.iter().any(|c| {
        sent.push_str(c);
        sent == "Hello"
    });
    assert!(
        before_quiet,
        "\"Hello\" went out before the quiet ended, not with \" there\": {contents:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_workstreams_are_closed_after_the_timeout_busy_ones_are_not() {
    // 0.02 minutes = 1.2 s; the reaper runs every 0.3 s.
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "c1",
                "bash",
                &[r#"{"command": "sleep 4"}"#],
            )),
            sse(openai::text(&["done"])),
        ],
        "",
        &["--workstream-idle-timeout", "0.02", "--skip-permissions"],
    )
    .await;
    let admin = srv.setup_admin().await;
    let idle = srv.create(&admin, json!({"name": "idle"})).await;
    let busy = srv.create(&admin, json!({"name": "busy"})).await;
    let mut idle_ev = srv
        .events(&format!("/v1/api/workstreams/{idle}/events"), &admin, None)
        .await;
    let mut busy_ev = srv
        .events(&format!("/v1/api/workstreams/{busy}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{busy}/send"),
        Some(&admin),
        Some(json!({"message": "work"})),
    )
    .await;
    let closed = idle_ev.until(10, |f| f.kind() == "ws_closed").await;
    assert_eq!(closed.data["reason"], "idle");
    // The busy one ran its 4 s tool past the timeout and finished its turn.
    let end = busy_ev.turn_end().await;
    assert_eq!(end.data["content"], "done");
    assert!(!busy_ev.kinds().contains(&"ws_closed".to_string()));
    // Closed idle workstreams stay saved and reopen.
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{idle}/open"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!((s, v["name"].as_str()), (200, Some("idle")), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_describes_the_routes_and_docs_render_it() {
    let srv = Server::start(vec![], "", &[]).await;
    let (s, doc) = srv.call("GET", "/openapi.json", None, None).await;
    assert_eq!(s, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    let send = &doc["paths"]["/v1/api/workstreams/{ws_id}/send"]["post"];
    let schema_ref = send["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        .as_str()
        .unwrap();
    let name = schema_ref.rsplit('/').next().unwrap();
    let props = &doc["components"]["schemas"][name]["properties"];
    assert!(
        props["message"].is_object() && props["client_send_id"].is_object(),
        "{props}"
    );
    for path in [
        "/v1/api/workstreams/new",
        "/v1/api/workstreams/{ws_id}/events",
        "/v1/api/auth/login",
        "/health",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} missing");
    }
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
    // A grant's secret is a name or a bound object, each with the patterns
    // the handler checks (written out in secret_types.rs, inlined).
    let secret =
        &doc["components"]["schemas"]["GrantCapabilities"]["properties"]["secrets"]["items"];
    let forms = secret["oneOf"]
        .as_array()
        .unwrap_or_else(|| panic!("{secret}"));
    assert_eq!(forms.len(), 2, "{secret}");
    assert_eq!(forms[0]["pattern"], "^[A-Za-z0-9_./-]{1,256}$", "{secret}");
    assert!(
        forms[1]["properties"]["hosts"]["items"]["pattern"].is_string(),
        "{secret}"
    );
    assert_eq!(forms[1]["additionalProperties"], false, "{secret}");
    let r = srv.http.get(srv.url("/docs")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(r.text().await.unwrap().contains("/static/docs.js"));
    // A browser gets the UI's text files gzipped, as they are embedded.
    let r = srv
        .http
        .get(srv.url("/static/docs.js"))
        .header("accept-encoding", "gzip, deflate, br")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["content-encoding"], "gzip");
    assert_eq!(r.headers()["vary"], "accept-encoding");
    let gzipped = r.bytes().await.unwrap();
    assert_eq!(&gzipped[..2], &[0x1f, 0x8b], "a gzip stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_scope_sees_every_workstream_aggregates_and_health_changes() {
    let srv = Server::start(
        vec![
            turnstone_scripted_llm::Step::Status {
                status: 401,
                headers: vec![],
                body: r#"{"error": {"message": "bad key", "type": "invalid_request_error"}}"#
                    .into(),
            },
            sse(openai::text(&["recovered"])),
        ],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let olivia = srv.user("olivia", "operator").await;
    let service = srv.token("admin", "service");
    let mut all = srv.events("/v1/api/events/global", &service, None).await;
    assert_eq!(all.next(10).await.kind(), "node_snapshot");
    let mine = srv.create(&admin, json!({})).await;
    let hers = srv.create(&olivia, json!({})).await;
    all.until(10, |f| {
        f.kind() == "ws_created" && f.data["ws_id"] == mine.as_str()
    })
    .await;
    all.until(10, |f| {
        f.kind() == "ws_created" && f.data["ws_id"] == hers.as_str()
    })
    .await;
    // A failed model call degrades health; the next success restores it.
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{hers}/send"),
        Some(&olivia),
        Some(json!({"message": "a"})),
    )
    .await;
    let down = all.until(30, |f| f.kind() == "health_changed").await;
    assert_eq!(
        (
            down.data["status"].as_str(),
            down.data["backend_status"].as_str()
        ),
        (Some("degraded"), Some("down"))
    );
    let (_, h) = srv.call("GET", "/health", None, None).await;
    assert_eq!(h["status"], "degraded");
    assert!(
        all.seen
            .iter()
            .any(|f| f.kind() == "ws_state" && f.data["state"] == "error"),
        "{:?}",
        all.kinds()
    );
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{hers}/send"),
        Some(&olivia),
        Some(json!({"message": "b"})),
    )
    .await;
    let up = all.until(30, |f| f.kind() == "health_changed").await;
    assert_eq!(up.data["status"], "ok");
    let agg = all
        .until(10, |f| {
            f.kind() == "aggregate" && f.data["total_tokens"].as_u64() > Some(0)
        })
        .await;
    assert_eq!(agg.data["total_count"], 2);
    let (_, h) = srv.call("GET", "/health", None, None).await;
    assert_eq!(h["status"], "ok");
}
