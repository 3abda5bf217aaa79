//! `turnstone plugins …` and `turnstone tool …`.

use anyhow::{Result, bail};
use serde_json::json;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use turnstone_runtime::capability::{Capabilities, SecretGrant};
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
    parts.extend(
        c.secrets
            .iter()
            .map(|s| format!("secret:{}", secret_summary(s))),
    );
    parts.extend(flag_parts(c));
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// `NAME`, or `NAME@host,host[header]` for a secret bound to hosts or headers.
fn secret_summary(s: &SecretGrant) -> String {
    let mut out = s.name.clone();
    if !s.hosts.is_empty() {
        out.push('@');
        out.push_str(&s.hosts.join(","));
    }
    if !s.headers.is_empty() {
        out.push_str(&format!("[{}]", s.headers.join(",")));
    }
    out
}

/// The capabilities that are a switch or a level: `model`, `memory:rw`,
/// `history`, `skills:ro`, `session`, `agents`, `watches`, `notify`, `preview`,
/// and the operator's `process-sandbox:off`.
fn flag_parts(c: &Capabilities) -> Vec<String> {
    let mut parts = Vec::new();
    if c.model {
        parts.push("model".into());
    }
    if let Some(a) = c.memory {
        parts.push(format!("memory:{}", a.short()));
    }
    if c.history {
        parts.push("history".into());
    }
    if let Some(a) = c.skills {
        parts.push(format!("skills:{}", a.short()));
    }
    for (on, name) in [
        (c.session, "session"),
        (c.agents, "agents"),
        (c.watches, "watches"),
        (c.notify, "notify"),
        (c.preview, "preview"),
    ] {
        if on {
            parts.push(name.into());
        }
    }
    if c.process_sandbox == Some(turnstone_runtime::capability::ProcessSandbox::Off) {
        parts.push("process-sandbox:off".into());
    }
    parts
}

