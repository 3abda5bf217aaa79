//! Operator actions on plugins: enable, disable, grant, revoke, reload,
//! install and uninstall. Every action is written to the `plugins` table and
//! the audit log; on a running node it is applied before the call returns.

use super::{OperatorState, operator_state};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::Mutex;
use turnstone_mcp::McpHub;
use turnstone_runtime::reconcile::{Reconciler, Report, Shared};
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::{
    Capabilities, LivePlugins, Manifest, PluginEntry, PluginSettings, PluginSource, PluginStatus,
    Runtime,
};
use turnstone_storage::Storage;
use turnstone_storage::types::{AuditEntry, PluginRecord};

/// Who acts, for the audit log.
#[derive(Debug, Clone, Default)]
pub struct Actor {
    /// User id (`None` for the offline CLI without a user).
    pub user_id: Option<String>,
    /// Client address.
    pub ip: Option<String>,
    /// `api` or `cli`.
    pub via: &'static str,
}

/// Why an operator action was refused.
#[derive(Debug, Error)]
pub enum AdminError {
    /// No such plugin on this node.
    #[error("no plugin named {0:?}")]
    NotFound(String),
    /// The request is malformed or not allowed.
    #[error("{0}")]
    Invalid(String),
    /// Conflicts with what exists.
    #[error("{0}")]
    Conflict(String),
    /// The database failed.
    #[error("storage: {0}")]
    Storage(#[from] turnstone_storage::StorageError),
    /// A file could not be written or removed.
    #[error("{0}")]
    Io(String),
    /// The reconciler is gone (shutting down).
    #[error("plugin reloading has stopped")]
    Stopped,
}

/// Running-node settings.
#[derive(Debug, Clone)]
pub struct AdminOptions {
    /// Watch plugin directories for changes.
    pub watch: bool,
    /// Quiet time after the last file event before a rescan.
    pub debounce: Duration,
    /// How often the `plugins` table is polled for other nodes' changes.
    pub sync_interval: Duration,
}

impl Default for AdminOptions {
    fn default() -> Self {
        Self {
            watch: true,
            debounce: Duration::from_millis(200),
            sync_interval: Duration::from_secs(1),
        }
    }
}

/// What an action on a plugin needs to know about it: its name, what a new
/// row starts from, and the grant in force now. Components and MCP servers
/// are both subjects: one table, one set of rules.
#[derive(Debug, Clone)]
pub struct Subject {
    /// Plugin (or MCP server) name.
    pub name: String,
    version: String,
    kind: String,
    enabled: bool,
    grant: Capabilities,
    mcp: bool,
}

impl Subject {
    /// A component, from its registry entry.
    pub fn component(entry: &PluginEntry) -> Result<Self, AdminError> {
        let m = entry.manifest.as_ref().ok_or_else(|| {
            AdminError::Invalid(format!(
                "plugin at {} has no readable manifest",
                entry.dir.display()
            ))
        })?;
        Ok(Self {
            name: entry.name(),
            version: m.plugin.version.clone(),
            kind: m.plugin.kind.as_str().to_string(),
            enabled: !matches!(entry.status, PluginStatus::Disabled),
            grant: entry.effective_grant(),
            mcp: false,
        })
    }

    /// An MCP server.
    pub fn mcp(server: &turnstone_mcp::McpServer) -> Self {
        Self {
            name: server.name.clone(),
            version: String::new(),
            kind: "mcp".into(),
            enabled: !server.config.disabled,
            grant: server.grant().clone(),
            mcp: true,
        }
    }

    /// Whether this is an MCP server.
    pub fn is_mcp(&self) -> bool {
        self.mcp
    }
}

/// Database side of every action; shared by the API and the offline CLI.
pub struct PluginStore<'a> {
    db: &'a Storage,
}

impl<'a> PluginStore<'a> {
    /// Over `db`.
    pub fn new(db: &'a Storage) -> Self {
        Self { db }
    }

    /// The row for `s`, created from what is in force when there is none.
    async fn ensure_row(&self, s: &Subject) -> Result<PluginRecord, AdminError> {
        let name = s.name.clone();
        if let Some(r) = self.db.get_plugin(&name).await? {
            return Ok(r);
        }
        let rec = PluginRecord {
            name: name.clone(),
            version: s.version.clone(),
            kind: s.kind.clone(),
            enabled: s.enabled,
            granted: None,
            config: "{}".into(),
            state: "unknown".into(),
            last_error: None,
            updated: String::new(),
            reload_seq: 0,
        };
        self.db.upsert_plugin(&rec).await?;
        Ok(self.db.get_plugin(&name).await?.unwrap_or(rec))
    }

