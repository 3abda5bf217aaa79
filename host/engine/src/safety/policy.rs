//! Tool policies as a session sees them: the administrator's rules, read
//! from the database at most every [`POLICY_TTL`] (so a change on any node
//! applies within that) and matched by glob, first rule wins.

use std::sync::Mutex;
use std::time::{Duration, Instant};
use turnstone_storage::Storage;
use turnstone_storage::prelude::*;

/// How long a read of the policy table is trusted.
pub const POLICY_TTL: Duration = Duration::from_secs(2);

/// One rule, compiled.
#[derive(Debug, Clone)]
struct Rule {
    policy: ToolPolicy,
    glob: glob::Pattern,
}

/// The policy table, cached.
#[derive(Default)]
pub struct PolicyCache {
    rules: Mutex<Option<(Instant, std::sync::Arc<Vec<Rule>>)>>,
}

impl PolicyCache {
    /// Forgets the cached table (after a change on this node).
    pub fn invalidate(&self) {
        *self.rules.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    async fn rules(&self, db: &Storage) -> std::sync::Arc<Vec<Rule>> {
        if let Some((at, rules)) = self
            .rules
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            && at.elapsed() < POLICY_TTL
        {
            return rules.clone();
        }
        let rules = match db.list_policies().await {
            Ok(list) => list
                .into_iter()
                .filter(|p| p.enabled)
                .filter_map(|p| {
                    turnstone_storage::types::tool_glob(&p.tool_pattern)
                        .map(|glob| Rule { policy: p, glob })
                        .ok()
                })
                .collect(),
            Err(e) => {
                // Fail closed would stop every tool on a database hiccup;
                // the last table read stays in force instead, and with none
                // the approval step still asks as usual.
                tracing::warn!("cannot read tool policies: {e}");
                if let Some((_, rules)) = self
                    .rules
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .as_ref()
                {
                    return rules.clone();
                }
                Vec::new()
            }
        };
        let rules = std::sync::Arc::new(rules);
        *self.rules.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((Instant::now(), rules.clone()));
        rules
    }

    /// The first enabled policy matching `tool` for a user of `role`.
    pub async fn decide(&self, db: &Storage, tool: &str, role: Option<&str>) -> Option<ToolPolicy> {
        let rules = self.rules(db).await;
        first_match(&rules, tool, role)
    }
}

fn first_match(rules: &[Rule], tool: &str, role: Option<&str>) -> Option<ToolPolicy> {
    // The first administrator (made by setup) is an administrator.
    let role = role.map(|r| if r == "builtin-admin" { "admin" } else { r });
    let opts = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: false,
        require_literal_leading_dot: false,
    };
    rules
        .iter()
        .find(|r| {
            r.policy
                .role
                .as_deref()
                .is_none_or(|want| Some(want) == role)
                && r.glob.matches_with(tool, opts)
        })
        .map(|r| r.policy.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, pattern: &str, action: PolicyAction, role: Option<&str>) -> Rule {
        Rule {
            policy: ToolPolicy {
                policy_id: name.into(),
                name: name.into(),
                tool_pattern: pattern.into(),
                action,
                role: role.map(str::to_string),
                priority: 0,
                enabled: true,
                description: String::new(),
                created_by: None,
                created: String::new(),
                updated: String::new(),
            },
            glob: glob::Pattern::new(pattern).unwrap(),
        }
    }

    #[test]
    fn the_first_matching_rule_for_the_role_wins() {
        let rules = vec![
            rule("viewers-read-only", "*", PolicyAction::Deny, Some("viewer")),
            rule(
                "no-github-writes",
                "mcp__github__create_*",
                PolicyAction::Deny,
                None,
            ),
            rule("github-asks", "mcp__github__*", PolicyAction::Ask, None),
            rule("reads-run", "read_?ile", PolicyAction::Allow, None),
        ];
        let name = |tool, role| first_match(&rules, tool, role).map(|p| p.name);
        assert_eq!(
            name("bash", Some("viewer")).as_deref(),
            Some("viewers-read-only")
        );
        assert_eq!(name("bash", Some("admin")), None);
        assert_eq!(
            name("mcp__github__create_issue", None).as_deref(),
            Some("no-github-writes")
        );
        assert_eq!(
            name("mcp__github__search", None).as_deref(),
            Some("github-asks")
        );
        assert_eq!(
            name("read_file", Some("operator")).as_deref(),
            Some("reads-run")
        );
        assert_eq!(name("mcp__gitlab__x", None), None);
    }
}
