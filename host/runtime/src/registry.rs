//! Discovery and loading of every plugin the host knows about, with per-plugin
//! status: a broken plugin is recorded as failed with its reason and never
//! stops the others.

use crate::Runtime;
use crate::capability::Capabilities;
use crate::config::{PluginsConfig, expand_home};
use crate::host::kv::MemoryKv;
use crate::manifest::Manifest;
use crate::plugin::{
    EnvSecrets, LoadedPlugin, PluginSettings, PluginSource, SecretSource, ToolSpec,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// State of one plugin.
pub enum PluginStatus {
    /// Loaded and callable.
    Loaded(Arc<LoadedPlugin>),
    /// Disabled by the operator.
    Disabled,
    /// Failed to load.
    Failed(String),
}

/// One discovered plugin.
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
    entries: Vec<PluginEntry>,
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
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            builtin_dir: None,
            config: PluginsConfig::default(),
            workspace: None,
            secrets: Arc::new(EnvSecrets),
            network: Default::default(),
        }
    }
}

/// Plugin directories (sub-directories holding a `plugin.toml`) under `root`,
/// sorted by name. A missing root yields nothing.
pub fn discover(root: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

impl PluginRegistry {
    /// Loads built-ins and third-party plugins. Never fails as a whole.
    pub async fn load_all(runtime: &Runtime, opts: &LoadOptions) -> Self {
        let mut sources: Vec<PluginSource> = Vec::new();
        if let Some(b) = &opts.builtin_dir {
            sources.extend(
                discover(b)
                    .into_iter()
                    .map(|dir| PluginSource { dir, builtin: true }),
            );
        }
        for d in &opts.config.dirs {
            let d = expand_home(d);
            sources.extend(discover(&d).into_iter().map(|dir| PluginSource {
                dir,
                builtin: false,
            }));
        }
        let mut reg = PluginRegistry::default();
        for source in sources {
            let entry = reg.load_one(runtime, opts, source).await;
            match &entry.status {
                PluginStatus::Loaded(p) => tracing::info!(
                    plugin = %p.name(),
                    version = %p.manifest.plugin.version,
                    source = ?p.compile_source,
                    "plugin loaded"
                ),
                PluginStatus::Failed(reason) => {
                    tracing::warn!(plugin = %entry.name(), "plugin failed to load: {reason}")
                }
                PluginStatus::Disabled => {}
            }
            reg.entries.push(entry);
        }
        reg
    }

    async fn load_one(
        &self,
        runtime: &Runtime,
        opts: &LoadOptions,
        source: PluginSource,
    ) -> PluginEntry {
        let mut entry = PluginEntry {
            dir: source.dir.clone(),
            builtin: source.builtin,
            manifest: None,
            grant: None,
            status: PluginStatus::Failed(String::new()),
        };
        let manifest = match Manifest::load(&source.dir.join("plugin.toml")) {
            Ok(m) => m,
            Err(e) => {
                entry.status = PluginStatus::Failed(e.to_string());
                return entry;
            }
        };
        let name = manifest.plugin.name.clone();
        let limits = opts.config.limits_with(&name, &manifest.limits);
        entry.grant = opts.config.grants.get(&name).cloned();
        entry.manifest = Some(manifest);
        if let Some(other) = self.entries.iter().find(|e| {
            e.name() == name && matches!(e.status, PluginStatus::Loaded(_) | PluginStatus::Disabled)
        }) {
            entry.status = PluginStatus::Failed(format!(
                "another plugin named {name} is already loaded from {}",
                other.dir.display()
            ));
            return entry;
        }
        if opts.config.disabled.iter().any(|d| d == &name) {
            entry.status = PluginStatus::Disabled;
            return entry;
        }
        let settings = PluginSettings {
            grant: entry.grant.clone(),
            config: opts.config.config.get(&name).cloned().unwrap_or_default(),
            limits,
            workspace: opts.workspace.clone(),
            secrets: opts.secrets.clone(),
            kv: Arc::new(MemoryKv::default()),
            network: opts.network.clone(),
        };
        entry.status = match runtime.load(source, settings).await {
            Ok(p) => match self.tool_clash(&p) {
                Some(msg) => PluginStatus::Failed(msg),
                None => PluginStatus::Loaded(Arc::new(p)),
            },
            Err(e) => PluginStatus::Failed(e.to_string()),
        };
        entry
    }

    fn tool_clash(&self, p: &LoadedPlugin) -> Option<String> {
        p.tools.iter().find_map(|t| {
            self.tool(&t.name).map(|(other, _)| {
                format!(
                    "tool {} is already provided by plugin {}",
                    t.name,
                    other.name()
                )
            })
        })
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
