//! `config.toml` loading for the host binary. Sections owned by later
//! subsystems (`[models]`, `[server]`, …) are accepted and left for them.

use anyhow::{Context, Result};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use turnstone_runtime::capability::HostRule;
use turnstone_runtime::config::PluginsConfig;

/// The parts of `config.toml` this binary reads today.
#[derive(Debug, Default, Deserialize)]
pub struct HostConfig {
    /// `[plugins]`.
    #[serde(default)]
    pub plugins: PluginsConfig,
    /// `[tools]`.
    #[serde(default)]
    pub tools: ToolsConfig,
    /// `[database]`.
    #[serde(default)]
    pub database: turnstone_storage::DbConfig,
    /// `[auth]`.
    #[serde(default)]
    pub auth: AuthConfig,
    /// `[server]`.
    #[serde(default)]
    pub server: ServerConfig,
    /// `[ratelimit]`.
    #[serde(default)]
    pub ratelimit: turnstone_server::ratelimit::RateLimitConfig,
    /// `[mcp]`: MCP servers and what `turnstone mcp` serves.
    #[serde(default)]
    pub mcp: turnstone_mcp::McpConfig,
    /// `[skills]`: where `SKILL.md` files are read from.
    #[serde(default)]
    pub skills: SkillsConfig,
    /// `[titles]`: naming server workstreams after their first exchange.
    #[serde(default)]
    pub titles: TitlesConfig,
    /// `[agents]`: what a sub-agent may spend.
    #[serde(default)]
    pub agents: AgentsConfig,
    /// `[notify]`: completion notifications.
    #[serde(default)]
    pub notify: NotifyConfig,
    /// `[judge]`: the intent judge, Smart Approvals and the output guard.
    #[serde(default)]
    pub judge: JudgeConfig,
    /// `[process_sandbox]`: the kernel sandbox of spawned processes.
    #[serde(default)]
    pub process_sandbox: ProcessSandboxConfig,
    /// `[channels]`: chat channel adapters (Discord, Slack).
    #[serde(default)]
    pub channels: ChannelsConfig,
    /// `[models.*]` and `[model]`.
    #[serde(flatten)]
    pub models: turnstone_engine::models::ModelsConfig,
}

/// `[skills]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// Directories of skills: each `NAME/SKILL.md` or `NAME.md` (`~` expands).
    /// Skills saved in the database (API, CLI, the skills tool) come on top.
    #[serde(default)]
    pub dirs: Vec<PathBuf>,
}

impl SkillsConfig {
    /// The directories with `~` expanded.
    pub fn dirs(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|d| turnstone_runtime::config::expand_home(d))
            .collect()
    }
}

/// `[titles]`.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TitlesConfig {
    /// Generate a title after a workstream's first exchange (default on).
    pub enabled: bool,
    /// The model alias that writes it (default: the workstream's own).
    pub model: Option<String>,
}

impl Default for TitlesConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            model: None,
        }
    }
}

/// `[agents]`: the budget of each sub-agent (`task_agent`).
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentsConfig {
    /// Model calls before it must stop (default 40).
    pub max_model_calls: u32,
    /// Tokens, prompt and completion of every call (default 1,000,000).
    pub max_tokens: u64,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        let b = turnstone_engine::session::Budget::default();
        Self {
            max_model_calls: b.max_model_calls,
            max_tokens: b.max_tokens,
        }
    }
}

impl AgentsConfig {
    /// The budget, checked: zero would stop every sub-agent before it started.
    pub fn budget(&self) -> Result<turnstone_engine::session::Budget> {
        if self.max_model_calls == 0 || self.max_tokens == 0 {
            anyhow::bail!("[agents] max_model_calls and max_tokens must be at least 1");
        }
        Ok(turnstone_engine::session::Budget {
            max_model_calls: self.max_model_calls,
            max_tokens: self.max_tokens,
        })
    }
}

/// `[notify]`: when a finished turn notifies the workstream's targets.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotifyConfig {
    /// A turn that ran at least this many seconds sends a completion
    /// notification through the `notify` component (default 300; 0: never).
    pub complete_after_secs: u64,
}

