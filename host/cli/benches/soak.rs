//! Soak (a bench binary): the release server under a steady rate of turns
//! for `TURNSTONE_SOAK_SECS` (default 600 s) while SSE subscribers
//! disconnect and reconnect every few seconds with `Last-Event-ID`.
//!
//! Checked: every subscriber's event ids are contiguous across its
//! reconnects, or the gap is announced by `replay_truncated`; every turn
//! ends idle with its full reply. Reported: turns done, reconnects, gaps,
//! and RSS sampled every 10 s with its least-squares slope (MB per minute)
//! after the first minute; beside it the same for the allocator's live and
//! free heap (`turnstone_heap_bytes` on `/metrics`), which tells retained
//! data from freed memory not yet returned.
//!
//! With `TURNSTONE_SOAK_ROTATE=N` each workstream is closed after N turns
//! and a new one takes its place (its subscribers follow), so conversations
//! stay short as in real use; without it the four conversations grow for
//! the whole run, and so does the history each keeps in memory.
//!
//! Run: `cargo bench -p turnstone --bench soak` (10 minutes), or e.g.
//! `TURNSTONE_SOAK_SECS=60 TURNSTONE_SOAK_ROTATE=100 cargo bench -p turnstone --bench soak`.

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{Server, sse};
use tokio::sync::watch;
use turnstone_scripted_llm::openai;

/// Workstreams taking turns side by side.
const WORKSTREAMS: usize = 4;
/// Subscribers per workstream.
const SUBSCRIBERS: usize = 2;
/// Pause between one workstream's turns.
const TURN_GAP: Duration = Duration::from_millis(500);

fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// The server's `turnstone_heap_bytes` gauges in MB: (in use, free).
async fn heap_mb(srv: &Server) -> (f64, f64) {
    let text = match srv.http.get(srv.url("/metrics")).send().await {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => String::new(),
    };
    let gauge = |state: &str| {
        let prefix = format!("turnstone_heap_bytes{{state=\"{state}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1_048_576.0
    };
    (gauge("in_use"), gauge("free"))
}

/// Least-squares slope of (minutes, MB).
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / n, sy / n);
    let num: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let den: f64 = points.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    if den == 0.0 { 0.0 } else { num / den }
}

#[derive(Default)]
struct Tally {
    turns: AtomicU64,
    reconnects: AtomicU64,
    events: AtomicU64,
    announced_gaps: AtomicU64,
    silent_gaps: AtomicU64,
    rotations: AtomicU64,
}

async fn subscriber(
    srv: Arc<Server>,
    tok: String,
    current: watch::Receiver<String>,
    seed: u64,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) {
    let mut ws = String::new();
    let mut last: Option<u64> = None;
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        // Follow the taker to its new workstream: ids start over there.
        let now = current.borrow().clone();
        if now != ws {
            ws = now;
            last = None;
        }
        let path = format!("/v1/api/workstreams/{ws}/events?user_turn=1&tool_turn=1");
        // 2–5 s per connection, varied per subscriber and round.
        let hold = Duration::from_millis(2000 + (seed * 7919 + round * 104_729) % 3000);
        round += 1;
        let cursor = last.map(|l| l.to_string());
        let mut ev = srv.events(&path, &tok, cursor.as_deref()).await;
        if last.is_some() {
            tally.reconnects.fetch_add(1, Ordering::Relaxed);
        }
        let until = Instant::now() + hold;
        let mut truncated = false;
        while Instant::now() < until {
            let left = until.saturating_duration_since(Instant::now());
            let Some(frame) = ev.next_within(left).await else {
                break;
            };
            if frame.kind() == "replay_truncated" {
                truncated = true;
            }
            let Some(id) = frame.id.as_deref().and_then(|i| i.parse::<u64>().ok()) else {
                continue;
            };
            tally.events.fetch_add(1, Ordering::Relaxed);
            if let Some(prev) = last
                && id != prev + 1
            {
                if truncated {
                    tally.announced_gaps.fetch_add(1, Ordering::Relaxed);
                } else {
                    tally.silent_gaps.fetch_add(1, Ordering::Relaxed);
                    eprintln!("silent gap on {ws}: {prev} → {id}");
                }
            }
            truncated = false;
            last = Some(id);
        }
    }
}

