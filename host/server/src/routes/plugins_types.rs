//! The request and response types of `/v1/api/admin/plugins` (see
//! [`super::plugins`]): the handlers parse and answer with these, so the
//! OpenAPI document is generated from what actually goes over the wire.

use super::secret_types::{SecretIn, SecretOut};
use crate::routes::ErrorBody;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use turnstone_runtime::reconcile::{Report, Shared};
use turnstone_runtime::{Access, Capabilities, FsGrant, PluginEntry, PluginStatus, SecretGrant};
use turnstone_storage::types::{AuditEntry, PluginRecord};
use utoipa::ToSchema;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};

/// Plugin administration is not available on this node.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documentation only
pub(crate) enum NoPluginAdmin {
    /// No session engine, no plugin administration, or it is shutting down.
    #[response(
        status = 503,
        description = "No session engine or plugin administration on this node, or it is stopping"
    )]
    Unavailable(ErrorBody),
}

/// Why a change to one plugin was refused, besides the answers of every
/// guarded route.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documentation only: the variants name the answers
pub(crate) enum PluginRefused {
    /// No such plugin.
    #[response(status = 404, description = "Not found (or not the caller's)")]
    NotFound(ErrorBody),
    /// Its manifest does not parse.
    #[response(status = 409, description = "The plugin's manifest does not parse")]
    Conflict(ErrorBody),
    /// No plugin administration here.
    #[response(
        status = 503,
        description = "No session engine or plugin administration on this node, or it is stopping"
    )]
    Unavailable(ErrorBody),
    /// Credentials missing or invalid.
    #[response(status = 401, description = "Missing or invalid credentials")]
    Unauthorized(ErrorBody),
    /// The scope or a permission is missing.
    #[response(status = 403, description = "Scope or permission missing")]
    Forbidden(ErrorBody),
    /// Per-address rate limit (`[ratelimit] enabled`).
    #[response(status = 429, description = "Rate limit exceeded (Retry-After)")]
    RateLimited(crate::routes::RetryBody),
}

/// Access mode of a filesystem capability.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FsAccess {
    /// Read only.
    ReadOnly,
    /// Read and write.
    ReadWrite,
}

impl From<Access> for FsAccess {
    fn from(a: Access) -> Self {
        match a {
            Access::ReadOnly => Self::ReadOnly,
            Access::ReadWrite => Self::ReadWrite,
        }
    }
}

/// A filesystem capability.
#[derive(Serialize, ToSchema)]
pub(crate) struct FsEntry {
    /// `workspace`, `workspace/<dir>` or an absolute path.
    path: String,
    /// Access mode.
    access: FsAccess,
}

/// A set of capabilities: what a manifest requests or what is granted.
#[derive(Serialize, ToSchema)]
pub(crate) struct CapabilitySet {
    /// Filesystem paths.
    filesystem: Vec<FsEntry>,
    /// Outbound HTTP hosts: `host`, `host:port`, `*.domain`, `<public>` (any
    /// public host, screened) or, in provider and channel manifests,
    /// `<configured>`.
    http: Vec<String>,
    /// Programs the plugin may spawn.
    exec: Vec<String>,
    /// Environment variables the plugin may set on children.
    env: Vec<String>,
    /// Host-held secrets the plugin may reference, each bound to the hosts
    /// and headers its value may be sent in.
    #[schema(inline)]
    secrets: Vec<SecretOut>,
    /// May ask the calling session's model for a completion (only present
    /// when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    model: bool,
    /// The caller's memories, `read-only` or `read-write` (only present when set).
    #[serde(skip_serializing_if = "Option::is_none")]
    memory: Option<FsAccess>,
    /// The caller's past conversations (only present when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    history: bool,
    /// The skills catalogue, `read-only` or `read-write` (only present when set).
    #[serde(skip_serializing_if = "Option::is_none")]
    skills: Option<FsAccess>,
    /// The calling session's identity (only present when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    session: bool,
    /// Sub-agents (only present when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    agents: bool,
    /// The caller's watches (only present when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    watches: bool,
    /// The caller's notification targets (only present when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    notify: bool,
    /// The preview pane (only present when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    preview: bool,
    /// `off`: the operator runs this plugin's processes without the kernel
    /// sandbox (only present when set).
    #[serde(skip_serializing_if = "Option::is_none")]
    process_sandbox: Option<ProcessSandboxIn>,
}

