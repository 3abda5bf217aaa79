//! The wire contract's turn sequences against the real `turnstone serve`
//! binary (real components, SQLite, loopback HTTP, scripted LLM).

mod support;

use serde_json::json;
use std::time::Duration;
use support::{Server, sse};
use turnstone_scripted_llm::openai;

fn ids_increase(frames: &[support::Frame]) {
    let ids: Vec<u64> = frames
        .iter()
        .filter_map(|f| f.id.as_ref().map(|i| i.parse().unwrap()))
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ids not monotonic: {ids:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_reply_follows_the_contract_and_ends_with_ws_state() {
    let srv = Server::start(
        vec![sse(openai::text(&[
            "Hello",
            " from",
            " the",
            " scripted",
            " LLM.",
        ]))],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({"name": "plain"})).await;
    let path = format!("/v1/api/workstreams/{ws}/events?user_turn=1");
    let mut ev = srv.events(&path, &admin, None).await;
    // Connect preamble, without ids, ending in the current state (idle).
    for kind in ["clear_ui", "connected", "state_change"] {
        let f = ev.next(10).await;
        assert_eq!(f.kind(), kind, "{:?}", f.data);
        assert!(f.id.is_none(), "preamble frames carry no id: {f:?}");
    }
    assert_eq!(ev.seen[2].data["state"], "idle");
    assert_eq!(ev.seen[1].data["model"], "scripted-model");
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&admin),
            Some(json!({"message": "hi"})),
        )
        .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("ok")), "{v}");
    let end = ev.turn_end().await;
    assert_eq!(end.data["state"], "idle");
    assert_eq!(end.data["content"], "Hello from the scripted LLM.");
    let kinds = ev.kinds();
    let pos = |k: &str| {
        kinds
            .iter()
            .position(|x| x == k)
            .unwrap_or_else(|| panic!("{k} missing: {kinds:?}"))
    };
    assert!(pos("user_turn") < pos("thinking_start"));
    assert!(pos("thinking_start") < pos("content"));
    assert!(pos("content") < pos("stream_end"));
    assert!(pos("stream_end") < pos("status"));
    let idle = kinds.iter().rposition(|k| k == "state_change").unwrap();
    assert_eq!(ev.seen[idle].data["state"], "idle");
    assert!(
        idle < kinds.len() - 1,
        "ws_state comes after the final state_change"
    );
    let user = &ev.seen[pos("user_turn")];
    assert_eq!(user.data["content"], "hi");
    assert!(user.id.is_some());
    let text: String = ev
        .seen
        .iter()
        .filter(|f| f.kind() == "content")
        .map(|f| f.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello from the scripted LLM.");
    let status = &ev.seen[pos("status")];
    assert_eq!(status.data["prompt_tokens"], 11);
    assert!(
        ev.seen
            .iter()
            .all(|f| f.kind() == "connected" || f.data["ws_id"] == ws.as_str())
    );
    ids_increase(&ev.seen);
    // The model saw the message.
    let req = &srv.llm.requests()[0];
    assert!(req.body.to_string().contains("\"hi\""));
    // History has both turns, with a hand-off token.
    let (s, h) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/history"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let msgs = h["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{h}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[1]["content"], "Hello from the scripted LLM.");
    assert!(h["handoff_token"].is_string());
    // Without ?user_turn=1 the user row is downgraded, like the original.
    srv.llm.push(sse(openai::text(&["again"])));
    let mut plain = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "second"})),
    )
    .await;
    plain.turn_end().await;
    let tr = plain
        .seen
        .iter()
        .find(|f| f.kind() == "replay_truncated")
        .expect("downgraded user_turn");
    assert_eq!(tr.data["reason"], "user_turn_projection_unsupported");
    assert!(!plain.kinds().contains(&"user_turn".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_waits_for_approval_then_streams_output() {
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "call_1",
                "bash",
                &[r#"{"command": "echo hello-"#, r#"from-tool"}"#],
            )),
            sse(openai::text(&["It printed ", "hello-from-tool."])),
        ],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv
        .events(
            &format!("/v1/api/workstreams/{ws}/events?user_turn=1&tool_turn=1"),
            &admin,
            None,
        )
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "run it"})),
    )
    .await;
    let req = ev.until(30, |f| f.kind() == "approve_request").await;
    let cycle = req.data["cycle_id"].as_str().unwrap().to_string();
    assert_eq!(cycle.len(), 32);
    let item = &req.data["items"][0];
    assert_eq!(item["call_id"], "call_1");
    assert_eq!(item["func_name"], "bash");
    assert_eq!(item["needs_approval"], true);
    assert!(
        item["header"]
            .as_str()
            .unwrap()
            .contains("echo hello-from-tool"),
        "{item}"
    );
    // The detail view shows the pending card.
    let (_, d) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(d["state"], "attention");
    assert_eq!(d["pending_approval"], true);
    // Nothing ran yet.
    assert_eq!(srv.llm.requests().len(), 1);
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/approve"),
            Some(&admin),
            Some(json!({"approved": true, "cycle_id": cycle})),
        )
        .await;
    assert_eq!(
        (s, v["cycle_id"].as_str()),
        (200, Some(cycle.as_str())),
        "{v}"
    );
    let end = ev.turn_end().await;
    assert_eq!(end.data["content"], "It printed hello-from-tool.");
    let k = ev.kinds();
    let pos = |x: &str| {
        k.iter()
            .position(|y| y == x)
            .unwrap_or_else(|| panic!("{x} missing in {k:?}"))
    };
    assert!(pos("tool_pending") < pos("approve_request"));
    assert!(pos("approve_request") < pos("approval_resolved"));
    assert!(pos("approval_resolved") < pos("tool_output_chunk"));
    assert!(pos("tool_output_chunk") < pos("tool_result"));
    let chunks: String = ev
        .seen
        .iter()
        .filter(|f| f.kind() == "tool_output_chunk")
        .map(|f| f.data["chunk"].as_str().unwrap())
        .collect();
    assert!(chunks.contains("hello-from-tool"), "{chunks:?}");
    let results: Vec<_> = ev
        .seen
        .iter()
        .filter(|f| f.kind() == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "provisional + accepted (tool_turn=1)");
    assert_eq!(results[1].data["accepted"], true);
    assert!(
        results[0].data["output"]
            .as_str()
            .unwrap()
            .contains("hello-from-tool")
    );
    let resolved = &ev.seen[pos("approval_resolved")];
    assert_eq!(resolved.data["approved"], true);
    assert_eq!(resolved.data["call_ids"], json!(["call_1"]));
    // The model got the tool output.
    let second = srv.llm.requests()[1].body.to_string();
    assert!(second.contains("hello-from-tool"), "{second}");
    // Approving with nothing pending is a 200 with a null cycle.
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/approve"),
            Some(&admin),
            Some(json!({"approved": true})),
        )
        .await;
    assert_eq!((s, v["cycle_id"].clone()), (200, serde_json::Value::Null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denial_with_feedback_reaches_the_model() {
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "call_9",
                "bash",
                &[r#"{"command": "rm -r build"}"#],
            )),
            sse(openai::text(&["OK, I won't."])),
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
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "clean"})),
    )
    .await;
    ev.until(30, |f| f.kind() == "approve_request").await;
    // Oldest cycle by default, resolved by call id here.
    let (s, _) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/approve"),
            Some(&admin),
            Some(json!({"approved": false, "call_id": "call_9", "feedback": "keep the build dir"})),
        )
        .await;
    assert_eq!(s, 200);
    ev.turn_end().await;
    let second = srv.llm.requests()[1].body.to_string();
    assert!(second.contains("keep the build dir"), "{second}");
    assert!(!srv.dir.path().join("ws/build").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_during_a_turn_is_queued_and_joins_at_the_tool_seam() {
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "call_s",
                "bash",
                &[r#"{"command": "sleep 1.5; echo slept"}"#],
            )),
            sse(openai::text(&["done"])),
        ],
        "",
        &["--skip-permissions"],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv
        .events(
            &format!("/v1/api/workstreams/{ws}/events?user_turn=1"),
            &admin,
            None,
        )
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "first"})),
    )
    .await;
    ev.until(30, |f| {
        f.kind() == "state_change" && f.data["state"] == "running"
    })
    .await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&admin),
            Some(json!({"message": "also check the logs"})),
        )
        .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("queued")), "{v}");
    assert!(v["msg_id"].is_string());
    ev.until(10, |f| f.kind() == "message_queued").await;
    let end = ev.turn_end().await;
    assert_eq!(end.data["content"], "done");
    // One turn: the queued message went to the model right after the tool result.
    let reqs = srv.llm.requests();
    assert_eq!(reqs.len(), 2);
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    let last = msgs.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(
        last["content"].to_string().contains("also check the logs"),
        "{last}"
    );
    assert_eq!(msgs[msgs.len() - 2]["role"], "tool");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_a_running_tool_and_the_workstream_goes_on() {
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "call_c",
                "bash",
                &[r#"{"command": "sleep 30"}"#],
            )),
            sse(openai::text(&["after cancel"])),
        ],
        "",
        &["--skip-permissions"],
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
        Some(json!({"message": "wait"})),
    )
    .await;
    ev.until(30, |f| {
        f.kind() == "state_change" && f.data["state"] == "running"
    })
    .await;
    let t = std::time::Instant::now();
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/cancel"),
            Some(&admin),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["dropped"]["was_running"], true);
    let end = ev.turn_end().await;
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(end.data["state"], "idle");
    assert!(
        ev.kinds().contains(&"cancelled".to_string()),
        "{:?}",
        ev.kinds()
    );
    // The workstream accepts the next message.
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "next"})),
    )
    .await;
    assert_eq!(ev.turn_end().await.data["content"], "after cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_and_retry_edit_the_conversation() {
    let srv = Server::start(
        vec![
            sse(openai::text(&["one"])),
            sse(openai::text(&["two"])),
            sse(openai::text(&["two again"])),
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
    for m in ["first", "second"] {
        srv.call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&admin),
            Some(json!({"message": m})),
        )
        .await;
        ev.turn_end().await;
    }
    // Retry: the last answer is replaced.
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/retry"),
            Some(&admin),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(ev.turn_end().await.data["content"], "two again");
    assert!(ev.kinds().contains(&"clear_ui".to_string()));
    let third = srv.llm.requests()[2].body.to_string();
    assert!(
        third.contains("second") && !third.contains("\"two\""),
        "{third}"
    );
    // Rewind one user turn.
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/rewind"),
            Some(&admin),
            Some(json!({"turns": 1})),
        )
        .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("ok")), "{v}");
    let (_, h) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/history"),
            Some(&admin),
            None,
        )
        .await;
    let contents: Vec<_> = h["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(contents, vec![json!("first"), json!("one")]);
    // Rewinding past the start is a conflict with the conversation (409), a
    // malformed request is 400; neither changes anything.
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/rewind"),
            Some(&admin),
            Some(json!({"turns": 5})),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    assert!(
        v["error"].as_str().unwrap().starts_with("cannot rewind 5"),
        "{v}"
    );
    let (s, _) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/rewind"),
            Some(&admin),
            Some(json!({"turns": "x"})),
        )
        .await;
    assert_eq!(s, 400);
    let (_, h) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/history"),
            Some(&admin),
            None,
        )
        .await;
    let after: Vec<_> = h["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(after, vec![json!("first"), json!("one")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_replays_from_last_event_id_or_says_what_was_lost() {
    let srv = Server::start(vec![], "[server]\nevent_ring = 16\n", &[]).await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let path = format!("/v1/api/workstreams/{ws}/events?user_turn=1");
    let mut ev = srv.events(&path, &admin, None).await;
    srv.llm.push(sse(openai::text(&["a"])));
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "m1"})),
    )
    .await;
    ev.turn_end().await;
    let numbered: Vec<_> = ev.seen.iter().filter(|f| f.id.is_some()).cloned().collect();
    let mid = &numbered[numbered.len() / 2];
    let after: Vec<_> = numbered
        .iter()
        .skip(numbered.len() / 2 + 1)
        .map(|f| (f.id.clone(), f.data.clone()))
        .collect();
    // Resume: exactly the events after the cursor, same ids, no preamble.
    let mut re = srv.events(&path, &admin, mid.id.as_deref()).await;
    let first = re.next(10).await;
    assert_eq!(first.kind(), "replay_ok", "{:?}", first.data);
    for (id, data) in &after {
        let f = re.next(10).await;
        assert_eq!((&f.id, &f.data), (id, data));
    }
    // Push the ring past the old cursor: the gap is reported, then a fresh preamble.
    for i in 0..4 {
        srv.llm.push(sse(openai::text(&["x"])));
        srv.call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&admin),
            Some(json!({"message": format!("n{i}")})),
        )
        .await;
        ev.turn_end().await;
    }
    let mut old = srv.events(&path, &admin, Some("1")).await;
    let f = old.next(10).await;
    assert_eq!(f.kind(), "replay_truncated", "{:?}", f.data);
    assert!(f.data["lost_count"].as_u64().unwrap() > 0);
    assert_eq!(old.next(10).await.kind(), "clear_ui");
    // The history hand-off token resumes right after what /history returned.
    let (_, h) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/history"),
            Some(&admin),
            None,
        )
        .await;
    let token = h["handoff_token"].as_str().unwrap();
    let mut handed = srv
        .events(&format!("{path}&history_token={token}"), &admin, None)
        .await;
    assert_eq!(handed.next(10).await.kind(), "replay_ok");
    srv.llm.push(sse(openai::text(&["z"])));
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "last"})),
    )
    .await;
    let u = handed.next(10).await;
    assert_eq!(u.kind(), "user_turn");
    assert_eq!(u.data["content"], "last");
    // A token works once.
    let mut again = srv
        .events(&format!("{path}&history_token={token}"), &admin, None)
        .await;
    assert_eq!(again.next(10).await.kind(), "clear_ui");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_ends_the_stream_and_the_workstream_reopens_with_history() {
    let srv = Server::start(
        vec![
            sse(openai::text(&["remember me"])),
            sse(openai::text(&["back"])),
        ],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({"name": "keeper"})).await;
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "hello"})),
    )
    .await;
    ev.turn_end().await;
    let (s, _) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/close"),
            Some(&admin),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 200);
    ev.until(10, |f| f.kind() == "ws_closed").await;
    assert!(ev.ended(10).await, "the stream ends after ws_closed");
    let (s, _) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/close"),
            Some(&admin),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 404, "a second close is 404");
    let (_, saved) = srv
        .call("GET", "/v1/api/workstreams/saved", Some(&admin), None)
        .await;
    let row = saved["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["ws_id"] == ws.as_str())
        .cloned()
        .unwrap();
    assert_eq!(row["state"], "closed");
    assert_eq!(row["message_count"], 2);
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/open"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!((s, v["name"].as_str()), (200, Some("keeper")), "{v}");
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "again"})),
    )
    .await;
    ev.turn_end().await;
    let body = srv.llm.requests()[1].body.to_string();
    assert!(
        body.contains("remember me"),
        "resumed history goes to the model: {body}"
    );
}