    /// Writes one entry to the audit log (a failed write is logged, never fatal).
    pub async fn audit(&self, actor: &Actor, action: &str, name: &str, detail: Value) {
        let e = AuditEntry {
            id: 0,
            timestamp: String::new(),
            user_id: actor.user_id.clone(),
            action: action.to_string(),
            target: Some(name.to_string()),
            detail: Some(json!({ "via": actor.via, "detail": detail }).to_string()),
            ip: actor.ip.clone(),
        };
        if let Err(e) = self.db.append_audit(&e).await {
            tracing::error!(plugin = %name, "audit log write failed: {e}");
        }
    }

    /// Enables or disables.
    pub async fn set_enabled(
        &self,
        actor: &Actor,
        subject: &Subject,
        enabled: bool,
    ) -> Result<(), AdminError> {
        let name = subject.name.clone();
        self.ensure_row(subject).await?;
        self.db.set_plugin_enabled(&name, enabled).await?;
        let action = if enabled {
            "plugin.enable"
        } else {
            "plugin.disable"
        };
        self.audit(actor, action, &name, Value::Null).await;
        Ok(())
    }

    /// Replaces the grant (`None`: back to the default for the plugin's origin).
    pub async fn set_grant(
        &self,
        actor: &Actor,
        subject: &Subject,
        grant: Option<&Capabilities>,
    ) -> Result<(), AdminError> {
        if let Some(g) = grant {
            g.validate()
                .map_err(|e| AdminError::Invalid(e.to_string()))?;
        }
        let name = subject.name.clone();
        let before = self.current_grant(subject).await?;
        self.ensure_row(subject).await?;
        let json = grant.map(|g| serde_json::to_string(g).unwrap_or_default());
        self.db.set_plugin_grants(&name, json.as_deref()).await?;
        self.audit(
            actor,
            "plugin.grant",
            &name,
            json!({ "before": before, "after": grant }),
        )
        .await;
        Ok(())
    }

    /// The grant in force: the stored one, else what the subject says.
    pub async fn current_grant(&self, subject: &Subject) -> Result<Capabilities, AdminError> {
        let row = self.db.get_plugin(&subject.name).await?;
        Ok(match row.and_then(|r| r.granted) {
            Some(g) => serde_json::from_str(&g).unwrap_or_default(),
            None => subject.grant.grantable(),
        })
    }

    /// Removes the listed capabilities from the grant (all of them when `what`
    /// is `None`). Returns the grant left.
    pub async fn revoke(
        &self,
        actor: &Actor,
        subject: &Subject,
        what: Option<&Capabilities>,
    ) -> Result<Capabilities, AdminError> {
        let name = subject.name.clone();
        let before = self.current_grant(subject).await?;
        let after = match what {
            None => Capabilities::default(),
            Some(w) => subtract(&before, w),
        };
        self.ensure_row(subject).await?;
        let text = serde_json::to_string(&after).unwrap_or_default();
        self.db.set_plugin_grants(&name, Some(&text)).await?;
        self.audit(
            actor,
            "plugin.revoke",
            &name,
            json!({ "before": before, "revoked": what, "after": after }),
        )
        .await;
        Ok(after)
    }

    /// Replaces the stored config overlay (values the plugin reads with
    /// `config.get`, laid over `[plugins.config.<name>]`).
    pub async fn set_config(
        &self,
        actor: &Actor,
        subject: &Subject,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), AdminError> {
        if subject.mcp {
            return Err(AdminError::Invalid(format!(
                "{} is an MCP server: it reads no config values; change its definition instead \
                 (PUT /v1/api/admin/mcp-servers/{})",
                subject.name, subject.name
            )));
        }
        let name = subject.name.clone();
        let mut row = self.ensure_row(subject).await?;
        let before: Value = serde_json::from_str(&row.config).unwrap_or(Value::Null);
        row.config = serde_json::to_string(config).unwrap_or_else(|_| "{}".into());
        self.db.upsert_plugin(&row).await?;
        self.audit(
            actor,
            "plugin.config",
            &name,
            json!({ "before": before, "after": config }),
        )
        .await;
        Ok(())
    }

