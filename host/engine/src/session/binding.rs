//! What a session needs to call one model: the provider component, the
//! alias's settings and key, and what is known about the model (the
//! provider's capability report, the serving endpoint's context window).

use std::sync::Arc;
use turnstone_runtime::provider_types as wit;
use turnstone_runtime::{LoadedPlugin, SecretSource};

/// Everything needed to call one model.
#[derive(Clone)]
pub struct ModelBinding {
    /// The provider component.
    pub plugin: Arc<LoadedPlugin>,
    /// The registry alias it was made from (usage is recorded under it).
    pub alias: Option<String>,
    /// Provider flavour (openai, anthropic, google, …-compatible).
    pub provider: String,
    /// API base URL.
    pub base_url: String,
    /// Model id.
    pub model: String,
    /// Context window in tokens: the configured one, else what
    /// [`ModelBinding::resolve_window`] found (128k until then).
    pub context_window: u32,
    /// The operator's `context_window` for the alias, if set.
    pub configured_window: Option<u32>,
    /// What the serving endpoint says, asked once per alias.
    pub served: ServedWindow,
    /// Per-call secrets (the alias's `api_key`).
    pub secrets: Option<Arc<dyn SecretSource>>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Output cap.
    pub max_tokens: Option<u32>,
    /// Reasoning effort.
    pub reasoning_effort: Option<String>,
    /// Capability overrides (JSON object).
    pub capabilities: Option<String>,
    /// Replay stored reasoning to the provider that produced it.
    pub replay_reasoning: bool,
    /// The alias's FIFO admission gate (at most `max_concurrency` generations).
    pub admission: Option<Arc<tokio::sync::Semaphore>>,
    /// What the provider component reports for the model (shared by every
    /// binding of an alias, asked once).
    pub reported: ReportedCapabilities,
}

/// A provider's `capabilities(model)` answer, asked on first use and kept
/// (`None` when the call failed: nothing is assumed).
pub type ReportedCapabilities = Arc<tokio::sync::OnceCell<Option<wit::ModelCapabilities>>>;

/// The serving endpoint's context window for an alias, probed once (`None`:
/// the endpoint did not say; a failed probe is not kept and is asked again).
pub type ServedWindow = Arc<tokio::sync::OnceCell<Option<u32>>>;

/// The window assumed when nothing says otherwise.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 128_000;

/// How long a probe of the serving endpoint may take.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The per-call secret source carrying an alias's API key.
struct AliasKey(String);

impl SecretSource for AliasKey {
    fn secret(&self, name: &str) -> Option<String> {
        (name == "api_key").then(|| self.0.clone())
    }
}

impl ModelBinding {
    /// `model` of `provider` at `base_url`, served by `plugin`, with the
    /// defaults of an alias that sets nothing else (128k window).
    pub fn new(plugin: Arc<LoadedPlugin>, provider: &str, base_url: &str, model: &str) -> Self {
        Self {
            plugin,
            alias: None,
            provider: provider.into(),
            base_url: base_url.into(),
            model: model.into(),
            context_window: DEFAULT_CONTEXT_WINDOW,
            configured_window: None,
            served: Default::default(),
            secrets: None,
            temperature: None,
            max_tokens: None,
            reasoning_effort: None,
            capabilities: None,
            replay_reasoning: false,
            admission: None,
            reported: Default::default(),
        }
    }

    /// The same binding with the operator's `context_window` (never probed).
    pub fn with_context_window(mut self, window: u32) -> Self {
        self.context_window = window;
        self.configured_window = Some(window);
        self
    }

    /// The same binding with `key` as its per-call `api_key`.
    pub fn with_api_key(mut self, key: &str) -> Self {
        self.secrets = Some(Arc::new(AliasKey(key.into())));
        self
    }

    /// The binding tests use: the openai provider component against a
    /// scripted LLM at `base_url` (…`/v1`), model `gpt-4o-mini`, key `sk-test`.
    pub fn for_test(plugin: Arc<LoadedPlugin>, base_url: &str) -> Self {
        Self::new(plugin, "openai", base_url, "gpt-4o-mini").with_api_key("sk-test")
    }

    /// The binding for a registry alias served by `plugin`.
    pub fn from_alias(alias: &crate::models::Alias, plugin: Arc<LoadedPlugin>) -> Self {
        let c = &alias.config;
        Self {
            plugin,
            alias: Some(alias.name.clone()),
            provider: alias.provider.clone(),
            base_url: alias.base_url.clone(),
            model: c.model.clone(),
            context_window: c.context_window.unwrap_or(DEFAULT_CONTEXT_WINDOW),
            configured_window: c.context_window,
            served: alias.served.clone(),
            secrets: alias
                .api_key
                .clone()
                .map(|k| Arc::new(AliasKey(k)) as Arc<dyn SecretSource>),
            temperature: c.temperature,
            max_tokens: c.max_tokens,
            reasoning_effort: c.reasoning_effort.clone(),
            capabilities: c
                .capabilities
                .as_ref()
                .map(|m| serde_json::Value::Object(m.clone()).to_string()),
            replay_reasoning: false,
            admission: alias.admission.clone(),
            reported: alias.reported.clone(),
        }
    }

