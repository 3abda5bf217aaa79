//! Discovery and loading of every plugin the host knows about, with per-plugin
//! status: a broken plugin is recorded as failed with its reason and never
//! stops the others.

use crate::Runtime;
use crate::capability::Capabilities;
use crate::config::PluginsConfig;
use crate::manifest::Manifest;
use crate::plugin::{EnvSecrets, LoadedPlugin, SecretSource, ToolSpec};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// State of one plugin.
#[derive(Clone)]
pub enum PluginStatus {
    /// Loaded and callable.
    Loaded(Arc<LoadedPlugin>),
    /// Disabled by the operator.
    Disabled,
    /// Failed to load.
    Failed(String),
}

/// One discovered plugin.
#[derive(Clone)]
pub struct PluginEntry {
    /// Plugin directory.
    pub dir: PathBuf,
    /// Shipped with the host.
    pub builtin: bool,
    /// The manifest, when it parsed.
    pub manifest: Option<Manifest>,
    /// The operator's grant (`None`: default for its origin).
    pub grant: Option<Capabilities>,
    /// Status.
    pub status: PluginStatus,
    /// A newer version on disk failed to load; the one in `status` keeps serving.
    pub update_error: Option<String>,
    /// Fingerprint of what is loaded (manifest, component, reload request).
    pub(crate) fingerprint: Option<String>,
    /// Fingerprint of the settings it was loaded with (grant, config, limits).
    pub(crate) settings_key: Option<String>,
    /// Fingerprint of the last version that failed, so it is not retried until it changes.
    pub(crate) failed_fingerprint: Option<String>,
}

impl PluginEntry {
    /// The plugin's name (directory name when the manifest did not parse).
    pub fn name(&self) -> String {
        match &self.manifest {
            Some(m) => m.plugin.name.clone(),
            None => self
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// The grant in force: explicit, else the origin default.
    pub fn effective_grant(&self) -> Capabilities {
        match (&self.grant, &self.manifest) {
            (Some(g), _) => g.clone(),
            (None, Some(m)) if self.builtin => m.capabilities.clone(),
            _ => Capabilities::default(),
        }
    }
}

/// All plugins the host discovered.
#[derive(Default)]
pub struct PluginRegistry {
    pub(crate) entries: Vec<PluginEntry>,
    /// Tools that existed in an earlier generation, by the plugin that had them.
    pub(crate) retired: std::collections::BTreeMap<String, String>,
}

/// Options for [`PluginRegistry::load_all`].
#[derive(Clone)]
pub struct LoadOptions {
    /// Built-in component directory.
    pub builtin_dir: Option<PathBuf>,
    /// Operator config.
    pub config: PluginsConfig,
    /// Workspace directory for `workspace` grants.
    pub workspace: Option<PathBuf>,
    /// Secret values.
    pub secrets: Arc<dyn SecretSource>,
    /// SSRF policy for `<public>` HTTP grants.
    pub network: crate::netguard::NetworkPolicy,
    /// The kernel sandbox for processes plugins spawn.
    pub sandbox: Arc<crate::sandboxing::Sandbox>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            builtin_dir: None,
            config: PluginsConfig::default(),
            workspace: None,
            secrets: Arc::new(EnvSecrets),
            network: Default::default(),
            sandbox: crate::sandboxing::host_sandbox(),
        }
    }
}

/// Plugin directories (sub-directories holding a `plugin.toml`) under `root`,
/// sorted by name. A missing root yields nothing; hidden directories (an
/// install being staged, editor droppings) are skipped.
pub fn discover(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

impl PluginRegistry {
    /// Loads built-ins and third-party plugins. Never fails as a whole.
    pub async fn load_all(runtime: &Runtime, opts: &LoadOptions) -> Self {
        let shared = crate::reconcile::Shared::default();
        let (reg, _) = crate::reconcile::build(
            runtime,
            opts,
            &crate::reconcile::Desired::default(),
            None,
            &crate::reconcile::Reload::None,
            &shared,
        )
        .await;
        reg
    }

    /// Every discovered plugin, in load order.
    pub fn entries(&self) -> &[PluginEntry] {
        &self.entries
    }

    /// A loaded plugin by name.
    pub fn plugin(&self, name: &str) -> Option<&Arc<LoadedPlugin>> {
        self.loaded().find(|p| p.name() == name)
    }

    /// Loaded plugins.
    pub fn loaded(&self) -> impl Iterator<Item = &Arc<LoadedPlugin>> {
        self.entries.iter().filter_map(|e| match &e.status {
            PluginStatus::Loaded(p) => Some(p),
            _ => None,
        })
    }

    /// The plugin providing tool `name`, and the tool's spec.
    pub fn tool(&self, name: &str) -> Option<(&Arc<LoadedPlugin>, &ToolSpec)> {
        self.loaded().find_map(|p| p.tool(name).map(|t| (p, t)))
    }

    /// The plugin that provided tool `name` before it went away (disabled,
    /// removed or dropped by an update), for a clear error to the model.
    pub fn retired_tool(&self, name: &str) -> Option<&str> {
        self.retired.get(name).map(String::as_str)
    }

    /// An entry by plugin name.
    pub fn entry(&self, name: &str) -> Option<&PluginEntry> {
        self.entries.iter().find(|e| e.name() == name)
    }

    /// All tools of loaded plugins.
    pub fn tools(&self) -> impl Iterator<Item = &ToolSpec> {
        self.loaded().flat_map(|p| p.tools.iter())
    }
}

/// The default built-in component directory: `components/` beside the binary,
/// or `../components` (the layout `cargo xtask build` produces under `target/`).
pub fn default_builtin_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin_dir = exe.parent()?;
    [
        bin_dir.join("components"),
        bin_dir.parent()?.join("components"),
    ]
    .into_iter()
    .find(|p| p.is_dir())
}