    /// Asks every node to reload the plugin from disk (an MCP server: to reconnect).
    pub async fn request_reload(&self, actor: &Actor, subject: &Subject) -> Result<(), AdminError> {
        let name = subject.name.clone();
        self.ensure_row(subject).await?;
        self.db.request_plugin_reload(&name).await?;
        self.audit(actor, "plugin.reload", &name, Value::Null).await;
        Ok(())
    }
}

/// `grant` without anything listed in `what`.
pub fn subtract(grant: &Capabilities, what: &Capabilities) -> Capabilities {
    let keep = |have: &[String], drop: &[String]| -> Vec<String> {
        have.iter().filter(|h| !drop.contains(h)).cloned().collect()
    };
    Capabilities {
        filesystem: grant
            .filesystem
            .iter()
            .filter(|f| !what.filesystem.iter().any(|w| w.path == f.path))
            .cloned()
            .collect(),
        http: keep(&grant.http, &what.http),
        exec: keep(&grant.exec, &what.exec),
        env: keep(&grant.env, &what.env),
        // A secret is revoked by name, whatever it is bound to.
        secrets: grant
            .secrets
            .iter()
            .filter(|s| !what.secrets.iter().any(|w| w.name == s.name))
            .cloned()
            .collect(),
        model: grant.model && !what.model,
        memory: grant.memory.filter(|_| what.memory.is_none()),
        history: grant.history && !what.history,
        skills: grant.skills.filter(|_| what.skills.is_none()),
        session: grant.session && !what.session,
        agents: grant.agents && !what.agents,
        watches: grant.watches && !what.watches,
        notify: grant.notify && !what.notify,
        preview: grant.preview && !what.preview,
        // Not a capability to take back: the operator's sandbox choice stays.
        process_sandbox: grant.process_sandbox,
    }
}

/// Plugin administration on a running node: the reconciler, the directory
/// watcher, the table poller and the actions of the admin API.
pub struct PluginAdmin {
    reconciler: Reconciler,
    runtime: Arc<Runtime>,
    db: Storage,
    shared: Arc<Shared>,
    install_dir: Option<PathBuf>,
    last_state: Mutex<OperatorState>,
    /// Serialises install/uninstall so two uploads of one name cannot interleave.
    files: Mutex<()>,
    /// The node's MCP servers, reconciled from the same tables.
    mcp: Option<Arc<McpHub>>,
    /// `[plugins] require_signatures` / `trusted_keys`, for installs.
    signatures: turnstone_runtime::signing::SignaturePolicy,
    /// The node's channel adapters, once their hub runs (for their state).
    channels: std::sync::OnceLock<std::sync::Weak<crate::channels::ChannelHub>>,
    _watcher: Option<turnstone_runtime::reconcile::PluginWatcher>,
}

impl PluginAdmin {
    /// Starts reconciling `live` (loaded with `options` and `state`) and
    /// `mcp` (already applied with `state`), the watcher (when enabled) and
    /// the table poller.
    #[allow(clippy::too_many_arguments)]
    pub async fn start(
        runtime: Arc<Runtime>,
        options: LoadOptions,
        live: Arc<LivePlugins>,
        shared: Arc<Shared>,
        db: Storage,
        state: OperatorState,
        mcp: Option<Arc<McpHub>>,
        opts: AdminOptions,
    ) -> Arc<Self> {
        let install_dir = options.config.install_dir();
        // Validated at start-up; a bad key here fails closed.
        let signatures = options.config.signature_policy().unwrap_or_else(|_| {
            turnstone_runtime::signing::SignaturePolicy {
                required: true,
                trusted: Vec::new(),
            }
        });
        if let Some(d) = &install_dir
            && let Err(e) = tokio::fs::create_dir_all(d).await
        {
            tracing::warn!(dir = %d.display(), "cannot create the plugin install directory: {e}");
        }
        let mut watch_dirs: Vec<PathBuf> = options.builtin_dir.iter().cloned().collect();
        watch_dirs.extend(options.config.scan_dirs());
        let reconciler = Reconciler::spawn(
            runtime.clone(),
            options,
            live,
            state.plugins.clone(),
            shared.clone(),
        );
        let watcher = if opts.watch {
            match reconciler.watch(&watch_dirs, opts.debounce) {
                Ok(w) => {
                    tracing::info!(dirs = ?w.dirs(), "watching plugin directories");
                    Some(w)
                }
                Err(e) => {
                    tracing::warn!("plugin directories are not watched: {e}");
                    None
                }
            }
        } else {
            None
        };
        let admin = Arc::new(Self {
            reconciler,
            runtime,
            db,
            shared,
            install_dir,
            last_state: Mutex::new(state),
            files: Mutex::new(()),
            mcp,
            signatures,
            channels: std::sync::OnceLock::new(),
            _watcher: watcher,
        });
        tokio::spawn(persist_states(
            Arc::downgrade(&admin),
            admin.reconciler.subscribe(),
        ));
        if let Some(hub) = &admin.mcp {
            tokio::spawn(super::mcp::persist_mcp_states(
                Arc::downgrade(&admin),
                hub.subscribe(),
            ));
        }
        tokio::spawn(poll_table(Arc::downgrade(&admin), opts.sync_interval));
        admin
    }

