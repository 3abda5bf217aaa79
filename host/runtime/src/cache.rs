//! On-disk cache of precompiled components, keyed by sha256(component bytes) and
//! the engine's compatibility hash, so a second start skips Cranelift; and of
//! what each tool component's `describe` returned, keyed by the same digest,
//! so a second start does not run every tool component just to list its tools.
//!
//! Only files this host wrote are loaded: the cache directory is created private
//! (0700), entries are written to a temp file and renamed, and an entry is used
//! only when it is owned by this user and not writable by group or others.
//! wasmtime additionally verifies the header and engine settings on load.
//!
//! Built-in components can also ship precompiled: `turnstone plugins
//! precompile` (run by `cargo xtask build`) writes the same entry beside each
//! built-in component, so a fresh install or an empty cache starts without
//! compiling. Only built-in directories are searched (they are part of the
//! installation, like the binary); never a third-party plugin's directory,
//! whose files come from its author.

use crate::bindings::v0_1_0::tool::exports::turnstone::plugin::tool::ToolSpec as WitToolSpec;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// How a component got compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompileSource {
    /// Loaded from a `.cwasm` this host wrote earlier.
    Cache,
    /// Loaded from the `.cwasm` precompiled beside a built-in component.
    Shipped,
    /// Compiled now with Cranelift (and written to the cache when one is configured).
    Compiled,
}

/// Feeds `Hash` output into SHA-256 so the engine hash is stable and printable.
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

/// Hex digest of the engine's precompile compatibility hash.
pub fn engine_fingerprint(engine: &Engine) -> String {
    let mut h = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut h);
    hex::encode(&h.0.finalize()[..16])
}

/// The precompiled-component cache.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
    fingerprint: String,
}

