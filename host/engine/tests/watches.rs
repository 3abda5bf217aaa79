//! Watches end to end: the real `watch` component creates them through the
//! `watches` interface, the scheduler polls them with the component's own
//! grants, and a result wakes the idle workstream as a notice turn; durable
//! across a restart, never run by two nodes at once.

use futures::future::BoxFuture;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use turnstone_engine::runner::{SessionHandle, spawn};
use turnstone_engine::session::{AgentContext, ChatSession, SessionConfig};
use turnstone_engine::watch::{NoticeDelivery, WatchScheduler};
use turnstone_protocol::{Event, Op, WatchInfo};
use turnstone_scripted_llm::{Step, openai};
use turnstone_storage::prelude::*;
use turnstone_test_support::engine::{TestSession, session as fixture};
use turnstone_test_support::sse;

const T: Duration = Duration::from_secs(20);

/// Hands results to a session handle, counting them.
#[derive(Default)]
struct ToSession {
    handle: Mutex<Option<SessionHandle>>,
    delivered: AtomicUsize,
    changes: Mutex<Vec<WatchInfo>>,
}

impl NoticeDelivery for ToSession {
    fn deliver(
        &self,
        _ws_id: String,
        content: String,
        meta: serde_json::Value,
    ) -> BoxFuture<'static, Result<bool, String>> {
        self.delivered.fetch_add(1, Ordering::SeqCst);
        let handle = self.handle.lock().unwrap().clone();
        Box::pin(async move {
            let Some(h) = handle else { return Ok(true) };
            h.submit(Op::Notice {
                content,
                source: "watch".into(),
                meta,
            })
            .await
            .map(|_| true)
            .map_err(|e| e.to_string())
        })
    }

    fn changed(&self, _ws_id: &str, watch: WatchInfo) {
        self.changes.lock().unwrap().push(watch);
    }
}

