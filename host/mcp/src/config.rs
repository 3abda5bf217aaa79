//! MCP configuration: `[mcp]` in `config.toml` and the standard `mcpServers`
//! JSON file (`--mcp-config`) other MCP clients read.
//!
//! ```toml
//! [mcp]
//! call_timeout_secs = 120            # per MCP request (tools/call, resources/read, prompts/get)
//!
//! [mcp.servers.github]               # stdio: a child process
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-github"]
//! env = { GITHUB_API_URL = "https://api.github.com" }   # values set on the child
//! cwd = "/srv/mcp"
//! auto_approve_tools = ["search_repos"]
//!
//! [mcp.servers.remote]               # streamable HTTP
//! url = "https://mcp.example.com/mcp"
//! headers = { X-Team = "infra" }
//! bearer_secret = "REMOTE_MCP_TOKEN" # host-held secret, sent as `Authorization: Bearer …`
//!
//! [mcp.serve]                        # `turnstone mcp` and `/mcp`: tools served to MCP clients
//! allow = ["word_count"]             # besides the tools that are auto-approved
//! ```
//!
//! What a server may touch is granted like any plugin's capabilities, under
//! `[plugins.grants.<server>]` (see [`crate::grants`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default per-request deadline.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// `[mcp]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Servers by name.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
    /// What `turnstone mcp` serves.
    #[serde(default)]
    pub serve: ServeConfig,
    /// Deadline of one MCP request, seconds (default 120).
    pub call_timeout_secs: Option<u64>,
}

impl McpConfig {
    /// The per-request deadline.
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(DEFAULT_CALL_TIMEOUT)
    }

    /// Adds the servers of an `mcpServers` file; a name already configured
    /// in `config.toml` is an error rather than a silent override.
    pub fn merge_json_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let servers = parse_mcp_json(&text).map_err(|e| match e {
            ConfigError::Json { reason, .. } => ConfigError::Json {
                path: path.to_path_buf(),
                reason,
            },
            other => other,
        })?;
        for (name, server) in servers {
            if self.servers.contains_key(&name) {
                return Err(ConfigError::Duplicate { name });
            }
            self.servers.insert(name, server);
        }
        Ok(())
    }

    /// Checks every server.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, s) in &self.servers {
            validate_name(name)?;
            s.transport(name)?;
            s.validate_numbers(name)?;
        }
        if self.call_timeout_secs == Some(0) {
            return Err(ConfigError::Server {
                name: "*".into(),
                reason: "[mcp] call_timeout_secs must be at least 1".into(),
            });
        }
        Ok(())
    }
}

/// `[mcp.serve]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Tools exposed besides the auto-approved ones.
    #[serde(default)]
    pub allow: Vec<String>,
}

/// `type` of a server entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// A child process speaking over stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    #[serde(
        alias = "streamable-http",
        alias = "streamableHttp",
        alias = "streamable_http"
    )]
    Http,
    /// The deprecated HTTP+SSE transport: refused with a clear error.
    Sse,
}

/// One `[mcp.servers.NAME]` entry (also one `mcpServers` JSON entry).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `stdio` or `http`; inferred from `command` / `url` when absent.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<TransportKind>,
    /// Program to run (stdio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables set on the child (values written by the operator).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory of the child (default: the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Endpoint (streamable HTTP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Extra request headers (HTTP).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Host-held secret sent as `Authorization: Bearer <value>` (HTTP).
    #[serde(
        default,
        alias = "bearerSecret",
        skip_serializing_if = "Option::is_none"
    )]
    pub bearer_secret: Option<String>,
    /// Every tool of this server runs without asking.
    #[serde(
        default,
        alias = "autoApproveAll",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub auto_approve: bool,
    /// These tools (unprefixed names) run without asking.
    #[serde(default, alias = "autoApprove", skip_serializing_if = "Vec::is_empty")]
    pub auto_approve_tools: Vec<String>,
    /// Per-request deadline for this server, seconds.
    #[serde(default, alias = "timeout", skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
    /// Configured but not started.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// Failures in a row that open the circuit (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker_threshold: Option<u32>,
    /// Seconds an open circuit refuses calls before a probe (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker_cool_down_secs: Option<f64>,
}

/// How to reach a server, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process.
    Stdio(StdioSpec),
    /// Streamable HTTP.
    Http(HttpSpec),
}

/// A stdio server: a child process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioSpec {
    /// Program.
    pub command: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Variables set on the child.
    pub env: BTreeMap<String, String>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
}

/// A streamable HTTP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpSpec {
    /// Endpoint.
    pub url: url::Url,
    /// Extra headers.
    pub headers: BTreeMap<String, String>,
    /// Bearer secret name.
    pub bearer_secret: Option<String>,
}