/// A 1×1 PNG.
const PNG: &[u8] = &[
    137, 80, 78, 71, 13, 10, 26, 10, 0, 0, 0, 13, 73, 72, 68, 82, 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0,
    0, 0, 31, 21, 196, 137, 0, 0, 0, 13, 73, 68, 65, 84, 120, 218, 99, 100, 248, 207, 80, 15, 0, 3,
    134, 1, 128, 90, 52, 125, 107, 0, 0, 0, 0, 73, 69, 78, 68, 174, 66, 96, 130,
];
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

async fn upload(
    srv: &Server,
    tok: &str,
    ws: &str,
    name: &str,
    mime: &str,
    bytes: Vec<u8>,
) -> (u16, serde_json::Value) {
    let part = reqwest::multipart::Part::bytes(bytes)
        .file_name(name.to_string())
        .mime_str(mime)
        .unwrap();
    let form = reqwest::multipart::Form::new().part("file", part);
    let r = srv
        .http
        .post(srv.url(&format!("/v1/api/workstreams/{ws}/attachments")))
        .bearer_auth(tok)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let s = r.status().as_u16();
    let t = r.text().await.unwrap();
    (
        s,
        serde_json::from_str(&t).unwrap_or(serde_json::Value::String(t)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_sniffed_stored_and_sent_with_the_message() {
    let srv = Server::start(vec![sse(openai::text(&["I see a pixel."]))], "", &[]).await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    // Refusals: declared type disagrees, unsupported binary, too large, empty.
    let (s, v) = upload(&srv, &admin, &ws, "x.jpg", "image/jpeg", PNG.to_vec()).await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("MIME mismatch"),
        "{v}"
    );
    let zip = vec![
        b'P', b'K', 3, 4, 20, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let (s, v) = upload(&srv, &admin, &ws, "a.zip", "application/zip", zip).await;
    assert_eq!(s, 415, "{v}");
    let (s, _) = upload(
        &srv,
        &admin,
        &ws,
        "big.txt",
        "text/plain",
        vec![b'a'; (10 << 20) + 1],
    )
    .await;
    assert_eq!(s, 413);
    let (s, _) = upload(&srv, &admin, &ws, "empty.txt", "text/plain", Vec::new()).await;
    assert_eq!(s, 400);
    // A PNG and a text file.
    let (s, img) = upload(
        &srv,
        &admin,
        &ws,
        "../../pixel.png",
        "image/png",
        PNG.to_vec(),
    )
    .await;
    assert_eq!(s, 200, "{img}");
    assert_eq!(
        (
            img["kind"].as_str(),
            img["mime_type"].as_str(),
            img["filename"].as_str()
        ),
        (Some("image"), Some("image/png"), Some("pixel.png"))
    );
    let (s, txt) = upload(
        &srv,
        &admin,
        &ws,
        "notes.md",
        "application/octet-stream",
        b"# Notes\nremember the milk".to_vec(),
    )
    .await;
    assert_eq!(
        (s, txt["mime_type"].as_str()),
        (200, Some("text/markdown")),
        "{txt}"
    );
    let (_, list) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/attachments"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(list["attachments"].as_array().unwrap().len(), 2);
    let img_id = img["attachment_id"].as_str().unwrap().to_string();
    let txt_id = txt["attachment_id"].as_str().unwrap().to_string();
    let r = srv
        .http
        .get(srv.url(&format!(
            "/v1/api/workstreams/{ws}/attachments/{img_id}/content"
        )))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.unwrap().as_ref(), PNG);
    // Send with both (and one unknown id).
    let mut ev = srv
        .events(
            &format!("/v1/api/workstreams/{ws}/events?user_turn=1"),
            &admin,
            None,
        )
        .await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(&admin),
            Some(json!({"message": "what is this?", "attachment_ids": [img_id, txt_id, "nope"]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["attached_ids"], json!([img_id, txt_id]));
    assert_eq!(v["dropped_attachment_ids"], json!(["nope"]));
    let user = ev.until(10, |f| f.kind() == "user_turn").await;
    assert_eq!(user.data["attachments"].as_array().unwrap().len(), 2);
    assert_eq!(ev.turn_end().await.data["content"], "I see a pixel.");
    let body = srv.llm.requests()[0].body.to_string();
    assert!(
        body.contains(&format!("data:image/png;base64,{PNG_B64}")),
        "{body}"
    );
    assert!(body.contains("remember the milk"), "{body}");
    // Consumed: no longer pending, not deletable, not sendable again.
    let (_, list) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/attachments"),
            Some(&admin),
            None,
        )
        .await;
    assert!(list["attachments"].as_array().unwrap().is_empty());
    let (s, _) = srv
        .call(
            "DELETE",
            &format!("/v1/api/workstreams/{ws}/attachments/{img_id}"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 404);
    // The history shows the image reference without inlining its bytes.
    let (_, h) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{ws}/history"),
            Some(&admin),
            None,
        )
        .await;
    let first = &h["messages"][0];
    assert_eq!(first["attachments"][0]["attachment_id"], img_id.as_str());
    assert!(!h.to_string().contains(PNG_B64));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multipart_create_with_files_and_an_initial_message() {
    let srv = Server::start(vec![sse(openai::text(&["Got it."]))], "", &[]).await;
    let admin = srv.setup_admin().await;
    let meta = json!({"name": "with-file", "initial_message": "look at this"}).to_string();
    let form = reqwest::multipart::Form::new().text("meta", meta).part(
        "file",
        reqwest::multipart::Part::bytes(PNG.to_vec())
            .file_name("p.png")
            .mime_str("image/png")
            .unwrap(),
    );
    let r = srv
        .http
        .post(srv.url("/v1/api/workstreams/new"))
        .bearer_auth(&admin)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
    assert_eq!(v["name"], "with-file");
    assert_eq!(v["attachment_ids"].as_array().unwrap().len(), 1);
    let ws = v["ws_id"].as_str().unwrap();
    for _ in 0..100 {
        if !srv.llm.requests().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let body = srv.llm.requests()[0].body.to_string();
    assert!(
        body.contains(PNG_B64) && body.contains("look at this"),
        "{body}"
    );
    // A bad file in a multipart create leaves nothing behind.
    let form = reqwest::multipart::Form::new()
        .text("meta", json!({"name": "broken"}).to_string())
        .part(
            "file",
            reqwest::multipart::Part::bytes(vec![0u8, 1, 2, 3, 255]).file_name("x.bin"),
        );
    let r = srv
        .http
        .post(srv.url("/v1/api/workstreams/new"))
        .bearer_auth(&admin)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let (_, list) = srv
        .call("GET", "/v1/api/workstreams", Some(&admin), None)
        .await;
    assert_eq!(
        list["workstreams"].as_array().unwrap().len(),
        1,
        "{list} ({ws})"
    );
}

/// The event kinds from the send on (`state_change` with its state), runs of
/// `content` and `tool_output_chunk` collapsed: batching boundaries are
/// arbitrary, the order is the contract.
fn sequence(frames: &[support::Frame]) -> Vec<String> {
    let start = frames
        .iter()
        .position(|f| f.kind() == "user_turn")
        .expect("user_turn");
    let mut out: Vec<String> = Vec::new();
    for f in &frames[start..] {
        let k = match f.kind() {
            "state_change" => format!("state_change {}", f.data["state"].as_str().unwrap()),
            other => other.to_string(),
        };
        let batched = k == "content" || k == "tool_output_chunk";
        if batched && out.last() == Some(&k) {
            continue;
        }
        out.push(k);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_a_plain_reply_matches_the_original_order() {
    let srv = Server::start(
        vec![sse(openai::text(&["Hel", "lo", " there", "."]))],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv
        .events(
            &format!("/v1/api/workstreams/{ws}/events?user_turn=1"),
            &admin,
            None,
        )
        .await;
    // The preamble's state_change names the acting user like every other.
    let pre = ev.until(10, |f| f.kind() == "state_change").await;
    assert!(pre.data.get("acting_user_id").is_some(), "{:?}", pre.data);
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "hi"})),
    )
    .await;
    ev.turn_end().await;
    assert_eq!(
        sequence(&ev.seen),
        [
            "user_turn",
            "thinking_start",
            "state_change thinking",
            "thinking_stop",
            "content",
            "stream_end",
            "thinking_stop",
            "status",
            "state_change idle",
            "ws_state",
        ]
    );
    for f in ev.seen.iter().filter(|f| f.kind() == "state_change") {
        assert!(f.data.get("acting_user_id").is_some(), "{:?}", f.data);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequence_b_tool_call_with_approval_matches_the_original_order() {
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "call_b",
                "bash",
                &[r#"{"command": "echo hello-from-tool"}"#],
            )),
            sse(openai::text(&["It printed", " hello."])),
        ],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv
        .events(
            &format!("/v1/api/workstreams/{ws}/events?user_turn=1"),
            &admin,
            None,
        )
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "say hello"})),
    )
    .await;
    let card = ev.until(30, |f| f.kind() == "approve_request").await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/approve"),
            Some(&admin),
            Some(json!({"approved": true, "cycle_id": card.data["cycle_id"]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let end = ev.turn_end().await;
    assert_eq!(end.data["content"], "It printed hello.");
    assert_eq!(
        sequence(&ev.seen),
        [
            "user_turn",
            "thinking_start",
            "state_change thinking",
            "thinking_stop",
            "stream_end",
            "thinking_stop",
            "status",
            "state_change running",
            "tool_pending",
            "state_change attention",
            "approve_request",
            "approval_resolved",
            "state_change running",
            "tool_output_chunk",
            "tool_result",
            "replay_truncated",
            "thinking_start",
            "state_change thinking",
            "thinking_stop",
            "content",
            "stream_end",
            "thinking_stop",
            "status",
            "state_change idle",
            "ws_state",
        ]
    );
}
