//! `turnstone plugins enable|disable|grant|revoke|config|install|uninstall|reload`:
//! operator changes written to the `plugins` table of the server's database
//! (and its audit log). Running servers on that database apply them within
//! about a second; nothing here needs a server.

use crate::app::{self, Loaded, PluginFlags};
use crate::plugins_cmd::caps_summary;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::{Path, PathBuf};
use turnstone_runtime::capability::{Access, Capabilities, FsGrant, SecretGrant};
use turnstone_runtime::{Manifest, PluginEntry};
use turnstone_server::plugins::{Actor, PluginStore, Subject, install_plugin, uninstall_plugin};
use turnstone_storage::Storage;

/// Capabilities named on the command line.
#[derive(Args, Debug, Clone, Default)]
pub struct CapFlags {
    /// Filesystem path: `workspace[/<dir>]:ro|rw` or `/abs/path:ro|rw` (repeatable).
    #[arg(long = "fs", value_name = "PATH:ro|rw")]
    pub fs: Vec<String>,
    /// Outbound HTTP host: `host`, `host:port`, `*.domain` or `<public>` (repeatable).
    #[arg(long = "http", value_name = "HOST")]
    pub http: Vec<String>,
    /// Program the plugin may run (repeatable).
    #[arg(long = "exec", value_name = "PROGRAM")]
    pub exec: Vec<String>,
    /// Environment variable the plugin may set on children (repeatable).
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// Host-held secret the plugin may reference (repeatable):
    /// `NAME`, or `NAME@HOST[,HOST…]` to bind it to hosts, with `;HEADER`
    /// to bind it to a header (default: `authorization`, or the header the
    /// manifest asks for), e.g. `'GITHUB_TOKEN@api.github.com;authorization'`.
    #[arg(long = "secret", value_name = "NAME[@HOSTS][;HEADER]")]
    pub secrets: Vec<String>,
    /// May ask the session's model for completions.
    #[arg(long = "model-access")]
    pub model_access: bool,
    /// The caller's memories: `ro` (read) or `rw` (also save and delete).
    #[arg(long = "memory", value_name = "ro|rw")]
    pub memory: Option<String>,
    /// May search the caller's own past conversations.
    #[arg(long = "history")]
    pub history: bool,
    /// The skills catalogue: `ro` (list, search, load) or `rw` (also save).
    #[arg(long = "skills", value_name = "ro|rw")]
    pub skills: Option<String>,
    /// May learn the calling session's workstream, user, model and workspace.
    #[arg(long = "session-info")]
    pub session: bool,
    /// May run sub-agents for its caller.
    #[arg(long = "agents")]
    pub agents: bool,
    /// May create, list and cancel its caller's watches.
    #[arg(long = "watches")]
    pub watches: bool,
    /// May read its caller's notification targets and deliver to them.
    #[arg(long = "notify")]
    pub notify: bool,
    /// May open content in its caller's preview pane.
    #[arg(long = "preview")]
    pub preview: bool,
    /// Run the processes it spawns in the kernel sandbox (`on`, the
    /// default) or not (`off`).
    #[arg(long = "process-sandbox", value_parser = ["on", "off"])]
    pub process_sandbox: Option<String>,
}

/// Parses `--secret NAME[@HOST,…][;HEADER]` (validated with the rest of
/// the grant).
fn secret_flag(raw: &str) -> SecretGrant {
    let (rest, header) = match raw.split_once(';') {
        Some((r, h)) => (r, vec![h.trim().to_ascii_lowercase()]),
        None => (raw, Vec::new()),
    };
    let (name, hosts) = match rest.split_once('@') {
        Some((n, h)) => (
            n,
            h.split(',')
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty())
                .collect(),
        ),
        None => (rest, Vec::new()),
    };
    SecretGrant {
        name: name.trim().to_string(),
        hosts,
        headers: header,
    }
}

fn access_flag(flag: &str, v: Option<&str>) -> Result<Option<Access>> {
    Ok(match v {
        None => None,
        Some("ro" | "read-only") => Some(Access::ReadOnly),
        Some("rw" | "read-write") => Some(Access::ReadWrite),
        Some(other) => bail!("--{flag} {other:?}: give ro or rw"),
    })
}

