//! `judge-heuristic`: the first tier of the intent judge. A table of rules
//! in the spirit of the original's (destructive commands, downloads piped
//! into a shell, credential files, privilege escalation, uploads to hosts the
//! plugin was not granted, writes outside the workspace, …) gives every call
//! that waits for approval a verdict in microseconds, naming the rules that
//! fired. It reads nothing and asks no model.

pub mod rules;
pub mod shell;

use rules::{Hit, Scope, call_rules};
use turnstone_plugin_sdk::guard::{CallContext, Guard, Recommendation, Risk, Verdict};

/// The component.
pub struct Heuristic;

/// The verdict of `hits` for `tool` (no rule: a cautious "review").
pub fn verdict(tool: &str, arguments: &str, hits: &[Hit]) -> Verdict {
    let summary = summary(tool, arguments);
    let Some(top) = hits.iter().max_by(|a, b| {
        a.risk
            .rank()
            .cmp(&b.risk.rank())
            .then(a.confidence.total_cmp(&b.confidence))
    }) else {
        return Verdict {
            risk: Risk::Medium,
            recommendation: Recommendation::Review,
            confidence: 0.3,
            summary,
            reasons: vec!["no-rule: no rule covers this call; review it yourself".to_string()],
        };
    };
    let mut reasons = vec![format!("{}: {}", top.rule, top.reason)];
    reasons.extend(
        hits.iter()
            .filter(|h| !std::ptr::eq(*h, top))
            .map(|h| format!("{}: {}", h.rule, h.reason)),
    );
    Verdict {
        risk: top.risk,
        recommendation: top.recommendation,
        confidence: top.confidence,
        summary,
        reasons,
    }
}

/// One line saying what the call does.
fn summary(tool: &str, arguments: &str) -> String {
    let args: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let subject = ["command", "path", "file_path", "url", "query", "prompt"]
        .iter()
        .find_map(|k| args.get(*k).and_then(|v| v.as_str()))
        .map(str::to_string)
        .unwrap_or_else(|| arguments.to_string());
    let mut line: String = subject.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > 120 {
        line = line.chars().take(119).collect::<String>() + "…";
    }
    format!("{tool}: {line}")
}

impl Guard for Heuristic {
    fn review_call(
        tool: &str,
        arguments: &str,
        context: &CallContext,
    ) -> Result<Option<Verdict>, String> {
        let scope = Scope::from_grants(context.workspace.clone(), &context.grants);
        let hits = call_rules(tool, arguments, &scope);
        Ok(Some(verdict(tool, arguments, &hits)))
    }
}

turnstone_plugin_sdk::register_guard!(Heuristic);

#[cfg(test)]
mod tests;
