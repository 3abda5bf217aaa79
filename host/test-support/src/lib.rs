//! Test support for Turnstone, a dev-dependency of the crates' integration
//! tests (never of a shipped crate):
//!
//! - [`Recorder`]: a session's event sink that records every event in order
//!   and answers approval requests from a script (as a user would), with
//!   queries and [`Recorder::wait_for_event`];
//! - [`engine`]: the test runtime, the openai provider component against the
//!   scripted LLM, a session builder, [`engine::send_and_collect`];
//! - [`server`]: the real `turnstone serve` binary on a free port with a
//!   scratch database, an administrator, tokens and an SSE reader;
//! - [`pg`]: scratch PostgreSQL databases for multi-node tests;
//! - [`root`] / [`target`] / [`sse`]: paths and scripted-LLM steps.
//!
//! Modelled on codex-rs `core/tests/common`; written for this code base.

pub mod engine;
pub mod mcp;
pub mod pg;
mod recorder;
pub mod server;

pub use recorder::Recorder;

use std::path::{Path, PathBuf};
use std::time::Duration;
use turnstone_scripted_llm::Step;

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared cargo target directory (staged components live under it).
pub fn target() -> PathBuf {
    root().join("target")
}

/// A scripted-LLM step streaming `frames` at once.
pub fn sse(frames: Vec<String>) -> Step {
    Step::Sse {
        frames,
        gap: Duration::ZERO,
    }
}
