//! The `[plugins]` section of `config.toml`.
//!
//! ```toml
//! [plugins]
//! dirs = ["~/.turnstone/plugins"]   # third-party plugin directories
//! builtin_dir = "/opt/turnstone/components"  # default: next to the binary
//! cache_dir = "~/.cache/turnstone/components"
//! install_dir = "~/.turnstone/plugins"   # default: first of dirs, else ~/.local/share/turnstone/plugins
//! watch = true                       # hot-reload on file changes (server)
//! disabled = ["word_count"]
//! memory_mb = 256                    # default per-call memory cap
//! timeout_secs = 120                 # default per-call deadline
//! max_concurrent_calls = 1024        # calls run at once; more wait for a slot
//! admission_wait_secs = 30           # ... this long, then fail
//!
//! [plugins.grants.word_count]        # operator grants (third-party: none by default)
//! filesystem = [{ path = "workspace", access = "read-only" }]
//! http = ["api.example.com"]
//!
//! [plugins.config.word_count]        # values the plugin reads with config.get
//! mode = "strict"
//!
//! [plugins.limits.word_count]
//! memory_mb = 64
//! timeout_secs = 10
//! ```

use crate::capability::{Capabilities, CapabilityParseError};
use crate::plugin::Limits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Per-plugin limit overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Memory cap in MiB.
    pub memory_mb: Option<u64>,
    /// Deadline in seconds.
    pub timeout_secs: Option<u64>,
}

/// `[plugins]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginsConfig {
    /// Third-party plugin directories (each holds one sub-directory per plugin).
    #[serde(default)]
    pub dirs: Vec<PathBuf>,
    /// Where `plugins install` puts new plugins; default: the first of `dirs`,
    /// else `$XDG_DATA_HOME/turnstone/plugins` (`~/.local/share/turnstone/plugins`).
    pub install_dir: Option<PathBuf>,
    /// Watch plugin directories and hot-reload changes (server; default true).
    pub watch: Option<bool>,
    /// Directory of built-in components; default: `components/` beside the binary.
    pub builtin_dir: Option<PathBuf>,
    /// Precompiled component cache.
    pub cache_dir: Option<PathBuf>,
    /// Plugins not to load.
    #[serde(default)]
    pub disabled: Vec<String>,
    /// Built-in plugins that are off until named here (the chat channel
    /// adapters `discord` and `slack`).
    #[serde(default)]
    pub enabled: Vec<String>,
    /// Default memory cap per call, MiB.
    pub memory_mb: Option<u64>,
    /// Default deadline per call, seconds.
    pub timeout_secs: Option<u64>,
    /// Plugin calls this node runs at once (instance slots); default 1,024.
    pub max_concurrent_calls: Option<u32>,
    /// How long a call beyond them waits for a slot, seconds; default 30,
    /// 0 fails such a call at once.
    pub admission_wait_secs: Option<u64>,
    /// Operator grants by plugin name.
    #[serde(default)]
    pub grants: BTreeMap<String, Capabilities>,
    /// Plugin config values by plugin name.
    #[serde(default)]
    pub config: BTreeMap<String, BTreeMap<String, String>>,
    /// Limit overrides by plugin name.
    #[serde(default)]
    pub limits: BTreeMap<String, LimitOverrides>,
    /// Public keys (`ed25519:<base64>`) whose signatures are trusted
    /// (`turnstone plugins keygen` prints one).
    #[serde(default)]
    pub trusted_keys: Vec<String>,
    /// Load, hot-reload and install third-party plugins only with a valid
    /// `plugin.sig` by a trusted key (built-ins are trusted by their install
    /// path). Default off.
    #[serde(default)]
    pub require_signatures: bool,
}

impl PluginsConfig {
    /// The signature policy; a malformed trusted key is an error naming it.
    pub fn signature_policy(
        &self,
    ) -> Result<crate::signing::SignaturePolicy, crate::signing::SignatureError> {
        crate::signing::SignaturePolicy::new(self.require_signatures, &self.trusted_keys)
    }

    /// The engine options these settings ask for: admission (slots and the
    /// wait) over the defaults. Out-of-range values are an error naming the key.
    pub fn engine_options(&self) -> Result<crate::engine::EngineOptions, String> {
        let mut opts = crate::engine::EngineOptions::default();
        if let Some(n) = self.max_concurrent_calls {
            // Each slot reserves address space for two memories with their
            // guard regions (several GiB); past ~16k slots the pool no longer
            // fits in a 47-bit address space.
            if !(1..=8_192).contains(&n) {
                return Err(format!(
                    "[plugins] max_concurrent_calls = {n}: must be 1 to 8192"
                ));
            }
            opts.max_instances = n;
        }
        if let Some(w) = self.admission_wait_secs {
            if w > 3600 {
                return Err(format!(
                    "[plugins] admission_wait_secs = {w}: must be 0 to 3600"
                ));
            }
            opts.admission_wait = std::time::Duration::from_secs(w);
        }
        Ok(opts)
    }

