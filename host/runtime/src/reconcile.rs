//! Hot reload: one task owns every load and unload, so two reloads never race.
//!
//! A pass compares what is on disk (manifest text, component bytes) and what
//! the operator wants (enabled, grant, config, reload requests) with the
//! registry in force, and builds the next registry:
//! - unchanged plugins are carried over as they are (same `Arc`);
//! - a settings-only change re-binds the compiled component (no compile);
//! - a new or changed component is compiled (or taken from the cache) and
//!   described **before** the swap; if that fails, the old version keeps
//!   serving and the entry carries `update_error`;
//! - a removed or disabled plugin simply is not in the next registry: calls in
//!   flight hold their own `Arc` and finish on it.
//!
//! The new registry replaces the old one with one atomic swap
//! ([`LivePlugins::swap`]).

use crate::Runtime;
use crate::capability::Capabilities;
use crate::config::expand_home;
use crate::host::kv::MemoryKv;
use crate::live::LivePlugins;
use crate::manifest::Manifest;
use crate::plugin::{LoadedPlugin, PluginCounters, PluginSettings, PluginSource};
use crate::registry::{LoadOptions, PluginEntry, PluginRegistry, PluginStatus, discover};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, oneshot};

/// The operator's wishes for one plugin, e.g. from the `plugins` table.
/// `None` fields fall back to `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Override {
    /// Enabled or not.
    pub enabled: Option<bool>,
    /// The grant (replaces the configured one).
    pub grant: Option<Capabilities>,
    /// Config values laid over the configured ones.
    pub config: BTreeMap<String, String>,
    /// Reload requests: a new value reloads the plugin from disk.
    pub reload_seq: i64,
}

/// The operator's wishes for every plugin that has any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// By plugin name.
    pub plugins: BTreeMap<String, Override>,
}

/// What to reload even when nothing on disk changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reload {
    /// Only what changed.
    None,
    /// This plugin.
    One(String),
    /// Every plugin.
    All,
}

impl Reload {
    fn covers(&self, name: &str) -> bool {
        match self {
            Reload::None => false,
            Reload::One(n) => n == name,
            Reload::All => true,
        }
    }
}

/// What a pass did to one plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeKind {
    /// First load.
    Loaded,
    /// A new version replaced the old one.
    Updated {
        /// The version that was serving.
        from: String,
    },
    /// New grant, config or limits on the same component.
    Rebound,
    /// A new version failed; the old one keeps serving.
    UpdateFailed(String),
    /// Failed to load (nothing serves it).
    Failed(String),
    /// Disabled by the operator.
    Disabled,
    /// Gone from disk.
    Removed,
    /// A failed update was undone on disk; the serving version matches again.
    Restored,
}

/// One change of a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Plugin name.
    pub plugin: String,
    /// What happened.
    pub kind: ChangeKind,
}

/// The outcome of one pass.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Changes, in load order (empty: nothing to do, no swap).
    pub changes: Vec<Change>,
    /// Registry generation after the pass.
    pub generation: u64,
    /// How long the pass took.
    pub elapsed: Duration,
}

/// State kept per plugin name across versions: counters and the key-value
/// namespace survive a reload.
#[derive(Default)]
pub struct Shared {
    counters: Mutex<HashMap<String, Arc<PluginCounters>>>,
    kv: Mutex<HashMap<String, Arc<MemoryKv>>>,
}

impl Shared {
    /// The counters of plugin `name` (created on first use).
    pub fn counters(&self, name: &str) -> Arc<PluginCounters> {
        let mut m = self.counters.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(name.to_string()).or_default().clone()
    }

    fn kv(&self, name: &str) -> Arc<MemoryKv> {
        let mut m = self.kv.lock().unwrap_or_else(|p| p.into_inner());
        m.entry(name.to_string()).or_default().clone()
    }
}

/// Every plugin source: built-ins first, then third-party directories.
fn sources(opts: &LoadOptions) -> Vec<PluginSource> {
    let mut out: Vec<PluginSource> = Vec::new();
    if let Some(b) = &opts.builtin_dir {
        out.extend(
            discover(b)
                .into_iter()
                .map(|dir| PluginSource { dir, builtin: true }),
        );
    }
    for d in opts.config.scan_dirs() {
        out.extend(discover(&d).into_iter().map(|dir| PluginSource {
            dir,
            builtin: false,
        }));
    }
    out
}

