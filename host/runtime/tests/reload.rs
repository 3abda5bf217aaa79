//! The reconciler in-process with real components: what each kind of change
//! does to the live registry, and that calls in flight finish on the version
//! they started with.

mod common;

use common::{runtime, staged};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use turnstone_runtime::reconcile::{
    ChangeKind, Desired, Override, Reconciler, Reload, Shared, build,
};
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::state::NullSink;
use turnstone_runtime::{CallContext, Capabilities, LivePlugins, PluginStatus};

const V1: &str = "MARKER-v1-c0ffee7d";

fn variant(marker: &str) -> Vec<u8> {
    let mut wasm = std::fs::read(staged("test-components", "marker").join("marker.wasm")).unwrap();
    let at = wasm
        .windows(V1.len())
        .position(|w| w == V1.as_bytes())
        .unwrap();
    wasm[at..at + V1.len()].copy_from_slice(marker.as_bytes());
    wasm
}

fn deploy(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn ctx() -> CallContext {
    CallContext {
        call_id: "t".into(),
        session_id: "t".into(),
        workspace_dir: None,
        working_dir: "/".into(),
        supports_vision: false,
    }
}

async fn call(live: &LivePlugins, args: &str) -> String {
    let reg = live.snapshot();
    let (p, _) = reg.tool("marker").expect("marker loaded");
    let p = p.clone();
    drop(reg);
    let r = p
        .execute("marker", args, &ctx(), Arc::new(NullSink), None)
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    r.output
}

fn kinds(r: &turnstone_runtime::reconcile::Report) -> Vec<ChangeKind> {
    r.changes.iter().map(|c| c.kind.clone()).collect()
}

struct Setup {
    _root: tempfile::TempDir,
    wasm: std::path::PathBuf,
    live: Arc<LivePlugins>,
    rec: Reconciler,
}

async fn setup() -> Setup {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("marker");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(
        staged("test-components", "marker").join("plugin.toml"),
        dir.join("plugin.toml"),
    )
    .unwrap();
    let wasm = dir.join("marker.wasm");
    std::fs::write(&wasm, variant(V1)).unwrap();
    let mut opts = LoadOptions::default();
    opts.config.dirs = vec![root.path().to_path_buf()];
    let rt = Arc::new(runtime());
    let shared = Arc::new(Shared::default());
    let (reg, changes) = build(
        &rt,
        &opts,
        &Desired::default(),
        None,
        &Reload::None,
        &shared,
    )
    .await;
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].kind, ChangeKind::Loaded);
    let live = LivePlugins::new(reg);
    let rec = Reconciler::spawn(rt, opts, live.clone(), Desired::default(), shared);
    Setup {
        _root: root,
        wasm,
        live,
        rec,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_kind_of_change_does_what_it_says() {
    let s = setup().await;
    assert_eq!(call(&s.live, "{}").await, V1);

    // Nothing changed: no swap.
    let r = s.rec.rescan().await.unwrap();
    assert!(r.changes.is_empty());
    assert_eq!(r.generation, 0);

    // A new version replaces the old one.
    deploy(&s.wasm, &variant("MARKER-v2-c0ffee7d"));
    let r = s.rec.rescan().await.unwrap();
    assert_eq!(
        kinds(&r),
        [ChangeKind::Updated {
            from: "1.0.0".into()
        }]
    );
    assert_eq!(call(&s.live, "{}").await, "MARKER-v2-c0ffee7d");

    // A broken one leaves v2 serving; rescanning does not retry it.
    deploy(&s.wasm, b"\0asm broken");
    let r = s.rec.rescan().await.unwrap();
    assert!(
        matches!(&kinds(&r)[..], [ChangeKind::UpdateFailed(e)] if e.contains("invalid component")),
        "{r:?}"
    );
    assert_eq!(call(&s.live, "{}").await, "MARKER-v2-c0ffee7d");
    let reg = s.live.snapshot();
    let e = reg.entry("marker").unwrap();
    assert!(e.update_error.is_some() && matches!(e.status, PluginStatus::Loaded(_)));
    drop(reg);
    assert!(s.rec.rescan().await.unwrap().changes.is_empty());

    // Putting v2 back clears the error without reloading.
    deploy(&s.wasm, &variant("MARKER-v2-c0ffee7d"));
    let r = s.rec.rescan().await.unwrap();
    assert_eq!(kinds(&r), [ChangeKind::Restored]);
    assert!(
        s.live
            .snapshot()
            .entry("marker")
            .unwrap()
            .update_error
            .is_none()
    );

    // A grant change re-binds the same compiled component.
    let sha = s
        .live
        .snapshot()
        .plugin("marker")
        .unwrap()
        .wasm_sha256
        .clone();
    let mut d = Desired::default();
    d.plugins.insert(
        "marker".into(),
        Override {
            grant: Some(Capabilities {
                env: vec!["X".into()],
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    let r = s.rec.set_desired(d.clone()).await.unwrap();
    assert_eq!(kinds(&r), [ChangeKind::Rebound]);
    assert_eq!(s.live.snapshot().plugin("marker").unwrap().wasm_sha256, sha);

    // A forced reload recompiles the same bytes.
    let r = s.rec.reload(Some("marker")).await.unwrap();
    assert_eq!(
        kinds(&r),
        [ChangeKind::Updated {
            from: "1.0.0".into()
        }]
    );

    // Disabled: gone from the registry, the tool remembered as retired.
    d.plugins.get_mut("marker").unwrap().enabled = Some(false);
    let r = s.rec.set_desired(d.clone()).await.unwrap();
    assert_eq!(kinds(&r), [ChangeKind::Disabled]);
    let reg = s.live.snapshot();
    assert!(reg.tool("marker").is_none());
    assert_eq!(reg.retired_tool("marker"), Some("marker"));
    drop(reg);

    // Enabled again: back, no longer retired.
    d.plugins.get_mut("marker").unwrap().enabled = Some(true);
    let r = s.rec.set_desired(d).await.unwrap();
    assert_eq!(kinds(&r), [ChangeKind::Loaded]);
    assert!(s.live.snapshot().retired_tool("marker").is_none());

    // Removed from disk.
    std::fs::remove_dir_all(s.wasm.parent().unwrap()).unwrap();
    let r = s.rec.rescan().await.unwrap();
    assert_eq!(kinds(&r), [ChangeKind::Removed]);
    assert!(s.live.snapshot().entry("marker").is_none());
    assert_eq!(s.live.snapshot().retired_tool("marker"), Some("marker"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_finishes_on_its_version_even_after_removal() {
    let s = setup().await;
    let live = s.live.clone();
    let slow = tokio::spawn(async move { call(&live, r#"{"sleep_ms": 3000}"#).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    deploy(&s.wasm, &variant("MARKER-v2-c0ffee7d"));
    s.rec.rescan().await.unwrap();
    assert_eq!(
        call(&s.live, "{}").await,
        "MARKER-v2-c0ffee7d",
        "new calls: v2"
    );
    std::fs::remove_dir_all(s.wasm.parent().unwrap()).unwrap();
    s.rec.rescan().await.unwrap();
    assert!(s.live.snapshot().tool("marker").is_none());
    assert_eq!(
        slow.await.unwrap(),
        V1,
        "the call that started on v1 ends on v1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_ignores_reads_of_the_plugin_directories() {
    let s = setup().await;
    let root = s.wasm.parent().unwrap().parent().unwrap().to_path_buf();
    let _watch = s
        .rec
        .watch(std::slice::from_ref(&root), Duration::from_millis(50))
        .unwrap();
    let mut reports = s.rec.subscribe();
    // Reading the directories and files (as every rescan does) is no change.
    for _ in 0..20 {
        for e in std::fs::read_dir(&root).unwrap() {
            let dir = e.unwrap().path();
            for f in std::fs::read_dir(&dir).unwrap() {
                std::fs::read(f.unwrap().path()).unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        matches!(
            reports.try_recv(),
            Err(tokio::sync::broadcast::error::TryRecvError::Empty)
        ),
        "reads alone triggered a pass"
    );
    // A real change does.
    deploy(&s.wasm, &variant("MARKER-v2-c0ffee7d"));
    let r = tokio::time::timeout(Duration::from_secs(10), reports.recv())
        .await
        .expect("a pass after the change")
        .unwrap();
    assert_eq!(
        kinds(&r),
        [ChangeKind::Updated {
            from: "1.0.0".into()
        }]
    );
    assert_eq!(call(&s.live, "{}").await, "MARKER-v2-c0ffee7d");
}
