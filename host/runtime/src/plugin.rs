//! A loaded plugin: manifest, compiled component, pre-instantiated linker, its
//! described tools and its effective capabilities.

use crate::Runtime;
use crate::bindings::v0_1_0::{channel, provider, tool};
use crate::cache::CompileSource;
use crate::capability::{Capabilities, EffectiveCapabilities};
use crate::error::LoadError;
use crate::host::kv::KvStore;
use crate::manifest::{Manifest, PluginKind, SUPPORTED_WIT_VERSIONS, valid_name};
use crate::state::HostState;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

/// Resolves secret names to values. Values never cross into a guest.
pub trait SecretSource: Send + Sync {
    /// The secret's value, if the host has it.
    fn secret(&self, name: &str) -> Option<String>;
}

/// Reads secrets from the host process environment (`NAME` → `$NAME`).
pub struct EnvSecrets;

impl SecretSource for EnvSecrets {
    fn secret(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

/// Receives a provider's streamed events.
pub trait ProviderEventSink: Send + Sync {
    /// One event; return false to stop the stream.
    fn event(&self, event: provider::turnstone::plugin::provider_types::StreamEvent) -> bool;
}

/// Receives a channel's inbound events.
pub trait ChannelEventSink: Send + Sync {
    /// One event; return false to stop the channel.
    fn event(&self, event: channel::turnstone::plugin::channel_types::InboundEvent) -> bool;
}

/// Per-call resource limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory cap per call.
    pub memory_bytes: usize,
    /// Wall-clock and CPU deadline per call.
    pub call_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 256 << 20,
            call_timeout: Duration::from_secs(120),
        }
    }
}

/// Counters shown in plugin listings and metrics.
#[derive(Debug, Default)]
pub struct PluginCounters {
    calls: AtomicU64,
    failures: AtomicU64,
    denials: AtomicU64,
    memory_peak: AtomicU64,
}

