//! `plugin.toml`: the manifest each plugin ships beside its component.
//!
//! ```toml
//! [plugin]
//! name = "word_count"
//! version = "0.1.0"
//! kind = "tool"                 # tool | provider | channel | guard
//! wit = "0.1.0"                 # turnstone:plugin version it was built against
//! description = "Counts words"
//! component = "word_count.wasm" # optional; defaults to <name>.wasm
//!
//! [capabilities]
//! filesystem = [{ path = "workspace", access = "read-only" }]
//! http = ["api.example.com"]
//! ```

use crate::capability::{Capabilities, CapabilityParseError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The WIT package versions this host can load.
pub const SUPPORTED_WIT_VERSIONS: &[&str] = &["0.1.0", "0.2.0"];

/// The kind of plugin, i.e. which world its component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// Exports `turnstone:plugin/tool`.
    Tool,
    /// Exports `turnstone:plugin/provider`.
    Provider,
    /// Exports `turnstone:plugin/channel`.
    Channel,
    /// Exports `turnstone:plugin/guard` (0.2.0): an intent judge or an
    /// output guard.
    Guard,
}

impl PluginKind {
    /// The exported interface name (without version).
    pub fn export_interface(self) -> &'static str {
        match self {
            PluginKind::Tool => "turnstone:plugin/tool",
            PluginKind::Provider => "turnstone:plugin/provider",
            PluginKind::Channel => "turnstone:plugin/channel",
            PluginKind::Guard => "turnstone:plugin/guard",
        }
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Tool => "tool",
            PluginKind::Provider => "provider",
            PluginKind::Channel => "channel",
            PluginKind::Guard => "guard",
        }
    }
}

/// The `[plugin]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginInfo {
    /// Unique plugin name.
    pub name: String,
    /// Semantic version of the plugin.
    pub version: String,
    /// Which world it implements.
    pub kind: PluginKind,
    /// `turnstone:plugin` WIT version it targets.
    pub wit: String,
    /// One-line description.
    #[serde(default)]
    pub description: String,
    /// Component file name relative to the manifest.
    #[serde(default)]
    pub component: Option<String>,
}

/// A parsed and validated manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Identity.
    pub plugin: PluginInfo,
    /// Requested capabilities.
    #[serde(default)]
    pub capabilities: Capabilities,
    /// The plugin's own default limits (e.g. a long deadline for a shell tool);
    /// operator settings in `[plugins.limits.<name>]` take precedence.
    #[serde(default)]
    pub limits: crate::config::LimitOverrides,
    /// What a guard reviews (guards only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<GuardInfo>,
}

/// Which review a guard's host asks it for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardReview {
    /// `review-call`: a verdict on a call before approval.
    Call,
    /// `review-output`: findings in a tool's output.
    Output,
}

/// How a guard's review is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuardTier {
    /// Fast and local: run before the approval card is shown.
    Heuristic,
    /// Asks a model: run in the background while the card waits
    /// (`judge_pending`), bounded by `[judge] timeout_secs`.
    Llm,
}

impl GuardTier {
    /// The wire name (`heuristic`, `llm`).
    pub fn as_str(self) -> &'static str {
        match self {
            GuardTier::Heuristic => "heuristic",
            GuardTier::Llm => "llm",
        }
    }
}

/// The `[guard]` table of a guard's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuardInfo {
    /// What the host asks it for.
    pub reviews: Vec<GuardReview>,
    /// How its reviews run.
    pub tier: GuardTier,
}