fn sha_hex(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

fn blank(source: &PluginSource) -> PluginEntry {
    PluginEntry {
        dir: source.dir.clone(),
        builtin: source.builtin,
        manifest: None,
        grant: None,
        status: PluginStatus::Failed(String::new()),
        update_error: None,
        fingerprint: None,
        settings_key: None,
        failed_fingerprint: None,
    }
}

/// Builds the next registry from disk and `desired`, reusing what did not
/// change in `prev`. Returns the registry and what changed.
pub async fn build(
    runtime: &Runtime,
    opts: &LoadOptions,
    desired: &Desired,
    prev: Option<&PluginRegistry>,
    reload: &Reload,
    shared: &Shared,
) -> (PluginRegistry, Vec<Change>) {
    let mut next = PluginRegistry::default();
    let mut changes = Vec::new();
    let scan = opts.clone();
    // Directory listing is blocking I/O; keep it off the async workers.
    let found = match tokio::task::spawn_blocking(move || sources(&scan)).await {
        Ok(found) => found,
        // An empty listing would read as "every plugin removed": keep what is
        // in force and report no change instead.
        Err(e) => {
            tracing::error!("plugin directory scan failed ({e}); keeping the current plugins");
            let keep = prev.map(|p| PluginRegistry {
                entries: p.entries.clone(),
                retired: p.retired.clone(),
            });
            return (keep.unwrap_or_default(), changes);
        }
    };
    let ctx = PassCtx {
        runtime,
        opts,
        desired,
        prev,
        reload,
        shared,
    };
    for source in found {
        let (entry, change) = ctx.build_one(&next, source).await;
        if let Some(kind) = change {
            log_change(&entry.name(), &kind);
            changes.push(Change {
                plugin: entry.name(),
                kind,
            });
        }
        next.entries.push(entry);
    }
    if let Some(prev) = prev {
        for old in &prev.entries {
            let gone = !next
                .entries
                .iter()
                .any(|e| e.dir == old.dir || (old.manifest.is_some() && e.name() == old.name()));
            if gone {
                log_change(&old.name(), &ChangeKind::Removed);
                changes.push(Change {
                    plugin: old.name(),
                    kind: ChangeKind::Removed,
                });
            }
        }
        // Tools that went away stay known, so a model calling one gets told why.
        next.retired = prev.retired.clone();
        for p in prev.loaded() {
            for t in &p.tools {
                next.retired.insert(t.name.clone(), p.name().to_string());
            }
        }
        let live: Vec<String> = next.tools().map(|t| t.name.clone()).collect();
        for t in live {
            next.retired.remove(&t);
        }
    }
    (next, changes)
}

fn log_change(name: &str, kind: &ChangeKind) {
    match kind {
        ChangeKind::Failed(r) => tracing::warn!(plugin = %name, "plugin failed to load: {r}"),
        ChangeKind::UpdateFailed(r) => {
            tracing::warn!(plugin = %name, "plugin update failed, the previous version keeps serving: {r}")
        }
        other => tracing::info!(plugin = %name, change = ?other, "plugin changed"),
    }
}

/// What one pass works from.
struct PassCtx<'a> {
    runtime: &'a Runtime,
    opts: &'a LoadOptions,
    desired: &'a Desired,
    prev: Option<&'a PluginRegistry>,
    reload: &'a Reload,
    shared: &'a Shared,
}