impl PluginCounters {
    pub(crate) fn call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn denial(&self) {
        self.denials.fetch_add(1, Ordering::Relaxed);
    }
    /// Calls started.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
    /// Calls that trapped, timed out or overran memory.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
    /// Capability denials.
    pub fn denials(&self) -> u64 {
        self.denials.load(Ordering::Relaxed)
    }
    pub(crate) fn memory_reached(&self, bytes: usize) {
        self.memory_peak
            .fetch_max(u64::try_from(bytes).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
    /// The largest linear memory one call reached: what the plugin needs of
    /// its `memory_bytes` limit, and what an instance in flight can hold.
    pub fn memory_peak_bytes(&self) -> u64 {
        self.memory_peak.load(Ordering::Relaxed)
    }
}

/// What the host knows about a plugin while it runs: identity, capabilities,
/// operator config, secrets, key-value namespace, limits and counters.
pub struct PluginContext {
    /// Plugin name.
    pub name: String,
    /// Effective capabilities.
    pub caps: EffectiveCapabilities,
    /// Operator config for the plugin.
    pub config: BTreeMap<String, String>,
    pub(crate) secrets: Arc<dyn SecretSource>,
    pub(crate) kv: Arc<dyn KvStore>,
    /// Per-call limits.
    pub limits: Limits,
    /// Call/failure/denial counters.
    pub counters: Arc<PluginCounters>,
    /// SSRF policy for `<public>` HTTP grants.
    pub network: crate::netguard::NetworkPolicy,
    /// Processes started with `spawn-background`, killed when the plugin goes.
    pub(crate) background: crate::host::background::BackgroundProcesses,
    /// The kernel sandbox its spawned processes run in.
    pub(crate) sandbox: Arc<crate::sandboxing::Sandbox>,
    /// Kept-alive connections of its HTTP requests.
    pub http_pool: Arc<crate::host::pool::ConnectionPool>,
    /// TLS settings of its WebSocket connections (no ALPN; the pool has its
    /// own copy offering HTTP/2).
    pub(crate) tls: Arc<rustls::ClientConfig>,
}

/// Where a plugin comes from.
#[derive(Debug, Clone)]
pub struct PluginSource {
    /// Directory holding `plugin.toml` and the component.
    pub dir: PathBuf,
    /// Shipped with the host: gets its requested capabilities unless the
    /// operator configures a grant. Third-party plugins get nothing by default.
    pub builtin: bool,
}

/// Operator settings applied when loading a plugin.
#[derive(Clone)]
pub struct PluginSettings {
    /// Explicit grant; `None` means the default for the plugin's origin.
    pub grant: Option<Capabilities>,
    /// Plugin config values.
    pub config: BTreeMap<String, String>,
    /// Limits per call.
    pub limits: Limits,
    /// Workspace directory that `workspace` grants resolve to.
    pub workspace: Option<PathBuf>,
    /// Secret values.
    pub secrets: Arc<dyn SecretSource>,
    /// Key-value backend for this plugin.
    pub kv: Arc<dyn KvStore>,
    /// SSRF policy applied to `<public>` HTTP grants.
    pub network: crate::netguard::NetworkPolicy,
    /// Counters, shared across versions so a reload does not reset them.
    pub counters: Arc<PluginCounters>,
    /// The kernel sandbox for processes it spawns (host-wide; default:
    /// [`crate::sandboxing::host_sandbox`]).
    pub sandbox: Arc<crate::sandboxing::Sandbox>,
}

impl Default for PluginSettings {
    fn default() -> Self {
        Self {
            grant: None,
            config: BTreeMap::new(),
            limits: Limits::default(),
            workspace: None,
            secrets: Arc::new(EnvSecrets),
            kv: Arc::new(crate::host::kv::MemoryKv::default()),
            network: Default::default(),
            counters: Arc::new(PluginCounters::default()),
            sandbox: crate::sandboxing::host_sandbox(),
        }
    }
}

/// A tool as described by its component.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolSpec {
    /// Tool name.
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: serde_json::Value,
    /// Available to task sub-agents.
    pub task_agent: bool,
    /// Runs without approval.
    pub auto_approve: bool,
    /// Parameter a bare-string argument maps to.
    pub primary_key: Option<String>,
    /// Available to coordinator sessions.
    pub coordinator: bool,
    /// With `coordinator`, also interactive.
    pub interactive: bool,
    /// Per-kind overlays.
    pub kind_variants: Option<serde_json::Value>,
    /// Working-directory note template.
    pub cwd_note: Option<String>,
    /// Workspace note template.
    pub workspace_note: Option<String>,
    /// What a model request offers of this tool, made once.
    #[serde(skip)]
    offered: OfferedText,
}

/// A tool's name, description and schema (as JSON text) as model requests
/// offer them, made on first use and shared by every request: each request
/// offers every tool, and serialising the schemas again for each one was
/// 1.5 % of the server's CPU in a burst of turns, while owning a copy of the
/// text in each request cost about 19 kB per model call in flight. A spec is
/// never changed once loaded (the registry holds it behind an `Arc`).
#[derive(Clone, Default)]
struct OfferedText(std::sync::OnceLock<crate::provider_types::ToolDefinition>);

impl PartialEq for OfferedText {
    /// Derived from the spec's fields, which its equality compares.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for OfferedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OfferedText")
    }
}

impl ToolSpec {
    /// The argument schema as JSON text (`parameters` serialised once; a
    /// spec's `parameters` must not change after this was first called).
    pub fn parameters_text(&self) -> &str {
        &self.offered().parameters
    }

    /// The tool as a model request offers it (not deferred), its text shared
    /// with every other request (made once; a spec's name, description and
    /// `parameters` must not change after this was first called).
    pub fn definition(&self) -> crate::provider_types::ToolDefinition {
        self.offered().clone()
    }

    fn offered(&self) -> &crate::provider_types::ToolDefinition {
        let offered = self
            .offered
            .0
            .get_or_init(|| crate::provider_types::ToolDefinition {
                name: self.name.as_str().into(),
                description: self.description.as_str().into(),
                parameters: self.parameters.to_string().into(),
                defer_loading: false,
            });
        debug_assert_eq!(
            (&*offered.name, &*offered.description, &*offered.parameters),
            (
                self.name.as_str(),
                self.description.as_str(),
                self.parameters.to_string().as_str()
            ),
            "tool {}: changed after its text was made",
            self.name
        );
        offered
    }