impl ServerConfig {
    /// The validated transport of server `name`.
    pub fn transport(&self, name: &str) -> Result<Transport, ConfigError> {
        let bad = |reason: &str| ConfigError::Server {
            name: name.to_string(),
            reason: reason.to_string(),
        };
        let kind = match (self.kind, &self.command, &self.url) {
            (Some(k), _, _) => k,
            (None, Some(_), None) => TransportKind::Stdio,
            (None, None, Some(_)) => TransportKind::Http,
            (None, Some(_), Some(_)) => return Err(bad("set either `command` or `url`, not both")),
            (None, None, None) => {
                return Err(bad(
                    "set `command` (a stdio server) or `url` (a streamable HTTP server)",
                ));
            }
        };
        match kind {
            TransportKind::Sse => Err(bad(
                "the HTTP+SSE transport is deprecated and not supported; use the server's streamable HTTP endpoint (type = \"http\")",
            )),
            TransportKind::Stdio => {
                let command = self
                    .command
                    .clone()
                    .filter(|c| !c.trim().is_empty())
                    .ok_or_else(|| bad("a stdio server needs `command`"))?;
                if self.url.is_some() {
                    return Err(bad("a stdio server takes no `url`"));
                }
                Ok(Transport::Stdio(StdioSpec {
                    command,
                    args: self.args.clone(),
                    env: self.env.clone(),
                    cwd: self.cwd.clone(),
                }))
            }
            TransportKind::Http => {
                let raw = self
                    .url
                    .as_deref()
                    .ok_or_else(|| bad("an HTTP server needs `url`"))?;
                if self.command.is_some() {
                    return Err(bad("an HTTP server takes no `command`"));
                }
                let url = url::Url::parse(raw).map_err(|e| bad(&format!("url {raw:?}: {e}")))?;
                if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                    return Err(bad(&format!("url {raw:?} must be http(s)://HOST/PATH")));
                }
                Ok(Transport::Http(HttpSpec {
                    url,
                    headers: self.headers.clone(),
                    bearer_secret: self.bearer_secret.clone(),
                }))
            }
        }
    }

    /// Rejects numbers that would make the server unusable (or panic).
    pub fn validate_numbers(&self, name: &str) -> Result<(), ConfigError> {
        let bad = |reason: &str| ConfigError::Server {
            name: name.to_string(),
            reason: reason.to_string(),
        };
        if let Some(t) = self.timeout_secs
            && !(1..=86_400).contains(&t)
        {
            return Err(bad("timeout_secs must be between 1 and 86400"));
        }
        if let Some(t) = self.breaker_threshold
            && !(1..=1000).contains(&t)
        {
            return Err(bad("breaker_threshold must be between 1 and 1000"));
        }
        if let Some(c) = self.breaker_cool_down_secs
            && !(c.is_finite() && (0.0..=86_400.0).contains(&c))
        {
            return Err(bad("breaker_cool_down_secs must be between 0 and 86400"));
        }
        Ok(())
    }

    /// The deadline of one request to this server.
    pub fn call_timeout(&self, default: Duration) -> Duration {
        self.timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(default)
    }

    /// Whether `tool` (unprefixed) runs without asking.
    pub fn auto_approves(&self, tool: &str) -> bool {
        self.auto_approve || self.auto_approve_tools.iter().any(|t| t == tool)
    }
}

