//! Delegated and scheduled work: what a sub-agent costs to start (the
//! parent's `task_agent` call to the child's first token, against a plain
//! session's first token) and to keep alive (resident memory per live
//! sub-agent), and what the watch scheduler costs with 1,000 active watches
//! (CPU and wall time for one poll of each, an idle cycle, and the database
//! statements each takes). Real components, real SQLite, the scripted LLM on
//! loopback. Run: `cargo xtask bench` or `cargo bench -p turnstone-engine
//! --bench work`.

use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use turnstone_engine::events::{EventSink, SessionEvent};
use turnstone_engine::session::{ChatSession, SessionConfig};
use turnstone_engine::watch::{NoticeDelivery, WatchScheduler};
use turnstone_protocol::{Event, WatchInfo};
use turnstone_scripted_llm::{Step, openai};
use turnstone_storage::prelude::*;
use turnstone_test_support::engine::{TestSession, session as fixture};
use turnstone_test_support::sse;

const SPAWNS: usize = 30;
const LIVE: usize = 20;
const WATCHES: usize = 1000;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Process CPU time (user + system), in 10 ms ticks.
fn cpu_time() -> Duration {
    turnstone_test_support::cpu_time("self")
}

/// Resident set size in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn task_call(prompt: &str) -> Step {
    let args = serde_json::json!({ "prompt": prompt }).to_string();
    sse(openai::tool_call("t1", "task_agent", &[&args]))
}

/// Events as they arrived.
type Timeline = Arc<Mutex<Vec<(Instant, Event)>>>;

/// A session on `f`'s binding and tools whose events are timestamped.
fn timed_session(f: &TestSession, id: &str) -> (ChatSession, Timeline) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let sink = EventSink::with_handler(move |e| {
        if let SessionEvent::Wire(ev) = e {
            log.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((Instant::now(), ev));
        }
    });
    let cfg = SessionConfig {
        skip_permissions: true,
        ..f.config(id)
    };
    (
        ChatSession::new(f.binding.clone(), f.tools.clone(), sink, cfg),
        seen,
    )
}

fn first(seen: &[(Instant, Event)], pred: impl Fn(&Event) -> bool) -> Option<Instant> {
    seen.iter().find(|(_, e)| pred(e)).map(|(t, _)| *t)
}