impl ComponentCache {
    /// A cache in `dir` (created 0700 if missing); `None` disables caching.
    pub fn new(engine: &Engine, dir: Option<PathBuf>) -> std::io::Result<Self> {
        if let Some(d) = &dir {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)?;
        }
        Ok(Self {
            dir,
            fingerprint: engine_fingerprint(engine),
        })
    }

    /// Path of the entry for `wasm`.
    pub fn entry_path(&self, wasm: &[u8]) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(self.entry_name(wasm)))
    }

    /// File name of the entry for `wasm`: its digest and the engine's.
    pub fn entry_name(&self, wasm: &[u8]) -> String {
        let digest = hex::encode(Sha256::digest(wasm));
        format!("{digest}-{}.cwasm", self.fingerprint)
    }

    /// Loads `wasm` from the cache or compiles it (then caches it). Blocking: call
    /// from `spawn_blocking`.
    pub fn load(
        &self,
        engine: &Engine,
        wasm: &[u8],
    ) -> wasmtime::Result<(Component, CompileSource)> {
        self.load_shipped(engine, wasm, None)
    }

    /// Like [`ComponentCache::load`], also trying the entry precompiled in
    /// `shipped` (a built-in component's directory) before compiling.
    pub fn load_shipped(
        &self,
        engine: &Engine,
        wasm: &[u8],
        shipped: Option<&Path>,
    ) -> wasmtime::Result<(Component, CompileSource)> {
        let entry = self.entry_path(wasm);
        if let Some(path) = &entry
            && trusted_entry(path, false)
        {
            // SAFETY: the file was written by this host (see `trusted_entry`) from
            // `Engine::precompile_component` of the same bytes and engine settings
            // (both are in the file name); wasmtime re-checks the header.
            match unsafe { Component::deserialize_file(engine, path) } {
                Ok(c) => return Ok((c, CompileSource::Cache)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "discarding unusable cache entry");
                    let _ = std::fs::remove_file(path);
                }
            }
        }
        if let Some(dir) = shipped {
            let path = dir.join(self.entry_name(wasm));
            if trusted_entry(&path, true) {
                // SAFETY: written by `turnstone plugins precompile` into the
                // installation's built-in directory (owned by this user or
                // root, writable by no one else); name and header pin the bytes
                // and engine settings as above.
                match unsafe { Component::deserialize_file(engine, &path) } {
                    Ok(c) => return Ok((c, CompileSource::Shipped)),
                    Err(e) => {
                        tracing::warn!(path = %path.display(), error = %e, "ignoring unusable precompiled component")
                    }
                }
            }
        }
        let compiled = engine.precompile_component(wasm)?;
        if let Some(path) = &entry
            && let Err(e) = write_entry(path, &compiled)
        {
            tracing::warn!(path = %path.display(), error = %e, "could not write component cache entry");
        }
        // SAFETY: the bytes come from `precompile_component` on this engine just now.
        let component = unsafe { Component::deserialize(engine, &compiled)? };
        Ok((component, CompileSource::Compiled))
    }

    /// Compiles `wasm` and writes its entry into `dir` (a built-in
    /// component's directory), removing entries of other bytes or engine
    /// settings there. Blocking. Returns the entry's path.
    pub fn precompile_into(
        &self,
        engine: &Engine,
        wasm: &[u8],
        dir: &Path,
    ) -> wasmtime::Result<PathBuf> {
        let name = self.entry_name(wasm);
        let compiled = engine.precompile_component(wasm)?;
        let path = dir.join(&name);
        write_entry(&path, &compiled)?;
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.filter_map(Result::ok) {
                let other = e.file_name().to_string_lossy().into_owned();
                if other.ends_with(".cwasm") && other != name {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(path)
    }
}

/// One tool as a component's `describe` returned it (WIT 0.1.0 `tool-spec`,
/// which never changes), as stored in the cache.
#[derive(Serialize, Deserialize)]
struct DescribedTool {
    name: String,
    description: String,
    parameters: String,
    task_agent: bool,
    auto_approve: bool,
    primary_key: Option<String>,
    coordinator: bool,
    interactive: bool,
    kind_variants: Option<String>,
    cwd_note: Option<String>,
    workspace_note: Option<String>,
}

impl From<&WitToolSpec> for DescribedTool {
    fn from(s: &WitToolSpec) -> Self {
        Self {
            name: s.name.clone(),
            description: s.description.clone(),
            parameters: s.parameters.clone(),
            task_agent: s.task_agent,
            auto_approve: s.auto_approve,
            primary_key: s.primary_key.clone(),
            coordinator: s.coordinator,
            interactive: s.interactive,
            kind_variants: s.kind_variants.clone(),
            cwd_note: s.cwd_note.clone(),
            workspace_note: s.workspace_note.clone(),
        }
    }
}

impl From<DescribedTool> for WitToolSpec {
    fn from(s: DescribedTool) -> Self {
        Self {
            name: s.name,
            description: s.description,
            parameters: s.parameters,
            task_agent: s.task_agent,
            auto_approve: s.auto_approve,
            primary_key: s.primary_key,
            coordinator: s.coordinator,
            interactive: s.interactive,
            kind_variants: s.kind_variants,
            cwd_note: s.cwd_note,
            workspace_note: s.workspace_note,
        }
    }
}

impl ComponentCache {
    /// Where the `describe` output for `key` (the component's sha256 and a
    /// digest of its settings, both hex) is kept.
    fn described_path(&self, key: &str) -> Option<PathBuf> {
        let safe = !key.is_empty() && key.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
        if !safe {
            return None;
        }
        self.dir
            .as_ref()
            .map(|d| d.join(format!("{key}.describe-v1.json")))
    }

    /// The tools a component described when this host last ran its
    /// `describe` with the same settings (`key`), if that was cached (same
    /// trust rule as the compiled entries). Blocking.
    pub fn load_described(&self, key: &str) -> Option<Vec<WitToolSpec>> {
        let path = self.described_path(key)?;
        if !trusted_entry(&path, false) {
            return None;
        }
        let parsed = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Vec<DescribedTool>>(&b).ok());
        if parsed.is_none() {
            tracing::warn!(path = %path.display(), "discarding unreadable describe cache entry");
            let _ = std::fs::remove_file(&path);
        }
        Some(parsed?.into_iter().map(Into::into).collect())
    }

    /// Keeps what `describe` returned for `key`. Blocking; a failure to
    /// write only costs a `describe` next start.
    pub fn store_described(&self, key: &str, specs: &[WitToolSpec]) {
        let Some(path) = self.described_path(key) else {
            return;
        };
        let tools: Vec<DescribedTool> = specs.iter().map(Into::into).collect();
        let written = serde_json::to_vec(&tools)
            .map_err(std::io::Error::other)
            .and_then(|bytes| write_entry(&path, &bytes));
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "could not write describe cache entry");
        }
    }
}

/// Whether `path` is a regular file this user wrote (or, for a `shipped`
/// entry in the installation, root) that no one else may have changed: not
/// writable by group or others, nor is its directory.
fn trusted_entry(path: &Path, shipped: bool) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    let me = rustix::process::geteuid().as_raw();
    let owner_ok = |uid: u32| uid == me || (shipped && uid == 0);
    let private = |mode: u32| mode & 0o022 == 0;
    if !(meta.is_file() && owner_ok(meta.uid()) && private(meta.permissions().mode())) {
        return false;
    }
    if !shipped {
        // The cache directory itself is created 0700 by this host.
        return true;
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::metadata(dir).is_ok_and(|d| owner_ok(d.uid()) && private(d.permissions().mode()))
}

fn write_entry(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o600))?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