    /// The reconciler.
    pub fn reconciler(&self) -> &Reconciler {
        &self.reconciler
    }

    /// Counters and key-value namespaces per plugin.
    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The database.
    pub fn db(&self) -> &Storage {
        &self.db
    }

    /// The node's MCP servers.
    pub fn mcp(&self) -> Option<&Arc<McpHub>> {
        self.mcp.as_ref()
    }

    /// Attaches the channel hub whose adapters' state the views show.
    pub fn set_channels(&self, hub: &Arc<crate::channels::ChannelHub>) {
        let _ = self.channels.set(Arc::downgrade(hub));
    }

    /// A channel adapter's link state on this node.
    pub fn channel_status(&self, name: &str) -> Option<crate::channels::AdapterStatus> {
        self.channels
            .get()
            .and_then(|w| w.upgrade())
            .and_then(|h| h.statuses().remove(name))
    }

    /// Re-reads the tables and applies them if they changed: components
    /// through the reconciler, MCP servers through the hub. The report is
    /// the components' pass (empty when only MCP servers changed).
    pub async fn sync(&self) -> Result<Option<Report>, AdminError> {
        let state = operator_state(&self.db).await?;
        let mut last = self.last_state.lock().await;
        if *last == state {
            return Ok(None);
        }
        let components_changed = last.plugins != state.plugins;
        *last = state.clone();
        if let Some(hub) = &self.mcp {
            for change in hub.apply(&state.mcp, &state.plugins.plugins) {
                tracing::info!(?change, "MCP server change applied");
            }
        }
        if !components_changed {
            return Ok(Some(Report::default()));
        }
        let report = self
            .reconciler
            .set_desired(state.plugins)
            .await
            .map_err(|_| AdminError::Stopped)?;
        Ok(Some(report))
    }

    /// The component named `name` on this node.
    pub fn entry(&self, name: &str) -> Result<PluginEntry, AdminError> {
        self.reconciler
            .live()
            .snapshot()
            .entry(name)
            .cloned()
            .ok_or_else(|| AdminError::NotFound(name.to_string()))
    }

    /// The component or MCP server named `name` on this node.
    pub fn subject(&self, name: &str) -> Result<Subject, AdminError> {
        if let Ok(entry) = self.entry(name) {
            return Subject::component(&entry);
        }
        match self.mcp.as_ref().and_then(|h| h.server(name)) {
            Some(server) => Ok(Subject::mcp(&server)),
            None => Err(AdminError::NotFound(name.to_string())),
        }
    }

    /// Enables or disables `name` and applies it here.
    pub async fn set_enabled(&self, actor: &Actor, name: &str, on: bool) -> Result<(), AdminError> {
        let subject = self.subject(name)?;
        PluginStore::new(&self.db)
            .set_enabled(actor, &subject, on)
            .await?;
        self.sync().await?;
        Ok(())
    }

    /// Sets (or resets with `None`) the grant of `name` and applies it here.
    pub async fn set_grant(
        &self,
        actor: &Actor,
        name: &str,
        grant: Option<&Capabilities>,
    ) -> Result<(), AdminError> {
        let subject = self.subject(name)?;
        PluginStore::new(&self.db)
            .set_grant(actor, &subject, grant)
            .await?;
        self.sync().await?;
        Ok(())
    }