/// Whether a plugin's spawned processes run in the kernel sandbox.
#[derive(Serialize, Deserialize, ToSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ProcessSandboxIn {
    /// Sandboxed (the default).
    On,
    /// Not sandboxed.
    Off,
}

impl From<ProcessSandboxIn> for turnstone_runtime::capability::ProcessSandbox {
    fn from(p: ProcessSandboxIn) -> Self {
        match p {
            ProcessSandboxIn::On => Self::On,
            ProcessSandboxIn::Off => Self::Off,
        }
    }
}

impl From<turnstone_runtime::capability::ProcessSandbox> for ProcessSandboxIn {
    fn from(p: turnstone_runtime::capability::ProcessSandbox) -> Self {
        match p {
            turnstone_runtime::capability::ProcessSandbox::On => Self::On,
            turnstone_runtime::capability::ProcessSandbox::Off => Self::Off,
        }
    }
}

impl From<&Capabilities> for CapabilitySet {
    fn from(c: &Capabilities) -> Self {
        // Destructured so a new capability cannot be left out of the API.
        let Capabilities {
            filesystem,
            http,
            exec,
            env,
            secrets,
            model,
            memory,
            history,
            skills,
            session,
            agents,
            watches,
            notify,
            preview,
            process_sandbox,
        } = c;
        Self {
            filesystem: filesystem
                .iter()
                .map(|f| FsEntry {
                    path: f.path.clone(),
                    access: f.access.into(),
                })
                .collect(),
            http: http.clone(),
            exec: exec.clone(),
            env: env.clone(),
            secrets: secrets.iter().cloned().map(SecretOut).collect(),
            model: *model,
            memory: memory.map(FsAccess::from),
            history: *history,
            skills: skills.map(FsAccess::from),
            session: *session,
            agents: *agents,
            watches: *watches,
            notify: *notify,
            preview: *preview,
            process_sandbox: process_sandbox.map(Into::into),
        }
    }
}

/// Access mode of a filesystem capability in a request.
#[derive(Deserialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FsAccessIn {
    /// Read only.
    ReadOnly,
    /// Read and write.
    ReadWrite,
    /// Read only (short form).
    Ro,
    /// Read and write (short form).
    Rw,
}

impl From<FsAccessIn> for Access {
    fn from(a: FsAccessIn) -> Self {
        match a {
            FsAccessIn::ReadOnly | FsAccessIn::Ro => Access::ReadOnly,
            FsAccessIn::ReadWrite | FsAccessIn::Rw => Access::ReadWrite,
        }
    }
}

/// A filesystem capability to grant.
#[derive(Deserialize, ToSchema)]
pub(crate) struct GrantFs {
    /// `workspace`, `workspace/<dir>` or an absolute path, without `..`.
    #[schema(
        pattern = "^(workspace(/([^/.][^/]*|\\.[^/.][^/]*|\\.\\.[^/]+|\\.)?)*|\
                   (/([^/.][^/]*|\\.[^/.][^/]*|\\.\\.[^/]+|\\.)?)+)$"
    )]
    path: String,
    /// Access mode.
    access: FsAccessIn,
}

