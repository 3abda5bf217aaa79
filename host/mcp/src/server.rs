//! One configured MCP server: a supervisor task keeps it connected
//! (reconnecting with backoff), keeps its catalogue current (list_changed
//! notifications), and calls go through its circuit breaker.

use crate::breaker::{Admission, Breaker, BreakerState};
use crate::config::{ServerConfig, Transport};
use crate::connect::{self, ServerEnv, Session, kill_pgid};
use crate::grants::{self, Origin};
use crate::handler::{Notice, ProgressRoutes};
use crate::tool::McpTool;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientRequest,
    GetPromptRequestParams, GetPromptResult, Prompt, ReadResourceRequestParams, ReadResourceResult,
    Request, Resource, ResourceTemplate, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;
use turnstone_runtime::{Capabilities, EffectiveCapabilities};

/// First reconnect delay; doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(500);
/// Longest reconnect delay.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that lasted this long resets the backoff; a shorter one
/// (a server that dies right after starting) keeps doubling it.
const STABLE: Duration = Duration::from_secs(30);
/// Longest tool name a provider accepts (OpenAI: `^[a-zA-Z0-9_-]{1,64}$`).
const MAX_TOOL_NAME: usize = 64;

/// Connection state as operators see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Starting or reconnecting.
    Connecting,
    /// Handshake done; tools are listed.
    Connected,
    /// Too many failures in a row: calls are refused for a while.
    CircuitOpen {
        /// Seconds until a probe call is let through.
        retry_in_secs: u64,
    },
    /// Not connected; the reason says why (retrying with backoff).
    Failed {
        /// Why.
        reason: String,
    },
    /// Disabled by the operator.
    Disabled,
}

impl ServerState {
    /// `connected`, `connecting`, `open circuit`, `failed`, `disabled`.
    pub fn label(&self) -> &'static str {
        match self {
            ServerState::Connecting => "connecting",
            ServerState::Connected => "connected",
            ServerState::CircuitOpen { .. } => "open circuit",
            ServerState::Failed { .. } => "failed",
            ServerState::Disabled => "disabled",
        }
    }
}

/// What a server offers, as last listed.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// Tools.
    pub tools: Vec<McpTool>,
    /// Static resources.
    pub resources: Vec<Resource>,
    /// Resource templates.
    pub templates: Vec<ResourceTemplate>,
    /// Prompts.
    pub prompts: Vec<Prompt>,
    /// The server's `instructions`.
    pub instructions: Option<String>,
}

/// Why an MCP request did not produce a result.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum McpCallError {
    /// The breaker is open.
    #[error(
        "MCP server {server} is unavailable: its circuit is open after repeated failures; calls resume in {retry_in_secs}s"
    )]
    CircuitOpen {
        /// Server.
        server: String,
        /// Seconds until the probe.
        retry_in_secs: u64,
    },
    /// Not connected now.
    #[error("MCP server {server} is not connected ({reason})")]
    NotConnected {
        /// Server.
        server: String,
        /// Its state.
        reason: String,
    },
    /// No answer in time; the request was cancelled on the server.
    #[error("MCP server {server} did not answer within {secs}s; the request was cancelled")]
    Timeout {
        /// Server.
        server: String,
        /// Deadline.
        secs: u64,
    },
    /// The connection dropped mid-request (a crashed or exited server).
    #[error(
        "MCP server {server} closed the connection during the call{detail}; it is being restarted"
    )]
    Closed {
        /// Server.
        server: String,
        /// Exit status or stderr, when known.
        detail: String,
    },
    /// The server answered with a JSON-RPC error.
    #[error("MCP server {server} refused the request: {message}")]
    Rpc {
        /// Server.
        server: String,
        /// Its message.
        message: String,
    },
    /// The caller cancelled; the server was told.
    #[error("cancelled")]
    Cancelled,
}

impl McpCallError {
    /// Whether this counts against the breaker (the server, not the request, failed).
    fn is_server_failure(&self) -> bool {
        matches!(
            self,
            McpCallError::NotConnected { .. }
                | McpCallError::Timeout { .. }
                | McpCallError::Closed { .. }
        )
    }
}