    /// Replaces the config overlay of `name` and applies it here.
    pub async fn set_config(
        &self,
        actor: &Actor,
        name: &str,
        config: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), AdminError> {
        let subject = self.subject(name)?;
        PluginStore::new(&self.db)
            .set_config(actor, &subject, config)
            .await?;
        self.sync().await?;
        Ok(())
    }

    /// Revokes capabilities of `name` and applies it here.
    pub async fn revoke(
        &self,
        actor: &Actor,
        name: &str,
        what: Option<&Capabilities>,
    ) -> Result<Capabilities, AdminError> {
        let subject = self.subject(name)?;
        let left = PluginStore::new(&self.db)
            .revoke(actor, &subject, what)
            .await?;
        self.sync().await?;
        Ok(left)
    }

    /// Reloads `name` from disk on every node (this one before returning), or
    /// rescans everything on this node when `name` is `None`.
    pub async fn reload(&self, actor: &Actor, name: Option<&str>) -> Result<Report, AdminError> {
        match name {
            Some(n) => {
                let subject = self.subject(n)?;
                PluginStore::new(&self.db)
                    .request_reload(actor, &subject)
                    .await?;
                Ok(self.sync().await?.unwrap_or_default())
            }
            None => {
                PluginStore::new(&self.db)
                    .audit(actor, "plugin.reload_all", "*", Value::Null)
                    .await;
                self.reconciler
                    .reload(None)
                    .await
                    .map_err(|_| AdminError::Stopped)
            }
        }
    }

    /// Installs (or with `replace` upgrades) an uploaded plugin; see
    /// [`install_plugin`]. Applied here before returning.
    pub async fn install(
        &self,
        actor: &Actor,
        manifest_text: &str,
        wasm: Vec<u8>,
        signature: Option<&str>,
        replace: bool,
    ) -> Result<String, AdminError> {
        let root = self.install_dir.clone().ok_or_else(|| {
            AdminError::Invalid("no install directory: set [plugins] install_dir or dirs".into())
        })?;
        let name = {
            let _files = self.files.lock().await;
            let snap = self.reconciler.live().snapshot();
            install_plugin(
                &self.runtime,
                &root,
                &self.db,
                &snap,
                actor,
                Upload {
                    manifest: manifest_text,
                    wasm,
                    signature,
                },
                &self.signatures,
                replace,
            )
            .await?
        };
        self.apply_file_change().await?;
        Ok(name)
    }

    /// Removes a third-party plugin; see [`uninstall_plugin`]. Calls in flight
    /// finish on the version they hold. An MCP server defined at run time is
    /// deleted ([`PluginAdmin::delete_mcp_server`]).
    pub async fn uninstall(&self, actor: &Actor, name: &str) -> Result<(), AdminError> {
        if self.entry(name).is_err() && self.subject(name).is_ok_and(|s| s.is_mcp()) {
            return self.delete_mcp_server(actor, name).await;
        }
        let entry = self.entry(name)?;
        {
            let _files = self.files.lock().await;
            uninstall_plugin(&self.db, &entry, actor).await?;
        }
        self.apply_file_change().await?;
        Ok(())
    }

    /// Applies the table and rescans now rather than waiting for the watcher.
    async fn apply_file_change(&self) -> Result<(), AdminError> {
        self.sync().await?;
        self.reconciler
            .rescan()
            .await
            .map_err(|_| AdminError::Stopped)?;
        Ok(())
    }
}

/// Checks a plugin (manifest + component) by loading it with nothing granted,
/// then puts it in `root/<name>/`. A new plugin lands disabled with an empty
/// grant, so the operator reviews what it requests before anything runs.
/// With `replace`, an installed third-party plugin of that name is upgraded
/// in place (grant and state kept). Built-ins cannot be replaced.
#[allow(clippy::too_many_arguments)]
/// A plugin to install: its manifest text, component and signature file.
pub struct Upload<'a> {
    /// `plugin.toml`.
    pub manifest: &'a str,
    /// The component.
    pub wasm: Vec<u8>,
    /// `plugin.sig`, when signed.
    pub signature: Option<&'a str>,
}

