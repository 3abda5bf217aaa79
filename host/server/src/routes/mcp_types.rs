//! The request and response types of `/v1/api/admin/mcp-servers` and the MCP
//! side of the plugin views (see [`super::mcp_servers`]).

use super::plugins_types::{
    CapabilitySet, GrantSource, PluginCounts, PluginState, PluginStoredState, PluginView,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use turnstone_mcp::config::TransportKind;
use turnstone_mcp::{McpServer, Origin, ServerConfig, ServerState};
use turnstone_storage::types::PluginRecord;
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};

/// How a server is reached.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum McpTransport {
    /// A child process speaking over stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
}

/// An MCP server definition: the `[mcp.servers.NAME]` fields, with `type`
/// required. Whether it runs is the plugin's enable toggle; what it may
/// touch is its grant.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum McpServerBody {
    /// A child process.
    Stdio(StdioServer),
    /// A streamable HTTP endpoint.
    Http(HttpServer),
}

/// The schema of one variant: its struct with the `type` tag added (a
/// derived internally tagged schema would forbid the tag through the
/// struct's `additionalProperties: false`).
fn tagged(tag: &str, schema: RefOr<Schema>) -> RefOr<Schema> {
    let RefOr::T(Schema::Object(mut obj)) = schema else {
        return schema;
    };
    obj.properties.insert(
        "type".into(),
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some([tag]))
            .into(),
    );
    obj.required.insert(0, "type".into());
    RefOr::T(Schema::Object(obj))
}

impl utoipa::PartialSchema for McpServerBody {
    fn schema() -> RefOr<Schema> {
        OneOfBuilder::new()
            .description(Some(
                "`{\"type\": \"stdio\", \"command\": …}` or `{\"type\": \"http\", \"url\": …}`",
            ))
            .item(tagged("stdio", StdioServer::schema()))
            .item(tagged("http", HttpServer::schema()))
            .into()
    }
}

impl ToSchema for McpServerBody {}

/// A stdio server.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct StdioServer {
    /// Program to run (the grant names it by file name).
    #[schema(min_length = 1, pattern = "\\S")]
    command: String,
    /// Its arguments.
    #[serde(default)]
    args: Vec<String>,
    /// Variables set on the child.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Working directory (must lie in a granted directory; default: the workspace).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    cwd: Option<PathBuf>,
    /// Every tool runs without asking.
    #[serde(default)]
    auto_approve: bool,
    /// These tools (unprefixed) run without asking.
    #[serde(default)]
    auto_approve_tools: Vec<String>,
    /// Per-request deadline, seconds.
    #[serde(default, deserialize_with = "super::integral")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400)]
    timeout_secs: Option<i64>,
    /// Failures in a row that open the circuit.
    #[serde(default, deserialize_with = "super::integral")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    breaker_threshold: Option<i64>,
    /// Seconds an open circuit refuses calls.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 86400)]
    breaker_cool_down_secs: Option<f64>,
}

/// A streamable HTTP server.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HttpServer {
    /// Endpoint, `http(s)://HOST[:PORT]/PATH` (the grant names the host).
    #[schema(
        pattern = "^[Hh][Tt][Tt][Pp][Ss]?://([A-Za-z0-9-]+\\.)*[A-Za-z][A-Za-z0-9-]*\
        (:(0|[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?\
        (/[A-Za-z0-9._~/-]*)?$"
    )]
    url: String,
    /// Extra request headers.
    #[serde(default)]
    headers: BTreeMap<String, String>,
    /// Name of a host-held secret sent as `Authorization: Bearer …`.
    #[serde(default)]
    bearer_secret: Option<String>,
    /// Every tool runs without asking.
    #[serde(default)]
    auto_approve: bool,
    /// These tools (unprefixed) run without asking.
    #[serde(default)]
    auto_approve_tools: Vec<String>,
    /// Per-request deadline, seconds.
    #[serde(default, deserialize_with = "super::integral")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 86400)]
    timeout_secs: Option<i64>,
    /// Failures in a row that open the circuit.
    #[serde(default, deserialize_with = "super::integral")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    breaker_threshold: Option<i64>,
    /// Seconds an open circuit refuses calls.
    #[serde(default)]
    #[schema(minimum = 0, maximum = 86400)]
    breaker_cool_down_secs: Option<f64>,
}

/// Out-of-range numbers become values the definition check refuses with
/// its own message (`between 1 and 86400`).
fn secs(v: Option<i64>) -> Option<u64> {
    v.map(|v| u64::try_from(v).unwrap_or(0))
}

fn threshold(v: Option<i64>) -> Option<u32> {
    v.map(|v| u32::try_from(v.max(0)).unwrap_or(u32::MAX))
}

impl From<McpServerBody> for ServerConfig {
    fn from(b: McpServerBody) -> Self {
        match b {
            McpServerBody::Stdio(s) => ServerConfig {
                kind: Some(TransportKind::Stdio),
                command: Some(s.command),
                args: s.args,
                env: s.env,
                cwd: s.cwd,
                auto_approve: s.auto_approve,
                auto_approve_tools: s.auto_approve_tools,
                timeout_secs: secs(s.timeout_secs),
                breaker_threshold: threshold(s.breaker_threshold),
                breaker_cool_down_secs: s.breaker_cool_down_secs,
                ..ServerConfig::default()
            },
            McpServerBody::Http(h) => ServerConfig {
                kind: Some(TransportKind::Http),
                url: Some(h.url),
                headers: h.headers,
                bearer_secret: h.bearer_secret,
                auto_approve: h.auto_approve,
                auto_approve_tools: h.auto_approve_tools,
                timeout_secs: secs(h.timeout_secs),
                breaker_threshold: threshold(h.breaker_threshold),
                breaker_cool_down_secs: h.breaker_cool_down_secs,
                ..ServerConfig::default()
            },
        }
    }
}