/// Call, failure and breaker counters.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests sent.
    pub calls: AtomicU64,
    /// Requests that failed at the server (timeouts, crashes, not connected).
    pub failures: AtomicU64,
}

/// A server, its supervisor and its catalogue.
pub struct McpServer {
    /// Its name (the `{server}` in tool names).
    pub name: String,
    /// Its configuration.
    pub config: ServerConfig,
    /// Where the definition came from.
    pub origin: Origin,
    transport: Transport,
    env: ServerEnv,
    /// Effective capabilities (request ∩ grant).
    pub caps: EffectiveCapabilities,
    grant: Capabilities,
    /// The operator's grant, when there is one (else the origin's default).
    explicit_grant: Option<Capabilities>,
    /// The last reload request applied (see [`crate::hub::ServerWish`]).
    reload_seq: AtomicI64,
    call_timeout: Duration,
    state: Mutex<ServerState>,
    catalog: RwLock<Arc<Catalog>>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    breaker: Mutex<Breaker>,
    progress: Arc<ProgressRoutes>,
    /// Counters.
    pub counters: Counters,
    changed: watch::Sender<u64>,
    stop: CancellationToken,
    reconnect: Notify,
    closed_detail: Mutex<String>,
    /// Process group of the current stdio child (0: none).
    pgid: AtomicU32,
}

impl McpServer {
    /// A server, not yet started. `changed` is bumped whenever its catalogue
    /// or connection changes.
    pub(crate) fn new(
        name: &str,
        config: ServerConfig,
        origin: Origin,
        explicit_grant: Option<&Capabilities>,
        env: &ServerEnv,
        default_timeout: Duration,
        changed: watch::Sender<u64>,
    ) -> Result<Self, crate::config::ConfigError> {
        crate::config::validate_name(name)?;
        let transport = config.transport(name)?;
        let requested = grants::requested(&transport, &env.workspace);
        let grant = grants::effective_grant(explicit_grant, origin, &requested);
        let caps = grants::effective(name, &requested, &grant);
        let breaker = Breaker::new(
            config
                .breaker_threshold
                .unwrap_or(crate::breaker::DEFAULT_THRESHOLD),
            config
                .breaker_cool_down_secs
                .map(Duration::from_secs_f64)
                .unwrap_or(crate::breaker::DEFAULT_COOL_DOWN),
        );
        Ok(Self {
            name: name.to_string(),
            call_timeout: config.call_timeout(default_timeout),
            config,
            origin,
            transport,
            env: env.clone(),
            caps,
            grant,
            explicit_grant: explicit_grant.cloned(),
            reload_seq: AtomicI64::new(0),
            state: Mutex::new(ServerState::Connecting),
            catalog: RwLock::new(Arc::default()),
            peer: RwLock::new(None),
            breaker: Mutex::new(breaker),
            progress: Arc::default(),
            counters: Counters::default(),
            changed,
            stop: CancellationToken::new(),
            reconnect: Notify::new(),
            closed_detail: Mutex::new(String::new()),
            pgid: AtomicU32::new(0),
        })
    }

    /// The grant in force.
    pub fn grant(&self) -> &Capabilities {
        &self.grant
    }

    /// The operator's grant (`None`: the default of its origin is in force).
    pub fn explicit_grant(&self) -> Option<&Capabilities> {
        self.explicit_grant.as_ref()
    }

    /// What the server's configuration asks for, in capability terms.
    pub fn requested(&self) -> Capabilities {
        grants::requested(&self.transport, &self.env.workspace)
    }

    /// The reload request last applied.
    pub fn reload_seq(&self) -> i64 {
        self.reload_seq.load(Ordering::Acquire)
    }

    pub(crate) fn set_reload_seq(&self, seq: i64) {
        self.reload_seq.store(seq, Ordering::Release);
    }

