//! The other direction: our tool components served to MCP clients, inside
//! our sandbox with the operator's grants. Only tools that run without
//! approval (`auto_approve`) or that `[mcp.serve] allow` names are listed or
//! callable; schemas come from `describe`; streamed output becomes progress
//! notifications; a denied capability comes back as a tool error carrying
//! the grant hint.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
    ServerCapabilities, ServerConfig, Tool, ToolsCapability,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use turnstone_runtime::{
    CallContext, CallError, LivePlugins, SecretGrant, ToolOutputSink, ToolSpec,
};

/// A request's extensions (on `/mcp`, the HTTP request's `Parts`).
pub use rmcp::model::Extensions;

/// What the administrator's tool policies say about a served call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateVerdict {
    /// No policy decides: the tool's own approval rule holds.
    Default,
    /// A policy allows it outright.
    Allow,
    /// A policy wants a person to approve it (nobody can, over MCP).
    Ask(String),
    /// A policy refuses it.
    Deny(String),
}

/// Decides a served call by the administrator's policies, for the caller
/// the request came from (`extensions` carry the HTTP request's parts on
/// `/mcp`; nothing on stdio).
pub trait CallGate: Send + Sync {
    /// The verdict on `tool` for this request.
    fn check<'a>(
        &'a self,
        tool: &'a str,
        extensions: &'a Extensions,
    ) -> futures::future::BoxFuture<'a, GateVerdict>;
}

/// Serves the tools of a live plugin set.
#[derive(Clone)]
pub struct ComponentServer {
    live: Arc<LivePlugins>,
    allow: Arc<Vec<String>>,
    workspace: PathBuf,
    calls: Arc<AtomicU64>,
    /// One per MCP session: background processes of one client are not
    /// another's.
    session_id: String,
    /// The administrator's tool policies.
    gate: Option<Arc<dyn CallGate>>,
}

impl ComponentServer {
    /// Tools of `live` that are auto-approved or in `allow`, run in `workspace`.
    pub fn new(live: Arc<LivePlugins>, allow: Vec<String>, workspace: PathBuf) -> Self {
        Self {
            live,
            allow: Arc::new(allow),
            workspace,
            calls: Arc::default(),
            session_id: new_session_id(),
            gate: None,
        }
    }

    /// The same server with calls checked by `gate` first.
    pub fn with_gate(mut self, gate: Arc<dyn CallGate>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// The same server for another MCP session.
    pub fn for_new_session(&self) -> Self {
        Self {
            session_id: new_session_id(),
            ..self.clone()
        }
    }

    fn allowed(&self, name: &str) -> bool {
        self.allow.iter().any(|a| a == name)
    }

    /// Whether `spec` is exposed.
    pub fn exposes(&self, spec: &ToolSpec) -> bool {
        // Tools that only make sense inside a session (coordinators) stay in.
        (spec.auto_approve || self.allowed(&spec.name)) && (spec.interactive || !spec.coordinator)
    }

    /// The exposed tools as MCP tools.
    pub fn tools(&self) -> Vec<Tool> {
        let reg = self.live.snapshot();
        reg.tools()
            .filter(|t| self.exposes(t))
            .map(|t| {
                let schema = match &t.parameters {
                    serde_json::Value::Object(m) => m.clone(),
                    _ => serde_json::Map::new(),
                };
                Tool::new(t.name.clone(), t.description.clone(), schema)
            })
            .collect()
    }

    /// Calls served so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    async fn call(
        &self,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let reg = self.live.snapshot();
        let Some((plugin, spec)) = reg.tool(name).filter(|(_, s)| self.exposes(s)) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool {name:?} is served here (served: auto-approved tools and [mcp.serve] allow)"
                ),
                None,
            ));
        };
        // The administrator's policies come before anything of the tool runs.
        let verdict = match &self.gate {
            Some(g) => g.check(name, &cx.extensions).await,
            None => GateVerdict::Default,
        };
        match &verdict {
            GateVerdict::Deny(why) | GateVerdict::Ask(why) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(why.clone())]));
            }
            GateVerdict::Default | GateVerdict::Allow => {}
        }
        self.calls.fetch_add(1, Ordering::Relaxed);
        let raw = serde_json::Value::Object(arguments).to_string();
        let args = match spec.coerce_arguments(&raw) {
            Ok(a) => a,
            Err(e) => return Ok(CallToolResult::error(vec![ContentBlock::text(e)])),
        };
        let ws = self.workspace.display().to_string();
        let ctx = CallContext {
            call_id: format!("mcp-{}", cx.id),
            session_id: self.session_id.clone(),
            workspace_dir: Some(ws.clone()),
            working_dir: ws,
            supports_vision: false,
        };
        match plugin.prepare(name, &args, &ctx).await {
            // No one here can approve: a call the tool itself wants approved
            // runs only when the operator allowed the tool outright.
            Ok(Ok(p))
                if p.needs_approval && !self.allowed(name) && verdict != GateVerdict::Allow =>
            {
                return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                    "{name} asks for approval for this call ({}), and nobody can approve over MCP; the operator can allow it with [mcp.serve] allow = [\"{name}\"]",
                    p.header
                ))]));
            }
            Ok(Ok(_)) => {}
            Ok(Err(refusal)) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(refusal)]));
            }
            Err(e) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(
                    e.to_string(),
                )]));
            }
        }
        let sink = Arc::new(ProgressSink::new(
            cx.peer.clone(),
            cx.meta.get_progress_token(),
        ));
        let result = plugin
            .execute(name, &args, &ctx, sink.clone(), Some(&cx.ct))
            .await;
        sink.finish().await;
        Ok(match result {
            Ok(r) if r.is_error => {
                let text = match ungranted_hint(plugin) {
                    Some(h) => format!("{}\n{h}", r.output),
                    None => r.output,
                };
                CallToolResult::error(vec![ContentBlock::text(text)])
            }
            Ok(r) => CallToolResult::success(vec![ContentBlock::text(r.output)]),
            Err(CallError::Cancelled { .. }) => {
                CallToolResult::error(vec![ContentBlock::text("cancelled")])
            }
            Err(e) => CallToolResult::error(vec![ContentBlock::text(
                turnstone_runtime::tool_error_text(&e.to_string()),
            )]),
        })
    }
}

