//! `config.toml` loading for the host binary. Sections owned by later
//! subsystems (`[models]`, `[server]`, …) are accepted and left for them.

use anyhow::{Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use turnstone_runtime::config::PluginsConfig;

/// The parts of `config.toml` this binary reads today.
#[derive(Debug, Default, Deserialize)]
pub struct HostConfig {
    /// `[plugins]`.
    #[serde(default)]
    pub plugins: PluginsConfig,
    /// `[tools]` (only `workspace` is read here).
    #[serde(default)]
    pub tools: ToolsConfig,
}

/// `[tools]`.
#[derive(Debug, Default, Deserialize)]
pub struct ToolsConfig {
    /// Workspace directory tools operate in.
    pub workspace: Option<PathBuf>,
}

/// Where the config comes from: `--config`, `$TURNSTONE_CONFIG`,
/// `~/.config/turnstone/config.toml`, then `./config.toml`.
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("TURNSTONE_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".config")));
    [
        xdg.map(|d| d.join("turnstone/config.toml")),
        Some(PathBuf::from("config.toml")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_file())
}

/// Reads and validates the config (defaults when there is none).
pub fn load(explicit: Option<&Path>) -> Result<(HostConfig, Option<PathBuf>)> {
    let Some(path) = locate(explicit) else {
        return Ok((HostConfig::default(), None));
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let cfg: HostConfig =
        toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?;
    cfg.plugins
        .validate()
        .map_err(|(name, e)| anyhow::anyhow!("{}: [plugins.grants.{name}]: {e}", path.display()))?;
    Ok((cfg, Some(path)))
}

/// Default component cache directory.
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("turnstone/components"))
}