    /// `stdio` or `http`.
    pub fn transport_kind(&self) -> &'static str {
        match &self.transport {
            Transport::Stdio(_) => "stdio",
            Transport::Http(_) => "http",
        }
    }

    /// The command line or URL.
    pub fn target(&self) -> String {
        match &self.transport {
            Transport::Stdio(s) => std::iter::once(s.command.as_str())
                .chain(s.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Transport::Http(h) => h.url.to_string(),
        }
    }

    /// The state now; an open breaker shows over a live connection.
    pub fn state(&self) -> ServerState {
        if self.stop.is_cancelled() {
            return ServerState::Disabled;
        }
        if let BreakerState::Open { until } = lock(&self.breaker).state() {
            let left = until.saturating_duration_since(Instant::now());
            if !left.is_zero() {
                return ServerState::CircuitOpen {
                    retry_in_secs: left.as_secs_f64().ceil() as u64,
                };
            }
        }
        lock(&self.state).clone()
    }

    /// Why the last connection attempt or connection failed, while it is
    /// not connected (also under an open circuit).
    pub fn last_error(&self) -> Option<String> {
        match &*lock(&self.state) {
            ServerState::Failed { reason } => Some(reason.clone()),
            _ => None,
        }
    }

    /// Times the breaker opened.
    pub fn breaker_openings(&self) -> u64 {
        lock(&self.breaker).openings()
    }

    /// The catalogue as last listed (empty while not connected).
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether `tool` runs without asking.
    pub fn auto_approves(&self, tool: &str) -> bool {
        self.config.auto_approves(tool)
    }

    fn set_state(&self, s: ServerState) {
        *lock(&self.state) = s;
        self.changed.send_modify(|g| *g += 1);
    }

    /// Stops the server for good (disable, removal, shutdown): the
    /// supervisor ends, and a stdio child's process group is killed now.
    pub fn stop(&self) {
        self.stop.cancel();
        self.kill_child();
        self.changed.send_modify(|g| *g += 1);
    }

    fn kill_child(&self) {
        let g = self.pgid.swap(0, Ordering::AcqRel);
        if g != 0 {
            kill_pgid(g);
        }
    }

    /// Drops the connection and connects again at once (operator reload).
    pub fn reconnect(&self) {
        self.reconnect.notify_one();
    }

    /// Runs until [`McpServer::stop`]: connect, serve, reconnect with backoff.
    pub(crate) async fn supervise(self: Arc<Self>) {
        let mut backoff = MIN_BACKOFF;
        loop {
            if self.stop.is_cancelled() {
                break;
            }
            self.set_state(ServerState::Connecting);
            let connecting = async {
                match &self.transport {
                    Transport::Stdio(spec) => {
                        connect::stdio(
                            spec,
                            &self.caps,
                            &self.env,
                            self.progress.clone(),
                            &self.pgid,
                        )
                        .await
                    }
                    Transport::Http(spec) => {
                        connect::http(spec, &self.caps, &self.env, self.progress.clone()).await
                    }
                }
            };
            let session = tokio::select! {
                s = connecting => s,
                // Dropping the handshake drops the child (kill_on_drop);
                // stop() killed its group.
                () = self.stop.cancelled() => break,
            };
            match session {
                Ok(session) => {
                    let since = Instant::now();
                    self.serve(session).await;
                    if since.elapsed() >= STABLE {
                        backoff = MIN_BACKOFF;
                    }
                }
                Err(reason) => {
                    tracing::warn!(server = %self.name, "MCP server failed: {reason}");
                    lock(&self.breaker).failure(Instant::now());
                    self.set_state(ServerState::Failed { reason });
                }
            }
            if self.stop.is_cancelled() {
                break;
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.reconnect.notified() => {}
                () = self.stop.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        *self.peer.write().unwrap_or_else(|p| p.into_inner()) = None;
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = Arc::default();
        self.changed.send_modify(|g| *g += 1);
    }

    async fn serve(&self, session: Session) {
        let Session {
            running,
            mut notices,
            mut child,
            pgid,
            stderr,
            sandbox: _sandbox,
        } = session;
        let peer = running.peer().clone();
        // Deterministic lists: a failed refresh must not serve a stale cache.
        peer.set_response_cache_config(rmcp::ClientCacheConfig::disabled())
            .await;
        *lock(&self.closed_detail) = String::new();
        let info = peer.peer_info();
        let mut catalog = Catalog {
            instructions: info.as_ref().and_then(|i| i.instructions.clone()),
            ..Catalog::default()
        };
        let caps = info.map(|i| i.capabilities.clone()).unwrap_or_default();
        let (has_tools, has_resources, has_prompts) = (
            caps.tools.is_some(),
            caps.resources.is_some(),
            caps.prompts.is_some(),
        );
        let first = async {
            if has_tools {
                catalog.tools = self.list_tools(&peer).await?;
            }
            if has_resources {
                catalog.resources = peer.list_all_resources().await?;
                catalog.templates = peer.list_all_resource_templates().await?;
            }
            if has_prompts {
                catalog.prompts = peer.list_all_prompts().await?;
            }
            Ok::<_, ServiceError>(catalog)
        };
        let listed = tokio::select! {
            r = tokio::time::timeout(self.call_timeout, first) => Some(r),
            () = self.stop.cancelled() => None,
        };
        let failed = match listed {
            Some(Ok(Ok(c))) => {
                *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(c);
                None
            }
            Some(Ok(Err(e))) => Some(format!("listing its catalogue failed: {e}")),
            Some(Err(_)) => Some("listing its catalogue timed out".into()),
            None => Some("stopped".into()),
        };
        if let Some(reason) = failed {
            drop(running);
            lock(&self.breaker).failure(Instant::now());
            self.end(child.as_mut(), pgid, reason);
            return;
        }
        *self.peer.write().unwrap_or_else(|p| p.into_inner()) = Some(peer.clone());
        self.set_state(ServerState::Connected);
        tracing::info!(server = %self.name, tools = self.catalog().tools.len(), "MCP server connected");
        let stop_service = running.cancellation_token();
        let mut waiter = tokio::spawn(running.waiting());
        let mut pending: Option<Notice> = None;
        loop {
            // Notices that arrive together refresh once.
            if let Some(first) = pending.take() {
                let mut kinds = vec![first];
                while let Ok(n) = notices.try_recv() {
                    kinds.push(n);
                }
                self.refresh(&peer, &kinds).await;
            }
            tokio::select! {
                n = notices.recv() => match n {
                    Some(n) => pending = Some(n),
                    None => break,
                },
                _ = &mut waiter => break,
                () = self.reconnect.notified() => break,
                () = self.stop.cancelled() => break,
            }
        }
        *self.peer.write().unwrap_or_else(|p| p.into_inner()) = None;
        let mut detail = String::new();
        if let Some(child) = child.as_mut() {
            // A moment for the exit status to be reaped.
            if let Ok(Ok(status)) =
                tokio::time::timeout(Duration::from_millis(200), child.wait()).await
            {
                detail = format!(" (the server {status})");
            }
        }
        let tail = {
            let t = stderr.lock().unwrap_or_else(|p| p.into_inner());
            t.iter().cloned().collect::<Vec<_>>().join(" | ")
        };
        if !tail.is_empty() && !detail.is_empty() {
            detail = format!("{detail}; stderr: {tail}");
        }
        *lock(&self.closed_detail) = detail.clone();
        stop_service.cancel();
        self.end(
            child.as_mut(),
            pgid,
            if self.stop.is_cancelled() {
                "stopped".into()
            } else {
                format!("connection closed{detail}")
            },
        );
    }

    fn end(&self, child: Option<&mut tokio::process::Child>, pgid: Option<u32>, reason: String) {
        // By the saved group id: the leader may already be reaped.
        if let Some(g) = pgid {
            kill_pgid(g);
            let _ = self
                .pgid
                .compare_exchange(g, 0, Ordering::AcqRel, Ordering::Acquire);
        }
        if let Some(child) = child {
            let _ = child.start_kill();
        }
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = Arc::default();
        if !self.stop.is_cancelled() {
            tracing::warn!(server = %self.name, "MCP server disconnected: {reason}");
            self.set_state(ServerState::Failed { reason });
        }
    }

    async fn list_tools(&self, peer: &Peer<RoleClient>) -> Result<Vec<McpTool>, ServiceError> {
        let tools = peer.list_all_tools().await?;
        Ok(tools
            .into_iter()
            .map(|t| McpTool::listed(&self.name, t))
            .filter(|t| {
                // One name a provider rejects would fail every model request.
                let ok = t.prefixed.len() <= MAX_TOOL_NAME
                    && t
                        .name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !ok {
                    tracing::warn!(server = %self.name, tool = %t.name,
                        "MCP tool skipped: {} is not a valid tool name for model providers (letters, digits, _ and -, at most {MAX_TOOL_NAME} characters)", t.prefixed);
                }
                ok
            })
            .collect())
    }

    async fn refresh(&self, peer: &Peer<RoleClient>, kinds: &[Notice]) {
        let mut next = (*self.catalog()).clone();
        let mut ok = true;
        if kinds.iter().any(|k| matches!(k, Notice::ToolsChanged)) {
            match self.list_tools(peer).await {
                Ok(t) => next.tools = t,
                Err(e) => {
                    ok = false;
                    tracing::warn!(server = %self.name, "refreshing tools failed: {e}");
                }
            }
        }
        if kinds.iter().any(|k| matches!(k, Notice::ResourcesChanged)) {
            match (
                peer.list_all_resources().await,
                peer.list_all_resource_templates().await,
            ) {
                (Ok(r), Ok(t)) => {
                    next.resources = r;
                    next.templates = t;
                }
                _ => ok = false,
            }
        }
        if kinds.iter().any(|k| matches!(k, Notice::PromptsChanged)) {
            match peer.list_all_prompts().await {
                Ok(p) => next.prompts = p,
                Err(_) => ok = false,
            }
        }
        if !ok {
            tracing::warn!(server = %self.name, "a list refresh failed; keeping the previous lists");
        }
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        self.changed.send_modify(|g| *g += 1);
    }

    /// Admission through the breaker and the current connection.
    fn admit(&self) -> Result<Peer<RoleClient>, McpCallError> {
        if self.stop.is_cancelled() {
            return Err(McpCallError::NotConnected {
                server: self.name.clone(),
                reason: "disabled".into(),
            });
        }
        if let Admission::Refused(left) = lock(&self.breaker).admit(Instant::now()) {
            return Err(McpCallError::CircuitOpen {
                server: self.name.clone(),
                retry_in_secs: left.as_secs_f64().ceil() as u64,
            });
        }
        let peer = self.peer.read().unwrap_or_else(|p| p.into_inner()).clone();
        match peer {
            Some(p) if !p.is_transport_closed() => Ok(p),
            other => {
                let reason = match (other.is_some(), lock(&self.state).clone()) {
                    (true, _) => "its connection closed; reconnecting".to_string(),
                    (false, ServerState::Failed { reason }) => reason,
                    (false, state) => state.label().to_string(),
                };
                let e = McpCallError::NotConnected {
                    server: self.name.clone(),
                    reason,
                };
                self.record(&Err::<(), _>(e.clone()));
                Err(e)
            }
        }
    }

    fn record<T>(&self, r: &Result<T, McpCallError>) {
        let mut b = lock(&self.breaker);
        match r {
            Ok(_) => b.success(),
            Err(e) if e.is_server_failure() => {
                self.counters.failures.fetch_add(1, Ordering::Relaxed);
                if b.failure(Instant::now()) {
                    tracing::warn!(server = %self.name, "MCP circuit opened");
                    drop(b);
                    self.changed.send_modify(|g| *g += 1);
                }
            }
            // The server answered: it is alive.
            Err(McpCallError::Rpc { .. }) => b.success(),
            // No verdict; a probe that ended so leaves room for the next one.
            Err(_) => b.abandon_probe(Instant::now()),
        }
    }

    fn map_error(&self, e: ServiceError) -> McpCallError {
        match e {
            ServiceError::McpError(d) => McpCallError::Rpc {
                server: self.name.clone(),
                message: d.message.to_string(),
            },
            ServiceError::Timeout { timeout } => McpCallError::Timeout {
                server: self.name.clone(),
                secs: timeout.as_secs(),
            },
            ServiceError::Cancelled { .. } => McpCallError::Cancelled,
            _ => McpCallError::Closed {
                server: self.name.clone(),
                detail: lock(&self.closed_detail).clone(),
            },
        }
    }

    /// Calls `tool` (the server's own name). Progress messages go to
    /// `progress`; cancelling `cancel` sends `notifications/cancelled`.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        cancel: &CancellationToken,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<CallToolResult, McpCallError> {
        let peer = self.admit()?;
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let request = ClientRequest::CallToolRequest(Request::new(params));
        let r = self
            .send(&peer, request, cancel, progress)
            .await
            .and_then(|r| match r {
                ServerResult::CallToolResult(r) => Ok(r),
                _ => Err(McpCallError::Rpc {
                    server: self.name.clone(),
                    message: "the server answered tools/call with something else".into(),
                }),
            });
        self.record(&r);
        r
    }

    async fn send(
        &self,
        peer: &Peer<RoleClient>,
        request: ClientRequest,
        cancel: &CancellationToken,
        progress: &(dyn Fn(String) + Send + Sync),
    ) -> Result<ServerResult, McpCallError> {
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::with_timeout(self.call_timeout))
            .await
            .map_err(|e| self.map_error(e))?;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let token = handle.progress_token.clone();
        self.progress.insert(token.clone(), tx);
        // Dropped with this future too (a dropped turn): the route goes, the
        // breaker's probe is released and the server is told to stop.
        let mut guard = InFlight {
            server: self,
            peer: peer.clone(),
            token: token.clone(),
            id: Some(handle.id.clone()),
        };
        let id = handle.id.clone();
        let answer = handle.await_response();
        tokio::pin!(answer);
        let out = loop {
            tokio::select! {
                r = &mut answer => break r.map_err(|e| self.map_error(e)),
                Some(p) = rx.recv() => {
                    let msg = match (p.message, p.total) {
                        (Some(m), _) => m,
                        (None, Some(t)) => format!("progress {}/{t}", p.progress),
                        (None, None) => format!("progress {}", p.progress),
                    };
                    progress(msg);
                }
                () = cancel.cancelled() => {
                    guard.id = None;
                    let _ = peer
                        .notify_cancelled(CancelledNotificationParam::new(
                            Some(id.clone()),
                            Some("the turn was cancelled".into()),
                        ))
                        .await;
                    break Err(McpCallError::Cancelled);
                }
            }
        };
        guard.id = None;
        out
    }

    /// Reads a resource.
    pub async fn read_resource(
        &self,
        uri: &str,
        cancel: &CancellationToken,
    ) -> Result<ReadResourceResult, McpCallError> {
        let peer = self.admit()?;
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        let request = ClientRequest::ReadResourceRequest(Request::new(
            ReadResourceRequestParams::new(uri.to_string()),
        ));
        let r = self
            .send(&peer, request, cancel, &|_| {})
            .await
            .and_then(|r| match r {
                ServerResult::ReadResourceResult(r) => Ok(r),
                _ => Err(McpCallError::Rpc {
                    server: self.name.clone(),
                    message: "the server answered resources/read with something else".into(),
                }),
            });
        self.record(&r);
        r
    }

    /// Gets a prompt (the server's own name) with string arguments.
    pub async fn get_prompt(
        &self,
        prompt: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        cancel: &CancellationToken,
    ) -> Result<GetPromptResult, McpCallError> {
        let peer = self.admit()?;
        self.counters.calls.fetch_add(1, Ordering::Relaxed);
        let mut params = GetPromptRequestParams::new(prompt.to_string());
        if !arguments.is_empty() {
            params = params.with_arguments(arguments);
        }
        let request = ClientRequest::GetPromptRequest(Request::new(params));
        let r = self
            .send(&peer, request, cancel, &|_| {})
            .await
            .and_then(|r| match r {
                ServerResult::GetPromptResult(r) => Ok(r),
                _ => Err(McpCallError::Rpc {
                    server: self.name.clone(),
                    message: "the server answered prompts/get with something else".into(),
                }),
            });
        self.record(&r);
        r
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A request in flight; on drop its progress route goes, and if it never
/// finished (`id` still set) the server is told and a probe is released.
struct InFlight<'a> {
    server: &'a McpServer,
    peer: Peer<RoleClient>,
    token: rmcp::model::ProgressToken,
    id: Option<rmcp::model::RequestId>,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.server.progress.remove(&self.token);
        if let Some(id) = self.id.take() {
            lock(&self.server.breaker).abandon_probe(Instant::now());
            let peer = self.peer.clone();
            if let Ok(rt) = tokio::runtime::Handle::try_current() {
                rt.spawn(async move {
                    let _ = peer
                        .notify_cancelled(CancelledNotificationParam::new(
                            Some(id),
                            Some("the caller went away".into()),
                        ))
                        .await;
                });
            }
        }
    }
}
