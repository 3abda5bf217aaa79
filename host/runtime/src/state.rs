//! Per-call store data: the WASI context built from the plugin's effective
//! capabilities, resource table, memory limiter and the call's output sinks.

use crate::capability::Access;
use crate::host::egress::EgressHooks;
use crate::plugin::PluginContext;
use std::sync::Arc;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

/// Bytes of guest stderr kept for error reports (panic messages).
const STDERR_CAPTURE: usize = 1 << 20;

/// Receives a tool's streamed output chunks, and carries what else the calling
/// session lends the call.
pub trait ToolOutputSink: Send + Sync {
    /// One chunk; return false to ask the tool to stop.
    fn chunk(&self, text: &str) -> bool;

    /// The session's model, for the `model` interface (none by default).
    fn model(&self) -> Option<Arc<dyn ModelAccess>> {
        None
    }

    /// The calling session, for the agent interfaces of WIT 0.2.0 (none by
    /// default: a direct call has no session).
    fn session(&self) -> Option<Arc<dyn crate::host::agent::SessionHost>> {
        None
    }
}

/// A language model a tool call may ask (the calling session's binding).
pub trait ModelAccess: Send + Sync {
    /// One completion without tools.
    fn complete(
        &self,
        system: String,
        prompt: String,
        max_tokens: u32,
    ) -> futures::future::BoxFuture<'static, Result<String, String>>;
}

/// A sink that drops everything (for `describe`/`prepare`).
pub struct NullSink;

impl ToolOutputSink for NullSink {
    fn chunk(&self, _text: &str) -> bool {
        true
    }
}

/// Caps linear memory per store and remembers when the cap was hit, so a guest
/// abort after a failed `memory.grow` is reported as a memory overrun.
#[derive(Debug)]
pub struct MemoryLimiter {
    max_bytes: usize,
    /// Set when a growth beyond the cap was refused.
    pub exceeded: bool,
    /// The largest size a linear memory reached (wasm memory never shrinks,
    /// so this is the call's high-water mark), counting the growth under
    /// way until wasmtime reports it failed.
    pub peak_bytes: usize,
    /// The peak before the growth under way.
    confirmed_bytes: usize,
    /// Where the plugin's high-water mark is kept: each growth publishes
    /// the peak the growths before it reached, so a long-running call (a
    /// channel adapter's) shows in it before the call ends.
    counters: Option<Arc<crate::plugin::PluginCounters>>,
}

