//! MCP servers in the terminal front ends: `turnstone tool mcp__…`, the MCP
//! rows of `plugins list|info`, and the REPL's `/mcp`.

use crate::plugins_cmd::caps_brief;
use anyhow::{Result, bail};
use std::io::Write;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use turnstone_mcp::content::tool_result_text;
use turnstone_mcp::{McpHub, McpServer, ServerState};

/// How long a one-shot command waits for servers to connect or fail.
const SETTLE: Duration = Duration::from_secs(20);

/// Waits until no server is still connecting (at most [`SETTLE`]).
pub async fn settle(hub: &McpHub) {
    let mut rx = hub.subscribe();
    let _ = tokio::time::timeout(SETTLE, async {
        while hub
            .servers()
            .iter()
            .any(|s| s.state() == ServerState::Connecting)
        {
            if rx.changed().await.is_err() {
                break;
            }
        }
    })
    .await;
}

/// `turnstone tool mcp__{server}__{tool} '<json>'`: true when the tool failed.
pub async fn call_tool(hub: &McpHub, name: &str, args: &str) -> Result<bool> {
    let Some((server_name, _)) = turnstone_mcp::hub::split_prefixed(name) else {
        bail!("{name:?} is not an MCP tool name (mcp__server__tool)");
    };
    let Some(state) = hub.wait_connected(server_name, SETTLE).await else {
        bail!(
            "no MCP server {server_name:?} is configured ([mcp.servers.{server_name}] or --mcp-config)"
        );
    };
    let Some((server, tool)) = hub.tool(name) else {
        bail!(
            "MCP server {server_name} has no tool {name:?} (state: {})",
            describe_state(&state)
        );
    };
    let arguments = match serde_json::from_str::<serde_json::Value>(args.trim()) {
        Ok(serde_json::Value::Object(m)) => m,
        Ok(_) => bail!("arguments for {name} must be a JSON object"),
        Err(e) => bail!("arguments for {name} are not valid JSON: {e}"),
    };
    let cancel = CancellationToken::new();
    let ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            ctrl_c.cancel();
        }
    });
    let progress = |m: String| eprintln!("… {m}");
    match server
        .call_tool(&tool.name, arguments, &cancel, &progress)
        .await
    {
        Ok(r) => {
            println!("{}", tool_result_text(&r));
            Ok(r.is_error == Some(true))
        }
        Err(e) => {
            eprintln!("Error: {e}");
            Ok(true)
        }
    }
}

/// `turnstone mcp`: the tool components over stdio until the client hangs up.
pub async fn serve_stdio(
    loaded: &crate::app::Loaded,
    safety: Option<std::sync::Arc<turnstone_engine::safety::Safety>>,
) -> Result<()> {
    use rmcp::ServiceExt;
    let mut server = turnstone_mcp::serve::ComponentServer::new(
        loaded.live.clone(),
        loaded.config.mcp.serve.allow.clone(),
        loaded.workspace.clone(),
    );
    // Over stdio nobody is signed in: the policies that name no role apply.
    if let Some(safety) = safety {
        server = server.with_gate(std::sync::Arc::new(
            turnstone_engine::safety::PolicyGate::new(
                safety,
                |_: &turnstone_mcp::serve::Extensions| {
                    Box::pin(async { None }) as futures::future::BoxFuture<'static, Option<String>>
                },
            ),
        ));
    }
    let exposed = server.tools().len();
    tracing::info!(tools = exposed, "serving tool components over MCP (stdio)");
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("MCP handshake on stdio failed: {e}"))?;
    running.waiting().await?;
    Ok(())
}

/// A state with its reason.
pub fn describe_state(s: &ServerState) -> String {
    match s {
        ServerState::Failed { reason } => format!("failed: {reason}"),
        ServerState::CircuitOpen { retry_in_secs } => {
            format!("open circuit (calls resume in {retry_in_secs}s)")
        }
        other => other.label().to_string(),
    }
}

/// The `plugins list` cells of one server: name, version, kind, WIT, tools,
/// capabilities, state.
pub fn row(s: &McpServer) -> ([String; 7], usize) {
    let tools: Vec<String> = s.catalog().tools.iter().map(|t| t.name.clone()).collect();
    let n = tools.len();
    (
        [
            s.name.clone(),
            "-".into(),
            "mcp".into(),
            "-".into(),
            if tools.is_empty() {
                "-".into()
            } else {
                tools.join(",")
            },
            caps_brief(s.grant()),
            match (s.state(), s.last_error()) {
                (st @ ServerState::CircuitOpen { .. }, Some(e)) => {
                    format!("{}: {e}", describe_state(&st))
                }
                (st, _) => describe_state(&st),
            },
        ],
        n,
    )
}

/// One server as JSON (`plugins list --json`, `plugins info`).
pub fn server_json(s: &McpServer) -> serde_json::Value {
    let c = s.catalog();
    let state = s.state();
    serde_json::json!({
        "name": s.name,
        "kind": "mcp",
        "origin": s.origin.as_str(),
        "transport": s.transport_kind(),
        "target": s.target(),
        "state": state.label(),
        "reason": s.last_error(),
        "tools": c.tools.iter().map(|t| serde_json::json!({
            "name": t.prefixed, "description": t.description,
            "auto_approve": s.auto_approves(&t.name),
        })).collect::<Vec<_>>(),
        "resources": c.resources.iter().map(|r| r.uri.clone())
            .chain(c.templates.iter().map(|t| t.uri_template.clone())).collect::<Vec<_>>(),
        "prompts": c.prompts.iter().map(|p| format!("mcp__{}__{}", s.name, p.name)).collect::<Vec<_>>(),
        "granted": s.grant(),
        "calls": s.counters.calls.load(std::sync::atomic::Ordering::Relaxed),
        "failures": s.counters.failures.load(std::sync::atomic::Ordering::Relaxed),
        "breaker_openings": s.breaker_openings(),
    })
}

/// The REPL's `/mcp`: servers with state, then tools, resources and prompts.
pub fn describe(hub: &McpHub, out: &mut impl Write) -> std::io::Result<()> {
    let servers = hub.servers();
    if servers.is_empty() {
        return writeln!(
            out,
            "No MCP servers are configured (add [mcp.servers.NAME] to config.toml or pass --mcp-config FILE)."
        );
    }
    let tools = hub.tools();
    writeln!(out, "MCP servers ({}):", servers.len())?;
    for s in &servers {
        let c = s.catalog();
        writeln!(
            out,
            "  {}  [{} {}]  {}  tools {} · resources {} · prompts {}",
            s.name,
            s.transport_kind(),
            s.target(),
            describe_state(&s.state()),
            c.tools.len(),
            c.resources.len() + c.templates.len(),
            c.prompts.len()
        )?;
    }
    writeln!(out, "MCP tools ({}):", tools.len())?;
    for (s, t) in &tools {
        writeln!(out, "  {}  [MCP: {}] {}", t.prefixed, s.name, t.description)?;
    }
    for s in &servers {
        let c = s.catalog();
        for r in &c.resources {
            writeln!(out, "  resource {}  {}", r.uri, r.name)?;
        }
        for t in &c.templates {
            writeln!(out, "  resource template {}  {}", t.uri_template, t.name)?;
        }
        for p in &c.prompts {
            writeln!(out, "  prompt mcp__{}__{}", s.name, p.name)?;
        }
    }
    Ok(())
}