/// `[channels]`: how chat channel adapters (Discord, Slack) run. The
/// adapters themselves are plugins (enabled, granted and configured under
/// `[plugins]`); these are the host's side.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelsConfig {
    /// Run enabled channel plugins (default true).
    pub enabled: bool,
    /// Least milliseconds between two edits of a streamed reply (default 1000).
    pub edit_interval_ms: u64,
    /// Largest platform attachment taken into a workstream (default 8 MiB).
    pub max_attachment_bytes: usize,
    /// Longest restart delay of a failing adapter in seconds (default 60;
    /// delays start at 1 s and double).
    pub restart_backoff_max_secs: u64,
    /// `[[channels.routes]]`: per-channel routing rules, first match wins.
    pub routes: Vec<turnstone_server::channels::RoutingRule>,
}

impl Default for ChannelsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            edit_interval_ms: 1000,
            max_attachment_bytes: 8 << 20,
            restart_backoff_max_secs: 60,
            routes: Vec::new(),
        }
    }
}

impl Default for NotifyConfig {
    fn default() -> Self {
        Self {
            complete_after_secs: 300,
        }
    }
}

impl NotifyConfig {
    /// The threshold, none when completion notifications are off.
    pub fn after(&self) -> Option<std::time::Duration> {
        (self.complete_after_secs > 0)
            .then(|| std::time::Duration::from_secs(self.complete_after_secs))
    }
}

/// `[process_sandbox]`: what every sandboxed process may read besides its
/// plugin's grants. Per plugin, `[plugins.grants.<name>] process_sandbox =
/// "off"` opts out.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProcessSandboxConfig {
    /// Read-only, executable system locations; replaces the default list
    /// (`/usr`, `/bin`, `/sbin`, `/lib*`, `/etc`, `/opt`, `/proc`, `/sys`, …).
    /// The toolchains on `PATH` are added either way.
    pub system_paths: Option<Vec<PathBuf>>,
    /// More read-only locations (e.g. a shared toolchain or cache).
    pub extra_read_only: Vec<PathBuf>,
    /// Per-user configuration readable from `$HOME` (relative paths);
    /// default `.gitconfig` and `.config/git/{config,ignore,attributes}`.
    pub home_read_only: Option<Vec<PathBuf>>,
    /// Behave as if the kernel lacked Landlock (to check the refusal path).
    pub assume_unsupported: bool,
}

impl ProcessSandboxConfig {
    /// The host's sandbox: probed support and the system locations.
    pub fn sandbox(&self) -> turnstone_runtime::sandboxing::Sandbox {
        use turnstone_runtime::sandboxing::{Sandbox, Support, SystemPaths};
        let support = if self.assume_unsupported {
            Support::simulated_unsupported()
        } else {
            Support::probe()
        };
        let mut paths = SystemPaths::default();
        if let Some(list) = &self.system_paths {
            paths.read_only = list.clone();
        }
        let paths = paths.with_toolchains(
            std::env::var_os("PATH").as_deref(),
            std::env::var_os("RUSTUP_HOME").map(Into::into),
        );
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut paths = match &self.home_read_only {
            Some(names) => paths.with_home_config(home.as_deref(), names),
            None => paths.with_home_config(
                home.as_deref(),
                turnstone_runtime::sandboxing::DEFAULT_HOME_CONFIG,
            ),
        };
        paths.extend(self.extra_read_only.iter().cloned());
        Sandbox::new(support, paths)
    }
}

/// `[judge]`: what the guard components may do. The guards themselves are
/// plugins (`judge-heuristic`, `judge-llm`, `output-guard`), enabled and
/// disabled like any other.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JudgeConfig {
    /// Run the guards at all (default on).
    pub enabled: bool,
    /// Also ask the LLM judge about every call that waits for approval (one
    /// extra model call each; default off).
    pub llm: bool,
    /// The model alias the LLM judge asks (default: the workstream's own).
    pub model: Option<String>,
    /// Seconds the LLM judge may take before its verdict is given up on
    /// (default 30).
    pub timeout_secs: f64,
    /// Let confident verdicts decide (default off: verdicts only advise).
    pub smart_approvals: bool,
    /// How confident a verdict must be to decide, 0–1 (default 0.8).
    pub confidence_threshold: f64,
    /// Replace secrets found in tool output before the model sees it
    /// (default off: the output is flagged, not changed).
    pub redact_output: bool,
    /// Run the output guards on tool results (default on).
    pub output_guard: bool,
}

