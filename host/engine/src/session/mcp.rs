//! MCP tools in a session: `mcp__{server}__{tool}` definitions (deferred
//! behind `tool_search` when it is active), `read_resource` and `use_prompt`
//! when a server offers resources or prompts, and how each such call is
//! prepared and run.

use super::ChatSession;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use turnstone_mcp::McpServer;
use turnstone_mcp::content::{prompt_text, read_resource_text, tool_result_text};
use turnstone_mcp::search::tool_search_parameters;
use turnstone_runtime::provider_types as wit;

/// The synthetic search tool.
pub const TOOL_SEARCH: &str = "tool_search";
/// Reads an MCP resource.
pub const READ_RESOURCE: &str = "read_resource";
/// Expands an MCP prompt.
pub const USE_PROMPT: &str = "use_prompt";
/// Resources listed in the `read_resource` description.
const RESOURCE_CATALOG: usize = 50;
/// Prompts listed in the `use_prompt` description.
const PROMPT_CATALOG: usize = 30;

/// An MCP request ready to run.
pub(super) enum McpRun {
    /// `tools/call`.
    Tool {
        server: Arc<McpServer>,
        tool: String,
        arguments: serde_json::Map<String, serde_json::Value>,
    },
    /// `resources/read`.
    Resource { server: Arc<McpServer>, uri: String },
    /// `prompts/get`.
    Prompt {
        server: Arc<McpServer>,
        prompt: String,
        arguments: serde_json::Map<String, serde_json::Value>,
    },
}

/// A prepared MCP-side call: header, preview, whether it asks, and the run.
pub(super) struct McpPrepared {
    pub header: String,
    pub preview: Option<String>,
    pub needs_approval: bool,
    pub run: Result<McpRun, String>,
}

/// The outcome of a run: output, error flag, and whether it was cancelled.
pub(super) struct McpOutcome {
    pub output: String,
    pub is_error: bool,
    pub cancelled: bool,
}

fn object_arguments(
    name: &str,
    raw: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(serde_json::Map::new());
    }
    match serde_json::from_str::<serde_json::Value>(trimmed) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(_) => Err(format!("Error: arguments for {name} must be a JSON object")),
        Err(e) => Err(format!(
            "Error: arguments for {name} are not valid JSON ({e})"
        )),
    }
}

fn string_field(args: &serde_json::Map<String, serde_json::Value>, key: &str) -> Option<String> {
    args.get(key)
        .and_then(|v| v.as_str())
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
}

impl ChatSession {
    /// Whether `name` is served by the MCP side of the session.
    pub(super) fn is_mcp_call(&self, name: &str) -> bool {
        self.mcp.is_some()
            && (name.starts_with(turnstone_mcp::hub::PREFIX)
                || name == READ_RESOURCE
                || name == USE_PROMPT)
    }

    /// Whether tool search is active for the next request (enough tools,
    /// something to defer), given the number of component tools.
    pub(super) fn tool_search_active(&self, component_tools: usize) -> bool {
        let Some(hub) = &self.mcp else {
            return false;
        };
        let mcp = hub.tool_count();
        self.cfg.tool_search.active(component_tools + mcp, mcp)
    }

    /// Whether the next request uses the provider's native tool search (the
    /// Anthropic and OpenAI tiers of the reference): search is active, the
    /// model supports it, and a component tool stays undeferred (a request
    /// whose every tool is deferred is refused by the provider).
    pub(super) async fn native_tool_search(&self, b: &super::ModelBinding) -> bool {
        let components = self.component_tool_count();
        components > 0 && self.tool_search_active(components) && b.supports_tool_search().await
    }

