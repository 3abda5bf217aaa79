//! `turnstone admin`: offline user and API-token administration on the same
//! database the server uses (no server needs to run).

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use std::io::{IsTerminal, Write};
use turnstone_server::passwords::{self, MIN_PASSWORD_CHARS};
use turnstone_storage::Storage;

/// Roles a user can have (RBAC).
pub const ROLES: &[&str] = &["admin", "operator", "viewer"];
/// Token scopes, weakest first.
pub const SCOPES: &[&str] = &["read", "write", "approve", "service"];

/// `turnstone admin …`.
#[derive(Subcommand, Debug)]
pub enum AdminAction {
    /// Create a user. The password is asked for on the terminal (twice), or
    /// read from the first line of stdin with --password-stdin.
    CreateUser {
        /// Login name: letters, digits, `.`, `_`, `-`; at most 64.
        username: String,
        /// Display name (default: the username).
        #[arg(long)]
        display_name: Option<String>,
        /// admin, operator or viewer.
        #[arg(long, default_value = "viewer")]
        role: String,
        /// Read the password from stdin instead of prompting.
        #[arg(long)]
        password_stdin: bool,
    },
    /// List users.
    ListUsers {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Issue an API token (`ts_` + 64 hex). It is printed once; only its hash is stored.
    CreateToken {
        /// Owner's username.
        #[arg(long)]
        user: String,
        /// Label, e.g. the client that will use it.
        #[arg(long, default_value = "cli")]
        name: String,
        /// Comma-separated scopes: read, write, approve, service.
        #[arg(long, default_value = "read,write")]
        scopes: String,
        /// Expire after this many days (default: never).
        #[arg(long)]
        expires_days: Option<u32>,
    },
    /// List API tokens (never the token itself).
    ListTokens {
        /// Only this user's tokens.
        #[arg(long)]
        user: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Revoke an API token by its id.
    RevokeToken {
        /// Token id (from list-tokens).
        token_id: String,
    },
    /// Tool policies: allow, deny or ask per tool glob, optionally per role.
    Policy {
        #[command(subcommand)]
        action: crate::admin_governance::PolicyAction,
    },
    /// Model usage (tokens, calls, latency) grouped by user, model and day.
    Usage(crate::admin_governance::UsageArgs),
    /// The audit log, newest first.
    Audit(crate::admin_governance::AuditArgs),
}

/// Parses `read,write` into validated scopes.
pub fn parse_scopes(csv: &str) -> Result<Vec<String>> {
    let scopes: Vec<String> = csv
        .split(',')
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect();
    if scopes.is_empty() {
        bail!("at least one scope is needed (read, write, approve, service)");
    }
    for s in &scopes {
        if !SCOPES.contains(&s.as_str()) {
            bail!("unknown scope {s:?}: expected read, write, approve or service");
        }
    }
    Ok(scopes)
}

fn read_password(from_stdin: bool) -> Result<String> {
    if from_stdin || !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("reading the password from stdin")?;
        return Ok(line.trim_end_matches(['\n', '\r']).to_string());
    }
    let first = prompt_hidden("Password: ")?;
    let second = prompt_hidden("Repeat password: ")?;
    if first != second {
        bail!("the passwords do not match");
    }
    Ok(first)
}

/// Reads a line on the terminal without echoing it.
fn prompt_hidden(prompt: &str) -> Result<String> {
    use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers, read};
    let mut err = std::io::stderr();
    write!(err, "{prompt}")?;
    err.flush()?;
    crossterm::terminal::enable_raw_mode()?;
    let mut out = String::new();
    let result = loop {
        match read() {
            Ok(Event::Key(k)) if k.kind != KeyEventKind::Release => match k.code {
                KeyCode::Enter => break Ok(()),
                KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                    break Err(anyhow::anyhow!("cancelled"));
                }
                KeyCode::Backspace => {
                    out.pop();
                }
                KeyCode::Char(c) => out.push(c),
                _ => {}
            },
            Ok(_) => {}
            Err(e) => break Err(e.into()),
        }
    };
    let _ = crossterm::terminal::disable_raw_mode();
    writeln!(err)?;
    result.map(|()| out)
}