/// When a failed call's plugin requests capabilities it was not granted, how
/// the operator grants them (an MCP client has no other way to learn it).
fn ungranted_hint(plugin: &turnstone_runtime::LoadedPlugin) -> Option<String> {
    let req = &plugin.manifest.capabilities;
    let caps = &plugin.ctx.caps;
    let granted = caps.granted();
    let mut missing = Vec::new();
    if !req.filesystem.is_empty() && caps.dirs().len() < req.filesystem.len() {
        let list: Vec<String> = req
            .filesystem
            .iter()
            .map(|f| {
                format!(
                    "{{ path = \"{}\", access = \"{}\" }}",
                    f.path,
                    f.access.short()
                )
            })
            .collect();
        missing.push(format!("filesystem = [{}]", list.join(", ")));
    }
    let names = |list: &[SecretGrant]| list.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    let (want_secrets, have_secrets) = (names(&req.secrets), names(&granted.secrets));
    for (key, want, have) in [
        ("http", &req.http, &granted.http),
        ("exec", &req.exec, &granted.exec),
        ("secrets", &want_secrets, &have_secrets),
    ] {
        let absent: Vec<String> = want
            .iter()
            .filter(|w| !have.contains(w))
            .map(|w| format!("\"{w}\""))
            .collect();
        if !absent.is_empty() {
            missing.push(format!("{key} = [{}]", absent.join(", ")));
        }
    }
    (!missing.is_empty()).then(|| {
        format!(
            "(plugin {} requests capabilities that are not granted; the operator grants them with [plugins.grants.{}] {})",
            plugin.name(),
            plugin.name(),
            missing.join(" ")
        )
    })
}

/// Streams a tool's output chunks to the client as progress notifications,
/// in order (one pump task per call).
struct ProgressSink {
    tx: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedSender<String>>>,
    pump: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ProgressSink {
    fn new(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let pump = token.map(|token| {
            tokio::spawn(async move {
                let mut n = 0.0;
                while let Some(chunk) = rx.recv().await {
                    n += 1.0;
                    let p = ProgressNotificationParam::new(token.clone(), n).with_message(chunk);
                    if peer.notify_progress(p).await.is_err() {
                        break;
                    }
                }
            })
        });
        Self {
            tx: std::sync::Mutex::new(Some(tx)),
            pump: std::sync::Mutex::new(pump),
        }
    }

    /// Waits until every chunk was sent (progress precedes the result).
    async fn finish(&self) {
        drop(self.tx.lock().unwrap_or_else(|p| p.into_inner()).take());
        let pump = self.pump.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(p) = pump {
            let _ = p.await;
        }
    }
}

impl ToolOutputSink for ProgressSink {
    fn chunk(&self, text: &str) -> bool {
        if !text.is_empty()
            && let Some(tx) = self.tx.lock().unwrap_or_else(|p| p.into_inner()).as_ref()
        {
            let _ = tx.send(text.to_string());
        }
        true
    }
}

impl ServerHandler for ComponentServer {
    fn get_info(&self) -> ServerConfig {
        let mut caps = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(false);
        caps.tools = Some(tools);
        ServerConfig::new(caps)
            .with_server_info(Implementation::new("turnstone", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tools of this Turnstone host, each running as a sandboxed WebAssembly component with the operator's grants.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        self.call(&request.name, args, cx).await.map(Into::into)
    }
}

fn new_session_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "mcp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The streamable-HTTP service for `/mcp`. The Host-header allow-list of
/// rmcp is off: the route sits behind the server's own bearer-token auth,
/// which a rebinding page cannot supply.
pub fn http_service(
    server: ComponentServer,
) -> rmcp::transport::StreamableHttpService<
    ComponentServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    rmcp::transport::StreamableHttpService::new(
        move || Ok(server.for_new_session()),
        Arc::default(),
        rmcp::transport::StreamableHttpServerConfig::default().disable_allowed_hosts(),
    )
}
