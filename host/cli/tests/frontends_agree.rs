//! One engine, one protocol: the same scripted conversation (a plain reply, a
//! tool call approved, one denied with feedback, one cancelled while it runs)
//! driven once through the server's HTTP API and once through the REPL in a
//! pseudo-terminal makes the engine emit the same `Event` sequence. Both
//! processes write what their sessions emit with `--event-log`.

mod support;

use expectrl::session::OsSession as Session;
use expectrl::{Eof, Expect};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::{Server, sse, target, warm_component_cache};
use turnstone_scripted_llm::{ScriptedLlm, Step, openai};

fn script() -> Vec<Step> {
    let write = |id: &str, name: &str| {
        sse(openai::tool_call(
            id,
            "write_file",
            &[&format!("{{\"path\": \"{name}\", \"content\": \"x\\n\"}}")],
        ))
    };
    vec![
        sse(openai::text(&["Hello ", "there."])),
        write("c1", "a.txt"),
        sse(openai::text(&["wrote a"])),
        write("c2", "b.txt"),
        sse(openai::text(&["ok, not b"])),
        sse(openai::tool_call(
            "c3",
            "bash",
            &["{\"command\": \"echo started; sleep 30\"}"],
        )),
    ]
}

const FEEDBACK: &str = "call it c.txt instead";

/// The log's events, with what legitimately differs between two runs (ids
/// minted at run time, the user a message is attributed to, the temporary
/// workspace's path) replaced.
fn normalized(log: &Path, workspace: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap();
    let workspace = workspace.to_str().unwrap();
    let mut events: Vec<Value> = Vec::new();
    for l in text.lines() {
        let mut v: Value = serde_json::from_str(&l.replace(workspace, "<workspace>")).unwrap();
        scrub(&mut v);
        // A provider sends the deltas of one network read as one event, so
        // how a reply's text is split into `content` events depends on
        // timing: compare the text of each run of them instead.
        if let Some(last) = events.last_mut()
            && last["type"] == "content"
            && v["type"] == "content"
        {
            let joined = format!(
                "{}{}",
                last["text"].as_str().unwrap(),
                v["text"].as_str().unwrap()
            );
            last["text"] = json!(joined);
            continue;
        }
        events.push(v);
    }
    events
}

fn scrub(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("ws_id");
            // Ids minted at run time, and how long a review took.
            for key in ["cycle_id", "msg_id", "verdict_id", "latency_ms"] {
                if let Some(x) = m.get_mut(key)
                    && !x.is_null()
                {
                    *x = json!("<run-specific>");
                }
            }
            // The server attributes actions to the signed-in user; the REPL
            // has none.
            for key in ["sender", "acting_user_id"] {
                if let Some(x) = m.get_mut(key) {
                    *x = json!("<user>");
                }
            }
            m.values_mut().for_each(scrub);
        }
        Value::Array(a) => a.iter_mut().for_each(scrub),
        _ => {}
    }
}

/// Returns the workspace's path (its directory is gone by then).
async fn through_the_server(log: &Path) -> std::path::PathBuf {
    let log_arg = log.to_str().unwrap();
    let srv = Server::start(script(), "", &["--event-log", log_arg]).await;
    let tok = srv.setup_admin().await;
    let ws = srv.create(&tok, json!({})).await;
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &tok, None)
        .await;
    let send = |text: &'static str| {
        let (srv, tok, ws) = (&srv, &tok, &ws);
        async move {
            let (s, v) = srv
                .call(
                    "POST",
                    &format!("/v1/api/workstreams/{ws}/send"),
                    Some(tok),
                    Some(json!({"message": text})),
                )
                .await;
            assert_eq!((s, v["status"].as_str()), (200, Some("ok")), "{v}");
        }
    };
    let approve = |body: Value| {
        let (srv, tok, ws) = (&srv, &tok, &ws);
        async move {
            let (s, v) = srv
                .call(
                    "POST",
                    &format!("/v1/api/workstreams/{ws}/approve"),
                    Some(tok),
                    Some(body),
                )
                .await;
            assert_eq!(s, 200, "{v}");
        }
    };
    send("hi").await;
    ev.turn_end().await;
    send("write a").await;
    ev.until(30, |f| f.kind() == "approve_request").await;
    approve(json!({"approved": true})).await;
    ev.turn_end().await;
    send("write b").await;
    ev.until(30, |f| f.kind() == "approve_request").await;
    approve(json!({"approved": false, "feedback": FEEDBACK})).await;
    ev.turn_end().await;
    send("run it").await;
    ev.until(30, |f| f.kind() == "approve_request").await;
    approve(json!({"approved": true})).await;
    ev.until(30, |f| {
        f.kind() == "tool_output_chunk" && f.data.to_string().contains("started")
    })
    .await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/cancel"),
            Some(&tok),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    ev.turn_end().await;
    // `ws_state` idle can reach the stream before the session emits its
    // `cancelled`; the server must not be stopped before that is logged.
    logged(log, "cancelled").await;
    assert!(srv.dir.path().join("ws/a.txt").exists());
    assert!(!srv.dir.path().join("ws/b.txt").exists());
    srv.dir.path().join("ws")
}

