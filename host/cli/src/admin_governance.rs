//! `turnstone admin policy|usage|audit`: tool policies, model usage and the
//! audit log on the same database the server uses. Policy changes made here
//! are audited (`via: cli`) and reach running servers within two seconds.

use anyhow::{Result, bail};
use clap::Subcommand;
use serde_json::json;
use std::io::Write;
use turnstone_storage::Storage;
use turnstone_storage::prelude::*;

/// `turnstone admin policy …`.
#[derive(Subcommand, Debug)]
pub enum PolicyAction {
    /// List policies in the order they are checked (first match wins).
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Add a policy: allow, deny or ask for tools matching a glob.
    Add {
        /// Unique name.
        name: String,
        /// Glob over tool names, e.g. `bash`, `mcp__github__*`, `write_*`.
        #[arg(long = "tool")]
        tool_pattern: String,
        /// allow (run without asking), deny (refuse before any card) or ask
        /// (always ask, even for tools that run without approval).
        #[arg(long)]
        action: String,
        /// Only for users of this role (admin, operator, viewer).
        #[arg(long)]
        role: Option<String>,
        /// Check order: lower first (default 100).
        #[arg(long, default_value_t = 100, allow_hyphen_values = true)]
        priority: i64,
        /// Why (the model is told when the rule denies).
        #[arg(long, default_value = "")]
        description: String,
        /// Create it disabled.
        #[arg(long)]
        disabled: bool,
    },
    /// Enable or disable a policy by name.
    Enable {
        /// The policy.
        name: String,
        /// Disable instead.
        #[arg(long)]
        off: bool,
    },
    /// Delete a policy by name.
    Delete {
        /// The policy.
        name: String,
    },
}

/// `turnstone admin usage|audit …`.
#[derive(clap::Args, Debug)]
pub struct UsageArgs {
    /// From this UTC date or time on (`2026-12-01`).
    #[arg(long)]
    pub since: Option<String>,
    /// Before this UTC date or time.
    #[arg(long)]
    pub until: Option<String>,
    /// Only this user (username).
    #[arg(long)]
    pub user: Option<String>,
    /// Grouping, comma-separated: user, model, day.
    #[arg(long, default_value = "user,model,day")]
    pub group_by: String,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// `turnstone admin audit`.
#[derive(clap::Args, Debug)]
pub struct AuditArgs {
    /// At most this many entries (newest first).
    #[arg(long, default_value_t = 50)]
    pub limit: i64,
    /// Only entries older than this id (paging).
    #[arg(long)]
    pub before: Option<i64>,
    /// An action (`auth.login`) or a prefix ending in `.` or `*` (`tool.`).
    #[arg(long)]
    pub action: Option<String>,
    /// Only this user (username).
    #[arg(long)]
    pub user: Option<String>,
    /// Only entries on this target (a workstream id, plugin, policy, …).
    #[arg(long)]
    pub target: Option<String>,
    /// From this UTC date or time on.
    #[arg(long)]
    pub since: Option<String>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

const ROLES: &[&str] = &["admin", "operator", "viewer"];

async fn user_id(db: &Storage, username: &str) -> Result<String> {
    Ok(db
        .get_user_by_name(username)
        .await?
        .ok_or_else(|| anyhow::anyhow!("no user named {username:?}"))?
        .user_id)
}

async fn by_name(db: &Storage, name: &str) -> Result<ToolPolicy> {
    db.list_policies()
        .await?
        .into_iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            anyhow::anyhow!("no policy named {name:?} (see `turnstone admin policy list`)")
        })
}

/// Writes an audit row for a change made from the command line.
pub async fn audit_cli(
    db: &Storage,
    user_id: Option<&str>,
    action: &str,
    target: &str,
    detail: serde_json::Value,
) {
    let mut detail = detail;
    if let Some(o) = detail.as_object_mut() {
        o.insert("via".into(), json!("cli"));
    }
    let e = AuditEntry {
        id: 0,
        timestamp: String::new(),
        user_id: user_id.map(str::to_string),
        action: action.into(),
        target: Some(target.into()),
        detail: Some(detail.to_string()),
        ip: None,
    };
    if let Err(err) = db.append_audit(&e).await {
        eprintln!("warning: the audit log could not be written: {err}");
    }
}

fn policy_line(p: &ToolPolicy) -> String {
    format!(
        "{:<6} {:<24} {:<7} {:<28} {:<9} {}{}",
        p.priority,
        p.name,
        p.action.as_str(),
        p.tool_pattern,
        p.role.as_deref().unwrap_or("*"),
        if p.enabled { "" } else { "(disabled) " },
        p.description
    )
}