/// Why a manifest could not be used.
#[derive(Debug, Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The manifest path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// TOML syntax or shape error.
    #[error("invalid manifest {path}: {message}")]
    Parse {
        /// The manifest path.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
    /// A field has an invalid value.
    #[error("invalid manifest {path}: {message}")]
    Invalid {
        /// The manifest path.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Capabilities are malformed.
    #[error("invalid capabilities in {path}: {source}")]
    Capabilities {
        /// The manifest path.
        path: PathBuf,
        /// Cause.
        source: CapabilityParseError,
    },
}

/// Names the plugin admin API routes by (`/api/admin/plugins/audit`, …), so
/// no plugin may take them.
pub const RESERVED_PLUGIN_NAMES: [&str; 3] = ["audit", "install", "reload"];

/// Whether `name` is a valid plugin or tool name (`[A-Za-z0-9_-]{1,64}`).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

impl Manifest {
    /// Reads and validates `plugin.toml` at `path`.
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses and validates manifest text; `path` is used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ManifestError> {
        let mut manifest: Manifest = toml::from_str(text).map_err(|e| ManifestError::Parse {
            path: path.to_path_buf(),
            message: e.message().to_string(),
        })?;
        let invalid = |message: String| ManifestError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let info = &manifest.plugin;
        if !valid_name(&info.name) {
            return Err(invalid(format!(
                "plugin name {:?} must be 1-64 characters of [A-Za-z0-9_-]",
                info.name
            )));
        }
        if RESERVED_PLUGIN_NAMES.contains(&info.name.as_str()) {
            return Err(invalid(format!(
                "plugin name {:?} is reserved (the admin API uses it: /api/admin/plugins/{})",
                info.name, info.name
            )));
        }
        if semver::Version::parse(&info.version).is_err() {
            return Err(invalid(format!(
                "version {:?} is not a semantic version",
                info.version
            )));
        }
        if semver::Version::parse(&info.wit).is_err() {
            return Err(invalid(format!(
                "wit {:?} is not a version (expected e.g. \"0.1.0\")",
                info.wit
            )));
        }
        if let Some(c) = &info.component
            && (c.contains('/') || c.contains('\\') || c.starts_with('.'))
        {
            return Err(invalid(format!(
                "component {c:?} must be a file name next to plugin.toml"
            )));
        }
        match (info.kind, &manifest.guard) {
            (PluginKind::Guard, None) => {
                return Err(invalid(
                    "a guard needs a [guard] table: reviews = [\"call\" | \"output\"], tier = \"heuristic\" | \"llm\"".into(),
                ));
            }
            (PluginKind::Guard, Some(g)) if g.reviews.is_empty() => {
                return Err(invalid("[guard] reviews names nothing to review".into()));
            }
            (PluginKind::Guard, Some(_)) | (_, None) => {}
            (kind, Some(_)) => {
                return Err(invalid(format!(
                    "[guard] is for guards; this plugin is a {}",
                    kind.as_str()
                )));
            }
        }
        // Only the operator decides whether a plugin's processes leave the
        // kernel sandbox (a built-in's request is its default grant).
        if manifest.capabilities.process_sandbox.take().is_some() {
            tracing::warn!(
                "{}: process_sandbox in a manifest is ignored (an operator grant setting)",
                path.display()
            );
        }
        // Any kind may ask for operator-configured hosts; nothing matches until granted.
        let allow_configured = true;
        manifest
            .capabilities
            .validate_with(allow_configured)
            .map_err(|source| ManifestError::Capabilities {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(manifest)
    }

    /// The component file name.
    pub fn component_file(&self) -> String {
        self.plugin
            .component
            .clone()
            .unwrap_or_else(|| format!("{}.wasm", self.plugin.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[plugin]
name = "word_count"
version = "0.1.0"
kind = "tool"
wit = "0.1.0"

[capabilities]
filesystem = [{ path = "workspace", access = "ro" }]
http = ["api.example.com"]
"#;

    #[test]
    fn parses_a_good_manifest() {
        let m = Manifest::parse(GOOD, Path::new("plugin.toml")).unwrap();
        assert_eq!(m.plugin.name, "word_count");
        assert_eq!(m.plugin.kind, PluginKind::Tool);
        assert_eq!(m.component_file(), "word_count.wasm");
        assert_eq!(m.capabilities.http, vec!["api.example.com".to_string()]);
    }

    #[test]
    fn a_guard_names_its_reviews_and_tier() {
        let text = GOOD.replace("kind = \"tool\"", "kind = \"guard\"")
            + "\n[guard]\nreviews = [\"call\", \"output\"]\ntier = \"heuristic\"\n";
        let m = Manifest::parse(&text, Path::new("plugin.toml")).unwrap();
        let g = m.guard.unwrap();
        assert_eq!(g.reviews, [GuardReview::Call, GuardReview::Output]);
        assert_eq!(g.tier, GuardTier::Heuristic);
        let empty = text.replace("[\"call\", \"output\"]", "[]");
        let err = Manifest::parse(&empty, Path::new("p.toml")).unwrap_err();
        assert!(err.to_string().contains("names nothing"), "{err}");
    }

    #[test]
    fn rejects_bad_manifests_with_reasons() {
        let cases = [
            (GOOD.replace("word_count", "word count"), "plugin name"),
            (GOOD.replace("word_count", "audit"), "is reserved"),
            (GOOD.replace("word_count", "install"), "is reserved"),
            (
                GOOD.replace("version = \"0.1.0\"", "version = \"x\""),
                "semantic",
            ),
            (GOOD.replace("api.example.com", "*"), "http grant"),
            (
                GOOD.replace("kind = \"tool\"", "kind = \"robot\""),
                "unknown variant",
            ),
            (format!("{GOOD}\nunknown = 1\n"), "unknown field"),
            (
                format!("{GOOD}\n[guard]\nreviews = [\"call\"]\ntier = \"llm\"\n"),
                "[guard] is for guards",
            ),
            (
                GOOD.replace("kind = \"tool\"", "kind = \"guard\""),
                "a guard needs a [guard] table",
            ),
        ];
        for (text, needle) in cases {
            let err = Manifest::parse(&text, Path::new("p.toml")).unwrap_err();
            assert!(
                err.to_string().contains(needle),
                "{err} should mention {needle}"
            );
        }
    }
}