impl CapFlags {
    fn to_caps(&self) -> Result<Capabilities> {
        let mut filesystem = Vec::new();
        for f in &self.fs {
            let (path, mode) = f
                .rsplit_once(':')
                .with_context(|| format!("--fs {f:?}: expected PATH:ro or PATH:rw"))?;
            let access = match mode {
                "ro" | "read-only" => Access::ReadOnly,
                "rw" | "read-write" => Access::ReadWrite,
                other => bail!("--fs {f:?}: access must be ro or rw, not {other:?}"),
            };
            filesystem.push(FsGrant {
                path: path.to_string(),
                access,
            });
        }
        let caps = Capabilities {
            filesystem,
            http: self.http.clone(),
            exec: self.exec.clone(),
            env: self.env.clone(),
            secrets: self.secrets.iter().map(|s| secret_flag(s)).collect(),
            model: self.model_access,
            memory: access_flag("memory", self.memory.as_deref())?,
            history: self.history,
            skills: access_flag("skills", self.skills.as_deref())?,
            session: self.session,
            agents: self.agents,
            watches: self.watches,
            notify: self.notify,
            preview: self.preview,
            process_sandbox: match self.process_sandbox.as_deref() {
                Some("off") => Some(turnstone_runtime::capability::ProcessSandbox::Off),
                Some(_) => Some(turnstone_runtime::capability::ProcessSandbox::On),
                None => None,
            },
        };
        caps.validate()?;
        Ok(caps)
    }
}

/// Actions that change plugin state.
#[derive(Subcommand, Debug)]
pub enum AdminAction {
    /// Enable a plugin.
    Enable {
        /// Plugin name.
        name: String,
    },
    /// Disable a plugin (its tools leave every session's next model request).
    Disable {
        /// Plugin name.
        name: String,
    },
    /// Add capabilities to a plugin's grant (or replace it with --replace,
    /// or go back to the default for its origin with --default).
    Grant {
        /// Plugin name.
        name: String,
        #[command(flatten)]
        caps: CapFlags,
        /// Replace the grant instead of adding to it.
        #[arg(long)]
        replace: bool,
        /// Drop the operator grant: built-ins get what they request, others nothing.
        #[arg(long, conflicts_with = "replace")]
        default: bool,
    },
    /// Remove capabilities from a plugin's grant (--all: every one).
    Revoke {
        /// Plugin name.
        name: String,
        #[command(flatten)]
        caps: CapFlags,
        /// Revoke everything.
        #[arg(long)]
        all: bool,
    },
    /// Set values the plugin reads with `config.get` (stored over
    /// `[plugins.config.<name>]`).
    Config {
        /// Plugin name.
        name: String,
        /// `KEY=VALUE` pairs to set.
        pairs: Vec<String>,
        /// Keys to remove (repeatable).
        #[arg(long)]
        unset: Vec<String>,
        /// Start from an empty overlay.
        #[arg(long)]
        clear: bool,
    },
    /// Install a plugin from a directory (plugin.toml + component) or a .wasm
    /// with --manifest. It lands disabled with nothing granted: review what it
    /// requests, then `grant` and `enable`.
    Install {
        /// Plugin directory, or the component file.
        path: PathBuf,
        /// plugin.toml, when PATH is a .wasm file.
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Upgrade an installed third-party plugin of the same name.
        #[arg(long)]
        replace: bool,
    },
    /// Remove an installed third-party plugin.
    Uninstall {
        /// Plugin name.
        name: String,
    },
    /// Ask every server on this database to reload a plugin from disk.
    Reload {
        /// Plugin name.
        name: String,
    },
}

fn actor() -> Actor {
    Actor {
        user_id: std::env::var("USER").ok().map(|u| format!("cli:{u}")),
        ip: None,
        via: "cli",
    }
}

