//! What the safety layer adds to a tool call: the heuristic judge's verdict
//! and the output guard's review (each a call into its real component), and
//! recording the capability audit (a read_file call with the filesystem
//! record on and off). Medians and p99 over many calls on this machine.
//! Run: `cargo bench -p turnstone-runtime --bench safety`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use turnstone_runtime::guard::GuardContext;
use turnstone_runtime::state::NullSink;
use turnstone_runtime::{CallContext, PluginSettings, PluginSource, Runtime, RuntimeOptions};

const N: usize = 2000;

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(label: &str, mut d: Vec<Duration>) -> Duration {
    d.sort();
    let p50 = pct(&d, 0.5);
    println!(
        "  {label:<44} p50 {:>9.1?}  p99 {:>9.1?}",
        p50,
        pct(&d, 0.99)
    );
    p50
}

async fn time<F, Fut>(n: usize, mut f: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..20 {
        f().await;
    }
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        out.push(t.elapsed());
    }
    out
}

fn runtime(file_audit: bool, cache: &Path) -> Runtime {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(cache.to_path_buf()),
        without_file_audit: !file_audit,
        ..Default::default()
    })
    .unwrap()
}

async fn builtin(rt: &Runtime, name: &str, ws: &Path) -> turnstone_runtime::LoadedPlugin {
    rt.load(
        PluginSource {
            dir: target().join("components").join(name),
            builtin: true,
        },
        PluginSettings {
            workspace: Some(ws.to_path_buf()),
            ..Default::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{name}: {e} (run `cargo xtask build-components`)"))
}

#[tokio::main]
async fn main() {
    let cache = target().join("bench-cache");
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap();
    let rt = runtime(true, &cache);

    println!("guards ({N} calls each, real components):");
    let judge = builtin(&rt, "judge-heuristic", &ws).await;
    let ctx = GuardContext {
        call_id: "c".into(),
        plugin: "bash".into(),
        tool_description: "Runs a bash command in the workspace.".into(),
        conversation: vec!["user: build it and run the tests".into()],
        workspace: Some(ws.display().to_string()),
        grants: vec![format!("files rw {}", ws.display()), "exec bash".into()],
    };
    let cmd = r#"{"command": "cargo build --release 2>&1 | tail -20 && cargo test -p core"}"#;
    let judged = report(
        "heuristic judge, bash call",
        time(N, || async {
            judge
                .review_call("bash", cmd, &ctx, None, None)
                .await
                .unwrap()
                .unwrap();
        })
        .await,
    );
    let write = r#"{"path": "src/lib.rs", "content": "pub fn f() {}"}"#;
    report(
        "heuristic judge, write_file call",
        time(N, || async {
            judge
                .review_call("write_file", write, &ctx, None, None)
                .await
                .unwrap()
                .unwrap();
        })
        .await,
    );
    let guard = builtin(&rt, "output-guard", &ws).await;
    let line = "test result: ok. 42 passed; 0 failed; 0 ignored; finished in 0.31s\n";
    let small: String = line.repeat(4096 / line.len());
    let large: String = line.repeat(65536 / line.len());
    let guarded = report(
        "output guard, 4 KiB of test output",
        time(N, || async {
            guard.review_output("bash", &small).await.unwrap().unwrap();
        })
        .await,
    );
    report(
        "output guard, 64 KiB",
        time(N / 4, || async {
            guard.review_output("bash", &large).await.unwrap().unwrap();
        })
        .await,
    );

    println!("capability audit (read_file of a 4 KiB workspace file, {N} calls):");
    std::fs::write(ws.join("notes.txt"), small.as_bytes()).unwrap();
    let call = CallContext {
        call_id: "c".into(),
        session_id: "s".into(),
        workspace_dir: Some(ws.display().to_string()),
        working_dir: ws.display().to_string(),
        supports_vision: false,
    };
    let args = r#"{"path": "notes.txt"}"#;
    // Both variants loaded up front and measured in alternating rounds, so
    // drift on this shared machine falls on both alike.
    let mut variants = Vec::new();
    for audited in [true, false] {
        let rt = runtime(audited, &cache);
        let files = builtin(&rt, "files", &ws).await;
        variants.push((rt, files, audited, Vec::new()));
    }
    for _ in 0..40 {
        for (_, files, audited, samples) in variants.iter_mut() {
            let audited = *audited;
            let d = time(N / 40, || async {
                let (r, t) = files
                    .execute_audited("read_file", args, &call, Arc::new(NullSink), None)
                    .await;
                let r = r.unwrap();
                assert!(!r.is_error, "{}", r.output);
                assert_eq!(t.files.is_empty(), !audited);
            })
            .await;
            samples.extend(d);
        }
    }
    let mut medians = Vec::new();
    for (_, _, audited, samples) in variants {
        let label = if audited {
            "files recorded (default)"
        } else {
            "files not recorded"
        };
        medians.push(report(label, samples));
    }
    let recorded = medians[0].as_secs_f64() - medians[1].as_secs_f64();
    println!(
        "  recording adds {:.1} µs per call at the median ({:.1} % of the call)",
        recorded * 1e6,
        recorded / medians[1].as_secs_f64() * 100.0
    );
    println!(
        "per tool call waiting for approval the heuristic judge adds {judged:.1?}; per result the output guard adds {guarded:.1?} (4 KiB)"
    );
}
