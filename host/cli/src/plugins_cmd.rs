//! `turnstone plugins …` and `turnstone tool …`.

use anyhow::{Result, bail};
use serde_json::json;
use std::io::Write;
use std::sync::Arc;
use turnstone_runtime::capability::Capabilities;
use turnstone_runtime::{CallContext, PluginEntry, PluginRegistry, PluginStatus, ToolOutputSink};

/// One-line summary of a capability set.
pub fn caps_summary(c: &Capabilities) -> String {
    let mut parts = Vec::new();
    for f in &c.filesystem {
        parts.push(format!("fs:{}:{}", f.path, f.access.short()));
    }
    parts.extend(c.http.iter().map(|h| format!("http:{h}")));
    parts.extend(c.exec.iter().map(|e| format!("exec:{e}")));
    parts.extend(c.env.iter().map(|e| format!("env:{e}")));
    parts.extend(c.secrets.iter().map(|s| format!("secret:{s}")));
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

fn state(e: &PluginEntry) -> String {
    match &e.status {
        PluginStatus::Loaded(_) => "loaded".into(),
        PluginStatus::Disabled => "disabled".into(),
        PluginStatus::Failed(r) => format!("failed: {r}"),
    }
}

fn entry_json(e: &PluginEntry) -> serde_json::Value {
    let m = e.manifest.as_ref();
    let (tools, counters, source) = match &e.status {
        PluginStatus::Loaded(p) => (
            p.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
            json!({
                "calls": p.ctx.counters.calls(),
                "failures": p.ctx.counters.failures(),
                "denials": p.ctx.counters.denials(),
            }),
            json!(format!("{:?}", p.compile_source).to_lowercase()),
        ),
        _ => (Vec::new(), json!(null), json!(null)),
    };
    json!({
        "name": e.name(),
        "version": m.map(|m| m.plugin.version.clone()),
        "kind": m.map(|m| m.plugin.kind.as_str()),
        "wit": m.map(|m| format!("turnstone:plugin@{}", m.plugin.wit)),
        "description": m.map(|m| m.plugin.description.clone()),
        "builtin": e.builtin,
        "dir": e.dir,
        "state": match &e.status {
            PluginStatus::Loaded(_) => "loaded",
            PluginStatus::Disabled => "disabled",
            PluginStatus::Failed(_) => "failed",
        },
        "error": match &e.status { PluginStatus::Failed(r) => Some(r.clone()), _ => None },
        "tools": tools,
        "requested": m.map(|m| m.capabilities.clone()),
        "granted": e.effective_grant(),
        "compiled_from": source,
        "counters": counters,
    })
}

/// `turnstone plugins list`.
pub fn list(reg: &PluginRegistry, as_json: bool, out: &mut impl Write) -> Result<()> {
    if as_json {
        let all: Vec<_> = reg.entries().iter().map(entry_json).collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
        return Ok(());
    }
    let rows: Vec<[String; 8]> = reg
        .entries()
        .iter()
        .map(|e| {
            let m = e.manifest.as_ref();
            let tools = match &e.status {
                PluginStatus::Loaded(p) => p
                    .tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                _ => "-".into(),
            };
            [
                e.name(),
                m.map_or("-".into(), |m| m.plugin.version.clone()),
                m.map_or("-".into(), |m| m.plugin.kind.as_str().into()),
                m.map_or("-".into(), |m| m.plugin.wit.clone()),
                if tools.is_empty() { "-".into() } else { tools },
                m.map_or("-".into(), |m| caps_summary(&m.capabilities)),
                caps_summary(&e.effective_grant()),
                state(e),
            ]
        })
        .collect();
    let header = [
        "NAME",
        "VERSION",
        "KIND",
        "WIT",
        "TOOLS",
        "REQUESTED",
        "GRANTED",
        "STATE",
    ];
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate().take(7) {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i < 7 {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            } else {
                s.push_str(c);
            }
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for r in &rows {
        writeln!(out, "{}", line(r.iter().map(String::as_str).collect()))?;
    }
    if rows.is_empty() {
        writeln!(out, "(no plugins found)")?;
    }
    Ok(())
}

/// `turnstone plugins info NAME`.
pub fn info(reg: &PluginRegistry, name: &str, out: &mut impl Write) -> Result<()> {
    let Some(e) = reg.entries().iter().find(|e| e.name() == name) else {
        bail!("no plugin named {name:?} (see `turnstone plugins list`)");
    };
    let mut v = entry_json(e);
    if let PluginStatus::Loaded(p) = &e.status {
        v["tool_specs"] = serde_json::to_value(&p.tools)?;
        v["sha256"] = json!(p.wasm_sha256);
        v["limits"] = json!({
            "memory_mb": p.ctx.limits.memory_bytes >> 20,
            "timeout_secs": p.ctx.limits.call_timeout.as_secs_f64(),
        });
        if !p.skipped_grants.is_empty() {
            v["not_applied"] = json!(p.skipped_grants);
        }
    }
    writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    Ok(())
}

struct StdoutSink;

impl ToolOutputSink for StdoutSink {
    fn chunk(&self, text: &str) -> bool {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
        true
    }
}

/// `turnstone tool NAME [ARGS]`: prepare and execute one tool call directly.
/// Returns whether the result was an error.
pub async fn call_tool(
    reg: &PluginRegistry,
    tool: &str,
    args: &str,
    workspace: &std::path::Path,
) -> Result<bool> {
    let Some((plugin, spec)) = reg.tool(tool) else {
        let known: Vec<&str> = reg.tools().map(|t| t.name.as_str()).collect();
        bail!(
            "no loaded tool named {tool:?}; available: {}",
            known.join(", ")
        );
    };
    let args = match spec.coerce_arguments(args) {
        Ok(a) => a,
        Err(e) => bail!(e),
    };
    let args = args.as_str();
    let ws = workspace.to_string_lossy().into_owned();
    let ctx = CallContext {
        call_id: "cli_1".into(),
        session_id: "cli".into(),
        workspace_dir: Some(ws.clone()),
        working_dir: ws,
        supports_vision: false,
    };
    match plugin.prepare(tool, args, &ctx).await? {
        Ok(p) => {
            eprintln!("⚙ {}", p.header);
            if let Some(b) = p.body {
                eprintln!("{b}");
            }
        }
        Err(refusal) => {
            println!("{}", turnstone_runtime::tool_error_text(&refusal));
            return Ok(true);
        }
    }
    let result = plugin
        .execute(tool, args, &ctx, Arc::new(StdoutSink), None)
        .await?;
    println!("{}", result.output);
    Ok(result.is_error)
}