fn entry(loaded: &Loaded, name: &str) -> Result<PluginEntry> {
    let reg = loaded.registry();
    match reg.entry(name) {
        Some(e) => Ok(e.clone()),
        None => {
            let known: Vec<String> = reg
                .entries()
                .iter()
                .map(|e| e.name())
                .chain(loaded.mcp.servers().iter().map(|s| s.name.clone()))
                .collect();
            bail!("no plugin named {name:?} (known: {})", known.join(", "))
        }
    }
}

/// The component or MCP server `name`.
fn subject(loaded: &Loaded, name: &str) -> Result<Subject> {
    if loaded.registry().entry(name).is_none()
        && let Some(server) = loaded.mcp.server(name)
    {
        return Ok(Subject::mcp(&server));
    }
    Ok(Subject::component(&entry(loaded, name)?)?)
}

/// Runs one action against `db`.
pub async fn run(
    flags: &PluginFlags,
    db: &Storage,
    action: &AdminAction,
    out: &mut impl Write,
) -> Result<()> {
    let state = turnstone_server::plugins::operator_state(db).await?;
    let (loaded, _) = app::load_plugins(flags, None, &state).await?;
    // Nothing here talks to MCP servers: resolve names, then stop them.
    loaded.mcp.shutdown();
    let store = PluginStore::new(db);
    let who = actor();
    match action {
        AdminAction::Enable { name } => {
            store
                .set_enabled(&who, &subject(&loaded, name)?, true)
                .await?;
            writeln!(out, "{name}: enabled")?;
        }
        AdminAction::Disable { name } => {
            store
                .set_enabled(&who, &subject(&loaded, name)?, false)
                .await?;
            writeln!(out, "{name}: disabled")?;
        }
        AdminAction::Grant {
            name,
            caps,
            replace,
            default,
        } => {
            let e = subject(&loaded, name)?;
            if *default {
                store.set_grant(&who, &e, None).await?;
                writeln!(out, "{name}: grant reset to the default for its origin")?;
                return Ok(());
            }
            let add = caps.to_caps()?;
            let grant = if *replace {
                add
            } else {
                let stored = db.get_plugin(name).await?.and_then(|r| r.granted);
                let mut g = match stored {
                    Some(text) => serde_json::from_str(&text).unwrap_or_default(),
                    None => store.current_grant(&e).await?,
                };
                merge(&mut g, add);
                g
            };
            store.set_grant(&who, &e, Some(&grant)).await?;
            writeln!(out, "{name}: granted {}", caps_summary(&grant))?;
        }
        AdminAction::Revoke { name, caps, all } => {
            let e = subject(&loaded, name)?;
            let what = caps.to_caps()?;
            if !*all && what.is_empty() {
                bail!(
                    "name what to revoke (--fs, --http, --exec, --env, --secret, --model-access, --memory, --history, --skills, --session-info, --agents, --watches, --notify, --preview) or pass --all"
                );
            }
            let left = store.revoke(&who, &e, (!*all).then_some(&what)).await?;
            writeln!(out, "{name}: grant now {}", caps_summary(&left))?;
        }
        AdminAction::Config {
            name,
            pairs,
            unset,
            clear,
        } => {
            let e = subject(&loaded, name)?;
            let mut config: std::collections::BTreeMap<String, String> = if *clear {
                Default::default()
            } else {
                db.get_plugin(name)
                    .await?
                    .and_then(|r| serde_json::from_str(&r.config).ok())
                    .unwrap_or_default()
            };
            for p in pairs {
                let (k, v) = p
                    .split_once('=')
                    .with_context(|| format!("{p:?}: expected KEY=VALUE"))?;
                if k.is_empty() {
                    bail!("{p:?}: empty key");
                }
                config.insert(k.to_string(), v.to_string());
            }
            for k in unset {
                config.remove(k);
            }
            store.set_config(&who, &e, &config).await?;
            writeln!(out, "{name}: config {}", serde_json::to_string(&config)?)?;
        }
        AdminAction::Install {
            path,
            manifest,
            replace,
        } => {
            let (text, wasm, signature) = read_plugin(path, manifest.as_deref()).await?;
            let signatures = loaded.options.config.signature_policy()?;
            let root = loaded
                .options
                .config
                .install_dir()
                .context("no install directory: set [plugins] install_dir or dirs")?;
            let name = install_plugin(
                &loaded.runtime,
                &root,
                db,
                &loaded.registry(),
                &who,
                turnstone_server::plugins::Upload {
                    manifest: &text,
                    wasm,
                    signature: signature.as_deref(),
                },
                &signatures,
                *replace,
            )
            .await?;
            let m = Manifest::parse(&text, Path::new("plugin.toml"))?;
            writeln!(
                out,
                "{name} {} installed in {} (disabled, nothing granted)",
                m.plugin.version,
                root.join(&name).display()
            )?;
            writeln!(out, "  requests: {}", caps_summary(&m.capabilities))?;
            writeln!(
                out,
                "  review, then: turnstone plugins grant {name} … && turnstone plugins enable {name}"
            )?;
        }
        AdminAction::Uninstall { name } => {
            if loaded.registry().entry(name).is_none() && db.get_mcp_server(name).await?.is_some() {
                db.delete_mcp_server(name).await?;
                store
                    .audit(&who, "plugin.mcp.delete", name, serde_json::Value::Null)
                    .await;
                writeln!(out, "{name}: MCP server deleted")?;
                return Ok(());
            }
            uninstall_plugin(db, &entry(&loaded, name)?, &who).await?;
            writeln!(out, "{name}: uninstalled")?;
        }
        AdminAction::Reload { name } => {
            store.request_reload(&who, &subject(&loaded, name)?).await?;
            writeln!(out, "{name}: reload requested")?;
        }
    }
    Ok(())
}

