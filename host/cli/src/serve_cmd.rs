//! `turnstone serve`: the HTTP server with the browser UI.

use crate::app::{App, DbDefault, PluginFlags, SessionFlags};
use anyhow::{Context, Result, bail};
use std::sync::Arc;
use std::time::{Duration, Instant};
use turnstone_server::auth::JwtKeys;
use turnstone_server::http::{AppState, LoginPolicy};
use turnstone_server::login_throttle::LoginThrottle;
use turnstone_server::manager::{Deps, Limits, Manager};
use turnstone_server::metrics::Metrics;
use turnstone_server::plugins::{AdminOptions, PluginAdmin};
use turnstone_server::ratelimit::RateLimiter;
use turnstone_server::routes::Node;

/// `serve` options from the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Listen address (default: [server] host, else 127.0.0.1).
    #[arg(long)]
    pub host: Option<String>,
    /// Listen port (default: [server] port, else 8080; 0 picks a free port).
    #[arg(long)]
    pub port: Option<u16>,
    /// Minutes after which an idle workstream is closed (0 = never; fractions
    /// allowed; default: [server] workstream_idle_timeout, else 120).
    #[arg(long)]
    pub workstream_idle_timeout: Option<f64>,
    /// Most loaded workstreams (default: [server] max_workstreams, else 50).
    #[arg(long)]
    pub max_workstreams: Option<usize>,
}

fn jwt_secret(cfg: Option<&str>) -> Result<String> {
    let secret = std::env::var("TURNSTONE_JWT_SECRET")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| cfg.map(String::from));
    match secret {
        None => bail!(
            "no JWT secret: set TURNSTONE_JWT_SECRET or [auth] jwt_secret (at least 32 characters), \
             e.g. TURNSTONE_JWT_SECRET=$(openssl rand -hex 32)"
        ),
        Some(s) if s.chars().count() < 32 => bail!(
            "the JWT secret is too short ({} characters); it needs at least 32",
            s.chars().count()
        ),
        Some(s) => Ok(s),
    }
}