impl PassCtx<'_> {
    async fn build_one(
        &self,
        next: &PluginRegistry,
        source: PluginSource,
    ) -> (PluginEntry, Option<ChangeKind>) {
        let PassCtx {
            runtime,
            opts,
            desired,
            prev,
            reload,
            shared,
        } = *self;
        let mut entry = blank(&source);
        let prev_entry = prev.and_then(|p| p.entries.iter().find(|e| e.dir == source.dir));
        let manifest_path = source.dir.join("plugin.toml");
        let text = match tokio::fs::read_to_string(&manifest_path).await {
            Ok(t) => t,
            Err(e) => {
                let reason = format!("cannot read {}: {e}", manifest_path.display());
                return keep_or_fail(entry, prev_entry, reason);
            }
        };
        let manifest = match Manifest::parse(&text, &manifest_path) {
            Ok(m) => m,
            Err(e) => return keep_or_fail(entry, prev_entry, e.to_string()),
        };
        let name = manifest.plugin.name.clone();
        let ov = desired.plugins.get(&name).cloned().unwrap_or_default();
        entry.grant = ov
            .grant
            .clone()
            .or_else(|| opts.config.grants.get(&name).cloned());
        entry.manifest = Some(manifest.clone());
        if let Some(other) = next.entries.iter().find(|e| {
            e.name() == name && matches!(e.status, PluginStatus::Loaded(_) | PluginStatus::Disabled)
        }) {
            let reason = format!(
                "another plugin named {name} is already loaded from {}",
                other.dir.display()
            );
            entry.status = PluginStatus::Failed(reason.clone());
            return changed(entry, prev_entry, ChangeKind::Failed(reason));
        }
        // Built-in channel adapters connect to outside platforms with the
        // operator's bot tokens: off until the operator turns one on.
        let off_by_default = source.builtin
            && manifest.plugin.kind == crate::manifest::PluginKind::Channel
            && !opts.config.enabled.iter().any(|d| d == &name);
        let enabled = ov
            .enabled
            .unwrap_or_else(|| !off_by_default && !opts.config.disabled.iter().any(|d| d == &name));
        if !enabled {
            entry.status = PluginStatus::Disabled;
            return changed(entry, prev_entry, ChangeKind::Disabled);
        }
        let wasm_path = source.dir.join(manifest.component_file());
        let wasm = match tokio::fs::read(&wasm_path).await {
            Ok(w) => w,
            Err(e) => {
                let reason = format!("cannot read component {}: {e}", wasm_path.display());
                return keep_or_fail(entry, prev_entry, reason);
            }
        };
        // A signature that appears, changes or goes counts as a change.
        let sig = tokio::fs::read_to_string(source.dir.join(crate::signing::SIGNATURE_FILE))
            .await
            .ok();
        let fingerprint = sha_hex(&[
            text.as_bytes(),
            &wasm,
            &ov.reload_seq.to_le_bytes(),
            sig.as_deref().unwrap_or("").as_bytes(),
        ]);
        // With signatures required, a third-party plugin that is unsigned,
        // tampered with or signed by an untrusted key does not load (an
        // update that fails this leaves the old version serving).
        let policy =
            opts.config
                .signature_policy()
                .unwrap_or_else(|_| crate::signing::SignaturePolicy {
                    required: true,
                    trusted: Vec::new(),
                });
        if let Err(e) = policy.check(source.builtin, sig.as_deref(), text.as_bytes(), &wasm) {
            return keep_or_fail(entry, prev_entry, format!("signature: {e}"));
        }
        let mut config = opts.config.config.get(&name).cloned().unwrap_or_default();
        config.extend(ov.config.clone());
        let limits = opts.config.limits_with(&name, &manifest.limits);
        let settings_key = sha_hex(&[
            serde_json::to_string(&entry.grant)
                .unwrap_or_default()
                .as_bytes(),
            serde_json::to_string(&config)
                .unwrap_or_default()
                .as_bytes(),
            format!("{limits:?}").as_bytes(),
        ]);
        let settings = PluginSettings {
            grant: entry.grant.clone(),
            config,
            limits,
            workspace: opts.workspace.clone(),
            secrets: opts.secrets.clone(),
            kv: shared.kv(&name),
            network: opts.network.clone(),
            counters: shared.counters(&name),
            sandbox: opts.sandbox.clone(),
        };
        entry.fingerprint = Some(fingerprint.clone());
        entry.settings_key = Some(settings_key.clone());
        let forced = reload.covers(&name);
        if let Some(p) = prev_entry
            && let PluginStatus::Loaded(old) = &p.status
        {
            let same_code = p.fingerprint.as_deref() == Some(&fingerprint) && !forced;
            if same_code && p.settings_key.as_deref() == Some(&settings_key) {
                let mut kept = p.clone();
                // The broken version on disk was put back to the serving one.
                if kept.update_error.take().is_some() {
                    kept.failed_fingerprint = None;
                    return (kept, Some(ChangeKind::Restored));
                }
                return (kept, None);
            }
            if same_code {
                return match old.rebind(settings) {
                    Ok(new) => {
                        entry.status = PluginStatus::Loaded(Arc::new(new));
                        (entry, Some(ChangeKind::Rebound))
                    }
                    Err(e) => keep_or_fail(entry, prev_entry, e.to_string()),
                };
            }
            // The same broken version: do not recompile it on every rescan.
            if !forced && p.failed_fingerprint.as_deref() == Some(&fingerprint) {
                return (p.clone(), None);
            }
        }
        if !forced
            && let Some(p) = prev_entry
            && matches!(p.status, PluginStatus::Failed(_))
            && p.failed_fingerprint.as_deref() == Some(&fingerprint)
            && p.settings_key.as_deref() == Some(&settings_key)
        {
            return (p.clone(), None);
        }
        let loaded = match runtime.load_bytes(source, manifest, wasm, settings).await {
            Ok(p) => match tool_clash(next, &p) {
                Some(msg) => Err(msg),
                None => Ok(p),
            },
            Err(e) => Err(e.to_string()),
        };
        match loaded {
            Ok(p) => {
                let kind = match prev_entry.map(|e| &e.status) {
                    Some(PluginStatus::Loaded(old)) => ChangeKind::Updated {
                        from: old.manifest.plugin.version.clone(),
                    },
                    _ => ChangeKind::Loaded,
                };
                tracing::info!(
                    plugin = %p.name(),
                    version = %p.manifest.plugin.version,
                    source = ?p.compile_source,
                    "plugin loaded"
                );
                entry.status = PluginStatus::Loaded(Arc::new(p));
                (entry, Some(kind))
            }
            Err(reason) => {
                entry.failed_fingerprint = Some(fingerprint);
                keep_or_fail(entry, prev_entry, reason)
            }
        }
    }
}

