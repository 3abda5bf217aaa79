//! Opening one connection to a server, after its capabilities are checked:
//! a stdio child with a scrubbed environment in its own process group, or a
//! streamable-HTTP session through the egress policy.

use crate::config::{HttpSpec, StdioSpec};
use crate::grants::spawn_plan;
use crate::handler::{Handler, Notice, ProgressRoutes};
use rmcp::RoleClient;
use rmcp::ServiceExt;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc::UnboundedReceiver;
use turnstone_runtime::capability::HttpAccess;
use turnstone_runtime::netguard::NetworkPolicy;
use turnstone_runtime::{EffectiveCapabilities, SecretSource};

/// The initialize handshake must finish within this.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of a child's stderr kept for the failure reason.
const STDERR_TAIL: usize = 8;

/// What every server of a host shares.
#[derive(Clone)]
pub struct ServerEnv {
    /// Default working directory of stdio servers.
    pub workspace: PathBuf,
    /// Host-held secrets.
    pub secrets: Arc<dyn SecretSource>,
    /// SSRF policy for `<public>` grants.
    pub network: NetworkPolicy,
}

/// A live connection.
pub struct Session {
    /// The rmcp service.
    pub running: RunningService<RoleClient, Handler>,
    /// List-changed notices.
    pub notices: UnboundedReceiver<Notice>,
    /// The child of a stdio server.
    pub child: Option<tokio::process::Child>,
    /// Its process group (= its pid, saved at spawn).
    pub pgid: Option<u32>,
    /// Its last stderr lines.
    pub stderr: Arc<Mutex<VecDeque<String>>>,
    /// The kernel sandbox's host side (its egress proxy) while it runs.
    pub sandbox: Option<turnstone_runtime::sandboxing::Running>,
}

/// Kills process group `pgid` (the server's, with any helpers it started).
/// Works after the leader was reaped: the group lives while members do.
pub fn kill_pgid(pgid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pgid as i32) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Kills a child's whole process group by its saved id, and the child.
pub fn kill_group(child: &mut tokio::process::Child, pgid: Option<u32>) {
    if let Some(g) = pgid.or_else(|| child.id()) {
        kill_pgid(g);
    }
    let _ = child.start_kill();
}

/// Spawns a stdio server and runs the handshake.
pub async fn stdio(
    spec: &StdioSpec,
    caps: &EffectiveCapabilities,
    env: &ServerEnv,
    progress: Arc<ProgressRoutes>,
    pgid_slot: &std::sync::atomic::AtomicU32,
) -> Result<Session, String> {
    let plan = spawn_plan(spec, caps, &env.workspace, env.secrets.as_ref(), &|n| {
        std::env::var_os(n)
    })
    .map_err(|d| format!("{d}"))?;
    // The same kernel sandbox as a component's processes: the server's
    // filesystem grants, network only through the egress proxy with an
    // `http` grant, the seccomp deny list; unless the operator opted out.
    let mut sandbox = if caps.process_sandbox() {
        let policy = turnstone_runtime::sandboxing::policy(caps, || {
            Arc::new(turnstone_runtime::sandboxing::PluginEgress::new(
                caps.clone(),
                env.network.clone(),
                Arc::default(),
                Default::default(),
            ))
        });
        let prepared = turnstone_runtime::sandboxing::host_sandbox()
            .prepare(&policy)
            .map_err(|e| {
                format!("{e}; to run it unsandboxed, set process_sandbox = \"off\" in its grant")
            })?;
        Some(prepared)
    } else {
        None
    };
    let mut cmd = tokio::process::Command::new(&plan.program);
    cmd.args(&plan.args)
        .env_clear()
        .envs(&plan.env)
        .current_dir(&plan.cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // Its own process group; a sandboxed server its own session (a new
    // group too, and no controlling terminal).
    match sandbox.as_mut() {
        Some(s) => s.install(&mut cmd),
        None => {
            cmd.process_group(0);
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", plan.program))?;
    let sandbox = match sandbox.map(turnstone_runtime::sandboxing::Prepared::start) {
        Some(Err(e)) => {
            let pgid = child.id();
            kill_group(&mut child, pgid);
            return Err(e.to_string());
        }
        Some(Ok(r)) => Some(r),
        None => None,
    };
    let pgid = child.id();
    // Recorded at once so a stop during the handshake can kill the group.
    pgid_slot.store(pgid.unwrap_or(0), std::sync::atomic::Ordering::Release);
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        kill_group(&mut child, pgid);
        return Err("the child's stdin/stdout were not piped".into());
    };
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    if let Some(stderr) = child.stderr.take() {
        let tail = tail.clone();
        // Always drained: a full pipe would stall the server.
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "turnstone::mcp::stderr", "{line}");
                let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
                if t.len() == STDERR_TAIL {
                    t.pop_front();
                }
                // Bounded: a reason quotes a line, not a megabyte.
                t.push_back(line.chars().take(500).collect());
            }
        });
    }
    let (tx, notices) = tokio::sync::mpsc::unbounded_channel();
    let handshake = Handler::new(tx, progress).serve((stdout, stdin));
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(running)) => Ok(Session {
            running,
            notices,
            child: Some(child),
            pgid,
            stderr: tail,
            sandbox,
        }),
        Ok(Err(e)) => {
            let status = child.try_wait().ok().flatten();
            kill_group(&mut child, pgid);
            let tail = tail.lock().unwrap_or_else(|p| p.into_inner()).clone();
            Err(format!(
                "handshake failed: {e}{}{}",
                status
                    .map(|s| format!("; the server {s}"))
                    .unwrap_or_default(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; stderr: {}",
                        tail.into_iter().collect::<Vec<_>>().join(" | ")
                    )
                }
            ))
        }
        Err(_) => {
            kill_group(&mut child, pgid);
            Err(format!(
                "no answer to initialize within {}s",
                HANDSHAKE_TIMEOUT.as_secs()
            ))
        }
    }
}