/// Server names become part of tool names (`mcp__{server}__{tool}`), so they
/// are plain identifiers and never contain the `__` delimiter.
pub fn validate_name(name: &str) -> Result<(), ConfigError> {
    let bad = |reason: &str| ConfigError::Server {
        name: name.to_string(),
        reason: reason.to_string(),
    };
    if name.is_empty() || name.len() > 64 {
        return Err(bad("a server name has 1 to 64 characters"));
    }
    if name.starts_with('_') || name.ends_with('_') || name.contains("__") {
        return Err(bad(
            "a server name must not contain `__` nor start or end with `_` (`__` separates server and tool in mcp__{server}__{tool})",
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(bad(
            "a server name may use letters, digits, `_` and `-` only",
        ));
    }
    Ok(())
}

/// Parses the standard `{"mcpServers": {...}}` document.
pub fn parse_mcp_json(text: &str) -> Result<BTreeMap<String, ServerConfig>, ConfigError> {
    #[derive(Deserialize)]
    struct Doc {
        #[serde(rename = "mcpServers")]
        mcp_servers: BTreeMap<String, ServerConfig>,
    }
    let doc: Doc = serde_json::from_str(text).map_err(|e| ConfigError::Json {
        path: PathBuf::new(),
        reason: e.to_string(),
    })?;
    for (name, s) in &doc.mcp_servers {
        validate_name(name)?;
        s.transport(name)?;
        s.validate_numbers(name)?;
    }
    Ok(doc.mcp_servers)
}

/// Why MCP configuration was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A server entry is wrong.
    #[error("MCP server {name:?}: {reason}")]
    Server {
        /// Server name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The `--mcp-config` file could not be read.
    #[error("cannot read MCP config {}: {reason}", path.display())]
    Read {
        /// File.
        path: PathBuf,
        /// OS error.
        reason: String,
    },
    /// The `--mcp-config` file is not an `mcpServers` document.
    #[error("MCP config {}: {reason} (expected {{\"mcpServers\": {{\"NAME\": {{\"command\": ...}}}}}})", path.display())]
    Json {
        /// File.
        path: PathBuf,
        /// Parser message.
        reason: String,
    },
    /// The same server name in `config.toml` and the JSON file.
    #[error("MCP server {name:?} is configured twice (config.toml and --mcp-config)")]
    Duplicate {
        /// Server name.
        name: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_json_file_parses_with_stdio_and_http_entries() {
        let servers = parse_mcp_json(
            r#"{"mcpServers": {
                "github": {"command": "npx", "args": ["-y", "srv"], "env": {"A": "1"}},
                "remote": {"type": "streamableHttp", "url": "https://mcp.example.com/mcp",
                           "headers": {"X-T": "v"}, "autoApprove": ["read"]}
            }}"#,
        )
        .unwrap();
        match servers["github"].transport("github").unwrap() {
            Transport::Stdio(StdioSpec {
                command, args, env, ..
            }) => {
                assert_eq!(command, "npx");
                assert_eq!(args, ["-y", "srv"]);
                assert_eq!(env["A"], "1");
            }
            other => panic!("{other:?}"),
        }
        match servers["remote"].transport("remote").unwrap() {
            Transport::Http(HttpSpec { url, headers, .. }) => {
                assert_eq!(url.host_str(), Some("mcp.example.com"));
                assert_eq!(headers["X-T"], "v");
            }
            other => panic!("{other:?}"),
        }
        assert!(servers["remote"].auto_approves("read"));
        assert!(!servers["remote"].auto_approves("write"));
    }

    #[test]
    fn bad_entries_are_refused_with_the_reason() {
        let e = parse_mcp_json(r#"{"mcpServers": {"a__b": {"command": "x"}}}"#).unwrap_err();
        assert!(e.to_string().contains("must not contain `__`"), "{e}");
        let e = parse_mcp_json(r#"{"mcpServers": {"a": {}}}"#).unwrap_err();
        assert!(e.to_string().contains("set `command`"), "{e}");
        let e = parse_mcp_json(r#"{"mcpServers": {"a": {"type": "sse", "url": "http://h/"}}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("deprecated"), "{e}");
        let e = parse_mcp_json(r#"{"mcpServers": {"a": {"url": "ftp://h/x"}}}"#).unwrap_err();
        assert!(e.to_string().contains("http(s)"), "{e}");
        let e = parse_mcp_json(r#"{"mcpServers": {"gh_": {"command": "x"}}}"#).unwrap_err();
        assert!(e.to_string().contains("start or end"), "{e}");
        let e = parse_mcp_json(
            r#"{"mcpServers": {"a": {"command": "x", "breaker_cool_down_secs": -1}}}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("between 0 and 86400"), "{e}");
        let e =
            parse_mcp_json(r#"{"mcpServers": {"a": {"command": "x", "timeout": 0}}}"#).unwrap_err();
        assert!(e.to_string().contains("between 1 and 86400"), "{e}");
        let e = parse_mcp_json(r#"{"mcpServers": {"a": {"command": "x", "timeout": 86401}}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("between 1 and 86400"), "{e}");
        let e = parse_mcp_json(r#"{"servers": {}}"#).unwrap_err();
        assert!(e.to_string().contains("mcpServers"), "{e}");
    }

    #[test]
    fn toml_servers_and_a_json_file_merge_but_never_override() {
        let mut cfg: McpConfig = toml::from_str(
            "call_timeout_secs = 5\n[servers.a]\ncommand = \"x\"\n[serve]\nallow = [\"t\"]\n",
        )
        .unwrap();
        assert_eq!(cfg.call_timeout(), Duration::from_secs(5));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("mcp.json");
        std::fs::write(
            &f,
            r#"{"mcpServers": {"b": {"url": "http://127.0.0.1:9/mcp"}}}"#,
        )
        .unwrap();
        cfg.merge_json_file(&f).unwrap();
        assert_eq!(cfg.servers.len(), 2);
        std::fs::write(&f, r#"{"mcpServers": {"a": {"command": "y"}}}"#).unwrap();
        assert_eq!(
            cfg.merge_json_file(&f).unwrap_err(),
            ConfigError::Duplicate { name: "a".into() }
        );
    }
}