async fn taker(
    srv: Arc<Server>,
    tok: String,
    current: watch::Sender<String>,
    rotate: u64,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) {
    let mut ws = current.borrow().clone();
    let mut here = 0u64;
    let words: Vec<String> = (0..50).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    let expected: String = words.concat();
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &tok, None)
        .await;
    while !stop.load(Ordering::Relaxed) {
        srv.llm.push(sse(openai::text(&refs)));
        let (s, v) = srv
            .call(
                "POST",
                &format!("/v1/api/workstreams/{ws}/send"),
                Some(&tok),
                Some(json!({"message": "go"})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let end = ev.turn_end().await;
        assert_eq!(end.data["state"], "idle", "{}", end.data);
        assert_eq!(end.data["content"].as_str(), Some(expected.as_str()));
        tally.turns.fetch_add(1, Ordering::Relaxed);
        ev.reset();
        here += 1;
        if rotate > 0 && here >= rotate {
            let old = std::mem::replace(&mut ws, srv.create(&tok, json!({})).await);
            ev = srv
                .events(&format!("/v1/api/workstreams/{ws}/events"), &tok, None)
                .await;
            let _ = current.send(ws.clone());
            let (s, v) = srv
                .call(
                    "POST",
                    &format!("/v1/api/workstreams/{old}/close"),
                    Some(&tok),
                    None,
                )
                .await;
            assert_eq!(s, 200, "close {old}: {v}");
            tally.rotations.fetch_add(1, Ordering::Relaxed);
            here = 0;
        }
        tokio::time::sleep(TURN_GAP).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let secs: u64 = std::env::var("TURNSTONE_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let srv = Arc::new(
        Server::start(
            vec![],
            "[server]\nmax_connections_per_ip = 0",
            &["--workstream-idle-timeout", "0"],
        )
        .await,
    );
    let rotate: u64 = std::env::var("TURNSTONE_SOAK_ROTATE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let tok = srv.setup_admin().await;
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut tasks = Vec::new();
    for w in 0..WORKSTREAMS {
        let ws = srv.create(&tok, json!({})).await;
        let (current, follow) = watch::channel(ws);
        for s in 0..SUBSCRIBERS {
            tasks.push(tokio::spawn(subscriber(
                srv.clone(),
                tok.clone(),
                follow.clone(),
                (w * SUBSCRIBERS + s) as u64,
                stop.clone(),
                tally.clone(),
            )));
        }
        tasks.push(tokio::spawn(taker(
            srv.clone(),
            tok.clone(),
            current,
            rotate,
            stop.clone(),
            tally.clone(),
        )));
    }
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut heap = Vec::new();
    while started.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let minutes = started.elapsed().as_secs_f64() / 60.0;
        samples.push((minutes, rss_mb(srv.pid())));
        heap.push((minutes, heap_mb(&srv).await));
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("a soak task failed");
    }
    let steady: Vec<(f64, f64)> = samples.iter().copied().filter(|(m, _)| *m >= 1.0).collect();
    let steady_heap = |pick: fn(&(f64, f64)) -> f64| -> Vec<(f64, f64)> {
        heap.iter()
            .filter(|(m, _)| *m >= 1.0)
            .map(|(m, h)| (*m, pick(h)))
            .collect()
    };
    let (in_use, free) = (steady_heap(|h| h.0), steady_heap(|h| h.1));
    let rss: Vec<String> = samples.iter().map(|(_, r)| format!("{r:.1}")).collect();
    println!(
        "soak {secs} s: {} turns, {} workstreams closed and replaced (every {rotate} turns; 0 = never), {} SSE reconnects, {} events checked; gaps: {} announced by replay_truncated, {} silent",
        tally.turns.load(Ordering::Relaxed),
        tally.rotations.load(Ordering::Relaxed),
        tally.reconnects.load(Ordering::Relaxed),
        tally.events.load(Ordering::Relaxed),
        tally.announced_gaps.load(Ordering::Relaxed),
        tally.silent_gaps.load(Ordering::Relaxed),
    );
    println!("RSS every 10 s (MB): {}", rss.join(" "));
    if steady.len() >= 2 {
        println!(
            "RSS slope after the first minute: {:+.3} MB/min (first {:.1} MB, last {:.1} MB)",
            slope(&steady),
            steady[0].1,
            steady[steady.len() - 1].1
        );
    }
    let heap_line: Vec<String> = heap
        .iter()
        .map(|(_, (u, f))| format!("{u:.1}/{f:.1}"))
        .collect();
    println!("heap every 10 s, in use/free (MB): {}", heap_line.join(" "));
    if in_use.len() >= 2 {
        println!(
            "heap slope after the first minute: in use {:+.3} MB/min ({:.1} -> {:.1} MB), free {:+.3} MB/min ({:.1} -> {:.1} MB)",
            slope(&in_use),
            in_use[0].1,
            in_use[in_use.len() - 1].1,
            slope(&free),
            free[0].1,
            free[free.len() - 1].1,
        );
    }
    assert_eq!(
        tally.silent_gaps.load(Ordering::Relaxed),
        0,
        "every gap in event ids is announced"
    );
}
