//! Shared helpers: locate the components `cargo xtask build-components` staged,
//! copy them into temp plugin dirs, and build runtimes.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use turnstone_runtime::{
    Capabilities, LoadedPlugin, PluginSettings, PluginSource, Runtime, RuntimeOptions,
    ToolOutputSink,
};

pub fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// The staged plugin directory `target/<set>/<name>`.
pub fn staged(set: &str, name: &str) -> PathBuf {
    let p = target_dir().join(set).join(name);
    assert!(
        p.join("plugin.toml").is_file(),
        "{} is missing: run `cargo xtask build-components` (or `cargo xtask test`)",
        p.display()
    );
    p
}

/// Copies a staged plugin into `dest/<name>` and returns that directory.
pub fn copy_plugin(set: &str, name: &str, dest: &Path) -> PathBuf {
    let src = staged(set, name);
    let out = dest.join(name);
    std::fs::create_dir_all(&out).unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), out.join(e.file_name())).unwrap();
    }
    out
}

/// A runtime sharing one on-disk cache across the test binary (compiles once).
pub fn runtime() -> Runtime {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(target_dir().join("test-cache")),
        ..Default::default()
    })
    .unwrap()
}

pub fn source(set: &str, name: &str, builtin: bool) -> PluginSource {
    PluginSource {
        dir: staged(set, name),
        builtin,
    }
}

pub async fn load(rt: &Runtime, set: &str, name: &str, settings: PluginSettings) -> LoadedPlugin {
    rt.load(source(set, name, false), settings)
        .await
        .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

pub fn grant(toml_text: &str) -> Option<Capabilities> {
    Some(toml::from_str(toml_text).expect("grant toml"))
}

pub fn ctx(dir: &Path) -> turnstone_runtime::CallContext {
    turnstone_runtime::CallContext {
        call_id: "call_1".into(),
        session_id: "ws_test".into(),
        workspace_dir: Some(dir.to_string_lossy().into_owned()),
        working_dir: dir.to_string_lossy().into_owned(),
        supports_vision: false,
    }
}

/// Records every streamed chunk.
#[derive(Default)]
pub struct Chunks(
    pub Mutex<Vec<String>>,
    pub Option<tokio::sync::mpsc::UnboundedSender<String>>,
);

impl ToolOutputSink for Chunks {
    fn chunk(&self, text: &str) -> bool {
        self.0.lock().unwrap().push(text.to_string());
        if let Some(tx) = &self.1 {
            let _ = tx.send(text.to_string());
        }
        true
    }
}

pub fn sink() -> Arc<Chunks> {
    Arc::new(Chunks::default())
}

pub struct StaticSecrets(pub BTreeMap<String, String>);

impl turnstone_runtime::SecretSource for StaticSecrets {
    fn secret(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

/// Canonical temp workspace.
pub fn workspace() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = std::fs::canonicalize(t.path()).unwrap();
    (t, p)
}
