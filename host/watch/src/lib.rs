//! Watches: a command polled on a schedule until its stop condition holds.
//! This crate holds what is pure about them: the condition language
//! ([`Condition`], a PEG grammar with a Pratt parser, evaluated by its own
//! interpreter) and the limits a watch is held to. Storage, scheduling and
//! running the command are the host's.

pub mod cond;
pub mod value;

pub use cond::{Condition, EvalError, ParseError, Poll, VARIABLES};
pub use value::Value;

/// Shortest poll interval, in seconds.
pub const MIN_POLL_SECS: u64 = 10;
/// Longest poll interval (24 h), in seconds.
pub const MAX_POLL_SECS: u64 = 24 * 3600;
/// Poll interval when none is given (5 min), in seconds.
pub const DEFAULT_POLL_SECS: u64 = 300;
/// Polls when none are given.
pub const DEFAULT_MAX_POLLS: u64 = 100;
/// Most polls a watch may ask for.
pub const MAX_POLLS: u64 = 10_000;
/// Active watches one workstream may hold.
pub const MAX_ACTIVE_PER_WORKSTREAM: usize = 5;
/// Output kept from one poll, in bytes.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;

/// Why a watch's settings are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Outside 10 s – 24 h.
    #[error("poll_every must be between 10s and 24h (got {0} s)")]
    Interval(u64),
    /// Zero or too many polls.
    #[error("max_polls must be between 1 and {MAX_POLLS} (got {0})")]
    Polls(u64),
    /// A name that is empty, too long or has odd characters.
    #[error("name {0:?} must be 1-64 letters, digits, '-', '_' or '.'")]
    Name(String),
    /// An empty command.
    #[error("command is empty")]
    Command,
    /// The stop condition does not parse.
    #[error("stop_on: {0}")]
    Condition(#[from] ParseError),
}

/// Checks a watch's settings; returns the parsed condition.
pub fn check_spec(
    name: &str,
    command: &str,
    poll_every_secs: u64,
    max_polls: u64,
    stop_on: Option<&str>,
) -> Result<Option<Condition>, SpecError> {
    let name_ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !name_ok {
        return Err(SpecError::Name(name.to_string()));
    }
    if command.trim().is_empty() {
        return Err(SpecError::Command);
    }
    if !(MIN_POLL_SECS..=MAX_POLL_SECS).contains(&poll_every_secs) {
        return Err(SpecError::Interval(poll_every_secs));
    }
    if !(1..=MAX_POLLS).contains(&max_polls) {
        return Err(SpecError::Polls(max_polls));
    }
    Ok(stop_on
        .filter(|c| !c.trim().is_empty())
        .map(Condition::parse)
        .transpose()?)
}

/// Cuts `output` to [`MAX_OUTPUT_BYTES`] at a character boundary, keeping
/// the end (where a command's verdict usually is).
pub fn trim_output(output: &str) -> &str {
    if output.len() <= MAX_OUTPUT_BYTES {
        return output;
    }
    let mut start = output.len() - MAX_OUTPUT_BYTES;
    while !output.is_char_boundary(start) {
        start += 1;
    }
    &output[start..]
}

#[cfg(test)]
mod tests;