impl Default for JudgeConfig {
    fn default() -> Self {
        let d = turnstone_engine::safety::JudgeSettings::default();
        Self {
            enabled: d.enabled,
            llm: d.llm,
            model: None,
            timeout_secs: d.timeout.as_secs_f64(),
            smart_approvals: d.smart_approvals,
            confidence_threshold: d.confidence_threshold,
            redact_output: d.redact_output,
            output_guard: d.output_guard,
        }
    }
}

impl JudgeConfig {
    /// The settings, checked.
    pub fn settings(&self) -> Result<turnstone_engine::safety::JudgeSettings> {
        anyhow::ensure!(
            self.timeout_secs.is_finite() && self.timeout_secs > 0.0 && self.timeout_secs <= 600.0,
            "[judge] timeout_secs must be between 0 and 600"
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.confidence_threshold),
            "[judge] confidence_threshold must be between 0 and 1"
        );
        Ok(turnstone_engine::safety::JudgeSettings {
            enabled: self.enabled,
            llm: self.llm,
            timeout: std::time::Duration::from_secs_f64(self.timeout_secs),
            smart_approvals: self.smart_approvals,
            confidence_threshold: self.confidence_threshold,
            redact_output: self.redact_output,
            output_guard: self.output_guard,
        })
    }
}

/// `[auth]`.
#[derive(Debug, Default, Deserialize)]
pub struct AuthConfig {
    /// HS256 secret for session JWTs (≥ 32 chars; `$TURNSTONE_JWT_SECRET` overrides).
    pub jwt_secret: Option<String>,
    /// Mark the session cookie `Secure` (default: on unless the server is
    /// bound to a loopback address; always on for requests that came over
    /// HTTPS through a proxy).
    pub cookie_secure: Option<bool>,
    /// `[auth.login_throttle]`: failed-login throttling (on by default).
    #[serde(default)]
    pub login_throttle: turnstone_server::login_throttle::LoginThrottleConfig,
}

/// `[server]`.
#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct ServerConfig {
    /// Listen address (`--host` overrides).
    pub host: String,
    /// Listen port (`--port` overrides).
    pub port: u16,
    /// Most loaded workstreams; the oldest idle one is evicted beyond it.
    pub max_workstreams: usize,
    /// Minutes after which an idle workstream is closed (0 = never; fractions allowed).
    pub workstream_idle_timeout: f64,
    /// Events kept per workstream for reconnect replay.
    pub event_ring: usize,
    /// Seconds running turns get to finish at shutdown before they are cancelled.
    pub shutdown_grace: u64,
    /// Seconds a client has to send a request's head (also closes idle
    /// keep-alive connections).
    pub header_timeout: f64,
    /// Seconds a request body may stall before the request is abandoned.
    pub body_timeout: f64,
    /// Concurrent connections per client address (0 = no cap).
    pub max_connections_per_ip: usize,
    /// Once quiet, unmap the pages of code and read-only data (the binary's
    /// and the loaded components') that start-up or a burst touched (they
    /// stay in the page cache; docs/server.md).
    pub release_code_pages: bool,
}

impl ServerConfig {
    /// The connection limits, checked.
    pub fn connection_limits(&self) -> Result<turnstone_server::serve::ConnectionLimits> {
        let secs = |v: f64, name: &str| -> Result<std::time::Duration> {
            anyhow::ensure!(
                v.is_finite() && v > 0.0 && v <= 3600.0,
                "[server] {name} must be between 0 and 3600 seconds"
            );
            Ok(std::time::Duration::from_secs_f64(v))
        };
        Ok(turnstone_server::serve::ConnectionLimits {
            header_timeout: secs(self.header_timeout, "header_timeout")?,
            body_timeout: secs(self.body_timeout, "body_timeout")?,
            max_per_ip: self.max_connections_per_ip,
        })
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let limits = turnstone_server::serve::ConnectionLimits::default();
        Self {
            host: "127.0.0.1".into(),
            port: 8080,
            max_workstreams: 50,
            workstream_idle_timeout: 120.0,
            event_ring: turnstone_server::events::DEFAULT_RING,
            shutdown_grace: 10,
            header_timeout: limits.header_timeout.as_secs_f64(),
            body_timeout: limits.body_timeout.as_secs_f64(),
            max_connections_per_ip: limits.max_per_ip,
            release_code_pages: true,
        }
    }
}

