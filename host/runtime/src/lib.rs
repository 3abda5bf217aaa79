//! Turnstone's WebAssembly plugin runtime.
//!
//! One wasmtime [`Engine`] serves every plugin. Each plugin is a WASI component
//! implementing one `turnstone:plugin` world (tool, provider, channel or guard), shipped
//! with a `plugin.toml` manifest that requests capabilities. The operator grants
//! capabilities; the effective set (request ∩ grant) is enforced at the host
//! boundary: WASI preopens only for granted directories, `wasi:http` only to
//! granted hosts, processes only for granted programs, secrets only by reference.
//!
//! Every call runs in a fresh store with a memory cap and a deadline, so a
//! misbehaving call fails alone.

pub mod adapt;
pub mod admission;
pub mod audit;
pub mod bindings;
pub mod cache;
pub mod call;
pub mod capability;
pub mod channel;
pub mod coerce;
pub mod config;
pub mod decommit;
pub mod engine;
pub mod error;
pub mod guard;
pub mod host;
pub mod live;
pub mod manifest;
pub mod netguard;
pub mod plugin;
pub mod provider_error;
pub mod provider_types;
pub mod reconcile;
pub mod registry;
pub mod sandboxing;
pub mod signing;
pub mod state;

pub use cache::CompileSource;
pub use call::{CallContext, Preview, ToolResult};
pub use capability::{Access, Capabilities, EffectiveCapabilities, FsGrant, SecretGrant};
pub use error::{CallError, LoadError, RuntimeError, tool_error_text};
pub use host::agent::SessionHost;
pub use live::{LivePlugins, PluginSet};
pub use manifest::{GuardReview, GuardTier, Manifest, PluginKind};
pub use plugin::{Limits, LoadedPlugin, PluginSettings, PluginSource, SecretSource, ToolSpec};
pub use reconcile::{Desired, Override, Reconciler};
pub use registry::{PluginEntry, PluginRegistry, PluginStatus};
pub use state::{ModelAccess, ToolOutputSink};

use crate::bindings::v0_1_0::{channel as channel_v1, provider, tool};
use crate::cache::ComponentCache;
use crate::engine::{EngineOptions, EpochTicker};
use crate::manifest::PluginKind as Kind;
use crate::state::HostState;
use std::path::PathBuf;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

/// Runtime construction options.
#[derive(Debug, Clone, Default)]
pub struct RuntimeOptions {
    /// Engine limits.
    pub engine: EngineOptions,
    /// Directory for precompiled components; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Leave files out of the capability audit (the linker keeps
    /// wasmtime-wasi's filesystem functions unwrapped). Only for measuring
    /// what the record costs; hosts keep the default.
    pub without_file_audit: bool,
}

/// The plugin runtime: engine, epoch ticker, component cache and one linker per
/// world.
pub struct Runtime {
    engine: Engine,
    cache: ComponentCache,
    tool_linker: Linker<HostState>,
    provider_linker: Linker<HostState>,
    channel_linker: Linker<HostState>,
    guard_linker: Linker<HostState>,
    ticker: EpochTicker,
    slots: std::sync::Arc<admission::InstanceSlots>,
}

fn base_linker(engine: &Engine, file_audit: bool) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    // Guests built with std import WASI p2 whether or not their world names it;
    // what they can reach is decided by the per-call WasiCtx.
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    // Files a call opens, creates or removes go into its capability audit.
    if file_audit {
        crate::host::fs_audit::add_to_linker(&mut linker)?;
    }
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    Ok(linker)
}

/// The host interfaces new in WIT 0.2.0 (`session-info`, `memory`,
/// `history`, `skills`), which every 0.2.0 world imports.
fn add_agent_interfaces(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    use crate::bindings::v0_2_0::host::turnstone::plugin0_2_0 as v2;
    v2::session_info::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v2::memory::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v2::history::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v2::skills::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v2::agents::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v2::watches::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v2::notify_targets::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v2::preview::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    Ok(())
}