async fn user_id(db: &Storage, username: &str) -> Result<String> {
    Ok(db
        .get_user_by_name(username)
        .await?
        .with_context(|| format!("no user named {username:?}"))?
        .user_id)
}

/// Runs one admin action, writing results to `out`.
pub async fn run(db: &Storage, action: &AdminAction, out: &mut impl Write) -> Result<()> {
    match action {
        AdminAction::CreateUser {
            username,
            display_name,
            role,
            password_stdin,
        } => {
            passwords::validate_username(username).map_err(anyhow::Error::msg)?;
            if !ROLES.contains(&role.as_str()) {
                bail!("unknown role {role:?}: expected admin, operator or viewer");
            }
            if db.get_user_by_name(username).await?.is_some() {
                bail!("a user named {username:?} already exists");
            }
            let password = read_password(*password_stdin)?;
            if password.chars().count() < MIN_PASSWORD_CHARS {
                bail!("the password must have at least {MIN_PASSWORD_CHARS} characters");
            }
            let hash = passwords::hash(&password).map_err(anyhow::Error::msg)?;
            let user = db
                .create_user(
                    username,
                    display_name.as_deref().unwrap_or(username),
                    &hash,
                    role,
                )
                .await?;
            crate::admin_governance::audit_cli(
                db,
                Some(&user.user_id),
                "auth.user_create",
                &user.username,
                serde_json::json!({ "role": user.role }),
            )
            .await;
            writeln!(
                out,
                "created user {} ({}, role {})",
                user.username, user.user_id, user.role
            )?;
        }
        AdminAction::ListUsers { json } => {
            let users = db.list_users().await?;
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&users)?)?;
            } else {
                for u in users {
                    writeln!(
                        out,
                        "{:<20} {:<9} {:<24} {}  {}",
                        u.username, u.role, u.display_name, u.user_id, u.created
                    )?;
                }
            }
        }
        AdminAction::CreateToken {
            user,
            name,
            scopes,
            expires_days,
        } => {
            let scopes = parse_scopes(scopes)?;
            let uid = user_id(db, user).await?;
            let expires = expires_days.map(|d| {
                turnstone_storage::util::format_ts(
                    std::time::SystemTime::now()
                        + std::time::Duration::from_secs(u64::from(d) * 86_400),
                )
            });
            let (raw, token) = db
                .create_api_token(&uid, name, &scopes, expires.as_deref())
                .await?;
            crate::admin_governance::audit_cli(
                db,
                Some(&uid),
                "auth.token_create",
                &token.token_id,
                serde_json::json!({ "user": user, "name": name, "scopes": token.scopes, "expires": token.expires }),
            )
            .await;
            writeln!(out, "{raw}")?;
            eprintln!(
                "token {} for {user} (scopes {}{}) — shown once; store it now",
                token.token_id,
                token.scopes.join(","),
                token
                    .expires
                    .as_deref()
                    .map(|e| format!(", expires {e}"))
                    .unwrap_or_default()
            );
        }
        AdminAction::ListTokens { user, json } => {
            let uid = match user {
                Some(u) => Some(user_id(db, u).await?),
                None => None,
            };
            let tokens = db.list_api_tokens(uid.as_deref()).await?;
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&tokens)?)?;
            } else {
                for t in tokens {
                    writeln!(
                        out,
                        "{}  {}…  {:<12} {:<20} expires {}  last used {}",
                        t.token_id,
                        t.token_prefix,
                        t.name,
                        t.scopes.join(","),
                        t.expires.as_deref().unwrap_or("never"),
                        t.last_used.as_deref().unwrap_or("never")
                    )?;
                }
            }
        }
        AdminAction::RevokeToken { token_id } => {
            if !db.revoke_api_token(token_id).await? {
                bail!("no token with id {token_id:?}");
            }
            crate::admin_governance::audit_cli(
                db,
                None,
                "auth.token_revoke",
                token_id,
                serde_json::json!({}),
            )
            .await;
            writeln!(out, "revoked {token_id}")?;
        }
        AdminAction::Policy { action } => crate::admin_governance::policy(db, action, out).await?,
        AdminAction::Usage(a) => crate::admin_governance::usage(db, a, out).await?,
        AdminAction::Audit(a) => crate::admin_governance::audit(db, a, out).await?,
    }
    Ok(())
}