/// A change unless the previous entry was already in the same state.
fn changed(
    entry: PluginEntry,
    prev: Option<&PluginEntry>,
    kind: ChangeKind,
) -> (PluginEntry, Option<ChangeKind>) {
    let same = match (&kind, prev.map(|p| &p.status)) {
        (ChangeKind::Disabled, Some(PluginStatus::Disabled)) => true,
        (ChangeKind::Failed(r), Some(PluginStatus::Failed(old))) => r == old,
        _ => false,
    };
    (entry, (!same).then_some(kind))
}

/// The previous version keeps serving when there is one; else the plugin fails.
fn keep_or_fail(
    mut entry: PluginEntry,
    prev: Option<&PluginEntry>,
    reason: String,
) -> (PluginEntry, Option<ChangeKind>) {
    if let Some(p) = prev
        && matches!(p.status, PluginStatus::Loaded(_))
    {
        let mut kept = p.clone();
        let repeat = kept.update_error.as_deref() == Some(reason.as_str());
        kept.update_error = Some(reason.clone());
        kept.failed_fingerprint = entry.failed_fingerprint.take().or(kept.failed_fingerprint);
        return (kept, (!repeat).then_some(ChangeKind::UpdateFailed(reason)));
    }
    entry.status = PluginStatus::Failed(reason.clone());
    changed(entry, prev, ChangeKind::Failed(reason))
}

fn tool_clash(next: &PluginRegistry, p: &LoadedPlugin) -> Option<String> {
    p.tools.iter().find_map(|t| {
        next.tool(&t.name).map(|(other, _)| {
            format!(
                "tool {} is already provided by plugin {}",
                t.name,
                other.name()
            )
        })
    })
}

enum Msg {
    Rescan {
        reload: Reload,
        reply: Option<oneshot::Sender<Report>>,
    },
    Desired {
        desired: Desired,
        reply: oneshot::Sender<Report>,
    },
}

/// Handle to the reconciler task. Cloning shares the task.
#[derive(Clone)]
pub struct Reconciler {
    tx: mpsc::Sender<Msg>,
    reports: broadcast::Sender<Report>,
    live: Arc<LivePlugins>,
}

/// The reconciler task is gone (the host is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("the plugin reconciler has stopped")]
pub struct ReconcilerStopped;

impl Reconciler {
    /// Starts the task over `live` (already loaded with `opts` and `desired`).
    pub fn spawn(
        runtime: Arc<Runtime>,
        opts: LoadOptions,
        live: Arc<LivePlugins>,
        desired: Desired,
        shared: Arc<Shared>,
    ) -> Self {
        let (tx, rx) = mpsc::channel(64);
        let (reports, _) = broadcast::channel(64);
        let task = Task {
            runtime,
            opts,
            live: live.clone(),
            desired,
            shared,
            reports: reports.clone(),
        };
        tokio::spawn(task.run(rx));
        Self { tx, reports, live }
    }

    /// The live plugin set it maintains.
    pub fn live(&self) -> &Arc<LivePlugins> {
        &self.live
    }

    /// Every pass that changed something, as it happens.
    pub fn subscribe(&self) -> broadcast::Receiver<Report> {
        self.reports.subscribe()
    }

    /// Re-reads the plugin directories and applies what changed.
    pub async fn rescan(&self) -> Result<Report, ReconcilerStopped> {
        self.request(Reload::None).await
    }

    /// Reloads one plugin (or all) from disk even if nothing changed.
    pub async fn reload(&self, name: Option<&str>) -> Result<Report, ReconcilerStopped> {
        self.request(name.map_or(Reload::All, |n| Reload::One(n.to_string())))
            .await
    }