impl Runtime {
    /// Builds the engine, starts the epoch ticker and prepares the linkers.
    pub fn new(opts: RuntimeOptions) -> Result<Self, RuntimeError> {
        let setup = |e: wasmtime::Error| RuntimeError::Engine(format!("{e:#}"));
        let engine = engine::build_engine(&opts.engine).map_err(setup)?;
        let mut tool_linker = base_linker(&engine, !opts.without_file_audit).map_err(setup)?;
        tool::ToolPlugin::add_to_linker::<_, HasSelf<_>>(&mut tool_linker, |s| s).map_err(setup)?;
        add_agent_interfaces(&mut tool_linker).map_err(setup)?;
        let mut provider_linker = base_linker(&engine, !opts.without_file_audit).map_err(setup)?;
        provider::ProviderPlugin::add_to_linker::<_, HasSelf<_>>(&mut provider_linker, |s| s)
            .map_err(setup)?;
        // 0.2.0 providers: what 0.2.0 adds to the 0.1.0 provider world (its
        // unchanged interfaces are the 0.1.0 ones just linked).
        crate::bindings::v0_2_0::provider::turnstone::plugin0_2_0::provider_types::add_to_linker::<
            _,
            HasSelf<_>,
        >(&mut provider_linker, |s| s)
        .map_err(setup)?;
        add_agent_interfaces(&mut provider_linker).map_err(setup)?;
        let mut channel_linker = base_linker(&engine, !opts.without_file_audit).map_err(setup)?;
        channel_v1::ChannelPlugin::add_to_linker::<_, HasSelf<_>>(&mut channel_linker, |s| s)
            .map_err(setup)?;
        // 0.2.0 channels: the WebSocket client, the channel host and the
        // agent interfaces, beside 0.1.0's channel imports.
        {
            use crate::bindings::v0_2_0::channel::turnstone::plugin0_2_0 as c2;
            c2::websocket::add_to_linker::<_, HasSelf<_>>(&mut channel_linker, |s| s)
                .map_err(setup)?;
            c2::channel_types::add_to_linker::<_, HasSelf<_>>(&mut channel_linker, |s| s)
                .map_err(setup)?;
            c2::channel_host::add_to_linker::<_, HasSelf<_>>(&mut channel_linker, |s| s)
                .map_err(setup)?;
        }
        add_agent_interfaces(&mut channel_linker).map_err(setup)?;
        // Guards: the 0.1.0 host API and `model` (an LLM judge asks the
        // judge model), plus 0.2.0's agent interfaces.
        let mut guard_linker = base_linker(&engine, !opts.without_file_audit).map_err(setup)?;
        crate::bindings::v0_1_0::host::HostApi::add_to_linker::<_, HasSelf<_>>(
            &mut guard_linker,
            |s| s,
        )
        .map_err(setup)?;
        crate::bindings::v0_1_0::tool::turnstone::plugin::model::add_to_linker::<_, HasSelf<_>>(
            &mut guard_linker,
            |s| s,
        )
        .map_err(setup)?;
        add_agent_interfaces(&mut guard_linker).map_err(setup)?;
        let cache = ComponentCache::new(&engine, opts.cache_dir)?;
        let ticker = EpochTicker::start(&engine)?;
        let slots = std::sync::Arc::new(admission::InstanceSlots::new(
            opts.engine.max_instances,
            opts.engine.admission_wait,
        ));
        Ok(Self {
            engine,
            cache,
            tool_linker,
            provider_linker,
            channel_linker,
            guard_linker,
            ticker,
            slots,
        })
    }

    /// The shared engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The gate guest calls hold while they run (the epoch ticks only then).
    pub fn epoch_gate(&self) -> std::sync::Arc<engine::EpochGate> {
        self.ticker.gate()
    }

    /// Admission to the instance slots every call takes one of.
    pub fn instance_slots(&self) -> std::sync::Arc<admission::InstanceSlots> {
        self.slots.clone()
    }

    /// The component cache.
    pub fn cache(&self) -> &ComponentCache {
        &self.cache
    }

    pub(crate) fn linker(&self, kind: Kind) -> &Linker<HostState> {
        match kind {
            Kind::Tool => &self.tool_linker,
            Kind::Provider => &self.provider_linker,
            Kind::Channel => &self.channel_linker,
            Kind::Guard => &self.guard_linker,
        }
    }
}
