//! Calling guard components: a verdict on a tool call before approval
//! (`review-call`), findings in a tool's output (`review-output`).

use crate::error::CallError;
use crate::manifest::{GuardInfo, GuardReview};
use crate::plugin::{InstancePre, LoadedPlugin};
use crate::state::{ModelAccess, ToolOutputSink};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub use crate::bindings::v0_2_0::guard::exports::turnstone::plugin0_2_0::guard::{
    CallContext as GuardContext, Finding, FindingKind, Recommendation, Risk, Verdict,
};

impl Risk {
    /// The wire name (`low`, `medium`, `high`, `critical`).
    pub fn as_str(self) -> &'static str {
        match self {
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
            Risk::Critical => "critical",
        }
    }

    /// Orders risks, low = 0 … critical = 3.
    pub fn rank(self) -> u8 {
        match self {
            Risk::Low => 0,
            Risk::Medium => 1,
            Risk::High => 2,
            Risk::Critical => 3,
        }
    }
}

impl Recommendation {
    /// The wire name (`approve`, `review`, `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Recommendation::Approve => "approve",
            Recommendation::Review => "review",
            Recommendation::Deny => "deny",
        }
    }
}

impl FindingKind {
    /// `secret`, `injection`, or the guard's own name.
    pub fn as_str(&self) -> &str {
        match self {
            FindingKind::Secret => "secret",
            FindingKind::Injection => "injection",
            FindingKind::Other(s) => s,
        }
    }
}

/// Lends a guard call the judge model (and nothing else of a session).
struct GuardSink {
    model: Option<Arc<dyn ModelAccess>>,
}

impl ToolOutputSink for GuardSink {
    fn chunk(&self, _text: &str) -> bool {
        true
    }

    fn model(&self) -> Option<Arc<dyn ModelAccess>> {
        self.model.clone()
    }
}

impl LoadedPlugin {
    /// A guard's `[guard]` table (`None` for other kinds).
    pub fn guard_info(&self) -> Option<&GuardInfo> {
        self.manifest.guard.as_ref()
    }

    /// Whether this is a guard that does `review`.
    pub fn reviews(&self, review: GuardReview) -> bool {
        self.guard_info()
            .is_some_and(|g| g.reviews.contains(&review))
    }

    fn guard_pre(
        &self,
    ) -> Result<&crate::bindings::v0_2_0::guard::GuardPluginPre<crate::state::HostState>, CallError>
    {
        match &self.pre {
            InstancePre::Guard(p) => Ok(p),
            _ => Err(self.wrong_kind("guard")),
        }
    }

    /// The guard's verdict on `tool` called with `arguments`; `model` is
    /// what its `model` import reaches (an LLM judge's judge model).
    /// `Ok(Err(_))` is the guard's own failure, `Ok(Ok(None))` no opinion.
    pub async fn review_call(
        &self,
        tool: &str,
        arguments: &str,
        context: &GuardContext,
        model: Option<Arc<dyn ModelAccess>>,
        cancel: Option<&CancellationToken>,
    ) -> Result<Result<Option<Verdict>, String>, CallError> {
        let pre = self.guard_pre()?;
        self.run(Arc::new(GuardSink { model }), cancel, async |store| {
            let inst = pre.instantiate_async(&mut *store).await?;
            inst.turnstone_plugin0_2_0_guard()
                .call_review_call(&mut *store, tool, arguments, context)
                .await
        })
        .await
    }

    /// The guard's findings in `output` of `tool`.
    pub async fn review_output(
        &self,
        tool: &str,
        output: &str,
    ) -> Result<Result<Vec<Finding>, String>, CallError> {
        let pre = self.guard_pre()?;
        self.run(Arc::new(GuardSink { model: None }), None, async |store| {
            let inst = pre.instantiate_async(&mut *store).await?;
            inst.turnstone_plugin0_2_0_guard()
                .call_review_output(&mut *store, tool, output)
                .await
        })
        .await
    }
}
