//! `turnstone`: the host binary.

mod admin;
mod admin_governance;
mod app;
mod config;
mod markdown;
mod mcp_cli;
mod plugins_admin;
mod plugins_cmd;
mod plugins_sign;
mod precompile_cmd;
mod repl;
mod serve_cmd;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Instant;

/// Turnstone: orchestration for tool-using AI agents, with every tool, provider
/// and channel running as a sandboxed WebAssembly component.
///
/// Without a subcommand, starts the interactive terminal against the configured
/// model. With stdin piped, each input line is one message and it exits at EOF.
#[derive(Parser, Debug)]
#[command(name = "turnstone", version, about, long_about)]
struct Cli {
    /// Config file (default: $TURNSTONE_CONFIG, ~/.config/turnstone/config.toml, ./config.toml).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    /// Workspace directory the tools work in (default: [tools] workspace, else the current directory).
    #[arg(long, global = true)]
    workspace: Option<PathBuf>,
    /// Extra third-party plugin directory (repeatable); adds to [plugins] dirs.
    #[arg(long = "plugin-dir", global = true)]
    plugin_dirs: Vec<PathBuf>,
    /// Directory of built-in components (default: [plugins] builtin_dir, else `components/` beside the binary).
    #[arg(long, global = true, env = "TURNSTONE_BUILTIN_PLUGINS")]
    builtin_dir: Option<PathBuf>,
    /// Precompiled component cache (default: [plugins] cache_dir, else ~/.cache/turnstone/components).
    #[arg(long, global = true)]
    cache_dir: Option<PathBuf>,
    /// Default bash timeout in seconds (1-600; overrides [tools] timeout).
    #[arg(long, global = true)]
    tool_timeout: Option<u64>,
    /// MCP servers from a standard `{"mcpServers": {...}}` JSON file, added to [mcp.servers].
    #[arg(long, global = true)]
    mcp_config: Option<PathBuf>,
    /// tool_search: auto (on above [tools] search_threshold tools, default 20), on, or off.
    #[arg(long, global = true)]
    tool_search: Option<turnstone_mcp::search::SearchMode>,
    /// Model API base URL (defines the `default` alias together with --model).
    #[arg(long, global = true)]
    base_url: Option<String>,
    /// Model id; with it, the flags define a `default` alias that overrides [model] default.
    #[arg(long, global = true)]
    model: Option<String>,
    /// API key for the flag-defined model (default: $OPENAI_API_KEY).
    #[arg(long, global = true)]
    api_key: Option<String>,
    /// Provider of the flag-defined model: openai, openai-compatible, anthropic, anthropic-compatible, google.
    #[arg(long, global = true)]
    provider: Option<String>,
    /// Context window of the default model, in tokens.
    #[arg(long, global = true)]
    context_window: Option<u32>,
    /// Run every tool call without asking.
    #[arg(long, global = true)]
    skip_permissions: bool,
    /// Tool output limit in characters (default: half the context window).
    #[arg(long, global = true)]
    tool_truncation: Option<usize>,
    /// Continue a saved workstream by alias, id or id prefix.
    #[arg(long)]
    resume: Option<String>,
    /// Start with a skill active: `NAME [ARG…]` (arguments as `key=value` or
    /// positional, shell-quoted), as `/skill` takes them.
    #[arg(long, value_name = "SKILL")]
    skill: Option<String>,
    /// SQLite database file (default: [database], $TURNSTONE_DB_*, else
    /// ~/.local/share/turnstone/turnstone.db for the terminal and ./.turnstone.db for `admin`).
    #[arg(long, global = true)]
    db: Option<PathBuf>,
    /// Days after which unnamed workstreams are pruned at start-up (0 = never).
    #[arg(long, default_value_t = 90)]
    retention_days: u64,
    /// Write every session event (the protocol's `WsEvent` JSON, one per
    /// line, in emission order) to this file, for debugging and replay.
    #[arg(long, global = true)]
    event_log: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Inspect and administer plugins (state changes go to the server's
    /// database: --db, else [database] / TURNSTONE_DB_*, else ./.turnstone.db).
    Plugins {
        #[command(subcommand)]
        action: PluginsAction,
    },
    /// Call one tool directly (prepare + execute, no model involved).
    Tool {
        /// Tool name, e.g. read_file.
        name: String,
        /// Arguments as JSON (or a bare string for the tool's primary key).
        #[arg(default_value = "{}")]
        args: String,
    },
    /// The HTTP server: the /v1 API with SSE (the original's wire contract) and
    /// the browser UI at `/`. Needs TURNSTONE_JWT_SECRET or [auth] jwt_secret
    /// (≥ 32 chars). Storage: --db, else [database] / TURNSTONE_DB_*, else
    /// ./.turnstone.db. Create the first admin in the browser or with
    /// `turnstone admin create-user`.
    Serve(serve_cmd::ServeArgs),
    /// Serve the enabled tool components to MCP clients over stdio (editors,
    /// desktop assistants): the tools that run without approval plus those in
    /// [mcp.serve] allow, inside the sandbox with the operator's grants.
    /// `turnstone serve` offers the same at /mcp (streamable HTTP, bearer token).
    Mcp,
    /// Offline user and API-token administration on the server's database
    /// (`--db FILE`, else [database] / TURNSTONE_DB_*, else ./.turnstone.db).
    Admin {
        #[command(subcommand)]
        action: admin::AdminAction,
    },
}

#[derive(Subcommand, Debug)]
enum PluginsAction {
    /// Every plugin with version, kind, WIT version, tools, its granted capabilities in brief (and what it requests beyond them) and state; `plugins info` has the details.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Full detail of one plugin (JSON).
    Info {
        /// Plugin name.
        name: String,
    },
    /// Compile every built-in component (in --builtin-dir or the default
    /// directory) and store the machine code beside it, so a start with an
    /// empty component cache does not compile. `cargo xtask build` runs it;
    /// run it again after replacing built-in components or upgrading.
    Precompile,
    #[command(flatten)]
    Admin(plugins_admin::AdminAction),
    #[command(flatten)]
    Sign(plugins_sign::SignAction),
}

impl Cli {
    fn plugin_flags(&self) -> app::PluginFlags {
        app::PluginFlags {
            config: self.config.clone(),
            workspace: self.workspace.clone(),
            plugin_dirs: self.plugin_dirs.clone(),
            builtin_dir: self.builtin_dir.clone(),
            cache_dir: self.cache_dir.clone(),
            tool_timeout: self.tool_timeout,
            mcp_config: self.mcp_config.clone(),
            tool_search: self.tool_search,
        }
    }