    /// The model's capabilities: the provider component's report (asked
    /// once per alias) with the operator's `[models.x.capabilities]` laid
    /// over it. `None` when the provider could not say.
    pub async fn model_capabilities(&self) -> Option<wit::ModelCapabilities> {
        let reported = self
            .reported
            .get_or_init(|| async {
                match self.plugin.provider_capabilities(&self.model).await {
                    Ok(c) => Some(c),
                    Err(e) => {
                        tracing::warn!(model = %self.model, "provider capabilities unavailable: {e}");
                        None
                    }
                }
            })
            .await
            .as_ref()
            .copied()?;
        Some(apply_overrides(reported, self.capabilities.as_deref()))
    }

    /// The model's context window, in order: the alias's `context_window`,
    /// a `context_window` in its `[models.x.capabilities]`, what the serving
    /// endpoint reports (llama.cpp `/props`, vLLM `/v1/models`; asked once
    /// per alias), the provider's own model table (not on a `*-compatible`
    /// lane, whose model names mean nothing to it), else 128k. Sets
    /// [`ModelBinding::context_window`] to it.
    pub async fn resolve_window(&mut self) -> u32 {
        self.context_window = self.find_window().await;
        self.context_window
    }

    async fn find_window(&self) -> u32 {
        if let Some(w) = self.configured_window {
            return w;
        }
        if let Some(w) = override_window(self.capabilities.as_deref()) {
            return w;
        }
        if let Some(w) = self.served_window().await {
            return w;
        }
        if !self.provider.ends_with("-compatible")
            && let Some(c) = self.model_capabilities().await
            && c.context_window > 0
        {
            return c.context_window;
        }
        DEFAULT_CONTEXT_WINDOW
    }

    /// What the serving endpoint says (cached per alias once it answered).
    async fn served_window(&self) -> Option<u32> {
        let probe = || async {
            let request = wit::CompletionRequest {
                provider: self.provider.clone(),
                base_url: self.base_url.clone(),
                model: self.model.clone(),
                messages: Vec::new(),
                tools: Vec::new(),
                temperature: None,
                max_tokens: None,
                reasoning_effort: None,
                replay_reasoning: false,
                capabilities: self.capabilities.clone(),
                extra: None,
                tool_search: false,
            };
            let cancel = tokio_util::sync::CancellationToken::new();
            let call = self
                .plugin
                .provider_probe(&request, self.secrets.clone(), Some(&cancel));
            let outcome = match tokio::time::timeout(PROBE_TIMEOUT, call).await {
                Ok(o) => o,
                Err(_) => {
                    cancel.cancel();
                    return Err(format!("no answer in {} s", PROBE_TIMEOUT.as_secs()));
                }
            };
            match outcome {
                Ok(Ok(served)) => Ok(served.context_window.filter(|w| *w > 0)),
                Ok(Err(e)) => Err(e.message()),
                Err(e) => Err(e.to_string()),
            }
        };
        match self.served.get_or_try_init(probe).await {
            Ok(w) => *w,
            Err(e) => {
                tracing::warn!(model = %self.model, base_url = %self.base_url, "context window probe failed: {e}");
                None
            }
        }
    }

    /// Whether the model accepts images (as its capabilities say; unknown
    /// capabilities count as no).
    pub async fn supports_vision(&self) -> bool {
        self.model_capabilities()
            .await
            .is_some_and(|c| c.supports_vision)
    }

    /// Whether the provider searches deferred tools itself for this model.
    /// Never on a `*-compatible` lane: a local server named like a cloud
    /// model does not have the cloud's server-side tools.
    pub async fn supports_tool_search(&self) -> bool {
        if self.provider.ends_with("-compatible") {
            return false;
        }
        self.model_capabilities()
            .await
            .is_some_and(|c| c.supports_tool_search)
    }
}

/// A `context_window` in the operator's capability overrides.
fn override_window(overrides: Option<&str>) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_str(overrides?).ok()?;
    v.get("context_window")?
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0)
}

/// `caps` with the boolean and numeric keys of the operator's JSON object
/// (`supports_vision = true`, `context_window = 32768`, …) laid over it.
fn apply_overrides(
    mut caps: wit::ModelCapabilities,
    overrides: Option<&str>,
) -> wit::ModelCapabilities {
    let Some(serde_json::Value::Object(map)) =
        overrides.and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
    else {
        return caps;
    };
    for (key, value) in &map {
        let flag = value.as_bool();
        let number = value.as_u64().and_then(|n| u32::try_from(n).ok());
        match (key.as_str(), flag, number) {
            ("supports_tools", Some(b), _) => caps.supports_tools = b,
            ("supports_vision", Some(b), _) => caps.supports_vision = b,
            ("supports_reasoning", Some(b), _) => caps.supports_reasoning = b,
            ("supports_temperature", Some(b), _) => caps.supports_temperature = b,
            ("supports_streaming", Some(b), _) => caps.supports_streaming = b,
            ("supports_tool_search", Some(b), _) => caps.supports_tool_search = b,
            ("context_window", _, Some(n)) => caps.context_window = n,
            ("max_output_tokens", _, Some(n)) => caps.max_output_tokens = n,
            _ => {}
        }
    }
    caps
}
