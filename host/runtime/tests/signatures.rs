//! Signed plugins through the reconciler with real components: with
//! `require_signatures`, an unsigned or untrusted plugin does not load, a
//! signed one does, and a flipped byte in the component or the manifest of
//! an update is refused with the reason while the signed version keeps
//! serving. Built-ins are trusted by their install path.

mod common;

use common::{runtime, staged};
use std::path::Path;
use std::sync::Arc;
use turnstone_runtime::reconcile::{ChangeKind, Desired, Reconciler, Reload, Shared, build};
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::signing::{self, SIGNATURE_FILE};
use turnstone_runtime::{LivePlugins, PluginStatus};

fn key() -> turnstone_runtime::signing::SigningKey {
    signing::parse_private_key(&signing::generate_private_key().unwrap()).unwrap()
}

fn sign_dir(dir: &Path, key: &turnstone_runtime::signing::SigningKey) {
    let m = std::fs::read(dir.join("plugin.toml")).unwrap();
    let c = std::fs::read(dir.join("marker.wasm")).unwrap();
    let f = signing::sign(key, &m, &c);
    std::fs::write(dir.join(SIGNATURE_FILE), toml::to_string(&f).unwrap()).unwrap();
}

fn status(live: &LivePlugins) -> (bool, Option<String>, Option<String>) {
    let reg = live.snapshot();
    let e = reg.entry("marker").unwrap();
    let failed = match &e.status {
        PluginStatus::Failed(r) => Some(r.clone()),
        _ => None,
    };
    (
        matches!(e.status, PluginStatus::Loaded(_)),
        failed,
        e.update_error.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_trusted_signatures_load_and_a_tampered_update_keeps_the_old_version() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("marker");
    std::fs::create_dir(&dir).unwrap();
    for f in ["plugin.toml", "marker.wasm"] {
        std::fs::copy(staged("test-components", "marker").join(f), dir.join(f)).unwrap();
    }
    let trusted = key();
    let mut opts = LoadOptions::default();
    opts.config.dirs = vec![root.path().to_path_buf()];
    opts.builtin_dir = Some(
        staged("components", "files")
            .parent()
            .unwrap()
            .to_path_buf(),
    );
    opts.config.require_signatures = true;
    opts.config.trusted_keys = vec![signing::public_key_string(&trusted.verifying_key())];
    let rt = Arc::new(runtime());
    let shared = Arc::new(Shared::default());

    // Unsigned: refused with the reason; the built-ins load unsigned.
    let (reg, _) = build(
        &rt,
        &opts,
        &Desired::default(),
        None,
        &Reload::None,
        &shared,
    )
    .await;
    let live = LivePlugins::new(reg);
    let (loaded, failed, _) = status(&live);
    assert!(!loaded);
    let why = failed.unwrap();
    assert!(why.starts_with("signature: unsigned"), "{why}");
    assert!(
        live.snapshot().tool("read_file").is_some(),
        "built-ins are trusted by path"
    );
    let rec = Reconciler::spawn(rt, opts, live.clone(), Desired::default(), shared);

    // Signed by a stranger: refused, naming the key.
    sign_dir(&dir, &key());
    rec.rescan().await.unwrap();
    let why = status(&live).1.unwrap();
    assert!(why.contains("not in [plugins] trusted_keys"), "{why}");

    // Signed by the trusted key: loads.
    sign_dir(&dir, &trusted);
    let r = rec.rescan().await.unwrap();
    assert!(
        r.changes.iter().any(|c| c.kind == ChangeKind::Loaded),
        "{r:?}"
    );
    assert!(status(&live).0);

    // One flipped byte in the component: the update is refused, the signed
    // version keeps serving, and the reason says what was tampered with.
    let wasm = dir.join("marker.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 0x01;
    std::fs::write(&wasm, &bytes).unwrap();
    let r = rec.rescan().await.unwrap();
    assert!(
        matches!(&r.changes[..], [c] if matches!(&c.kind, ChangeKind::UpdateFailed(e) if e.contains("tampered: the component"))),
        "{r:?}"
    );
    let (loaded, _, update_error) = status(&live);
    assert!(loaded, "the signed version keeps serving");
    assert!(update_error.unwrap().contains("tampered"));

    // Back to the signed bytes, then a changed manifest: refused the same way.
    bytes[at] ^= 0x01;
    std::fs::write(&wasm, &bytes).unwrap();
    rec.rescan().await.unwrap();
    assert!(status(&live).2.is_none());
    let manifest = dir.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("1.0.0", "1.0.1")).unwrap();
    rec.rescan().await.unwrap();
    let (loaded, _, update_error) = status(&live);
    assert!(loaded);
    assert!(
        update_error.unwrap().contains("tampered: the manifest"),
        "a manifest edit breaks the signature"
    );
}