/// `grant` plus everything in `add` (no duplicates).
fn merge(grant: &mut Capabilities, add: Capabilities) {
    for f in add.filesystem {
        grant.filesystem.retain(|g| g.path != f.path);
        grant.filesystem.push(f);
    }
    let extend = |have: &mut Vec<String>, more: Vec<String>| {
        for m in more {
            if !have.contains(&m) {
                have.push(m);
            }
        }
    };
    extend(&mut grant.http, add.http);
    extend(&mut grant.exec, add.exec);
    extend(&mut grant.env, add.env);
    for s in add.secrets {
        grant.secrets.retain(|g| g.name != s.name);
        grant.secrets.push(s);
    }
    grant.model |= add.model;
    grant.memory = grant.memory.max(add.memory);
    grant.history |= add.history;
    grant.skills = grant.skills.max(add.skills);
    grant.session |= add.session;
    grant.agents |= add.agents;
    grant.watches |= add.watches;
    grant.notify |= add.notify;
    grant.preview |= add.preview;
    if add.process_sandbox.is_some() {
        grant.process_sandbox = add.process_sandbox;
    }
}

/// Manifest text and component bytes from a plugin directory or a .wasm + manifest.
/// The manifest text, component bytes and (when there is one beside the
/// manifest) `plugin.sig` of a plugin to install.
async fn read_plugin(
    path: &Path,
    manifest: Option<&Path>,
) -> Result<(String, Vec<u8>, Option<String>)> {
    let (manifest_path, wasm_path) = if path.is_dir() {
        let mp = path.join("plugin.toml");
        let text = tokio::fs::read_to_string(&mp)
            .await
            .with_context(|| format!("cannot read {}", mp.display()))?;
        let m = Manifest::parse(&text, &mp)?;
        (mp, path.join(m.component_file()))
    } else {
        let mp = manifest
            .map(Path::to_path_buf)
            .context("PATH is a file: pass its plugin.toml with --manifest")?;
        (mp, path.to_path_buf())
    };
    let text = tokio::fs::read_to_string(&manifest_path)
        .await
        .with_context(|| format!("cannot read {}", manifest_path.display()))?;
    let wasm = tokio::fs::read(&wasm_path)
        .await
        .with_context(|| format!("cannot read {}", wasm_path.display()))?;
    let sig_path = manifest_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(turnstone_runtime::signing::SIGNATURE_FILE);
    let signature = tokio::fs::read_to_string(&sig_path).await.ok();
    Ok((text, wasm, signature))
}
