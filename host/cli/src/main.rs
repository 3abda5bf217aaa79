//! `turnstone`: the host binary.

mod config;
mod plugins_cmd;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::time::Instant;
use turnstone_runtime::registry::{LoadOptions, default_builtin_dir};
use turnstone_runtime::{PluginRegistry, Runtime, RuntimeOptions};

/// Turnstone: orchestration for tool-using AI agents, with every tool, provider
/// and channel running as a sandboxed WebAssembly component.
#[derive(Parser, Debug)]
#[command(name = "turnstone", version, about, long_about = None)]
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
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Inspect plugins.
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
}

#[derive(Subcommand, Debug)]
enum PluginsAction {
    /// Every plugin with version, kind, WIT version, tools, requested vs granted capabilities and state.
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
}

async fn load_plugins(cli: &Cli) -> Result<(PluginRegistry, PathBuf, Runtime)> {
    let (cfg, cfg_path) = config::load(cli.config.as_deref())?;
    if let Some(p) = &cfg_path {
        tracing::debug!(config = %p.display(), "config loaded");
    }
    let workspace = match cli.workspace.clone().or(cfg.tools.workspace.clone()) {
        Some(w) => w,
        None => std::env::current_dir()?,
    };
    let workspace = std::fs::canonicalize(&workspace)
        .with_context(|| format!("workspace {}", workspace.display()))?;
    let mut plugins = cfg.plugins.clone();
    plugins.dirs.extend(cli.plugin_dirs.iter().cloned());
    let cache_dir = cli
        .cache_dir
        .clone()
        .or(plugins.cache_dir.clone())
        .or_else(config::default_cache_dir);
    let runtime = Runtime::new(RuntimeOptions {
        cache_dir,
        ..Default::default()
    })?;
    let builtin_dir = cli
        .builtin_dir
        .clone()
        .or(plugins.builtin_dir.clone())
        .or_else(default_builtin_dir);
    if builtin_dir.is_none() {
        tracing::warn!(
            "no built-in component directory found; run `cargo xtask build` or pass --builtin-dir"
        );
    }
    let tools = &cfg.tools;
    tools.apply(&mut plugins)?;
    let opts = LoadOptions {
        builtin_dir,
        config: plugins,
        workspace: Some(workspace.clone()),
        network: turnstone_runtime::netguard::NetworkPolicy {
            allow_private_network: tools.allow_private_network,
            ..Default::default()
        },
        ..Default::default()
    };
    let reg = PluginRegistry::load_all(&runtime, &opts).await;
    Ok((reg, workspace, runtime))
}

#[tokio::main]
async fn main() -> Result<()> {
    // Both rustls providers can end up in the graph; pick one explicitly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TURNSTONE_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let started = Instant::now();
    let (reg, workspace, _runtime) = load_plugins(&cli).await?;
    let mut out = std::io::stdout().lock();
    match &cli.command {
        Some(Command::Plugins { action }) => match action {
            PluginsAction::List { json } => plugins_cmd::list(&reg, *json, &mut out)?,
            PluginsAction::Info { name } => plugins_cmd::info(&reg, name, &mut out)?,
        },
        Some(Command::Tool { name, args }) => {
            drop(out);
            let failed = plugins_cmd::call_tool(&reg, name, args, &workspace).await?;
            if failed {
                std::process::exit(1);
            }
        }
        None => {
            use std::io::Write;
            writeln!(
                out,
                "turnstone {} — workspace {} — {} plugin(s) loaded in {} ms\n",
                env!("CARGO_PKG_VERSION"),
                workspace.display(),
                reg.loaded().count(),
                started.elapsed().as_millis()
            )?;
            plugins_cmd::list(&reg, false, &mut out)?;
            writeln!(
                out,
                "\nThe interactive REPL is not built yet (the engine exists as a library); today you can \
                 inspect plugins (`turnstone plugins list|info`) and call tools directly \
                 (`turnstone tool read_file '{{\"path\":\"README.md\"}}'`)."
            )?;
        }
    }
    Ok(())
}