/// Connects to a streamable-HTTP server. The host is checked against the
/// grant before any lookup or connection; with only a `<public>` grant every
/// new connection is resolved and screened by the SSRF guard.
pub async fn http(
    spec: &HttpSpec,
    caps: &EffectiveCapabilities,
    env: &ServerEnv,
    progress: Arc<ProgressRoutes>,
) -> Result<Session, String> {
    let host = spec.url.host_str().unwrap_or_default().to_string();
    let port = spec.url.port_or_known_default().unwrap_or(443);
    let access = caps
        .check_http(host.trim_start_matches('[').trim_end_matches(']'), port)
        .map_err(|d| format!("{d}"))?;
    turnstone_runtime::netguard::check_url_authority(spec.url.as_str())
        .map_err(|e| e.to_string())?;
    // reqwest is built without a default provider; the host installs ring at
    // start-up, and this makes a library user (a test) safe too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        // A redirect could lead anywhere; the grant names one endpoint.
        .redirect(reqwest::redirect::Policy::none())
        // A proxy from the environment would be the only address screened.
        .no_proxy()
        .pool_max_idle_per_host(0);
    if access == HttpAccess::PublicOnly {
        // Screened now for a clear reason up front (a literal address never
        // reaches the resolver), and again on every new connection.
        env.network
            .screen(&host, port)
            .await
            .map_err(|e| e.to_string())?;
        builder = builder.dns_resolver(Arc::new(Screened(env.network.clone())));
    }
    let client = builder.build().map_err(|e| format!("HTTP client: {e}"))?;
    let mut headers = HashMap::new();
    for (k, v) in &spec.headers {
        let name =
            http::HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k:?}: {e}"))?;
        let value = http::HeaderValue::from_str(v).map_err(|e| format!("header {k:?}: {e}"))?;
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(spec.url.as_str())
        .custom_headers(headers)
        .max_json_response_size(64 << 20);
    if let Some(secret) = &spec.bearer_secret {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        caps.check_secret_use(secret, "authorization", bare, port)
            .map_err(|d| format!("{d}"))?;
        let value = env
            .secrets
            .secret(secret)
            .ok_or_else(|| format!("secret {secret} is granted but not set on the host"))?;
        config = config.auth_header(value);
    }
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let (tx, notices) = tokio::sync::mpsc::unbounded_channel();
    let handshake = Handler::new(tx, progress).serve(transport);
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
        Ok(Ok(running)) => Ok(Session {
            running,
            notices,
            child: None,
            pgid: None,
            stderr: Arc::default(),
            sandbox: None,
        }),
        Ok(Err(e)) => Err(format!("cannot connect to {}: {e}", spec.url)),
        Err(_) => Err(format!(
            "no answer to initialize from {} within {}s",
            spec.url,
            HANDSHAKE_TIMEOUT.as_secs()
        )),
    }
}

/// A reqwest resolver that screens every answer (each new connection).
struct Screened(NetworkPolicy);

impl reqwest::dns::Resolve for Screened {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            // The port is set by the connector; screening is by address.
            let addr: SocketAddr = policy
                .screen(&host, 0)
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(std::iter::once(addr)) as reqwest::dns::Addrs)
        })
    }
}
