//! A flood of wrong-password logins against `turnstone serve` (a bench
//! binary; release build): `/health` latency and a running turn's latency,
//! at rest and while 32 clients post bad logins as fast as they can — once
//! with the default failed-login throttle, once with it off (so every
//! attempt reaches Argon2id and only the bounded hashing pool protects the
//! server).
//!
//! Run: `cargo bench -p turnstone --bench login_flood`.

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::{Server, sse};
use turnstone_scripted_llm::openai;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// `/health` round trips (ms) over `n` requests, one at a time.
async fn health(srv: &Server, n: usize) -> Vec<f64> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = srv.http.get(srv.url("/health")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.bytes().await.unwrap();
        out.push(t.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    out
}

/// Send → per-stream `ws_state` (ms) for `n` turns.
async fn turns(srv: &Server, tok: &str, n: usize) -> Vec<f64> {
    let ws = srv.create(tok, json!({})).await;
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), tok, None)
        .await;
    for _ in 0..3 {
        ev.next(10).await;
    }
    let mut out = Vec::new();
    for _ in 0..n {
        srv.llm.push(sse(openai::text(&["ok"])));
        let t = Instant::now();
        srv.call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(tok),
            Some(json!({"message": "go"})),
        )
        .await;
        ev.turn_end().await;
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    out
}

/// 32 clients posting wrong passwords until `stop`; counts answers by status.
fn flood(
    srv: &Server,
    stop: Arc<AtomicBool>,
) -> (Vec<tokio::task::JoinHandle<()>>, Arc<[AtomicU64; 4]>) {
    let counts: Arc<[AtomicU64; 4]> = Arc::new(Default::default());
    let tasks = (0..32)
        .map(|i| {
            let http = reqwest::Client::new();
            let url = srv.url("/v1/api/auth/login");
            let (stop, counts) = (stop.clone(), counts.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let body =
                        json!({"username": format!("user{}", i % 4), "password": "wrong-password"});
                    let Ok(r) = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body.to_string())
                        .send()
                        .await
                    else {
                        continue;
                    };
                    let slot = match r.status().as_u16() {
                        401 => 0,
                        429 => 1,
                        503 => 2,
                        _ => 3,
                    };
                    counts[slot].fetch_add(1, Ordering::Relaxed);
                    let _ = r.bytes().await;
                }
            })
        })
        .collect();
    (tasks, counts)
}

fn report(label: &str, mut h: Vec<f64>, mut t: Vec<f64>) {
    println!(
        "{label:<40} /health p50 {:>7.2} ms  p99 {:>7.2} ms | turn p50 {:>7.2} ms  max {:>7.2} ms",
        pct(&mut h, 0.5),
        pct(&mut h, 0.99),
        pct(&mut t, 0.5),
        pct(&mut t, 1.0)
    );
}

async fn run(config: &str, label: &str) {
    let srv = Server::start(Vec::new(), config, &[]).await;
    let admin = srv.setup_admin().await;
    report(
        &format!("{label}: at rest"),
        health(&srv, 200).await,
        turns(&srv, &admin, 20).await,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (tasks, counts) = flood(&srv, stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let h = health(&srv, 200).await;
    let t = turns(&srv, &admin, 20).await;
    let secs = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = t.await;
    }
    report(&format!("{label}: 32 clients flooding"), h, t);
    let c: Vec<u64> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    println!(
        "{:<40} {:.0} logins/s answered: {} × 401, {} × 429, {} × 503, {} other",
        "",
        c.iter().sum::<u64>() as f64 / secs,
        c[0],
        c[1],
        c[2],
        c[3]
    );
}

#[tokio::main]
async fn main() {
    run("", "throttle on (default)").await;
    run("[auth.login_throttle]\nenabled = false\n", "throttle off").await;
}
