//! The capability audit of one call: what the plugin actually touched at
//! the sandbox boundary — files opened, created or removed, hosts contacted,
//! programs started, secrets the host substituted — and what was refused.
//! Recorded by the host as it happens (the guest cannot add, hide or change
//! an entry) and returned with the call's result.

use serde::Serialize;
use std::sync::{Arc, Mutex};

/// Entries kept per call; more are counted in [`Touched::dropped`].
pub const MAX_ENTRIES: usize = 256;
/// Characters of a program's arguments kept.
const MAX_ARGS_CHARS: usize = 300;

/// A file or directory a call touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileTouch {
    /// The host path.
    pub path: String,
    /// `read`, `write`, `mkdir`, `remove`, `rename`, `symlink` or `link`.
    pub access: &'static str,
    /// The sandbox refused it: why.
    pub denied: Option<String>,
}

/// A host a call contacted over HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostTouch {
    /// `host:port`.
    pub host: String,
    /// The method.
    pub method: String,
    /// The egress policy refused it: why.
    pub denied: Option<String>,
}

/// A program a call started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessTouch {
    /// The program as asked for.
    pub program: String,
    /// Its arguments (cut to a few hundred characters in all).
    pub args: Vec<String>,
    /// The sandbox refused it: why.
    pub denied: Option<String>,
    /// How the started process is confined (the kernel sandbox, or the
    /// operator's opt-out).
    pub sandbox: Option<String>,
}

/// Everything one call touched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Touched {
    /// Files, in order, each (path, access) once.
    pub files: Vec<FileTouch>,
    /// Hosts, in order, each (host, method, outcome) once.
    pub hosts: Vec<HostTouch>,
    /// Programs, in order.
    pub processes: Vec<ProcessTouch>,
    /// Secrets substituted, by name, each once.
    pub secrets: Vec<String>,
    /// Refusals of other capabilities (model, memory, …), each once.
    pub denials: Vec<String>,
    /// Entries beyond [`MAX_ENTRIES`], counted but not kept.
    pub dropped: u64,
}

impl Touched {
    fn len(&self) -> usize {
        self.files.len()
            + self.hosts.len()
            + self.processes.len()
            + self.secrets.len()
            + self.denials.len()
    }

    /// Nothing touched or refused.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.dropped == 0
    }
}

/// The recorder a call's store carries; cheap to clone.
#[derive(Clone, Default)]
pub struct AuditRecorder(Arc<Mutex<Touched>>);

impl AuditRecorder {
    fn with(&self, f: impl FnOnce(&mut Touched)) {
        let mut t = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut t);
    }

    /// Adds `entry` to the list `pick` chooses unless it is there already;
    /// counts it as dropped when the call's entries are full.
    fn add<T: PartialEq>(&self, pick: impl FnOnce(&mut Touched) -> &mut Vec<T>, entry: T) {
        self.with(|t| {
            let full = t.len() >= MAX_ENTRIES;
            let list = pick(t);
            if list.contains(&entry) {
                return;
            }
            if !full {
                list.push(entry);
                return;
            }
            t.dropped += 1;
        });
    }

    /// A file opened, created or removed (or refused).
    pub fn file(&self, path: String, access: &'static str, denied: Option<String>) {
        self.add(
            |t| &mut t.files,
            FileTouch {
                path,
                access,
                denied,
            },
        );
    }

    /// A request to `host` (or its refusal).
    pub fn host(&self, host: String, method: String, denied: Option<String>) {
        self.add(
            |t| &mut t.hosts,
            HostTouch {
                host,
                method,
                denied,
            },
        );
    }

    /// A program started (or refused).
    pub fn process(
        &self,
        program: &str,
        args: &[String],
        denied: Option<String>,
        sandbox: Option<String>,
    ) {
        let mut budget = MAX_ARGS_CHARS;
        let mut kept = Vec::new();
        for a in args {
            if budget == 0 {
                kept.push("…".to_string());
                break;
            }
            let cut: String = a.chars().take(budget).collect();
            budget = budget.saturating_sub(cut.chars().count());
            kept.push(cut);
        }
        self.add(
            |t| &mut t.processes,
            ProcessTouch {
                program: program.to_string(),
                args: kept,
                denied,
                sandbox,
            },
        );
    }

    /// A secret the host substituted into a request.
    pub fn secret(&self, name: &str) {
        self.add(|t| &mut t.secrets, name.to_string());
    }

    /// A refusal of another capability.
    pub fn denial(&self, what: String) {
        self.add(|t| &mut t.denials, what);
    }

    /// What was recorded so far.
    pub fn snapshot(&self) -> Touched {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kept_once_and_capped() {
        let a = AuditRecorder::default();
        a.file("/w/a".into(), "read", None);
        a.file("/w/a".into(), "read", None);
        a.file("/w/a".into(), "write", None);
        a.secret("K");
        a.secret("K");
        a.process("git", &["log".into(), "x".repeat(1000)], None, None);
        let t = a.snapshot();
        assert_eq!(t.files.len(), 2);
        assert_eq!(t.secrets, ["K"]);
        assert_eq!(t.processes[0].args[0], "log");
        assert!(t.processes[0].args[1].chars().count() <= MAX_ARGS_CHARS);
        for i in 0..(MAX_ENTRIES + 10) {
            a.file(format!("/w/{i}"), "read", None);
        }
        let t = a.snapshot();
        assert_eq!(t.len(), MAX_ENTRIES);
        assert_eq!(t.dropped, 14, "4 entries were there before the loop");
    }
}
