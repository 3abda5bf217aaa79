//! Reload benchmark (bench binary, release): in-process, real runtime and real
//! components, no HTTP in the way.
//! 1. reconciler pass time for a changed component: uncached (Cranelift
//!    compiles it), cached (from the compiled cache), and a grant-only change
//!    (re-bind, no compile);
//! 2. tool-call latency of 10 concurrent callers (snapshot → lookup →
//!    `execute` of the `marker` tool, like a session's tool batch) with no
//!    reloads, then while the component is swapped every 100 ms.
//!
//! Run: `cargo bench -p turnstone-runtime --bench reload`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use turnstone_runtime::reconcile::{Desired, Override, Reconciler, Reload, Shared, build};
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::state::NullSink;
use turnstone_runtime::{CallContext, Capabilities, LivePlugins, Runtime, RuntimeOptions};

const V1: &str = "MARKER-v1-c0ffee7d";

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn variant(tag: &str) -> Vec<u8> {
    let mut wasm = std::fs::read(target().join("test-components/marker/marker.wasm"))
        .expect("run `cargo xtask build-components` first");
    let at = wasm
        .windows(V1.len())
        .position(|w| w == V1.as_bytes())
        .expect("marker string");
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

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn ctx() -> CallContext {
    CallContext {
        call_id: "bench".into(),
        session_id: "bench".into(),
        workspace_dir: None,
        working_dir: "/".into(),
        supports_vision: false,
    }
}

/// Ten callers, each calling `marker` back to back for `for_how_long`.
async fn callers(live: Arc<LivePlugins>, for_how_long: Duration) -> Vec<f64> {
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let live = live.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let end = Instant::now() + for_how_long;
            while Instant::now() < end {
                let t = Instant::now();
                let reg = live.snapshot();
                let (plugin, _) = reg.tool("marker").expect("marker is loaded");
                let plugin = plugin.clone();
                drop(reg);
                let r = plugin
                    .execute("marker", "{}", &ctx(), Arc::new(NullSink), None)
                    .await
                    .expect("call");
                assert!(!r.is_error, "{}", r.output);
                lat.push(t.elapsed().as_secs_f64() * 1e3);
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(
        Runtime::new(RuntimeOptions {
            cache_dir: Some(cache.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap(),
    );
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("marker");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(
        target().join("test-components/marker/plugin.toml"),
        dir.join("plugin.toml"),
    )
    .unwrap();
    let wasm = dir.join("marker.wasm");
    std::fs::write(&wasm, variant("v1-c0ffee7d")).unwrap();
    let mut opts = LoadOptions::default();
    opts.config.dirs = vec![root.path().to_path_buf()];
    opts.config.install_dir = Some(root.path().to_path_buf());
    let shared = Arc::new(Shared::default());
    let (reg, _) = build(
        &runtime,
        &opts,
        &Desired::default(),
        None,
        &Reload::None,
        &shared,
    )
    .await;
    let live = LivePlugins::new(reg);
    let rec = Reconciler::spawn(
        runtime.clone(),
        opts,
        live.clone(),
        Desired::default(),
        shared,
    );

    // 1. Pass times.
    let mut uncached = Vec::new();
    for i in 0..8u32 {
        deploy(&wasm, &variant(&format!("u{i}-{:08x}", std::process::id())));
        let r = rec.rescan().await.unwrap();
        assert_eq!(r.changes.len(), 1, "{:?}", r.changes);
        uncached.push(r.elapsed.as_secs_f64() * 1e3);
    }
    let (a, b) = (variant("ca-00000000"), variant("cb-00000000"));
    for v in [&a, &b] {
        deploy(&wasm, v);
        rec.rescan().await.unwrap();
    }
    let mut cached = Vec::new();
    for i in 0..20u32 {
        deploy(&wasm, if i.is_multiple_of(2) { &a } else { &b });
        let r = rec.rescan().await.unwrap();
        assert_eq!(r.changes.len(), 1);
        cached.push(r.elapsed.as_secs_f64() * 1e3);
    }
    let mut rebind = Vec::new();
    for i in 0..20u32 {
        let mut d = Desired::default();
        d.plugins.insert(
            "marker".into(),
            Override {
                grant: Some(Capabilities {
                    env: vec![format!("V{i}")],
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        let r = rec.set_desired(d).await.unwrap();
        assert_eq!(r.changes.len(), 1);
        rebind.push(r.elapsed.as_secs_f64() * 1e3);
    }
    println!(
        "reconciler pass for one changed plugin: uncached p50 {:.1} ms (max {:.1}), cached p50 {:.2} ms (max {:.2}), grant-only re-bind p50 {:.3} ms",
        pct(&mut uncached, 0.5),
        pct(&mut uncached, 1.0),
        pct(&mut cached, 0.5),
        pct(&mut cached, 1.0),
        pct(&mut rebind, 0.5),
    );

    // 2. Call latency, quiet vs swapping every 100 ms.
    callers(live.clone(), Duration::from_millis(500)).await; // warm-up
    let mut quiet = callers(live.clone(), Duration::from_secs(3)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, rec, wasm) = (stop.clone(), rec.clone(), wasm.clone());
        tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                deploy(&wasm, if n.is_multiple_of(2) { &a } else { &b });
                rec.rescan().await.unwrap();
                n += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            n
        })
    };
    let mut busy = callers(live.clone(), Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.await.unwrap();
    let (q50, q99) = (pct(&mut quiet, 0.5), pct(&mut quiet, 0.99));
    let (b50, b99) = (pct(&mut busy, 0.5), pct(&mut busy, 0.99));
    println!(
        "marker call latency, 10 concurrent callers for 3 s: quiet n={} p50 {q50:.3} ms p99 {q99:.3} ms; with {swaps} swaps n={} p50 {b50:.3} ms p99 {b99:.3} ms (p50 ×{:.2}, p99 ×{:.2})",
        quiet.len(),
        busy.len(),
        b50 / q50,
        b99 / q99,
    );
}
