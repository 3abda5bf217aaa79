//! Error types of the runtime.

use crate::manifest::{ManifestError, SUPPORTED_WIT_VERSIONS};
use std::time::Duration;
use thiserror::Error;

/// Why a plugin failed to load. A failed plugin fails alone; the host goes on.
#[derive(Debug, Error)]
pub enum LoadError {
    /// The manifest is missing or invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The component file could not be read.
    #[error("cannot read component: {0}")]
    Io(String),
    /// Cranelift or validation rejected the bytes.
    #[error("invalid component: {0}")]
    Compile(String),
    /// The component exports no `turnstone:plugin` world.
    #[error(
        "the component exports no turnstone:plugin world (tool, provider or channel); was it built with the Turnstone SDK?"
    )]
    NotAPlugin,
    /// Built against a WIT version this host does not know.
    #[error("the component uses {found}, which this host does not support (supported turnstone:plugin versions: {})", SUPPORTED_WIT_VERSIONS.join(", "))]
    UnsupportedWit {
        /// The interface (or manifest line) naming the unknown version.
        found: String,
    },
    /// Imports the host cannot satisfy.
    #[error("the component needs imports this host does not provide: {0}")]
    Link(String),
    /// `describe` failed.
    #[error("describe failed: {0}")]
    Describe(String),
    /// Anything else wrong with the plugin.
    #[error("{0}")]
    Invalid(String),
}

/// Why one call into a plugin failed. The store is dropped; the plugin and the
/// host stay usable.
#[derive(Debug, Error)]
pub enum CallError {
    /// The call ran past its deadline and was interrupted.
    #[error("plugin {plugin} exceeded its {}s deadline and was stopped", .limit.as_secs_f64())]
    Deadline {
        /// Plugin name.
        plugin: String,
        /// The deadline.
        limit: Duration,
    },
    /// The guest tried to grow memory past its cap.
    #[error("plugin {plugin} exceeded its memory limit of {} MiB and was stopped", .limit_bytes >> 20)]
    MemoryExceeded {
        /// Plugin name.
        plugin: String,
        /// The cap.
        limit_bytes: usize,
    },
    /// The guest trapped (panic, unreachable, bad access).
    #[error("plugin {plugin} crashed: {message}")]
    Trap {
        /// Plugin name.
        plugin: String,
        /// Trap and guest stderr.
        message: String,
    },
    /// The call was cancelled by the host.
    #[error("call to plugin {plugin} was cancelled")]
    Cancelled {
        /// Plugin name.
        plugin: String,
    },
    /// The plugin does not implement what was called.
    #[error("plugin {plugin} is a {actual} plugin, not a {expected} plugin")]
    WrongKind {
        /// Plugin name.
        plugin: String,
        /// Kind needed.
        expected: &'static str,
        /// Kind it is.
        actual: &'static str,
    },
    /// Every instance slot stayed taken while the call waited for one: the
    /// node is at capacity. Nothing ran; the call can be tried again.
    #[error(
        "plugin {plugin} was not run: all {capacity} plugin instance slots on this node stayed busy for {}s",
        .waited.as_secs_f64()
    )]
    AtCapacity {
        /// Plugin name.
        plugin: String,
        /// Calls the node runs at once.
        capacity: usize,
        /// How long the call waited.
        waited: Duration,
    },
    /// Instantiation or host-side failure.
    #[error("plugin {plugin}: {message}")]
    Host {
        /// Plugin name.
        plugin: String,
        /// What went wrong.
        message: String,
    },
}

/// Runtime construction failures.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// Engine or linker setup failed.
    #[error("wasm engine setup failed: {0}")]
    Engine(String),
    /// Cache directory or ticker thread failed.
    #[error("runtime setup failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The one format of an error message in a tool result: exactly one leading
/// `Error: ` (a message that already carries it, or several, keeps one).
/// Used for refusals at prepare time and host-side call failures; guests built
/// with the SDK format their own execute-time errors the same way.
pub fn tool_error_text(msg: &str) -> String {
    let mut rest = msg.trim_start();
    while let Some(r) = rest
        .get(..6)
        .filter(|p| p.eq_ignore_ascii_case("error:"))
        .map(|_| rest[6..].trim_start())
    {
        rest = r;
    }
    format!("Error: {rest}")
}

#[cfg(test)]
mod text_tests {
    use super::tool_error_text;

    #[test]
    fn one_prefix_whatever_the_input() {
        for (input, want) in [
            ("read x first", "Error: read x first"),
            ("Error: read x first", "Error: read x first"),
            ("Error: Error: read x first", "Error: read x first"),
            ("error:read x", "Error: read x"),
            ("  Error:  x", "Error: x"),
            ("Errors happen", "Error: Errors happen"),
            ("", "Error: "),
        ] {
            assert_eq!(tool_error_text(input), want, "{input:?}");
        }
    }
}