    /// Tool definitions the MCP side adds to a request, given the number of
    /// component tools already in it. With `native` search every MCP tool is
    /// sent deferred and no client-side `tool_search` is offered.
    pub(super) fn mcp_definitions(
        &self,
        component_tools: usize,
        native: bool,
    ) -> Vec<wit::ToolDefinition> {
        let Some(hub) = &self.mcp else {
            return Vec::new();
        };
        let tools = hub.tools();
        let mut out = Vec::new();
        let searching = self.tool_search_active(component_tools);
        let client_side = searching && !native;
        if client_side {
            out.push(wit::ToolDefinition {
                name: TOOL_SEARCH.into(),
                description: format!(
                    "Search {} more tools (from MCP servers) that are not listed here, by what they do. Found tools become callable right away.",
                    tools.len()
                )
                .into(),
                parameters: tool_search_parameters().to_string().into(),
                defer_loading: false,
            });
        }
        for (_, t) in &tools {
            if client_side && !self.found_tools.contains(&t.prefixed) {
                continue;
            }
            out.push(wit::ToolDefinition {
                name: t.prefixed.as_str().into(),
                description: t.offered_description.clone(),
                parameters: t.schema_text.clone(),
                defer_loading: searching && native,
            });
        }
        let (resources, prompts) = hub.offers();
        if resources {
            let mut lines = Vec::new();
            for s in hub.servers() {
                let c = s.catalog();
                for r in &c.resources {
                    lines.push(format!(
                        "  {}  {}",
                        r.uri,
                        r.description.as_deref().unwrap_or(&r.name)
                    ));
                }
                for t in &c.templates {
                    lines.push(format!(
                        "  {}  (template) {}",
                        t.uri_template,
                        t.description.as_deref().unwrap_or(&t.name)
                    ));
                }
            }
            lines.truncate(RESOURCE_CATALOG);
            out.push(wit::ToolDefinition {
                name: READ_RESOURCE.into(),
                description: format!(
                    "Read a resource from an MCP server by URI.\n<mcp-resources>\n{}\n</mcp-resources>",
                    lines.join("\n")
                )
                .into(),
                parameters: serde_json::json!({
                    "type": "object",
                    "properties": {"uri": {"type": "string", "description": "The resource URI to read."}},
                    "required": ["uri"]
                })
                .to_string()
                .into(),
                defer_loading: false,
            });
        }
        if prompts {
            let mut lines = Vec::new();
            for s in hub.servers() {
                for p in &s.catalog().prompts {
                    let args = p
                        .arguments
                        .iter()
                        .flatten()
                        .map(|a| {
                            if a.required == Some(true) {
                                a.name.clone()
                            } else {
                                format!("{}?", a.name)
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    lines.push(format!(
                        "  mcp__{}__{}({args})  {}",
                        s.name,
                        p.name,
                        p.description.as_deref().unwrap_or("")
                    ));
                }
            }
            lines.truncate(PROMPT_CATALOG);
            out.push(wit::ToolDefinition {
                name: USE_PROMPT.into(),
                description: format!(
                    "Expand a prompt template from an MCP server into messages.\n<mcp-prompts>\n{}\n</mcp-prompts>",
                    lines.join("\n")
                )
                .into(),
                parameters: serde_json::json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "The prompt name, e.g. mcp__server__prompt_name."},
                        "arguments": {"type": "object", "description": "String values for the prompt's arguments.", "additionalProperties": {"type": "string"}}
                    },
                    "required": ["name"]
                })
                .to_string()
                .into(),
                defer_loading: false,
            });
        }
        out
    }

    /// Runs `tool_search` now (it is read-only and always allowed): the hits
    /// become visible for the rest of the session.
    pub(super) fn run_tool_search(&mut self, raw: &str) -> (String, bool) {
        let Some(hub) = &self.mcp else {
            return ("Error: no tools can be searched".into(), true);
        };
        let args = match object_arguments(TOOL_SEARCH, raw) {
            Ok(a) => a,
            Err(e) => return (e, true),
        };
        let Some(query) = string_field(&args, "query") else {
            return (
                "Error: tool_search needs a non-empty \"query\"".into(),
                true,
            );
        };
        let hits = hub.search_tools(&query, self.cfg.tool_search.max_results);
        if hits.is_empty() {
            return (format!("No tools match {query:?}."), false);
        }
        let mut lines = vec![format!(
            "Found {} tool(s); they are now available to call:",
            hits.len()
        )];
        for (name, description) in hits {
            lines.push(format!("- {name}: {description}"));
            self.found_tools.insert(name);
        }
        (lines.join("\n"), false)
    }

    /// Prepares an MCP tool, `read_resource` or `use_prompt` call.
    pub(super) fn prepare_mcp(&self, name: &str, raw: &str) -> McpPrepared {
        let refuse = |e: String| McpPrepared {
            header: name.to_string(),
            preview: None,
            needs_approval: false,
            run: Err(e),
        };
        let Some(hub) = &self.mcp else {
            return refuse(format!("Error: unknown tool {name:?}"));
        };
        let args = match object_arguments(name, raw) {
            Ok(a) => a,
            Err(e) => return refuse(e),
        };
        let pretty = serde_json::to_string_pretty(&args).unwrap_or_default();
        match name {
            READ_RESOURCE => {
                let Some(uri) = string_field(&args, "uri") else {
                    return refuse("Error: read_resource needs a \"uri\"".into());
                };
                let Some(server) = hub.resource_owner(&uri) else {
                    return refuse(format!(
                        "Error: no connected MCP server serves the resource {uri:?}"
                    ));
                };
                McpPrepared {
                    header: format!("read_resource {uri} (MCP: {})", server.name),
                    preview: None,
                    needs_approval: true,
                    run: Ok(McpRun::Resource { server, uri }),
                }
            }
            USE_PROMPT => {
                let Some(prompt) = string_field(&args, "name") else {
                    return refuse("Error: use_prompt needs a \"name\"".into());
                };
                let Some((server, p)) = hub.prompt(&prompt) else {
                    return refuse(format!(
                        "Error: no connected MCP server has the prompt {prompt:?} (names look like mcp__server__prompt)"
                    ));
                };
                let mut arguments = serde_json::Map::new();
                if let Some(serde_json::Value::Object(m)) = args.get("arguments") {
                    for (k, v) in m {
                        // Prompt arguments are strings on the wire.
                        let s = match v {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        arguments.insert(k.clone(), serde_json::Value::String(s));
                    }
                }
                McpPrepared {
                    header: format!("use_prompt {prompt}"),
                    preview: Some(pretty),
                    needs_approval: true,
                    run: Ok(McpRun::Prompt {
                        server,
                        prompt: p.name,
                        arguments,
                    }),
                }
            }
            _ => {
                let Some((server, tool)) = hub.tool(name) else {
                    let why = match turnstone_mcp::hub::split_prefixed(name)
                        .and_then(|(s, _)| hub.server(s))
                    {
                        Some(s) => format!(
                            "Error: MCP server {} has no tool {name:?} now (state: {})",
                            s.name,
                            s.state().label()
                        ),
                        None => format!("Error: unknown tool {name:?}"),
                    };
                    return refuse(why);
                };
                McpPrepared {
                    header: format!("{name} (MCP: {})", server.name),
                    preview: Some(pretty),
                    needs_approval: !server.auto_approves(&tool.name),
                    run: Ok(McpRun::Tool {
                        server,
                        tool: tool.name,
                        arguments: args,
                    }),
                }
            }
        }
    }
}

/// Runs a prepared MCP call; progress messages go to `progress`.
pub(super) async fn run_mcp(
    run: McpRun,
    cancel: &CancellationToken,
    progress: &(dyn Fn(String) + Send + Sync),
) -> McpOutcome {
    let r = match run {
        McpRun::Tool {
            server,
            tool,
            arguments,
        } => server
            .call_tool(&tool, arguments, cancel, progress)
            .await
            .map(|r| (tool_result_text(&r), r.is_error == Some(true))),
        McpRun::Resource { server, uri } => server
            .read_resource(&uri, cancel)
            .await
            .map(|r| (read_resource_text(&r), false)),
        McpRun::Prompt {
            server,
            prompt,
            arguments,
        } => server
            .get_prompt(&prompt, arguments, cancel)
            .await
            .map(|r| (prompt_text(&r), false)),
    };
    match r {
        Ok((output, is_error)) => McpOutcome {
            output,
            is_error,
            cancelled: false,
        },
        Err(turnstone_mcp::McpCallError::Cancelled) => McpOutcome {
            output: String::new(),
            is_error: true,
            cancelled: true,
        },
        Err(e) => McpOutcome {
            output: format!("Error: {e}"),
            is_error: true,
            cancelled: false,
        },
    }
}