    /// Where new plugins are installed (see [`PluginsConfig::install_dir`]).
    pub fn install_dir(&self) -> Option<PathBuf> {
        if let Some(d) = &self.install_dir {
            return Some(expand_home(d));
        }
        if let Some(d) = self.dirs.first() {
            return Some(expand_home(d));
        }
        std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .map(|d| d.join("turnstone/plugins"))
    }

    /// Third-party directories to scan: `dirs` plus the install directory.
    pub fn scan_dirs(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = self.dirs.iter().map(|d| expand_home(d)).collect();
        if let Some(i) = self.install_dir()
            && !out.contains(&i)
        {
            out.push(i);
        }
        out
    }

    /// Rejects malformed grants up front.
    pub fn validate(&self) -> Result<(), (String, CapabilityParseError)> {
        for (name, grant) in &self.grants {
            grant.validate().map_err(|e| (name.clone(), e))?;
        }
        Ok(())
    }

    /// Effective limits for `plugin` without manifest defaults.
    pub fn limits_for(&self, plugin: &str) -> Limits {
        self.limits_with(plugin, &LimitOverrides::default())
    }

    /// Effective limits for `plugin`: the operator's per-plugin setting, else
    /// the manifest's default, else the global default, else the built-in one.
    pub fn limits_with(&self, plugin: &str, manifest: &LimitOverrides) -> Limits {
        let base = Limits::default();
        let o = self.limits.get(plugin).cloned().unwrap_or_default();
        let mb = o.memory_mb.or(manifest.memory_mb).or(self.memory_mb);
        let secs = o
            .timeout_secs
            .or(manifest.timeout_secs)
            .or(self.timeout_secs);
        Limits {
            memory_bytes: mb.map_or(base.memory_bytes, |m| (m as usize) << 20),
            call_timeout: secs.map_or(base.call_timeout, Duration::from_secs),
        }
    }
}

/// Expands a leading `~/` with `$HOME`.
pub fn expand_home(p: &std::path::Path) -> PathBuf {
    match (p.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => p.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_keys_set_the_engine_options_and_bad_values_name_the_key() {
        let cfg: PluginsConfig =
            toml::from_str("max_concurrent_calls = 8\nadmission_wait_secs = 0").unwrap();
        let o = cfg.engine_options().unwrap();
        assert_eq!(o.max_instances, 8);
        assert_eq!(o.admission_wait, Duration::ZERO);
        let d = PluginsConfig::default().engine_options().unwrap();
        assert_eq!(d.max_instances, 1024);
        assert_eq!(d.admission_wait, Duration::from_secs(30));
        let zero: PluginsConfig = toml::from_str("max_concurrent_calls = 0").unwrap();
        let e = zero.engine_options().unwrap_err();
        assert!(e.contains("max_concurrent_calls = 0"), "{e}");
        let huge: PluginsConfig = toml::from_str("max_concurrent_calls = 65536").unwrap();
        let e = huge.engine_options().unwrap_err();
        assert!(e.contains("must be 1 to 8192"), "{e}");
        let long: PluginsConfig = toml::from_str("admission_wait_secs = 7200").unwrap();
        let e = long.engine_options().unwrap_err();
        assert!(e.contains("admission_wait_secs = 7200"), "{e}");
    }

    #[test]
    fn limits_fall_back_from_plugin_to_global_to_default() {
        let cfg: PluginsConfig = toml::from_str(
            r#"
memory_mb = 100
[limits.a]
timeout_secs = 5
"#,
        )
        .unwrap();
        let a = cfg.limits_for("a");
        assert_eq!(a.memory_bytes, 100 << 20);
        assert_eq!(a.call_timeout, Duration::from_secs(5));
        let b = cfg.limits_for("b");
        assert_eq!(b.call_timeout, Limits::default().call_timeout);
    }

    #[test]
    fn bad_grants_are_rejected() {
        let cfg: PluginsConfig = toml::from_str("[grants.x]\nhttp = [\"*\"]\n").unwrap();
        assert_eq!(cfg.validate().unwrap_err().0, "x");
    }
}