#[allow(clippy::too_many_arguments)]
pub async fn install_plugin(
    runtime: &Runtime,
    root: &Path,
    db: &Storage,
    current: &turnstone_runtime::PluginRegistry,
    actor: &Actor,
    upload: Upload<'_>,
    signatures: &turnstone_runtime::signing::SignaturePolicy,
    replace: bool,
) -> Result<String, AdminError> {
    let Upload {
        manifest: manifest_text,
        wasm,
        signature,
    } = upload;
    let manifest = Manifest::parse(manifest_text, Path::new("plugin.toml"))
        .map_err(|e| AdminError::Invalid(e.to_string()))?;
    // Required: a trusted signature; offered anyway: it must hold.
    let checked = if signatures.required {
        signatures.check(false, signature, manifest_text.as_bytes(), &wasm)
    } else {
        match signature {
            Some(s) => {
                turnstone_runtime::signing::verify(Some(s), manifest_text.as_bytes(), &wasm, None)
                    .map(|_| ())
            }
            None => Ok(()),
        }
    };
    checked.map_err(|e| AdminError::Invalid(format!("signature: {e}")))?;
    let name = manifest.plugin.name.clone();
    let existing = current.entry(&name).cloned();
    match &existing {
        Some(e) if e.builtin => {
            return Err(AdminError::Conflict(format!(
                "{name} is a built-in plugin; it cannot be replaced by an upload"
            )));
        }
        Some(_) if !replace => {
            return Err(AdminError::Conflict(format!(
                "{name} is already installed; upload with replace=true to upgrade it"
            )));
        }
        _ => {}
    }
    let dest = root.join(&name);
    if let Some(e) = &existing
        && e.dir != dest
    {
        return Err(AdminError::Conflict(format!(
            "{name} is installed in {}, not in the install directory {}",
            e.dir.display(),
            root.display()
        )));
    }
    // Validate exactly as a load would, with nothing granted.
    runtime
        .load_bytes(
            PluginSource {
                dir: dest.clone(),
                builtin: false,
            },
            manifest.clone(),
            wasm.clone(),
            PluginSettings {
                grant: Some(Capabilities::default()),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| AdminError::Invalid(format!("the component does not load: {e}")))?;
    tokio::fs::create_dir_all(root)
        .await
        .map_err(|e| AdminError::Io(format!("cannot create {}: {e}", root.display())))?;
    write_plugin_dir(
        root,
        &name,
        manifest_text,
        &manifest.component_file(),
        &wasm,
        signature,
    )
    .await
    .map_err(|e| AdminError::Io(format!("cannot write {}: {e}", dest.display())))?;
    if existing.is_none() {
        let rec = PluginRecord {
            name: name.clone(),
            version: manifest.plugin.version.clone(),
            kind: manifest.plugin.kind.as_str().to_string(),
            enabled: false,
            granted: Some("{}".into()),
            config: "{}".into(),
            state: "disabled".into(),
            last_error: None,
            updated: String::new(),
            reload_seq: 0,
        };
        db.upsert_plugin(&rec).await?;
    }
    PluginStore::new(db)
        .audit(
            actor,
            if existing.is_some() {
                "plugin.upgrade"
            } else {
                "plugin.install"
            },
            &name,
            json!({
                "version": manifest.plugin.version,
                "requested": manifest.capabilities,
                "sha256": hex_sha256(&wasm),
            }),
        )
        .await;
    Ok(name)
}

/// Removes a third-party plugin's directory and its row.
pub async fn uninstall_plugin(
    db: &Storage,
    entry: &PluginEntry,
    actor: &Actor,
) -> Result<(), AdminError> {
    let name = entry.name();
    if entry.builtin {
        return Err(AdminError::Invalid(format!(
            "{name} is a built-in plugin; disable it instead"
        )));
    }
    tokio::fs::remove_dir_all(&entry.dir)
        .await
        .map_err(|e| AdminError::Io(format!("cannot remove {}: {e}", entry.dir.display())))?;
    db.delete_plugin(&name).await?;
    PluginStore::new(db)
        .audit(
            actor,
            "plugin.uninstall",
            &name,
            json!({ "dir": entry.dir }),
        )
        .await;
    Ok(())
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// Writes `root/name/{plugin.toml, component}` so a watcher never sees half a
/// plugin: a new plugin is staged in a hidden directory and renamed into
/// place; an upgrade replaces each file by rename (component first).
async fn write_plugin_dir(
    root: &Path,
    name: &str,
    manifest: &str,
    component: &str,
    wasm: &[u8],
    signature: Option<&str>,
) -> std::io::Result<()> {
    use turnstone_runtime::signing::SIGNATURE_FILE;
    if !turnstone_runtime::manifest::valid_name(name)
        || component.contains('/')
        || component.contains("..")
    {
        return Err(std::io::Error::other("unsafe plugin or component name"));
    }
    let dest = root.join(name);
    if dest.is_dir() {
        // The signature first: a watcher that sees the new component sees
        // its signature with it (a stale one would read as tampering).
        match signature {
            Some(sig) => {
                let tmp = dest.join(format!(".{SIGNATURE_FILE}.tmp"));
                tokio::fs::write(&tmp, sig).await?;
                tokio::fs::rename(&tmp, dest.join(SIGNATURE_FILE)).await?;
            }
            None => match tokio::fs::remove_file(dest.join(SIGNATURE_FILE)).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            },
        }
        for (file, bytes) in [(component, wasm), ("plugin.toml", manifest.as_bytes())] {
            let tmp = dest.join(format!(".{file}.tmp"));
            tokio::fs::write(&tmp, bytes).await?;
            tokio::fs::rename(&tmp, dest.join(file)).await?;
        }
        return Ok(());
    }
    let stage = root.join(format!(".{name}.staging"));
    let _ = tokio::fs::remove_dir_all(&stage).await;
    tokio::fs::create_dir_all(&stage).await?;
    tokio::fs::write(stage.join(component), wasm).await?;
    tokio::fs::write(stage.join("plugin.toml"), manifest).await?;
    if let Some(sig) = signature {
        tokio::fs::write(stage.join(SIGNATURE_FILE), sig).await?;
    }
    tokio::fs::rename(&stage, &dest).await
}

/// Writes each pass's outcome into existing rows (`state`, `last_error`).
async fn persist_states(
    admin: std::sync::Weak<PluginAdmin>,
    mut rx: tokio::sync::broadcast::Receiver<Report>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let report = match rx.recv().await {
            Ok(r) => r,
            Err(RecvError::Lagged(_)) => continue,
            Err(RecvError::Closed) => return,
        };
        let Some(admin) = admin.upgrade() else { return };
        let snap = admin.reconciler.live().snapshot();
        for c in &report.changes {
            let (state, err) = match snap.entry(&c.plugin) {
                None => continue,
                Some(e) => match (&e.status, &e.update_error) {
                    (PluginStatus::Loaded(_), Some(u)) => ("update_failed", Some(u.clone())),
                    (PluginStatus::Loaded(_), None) => ("loaded", None),
                    (PluginStatus::Disabled, _) => ("disabled", None),
                    (PluginStatus::Failed(r), _) => ("failed", Some(r.clone())),
                },
            };
            if let Err(e) = admin
                .db
                .set_plugin_state(&c.plugin, state, err.as_deref())
                .await
            {
                tracing::warn!(plugin = %c.plugin, "cannot record plugin state: {e}");
            }
            // Keep the stored version in step with what serves after an update.
            let serving = snap.entry(&c.plugin).and_then(|e| match &e.status {
                PluginStatus::Loaded(p) => Some(p.manifest.plugin.version.clone()),
                _ => None,
            });
            if let (Some(v), Ok(Some(mut row))) = (serving, admin.db.get_plugin(&c.plugin).await)
                && row.version != v
            {
                row.version = v;
                if let Err(e) = admin.db.upsert_plugin(&row).await {
                    tracing::warn!(plugin = %c.plugin, "cannot record plugin version: {e}");
                }
            }
        }
    }
}

/// Polls the `plugins` table so changes made elsewhere apply here.
async fn poll_table(admin: std::sync::Weak<PluginAdmin>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(50)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(admin) = admin.upgrade() else { return };
        match admin.sync().await {
            Ok(Some(r)) if !r.changes.is_empty() => {
                tracing::info!(
                    changes = r.changes.len(),
                    "applied plugin changes from the database"
                )
            }
            Ok(_) => {}
            Err(AdminError::Stopped) => return,
            Err(e) => tracing::warn!("plugin state poll failed: {e}"),
        }
    }
}
