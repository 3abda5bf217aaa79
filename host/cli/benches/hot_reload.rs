//! Hot-reload benchmark (a bench binary; release build; real server, real
//! components, scripted LLM on loopback, SQLite):
//! 1. time from a component file change (write + rename, as a deploy does) to
//!    the new version serving, observed through the admin API — for a new
//!    component (uncached: Cranelift compiles it) and for one already in the
//!    compiled cache; the watcher's 200 ms debounce is part of both;
//! 2. tool-call latency of 10 concurrent workstreams (`tool_pending` →
//!    `tool_result` on each SSE stream) without reloads and while the
//!    component is swapped every 250 ms.
//!
//! Run: `cargo bench -p turnstone --bench hot_reload`.

#[path = "../tests/support/mod.rs"]
mod support;

use futures::future::join_all;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Server, sse, target};
use turnstone_scripted_llm::openai;

const V1: &str = "MARKER-v1-c0ffee7d";

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// The marker component with its marker tag replaced (same length).
fn variant(tag: &str) -> Vec<u8> {
    let mut wasm = std::fs::read(target().join("test-components/marker/marker.wasm")).unwrap();
    let at = wasm
        .windows(V1.len())
        .position(|w| w == V1.as_bytes())
        .unwrap();
    let marker = format!("MARKER-{tag}");
    assert_eq!(marker.len(), V1.len());
    wasm[at..at + V1.len()].copy_from_slice(marker.as_bytes());
    wasm
}

fn deploy(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("uploading");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn serving_sha(srv: &Server, tok: &str) -> String {
    let (_, v) = srv
        .call("GET", "/v1/api/admin/plugins/marker", Some(tok), None)
        .await;
    v["wasm_sha256"].as_str().unwrap_or_default().to_string()
}

/// Deploys `bytes` and waits until the admin API reports them serving (ms).
async fn change_to_serving(srv: &Server, tok: &str, wasm: &Path, bytes: &[u8]) -> f64 {
    let want = hex::encode(Sha256::digest(bytes));
    let t = Instant::now();
    deploy(wasm, bytes);
    while serving_sha(srv, tok).await != want {
        assert!(t.elapsed() < Duration::from_secs(60), "never served");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    t.elapsed().as_secs_f64() * 1000.0
}

fn plugin_dir() -> (tempfile::TempDir, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let m = root.path().join("marker");
    std::fs::create_dir(&m).unwrap();
    std::fs::copy(
        target().join("test-components/marker/plugin.toml"),
        m.join("plugin.toml"),
    )
    .unwrap();
    std::fs::write(m.join("marker.wasm"), variant("v1-c0ffee7d")).unwrap();
    let wasm = m.join("marker.wasm");
    (root, wasm)
}

/// Runs `workstreams` × `calls` marker calls; returns per-call latencies (ms).
async fn call_latencies(srv: &Server, tok: &str, workstreams: usize, calls: usize) -> Vec<f64> {
    for i in 0..workstreams * calls {
        srv.llm
            .push(sse(openai::tool_call(&format!("c{i}"), "marker", &["{}"])));
    }
    for _ in 0..workstreams {
        srv.llm.push(sse(openai::text(&["done"])));
    }
    let mut streams = Vec::new();
    for _ in 0..workstreams {
        let ws = srv.create(tok, json!({})).await;
        let mut ev = srv
            .events(&format!("/v1/api/workstreams/{ws}/events"), tok, None)
            .await;
        for _ in 0..3 {
            ev.next(10).await;
        }
        streams.push((ws, ev));
    }
    for (ws, _) in &streams {
        srv.call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(tok),
            Some(json!({"message": "go"})),
        )
        .await;
    }
    let per_ws = join_all(streams.into_iter().map(|(_, mut ev)| async move {
        let mut lat = Vec::new();
        loop {
            let f = ev.next(60).await;
            match f.kind() {
                "tool_pending" => {
                    let t = Instant::now();
                    let r = ev.until(60, |f| f.kind() == "tool_result").await;
                    assert_eq!(r.data["is_error"], false, "{}", r.data);
                    lat.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                "ws_state" => break,
                _ => {}
            }
        }
        lat
    }))
    .await;
    per_ws.into_iter().flatten().collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (root, wasm) = plugin_dir();
    let cfg = format!(
        "[plugins]\ndirs = [{:?}]\n",
        root.path().display().to_string()
    );
    let srv = Server::start(vec![], &cfg, &["--max-workstreams", "200"]).await;
    let tok = srv.setup_admin().await;

    // 1. Uncached: a component no cache has seen (random tag each time).
    let seed = std::process::id();
    let mut uncached = Vec::new();
    for i in 0..8 {
        let tag = format!(
            "u{}-{:08x}",
            i % 10,
            seed.wrapping_mul(2654435761).wrapping_add(i)
        );
        let tag = &tag[..11];
        uncached.push(change_to_serving(&srv, &tok, &wasm, &variant(tag)).await);
    }
    // Cached: two versions compiled once, then alternated.
    let (a, b) = (variant("ca-00000000"), variant("cb-00000000"));
    change_to_serving(&srv, &tok, &wasm, &a).await;
    change_to_serving(&srv, &tok, &wasm, &b).await;
    let mut cached = Vec::new();
    for i in 0..12u32 {
        let bytes = if i.is_multiple_of(2) { &a } else { &b };
        cached.push(change_to_serving(&srv, &tok, &wasm, bytes).await);
    }
    println!(
        "file change → new version serving: uncached p50 {:.0} ms (min {:.0}, max {:.0}); cached p50 {:.0} ms (min {:.0}, max {:.0}); both include the 200 ms debounce",
        pct(&mut uncached.clone(), 0.5),
        pct(&mut uncached.clone(), 0.0),
        pct(&mut uncached, 1.0),
        pct(&mut cached.clone(), 0.5),
        pct(&mut cached.clone(), 0.0),
        pct(&mut cached, 1.0),
    );

    // 2. Tool-call latency, quiet vs. swapping every 250 ms (cached versions).
    let _ = call_latencies(&srv, &tok, 10, 5).await; // warm-up
    let mut quiet = call_latencies(&srv, &tok, 10, 40).await;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let wasm = wasm.clone();
        let (a, b) = (a.clone(), b.clone());
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                deploy(&wasm, if n.is_multiple_of(2) { &a } else { &b });
                n += 1;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            n
        })
    };
    let t = Instant::now();
    let mut busy = call_latencies(&srv, &tok, 10, 40).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let swaps = swapper.await.unwrap();
    let (_, list) = srv
        .call("GET", "/v1/api/admin/plugins", Some(&tok), None)
        .await;
    println!(
        "tool-call latency, 10 workstreams × 40 calls: quiet p50 {:.2} ms p99 {:.2} ms; with {swaps} swaps in {:.1} s p50 {:.2} ms p99 {:.2} ms (p99 ratio {:.2}); generation now {}",
        pct(&mut quiet, 0.5),
        pct(&mut quiet, 0.99),
        t.elapsed().as_secs_f64(),
        pct(&mut busy, 0.5),
        pct(&mut busy, 0.99),
        pct(&mut busy, 0.99) / pct(&mut quiet, 0.99),
        list["generation"]
    );
}