    /// Normalises raw model arguments: a JSON object passes through unchanged
    /// (byte-exact) unless a value needs converting to the type the tool's
    /// schema declares (`"near_line": "3"` → `3`, see [`crate::coerce`]); a
    /// bare string (JSON string or not JSON at all) maps to the tool's
    /// `primary_key`. Anything else is a clear error.
    pub fn coerce_arguments(&self, raw: &str) -> Result<String, String> {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Ok("{}".into());
        }
        match serde_json::from_str::<serde_json::Value>(trimmed) {
            Ok(serde_json::Value::Object(members)) => {
                Ok(crate::coerce::coerce_text(raw, members, &self.parameters))
            }
            Ok(serde_json::Value::String(s)) => self.wrap_primary(s),
            Ok(other) => Err(format!(
                "arguments for {} must be a JSON object, got {}",
                self.name,
                match other {
                    serde_json::Value::Array(_) => "an array",
                    serde_json::Value::Number(_) => "a number",
                    serde_json::Value::Bool(_) => "a boolean",
                    _ => "null",
                }
            )),
            Err(_) => self.wrap_primary(raw.to_string()),
        }
    }

    fn wrap_primary(&self, value: String) -> Result<String, String> {
        match &self.primary_key {
            Some(pk) => Ok(serde_json::json!({ pk.as_str(): value }).to_string()),
            None => Err(format!(
                "arguments for {} are not a JSON object and the tool has no primary key",
                self.name
            )),
        }
    }
}

#[derive(Clone)]
pub(crate) enum InstancePre {
    /// Tools of 0.1.0 and 0.2.0 (both export `tool@0.1.0`).
    Tool(tool::ToolPluginPre<HostState>),
    /// A provider exporting `provider@0.1.0` (adapted by [`crate::adapt`]).
    ProviderV1(provider::ProviderPluginPre<HostState>),
    /// A provider exporting `provider@0.2.0`.
    Provider(crate::bindings::v0_2_0::provider::ProviderPluginPre<HostState>),
    /// A channel exporting `channel@0.1.0` (no built-in ships one).
    Channel(channel::ChannelPluginPre<HostState>),
    /// A channel exporting `channel@0.2.0`.
    ChannelV2(crate::bindings::v0_2_0::channel::ChannelPluginPre<HostState>),
    /// A guard exporting `guard@0.2.0`.
    Guard(crate::bindings::v0_2_0::guard::GuardPluginPre<HostState>),
}

impl InstancePre {
    /// The component every instance is made from.
    fn component(&self) -> &Component {
        match self {
            InstancePre::Tool(p) => p.instance_pre().component(),
            InstancePre::ProviderV1(p) => p.instance_pre().component(),
            InstancePre::Provider(p) => p.instance_pre().component(),
            InstancePre::Channel(p) => p.instance_pre().component(),
            InstancePre::ChannelV2(p) => p.instance_pre().component(),
            InstancePre::Guard(p) => p.instance_pre().component(),
        }
    }
}

/// A plugin ready to be called. Cheap to share; every call gets a fresh store.
pub struct LoadedPlugin {
    pub(crate) engine: Engine,
    /// Held while a call runs, so the epoch ticker runs only then.
    pub(crate) epoch: std::sync::Arc<crate::engine::EpochGate>,
    /// Admission to the engine's instance slots, shared by every plugin.
    pub(crate) slots: std::sync::Arc<crate::admission::InstanceSlots>,
    pub(crate) pre: InstancePre,
    /// The manifest.
    pub manifest: Manifest,
    /// Where it was loaded from.
    pub source: PluginSource,
    /// Runtime context (capabilities, limits, counters).
    pub ctx: Arc<PluginContext>,
    /// Cache hit or fresh compile.
    pub compile_source: CompileSource,
    /// sha256 of the component bytes.
    pub wasm_sha256: String,
    /// Tools it provides (tool plugins only).
    pub tools: Vec<ToolSpec>,
    /// Capability entries that could not be applied (e.g. missing workspace).
    pub skipped_grants: Vec<String>,
}

impl LoadedPlugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.plugin.name
    }

    /// The tool called `name`, if this plugin provides it.
    pub fn tool(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Where this plugin's compiled code image lies in memory: a `.cwasm`
    /// mapped privately from the component cache or a built-in's directory,
    /// or memory holding what was compiled at load. It stays mapped while
    /// this plugin is held, and wasmtime made it read-only before the plugin
    /// was loaded: nothing writes to it again.
    pub fn code_image(&self) -> std::ops::Range<usize> {
        let r = self.pre.component().image_range();
        r.start as usize..r.end as usize
    }
}