impl MemoryLimiter {
    /// A limiter allowing `max_bytes` of linear memory per memory.
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            exceeded: false,
            peak_bytes: 0,
            confirmed_bytes: 0,
            counters: None,
        }
    }

    /// The same, publishing its high-water mark to `counters`.
    pub(crate) fn counted(max_bytes: usize, counters: Arc<crate::plugin::PluginCounters>) -> Self {
        Self {
            counters: Some(counters),
            ..Self::new(max_bytes)
        }
    }

    /// Publishes the peak to the plugin's counters (at the end of a call).
    pub(crate) fn publish(&self) {
        if let Some(c) = &self.counters {
            c.memory_reached(self.peak_bytes);
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.exceeded = true;
            return Ok(false);
        }
        // Every earlier growth has succeeded or been reported failed by now.
        if let Some(c) = &self.counters {
            c.memory_reached(self.peak_bytes);
        }
        self.confirmed_bytes = self.peak_bytes;
        self.peak_bytes = self.peak_bytes.max(desired);
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        // Allowed here, refused by wasmtime (the memory's own maximum, the
        // pool's slot size, the system): not reached.
        tracing::debug!("plugin memory growth failed: {error:#}");
        self.peak_bytes = self.confirmed_bytes;
        Ok(())
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// The `T` of every plugin `Store<T>`.
pub struct HostState {
    pub(crate) plugin: Arc<PluginContext>,
    wasi: WasiCtx,
    table: ResourceTable,
    http: WasiHttpCtx,
    hooks: EgressHooks,
    pub(crate) limiter: MemoryLimiter,
    pub(crate) stderr: MemoryOutputPipe,
    pub(crate) tool_sink: Arc<dyn ToolOutputSink>,
    pub(crate) provider_sink: Option<Arc<dyn crate::plugin::ProviderEventSink>>,
    pub(crate) channel_sink: Option<Arc<dyn crate::plugin::ChannelEventSink>>,
    /// A running channel adapter's link to the host (0.2.0 channels).
    pub(crate) channel_run: Option<crate::channel::RunState>,
    /// Set by the host when the call is being cancelled.
    pub(crate) cancelled: Arc<std::sync::atomic::AtomicBool>,
    /// The calling session, for tool calls (owns background processes).
    pub(crate) session_id: Option<String>,
    /// The tool call being executed (sub-agents and previews belong to it).
    pub(crate) call_id: Option<String>,
    /// What this call touched at the sandbox boundary.
    pub(crate) audit: crate::audit::AuditRecorder,
}

impl HostState {
    /// Builds the store data for one call of `plugin`.
    pub(crate) fn new(
        plugin: Arc<PluginContext>,
        tool_sink: Arc<dyn ToolOutputSink>,
        cancelled: Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<Self, std::io::Error> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPTURE);
        let mut builder = WasiCtx::builder();
        builder
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .allow_blocking_current_thread(false);
        for dir in plugin.caps.dirs() {
            let perms = match dir.access {
                Access::ReadOnly => FsPerms::ReadOnly,
                Access::ReadWrite => FsPerms::ReadWrite,
            };
            // Same path inside and outside, so tools see the paths users type.
            let guest = dir.path.to_string_lossy().into_owned();
            builder
                .preopened_dir(&dir.path, &guest, perms)
                .map_err(std::io::Error::other)?;
        }
        let limiter = MemoryLimiter::counted(plugin.limits.memory_bytes, plugin.counters.clone());
        let audit = crate::audit::AuditRecorder::default();
        Ok(Self {
            hooks: EgressHooks::new(plugin.clone(), audit.clone()),
            audit,
            plugin,
            wasi: builder.build(),
            table: ResourceTable::new(),
            http: WasiHttpCtx::new(),
            limiter,
            stderr,
            tool_sink,
            provider_sink: None,
            channel_sink: None,
            channel_run: None,
            cancelled,
            session_id: None,
            call_id: None,
        })
    }

    /// Secret values for this call only (e.g. the model alias's API key).
    pub(crate) fn set_call_secrets(&mut self, secrets: Arc<dyn crate::plugin::SecretSource>) {
        self.hooks.call_secrets = Some(secrets);
    }

    /// Records this call's capability audit into `audit` (kept by the
    /// caller, so it survives a trap or a deadline).
    pub(crate) fn set_audit(&mut self, audit: crate::audit::AuditRecorder) {
        self.hooks.set_audit(audit.clone());
        self.audit = audit;
    }

    /// Why this call's HTTP requests were denied (see [`EgressHooks`]).
    pub(crate) fn take_egress_denials(&mut self) -> Vec<String> {
        self.hooks.take_denials()
    }

    /// Whether the host has a value for `name` in this call (without revealing it).
    pub(crate) fn secret_available(&self, name: &str) -> bool {
        self.hooks
            .call_secrets
            .as_ref()
            .and_then(|s| s.secret(name))
            .or_else(|| self.plugin.secrets.secret(name))
            .is_some()
    }

    /// This call's secret values, if any (consulted before the plugin's own).
    pub(crate) fn call_secrets(&self) -> Option<Arc<dyn crate::plugin::SecretSource>> {
        self.hooks.call_secrets.clone()
    }

    pub(crate) fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// Guest stderr captured so far (lossy UTF-8, last 2 KiB).
    pub(crate) fn stderr_tail(&self) -> String {
        let bytes = self.stderr.contents();
        let start = bytes.len().saturating_sub(2048);
        String::from_utf8_lossy(&bytes[start..]).trim().to_string()
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            hooks: &mut self.hooks,
            table: &mut self.table,
            ctx: &mut self.http,
        }
    }
}
