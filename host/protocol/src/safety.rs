//! What the safety layer adds to the stream: intent verdicts on tool calls
//! (the approval card's `heuristic_verdict` / `judge_verdict`, and the
//! `intent_verdict` event), output warnings, and the capability audit of
//! each call (what it actually touched).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A guard's verdict on one tool call (contract §3.3 `intent_verdict` and the
/// items' `heuristic_verdict`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Verdict {
    /// Unique id of this verdict (32 hex).
    pub verdict_id: String,
    /// The call it is about.
    pub call_id: String,
    /// The tool.
    pub func_name: String,
    /// The call's arguments (JSON text).
    pub func_args: String,
    /// One line: what the call does.
    pub intent_summary: String,
    /// `low`, `medium`, `high` or `critical`.
    pub risk_level: String,
    /// 0.0–1.0.
    pub confidence: f64,
    /// `approve`, `review` or `deny`.
    pub recommendation: String,
    /// Why (the rules that fired, or the judge's reasoning).
    pub reasoning: String,
    /// `heuristic` or `llm`.
    pub tier: String,
    /// The model that judged (`llm` tier).
    pub judge_model: Option<String>,
    /// How long the review took.
    pub latency_ms: u64,
    /// The guard plugin that gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
}

/// One finding of an output guard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Annotation {
    /// `secret`, `injection`, or the guard's own kind.
    pub kind: String,
    /// What exactly, e.g. `aws-access-key-id`.
    pub label: String,
    /// `low` … `critical`.
    pub risk_level: String,
    /// Character offsets in the output as the guard saw it: [start, end).
    pub start: u64,
    /// End (exclusive).
    pub end: u64,
}

/// `output_warning`: an output guard found something in a tool's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OutputWarning {
    /// The call.
    pub call_id: String,
    /// The tool.
    pub func_name: String,
    /// The riskiest finding's level.
    pub risk_level: String,
    /// `kind:label` of each finding.
    pub flags: Vec<String>,
    /// The findings.
    pub annotations: Vec<Annotation>,
    /// Secrets were replaced before the model saw the output
    /// (`[judge] redact_output`).
    pub redacted: bool,
    /// Characters of output reviewed.
    pub output_length: u64,
    /// `heuristic` or `llm`.
    pub tier: String,
    /// An LLM guard's own risk (none for the heuristic tier).
    pub judge_risk: Option<String>,
    /// 0.0–1.0.
    pub confidence: f64,
    /// A sentence for people.
    pub reasoning: String,
    /// The model of an LLM guard.
    pub judge_model: Option<String>,
}

/// What one tool call actually touched, recorded by the host at the
/// sandbox boundary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CapabilityAudit {
    /// Files and directories opened, created or removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileTouch>,
    /// Hosts contacted (or refused) over HTTP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostTouch>,
    /// Programs started.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessTouch>,
    /// Secrets the host substituted into requests, by name (never values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// What the sandbox refused, each with the grant that would allow it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<String>,
    /// Entries beyond the recording cap that were counted but not listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl CapabilityAudit {
    /// Nothing was touched or refused.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
            && self.hosts.is_empty()
            && self.processes.is_empty()
            && self.secrets.is_empty()
            && self.denials.is_empty()
    }

    /// One line per entry, for terminals and logs.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.files {
            out.push(format!("{} {}", f.access, f.path));
        }
        for h in &self.hosts {
            out.push(match &h.denied {
                Some(_) => format!("denied {} {}", h.method, h.host),
                None => format!("{} {}", h.method, h.host),
            });
        }
        for p in &self.processes {
            out.push(format!("exec {}", p.program));
        }
        for s in &self.secrets {
            out.push(format!("secret {s}"));
        }
        for d in &self.denials {
            out.push(format!("denied: {d}"));
        }
        if self.dropped > 0 {
            out.push(format!("… {} more", self.dropped));
        }
        out
    }
}

/// A file a call touched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FileTouch {
    /// The host path.
    pub path: String,
    /// `read`, `write`, `create`, `remove` or `rename`.
    pub access: String,
    /// The sandbox refused it (the reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
}

/// A host a call contacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct HostTouch {
    /// `host:port`.
    pub host: String,
    /// The HTTP method.
    pub method: String,
    /// The egress policy refused it (the reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
}

/// A program a call started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProcessTouch {
    /// The program.
    pub program: String,
    /// Its arguments (cut to a few hundred characters).
    pub args: Vec<String>,
    /// The process sandbox refused it (the reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<String>,
    /// How the started process is confined: the kernel sandbox (and its
    /// network), or the operator's opt-out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}
