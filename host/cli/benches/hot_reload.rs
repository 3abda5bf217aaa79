//! Hot-reload benchmark, end to end (a bench binary; release build; the real
//! server, real components, SQLite): time from a component file change
//! (write + rename, as a deploy does) to the new version serving, observed
//! through the admin API (polled every 2 ms) — for a new component
//! (uncached: Cranelift compiles it) and for one already in the compiled
//! cache. The watcher's debounce window (≤ 200 ms) is part of both. The
//! effect of reloads on call latency is measured in-process by
//! `cargo bench -p turnstone-runtime --bench reload`.
//!
//! Run: `cargo bench -p turnstone --bench hot_reload`.

#[path = "../tests/support/mod.rs"]
mod support;

use sha2::{Digest, Sha256};
use std::path::Path;
use std::time::{Duration, Instant};
use support::{Server, target};

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
        "file change → new version serving: uncached p50 {:.0} ms (min {:.0}, max {:.0}); cached p50 {:.0} ms (min {:.0}, max {:.0}); both include the watcher debounce window (≤ 200 ms)",
        pct(&mut uncached.clone(), 0.5),
        pct(&mut uncached.clone(), 0.0),
        pct(&mut uncached, 1.0),
        pct(&mut cached.clone(), 0.5),
        pct(&mut cached.clone(), 0.0),
        pct(&mut cached, 1.0),
    );
}