    fn session_flags(&self) -> app::SessionFlags {
        app::SessionFlags {
            model: turnstone_engine::models::CliModel {
                base_url: self.base_url.clone(),
                model: self.model.clone(),
                api_key: self.api_key.clone(),
                provider: self.provider.clone(),
                context_window: self.context_window,
            },
            skip_permissions: self.skip_permissions,
            tool_truncation: self.tool_truncation,
            db: self.db.clone(),
            retention_days: self.retention_days,
            event_log: self.event_log.clone(),
        }
    }
}

fn main() -> Result<()> {
    // Before anything can dlopen (name resolution loads NSS modules): the
    // quiet-time release of code pages covers only what was loaded at start.
    turnstone_server::image_pages::note_startup_objects();
    let cli = Cli::parse();
    let started = Instant::now();
    if matches!(cli.command, Some(Command::Serve(_))) {
        // While this is the only thread: the arena cap does not undo arenas
        // other threads made, and growing the descriptor table or the
        // thread arena later stalls every thread (docs/server.md).
        // The table first: a joined thread can still share it for a moment
        // after `join` returns, and growth would then wait after all.
        turnstone_server::fd_table::reserve();
        turnstone_server::memory::tune_allocator();
        turnstone_server::memory::reserve_thread_arena(
            turnstone_server::memory::THREAD_ARENA_RESERVE,
        );
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(cli, started))
}

async fn run(cli: Cli, started: Instant) -> Result<()> {
    // Both rustls providers can end up in the graph; pick one explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TURNSTONE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match &cli.command {
        Some(Command::Plugins {
            action: PluginsAction::Sign(action),
        }) => {
            let mut out = std::io::stdout().lock();
            match action {
                plugins_sign::SignAction::Keygen { out: path, force } => {
                    plugins_sign::keygen(path, *force, &mut out)?
                }
                plugins_sign::SignAction::Sign { path, key } => {
                    plugins_sign::sign(path, key, &mut out)?
                }
                plugins_sign::SignAction::Verify { path, trusted_keys } => {
                    let (cfg, _) = config::load(cli.config.as_deref())?;
                    let keys = if trusted_keys.is_empty() {
                        cfg.plugins.trusted_keys.clone()
                    } else {
                        trusted_keys.clone()
                    };
                    plugins_sign::verify(path, &keys, &mut out)?
                }
            }
        }
        Some(Command::Plugins {
            action: PluginsAction::Admin(action),
        }) => {
            let (cfg, _) = config::load(cli.config.as_deref())?;
            let db = app::open_storage(&cfg, cli.db.as_deref(), app::DbDefault::WorkingDir).await?;
            let mut out = std::io::stdout().lock();
            plugins_admin::run(&cli.plugin_flags(), &db, action, &mut out).await?;
        }
        Some(Command::Plugins {
            action: PluginsAction::Precompile,
        }) => {
            let mut out = std::io::stdout().lock();
            precompile_cmd::run(&cli.plugin_flags(), &mut out).await?;
        }
        Some(Command::Plugins { action }) => {
            // The operator's stored state, when the server's database exists.
            let (cfg, _) = config::load(cli.config.as_deref())?;
            let state = match app::open_existing_storage(&cfg, cli.db.as_deref()).await? {
                Some(db) => turnstone_server::plugins::operator_state(&db).await?,
                None => Default::default(),
            };
            let (loaded, _) = app::load_plugins(&cli.plugin_flags(), None, &state).await?;
            // A listing shows MCP servers as they settle (connected or failed).
            mcp_cli::settle(&loaded.mcp).await;
            let mut out = std::io::stdout().lock();
            match action {
                PluginsAction::List { json } => {
                    plugins_cmd::list(&loaded.registry(), &loaded.mcp, *json, &mut out)?
                }
                PluginsAction::Info { name } => {
                    plugins_cmd::info(&loaded.registry(), &loaded.mcp, name, &mut out)?
                }
                PluginsAction::Admin(_) | PluginsAction::Sign(_) | PluginsAction::Precompile => {}
            }
        }
        Some(Command::Tool { name, args }) => {
            let (loaded, _) =
                app::load_plugins(&cli.plugin_flags(), None, &Default::default()).await?;
            let failed = if turnstone_mcp::hub::split_prefixed(name).is_some()
                && loaded.registry().tool(name).is_none()
            {
                mcp_cli::call_tool(&loaded.mcp, name, args).await?
            } else {
                plugins_cmd::call_tool(&loaded.registry(), name, args, &loaded.workspace).await?
            };
            if failed {
                // exit() runs no destructors: stop MCP servers (their process groups) first.
                loaded.mcp.shutdown();
                std::process::exit(1);
            }
        }
        Some(Command::Serve(args)) => {
            serve_cmd::run(&cli.plugin_flags(), cli.session_flags(), args, started).await?;
        }
        Some(Command::Mcp) => {
            let (loaded, _) =
                app::load_plugins(&cli.plugin_flags(), None, &Default::default()).await?;
            // The administrator's tool policies, when the database exists.
            let (cfg, _) = config::load(cli.config.as_deref())?;
            let safety = app::open_existing_storage(&cfg, cli.db.as_deref())
                .await?
                .map(|db| {
                    turnstone_engine::safety::Safety::new(
                        turnstone_engine::safety::JudgeSettings::default(),
                        None,
                        Some(db),
                    )
                });
            mcp_cli::serve_stdio(&loaded, safety).await?;
        }
        Some(Command::Admin { action }) => {
            let (cfg, _) = config::load(cli.config.as_deref())?;
            let db = app::open_storage(&cfg, cli.db.as_deref(), app::DbDefault::WorkingDir).await?;
            admin::run(&db, action, &mut std::io::stdout().lock()).await?;
        }
        None => {
            let app = app::App::start(
                &cli.plugin_flags(),
                cli.session_flags(),
                app::DbDefault::PerUser,
            )
            .await?;
            if !repl::run(app, cli.resume.clone(), cli.skill.clone(), started).await? {
                // Piped mode: a failed turn makes the script fail.
                std::process::exit(1);
            }
        }
    }
    Ok(())
}