/// The `turnstone:plugin` world a component implements.
#[derive(Debug, Clone, PartialEq, Eq)]
struct WorldUse {
    kind: PluginKind,
    /// Version of the exported world interface (`tool@0.1.0` → 0.1.0).
    export: semver::Version,
    /// Highest version among every `turnstone:plugin` import and export:
    /// the oldest host version that can load it.
    needs: semver::Version,
}

/// Finds which `turnstone:plugin` world a component implements and which
/// versions it uses. Any version this host does not know fails the load.
fn detect_world(engine: &Engine, component: &Component) -> Result<WorldUse, LoadError> {
    let ty = component.component_type();
    let mut found = Vec::new();
    let mut needs = semver::Version::new(0, 1, 0);
    let names = ty
        .imports(engine)
        .map(|(n, i)| (n, i.ty, false))
        .chain(ty.exports(engine).map(|(n, e)| (n, e.ty, true)));
    for (name, item, export) in names {
        if !matches!(item, ComponentItem::ComponentInstance(_)) {
            continue;
        }
        let Some(rest) = name.strip_prefix("turnstone:plugin/") else {
            continue;
        };
        let (iface, raw) = rest.split_once('@').unwrap_or((rest, ""));
        let version = semver::Version::parse(raw)
            .ok()
            .filter(|_| SUPPORTED_WIT_VERSIONS.contains(&raw))
            .ok_or_else(|| LoadError::UnsupportedWit {
                found: name.to_string(),
            })?;
        needs = needs.max(version.clone());
        if !export {
            continue;
        }
        let kind = match iface {
            "tool" => PluginKind::Tool,
            "provider" => PluginKind::Provider,
            "channel" => PluginKind::Channel,
            "guard" => PluginKind::Guard,
            _ => continue,
        };
        found.push((kind, version));
    }
    match found.as_slice() {
        [] => Err(LoadError::NotAPlugin),
        [(kind, export)] => Ok(WorldUse {
            kind: *kind,
            export: export.clone(),
            needs,
        }),
        _ => Err(LoadError::Invalid(
            "component exports more than one plugin world; ship one per component".into(),
        )),
    }
}

fn convert_spec(
    s: tool::exports::turnstone::plugin::tool::ToolSpec,
) -> Result<ToolSpec, LoadError> {
    if !valid_name(&s.name) {
        return Err(LoadError::Invalid(format!(
            "tool name {:?} must be 1-64 characters of [A-Za-z0-9_-]",
            s.name
        )));
    }
    let parameters: serde_json::Value = serde_json::from_str(&s.parameters).map_err(|e| {
        LoadError::Invalid(format!("tool {}: parameters are not JSON: {e}", s.name))
    })?;
    if parameters.get("type").and_then(|t| t.as_str()) != Some("object") {
        return Err(LoadError::Invalid(format!(
            "tool {}: parameters must be a JSON Schema with \"type\": \"object\"",
            s.name
        )));
    }
    let kind_variants = match s.kind_variants {
        Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
            LoadError::Invalid(format!("tool {}: kind_variants is not JSON: {e}", s.name))
        })?),
        None => None,
    };
    if let Some(pk) = &s.primary_key
        && parameters.pointer(&format!("/properties/{pk}")).is_none()
    {
        return Err(LoadError::Invalid(format!(
            "tool {}: primary_key {pk:?} is not one of its parameters",
            s.name
        )));
    }
    Ok(ToolSpec {
        name: s.name,
        description: s.description,
        parameters,
        task_agent: s.task_agent,
        auto_approve: s.auto_approve,
        primary_key: s.primary_key,
        coordinator: s.coordinator,
        interactive: s.interactive,
        kind_variants,
        cwd_note: s.cwd_note,
        workspace_note: s.workspace_note,
        offered: OfferedText::default(),
    })
}

