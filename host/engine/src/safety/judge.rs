//! Intent verdicts: what the guard components say about a call, in the
//! wire shape of the approval card and `intent_verdict`, and what Smart
//! Approvals do with them.

use super::JudgeSettings;
use std::sync::Arc;
use std::time::Instant;
use turnstone_protocol::Verdict;
use turnstone_runtime::guard::{self, GuardContext};
use turnstone_runtime::registry::PluginRegistry;
use turnstone_runtime::{GuardReview, GuardTier, LoadedPlugin, ModelAccess};

/// One call as the guards see it.
#[derive(Debug, Clone)]
pub struct CallFacts {
    /// The model's call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments (JSON text).
    pub arguments: String,
    /// What the guard is told besides.
    pub context: GuardContext,
}

/// The guards of `tier` that review calls, in load order.
pub fn call_guards(registry: &PluginRegistry, tier: GuardTier) -> Vec<Arc<LoadedPlugin>> {
    registry
        .loaded()
        .filter(|p| p.reviews(GuardReview::Call))
        .filter(|p| p.guard_info().is_some_and(|g| g.tier == tier))
        .cloned()
        .collect()
}

/// The wire verdict of a guard's answer.
pub fn wire_verdict(
    v: &guard::Verdict,
    facts: &CallFacts,
    tier: GuardTier,
    guard: &str,
    judge_model: Option<String>,
    started: Instant,
) -> Verdict {
    Verdict {
        verdict_id: crate::random_hex(),
        call_id: facts.call_id.clone(),
        func_name: facts.tool.clone(),
        func_args: facts.arguments.clone(),
        intent_summary: v.summary.clone(),
        risk_level: v.risk.as_str().to_string(),
        // f32 → f64 through a decimal string so 0.9 stays 0.9 on the wire.
        confidence: format!("{:.3}", v.confidence.clamp(0.0, 1.0))
            .parse()
            .unwrap_or(0.0),
        recommendation: v.recommendation.as_str().to_string(),
        reasoning: v.reasons.join("; "),
        tier: tier.as_str().to_string(),
        judge_model,
        latency_ms: started.elapsed().as_millis().min(u64::MAX as u128) as u64,
        guard: Some(guard.to_string()),
    }
}

fn risk_rank(risk: &str) -> u8 {
    match risk {
        "critical" => 3,
        "high" => 2,
        "medium" => 1,
        _ => 0,
    }
}

/// The riskier of two verdicts (then the more confident).
fn riskier(a: Verdict, b: Verdict) -> Verdict {
    let key = |v: &Verdict| (risk_rank(&v.risk_level), (v.confidence * 1000.0) as i64);
    if key(&b) > key(&a) { b } else { a }
}

/// The heuristic tier's verdict on one call: every heuristic guard asked,
/// the riskiest answer kept. A guard that fails is logged and skipped.
pub async fn heuristic_verdict(guards: &[Arc<LoadedPlugin>], facts: &CallFacts) -> Option<Verdict> {
    let mut best: Option<Verdict> = None;
    for g in guards {
        let started = Instant::now();
        match g
            .review_call(&facts.tool, &facts.arguments, &facts.context, None, None)
            .await
        {
            Ok(Ok(Some(v))) => {
                let v = wire_verdict(&v, facts, GuardTier::Heuristic, g.name(), None, started);
                best = Some(match best {
                    Some(b) => riskier(b, v),
                    None => v,
                });
            }
            Ok(Ok(None)) => {}
            Ok(Err(e)) => tracing::warn!(guard = g.name(), "review failed: {e}"),
            Err(e) => tracing::warn!(guard = g.name(), "review failed: {e}"),
        }
    }
    best
}

/// What an LLM review ended with.
pub enum LlmOutcome {
    /// The verdict.
    Verdict(Box<Verdict>),
    /// No verdict: the reason (timeout, model failure, unreadable answer).
    Failed(String),
}

/// Asks the LLM `guard` about one call through `model`, within the
/// settings' timeout.
pub async fn llm_verdict(
    guard: Arc<LoadedPlugin>,
    facts: CallFacts,
    model: Arc<dyn ModelAccess>,
    model_name: String,
    settings: &JudgeSettings,
    cancel: tokio_util::sync::CancellationToken,
) -> LlmOutcome {
    let started = Instant::now();
    let review = guard.review_call(
        &facts.tool,
        &facts.arguments,
        &facts.context,
        Some(model),
        Some(&cancel),
    );
    match tokio::time::timeout(settings.timeout, review).await {
        Err(_) => LlmOutcome::Failed(format!(
            "the LLM judge gave no verdict within {}",
            if settings.timeout.as_millis().is_multiple_of(1000) {
                format!("{} s", settings.timeout.as_secs())
            } else {
                format!("{} ms", settings.timeout.as_millis())
            }
        )),
        Ok(Ok(Ok(Some(v)))) => LlmOutcome::Verdict(Box::new(wire_verdict(
            &v,
            &facts,
            GuardTier::Llm,
            guard.name(),
            Some(model_name),
            started,
        ))),
        Ok(Ok(Ok(None))) => LlmOutcome::Failed("the LLM judge had no opinion".into()),
        Ok(Ok(Err(e))) => LlmOutcome::Failed(format!("the LLM judge failed: {e}")),
        Ok(Err(e)) => LlmOutcome::Failed(format!("the LLM judge failed: {e}")),
    }
}

