//! Calling into plugins: one fresh store per call with a memory cap and a
//! deadline; traps, deadlines and memory overruns become a [`CallError`] for
//! that call only.

use crate::adapt;
use crate::bindings::v0_1_0::tool::exports::turnstone::plugin::tool as wtool;
use crate::error::CallError;
use crate::plugin::{InstancePre, LoadedPlugin, ProviderEventSink};
use crate::provider_types as ptypes;
use crate::state::{HostState, NullSink, ToolOutputSink};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use wasmtime::component::{ComponentType, Lift};
use wasmtime::{Store, Trap, UpdateDeadline};

pub use wtool::{CallContext, Preview, ToolResult};

/// Extra wall time over the deadline before the host gives up on a call that
/// is parked in a host import (the epoch only interrupts running guest code).
const WALL_GRACE: Duration = Duration::from_millis(500);

impl LoadedPlugin {
    pub(crate) fn new_store(
        &self,
        sink: Arc<dyn ToolOutputSink>,
        cancelled: Arc<AtomicBool>,
    ) -> Result<Store<HostState>, CallError> {
        let state =
            HostState::new(self.ctx.clone(), sink, cancelled).map_err(|e| CallError::Host {
                plugin: self.name().to_string(),
                message: format!("cannot prepare sandbox: {e}"),
            })?;
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.limiter);
        let deadline = Instant::now() + self.ctx.limits.call_timeout;
        store.set_epoch_deadline(1);
        // Yield to the executor every tick (so cancellation and other tasks are
        // never starved by a busy guest) and trap once the deadline has passed.
        store.epoch_deadline_callback(move |_| {
            if Instant::now() >= deadline {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        Ok(store)
    }

    pub(crate) fn classify(&self, err: wasmtime::Error, store: &Store<HostState>) -> CallError {
        let plugin = self.name().to_string();
        if store.data().limiter.exceeded {
            return CallError::MemoryExceeded {
                plugin,
                limit_bytes: self.ctx.limits.memory_bytes,
            };
        }
        if matches!(err.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
            return CallError::Deadline {
                plugin,
                limit: self.ctx.limits.call_timeout,
            };
        }
        let stderr = store.data().stderr_tail();
        let mut message = format!("{err:#}");
        if !stderr.is_empty() {
            message.push_str("; guest stderr: ");
            message.push_str(&stderr);
        }
        CallError::Trap { plugin, message }
    }

    /// Runs `op` in a fresh store under the plugin's limits, honouring `cancel`.
    pub(crate) async fn run<R>(
        &self,
        sink: Arc<dyn ToolOutputSink>,
        cancel: Option<&CancellationToken>,
        op: impl AsyncFnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.ctx.counters.call();
        let never = CancellationToken::new();
        let cancel = cancel.unwrap_or(&never);
        // Wait in line for an instance slot (cancellable), then run.
        let _slot = tokio::select! {
            s = self.slots.admit() => s.map_err(|waited| self.at_capacity(waited)),
            () = cancel.cancelled() => Err(CallError::Cancelled {
                plugin: self.name().to_string(),
            }),
        }
        .inspect_err(|e| {
            if matches!(e, CallError::AtCapacity { .. }) {
                self.ctx.counters.failure();
                tracing::warn!(plugin = %self.name(), "{e}");
            }
        })?;
        // The epoch ticks (deadlines, yields) only while some call holds this.
        let _active = self.epoch.enter();
        let cancelled = Arc::new(AtomicBool::new(false));
        let mut store = self.new_store(sink, cancelled.clone())?;
        let limit = self.ctx.limits.call_timeout + WALL_GRACE;
        let outcome = tokio::select! {
            r = crate::admission::InstanceSlots::in_call(tokio::time::timeout(limit, op(&mut store))) => Some(r),
            () = cancel.cancelled() => None,
        };
        store.data().limiter.publish();
        // Dropping the store below kills child processes and frees the instance.
        let result = match outcome {
            None => {
                cancelled.store(true, Ordering::Relaxed);
                Err(CallError::Cancelled {
                    plugin: self.name().to_string(),
                })
            }
            Some(Err(_elapsed)) => Err(CallError::Deadline {
                plugin: self.name().to_string(),
                limit: self.ctx.limits.call_timeout,
            }),
            Some(Ok(Ok(v))) => Ok(v),
            Some(Ok(Err(e))) => Err(self.classify(e, &store)),
        };
        if let Err(e) = &result
            && !matches!(e, CallError::Cancelled { .. })
        {
            self.ctx.counters.failure();
            tracing::warn!(plugin = %self.name(), "{e}");
        }
        result
    }

    /// Admission to the engine's instance slots (shared by every plugin).
    pub fn instance_slots(&self) -> &Arc<crate::admission::InstanceSlots> {
        &self.slots
    }

    pub(crate) fn at_capacity(&self, waited: Duration) -> CallError {
        CallError::AtCapacity {
            plugin: self.name().to_string(),
            capacity: self.slots.capacity(),
            waited,
        }
    }

    fn tool_pre(
        &self,
    ) -> Result<&crate::bindings::v0_1_0::tool::ToolPluginPre<HostState>, CallError> {
        match &self.pre {
            InstancePre::Tool(p) => Ok(p),
            _ => Err(self.wrong_kind("tool")),
        }
    }

    pub(crate) fn wrong_kind(&self, expected: &'static str) -> CallError {
        CallError::WrongKind {
            plugin: self.name().to_string(),
            expected,
            actual: self.manifest.plugin.kind.as_str(),
        }
    }

    /// Calls the component's `describe` export.
    pub(crate) async fn describe(&self) -> Result<Vec<wtool::ToolSpec>, CallError> {
        let pre = self.tool_pre()?;
        self.run(Arc::new(NullSink), None, async |store| {
            let inst = pre.instantiate_async(&mut *store).await?;
            inst.turnstone_plugin_tool()
                .call_describe(&mut *store)
                .await
        })
        .await
    }

    /// Validates a call and builds its approval preview. `Ok(Err(msg))` is the
    /// tool's own refusal, to be shown to the model.
    pub async fn prepare(
        &self,
        tool: &str,
        arguments: &str,
        ctx: &CallContext,
    ) -> Result<Result<Preview, String>, CallError> {
        self.prepare_in(tool, arguments, ctx, Arc::new(NullSink))
            .await
    }

    /// [`LoadedPlugin::prepare`] with what `sink` lends the call (the
    /// calling session for the agent interfaces, its model); a preview's
    /// output chunks go to `sink` too.
    pub async fn prepare_in(
        &self,
        tool: &str,
        arguments: &str,
        ctx: &CallContext,
        sink: Arc<dyn ToolOutputSink>,
    ) -> Result<Result<Preview, String>, CallError> {
        let pre = self.tool_pre()?;
        self.run(sink, None, async |store| {
            let inst = pre.instantiate_async(&mut *store).await?;
            inst.turnstone_plugin_tool()
                .call_prepare(&mut *store, tool, arguments, ctx)
                .await
        })
        .await
    }

    /// Executes a tool call, streaming chunks to `sink`.
    pub async fn execute(
        &self,
        tool: &str,
        arguments: &str,
        ctx: &CallContext,
        sink: Arc<dyn ToolOutputSink>,
        cancel: Option<&CancellationToken>,
    ) -> Result<ToolResult, CallError> {
        self.execute_audited(tool, arguments, ctx, sink, cancel)
            .await
            .0
    }

    /// [`LoadedPlugin::execute`], with the call's capability audit: what it
    /// opened, contacted, started and was refused, as the host saw it —
    /// also when the call failed (a trap, a deadline, a cancel).
    pub async fn execute_audited(
        &self,
        tool: &str,
        arguments: &str,
        ctx: &CallContext,
        sink: Arc<dyn ToolOutputSink>,
        cancel: Option<&CancellationToken>,
    ) -> (Result<ToolResult, CallError>, crate::audit::Touched) {
        let audit = crate::audit::AuditRecorder::default();
        let pre = match self.tool_pre() {
            Ok(p) => p,
            Err(e) => return (Err(e), audit.snapshot()),
        };
        let recorder = audit.clone();
        let result = self
            .run(sink, cancel, async move |store| {
                store.data_mut().set_audit(recorder);
                store.data_mut().session_id = Some(ctx.session_id.clone());
                store.data_mut().call_id = Some(ctx.call_id.clone());
                let inst = pre.instantiate_async(&mut *store).await?;
                let mut result = inst
                    .turnstone_plugin_tool()
                    .call_execute(&mut *store, tool, arguments, ctx)
                    .await?;
                if result.is_error {
                    // The guest saw only "denied"; the model and the user get the
                    // host's reason and the grant that would allow it.
                    for reason in store.data_mut().take_egress_denials() {
                        if !result.output.contains(&reason) {
                            result.output.push_str("\n[host] ");
                            result.output.push_str(&reason);
                        }
                    }
                }
                Ok(result)
            })
            .await;
        (result, audit.snapshot())
    }

    /// Runs `program args…` to completion as this plugin would (its `exec`,
    /// `env` and filesystem grants decide; the child gets its own process
    /// group and a scrubbed environment), within `timeout`, keeping at most
    /// `max_bytes` of output. Watches poll their command this way, with the
    /// grants of the plugin that created them. The error says what was
    /// denied and which grant allows it.
    pub async fn run_command(
        &self,
        program: &str,
        args: &[String],
        cwd: Option<&str>,
        timeout: std::time::Duration,
        max_bytes: usize,
        cancel: Option<&CancellationToken>,
    ) -> Result<crate::host::process::CommandOutput, String> {
        use crate::bindings::v0_1_0::host::turnstone::plugin::process::{Command, ProcessError};
        let cmd = Command {
            program: program.to_string(),
            args: args.to_vec(),
            env: Vec::new(),
            cwd: cwd.map(str::to_string),
            stdin: None,
        };
        crate::host::process::run_for(&self.ctx, cmd, timeout, max_bytes, cancel)
            .await
            .map_err(|e| match e {
                ProcessError::Denied(d) => {
                    format!("{} denied: {}; {}", d.capability, d.detail, d.grant_hint)
                }
                ProcessError::SpawnFailed(m) => m,
            })
    }

    /// Asks a provider plugin for a model's capabilities.
    pub async fn provider_capabilities(
        &self,
        model: &str,
    ) -> Result<ptypes::ModelCapabilities, CallError> {
        match &self.pre {
            InstancePre::Provider(pre) => {
                self.run(Arc::new(NullSink), None, async |store| {
                    let inst = pre.instantiate_async(&mut *store).await?;
                    inst.turnstone_plugin0_2_0_provider()
                        .call_capabilities(&mut *store, model)
                        .await
                })
                .await
            }
            InstancePre::ProviderV1(pre) => self
                .run(Arc::new(NullSink), None, async |store| {
                    let inst = pre.instantiate_async(&mut *store).await?;
                    inst.turnstone_plugin_provider()
                        .call_capabilities(&mut *store, model)
                        .await
                })
                .await
                .map(adapt::capabilities_from_v1),
            _ => Err(self.wrong_kind("provider")),
        }
    }

    /// The JSON body a provider plugin would send for `request`.
    pub async fn provider_build_request(
        &self,
        request: &ptypes::CompletionRequest,
    ) -> Result<Result<String, ptypes::ProviderError>, CallError> {
        match &self.pre {
            InstancePre::Provider(pre) => {
                self.run(Arc::new(NullSink), None, async |store| {
                    call_with_request(pre, store, "build-request", request).await
                })
                .await
            }
            InstancePre::ProviderV1(pre) => {
                let request = adapt::request_to_v1(request);
                self.run(Arc::new(NullSink), None, async |store| {
                    let inst = pre.instantiate_async(&mut *store).await?;
                    inst.turnstone_plugin_provider()
                        .call_build_request(&mut *store, &request)
                        .await
                })
                .await
            }
            _ => Err(self.wrong_kind("provider")),
        }
    }

    /// Asks a provider plugin how the server behind `request.base_url` serves
    /// `request.model`. A 0.1.0 provider cannot say (every field `None`).
    /// `secrets` supplies the alias's `api_key`, as for a completion.
    pub async fn provider_probe(
        &self,
        request: &ptypes::CompletionRequest,
        secrets: Option<Arc<dyn crate::plugin::SecretSource>>,
        cancel: Option<&CancellationToken>,
    ) -> Result<Result<ptypes::ServedModel, ptypes::ProviderError>, CallError> {
        match &self.pre {
            InstancePre::Provider(pre) => {
                self.run(Arc::new(NullSink), cancel, async |store| {
                    if let Some(s) = secrets {
                        store.data_mut().set_call_secrets(s);
                    }
                    call_with_request(pre, store, "probe", request).await
                })
                .await
            }
            InstancePre::ProviderV1(_) => Ok(Ok(adapt::served_model_of_v1())),
            _ => Err(self.wrong_kind("provider")),
        }
    }

    /// Streams one completion from a provider plugin into `events`.
    /// `secrets` supplies per-call values (the alias's `api_key`); the plugin must
    /// still be granted the secret name and the host.
    pub async fn provider_complete(
        &self,
        request: &ptypes::CompletionRequest,
        events: Arc<dyn ProviderEventSink>,
        secrets: Option<Arc<dyn crate::plugin::SecretSource>>,
        cancel: Option<&CancellationToken>,
    ) -> Result<Result<(), ptypes::ProviderError>, CallError> {
        let prepare = |store: &mut Store<HostState>| {
            store.data_mut().provider_sink = Some(events);
            if let Some(s) = secrets {
                store.data_mut().set_call_secrets(s);
            }
        };
        match &self.pre {
            InstancePre::Provider(pre) => {
                self.run(Arc::new(NullSink), cancel, async |store| {
                    prepare(store);
                    call_with_request(pre, store, "complete", request).await
                })
                .await
            }
            InstancePre::ProviderV1(pre) => {
                let request = adapt::request_to_v1(request);
                self.run(Arc::new(NullSink), cancel, async |store| {
                    prepare(store);
                    let inst = pre.instantiate_async(&mut *store).await?;
                    inst.turnstone_plugin_provider()
                        .call_complete(&mut *store, &request)
                        .await
                })
                .await
            }
            _ => Err(self.wrong_kind("provider")),
        }
    }
}

/// The interface a 0.2.0 provider component exports.
const PROVIDER_V0_2_0: &str = "turnstone:plugin/provider@0.2.0";

/// Instantiates a 0.2.0 provider and calls its export `func`, which takes
/// one `completion-request` and returns `R`. A typed call in place of
/// bindgen's `call_*`, which take bindgen's own request record: this one
/// lowers the host's [`ptypes::CompletionRequest`], whose tool definitions
/// are shared between requests. The call type-checks the record against the
/// export's signature, so a record that drifted from the WIT fails here
/// with a clear error rather than lowering the wrong layout.
async fn call_with_request<R>(
    pre: &crate::bindings::v0_2_0::provider::ProviderPluginPre<HostState>,
    store: &mut Store<HostState>,
    func: &str,
    request: &ptypes::CompletionRequest,
) -> wasmtime::Result<R>
where
    R: ComponentType + Lift + Send + Sync + 'static,
{
    let instance = pre.instance_pre().instantiate_async(&mut *store).await?;
    let interface = instance
        .get_export_index(&mut *store, None, PROVIDER_V0_2_0)
        .ok_or_else(|| wasmtime::format_err!("the provider exports no {PROVIDER_V0_2_0}"))?;
    let index = instance
        .get_export_index(&mut *store, Some(&interface), func)
        .ok_or_else(|| wasmtime::format_err!("{PROVIDER_V0_2_0} exports no `{func}`"))?;
    let typed = instance
        .get_typed_func::<(&ptypes::CompletionRequest,), (R,)>(&mut *store, &index)
        .map_err(|e| wasmtime::format_err!("`{func}` of {PROVIDER_V0_2_0}: {e:#}"))?;
    let (out,) = typed.call_async(&mut *store, (request,)).await?;
    Ok(out)
}

impl LoadedPlugin {
    fn channel_pre(
        &self,
    ) -> Result<&crate::bindings::v0_1_0::channel::ChannelPluginPre<HostState>, CallError> {
        match &self.pre {
            InstancePre::Channel(p) => Ok(p),
            _ => Err(self.wrong_kind("channel")),
        }
    }

    /// Runs a channel's platform loop, forwarding inbound events to `events`
    /// until the channel returns or `cancel` fires. No front end drives a
    /// channel yet (issue #20 adds the supervisor); kept as that seam.
    pub async fn channel_run(
        &self,
        events: Arc<dyn crate::plugin::ChannelEventSink>,
        cancel: Option<&CancellationToken>,
    ) -> Result<Result<(), String>, CallError> {
        let pre = self.channel_pre()?;
        self.run(Arc::new(NullSink), cancel, async |store| {
            store.data_mut().channel_sink = Some(events);
            let inst = pre.instantiate_async(&mut *store).await?;
            inst.turnstone_plugin_channel().call_run(&mut *store).await
        })
        .await
    }

    /// Posts an outbound message through a channel plugin. Unused until the
    /// channel supervisor (issue #20).
    pub async fn channel_send_message(
        &self,
        message: &crate::bindings::v0_1_0::channel::turnstone::plugin::channel_types::OutboundMessage,
    ) -> Result<Result<String, String>, CallError> {
        let pre = self.channel_pre()?;
        self.run(Arc::new(NullSink), None, async |store| {
            let inst = pre.instantiate_async(&mut *store).await?;
            inst.turnstone_plugin_channel()
                .call_send_message(&mut *store, message)
                .await
        })
        .await
    }
}