async fn sub_agents(f: &TestSession) {
    // Baseline: a plain session's send to its first token.
    let mut plain = Vec::new();
    for i in 0..SPAWNS + 5 {
        let (mut s, seen) = timed_session(f, &format!("plain{i}"));
        f.llm.push(sse(openai::text(&["Hello", " there."])));
        let t = Instant::now();
        s.send("hi").await.expect("turn");
        let seen = seen.lock().unwrap();
        let c = first(&seen, |e| matches!(e, Event::Content(_))).expect("content");
        if i >= 5 {
            plain.push(c - t);
        }
    }
    // The parent's task_agent call (tool_pending) to the child's first token.
    let mut spawn = Vec::new();
    for i in 0..SPAWNS + 5 {
        let (mut s, seen) = timed_session(f, &format!("parent{i}"));
        f.llm.push(task_call("Say hello."));
        f.llm
            .push(sse(openai::text(&["Hello", " from the child."])));
        f.llm.push(sse(openai::text(&["The child said hello."])));
        s.send("delegate").await.expect("turn");
        let seen = seen.lock().unwrap();
        let called = first(&seen, |e| matches!(e, Event::ToolPending(_))).expect("tool_pending");
        let child = first(
            &seen,
            |e| matches!(e, Event::AgentEvent(a) if matches!(*a.event, Event::Content(_))),
        )
        .expect("the child's content");
        if i >= 5 {
            spawn.push(child - called);
        }
    }
    plain.sort();
    spawn.sort();
    let overhead: Vec<Duration> = {
        let mut o: Vec<Duration> = spawn
            .iter()
            .zip(&plain)
            .map(|(s, p)| s.saturating_sub(*p))
            .collect();
        o.sort();
        o
    };
    println!("sub-agents ({SPAWNS} measured, openai component, scripted LLM on loopback):");
    println!(
        "  plain send → first token          p50 {:>9.3?}  p90 {:>9.3?}",
        percentile(&plain, 0.5),
        percentile(&plain, 0.9)
    );
    println!(
        "  task_agent call → child's token   p50 {:>9.3?}  p90 {:>9.3?}",
        percentile(&spawn, 0.5),
        percentile(&spawn, 0.9)
    );
    println!(
        "  spawn overhead                    p50 {:>9.3?}  p90 {:>9.3?}  (rank-matched difference)",
        percentile(&overhead, 0.5),
        percentile(&overhead, 0.9)
    );

    // Memory: LIVE parents each waiting on a child whose model call hangs.
    let mut parents = Vec::new();
    for i in 0..LIVE {
        let (s, _) = timed_session(f, &format!("live{i}"));
        parents.push(s);
    }
    // Warm each parent with a plain turn so the baseline holds them.
    for s in &mut parents {
        f.llm.push(sse(openai::text(&["ok"])));
        s.send("warm").await.expect("warm");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib();
    let mut running = Vec::new();
    for mut s in parents {
        let n = f.llm.requests().len();
        f.llm.push(task_call("Wait, then say done."));
        f.llm.push(Step::Delay(
            Duration::from_secs(3),
            Box::new(sse(openai::text(&["done"]))),
        ));
        running.push(tokio::spawn(async move {
            let r = s.send("delegate and wait").await;
            (s, r)
        }));
        // Start the next only once this child has asked its model (so each
        // request takes the step meant for it).
        while f.llm.requests().len() < n + 2 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let during = rss_kib();
    for _ in 0..LIVE {
        f.llm.push(sse(openai::text(&["The child is done."])));
    }
    for r in running {
        let (_, res) = r.await.expect("join");
        res.expect("delegated turn");
    }
    println!(
        "  memory per live sub-agent         {:.0} KiB  (RSS {} → {} KiB with {LIVE} children waiting on their model)",
        (during.saturating_sub(before)) as f64 / LIVE as f64,
        before,
        during
    );
}

/// Takes every result; counts nothing else.
struct Drop;

impl NoticeDelivery for Drop {
    fn deliver(
        &self,
        _ws_id: String,
        _content: String,
        _meta: serde_json::Value,
    ) -> BoxFuture<'static, Result<bool, String>> {
        Box::pin(async { Ok(true) })
    }

    fn changed(&self, _ws_id: &str, _watch: WatchInfo) {}
}

async fn watches(f: &TestSession) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = turnstone_storage::open(&DbConfig {
        backend: BackendKind::Sqlite,
        path: Some(dir.path().join("watches.db")),
        ..Default::default()
    })
    .await
    .expect("sqlite");
    // 200 workstreams with the maximum of 5 watches each, polled every
    // minute, never stopping (the condition never holds).
    for _ in 0..WATCHES / 5 {
        let w = db
            .create_workstream(&NewWorkstream::default())
            .await
            .expect("ws");
        db.publish_workstream(&w).await.expect("publish");
        for n in 0..5 {
            db.create_watch(
                &NewWatch {
                    ws_id: w.ws_id.clone(),
                    name: format!("w{n}"),
                    command: "echo ok".into(),
                    interval_secs: 60,
                    condition: Some("exit_code == 7".into()),
                    max_polls: 10_000,
                    plugin: "watch".into(),
                },
                5,
            )
            .await
            .expect("watch");
        }
    }
    let sched = WatchScheduler::new(
        db.clone(),
        "bench-node",
        f.tools.clone().into(),
        f.ws.clone(),
        Arc::new(Drop),
        Arc::new(tokio::sync::Notify::new()),
    );
    // One minute's work: every watch due once.
    let at = SystemTime::now() + Duration::from_secs(61);
    let cpu = cpu_time();
    let t = Instant::now();
    let mut polled = 0;
    let mut cycles = 0;
    loop {
        let n = sched.cycle_at(at).await;
        if n == 0 {
            break;
        }
        polled += n;
        cycles += 1;
    }
    let wall = t.elapsed();
    let cpu = cpu_time() - cpu;
    // Idle: nothing due.
    let mut idle = Vec::new();
    for _ in 0..50 {
        let t = Instant::now();
        sched.cycle_at(SystemTime::now()).await;
        idle.push(t.elapsed());
    }
    idle.sort();
    println!("watch scheduler ({WATCHES} active watches, poll_every 60s, SQLite, bash `echo ok`):");
    println!(
        "  one minute's polls  {polled} polls in {cycles} cycles: {wall:.2?} wall, {cpu:.2?} CPU ({:.2?} CPU per poll, incl. the bash child)",
        cpu / polled.max(1) as u32
    );
    println!(
        "  idle cycle          p50 {:>9.3?}  p90 {:>9.3?}",
        percentile(&idle, 0.5),
        percentile(&idle, 0.9)
    );
    println!(
        "  statements          per cycle: 1 undelivered-results read, 1 claim of up to 64 due (UPDATE … RETURNING), 1 next-due read; per poll: 1 fenced record + 1 re-read for watch_changed"
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(async {
        let f = fixture(Vec::new(), true).await;
        sub_agents(&f).await;
        watches(&f).await;
    });
}