/// Waits until the event log holds an event of type `kind`.
async fn logged(log: &Path, kind: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .any(|e| e["type"] == kind)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no {kind} event was logged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the REPL's session has gone idle `turns` times: its prompt is
/// back before the turn's last events, and a line typed then is queued.
fn idle_after(log: &Path, turns: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let idle = std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["type"] == "state_change" && e["state"] == "idle")
            .count();
        if idle >= turns {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the REPL session went idle {idle} times, not {turns}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Returns the workspace's path (its directory is gone by then).
fn through_the_repl(log: &Path) -> std::path::PathBuf {
    warm_component_cache();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let llm = rt.block_on(ScriptedLlm::start(script())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("ws")).unwrap();
    std::fs::write(dir.path().join("config.toml"), "").unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_turnstone"));
    c.arg("--builtin-dir")
        .arg(target().join("components"))
        .arg("--cache-dir")
        .arg(target().join("test-cache/cli"))
        .arg("--workspace")
        .arg(dir.path().join("ws"))
        .arg("--db")
        .arg(dir.path().join("t.db"))
        .arg("--config")
        .arg(dir.path().join("config.toml"))
        .arg("--event-log")
        .arg(log)
        // The same model flags as the server harness.
        .args(["--base-url", &llm.base_url(), "--model", "scripted-model"])
        .args(["--api-key", "sk-test"])
        .env("NO_COLOR", "1")
        .env("TERM", "xterm-256color")
        .env("HOME", dir.path())
        .env_remove("TURNSTONE_BUILTIN_PLUGINS")
        .env_remove("TURNSTONE_DB_URL")
        .env_remove("TURNSTONE_DB_BACKEND");
    let mut p = Session::spawn(c).unwrap();
    p.set_expect_timeout(Some(Duration::from_secs(60)));
    let line = |p: &mut Session, text: &str| p.send(format!("{text}\r")).unwrap();
    p.expect("main › ").unwrap();
    line(&mut p, "hi");
    p.expect("Hello there.").unwrap();
    p.expect("main › ").unwrap();
    idle_after(log, 1);
    line(&mut p, "write a");
    p.expect("approve [y/n/a] › ").unwrap();
    line(&mut p, "y");
    p.expect("wrote a").unwrap();
    p.expect("main › ").unwrap();
    idle_after(log, 2);
    line(&mut p, "write b");
    p.expect("approve [y/n/a] › ").unwrap();
    line(&mut p, &format!("n {FEEDBACK}"));
    p.expect("ok, not b").unwrap();
    p.expect("main › ").unwrap();
    idle_after(log, 3);
    line(&mut p, "run it");
    p.expect("approve [y/n/a] › ").unwrap();
    line(&mut p, "y");
    p.expect("started").unwrap();
    p.send("\x03").unwrap();
    p.expect("Cancelled.").unwrap();
    p.expect("main › ").unwrap();
    line(&mut p, "/exit");
    p.expect(Eof).unwrap();
    assert!(dir.path().join("ws/a.txt").exists());
    assert!(!dir.path().join("ws/b.txt").exists());
    dir.path().join("ws")
}

#[test]
fn the_server_and_the_repl_see_the_same_events() {
    let dir = tempfile::tempdir().unwrap();
    let (server_log, repl_log) = (
        dir.path().join("server.jsonl"),
        dir.path().join("repl.jsonl"),
    );
    let server_ws = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(through_the_server(&server_log));
    let repl_ws = through_the_repl(&repl_log);
    // The log thread flushes each line as it is written; the processes have
    // exited (or been killed) by now.
    let (server, repl) = (
        normalized(&server_log, &server_ws),
        normalized(&repl_log, &repl_ws),
    );
    let kinds = |v: &[Value]| -> Vec<String> {
        v.iter()
            .map(|e| e["type"].as_str().unwrap_or("?").to_string())
            .collect()
    };
    assert_eq!(kinds(&server), kinds(&repl), "event kinds differ");
    for (i, (s, r)) in server.iter().zip(&repl).enumerate() {
        assert_eq!(s, r, "event {i} differs");
    }
    // The conversation really had each part.
    let all = kinds(&server);
    for kind in [
        "content",
        "approve_request",
        "approval_resolved",
        "tool_output_chunk",
        "tool_result",
        "cancelled",
    ] {
        assert!(all.iter().any(|k| k == kind), "no {kind} in {all:?}");
    }
    assert!(
        server
            .iter()
            .any(|e| e["type"] == "approval_resolved" && e["feedback"] == FEEDBACK),
        "the denial's feedback is an event"
    );
}