/// The capabilities of a grant; each list may be left out (empty).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrantCapabilities {
    /// Filesystem paths.
    #[serde(default)]
    filesystem: Vec<GrantFs>,
    /// Outbound HTTP hosts: `<public>` (any public host, screened), or
    /// `host`, `host:port`, `*.domain`, `[v6]` or `[v6]:port` (an
    /// `http(s)://` prefix, trailing `/` and surrounding whitespace are
    /// dropped).
    #[serde(default)]
    #[schema(pattern = "^(<public>|\
                   [\\t\\n\\r ]*([Hh][Tt][Tt][Pp][Ss]?://)?\
                   ((\\*\\.)?[A-Za-z0-9.-]+|\\[[0-9A-Fa-f:.]+\\])\
                   (:\\+?0*([0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|\
                   655[0-2][0-9]|6553[0-5]))?\
                   /*[\\t\\n\\r ]*)$")]
    http: Vec<String>,
    /// Programs the plugin may spawn (by name).
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9_./-]{1,256}$")]
    exec: Vec<String>,
    /// Environment variable names the plugin may set on children.
    #[serde(default)]
    #[schema(pattern = "^[A-Za-z0-9_./-]{1,256}$")]
    env: Vec<String>,
    /// Host-held secrets the plugin may reference: a name, or
    /// `{name, hosts, header}` binding it to hosts and header names.
    #[serde(default)]
    #[schema(inline)]
    secrets: Vec<SecretIn>,
    /// May ask the calling session's model for a completion.
    #[serde(default)]
    model: bool,
    /// The caller's memories: `read-only` or `read-write`.
    #[serde(default)]
    memory: Option<FsAccessIn>,
    /// May search the caller's own past conversations.
    #[serde(default)]
    history: bool,
    /// The skills catalogue: `read-only` or `read-write`.
    #[serde(default)]
    skills: Option<FsAccessIn>,
    /// May learn the calling session's identity.
    #[serde(default)]
    session: bool,
    /// May run sub-agents.
    #[serde(default)]
    agents: bool,
    /// May create, list and cancel the caller's watches.
    #[serde(default)]
    watches: bool,
    /// May read and deliver to the caller's notification targets.
    #[serde(default)]
    notify: bool,
    /// May open content in the caller's preview pane.
    #[serde(default)]
    preview: bool,
    /// `off` runs the plugin's spawned processes without the kernel sandbox
    /// (Landlock, seccomp, network namespace); default `on`.
    #[serde(default)]
    process_sandbox: Option<ProcessSandboxIn>,
}

impl From<GrantCapabilities> for Capabilities {
    fn from(g: GrantCapabilities) -> Self {
        let GrantCapabilities {
            filesystem,
            http,
            exec,
            env,
            secrets,
            model,
            memory,
            history,
            skills,
            session,
            agents,
            watches,
            notify,
            preview,
            process_sandbox,
        } = g;
        let filesystem = filesystem
            .into_iter()
            .map(|f| FsGrant {
                path: f.path,
                access: f.access.into(),
            })
            .collect();
        Capabilities {
            filesystem,
            http,
            exec,
            env,
            secrets: secrets.into_iter().map(|s| s.0).collect(),
            model,
            memory: memory.map(Access::from),
            history,
            skills: skills.map(Access::from),
            session,
            agents,
            watches,
            notify,
            preview,
            process_sandbox: process_sandbox.map(Into::into),
        }
    }
}

/// A filesystem capability to revoke (matched by path).
#[derive(Deserialize, ToSchema)]
pub(crate) struct RevokeFs {
    /// The granted path.
    path: String,
    /// Access mode (required, not compared).
    access: FsAccessIn,
}

/// Capabilities to remove from a grant; entries that are not granted are
/// ignored, and each list may be left out (empty).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RevokeCapabilities {
    /// Filesystem paths.
    #[serde(default)]
    filesystem: Vec<RevokeFs>,
    /// Outbound HTTP hosts.
    #[serde(default)]
    http: Vec<String>,
    /// Programs.
    #[serde(default)]
    exec: Vec<String>,
    /// Environment variable names.
    #[serde(default)]
    env: Vec<String>,
    /// Secret names (a secret is revoked by name, whatever it is bound to).
    #[serde(default)]
    secrets: Vec<String>,
    /// Take back model access.
    #[serde(default)]
    model: bool,
    /// Take back memory access.
    #[serde(default)]
    memory: bool,
    /// Take back history search.
    #[serde(default)]
    history: bool,
    /// Take back skills access.
    #[serde(default)]
    skills: bool,
    /// Take back the session identity.
    #[serde(default)]
    session: bool,
    /// Take back sub-agents.
    #[serde(default)]
    agents: bool,
    /// Take back watches.
    #[serde(default)]
    watches: bool,
    /// Take back notification targets.
    #[serde(default)]
    notify: bool,
    /// Take back the preview pane.
    #[serde(default)]
    preview: bool,
}

impl From<RevokeCapabilities> for Capabilities {
    fn from(r: RevokeCapabilities) -> Self {
        let RevokeCapabilities {
            filesystem,
            http,
            exec,
            env,
            secrets,
            model,
            memory,
            history,
            skills,
            session,
            agents,
            watches,
            notify,
            preview,
        } = r;
        let filesystem = filesystem
            .into_iter()
            .map(|f| FsGrant {
                path: f.path,
                access: f.access.into(),
            })
            .collect();
        // What to take back, in grant form ([`crate::plugins::subtract`]
        // removes any level of memory and skills).
        Capabilities {
            filesystem,
            http,
            exec,
            env,
            secrets: secrets.into_iter().map(SecretGrant::named).collect(),
            model,
            memory: memory.then_some(Access::ReadWrite),
            history,
            skills: skills.then_some(Access::ReadWrite),
            session,
            agents,
            watches,
            notify,
            preview,
            process_sandbox: None,
        }
    }
}

/// `{"<key>": <what>}` (with `"<flag>"` absent or `false`), or
/// `{"<flag>": true}` (with `"<key>"` absent or `null`).
fn either(key: &str, what: &str, flag: &str, docs: [&str; 3]) -> RefOr<Schema> {
    let boolean = |v: bool| {
        ObjectBuilder::new()
            .schema_type(Type::Boolean)
            .enum_values(Some([v]))
    };
    let set = ObjectBuilder::new()
        .description(Some(docs[0]))
        .property(key, Ref::from_schema_name(what))
        .required(key)
        .property(flag, boolean(false));
    let reset = ObjectBuilder::new()
        .description(Some(docs[1]))
        .property(key, ObjectBuilder::new().schema_type(Type::Null))
        .property(flag, boolean(true))
        .required(flag);
    OneOfBuilder::new()
        .description(Some(docs[2]))
        .item(set)
        .item(reset)
        .into()
}

/// `PUT …/grants`: the whole grant, or `{"default": true}` to go back to the
/// default for the plugin's origin.
#[derive(Deserialize)]
pub(crate) struct GrantBody {
    /// The new grant.
    pub(crate) grant: Option<GrantCapabilities>,
    /// Drop the operator grant (built-ins get their request, others nothing).
    #[serde(default)]
    pub(crate) default: bool,
}

impl utoipa::PartialSchema for GrantBody {
    fn schema() -> RefOr<Schema> {
        either(
            "grant",
            "GrantCapabilities",
            "default",
            [
                "Replace the grant",
                "Back to the default for the plugin's origin (built-ins get their request, \
                 others nothing)",
                "Either `{\"grant\": {...}}` or `{\"default\": true}`",
            ],
        )
    }
}

impl ToSchema for GrantBody {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        use utoipa::PartialSchema;
        schemas.push((
            GrantCapabilities::name().into(),
            GrantCapabilities::schema(),
        ));
        <GrantCapabilities as ToSchema>::schemas(schemas);
    }
}

/// `POST …/revoke`: capabilities to remove, or `{"all": true}` (also an
/// empty body or `null`) to remove every one.
#[derive(Deserialize)]
pub(crate) struct RevokeBody {
    /// What to remove.
    pub(crate) revoke: Option<RevokeCapabilities>,
    /// Remove everything.
    #[serde(default)]
    pub(crate) all: bool,
}

impl RevokeBody {
    /// Everything.
    pub(crate) fn all() -> Self {
        Self {
            revoke: None,
            all: true,
        }
    }
}

impl utoipa::PartialSchema for RevokeBody {
    fn schema() -> RefOr<Schema> {
        either(
            "revoke",
            "RevokeCapabilities",
            "all",
            [
                "Remove the listed capabilities",
                "Remove every capability",
                "Either `{\"revoke\": {...}}` or `{\"all\": true}` (an empty body means all)",
            ],
        )
    }
}

impl ToSchema for RevokeBody {
    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        use utoipa::PartialSchema;
        schemas.push((
            RevokeCapabilities::name().into(),
            RevokeCapabilities::schema(),
        ));
        <RevokeCapabilities as ToSchema>::schemas(schemas);
    }
}

/// `PUT …/config`: the plugin's config overlay (string values).
#[derive(Deserialize, ToSchema)]
pub(crate) struct ConfigBody {
    /// Key → value; replaces the stored overlay (`{}` clears it).
    pub(crate) config: BTreeMap<String, String>,
}

/// The multipart body of an install.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)] // for the schema: any other part is refused
#[allow(dead_code)] // documentation only: the handler reads the parts
pub(crate) struct InstallForm {
    /// `plugin.toml` (UTF-8 TOML).
    manifest: String,
    /// The component (`.wasm`), at most 64 MiB.
    #[schema(value_type = String, format = Binary)]
    component: Vec<u8>,
    /// `plugin.sig` (`turnstone plugins sign`), when signed.
    signature: Option<String>,
}

/// Where a plugin is on this node.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum PluginState {
    /// Loaded and callable.
    Loaded,
    /// A newer version failed to load; the loaded one keeps serving.
    UpdateFailed,
    /// Disabled by the operator.
    Disabled,
    /// Failed to load, or (an MCP server) not connected; `last_error` says why.
    Failed,
    /// An MCP server with a live connection.
    Connected,
    /// An MCP server starting or reconnecting.
    Connecting,
    /// An MCP server whose circuit breaker is open after repeated failures.
    OpenCircuit,
}

impl PluginState {
    /// The state of `entry` and its error, if any.
    fn of(entry: &PluginEntry) -> (Self, Option<String>) {
        match (&entry.status, &entry.update_error) {
            (PluginStatus::Loaded(_), Some(e)) => (Self::UpdateFailed, Some(e.clone())),
            (PluginStatus::Loaded(_), None) => (Self::Loaded, None),
            (PluginStatus::Disabled, _) => (Self::Disabled, None),
            (PluginStatus::Failed(e), _) => (Self::Failed, Some(e.clone())),
        }
    }
}

/// Where the grant in force comes from.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum GrantSource {
    /// Set through the API or the CLI (stored in the database).
    Operator,
    /// `config.toml`.
    Config,
    /// A built-in's own request.
    BuiltinDefault,
    /// Nothing granted (a third-party plugin's default).
    #[serde(rename = "none")]
    Nothing,
    /// An MCP server from `config.toml` with no grant entry: its own command
    /// (or host) and working directory, which the operator wrote.
    OwnRequest,
}

impl GrantSource {
    fn of(entry: &PluginEntry, row: Option<&PluginRecord>) -> Self {
        if row.and_then(|r| r.granted.as_ref()).is_some() {
            Self::Operator
        } else if entry.grant.is_some() {
            Self::Config
        } else if entry.builtin {
            Self::BuiltinDefault
        } else {
            Self::Nothing
        }
    }
}

/// Calls since the node started (kept across reloads).
#[derive(Serialize, ToSchema)]
pub(crate) struct PluginCounts {
    /// Calls.
    pub(super) calls: u64,
    /// Calls that failed.
    pub(super) failures: u64,
    /// Capability denials.
    pub(super) denials: u64,
}

impl PluginCounts {
    fn of(shared: &Shared, name: &str) -> Self {
        let c = shared.counters(name);
        Self {
            calls: c.calls(),
            failures: c.failures(),
            denials: c.denials(),
        }
    }
}

/// The plugin's row in the `plugins` table (what every node follows).
#[derive(Serialize, ToSchema)]
pub(crate) struct PluginStoredState {
    /// Operator toggle.
    enabled: bool,
    /// Last state a node recorded: `loaded`, `failed`, `update_failed`,
    /// `disabled` or `unknown`.
    state: String,
    /// Last load or update error.
    #[schema(required = true)]
    last_error: Option<String>,
    /// Last change.
    updated: String,
    /// Bumped to ask every node to reload the plugin from disk.
    reload_seq: i64,
}

impl From<&PluginRecord> for PluginStoredState {
    fn from(r: &PluginRecord) -> Self {
        Self {
            enabled: r.enabled,
            state: r.state.clone(),
            last_error: r.last_error.clone(),
            updated: r.updated.clone(),
            reload_seq: r.reload_seq,
        }
    }
}

/// One plugin as the admin API shows it: state on this node, version, kind,
/// WIT version, tools, requested vs granted capabilities (and where the grant
/// comes from), counters and the last error.
#[derive(Serialize, ToSchema)]
pub(crate) struct PluginView {
    /// Plugin name (the directory name when the manifest does not parse).
    pub(super) name: String,
    /// Version serving (else the one on disk; `null` without a manifest).
    #[schema(required = true)]
    pub(super) version: Option<String>,
    /// Version on disk (`null` without a readable manifest).
    #[schema(required = true)]
    pub(super) disk_version: Option<String>,
    /// `tool`, `provider`, `channel` or `mcp` (`null` without a manifest).
    #[schema(required = true)]
    pub(super) kind: Option<&'static str>,
    /// `turnstone:plugin` WIT version it targets.
    #[schema(required = true)]
    pub(super) wit: Option<String>,
    /// One-line description.
    #[schema(required = true)]
    pub(super) description: Option<String>,
    /// Shipped with the host.
    pub(super) builtin: bool,
    /// Plugin directory.
    pub(super) dir: String,
    /// State on this node.
    pub(super) state: PluginState,
    /// Not disabled by the operator.
    pub(super) enabled: bool,
    /// Load or update error (for `failed` and `update_failed`).
    #[schema(required = true)]
    pub(super) last_error: Option<String>,
    /// Tools it provides (while loaded).
    pub(super) tools: Vec<String>,
    /// What the manifest requests (`null` without a manifest).
    #[schema(required = true)]
    pub(super) requested: Option<CapabilitySet>,
    /// The grant in force.
    pub(super) granted: CapabilitySet,
    /// Where the grant comes from.
    pub(super) grant_source: GrantSource,
    /// The config the loaded plugin reads (`null` when not loaded).
    #[schema(required = true)]
    pub(super) config: Option<BTreeMap<String, String>>,
    /// Granted entries that could not be applied (e.g. a missing directory).
    pub(super) skipped_grants: Vec<String>,
    /// sha256 of the loaded component (`null` when not loaded).
    #[schema(required = true)]
    pub(super) wasm_sha256: Option<String>,
    /// Call counters.
    pub(super) counters: PluginCounts,
    /// The plugin's database row (`null`: nobody changed it yet).
    #[schema(required = true)]
    pub(super) stored: Option<PluginStoredState>,
    /// MCP servers only: transport, target, origin, resources, prompts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) mcp: Option<super::mcp_types::McpDetail>,
    /// Channel adapters only: the platform link's state on this node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) channel: Option<crate::channels::AdapterStatus>,
}

impl PluginView {
    /// The view of `entry`, with its database row.
    pub(crate) fn new(entry: &PluginEntry, row: Option<&PluginRecord>, shared: &Shared) -> Self {
        let name = entry.name();
        let (state, last_error) = PluginState::of(entry);
        let loaded = match &entry.status {
            PluginStatus::Loaded(p) => Some(&**p),
            _ => None,
        };
        let manifest = entry.manifest.as_ref();
        let info = manifest.map(|m| &m.plugin);
        Self {
            version: loaded
                .map(|p| p.manifest.plugin.version.clone())
                .or_else(|| info.map(|i| i.version.clone())),
            disk_version: info.map(|i| i.version.clone()),
            kind: info.map(|i| i.kind.as_str()),
            wit: info.map(|i| i.wit.clone()),
            description: info.map(|i| i.description.clone()),
            builtin: entry.builtin,
            dir: entry.dir.display().to_string(),
            state,
            enabled: !matches!(entry.status, PluginStatus::Disabled),
            last_error,
            tools: loaded
                .map(|p| p.tools.iter().map(|t| t.name.clone()).collect())
                .unwrap_or_default(),
            requested: manifest.map(|m| CapabilitySet::from(&m.capabilities)),
            granted: CapabilitySet::from(&entry.effective_grant()),
            grant_source: GrantSource::of(entry, row),
            config: loaded.map(|p| p.ctx.config.clone()),
            skipped_grants: loaded.map(|p| p.skipped_grants.clone()).unwrap_or_default(),
            wasm_sha256: loaded.map(|p| p.wasm_sha256.clone()),
            counters: PluginCounts::of(shared, &name),
            stored: row.map(PluginStoredState::from),
            mcp: None,
            channel: None,
            name,
        }
    }
}

/// The plugins on this node.
#[derive(Serialize, ToSchema)]
pub(crate) struct PluginList {
    /// Every plugin found, loaded or not.
    pub(crate) plugins: Vec<PluginView>,
    /// Registry generation (bumped by every reload that changed something).
    pub(crate) generation: u64,
}

/// One change of a reload pass.
#[derive(Serialize, ToSchema)]
pub(crate) struct PluginChange {
    /// Plugin name.
    plugin: String,
    /// What happened, e.g. `Loaded`, `Rebound`, `Disabled`, `Removed`,
    /// `Restored`, `Updated { from: "1.0.0" }`, `Failed("…")`.
    change: String,
}

/// The outcome of a reload pass on this node.
#[derive(Serialize, ToSchema)]
pub(crate) struct ReloadReport {
    /// Registry generation after the pass.
    generation: u64,
    /// How long the pass took.
    elapsed_ms: f64,
    /// Changes, in load order (empty: nothing to do).
    changes: Vec<PluginChange>,
}

impl From<&Report> for ReloadReport {
    fn from(r: &Report) -> Self {
        Self {
            generation: r.generation,
            elapsed_ms: r.elapsed.as_secs_f64() * 1000.0,
            changes: r
                .changes
                .iter()
                .map(|c| PluginChange {
                    plugin: c.plugin.clone(),
                    change: format!("{:?}", c.kind),
                })
                .collect(),
        }
    }
}

/// The answer to reloading one plugin.
#[derive(Serialize, ToSchema)]
pub(crate) struct ReloadedPlugin {
    /// What changed on this node.
    pub(crate) report: ReloadReport,
    /// The plugin after the reload.
    pub(crate) plugin: PluginView,
}

/// The answer to reloading every plugin.
#[derive(Serialize, ToSchema)]
pub(crate) struct ReloadedAll {
    /// What changed on this node.
    pub(crate) report: ReloadReport,
}

/// The answer to an uninstall.
#[derive(Serialize, ToSchema)]
pub(crate) struct Uninstalled {
    /// Always `ok`.
    pub(crate) status: &'static str,
    /// The plugin removed.
    pub(crate) removed: String,
}

/// One plugin change from the audit log.
#[derive(Serialize, ToSchema)]
pub(crate) struct PluginAuditEntry {
    /// Row id.
    id: i64,
    /// When.
    timestamp: String,
    /// Acting user (`null` for the offline CLI).
    #[schema(required = true)]
    user_id: Option<String>,
    /// What, e.g. `plugin.enable`, `plugin.grant`, `plugin.install`.
    action: String,
    /// The plugin (`*` for a reload of everything).
    #[schema(required = true)]
    target: Option<String>,
    /// Details as recorded (`{"via": "api" | "cli", "detail": ...}`; `null`
    /// when missing or not JSON).
    #[schema(required = true)]
    detail: Option<serde_json::Value>,
    /// Client address.
    #[schema(required = true)]
    ip: Option<String>,
}

impl From<AuditEntry> for PluginAuditEntry {
    fn from(e: AuditEntry) -> Self {
        Self {
            id: e.id,
            timestamp: e.timestamp,
            user_id: e.user_id,
            action: e.action,
            target: e.target,
            detail: e
                .detail
                .as_deref()
                .and_then(|d| serde_json::from_str(d).ok()),
            ip: e.ip,
        }
    }
}

/// Plugin changes, newest first.
#[derive(Serialize, ToSchema)]
pub(crate) struct PluginAudit {
    /// The entries.
    pub(crate) entries: Vec<PluginAuditEntry>,
}
