//! Everything a front end needs, assembled once from config and flags: the
//! plugin registry (tools and providers), the model registry, storage and the
//! session defaults. The REPL uses it today; `serve` will share it.

use crate::config::{self, HostConfig};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use turnstone_engine::events::EventSink;
use turnstone_engine::models::{CliModel, LiveModels, ModelRegistry};
use turnstone_engine::session::{ChatSession, SessionConfig};
use turnstone_runtime::reconcile::Shared;
use turnstone_runtime::registry::{LoadOptions, default_builtin_dir};
use turnstone_runtime::{LivePlugins, PluginRegistry, Runtime, RuntimeOptions};
use turnstone_server::plugins::OperatorState;
use turnstone_storage::Storage;
use turnstone_storage::prelude::*;

/// Flags shared by every subcommand that loads plugins.
#[derive(Debug, Clone, Default)]
pub struct PluginFlags {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--workspace`.
    pub workspace: Option<PathBuf>,
    /// `--plugin-dir`.
    pub plugin_dirs: Vec<PathBuf>,
    /// `--builtin-dir`.
    pub builtin_dir: Option<PathBuf>,
    /// `--cache-dir`.
    pub cache_dir: Option<PathBuf>,
    /// `--tool-timeout` (bash default, seconds).
    pub tool_timeout: Option<u64>,
    /// `--mcp-config`: an `mcpServers` JSON file.
    pub mcp_config: Option<PathBuf>,
    /// `--tool-search`.
    pub tool_search: Option<turnstone_mcp::search::SearchMode>,
}

/// Flags that shape chat sessions.
#[derive(Debug, Clone, Default)]
pub struct SessionFlags {
    /// `--base-url`, `--model`, `--api-key`, `--provider`, `--context-window`.
    pub model: CliModel,
    /// `--skip-permissions`.
    pub skip_permissions: bool,
    /// `--tool-truncation`.
    pub tool_truncation: Option<usize>,
    /// `--db` (SQLite file).
    pub db: Option<PathBuf>,
    /// `--retention-days` (0 disables age pruning).
    pub retention_days: u64,
    /// `--event-log`: write every session event here as JSON lines.
    pub event_log: Option<PathBuf>,
}

/// Plugins loaded with the config they were loaded from.
pub struct Loaded {
    /// The parsed config file (defaults when there is none).
    pub config: HostConfig,
    /// Tool and provider components, swapped atomically on reload.
    pub live: Arc<LivePlugins>,
    /// The workspace tools work in.
    pub workspace: PathBuf,
    /// The engine (and its compiled-code cache), shared with the reconciler.
    pub runtime: Arc<Runtime>,
    /// What the plugins were loaded with (the reconciler reloads with it).
    pub options: LoadOptions,
    /// Counters and key-value namespaces kept across plugin versions.
    pub shared: Arc<Shared>,
    /// MCP servers (connecting in the background).
    pub mcp: Arc<turnstone_mcp::McpHub>,
    /// Tool search settings for sessions.
    pub tool_search: turnstone_mcp::search::SearchSettings,
}

impl Loaded {
    /// The plugin registry in force now.
    pub fn registry(&self) -> Arc<PluginRegistry> {
        self.live.snapshot()
    }
}

/// Loads config and plugins, with the operator's stored plugin state
/// (`state`: overrides and run-time MCP servers) over `config.toml`. The model registry's provider hosts are
/// merged into operator grants.
pub async fn load_plugins(
    flags: &PluginFlags,
    models: Option<&CliModel>,
    state: &OperatorState,
) -> Result<(Loaded, Option<ModelRegistry>)> {
    let (mut cfg, cfg_path) = config::load(flags.config.as_deref())?;
    if let Some(p) = &cfg_path {
        tracing::debug!(config = %p.display(), "config loaded");
    }
    let sandbox = Arc::new(cfg.process_sandbox.sandbox());
    if let Some(missing) = sandbox.support().missing() {
        tracing::error!(
            "PROCESS SANDBOX UNAVAILABLE: {missing}. Plugins will not start processes \
             unless the operator sets process_sandbox = \"off\" in their grant."
        );
    } else {
        tracing::info!("process sandbox: {}", sandbox.support().summary());
    }
    turnstone_runtime::sandboxing::set_host_sandbox(sandbox.clone());
    let workspace = match flags.workspace.clone().or(cfg.tools.workspace.clone()) {
        Some(w) => w,
        None => std::env::current_dir()?,
    };
    let workspace = std::fs::canonicalize(&workspace)
        .with_context(|| format!("workspace {}", workspace.display()))?;
    let mut plugins = cfg.plugins.clone();
    plugins.dirs.extend(flags.plugin_dirs.iter().cloned());
    // A trusted key that does not parse is a configuration error, said now.
    plugins
        .signature_policy()
        .context("[plugins] trusted_keys")?;
    let cache_dir = flags
        .cache_dir
        .clone()
        .or(plugins.cache_dir.clone())
        .or_else(config::default_cache_dir);
    let engine = plugins.engine_options().map_err(anyhow::Error::msg)?;
    let runtime = Runtime::new(RuntimeOptions {
        cache_dir,
        engine,
        ..Default::default()
    })?;
    let builtin_dir = flags
        .builtin_dir
        .clone()
        .or(plugins.builtin_dir.clone())
        .or_else(default_builtin_dir);
    if builtin_dir.is_none() {
        tracing::warn!(
            "no built-in component directory found; run `cargo xtask build` or pass --builtin-dir"
        );
    }
    if let Some(t) = flags.tool_timeout {
        cfg.tools.timeout = Some(t);
    }
    cfg.tools.apply(&mut plugins)?;
    let registry = match models {
        Some(cli) => {
            let env = |k: &str| std::env::var(k).ok();
            let reg = ModelRegistry::build(&cfg.models, cli, &env, None)?;
            for (component, grant) in reg.provider_grants() {
                let g = plugins.grants.entry(component.to_string()).or_default();
                for h in grant.http {
                    if !g.http.contains(&h) {
                        g.http.push(h);
                    }
                }
                for s in grant.secrets {
                    if !g.secrets.contains(&s) {
                        g.secrets.push(s);
                    }
                }
            }
            Some(reg)
        }
        None => None,
    };
    let opts = LoadOptions {
        builtin_dir,
        config: plugins,
        workspace: Some(workspace.clone()),
        network: turnstone_runtime::netguard::NetworkPolicy {
            allow_private_network: cfg.tools.allow_private_network,
            ..Default::default()
        },
        sandbox,
        ..Default::default()
    };
    let mut mcp_cfg = cfg.mcp.clone();
    if let Some(path) = &flags.mcp_config {
        mcp_cfg.merge_json_file(path)?;
    }
    // Servers connect in the background: start-up never waits for them.
    let mcp = turnstone_mcp::McpHub::new(
        &mcp_cfg,
        &opts.config.grants,
        turnstone_mcp::ServerEnv {
            workspace: workspace.clone(),
            secrets: opts.secrets.clone(),
            network: opts.network.clone(),
        },
    )?;
    mcp.apply(&state.mcp, &state.plugins.plugins);
    let tool_search = cfg.tools.search_settings(flags.tool_search);
    let shared = Arc::new(Shared::default());
    let (reg, _) = turnstone_runtime::reconcile::build(
        &runtime,
        &opts,
        &state.plugins,
        None,
        &turnstone_runtime::reconcile::Reload::None,
        &shared,
    )
    .await;
    Ok((
        Loaded {
            config: cfg,
            live: LivePlugins::new(reg),
            workspace,
            runtime: Arc::new(runtime),
            options: opts,
            shared,
            mcp,
            tool_search,
        },
        registry,
    ))
}

/// A ready chat environment.
pub struct App {
    /// Plugins and config.
    pub loaded: Loaded,
    /// Model aliases, swappable at run time.
    pub models: Arc<LiveModels>,
    /// Conversation storage.
    pub storage: Storage,
    /// Session flags.
    pub flags: SessionFlags,
    /// What start-up maintenance did (pruned, reaped), for the banner.
    pub housekeeping: Vec<String>,
    /// `--event-log`, open.
    pub event_log: Option<turnstone_engine::event_log::EventLog>,
    /// The skills catalogue: `[skills] dirs` and the database.
    pub skills: Arc<turnstone_engine::skills::SkillLibrary>,
    /// `[agents]`: what each sub-agent may spend.
    pub task_budget: turnstone_engine::session::Budget,
    /// Wakes this process's watch scheduler (the terminal's, or the server's).
    pub watch_wake: Arc<tokio::sync::Notify>,
    /// The terminal's open workstreams, by id (where watch results go).
    pub open: OpenSessions,
    /// Policies, guards and the audit of decisions, shared by every session.
    pub safety: Arc<turnstone_engine::safety::Safety>,
}

/// Sessions of the workstreams the terminal has open, by workstream id.
pub type OpenSessions = Arc<
    std::sync::Mutex<std::collections::HashMap<String, turnstone_engine::runner::SessionHandle>>,
>;

/// The per-user default database for the CLI, so `--resume` works from any directory.
fn default_cli_db() -> Option<PathBuf> {
    std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .map(|d| d.join("turnstone/turnstone.db"))
}

/// Where the terminal writes what `open_preview` shows (it has no pane):
/// `$XDG_CACHE_HOME/turnstone/previews`, else `~/.cache/…`, else the temp dir.
fn preview_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("turnstone/previews")
}

/// Where SQLite lives when nothing says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbDefault {
    /// The per-user file (the terminal: `--resume` from any directory).
    PerUser,
    /// `./.turnstone.db` (the server and its offline admin tool).
    WorkingDir,
}

/// Opens storage: `--db`, else `[database]` + `TURNSTONE_DB_*`, else the default.
pub async fn open_storage(
    cfg: &HostConfig,
    db_flag: Option<&Path>,
    default: DbDefault,
) -> Result<Storage> {
    let mut db = cfg.database.clone().with_env()?;
    if let Some(path) = db_flag {
        db.backend = BackendKind::Sqlite;
        db.path = Some(path.to_path_buf());
    } else if db.backend == BackendKind::Sqlite
        && db.path.is_none()
        && default == DbDefault::PerUser
    {
        db.path = default_cli_db();
    }
    if db.backend == BackendKind::Sqlite
        && let Some(parent) = db.sqlite_path().parent()
        && !parent.as_os_str().is_empty()
    {
        tokio::fs::create_dir_all(parent)
            .await
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    turnstone_storage::open(&db)
        .await
        .with_context(|| format!("cannot open the database ({:?})", db.backend))
}

/// The server's database if it exists (PostgreSQL, `--db`, or an existing
/// `./.turnstone.db`); read-only commands never create one.
pub async fn open_existing_storage(
    cfg: &HostConfig,
    db_flag: Option<&Path>,
) -> Result<Option<Storage>> {
    let db = cfg.database.clone().with_env()?;
    let exists =
        db_flag.is_some() || db.backend != BackendKind::Sqlite || db.sqlite_path().is_file();
    if !exists {
        return Ok(None);
    }
    open_storage(cfg, db_flag, DbDefault::WorkingDir)
        .await
        .map(Some)
}

impl App {
    /// Loads everything and runs start-up housekeeping.
    pub async fn start(
        plugins: &PluginFlags,
        flags: SessionFlags,
        db_default: DbDefault,
    ) -> Result<Self> {
        // Storage first: the operator's plugin state decides what loads.
        let (cfg, _) = config::load(plugins.config.as_deref())?;
        let storage = open_storage(&cfg, flags.db.as_deref(), db_default).await?;
        let state = turnstone_server::plugins::operator_state(&storage).await?;
        let (loaded, registry) = load_plugins(plugins, Some(&flags.model), &state).await?;
        let registry = registry.context("no model registry")?;
        let models = LiveModels::over_live_plugins(registry, loaded.live.clone());
        // Fail now, with the reason, rather than at the first message.
        models.bindings(None)?;
        let mut housekeeping = Vec::new();
        let retention =
            (flags.retention_days > 0).then(|| Duration::from_secs(flags.retention_days * 86_400));
        match storage
            .prune_workstreams(retention, Duration::from_secs(3600))
            .await
        {
            Ok(p) if !p.is_empty() => {
                housekeeping.push(format!("pruned {} old workstream(s)", p.len()))
            }
            Ok(_) => {}
            Err(e) => housekeeping.push(format!("pruning failed: {e}")),
        }
        match storage
            .reap_abandoned_creates(Duration::from_secs(600), &[])
            .await
        {
            Ok(r) if !r.is_empty() => {
                housekeeping.push(format!("reaped {} abandoned create(s)", r.len()))
            }
            Ok(_) => {}
            Err(e) => housekeeping.push(format!("reaping failed: {e}")),
        }
        let event_log = match &flags.event_log {
            Some(p) => Some(
                turnstone_engine::event_log::EventLog::create(p)
                    .with_context(|| format!("--event-log {}", p.display()))?,
            ),
            None => None,
        };
        let skills = turnstone_engine::skills::SkillLibrary::new(
            loaded.config.skills.dirs(),
            Some(storage.clone()),
        );
        let task_budget = loaded.config.agents.budget()?;
        let judge = &loaded.config.judge;
        let judge_binding = match &judge.model {
            Some(alias) => Some(
                models
                    .bindings(Some(alias))
                    .with_context(|| format!("[judge] model {alias:?}"))?
                    .0,
            ),
            None => None,
        };
        let safety = turnstone_engine::safety::Safety::new(
            judge.settings()?,
            judge_binding,
            Some(storage.clone()),
        );
        Ok(Self {
            loaded,
            models,
            storage,
            flags,
            housekeeping,
            event_log,
            skills,
            task_budget,
            watch_wake: Arc::new(tokio::sync::Notify::new()),
            open: Default::default(),
            safety,
        })
    }

    /// Creates and publishes a new workstream.
    pub async fn create_workstream(&self, name: &str) -> Result<String> {
        let r = self
            .storage
            .create_workstream(&NewWorkstream {
                name: name.to_string(),
                ..Default::default()
            })
            .await?;
        self.storage.publish_workstream(&r).await?;
        Ok(r.ws_id)
    }

    /// A session on workstream `ws_id` (history resumed when `resume`).
    pub async fn session(&self, ws_id: &str, sink: EventSink, resume: bool) -> Result<ChatSession> {
        let sink = match &self.event_log {
            Some(log) => log.tap(sink, Some(ws_id.to_string())),
            None => sink,
        };
        let (binding, fallbacks) = self.models.bindings(None)?;
        let cfg = SessionConfig {
            skip_permissions: self.flags.skip_permissions,
            tool_truncation: self.flags.tool_truncation,
            tool_search: self.loaded.tool_search,
            ..SessionConfig::new(ws_id, self.loaded.workspace.clone())
        };
        let s = ChatSession::new(binding, self.loaded.live.clone(), sink, cfg)
            .with_mcp(self.loaded.mcp.clone())
            .with_fallbacks(fallbacks)
            .with_live_models(self.models.clone(), None)
            .with_storage(self.storage.clone(), ws_id)
            .with_safety(self.safety.clone())
            .with_agent(turnstone_engine::session::AgentContext {
                skills: Some(self.skills.clone()),
                model_alias: Some(self.models.snapshot().default.clone()),
                // The terminal's database is one person's.
                local: true,
                task_budget: self.task_budget,
                watch_wake: Some(self.watch_wake.clone()),
                notify_after: self.loaded.config.notify.after(),
                preview_dir: Some(preview_dir()),
                channels: None,
            });
        Ok(if resume { s.resume().await? } else { s })
    }

    /// `name: reason` of every plugin that failed to load (for banners).
    pub fn failed_plugins(&self) -> Vec<String> {
        self.loaded
            .registry()
            .entries()
            .iter()
            .filter_map(|e| match &e.status {
                turnstone_runtime::registry::PluginStatus::Failed(err) => {
                    Some(format!("{}: {err}", e.name()))
                }
                _ => None,
            })
            .collect()
    }

    /// One line describing the model in use, with its context window when
    /// it is known without asking the server (`window` is what was found).
    pub fn model_line(&self, window: Option<u32>) -> String {
        let reg = self.models.snapshot();
        match reg.alias(&reg.default) {
            Some(a) => {
                let context = match window.or(a.config.context_window) {
                    Some(w) => format!("{}k context", w / 1000),
                    None => "context window asked of the server at first use".into(),
                };
                format!(
                    "{} ({} · {} · {context})",
                    a.name, a.config.model, a.base_url
                )
            }
            None => reg.default.clone(),
        }
    }

    /// The default alias's context window: configured, else what its server
    /// or provider says (the probe is bounded; `None` when no binding).
    pub async fn resolve_window(&self) -> Option<u32> {
        let (mut binding, _) = self.models.bindings(None).ok()?;
        Some(binding.resolve_window().await)
    }
}