/// The verdict that counts for a call: the LLM's when it is at least as
/// confident as the heuristic one, else the heuristic one.
pub fn effective<'a>(
    heuristic: Option<&'a Verdict>,
    llm: Option<&'a Verdict>,
) -> Option<&'a Verdict> {
    match (heuristic, llm) {
        (Some(h), Some(l)) if l.confidence >= h.confidence => Some(l),
        (Some(h), _) => Some(h),
        (None, l) => l,
    }
}

/// What Smart Approvals decided for a batch.
#[derive(Debug, Clone, PartialEq)]
pub enum SmartDecision {
    /// Every call is confidently low-risk: it runs.
    Approve {
        /// The verdicts that decided, for the audit log.
        reason: String,
    },
    /// A call was confidently denied: the batch is refused with this
    /// feedback for the model.
    Deny {
        /// Why (the deciding verdict's summary and reasoning).
        feedback: String,
    },
}

/// Smart Approvals over the verdicts of a batch's asked calls (every
/// tier's verdict of each call): a confident deny of any call denies the
/// batch; the batch is approved only when every call has a verdict and every
/// verdict is a confident low-risk approve — a judge may add a denial but
/// never lift a riskier verdict of another tier — and `may_approve` (no call
/// a policy forces to ask). Anything else is left to the person.
pub fn smart_decision(
    settings: &JudgeSettings,
    verdicts: &[Vec<&Verdict>],
    may_approve: bool,
) -> Option<SmartDecision> {
    if !settings.smart_approvals || verdicts.is_empty() {
        return None;
    }
    let sure = |v: &Verdict| v.confidence >= settings.confidence_threshold;
    if let Some(v) = verdicts
        .iter()
        .flatten()
        .find(|v| v.recommendation == "deny" && sure(v))
    {
        return Some(SmartDecision::Deny {
            feedback: format!(
                "The intent judge ({} tier) denied {}: {} ({})",
                v.tier, v.func_name, v.intent_summary, v.reasoning
            ),
        });
    }
    let all_safe = verdicts.iter().all(|vs| {
        !vs.is_empty()
            && vs
                .iter()
                .all(|v| v.recommendation == "approve" && v.risk_level == "low" && sure(v))
    });
    (may_approve && all_safe).then(|| SmartDecision::Approve {
        reason: verdicts
            .iter()
            .flatten()
            .map(|v| {
                format!(
                    "{}: {} ({}, {:.2})",
                    v.func_name, v.intent_summary, v.tier, v.confidence
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(rec: &str, risk: &str, confidence: f64, tier: &str) -> Verdict {
        Verdict {
            verdict_id: "v".into(),
            call_id: "c".into(),
            func_name: "bash".into(),
            func_args: "{}".into(),
            intent_summary: "s".into(),
            risk_level: risk.into(),
            confidence,
            recommendation: rec.into(),
            reasoning: "r".into(),
            tier: tier.into(),
            judge_model: None,
            latency_ms: 0,
            guard: None,
        }
    }

    #[test]
    fn smart_approvals_decide_only_when_confident_and_enabled() {
        let on = JudgeSettings {
            smart_approvals: true,
            ..JudgeSettings::default()
        };
        let low = v("approve", "low", 0.9, "heuristic");
        let unsure = v("approve", "low", 0.5, "heuristic");
        let deny = v("deny", "critical", 0.95, "heuristic");
        let review = v("review", "high", 0.9, "heuristic");
        fn a<'v>(vs: &[&'v Verdict]) -> Vec<Vec<&'v Verdict>> {
            vs.iter().map(|v| vec![*v]).collect()
        }
        assert!(matches!(
            smart_decision(&on, &a(&[&low]), true),
            Some(SmartDecision::Approve { .. })
        ));
        assert_eq!(
            smart_decision(&on, &a(&[&low]), false),
            None,
            "a policy says ask"
        );
        assert_eq!(smart_decision(&on, &a(&[&low, &unsure]), true), None);
        assert_eq!(
            smart_decision(&on, &[vec![&low], Vec::new()], true),
            None,
            "a call without a verdict asks"
        );
        assert!(matches!(
            smart_decision(&on, &a(&[&low, &deny]), false),
            Some(SmartDecision::Deny { .. })
        ));
        assert_eq!(smart_decision(&on, &a(&[&review]), true), None);
        // A confident low-risk judge cannot lift a riskier heuristic verdict.
        let judge_low = v("approve", "low", 0.99, "llm");
        assert_eq!(
            smart_decision(&on, &[vec![&review, &judge_low]], true),
            None
        );
        assert_eq!(
            smart_decision(&JudgeSettings::default(), &a(&[&low]), true),
            None,
            "off by default"
        );
    }

    #[test]
    fn a_more_confident_llm_verdict_replaces_the_heuristic_one() {
        let h = v("review", "medium", 0.6, "heuristic");
        let l = v("approve", "low", 0.9, "llm");
        let weak = v("deny", "high", 0.3, "llm");
        assert_eq!(effective(Some(&h), Some(&l)).unwrap().tier, "llm");
        assert_eq!(effective(Some(&h), Some(&weak)).unwrap().tier, "heuristic");
        assert_eq!(effective(None, Some(&weak)).unwrap().tier, "llm");
    }
}