/// Runs a policy command.
pub async fn policy(db: &Storage, action: &PolicyAction, out: &mut impl Write) -> Result<()> {
    match action {
        PolicyAction::List { json } => {
            let list = db.list_policies().await?;
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&list)?)?;
            } else if list.is_empty() {
                writeln!(
                    out,
                    "no tool policies: every call follows its tool's own approval rule"
                )?;
            } else {
                writeln!(
                    out,
                    "{:<6} {:<24} {:<7} {:<28} {:<9} description",
                    "prio", "name", "action", "tools", "role"
                )?;
                for p in &list {
                    writeln!(out, "{}", policy_line(p))?;
                }
            }
        }
        PolicyAction::Add {
            name,
            tool_pattern,
            action,
            role,
            priority,
            description,
            disabled,
        } => {
            let Some(action) = PolicyAction_::parse(action) else {
                bail!("--action {action:?}: use allow, deny or ask");
            };
            if let Some(r) = role
                && !ROLES.contains(&r.as_str())
            {
                bail!("--role {r:?}: use admin, operator or viewer");
            }
            let p = db
                .create_policy(&NewToolPolicy {
                    name: name.clone(),
                    tool_pattern: tool_pattern.clone(),
                    action,
                    role: role.clone(),
                    priority: *priority,
                    enabled: !disabled,
                    description: description.clone(),
                    created_by: None,
                })
                .await?;
            audit_cli(db, None, "policy.create", &p.name, json!({ "policy": p })).await;
            writeln!(out, "{}", policy_line(&p))?;
        }
        PolicyAction::Enable { name, off } => {
            let p = by_name(db, name).await?;
            let new = NewToolPolicy {
                name: p.name.clone(),
                tool_pattern: p.tool_pattern.clone(),
                action: p.action,
                role: p.role.clone(),
                priority: p.priority,
                enabled: !off,
                description: p.description.clone(),
                created_by: p.created_by.clone(),
            };
            let after = db
                .update_policy(&p.policy_id, &new)
                .await?
                .ok_or_else(|| anyhow::anyhow!("policy {name:?} was deleted meanwhile"))?;
            audit_cli(
                db,
                None,
                "policy.update",
                name,
                json!({ "before": p, "after": after }),
            )
            .await;
            writeln!(out, "{}", policy_line(&after))?;
        }
        PolicyAction::Delete { name } => {
            let p = by_name(db, name).await?;
            if !db.delete_policy(&p.policy_id).await? {
                bail!("policy {name:?} was deleted meanwhile");
            }
            audit_cli(db, None, "policy.delete", name, json!({ "policy": p })).await;
            writeln!(out, "deleted policy {name}")?;
        }
    }
    Ok(())
}

/// `PolicyAction` of storage, named apart from the clap enum above.
use turnstone_storage::prelude::PolicyAction as PolicyAction_;

/// Prints usage.
pub async fn usage(db: &Storage, a: &UsageArgs, out: &mut impl Write) -> Result<()> {
    let mut group_by = Vec::new();
    for g in a
        .group_by
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
    {
        group_by.push(match g {
            "user" => UsageGroup::User,
            "model" => UsageGroup::Model,
            "day" => UsageGroup::Day,
            other => bail!("--group-by {other:?}: use user, model or day"),
        });
    }
    let user = match &a.user {
        Some(u) => Some(user_id(db, u).await?),
        None => None,
    };
    let rows = db
        .usage_summary(&UsageQuery {
            since: a.since.clone(),
            until: a.until.clone(),
            user_id: user,
            model_alias: None,
            group_by,
        })
        .await?;
    if a.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        return Ok(());
    }
    let names: std::collections::HashMap<String, String> = db
        .list_users()
        .await?
        .into_iter()
        .map(|u| (u.user_id, u.username))
        .collect();
    writeln!(
        out,
        "{:<16} {:<20} {:<10} {:>6} {:>10} {:>10} {:>9} {:>8}",
        "user", "model", "day", "calls", "prompt", "completion", "cached", "avg ms"
    )?;
    for r in rows {
        let user = r
            .user_id
            .as_ref()
            .map(|u| names.get(u).cloned().unwrap_or_else(|| u.clone()))
            .unwrap_or_else(|| "-".into());
        writeln!(
            out,
            "{:<16} {:<20} {:<10} {:>6} {:>10} {:>10} {:>9} {:>8}",
            user,
            r.model.as_deref().unwrap_or("-"),
            r.day.as_deref().unwrap_or("-"),
            r.calls,
            r.prompt_tokens,
            r.completion_tokens,
            r.cached_tokens,
            r.avg_latency_ms
        )?;
    }
    Ok(())
}

/// Prints audit entries.
pub async fn audit(db: &Storage, a: &AuditArgs, out: &mut impl Write) -> Result<()> {
    let user = match &a.user {
        Some(u) => Some(user_id(db, u).await?),
        None => None,
    };
    let entries = db
        .query_audit(&AuditQuery {
            limit: a.limit.clamp(1, 1000),
            before_id: a.before,
            action: a.action.clone(),
            user_id: user,
            target: a.target.clone(),
            since: a.since.clone(),
            until: None,
        })
        .await?;
    if a.json {
        let v: Vec<serde_json::Value> = entries
            .iter()
            .map(|e| {
                json!({
                    "id": e.id, "timestamp": e.timestamp, "user_id": e.user_id,
                    "action": e.action, "target": e.target, "ip": e.ip,
                    "detail": e.detail.as_deref().and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok()),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        return Ok(());
    }
    for e in &entries {
        writeln!(
            out,
            "{:>6} {} {:<22} {:<34} {:<12} {}",
            e.id,
            e.timestamp,
            e.action,
            e.target.as_deref().unwrap_or("-"),
            e.user_id
                .as_deref()
                .map(|u| &u[..u.len().min(12)])
                .unwrap_or("-"),
            e.ip.as_deref().unwrap_or("")
        )?;
    }
    if let Some(last) = entries.last()
        && entries.len() as i64 == a.limit.clamp(1, 1000)
    {
        writeln!(out, "more: --before {}", last.id)?;
    }
    Ok(())
}
