//! Host implementations of the `turnstone:plugin` imports.

pub mod agent;
pub mod background;
pub(crate) mod channel_host;
pub mod egress;
pub(crate) mod fs_audit;
mod h1_driver;
pub mod kv;
pub mod pool;
pub mod process;
mod quickack;
pub mod readahead;
pub mod websocket;
pub mod work;

use crate::bindings::v0_1_0::host::turnstone::plugin::{clock, config, log, types};
use crate::bindings::v0_1_0::{channel, provider, tool};
use crate::capability::Denial;
use crate::state::HostState;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Converts a host-side denial into the WIT error the guest receives.
pub(crate) fn denial_to_wit(d: &Denial) -> types::CapabilityError {
    types::CapabilityError {
        capability: d.capability.to_string(),
        detail: d.detail.clone(),
        grant_hint: d.hint.clone(),
    }
}

impl types::Host for HostState {}

impl log::Host for HostState {
    async fn log(&mut self, level: log::Level, message: String) -> wasmtime::Result<()> {
        let plugin = self.plugin.name.as_str();
        // Guests are untrusted: bound what one log line can cost.
        let message = truncate_chars(&message, 4096);
        match level {
            log::Level::Trace => tracing::trace!(plugin, "{message}"),
            log::Level::Debug => tracing::debug!(plugin, "{message}"),
            log::Level::Info => tracing::info!(plugin, "{message}"),
            log::Level::Warn => tracing::warn!(plugin, "{message}"),
            log::Level::Error => tracing::error!(plugin, "{message}"),
        }
        Ok(())
    }
}

fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

impl config::Host for HostState {
    async fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.plugin.config.get(&key).cloned())
    }

    async fn keys(&mut self) -> wasmtime::Result<Vec<String>> {
        Ok(self.plugin.config.keys().cloned().collect())
    }

    async fn secret_ref(
        &mut self,
        name: String,
    ) -> wasmtime::Result<Result<String, types::CapabilityError>> {
        match self.plugin.caps.check_secret(&name) {
            // Granted but unset (e.g. a model alias without a key): say so, so the
            // plugin can proceed without it instead of sending a dangling reference.
            Ok(()) if !self.secret_available(&name) => Ok(Err(types::CapabilityError {
                capability: "secret".into(),
                detail: format!("secret {name} is granted but has no value for this call"),
                grant_hint: format!("set {name} on the host (or the model alias's api_key)"),
            })),
            Ok(()) => Ok(Ok(egress::secret_token(&name))),
            Err(d) => {
                self.plugin.counters.denial();
                tracing::warn!(plugin = %self.plugin.name, "{d}");
                self.audit.denial(d.to_string());
                Ok(Err(denial_to_wit(&d)))
            }
        }
    }

    async fn check_http(
        &mut self,
        url: String,
    ) -> wasmtime::Result<Result<(), types::CapabilityError>> {
        // Before the URL parser, which reads `http:///x` as host `x` and
        // rejects zone ids with an unhelpful message.
        if let Err(e) = crate::netguard::check_url_authority(&url) {
            return Ok(Err(types::CapabilityError {
                capability: "http".into(),
                detail: e.to_string(),
                grant_hint: String::new(),
            }));
        }
        let parsed = match url::Url::parse(&url) {
            Ok(u) => u,
            Err(e) => {
                return Ok(Err(types::CapabilityError {
                    capability: "http".into(),
                    detail: format!("invalid URL {url:?}: {e}"),
                    grant_hint: String::new(),
                }));
            }
        };
        let host = parsed.host_str().unwrap_or_default();
        let port = parsed.port_or_known_default().unwrap_or(443);
        match self.plugin.caps.check_http(host, port) {
            // The SDK asks before sending: a refusal here is the denial the
            // operator sees, so it counts like one at the socket.
            Err(d) => {
                self.plugin.counters.denial();
                tracing::warn!(plugin = %self.plugin.name, "{d}");
                self.audit.host(
                    format!("{host}:{port}"),
                    "(preflight)".into(),
                    Some(d.to_string()),
                );
                Ok(Err(denial_to_wit(&d)))
            }
            Ok(crate::capability::HttpAccess::Granted) => Ok(Ok(())),
            Ok(crate::capability::HttpAccess::PublicOnly) => Ok(self
                .plugin
                .network
                .screen(host, port)
                .await
                .map(|_| ())
                .map_err(|e| types::CapabilityError {
                    capability: "http".into(),
                    detail: e.to_string(),
                    grant_hint: String::new(),
                })),
        }
    }
}

impl clock::Host for HostState {
    async fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0))
    }

    async fn sleep_ms(&mut self, ms: u64) -> wasmtime::Result<bool> {
        // Sleep in slices so a cancel is noticed promptly.
        let deadline = tokio::time::Instant::now() + Duration::from_millis(ms);
        loop {
            if self.cancelled.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(true);
            }
            tokio::time::sleep((deadline - now).min(Duration::from_millis(50))).await;
        }
    }
}

impl tool::turnstone::plugin::tool_output::Host for HostState {
    async fn emit(&mut self, chunk: String) -> wasmtime::Result<bool> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Ok(false);
        }
        // An empty chunk is a liveness probe: "should I keep going?".
        if chunk.is_empty() {
            return Ok(true);
        }
        Ok(self.tool_sink.chunk(&chunk))
    }
}

impl tool::turnstone::plugin::model::Host for HostState {
    async fn complete(
        &mut self,
        system: String,
        prompt: String,
        max_tokens: u32,
    ) -> wasmtime::Result<Result<String, tool::turnstone::plugin::model::ModelError>> {
        use tool::turnstone::plugin::model::ModelError;
        if let Err(d) = self.plugin.caps.check_model() {
            self.plugin.counters.denial();
            tracing::warn!(plugin = %self.plugin.name, "{d}");
            self.audit.denial(d.to_string());
            return Ok(Err(ModelError::Denied(denial_to_wit(&d))));
        }
        let Some(model) = self.tool_sink.model() else {
            return Ok(Err(ModelError::Unavailable(
                "no model is attached to this call".into(),
            )));
        };
        Ok(model
            .complete(system, prompt, max_tokens)
            .await
            .map_err(ModelError::Failed))
    }
}

impl provider::turnstone::plugin::provider_types::Host for HostState {}

impl crate::bindings::v0_2_0::provider::turnstone::plugin0_2_0::provider_types::Host for HostState {}

impl provider::turnstone::plugin::provider_events::Host for HostState {
    async fn emit(
        &mut self,
        event: provider::turnstone::plugin::provider_types::StreamEvent,
    ) -> wasmtime::Result<bool> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Ok(false);
        }
        Ok(match &self.provider_sink {
            Some(sink) => sink.event(event),
            None => false,
        })
    }
}

impl channel::turnstone::plugin::channel_types::Host for HostState {}

impl channel::turnstone::plugin::channel_events::Host for HostState {
    async fn emit(
        &mut self,
        event: channel::turnstone::plugin::channel_types::InboundEvent,
    ) -> wasmtime::Result<bool> {
        if self.cancelled.load(Ordering::Relaxed) {
            return Ok(false);
        }
        Ok(match &self.channel_sink {
            Some(sink) => sink.event(event),
            None => false,
        })
    }
}