/// A capability set in a few words for the `plugins list` table: each
/// filesystem grant with its access, one or two names of a kind inline, more
/// as a count (`fs:workspace:rw exec:bash env:19`). `plugins info` has the
/// full lists.
pub fn caps_brief(c: &Capabilities) -> String {
    let mut parts: Vec<String> = c
        .filesystem
        .iter()
        .map(|f| format!("fs:{}:{}", f.path, f.access.short()))
        .collect();
    let secrets: Vec<String> = c.secrets.iter().map(|s| s.name.clone()).collect();
    for (kind, names) in [
        ("http", &c.http),
        ("exec", &c.exec),
        ("env", &c.env),
        ("secret", &secrets),
    ] {
        match names.len() {
            0 => {}
            1 | 2 => parts.push(format!("{kind}:{}", names.join(","))),
            n => parts.push(format!("{kind}:{n}")),
        }
    }
    parts.extend(flag_parts(c));
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// The table's capability cell: the effective grant, and what the manifest
/// asks for beyond it when the operator has not granted all of it.
fn caps_cell(requested: Option<&Capabilities>, granted: &Capabilities) -> String {
    let brief = caps_brief(granted);
    match requested {
        Some(r) if r != granted => format!("{brief} (requests {})", caps_brief(r)),
        _ => brief,
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
pub fn list(
    reg: &PluginRegistry,
    mcp: &turnstone_mcp::McpHub,
    as_json: bool,
    out: &mut impl Write,
) -> Result<()> {
    if as_json {
        let mut all: Vec<_> = reg.entries().iter().map(entry_json).collect();
        all.extend(mcp.servers().iter().map(|s| crate::mcp_cli::server_json(s)));
        writeln!(out, "{}", serde_json::to_string_pretty(&all)?)?;
        return Ok(());
    }
    let mut rows: Vec<Row> = reg
        .entries()
        .iter()
        .map(|e| {
            let m = e.manifest.as_ref();
            let tools = match &e.status {
                PluginStatus::Loaded(p) => p.tools.iter().map(|t| t.name.clone()).collect(),
                _ => Vec::new(),
            };
            Row {
                cells: [
                    e.name(),
                    m.map_or("-".into(), |m| m.plugin.version.clone()),
                    m.map_or("-".into(), |m| m.plugin.kind.as_str().into()),
                    m.map_or("-".into(), |m| m.plugin.wit.clone()),
                    if tools.is_empty() {
                        "-".into()
                    } else {
                        tools.join(",")
                    },
                    caps_cell(m.map(|m| &m.capabilities), &e.effective_grant()),
                    state(e),
                ],
                tool_count: tools.len(),
            }
        })
        .collect();
    // MCP servers are plugins of kind `mcp`, listed with the components.
    rows.extend(mcp.servers().iter().map(|s| {
        let (cells, tool_count) = crate::mcp_cli::row(s);
        Row { cells, tool_count }
    }));
    let columns = crossterm::terminal::size()
        .ok()
        .filter(|_| std::io::stdout().is_terminal())
        .map(|(cols, _)| usize::from(cols));
    write_table(rows, columns, out)
}

/// One plugin's row.
struct Row {
    cells: [String; 7],
    tool_count: usize,
}

const HEADER: [&str; 7] = [
    "NAME",
    "VERSION",
    "KIND",
    "WIT",
    "TOOLS",
    "CAPABILITIES",
    "STATE",
];
const TOOLS: usize = 4;

fn widths(rows: &[Row]) -> [usize; 7] {
    let mut w = HEADER.map(str::len);
    for r in rows {
        for (i, c) in r.cells.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    w
}

/// Writes the table; when it is wider than the terminal (`columns`), tool
/// lists become counts (`plugins info` names them).
fn write_table(mut rows: Vec<Row>, columns: Option<usize>, out: &mut impl Write) -> Result<()> {
    let total = |w: &[usize; 7]| w.iter().sum::<usize>() + 2 * (w.len() - 1);
    let mut w = widths(&rows);
    if columns.is_some_and(|c| total(&w) > c) {
        for r in &mut rows {
            if r.tool_count > 1 {
                r.cells[TOOLS] = format!("{} tools", r.tool_count);
            }
        }
        w = widths(&rows);
    }
    let line = |cells: &[&str]| -> String {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 < cells.len() {
                s.push_str(&format!("{c:<width$}  ", width = w[i]));
            } else {
                s.push_str(c);
            }
        }
        s.trim_end().to_string()
    };
    writeln!(out, "{}", line(&HEADER))?;
    for r in &rows {
        let cells: Vec<&str> = r.cells.iter().map(String::as_str).collect();
        writeln!(out, "{}", line(&cells))?;
    }
    if rows.is_empty() {
        writeln!(out, "(no plugins found)")?;
    }
    Ok(())
}

/// `turnstone plugins info NAME`.
pub fn info(
    reg: &PluginRegistry,
    mcp: &turnstone_mcp::McpHub,
    name: &str,
    out: &mut impl Write,
) -> Result<()> {
    let Some(e) = reg.entries().iter().find(|e| e.name() == name) else {
        if let Some(s) = mcp.server(name) {
            let v = crate::mcp_cli::server_json(&s);
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
            return Ok(());
        }
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
        // No session: the operator's own call (tools keep no per-session
        // rules for it, such as edit_file's read-before-edit).
        session_id: String::new(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use turnstone_runtime::capability::{Access, FsGrant};

    fn bash_like() -> Capabilities {
        Capabilities {
            filesystem: vec![FsGrant {
                path: "workspace".into(),
                access: Access::ReadWrite,
            }],
            exec: vec!["bash".into()],
            env: (0..19).map(|i| format!("VAR{i}")).collect(),
            ..Capabilities::default()
        }
    }

    #[test]
    fn a_capability_set_is_summarised_in_a_few_words() {
        assert_eq!(caps_brief(&bash_like()), "fs:workspace:rw exec:bash env:19");
        let provider = Capabilities {
            http: vec!["<configured>".into(), "api.anthropic.com".into()],
            secrets: vec!["api_key".into()],
            model: true,
            ..Capabilities::default()
        };
        assert_eq!(
            caps_brief(&provider),
            "http:<configured>,api.anthropic.com secret:api_key model"
        );
        assert_eq!(caps_brief(&Capabilities::default()), "-");
        // Less granted than requested: the cell says what is still asked for.
        assert_eq!(
            caps_cell(Some(&bash_like()), &Capabilities::default()),
            "- (requests fs:workspace:rw exec:bash env:19)"
        );
        assert_eq!(
            caps_cell(Some(&bash_like()), &bash_like()),
            "fs:workspace:rw exec:bash env:19"
        );
    }

    fn row(name: &str, tools: &[&str]) -> Row {
        Row {
            cells: [
                name.into(),
                "0.1.0".into(),
                "tool".into(),
                "0.1.0".into(),
                tools.join(","),
                "fs:workspace:rw".into(),
                "loaded".into(),
            ],
            tool_count: tools.len(),
        }
    }

    fn table(columns: Option<usize>) -> String {
        let rows = vec![
            row(
                "files",
                &["read_file", "write_file", "edit_file", "diff_file"],
            ),
            row("search", &["search"]),
        ];
        let mut out = Vec::new();
        write_table(rows, columns, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_table_fits_the_terminal_by_counting_tools() {
        let wide = table(Some(200));
        assert!(
            wide.contains("read_file,write_file,edit_file,diff_file"),
            "{wide}"
        );
        assert_eq!(wide, table(None), "not a terminal: never shortened");
        let narrow = table(Some(80));
        assert!(narrow.contains("4 tools"), "{narrow}");
        assert!(
            narrow.contains("  search  "),
            "one tool keeps its name: {narrow}"
        );
        assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
        assert!(narrow.starts_with("NAME "), "{narrow}");
    }
}