/// The runtime context a plugin gets from the operator's settings.
fn context_for(
    manifest: &Manifest,
    source: &PluginSource,
    settings: PluginSettings,
) -> (Arc<PluginContext>, Vec<String>) {
    let grant = settings.grant.clone().unwrap_or_else(|| {
        if source.builtin {
            manifest.capabilities.clone()
        } else {
            Capabilities::default()
        }
    });
    let (caps, skipped_grants) = EffectiveCapabilities::new(
        &manifest.plugin.name,
        &manifest.capabilities,
        &grant,
        settings.workspace.as_deref(),
    );
    for s in &skipped_grants {
        tracing::warn!(plugin = %manifest.plugin.name, "capability not applied: {s}");
    }
    let tls = crate::host::egress::tls_config(&settings.network.extra_roots);
    let ctx = Arc::new(PluginContext {
        http_pool: Arc::new(crate::host::pool::ConnectionPool::new(&tls)),
        tls: Arc::new(tls),
        name: manifest.plugin.name.clone(),
        caps,
        config: settings.config,
        secrets: settings.secrets,
        kv: settings.kv,
        limits: settings.limits,
        background: Default::default(),
        network: settings.network,
        counters: settings.counters,
        sandbox: settings.sandbox,
    });
    (ctx, skipped_grants)
}

impl LoadedPlugin {
    /// The same compiled component with new operator settings (grant, config,
    /// limits): no compile and no `describe`, because neither depends on them.
    /// Calls already running keep the old context.
    pub fn rebind(&self, settings: PluginSettings) -> Result<LoadedPlugin, LoadError> {
        if let Some(g) = &settings.grant {
            g.validate().map_err(|e| {
                LoadError::Invalid(format!("grant for {}: {e}", self.manifest.plugin.name))
            })?;
        }
        let (ctx, skipped_grants) = context_for(&self.manifest, &self.source, settings);
        Ok(LoadedPlugin {
            engine: self.engine.clone(),
            epoch: self.epoch.clone(),
            slots: self.slots.clone(),
            pre: self.pre.clone(),
            manifest: self.manifest.clone(),
            source: self.source.clone(),
            ctx,
            compile_source: self.compile_source,
            wasm_sha256: self.wasm_sha256.clone(),
            tools: self.tools.clone(),
            skipped_grants,
        })
    }
}

impl Runtime {
    /// Loads the plugin in `source.dir`: manifest, component (cache or compile),
    /// world detection, linking, and (for tools) `describe`.
    pub async fn load(
        &self,
        source: PluginSource,
        settings: PluginSettings,
    ) -> Result<LoadedPlugin, LoadError> {
        let manifest = Manifest::load(&source.dir.join("plugin.toml"))?;
        let wasm_path = source.dir.join(manifest.component_file());
        let wasm = tokio::fs::read(&wasm_path)
            .await
            .map_err(|e| LoadError::Io(format!("{}: {e}", wasm_path.display())))?;
        self.load_bytes(source, manifest, wasm, settings).await
    }

    /// Compiles the built-in component in `dir` and writes the result beside
    /// it, so a start with an empty cache loads it without compiling.
    /// Returns the written file.
    pub async fn precompile_builtin(&self, dir: &Path) -> Result<PathBuf, LoadError> {
        let manifest = Manifest::load(&dir.join("plugin.toml"))
            .map_err(|e| LoadError::Invalid(e.to_string()))?;
        let wasm_path = dir.join(manifest.component_file());
        let wasm = tokio::fs::read(&wasm_path)
            .await
            .map_err(|e| LoadError::Io(format!("{}: {e}", wasm_path.display())))?;
        let (engine, cache, dir) = (self.engine().clone(), self.cache().clone(), dir.to_owned());
        tokio::task::spawn_blocking(move || cache.precompile_into(&engine, &wasm, &dir))
            .await
            .map_err(|e| LoadError::Invalid(format!("compile task failed: {e}")))?
            .map_err(|e| LoadError::Compile(format!("{e:#}")))
    }