async fn database(dir: &std::path::Path) -> Storage {
    turnstone_storage::open(&DbConfig {
        backend: BackendKind::Sqlite,
        path: Some(dir.join("t.db")),
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn workstream(db: &Storage) -> String {
    let r = db
        .create_workstream(&NewWorkstream {
            name: "w".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    db.publish_workstream(&r).await.unwrap();
    r.ws_id
}

fn watch_session(
    f: &TestSession,
    db: &Storage,
    ws: &str,
    wake: Arc<tokio::sync::Notify>,
) -> ChatSession {
    let cfg = SessionConfig {
        skip_permissions: true,
        ..f.config(ws)
    };
    f.another(f.binding.clone(), cfg)
        .with_storage(db.clone(), ws)
        .with_agent(AgentContext {
            watch_wake: Some(wake),
            ..Default::default()
        })
}

fn create(id: &str, args: serde_json::Value) -> Step {
    sse(openai::tool_call(id, "watch", &[&args.to_string()]))
}

async fn turns_ended(f: &TestSession, n: usize) {
    let deadline = tokio::time::Instant::now() + T;
    while f.recorder.outcomes().len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            f.recorder.kinds()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn send(text: &str) -> Op {
    Op::Send {
        text: text.into(),
        parts: Vec::new(),
        client_send_id: None,
        sender: None,
        attachments: Vec::new(),
    }
}

#[tokio::test]
async fn a_watch_fires_and_wakes_the_idle_workstream_once() {
    let f = fixture(
        vec![
            create(
                "w1",
                json!({"action": "create", "name": "flag", "command": "cat flag.txt",
                       "poll_every": "30s", "stop_on": "'done' in output"}),
            ),
            sse(openai::text(&["Watching the flag."])),
            sse(openai::text(&["The flag says done: moving on."])),
        ],
        true,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let ws = workstream(&db).await;
    let wake = Arc::new(tokio::sync::Notify::new());
    std::fs::write(f.ws.join("flag.txt"), "working\n").unwrap();
    let handle = spawn(watch_session(&f, &db, &ws, wake.clone()));
    handle
        .submit(send("tell me when the flag is done"))
        .await
        .unwrap();
    turns_ended(&f, 1).await;
    assert_eq!(f.llm.requests().len(), 2);
    let stored = db.list_watches(&ws, true).await.unwrap();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(
        stored[0].plugin, "watch",
        "its command runs with the watch plugin's grants"
    );

    let delivery = Arc::new(ToSession::default());
    *delivery.handle.lock().unwrap() = Some(handle.clone());
    let scheduler = WatchScheduler::new(
        db.clone(),
        "node-1",
        f.tools.clone().into(),
        f.ws.clone(),
        delivery.clone(),
        wake,
    );
    // The first poll: not yet.
    assert_eq!(scheduler.cycle().await, 1);
    assert_eq!(delivery.delivered.load(Ordering::SeqCst), 0);
    let w = db.get_watch(&stored[0].watch_id).await.unwrap().unwrap();
    assert_eq!((w.poll_count, w.state.as_str()), (1, "active"));
    assert_eq!(w.last_output.as_deref(), Some("working\n"));
    // Not due again before its interval.
    assert_eq!(scheduler.cycle().await, 0);
    std::fs::write(f.ws.join("flag.txt"), "done\n").unwrap();
    let after_interval = SystemTime::now() + Duration::from_secs(31);
    assert_eq!(scheduler.cycle_at(after_interval).await, 1);
    assert_eq!(delivery.delivered.load(Ordering::SeqCst), 1);
    // The idle workstream woke: a turn on the notice.
    turns_ended(&f, 2).await;
    let reqs = f.llm.requests();
    assert_eq!(reqs.len(), 3);
    let last = reqs[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let text = last["content"].as_str().unwrap();
    assert_eq!(last["role"], "user");
    assert!(
        text.starts_with("Watch \"flag\" fired after 2 poll(s): stop_on `'done' in output` held."),
        "{text}"
    );
    assert!(text.contains("done"), "{text}");
    let events = f.recorder.events();
    assert!(
        events.iter().any(
            |e| matches!(e, Event::SystemTurn(t) if t.source == "watch" && t.meta["name"] == "flag")
        ),
        "{:?}",
        f.recorder.kinds()
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::WatchChanged(c) if c.watch.state == "active"))
    );
    let states: Vec<String> = delivery
        .changes
        .lock()
        .unwrap()
        .iter()
        .map(|w| w.state.clone())
        .collect();
    assert_eq!(states, ["active", "fired"]);
    // Kept with the history as a notice turn.
    let turns = db
        .load_turns(&ws, turnstone_storage::types::LoadMode::Resume)
        .await
        .unwrap();
    assert!(
        turns
            .iter()
            .any(|t| t.turn.source.as_deref() == Some("watch"))
    );
    // Once: later cycles deliver nothing more.
    scheduler
        .cycle_at(after_interval + Duration::from_secs(60))
        .await;
    assert_eq!(delivery.delivered.load(Ordering::SeqCst), 1);
    assert!(db.list_watches(&ws, true).await.unwrap().is_empty());
    handle.close(Duration::from_secs(1)).await;
}

#[tokio::test]
async fn bad_watches_are_refused_before_anything_runs_and_can_be_cancelled() {
    let f = fixture(
        vec![
            create(
                "b1",
                json!({"action": "create", "name": "x", "command": "true", "stop_on": "exit_code =="}),
            ),
            create(
                "b2",
                json!({"action": "create", "name": "x", "command": "true", "poll_every": "5 mins please"}),
            ),
            create(
                "b3",
                json!({"action": "create", "name": "x", "command": "true", "poll_every": "2s"}),
            ),
            create(
                "b4",
                json!({"action": "create", "name": "ok", "command": "true", "poll_every": "1m"}),
            ),
            create("b5", json!({"action": "list"})),
            create("b6", json!({"action": "cancel", "name": "ok"})),
            create("b7", json!({"action": "cancel", "name": "ok"})),
            sse(openai::text(&["Done."])),
        ],
        true,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let ws = workstream(&db).await;
    let mut s = watch_session(&f, &db, &ws, Arc::new(tokio::sync::Notify::new()));
    // One tool call per model request.
    s.send("set up watches").await.unwrap();
    let out = |n: usize, id: &str| -> String {
        f.llm.requests()[n].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["tool_call_id"] == id)
            .map(|m| m["content"].as_str().unwrap().to_string())
            .unwrap()
    };
    let cond = out(1, "b1");
    assert!(
        cond.contains("stop_on: syntax error at column 13"),
        "{cond}"
    );
    assert!(
        out(2, "b2").contains("not a duration like 30s"),
        "{}",
        out(2, "b2")
    );
    assert!(
        out(3, "b3").contains("between 10s and 24h"),
        "{}",
        out(3, "b3")
    );
    assert!(
        out(4, "b4").starts_with("Watch created: ok (id "),
        "{}",
        out(4, "b4")
    );
    assert!(out(5, "b5").contains("- ok (id "), "{}", out(5, "b5"));
    assert!(
        out(6, "b6").contains("Cancelled watch ok after 0 poll(s)"),
        "{}",
        out(6, "b6")
    );
    assert!(
        out(7, "b7").contains("no active watch named \"ok\""),
        "{}",
        out(7, "b7")
    );
    let all = db.list_watches(&ws, false).await.unwrap();
    assert_eq!(all.len(), 1, "only the good one was stored");
    assert_eq!(all[0].state, "cancelled");
}

/// Counts deliveries without a session.
#[derive(Default)]
struct Counting(AtomicUsize);

impl NoticeDelivery for Counting {
    fn deliver(
        &self,
        _ws_id: String,
        _content: String,
        _meta: serde_json::Value,
    ) -> BoxFuture<'static, Result<bool, String>> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(true) })
    }
    fn changed(&self, _ws_id: &str, _watch: WatchInfo) {}
}

fn watch(ws: &str, name: &str, command: &str, condition: &str, max_polls: i64) -> NewWatch {
    NewWatch {
        ws_id: ws.into(),
        name: name.into(),
        command: command.into(),
        interval_secs: 30,
        condition: Some(condition.into()),
        max_polls,
        plugin: "watch".into(),
    }
}

#[tokio::test]
async fn a_watch_left_by_a_dead_node_resumes_after_its_lease_and_fires_once() {
    let f = fixture(Vec::new(), true).await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let ws = workstream(&db).await;
    let w = db
        .create_watch(&watch(&ws, "w", "echo ready", "'ready' in output", 5), 5)
        .await
        .unwrap();
    // A node claimed it and died mid-poll.
    let now = turnstone_storage::util::now();
    let lease_end =
        turnstone_storage::util::format_ts(SystemTime::now() + Duration::from_secs(180));
    assert_eq!(
        db.claim_due_watches("dead", &now, &lease_end, 10, None)
            .await
            .unwrap()
            .len(),
        1
    );
    let counted = Arc::new(Counting::default());
    let restarted = WatchScheduler::new(
        db.clone(),
        "restarted",
        f.tools.clone().into(),
        f.ws.clone(),
        counted.clone(),
        Arc::new(tokio::sync::Notify::new()),
    );
    assert_eq!(
        restarted.cycle().await,
        0,
        "still held by the dead node's lease"
    );
    let after_lease = SystemTime::now() + Duration::from_secs(181);
    assert_eq!(restarted.cycle_at(after_lease).await, 1);
    assert_eq!(counted.0.load(Ordering::SeqCst), 1);
    let got = db.get_watch(&w.watch_id).await.unwrap().unwrap();
    assert_eq!((got.state.as_str(), got.poll_count), ("fired", 1));
    assert!(got.delivered.is_some());
    restarted
        .cycle_at(after_lease + Duration::from_secs(60))
        .await;
    assert_eq!(counted.0.load(Ordering::SeqCst), 1, "fired once");
    // A result recorded but never delivered (a crash in between) goes out
    // at the next start.
    let w2 = db
        .create_watch(&watch(&ws, "w2", "echo ready", "'ready' in output", 5), 5)
        .await
        .unwrap();
    let t = turnstone_storage::util::now();
    db.claim_due_watches("n", &t, &lease_end, 10, None)
        .await
        .unwrap();
    let record = PollRecord {
        output: "ready".into(),
        exit_code: 0,
        error: None,
        state: "fired".into(),
        next_poll: None,
        result: Some("Watch \"w2\" fired.".into()),
    };
    assert!(db.record_poll(&w2.watch_id, "n", &record).await.unwrap());
    restarted.cycle().await;
    assert_eq!(counted.0.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_watch_whose_plugin_is_not_granted_exec_records_why() {
    let f = fixture(Vec::new(), true).await;
    let dir = tempfile::tempdir().unwrap();
    let db = database(dir.path()).await;
    let ws = workstream(&db).await;
    // Runs with the grants of `search`, which may not spawn programs.
    let w = db
        .create_watch(
            &NewWatch {
                plugin: "search".into(),
                ..watch(&ws, "w", "echo hi", "exit_code == 0", 1)
            },
            5,
        )
        .await
        .unwrap();
    let counted = Arc::new(Counting::default());
    let s = WatchScheduler::new(
        db.clone(),
        "n",
        f.tools.clone().into(),
        f.ws.clone(),
        counted.clone(),
        Arc::new(tokio::sync::Notify::new()),
    );
    s.cycle().await;
    let got = db.get_watch(&w.watch_id).await.unwrap().unwrap();
    assert_eq!(
        got.state, "expired",
        "one poll allowed, and it could not run"
    );
    let err = got.last_error.unwrap();
    assert!(
        err.contains("exec denied") && err.contains("[plugins.grants.search]"),
        "{err}"
    );
    assert!(got.result.unwrap().contains("Last error: exec denied"));
}

#[tokio::test]
async fn two_nodes_on_one_postgresql_never_poll_the_same_watch() {
    let Some((url, _guard)) = turnstone_test_support::pg::scratch_database("watch_nodes") else {
        eprintln!("skipped: TURNSTONE_TEST_PG_URL is not set");
        return;
    };
    let f = fixture(Vec::new(), true).await;
    let db = turnstone_storage::open(&DbConfig {
        backend: BackendKind::Postgresql,
        url: Some(url),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut ids = Vec::new();
    // The watch plugin has the workspace read-only; its processes write to
    // their private temp directory (their TMPDIR), which the host can read.
    let tag = format!("runs-{}.txt", std::process::id());
    let runs_file = turnstone_runtime::sandboxing::private_tmp_dir("watch")
        .expect("private temp")
        .join(&tag);
    for i in 0..6 {
        let ws = workstream(&db).await;
        for j in 0..4 {
            let cmd = format!("echo {i}-{j} >> \"$TMPDIR/{tag}\"");
            ids.push(
                db.create_watch(&watch(&ws, &format!("w{j}"), &cmd, "False", 1), 5)
                    .await
                    .unwrap()
                    .watch_id,
            );
        }
    }
    let node = |name: &str| {
        WatchScheduler::new(
            db.clone(),
            name,
            f.tools.clone().into(),
            f.ws.clone(),
            Arc::new(Counting::default()),
            Arc::new(tokio::sync::Notify::new()),
        )
    };
    let (a, b) = (node("node-a"), node("node-b"));
    let (pa, pb) = tokio::join!(a.cycle(), b.cycle());
    assert_eq!(
        pa + pb,
        24,
        "every watch polled by one of them ({pa} + {pb})"
    );
    let runs = std::fs::read_to_string(&runs_file).unwrap();
    let _ = std::fs::remove_file(&runs_file);
    let mut lines: Vec<&str> = runs.lines().collect();
    lines.sort();
    let before = lines.len();
    lines.dedup();
    assert_eq!(
        (before, lines.len()),
        (24, 24),
        "each command ran once: {runs}"
    );
    for id in ids {
        assert_eq!(db.get_watch(&id).await.unwrap().unwrap().state, "expired");
    }
}
