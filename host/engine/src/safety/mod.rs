//! The safety layer around tool calls: administrator tool policies checked
//! before the approval step, intent verdicts from guard components on the
//! approval card (a heuristic tier at once, an LLM tier in the background),
//! Smart Approvals, output guards with optional redaction, and the audit
//! rows of approval decisions. The guards are plugins (`kind = "guard"`), so
//! they come from the session's plugin set and follow its hot reloads.

pub mod judge;
pub mod output;
pub mod policy;

use std::sync::Arc;
use std::time::Duration;
use turnstone_storage::Storage;
use turnstone_storage::prelude::*;

pub use judge::{SmartDecision, smart_decision};
pub use policy::PolicyCache;

/// The administrator's policies for tools served over MCP (`turnstone mcp`,
/// `/mcp`): `caller` names the requesting user's role, if any is known.
pub struct PolicyGate<F> {
    safety: Arc<Safety>,
    caller: F,
}

impl<F> PolicyGate<F> {
    /// A gate over `safety`'s policies.
    pub fn new(safety: Arc<Safety>, caller: F) -> Self {
        Self { safety, caller }
    }
}

impl<F> turnstone_mcp::serve::CallGate for PolicyGate<F>
where
    F: Fn(&turnstone_mcp::serve::Extensions) -> futures::future::BoxFuture<'static, Option<String>>
        + Send
        + Sync,
{
    fn check<'a>(
        &'a self,
        tool: &'a str,
        extensions: &'a turnstone_mcp::serve::Extensions,
    ) -> futures::future::BoxFuture<'a, turnstone_mcp::serve::GateVerdict> {
        use turnstone_mcp::serve::GateVerdict;
        Box::pin(async move {
            let role = (self.caller)(extensions).await;
            match self.safety.policy_for(tool, role.as_deref()).await {
                None => GateVerdict::Default,
                Some(p) => match p.action {
                    PolicyAction::Allow => GateVerdict::Allow,
                    PolicyAction::Deny => GateVerdict::Deny(format!(
                        "{tool} is denied by the administrator's policy {:?}",
                        p.name
                    )),
                    PolicyAction::Ask => GateVerdict::Ask(format!(
                        "{tool} needs a person's approval under the administrator's policy {:?}, and nobody can approve over MCP",
                        p.name
                    )),
                },
            }
        })
    }
}

/// A call's capability audit on the wire.
pub fn capability_audit(
    t: turnstone_runtime::audit::Touched,
) -> turnstone_protocol::CapabilityAudit {
    use turnstone_protocol as p;
    p::CapabilityAudit {
        files: t
            .files
            .into_iter()
            .map(|f| p::FileTouch {
                path: f.path,
                access: f.access.to_string(),
                denied: f.denied,
            })
            .collect(),
        hosts: t
            .hosts
            .into_iter()
            .map(|h| p::HostTouch {
                host: h.host,
                method: h.method,
                denied: h.denied,
            })
            .collect(),
        processes: t
            .processes
            .into_iter()
            .map(|x| p::ProcessTouch {
                program: x.program,
                args: x.args,
                denied: x.denied,
                sandbox: x.sandbox,
            })
            .collect(),
        secrets: t.secrets,
        denials: t.denials,
        dropped: t.dropped,
    }
}

/// `[judge]`: what the guards may do.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeSettings {
    /// Run the guards at all (heuristic judge and output guard).
    pub enabled: bool,
    /// Also ask the LLM judge (one model call per call awaiting approval).
    pub llm: bool,
    /// How long the LLM judge may take before its verdict is given up on
    /// (the heuristic verdict stands).
    pub timeout: Duration,
    /// Let confident verdicts decide: a low-risk "approve" runs the call,
    /// a "deny" refuses it; both audited. Off: verdicts only advise.
    pub smart_approvals: bool,
    /// How confident a verdict must be to decide (0–1).
    pub confidence_threshold: f64,
    /// Replace secrets found in tool output before the model sees it.
    pub redact_output: bool,
    /// Run output guards on tool results.
    pub output_guard: bool,
}

impl Default for JudgeSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            llm: false,
            timeout: Duration::from_secs(30),
            smart_approvals: false,
            confidence_threshold: 0.8,
            redact_output: false,
            output_guard: true,
        }
    }
}

/// What every session of a node shares for safety.
#[derive(Default)]
pub struct Safety {
    /// `[judge]`.
    pub settings: JudgeSettings,
    /// The `[judge] model` alias's binding (none: the session's model).
    pub judge_binding: Option<crate::session::ModelBinding>,
    /// Policies and audit rows (none: no policies, nothing audited).
    pub db: Option<Storage>,
    /// The policy table, cached.
    pub policies: PolicyCache,
}

impl Safety {
    /// The layer with these settings over `db`.
    pub fn new(
        settings: JudgeSettings,
        judge_binding: Option<crate::session::ModelBinding>,
        db: Option<Storage>,
    ) -> Arc<Self> {
        Arc::new(Self {
            settings,
            judge_binding,
            db,
            policies: PolicyCache::default(),
        })
    }

    /// The policy deciding `tool` for a user of `role`, if any.
    pub async fn policy_for(&self, tool: &str, role: Option<&str>) -> Option<ToolPolicy> {
        let db = self.db.as_ref()?;
        self.policies.decide(db, tool, role).await
    }

    /// The strictest policy deciding a call known by any of `names`
    /// (deny over ask over allow).
    pub async fn policy_for_any(&self, names: &[String], role: Option<&str>) -> Option<ToolPolicy> {
        let rank = |p: &ToolPolicy| match p.action {
            PolicyAction::Deny => 2,
            PolicyAction::Ask => 1,
            PolicyAction::Allow => 0,
        };
        let mut best: Option<ToolPolicy> = None;
        for n in names {
            if let Some(p) = self.policy_for(n, role).await
                && best.as_ref().is_none_or(|b| rank(&p) > rank(b))
            {
                best = Some(p);
            }
        }
        best
    }

    /// The role of `user_id` (`Ok(None)`: unknown user, or no database);
    /// `Err` when it could not be read.
    pub async fn role_of(&self, user_id: Option<&str>) -> Result<Option<String>, ()> {
        let (Some(db), Some(user)) = (self.db.as_ref(), user_id) else {
            return Ok(None);
        };
        match db.get_user(user).await {
            Ok(u) => Ok(u.map(|u| u.role)),
            Err(e) => {
                tracing::warn!("cannot read the role of {user}: {e}");
                Err(())
            }
        }
    }

    /// Appends an audit row (a failure is logged: the decision it records
    /// has been made either way).
    pub async fn audit(
        &self,
        user_id: Option<&str>,
        action: &str,
        target: Option<&str>,
        detail: serde_json::Value,
    ) {
        let Some(db) = self.db.clone() else {
            return;
        };
        let entry = AuditEntry {
            id: 0,
            timestamp: String::new(),
            user_id: user_id.map(str::to_string),
            action: action.to_string(),
            target: target.map(str::to_string),
            detail: Some(detail.to_string()),
            ip: None,
        };
        if let Err(e) = db.append_audit(&entry).await {
            tracing::warn!(action = %entry.action, "cannot write the audit log: {e}");
        }
    }
}