    /// Like [`Runtime::load`] with the manifest and component bytes in hand.
    pub async fn load_bytes(
        &self,
        source: PluginSource,
        manifest: Manifest,
        wasm: Vec<u8>,
        settings: PluginSettings,
    ) -> Result<LoadedPlugin, LoadError> {
        if !wasm.starts_with(b"\0asm") {
            return Err(LoadError::Invalid(
                "not a WebAssembly file (bad magic bytes)".into(),
            ));
        }
        let wasm_sha256 = hex::encode(Sha256::digest(&wasm));
        // What `describe` sees besides the bytes: a cached answer is used
        // only for the same settings, so one that depends on config (or an
        // instance that no longer starts under new limits) is asked again.
        let described_key = format!(
            "{wasm_sha256}-{}",
            &hex::encode(Sha256::digest(
                format!(
                    "{}|{:?}|{:?}|{:?}|{:?}",
                    source.builtin,
                    settings.grant,
                    settings.config,
                    settings.limits,
                    settings.workspace
                )
                .as_bytes()
            ))[..16]
        );
        let engine = self.engine().clone();
        let cache = self.cache().clone();
        // Only a built-in's directory may hold a precompiled entry (see cache.rs).
        let shipped = source.builtin.then(|| source.dir.clone());
        let digest = described_key.clone();
        // A tool component's cached `describe` output is read on the same
        // blocking thread (none for other kinds: the lookup finds nothing).
        let (loaded, described) = tokio::task::spawn_blocking(move || {
            let loaded = cache.load_shipped(&engine, &wasm, shipped.as_deref());
            let described = loaded.is_ok().then(|| cache.load_described(&digest));
            (loaded, described.flatten())
        })
        .await
        .map_err(|e| LoadError::Invalid(format!("compile task failed: {e}")))?;
        let (component, compile_source) =
            loaded.map_err(|e| LoadError::Compile(format!("{e:#}")))?;

        let world = detect_world(self.engine(), &component)?;
        let kind = world.kind;
        if kind != manifest.plugin.kind {
            return Err(LoadError::Invalid(format!(
                "plugin.toml says kind = \"{}\" but the component implements the {} world",
                manifest.plugin.kind.as_str(),
                kind.as_str()
            )));
        }
        // The manifest names the version it was built for; the component may
        // use less of it (a 0.2.0 tool that imports only 0.1.0 interfaces).
        let declared = semver::Version::parse(&manifest.plugin.wit)
            .ok()
            .filter(|_| SUPPORTED_WIT_VERSIONS.contains(&manifest.plugin.wit.as_str()))
            .ok_or_else(|| LoadError::UnsupportedWit {
                found: format!(
                    "plugin.toml wit = \"{}\" (turnstone:plugin@{})",
                    manifest.plugin.wit, manifest.plugin.wit
                ),
            })?;
        if world.needs > declared {
            return Err(LoadError::Invalid(format!(
                "plugin.toml says wit = \"{}\" but the component uses turnstone:plugin@{} interfaces",
                manifest.plugin.wit, world.needs
            )));
        }

        let link_err = |e: wasmtime::Error| LoadError::Link(format!("{e:#}"));
        let pre = match kind {
            PluginKind::Tool => InstancePre::Tool(
                tool::ToolPluginPre::new(
                    self.linker(kind)
                        .instantiate_pre(&component)
                        .map_err(link_err)?,
                )
                .map_err(link_err)?,
            ),
            PluginKind::Provider if world.export == semver::Version::new(0, 1, 0) => {
                InstancePre::ProviderV1(
                    provider::ProviderPluginPre::new(
                        self.linker(kind)
                            .instantiate_pre(&component)
                            .map_err(link_err)?,
                    )
                    .map_err(link_err)?,
                )
            }
            PluginKind::Provider => InstancePre::Provider(
                crate::bindings::v0_2_0::provider::ProviderPluginPre::new(
                    self.linker(kind)
                        .instantiate_pre(&component)
                        .map_err(link_err)?,
                )
                .map_err(link_err)?,
            ),
            PluginKind::Channel if world.export >= semver::Version::new(0, 2, 0) => {
                InstancePre::ChannelV2(
                    crate::bindings::v0_2_0::channel::ChannelPluginPre::new(
                        self.linker(kind)
                            .instantiate_pre(&component)
                            .map_err(link_err)?,
                    )
                    .map_err(link_err)?,
                )
            }
            PluginKind::Channel => InstancePre::Channel(
                channel::ChannelPluginPre::new(
                    self.linker(kind)
                        .instantiate_pre(&component)
                        .map_err(link_err)?,
                )
                .map_err(link_err)?,
            ),
            PluginKind::Guard => InstancePre::Guard(
                crate::bindings::v0_2_0::guard::GuardPluginPre::new(
                    self.linker(kind)
                        .instantiate_pre(&component)
                        .map_err(link_err)?,
                )
                .map_err(link_err)?,
            ),
        };

        // Operator grants must be concrete; a built-in's default grant is its own
        // (already validated) request.
        if let Some(g) = &settings.grant {
            g.validate().map_err(|e| {
                LoadError::Invalid(format!("grant for {}: {e}", manifest.plugin.name))
            })?;
        }
        let (ctx, skipped_grants) = context_for(&manifest, &source, settings);
        let mut plugin = LoadedPlugin {
            engine: self.engine().clone(),
            epoch: self.epoch_gate(),
            slots: self.instance_slots(),
            pre,
            manifest,
            source,
            ctx,
            compile_source,
            wasm_sha256,
            tools: Vec::new(),
            skipped_grants,
        };
        if kind == PluginKind::Tool {
            // The tools a component describes depend on its bytes and
            // settings (`rebind` assumes not even on those), so a start with
            // a warm cache skips running
            // every tool component just to ask: the instance, its memory and
            // the code pages it would touch stay out of an idle host.
            let raw = match described {
                Some(raw) => raw,
                None => {
                    let raw = plugin
                        .describe()
                        .await
                        .map_err(|e| LoadError::Describe(e.to_string()))?;
                    let (cache, digest, specs) =
                        (self.cache().clone(), described_key.clone(), raw.clone());
                    let _ =
                        tokio::task::spawn_blocking(move || cache.store_described(&digest, &specs))
                            .await;
                    raw
                }
            };
            let mut tools = Vec::with_capacity(raw.len());
            for spec in raw {
                let spec = convert_spec(spec)?;
                if tools.iter().any(|t: &ToolSpec| t.name == spec.name) {
                    return Err(LoadError::Invalid(format!(
                        "tool {} is described twice",
                        spec.name
                    )));
                }
                tools.push(spec);
            }
            if tools.is_empty() {
                return Err(LoadError::Invalid(
                    "the component describes no tools".into(),
                ));
            }
            plugin.tools = tools;
        }
        Ok(plugin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(pk: Option<&str>) -> ToolSpec {
        ToolSpec {
            name: "t".into(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
            task_agent: false,
            auto_approve: false,
            primary_key: pk.map(str::to_string),
            coordinator: false,
            interactive: false,
            kind_variants: None,
            cwd_note: None,
            workspace_note: None,
            offered: OfferedText::default(),
        }
    }

    #[test]
    fn the_offered_text_is_made_once_and_shared_by_every_request() {
        let mut s = spec(None);
        s.description = "Reads a file.".into();
        s.parameters =
            serde_json::json!({"type": "object", "properties": {"path": {"type": "string"}}});
        let first = s.parameters_text();
        let back: serde_json::Value = serde_json::from_str(first).unwrap();
        assert_eq!(back, s.parameters);
        // The second call hands out the same text, not a new serialisation.
        assert!(std::ptr::eq(first, s.parameters_text()));
        // Two requests' definitions point at one copy of each text.
        let (a, b) = (s.definition(), s.definition());
        assert_eq!(
            (&*a.name, &*a.description, &*a.parameters, a.defer_loading),
            ("t", "Reads a file.", first, false)
        );
        assert!(Arc::ptr_eq(&a.name, &b.name));
        assert!(Arc::ptr_eq(&a.description, &b.description));
        assert!(Arc::ptr_eq(&a.parameters, &b.parameters));
        // Whether the text was made yet does not change what a spec equals.
        let fresh = spec(None);
        let used = spec(None);
        used.definition();
        assert_eq!(fresh, used);
    }

    #[test]
    fn arguments_are_coerced_through_the_primary_key() {
        let s = spec(Some("command"));
        assert_eq!(
            s.coerce_arguments(r#"{"command": "ls"}"#).unwrap(),
            r#"{"command": "ls"}"#
        );
        assert_eq!(
            s.coerce_arguments("ls -la").unwrap(),
            r#"{"command":"ls -la"}"#
        );
        assert_eq!(
            s.coerce_arguments(r#""ls""#).unwrap(),
            r#"{"command":"ls"}"#
        );
        assert_eq!(s.coerce_arguments("").unwrap(), "{}");
        assert!(s.coerce_arguments("[1]").unwrap_err().contains("an array"));
        assert!(
            spec(None)
                .coerce_arguments("ls")
                .unwrap_err()
                .contains("no primary key")
        );
    }
}