    async fn request(&self, reload: Reload) -> Result<Report, ReconcilerStopped> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Rescan {
                reload,
                reply: Some(reply),
            })
            .await
            .map_err(|_| ReconcilerStopped)?;
        rx.await.map_err(|_| ReconcilerStopped)
    }

    /// Applies new operator wishes (no-op pass when they did not change).
    pub async fn set_desired(&self, desired: Desired) -> Result<Report, ReconcilerStopped> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Desired { desired, reply })
            .await
            .map_err(|_| ReconcilerStopped)?;
        rx.await.map_err(|_| ReconcilerStopped)
    }

    /// Asks for a rescan without waiting (file watcher; coalesced by the task).
    pub fn nudge(&self) {
        let _ = self.tx.try_send(Msg::Rescan {
            reload: Reload::None,
            reply: None,
        });
    }

    /// Watches every plugin directory and rescans ~`debounce` after the last
    /// change. Keep the returned guard alive as long as watching should go on.
    ///
    /// Only changes count: inotify also reports every open and read of a
    /// watched directory — which each rescan does itself — and reacting to
    /// those would rescan forever (5 % of a core on an idle server).
    pub fn watch(
        &self,
        dirs: &[PathBuf],
        debounce: Duration,
    ) -> Result<PluginWatcher, notify::Error> {
        use notify::{EventKind, RecursiveMode, Watcher};
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
                Ok(ev) if matches!(ev.kind, EventKind::Access(_)) => {}
                Ok(_) => {
                    let _ = tx.send(());
                }
                Err(e) => tracing::warn!("plugin directory watch: {e}"),
            })?;
        let mut watched = Vec::new();
        for d in dirs {
            let d = expand_home(d);
            if !d.is_dir() {
                tracing::debug!(dir = %d.display(), "plugin directory missing; not watched");
                continue;
            }
            watcher.watch(&d, RecursiveMode::Recursive)?;
            watched.push(d);
        }
        // Debounce on a plain thread that sleeps until a change arrives: one
        // nudge once `debounce` has passed without another.
        let me = self.clone();
        std::thread::Builder::new()
            .name("turnstone-watch".into())
            .spawn(move || {
                while rx.recv().is_ok() {
                    loop {
                        match rx.recv_timeout(debounce) {
                            Ok(()) => continue,
                            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => break,
                            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    me.nudge();
                }
            })
            .map_err(notify::Error::io)?;
        Ok(PluginWatcher {
            _watcher: watcher,
            dirs: watched,
        })
    }
}

/// Keeps a directory watch alive (dropping it ends the debounce thread too).
pub struct PluginWatcher {
    _watcher: notify::RecommendedWatcher,
    dirs: Vec<PathBuf>,
}

impl PluginWatcher {
    /// The directories being watched.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }
}

struct Task {
    runtime: Arc<Runtime>,
    opts: LoadOptions,
    live: Arc<LivePlugins>,
    desired: Desired,
    shared: Arc<Shared>,
    reports: broadcast::Sender<Report>,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        while let Some(first) = rx.recv().await {
            // Coalesce a burst (the watcher and several API calls) into one pass.
            let mut batch = vec![first];
            while let Ok(m) = rx.try_recv() {
                batch.push(m);
            }
            let mut reload = Reload::None;
            let mut replies = Vec::new();
            for m in batch {
                match m {
                    Msg::Rescan { reload: r, reply } => {
                        reload = merge(reload, r);
                        replies.extend(reply);
                    }
                    Msg::Desired { desired, reply } => {
                        self.desired = desired;
                        replies.push(reply);
                    }
                }
            }
            let report = self.pass(&reload).await;
            for r in replies {
                let _ = r.send(report.clone());
            }
        }
    }

    async fn pass(&self, reload: &Reload) -> Report {
        let started = Instant::now();
        let prev = self.live.snapshot();
        let (next, changes) = build(
            &self.runtime,
            &self.opts,
            &self.desired,
            Some(&prev),
            reload,
            &self.shared,
        )
        .await;
        drop(prev);
        if !changes.is_empty() {
            self.live.swap(next);
        }
        let report = Report {
            changes,
            generation: self.live.generation(),
            elapsed: started.elapsed(),
        };
        if !report.changes.is_empty() {
            let _ = self.reports.send(report.clone());
        }
        report
    }
}

fn merge(a: Reload, b: Reload) -> Reload {
    match (a, b) {
        (Reload::All, _) | (_, Reload::All) => Reload::All,
        (Reload::One(x), Reload::One(y)) if x != y => Reload::All,
        (Reload::None, r) | (r, Reload::None) => r,
        (r, _) => r,
    }
}