/// `POST /v1/api/admin/mcp-servers`: a new server (it starts with nothing
/// granted, so it connects only once the operator grants it).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateMcpServer {
    /// Server name: letters, digits, `_` and `-`, no `__`, not starting or
    /// ending with `_`; unique among plugins.
    #[schema(max_length = 64, pattern = "^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$")]
    pub(crate) name: String,
    /// Start enabled (default true).
    #[serde(default)]
    pub(crate) enabled: Option<bool>,
    /// The definition.
    pub(crate) server: McpServerBody,
}

/// `PUT /v1/api/admin/mcp-servers/{name}`: the new definition.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct UpdateMcpServer {
    /// The definition (replaces the stored one).
    pub(crate) server: McpServerBody,
}

/// Where a definition lives.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum McpOrigin {
    /// `config.toml` or `--mcp-config` (changed there).
    Config,
    /// The database (admin API, console).
    Api,
}

impl From<Origin> for McpOrigin {
    fn from(o: Origin) -> Self {
        match o {
            Origin::Config => Self::Config,
            Origin::Api => Self::Api,
        }
    }
}

/// One server's definition as the admin API shows it.
#[derive(Serialize, ToSchema)]
pub(crate) struct McpServerDefinition {
    /// Server name.
    pub(crate) name: String,
    /// Where the definition lives.
    pub(crate) origin: McpOrigin,
    /// The `[mcp.servers.NAME]` fields as JSON.
    #[schema(value_type = Object)]
    pub(crate) definition: serde_json::Value,
}

/// Every MCP server on this node.
#[derive(Serialize, ToSchema)]
pub(crate) struct McpServerList {
    /// By name.
    pub(crate) servers: Vec<McpServerDefinition>,
}

/// The MCP part of a plugin view.
#[derive(Serialize, ToSchema)]
pub(crate) struct McpDetail {
    /// How it is reached.
    transport: McpTransport,
    /// Command line or URL.
    target: String,
    /// Where the definition lives.
    origin: McpOrigin,
    /// Resource URIs and templates it lists.
    resources: Vec<String>,
    /// Prompts, as `mcp__{server}__{prompt}`.
    prompts: Vec<String>,
    /// Times its circuit breaker opened.
    breaker_openings: u64,
    /// With an open circuit: seconds until a probe call is let through.
    #[schema(required = true)]
    retry_in_secs: Option<u64>,
    /// Every tool runs without asking.
    auto_approve: bool,
    /// Tools that run without asking.
    auto_approve_tools: Vec<String>,
}

impl PluginView {
    /// The view of MCP server `s`, with its database row.
    pub(crate) fn mcp(s: &McpServer, row: Option<&PluginRecord>) -> Self {
        let state = s.state();
        let catalog = s.catalog();
        let transport = match s.transport_kind() {
            "stdio" => McpTransport::Stdio,
            _ => McpTransport::Http,
        };
        let grant_source = if row.and_then(|r| r.granted.as_ref()).is_some() {
            GrantSource::Operator
        } else if s.explicit_grant().is_some() {
            GrantSource::Config
        } else if s.origin == Origin::Config {
            GrantSource::OwnRequest
        } else {
            GrantSource::Nothing
        };
        Self {
            name: s.name.clone(),
            version: None,
            disk_version: None,
            kind: Some("mcp"),
            wit: None,
            description: Some(format!(
                "MCP server ({}: {})",
                s.transport_kind(),
                s.target()
            )),
            builtin: false,
            dir: String::new(),
            state: match state {
                ServerState::Connected => PluginState::Connected,
                ServerState::Connecting => PluginState::Connecting,
                ServerState::CircuitOpen { .. } => PluginState::OpenCircuit,
                ServerState::Failed { .. } => PluginState::Failed,
                ServerState::Disabled => PluginState::Disabled,
            },
            enabled: state != ServerState::Disabled,
            last_error: s.last_error(),
            tools: catalog.tools.iter().map(|t| t.prefixed.clone()).collect(),
            requested: Some(CapabilitySet::from(&s.requested())),
            granted: CapabilitySet::from(s.grant()),
            grant_source,
            config: None,
            skipped_grants: Vec::new(),
            wasm_sha256: None,
            counters: PluginCounts {
                calls: s.counters.calls.load(Ordering::Relaxed),
                failures: s.counters.failures.load(Ordering::Relaxed),
                denials: 0,
            },
            stored: row.map(PluginStoredState::from),
            channel: None,
            mcp: Some(McpDetail {
                transport,
                target: s.target(),
                origin: s.origin.into(),
                resources: catalog
                    .resources
                    .iter()
                    .map(|r| r.uri.clone())
                    .chain(catalog.templates.iter().map(|t| t.uri_template.clone()))
                    .collect(),
                prompts: catalog
                    .prompts
                    .iter()
                    .map(|p| format!("mcp__{}__{}", s.name, p.name))
                    .collect(),
                breaker_openings: s.breaker_openings(),
                retry_in_secs: match state {
                    ServerState::CircuitOpen { retry_in_secs } => Some(retry_in_secs),
                    _ => None,
                },
                auto_approve: s.config.auto_approve,
                auto_approve_tools: s.config.auto_approve_tools.clone(),
            }),
        }
    }
}
