//! Soak (a bench binary): the release server under a steady rate of turns
//! for `TURNSTONE_SOAK_SECS` (default 600 s) while SSE subscribers
//! disconnect and reconnect every few seconds with `Last-Event-ID`.
//!
//! Checked: every subscriber's event ids are contiguous across its
//! reconnects, or the gap is announced by `replay_truncated`; every turn
//! ends idle with its full reply. Reported: turns done, reconnects, gaps,
//! and RSS sampled every 10 s with its least-squares slope (MB per minute)
//! after the first minute.
//!
//! Run: `cargo bench -p turnstone --bench soak` (10 minutes), or e.g.
//! `TURNSTONE_SOAK_SECS=60 cargo bench -p turnstone --bench soak`.

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{Server, sse};
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
}

async fn subscriber(
    srv: Arc<Server>,
    tok: String,
    ws: String,
    seed: u64,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) {
    let path = format!("/v1/api/workstreams/{ws}/events?user_turn=1&tool_turn=1");
    let mut last: Option<u64> = None;
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
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
    ws: String,
    stop: Arc<AtomicBool>,
    tally: Arc<Tally>,
) {
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
    let tok = srv.setup_admin().await;
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut tasks = Vec::new();
    for w in 0..WORKSTREAMS {
        let ws = srv.create(&tok, json!({})).await;
        for s in 0..SUBSCRIBERS {
            tasks.push(tokio::spawn(subscriber(
                srv.clone(),
                tok.clone(),
                ws.clone(),
                (w * SUBSCRIBERS + s) as u64,
                stop.clone(),
                tally.clone(),
            )));
        }
        tasks.push(tokio::spawn(taker(
            srv.clone(),
            tok.clone(),
            ws,
            stop.clone(),
            tally.clone(),
        )));
    }
    let started = Instant::now();
    let mut samples = Vec::new();
    while started.elapsed() < Duration::from_secs(secs) {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let minutes = started.elapsed().as_secs_f64() / 60.0;
        samples.push((minutes, rss_mb(srv.pid())));
    }
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("a soak task failed");
    }
    let steady: Vec<(f64, f64)> = samples.iter().copied().filter(|(m, _)| *m >= 1.0).collect();
    let rss: Vec<String> = samples.iter().map(|(_, r)| format!("{r:.1}")).collect();
    println!(
        "soak {secs} s: {} turns, {} SSE reconnects, {} events checked; gaps: {} announced by replay_truncated, {} silent",
        tally.turns.load(Ordering::Relaxed),
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
    assert_eq!(
        tally.silent_gaps.load(Ordering::Relaxed),
        0,
        "every gap in event ids is announced"
    );
}