/// `[tools]`.
#[derive(Debug, Default, Deserialize)]
pub struct ToolsConfig {
    /// Workspace directory tools operate in.
    pub workspace: Option<PathBuf>,
    /// Default bash timeout in seconds (1-600; 120 when unset).
    pub timeout: Option<u64>,
    /// SearxNG base URL for web_search (`$TURNSTONE_SEARXNG_URL` overrides).
    pub searxng_url: Option<String>,
    /// Let web_fetch reach private networks (cloud metadata never).
    #[serde(default)]
    pub allow_private_network: bool,
    /// `tool_search`: `auto` (on above `search_threshold` tools), `on`, `off`.
    pub search: Option<turnstone_mcp::search::SearchMode>,
    /// `auto` turns tool search on above this many tools (default 20).
    pub search_threshold: Option<usize>,
    /// Results per `tool_search` call (default 5).
    pub search_max_results: Option<usize>,
}

impl ToolsConfig {
    /// The tool search settings, `--tool-search` over `[tools] search`.
    pub fn search_settings(
        &self,
        flag: Option<turnstone_mcp::search::SearchMode>,
    ) -> turnstone_mcp::search::SearchSettings {
        let d = turnstone_mcp::search::SearchSettings::default();
        turnstone_mcp::search::SearchSettings {
            mode: flag.or(self.search).unwrap_or(d.mode),
            threshold: self.search_threshold.unwrap_or(d.threshold),
            max_results: self.search_max_results.unwrap_or(d.max_results).max(1),
        }
    }

    /// Applies `[tools]` to the built-in tool plugins: their config values and,
    /// for `web`, a grant for the configured SearxNG host.
    pub fn apply(&self, plugins: &mut PluginsConfig) -> Result<()> {
        if let Some(t) = self.timeout {
            anyhow::ensure!(
                (1..=600).contains(&t),
                "[tools] timeout must be 1-600 seconds"
            );
            plugins
                .config
                .entry("bash".into())
                .or_default()
                .insert("timeout".into(), t.to_string());
        }
        let searxng = std::env::var("TURNSTONE_SEARXNG_URL")
            .ok()
            .filter(|v| !v.trim().is_empty())
            .or_else(|| self.searxng_url.clone());
        if let Some(url) = searxng {
            let parsed = url::Url::parse(&url)
                .with_context(|| format!("[tools] searxng_url {url:?} is not a URL"))?;
            let host = parsed.host_str().context("searxng_url has no host")?;
            let port = parsed.port_or_known_default().unwrap_or(80);
            plugins
                .config
                .entry("web".into())
                .or_default()
                .insert("searxng_url".into(), url.clone());
            // Only when the operator did not write their own grant for `web`.
            plugins
                .grants
                .entry("web".into())
                .or_insert_with(|| turnstone_runtime::Capabilities {
                    http: vec![HostRule::PUBLIC_SPELLING.into(), format!("{host}:{port}")],
                    model: true,
                    ..Default::default()
                });
        }
        Ok(())
    }
}

/// Where the config comes from: `--config`, `$TURNSTONE_CONFIG`,
/// `~/.config/turnstone/config.toml`, then `./config.toml`.
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("TURNSTONE_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.map(|h| h.join(".config")));
    [
        xdg.map(|d| d.join("turnstone/config.toml")),
        Some(PathBuf::from("config.toml")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_file())
}

/// Reads and validates the config (defaults when there is none).
pub fn load(explicit: Option<&Path>) -> Result<(HostConfig, Option<PathBuf>)> {
    let Some(path) = locate(explicit) else {
        return Ok((HostConfig::default(), None));
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    let cfg: HostConfig =
        toml::from_str(&text).with_context(|| format!("invalid config {}", path.display()))?;
    cfg.plugins
        .validate()
        .map_err(|(name, e)| anyhow::anyhow!("{}: [plugins.grants.{name}]: {e}", path.display()))?;
    Ok((cfg, Some(path)))
}

/// Default component cache directory.
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("turnstone/components"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_pages_are_released_unless_the_server_section_says_not() {
        let default: HostConfig = toml::from_str("[server]\nport = 9000\n").unwrap();
        assert!(default.server.release_code_pages);
        let off: HostConfig = toml::from_str("[server]\nrelease_code_pages = false\n").unwrap();
        assert!(!off.server.release_code_pages);
        assert_eq!(off.server.port, 8080, "other keys keep their defaults");
        let bad = toml::from_str::<HostConfig>("[server]\nrelease_code_pages = \"no\"\n");
        assert!(bad.is_err(), "a string is not a switch");
    }
}