fn node_id() -> String {
    std::env::var("TURNSTONE_NODE_ID")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| {
            let host = std::fs::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default();
            let host = if host.is_empty() { "node".into() } else { host };
            format!("{host}-{}", std::process::id())
        })
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// Runs the server until SIGINT/SIGTERM.
pub async fn run(
    plugins: &PluginFlags,
    flags: SessionFlags,
    args: &ServeArgs,
    started: Instant,
) -> Result<()> {
    // Read the secret first: a server that cannot authenticate must not start.
    let (cfg, _) = crate::config::load(plugins.config.as_deref())?;
    let secret = jwt_secret(cfg.auth.jwt_secret.as_deref())?;
    let keys = JwtKeys::new(&secret).map_err(|e| anyhow::anyhow!("JWT secret: {e}"))?;
    let limiter = RateLimiter::from_config(&cfg.ratelimit).map_err(anyhow::Error::msg)?;
    cfg.auth
        .login_throttle
        .validate()
        .map_err(anyhow::Error::msg)?;
    let connection_limits = cfg.server.connection_limits()?;
    let app = App::start(plugins, flags, DbDefault::WorkingDir).await?;
    let server = &app.loaded.config.server;
    let host = args.host.clone().unwrap_or_else(|| server.host.clone());
    let port = args.port.unwrap_or(server.port);
    let idle = args
        .workstream_idle_timeout
        .unwrap_or(server.workstream_idle_timeout);
    let limits = Limits {
        max_workstreams: args
            .max_workstreams
            .unwrap_or(server.max_workstreams)
            .max(1),
        idle_timeout: (idle.is_finite() && idle > 0.0)
            .then(|| Duration::from_secs_f64((idle * 60.0).min(1e9))),
        event_ring: server.event_ring.max(16),
    };
    let grace = Duration::from_secs(server.shutdown_grace);
    let node_id = node_id();
    let metrics = Arc::new(Metrics::default());
    // The state App::start loaded with may be a moment old: the first poll
    // applies whatever changed in between.
    let state = turnstone_server::plugins::operator_state(&app.storage).await?;
    let plugins = PluginAdmin::start(
        app.loaded.runtime.clone(),
        app.loaded.options.clone(),
        app.loaded.live.clone(),
        app.loaded.shared.clone(),
        app.storage.clone(),
        state,
        Some(app.loaded.mcp.clone()),
        AdminOptions {
            watch: app.loaded.config.plugins.watch.unwrap_or(true),
            ..Default::default()
        },
    )
    .await;
    let watch_wake = app.watch_wake.clone();
    let delivery = Arc::new(turnstone_server::channels::LateDelivery::default());
    let mgr =
        Manager::new(
            Deps {
                db: app.storage.clone(),
                registry: app.loaded.live.clone(),
                models: app.models.clone(),
                workspace: app.loaded.workspace.clone(),
                skip_permissions: app.flags.skip_permissions,
                tool_truncation: app.flags.tool_truncation,
                node_id: node_id.clone(),
                event_log: app.event_log.clone(),
                mcp: Some(app.loaded.mcp.clone()),
                tool_search: app.loaded.tool_search,
                mcp_serve_allow: app.loaded.config.mcp.serve.allow.clone(),
                skills: Some(app.skills.clone()),
                titles: turnstone_server::manager::Titles {
                    enabled: app.loaded.config.titles.enabled,
                    model: app.loaded.config.titles.model.clone(),
                },
                task_budget: app.task_budget,
                watch_wake: Some(watch_wake.clone()),
                notify_after: app.loaded.config.notify.after(),
                safety: app.safety.clone(),
                channels: app.loaded.config.channels.enabled.then(|| {
                    delivery.clone() as Arc<dyn turnstone_engine::session::ChannelDelivery>
                }),
            },
            limits,
            metrics.clone(),
        );
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let cookie_secure = cfg.auth.cookie_secure.unwrap_or(!loopback);
    if cookie_secure && !loopback {
        eprintln!(
            "note: session cookies are marked Secure (bound to {host}); browsers keep them only over HTTPS.              Serve behind a TLS proxy, or set [auth] cookie_secure = false for plain HTTP on a trusted network."
        );
    }
    // One watch scheduler per node, stopped with the server.
    let shutdown = tokio_util::sync::CancellationToken::new();
    turnstone_engine::watch::WatchScheduler::new(
        app.storage.clone(),
        node_id.clone(),
        app.loaded.live.clone().into(),
        app.loaded.workspace.clone(),
        turnstone_server::watches::ManagerDelivery::new(&mgr),
        watch_wake,
    )
    .spawn(shutdown.clone());
    let keys = Arc::new(keys);
    let login = Arc::new(LoginPolicy {
        passwords: Default::default(),
        throttle: LoginThrottle::new(&cfg.auth.login_throttle),
        cookie_secure,
    });
    let limiter = limiter.map(Arc::new);
    // Chat channel adapters: supervised until shutdown. The hub's own view
    // of the state has no node (it only uses storage through it).
    let channels_cfg = &app.loaded.config.channels;
    let channels = channels_cfg.enabled.then(|| {
        let hub = turnstone_server::channels::ChannelHub::new(
            mgr.clone(),
            app.loaded.live.clone(),
            turnstone_server::channels::ChannelSettings {
                edit_interval: Duration::from_millis(channels_cfg.edit_interval_ms.max(100)),
                max_attachment_bytes: channels_cfg.max_attachment_bytes,
                backoff_max: Duration::from_secs(channels_cfg.restart_backoff_max_secs.max(1)),
                routes: channels_cfg.routes.clone(),
                ..Default::default()
            },
            AppState {
                db: app.storage.clone(),
                keys: keys.clone(),
                started,
                node_id: node_id.clone(),
                node: None,
                limiter: None,
                login: login.clone(),
            },
        );
        plugins.set_channels(&hub);
        delivery.attach(&hub);
        tokio::spawn(hub.clone().run(shutdown.clone()));
        hub
    });
    tokio::spawn(turnstone_server::memory::purge_when_quiet(
        metrics.clone(),
        server.release_code_pages,
        Some(app.loaded.live.clone()),
        shutdown.clone(),
    ));
    let state = AppState {
        db: app.storage.clone(),
        keys,
        started,
        node_id,
        node: Some(Arc::new(Node {
            mgr,
            metrics,
            shutdown,
            plugins: Some(plugins),
            channels,
        })),
        limiter,
        login,
    };
    let listener = tokio::net::TcpListener::bind((host.as_str(), port))
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))?;
    let addr = listener.local_addr()?;
    for line in &app.housekeeping {
        eprintln!("{line}");
    }
    for f in app.failed_plugins() {
        eprintln!("plugin failed to load: {f}");
    }
    eprintln!(
        "turnstone {} serving http://{addr} (model {}; started in {} ms)",
        env!("CARGO_PKG_VERSION"),
        app.model_line(None),
        started.elapsed().as_millis()
    );
    turnstone_server::serve::serve(listener, state, shutdown_signal(), grace, connection_limits)
        .await?;
    eprintln!("turnstone stopped");
    Ok(())
}
