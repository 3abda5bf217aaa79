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
//! - [`memories`]: a stored project with memories, for memory-index tests;
//! - [`root`] / [`target`] / [`sse`]: paths and scripted-LLM steps;
//! - [`cpu_time`]: a process's CPU time, for the bench binaries.
//!
//! Modelled on codex-rs `core/tests/common`; written for this code base.

pub mod engine;
pub mod mcp;
pub mod memories;
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

/// CPU time (user + system, all threads) that `/proc/<pid>/stat` reports
/// for process `pid` (`"self"` for this one), in its 10 ms ticks (Linux's
/// `USER_HZ` is 100); zero if it cannot be read. The benches report CPU per
/// turn of the server and of themselves with it.
pub fn cpu_time(pid: &str) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name (which may hold spaces),
    // counted from proc(5)'s field 3: indices 11 and 12 are utime and stime.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_process_shows_cpu_time_and_a_missing_one_none() {
        let before = cpu_time("self");
        // Spin until the kernel has counted at least two ticks of it (or
        // give up after 5 s of wall time, and fail below).
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut x = 0u64;
        while cpu_time("self") < before + Duration::from_millis(20)
            && std::time::Instant::now() < deadline
        {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(cpu_time("self") >= before + Duration::from_millis(20));
        assert_eq!(cpu_time("no-such-process"), Duration::ZERO);
    }
}
