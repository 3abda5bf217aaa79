//! The provider types the host works in: the latest `turnstone:plugin`
//! version of each (0.2.0 where it changed, 0.1.0 where it did not). Older
//! providers are adapted in [`crate::adapt`].
//!
//! The request records are written here rather than taken from bindgen, so
//! that a tool's name, description and schema are shared (`Arc<str>`) by
//! every request that offers the tool. bindgen's records own their strings,
//! and every model call copied every tool definition (about 19 kB a call
//! with the built-in tools) and kept the copy for the whole stream. The
//! component model lowers `Arc<str>` exactly as `string`; the call type-checks
//! these records against the component's export (field names, order and
//! types), so a mismatch with `wit/v0.2.0/provider.wit` is an error at the
//! call, and the tests in `tests/` call real providers through them.

use std::sync::Arc;
use wasmtime::component::{ComponentType, Lower};

pub use crate::bindings::v0_1_0::provider::turnstone::plugin::provider_types::{
    ContentPart, FinishReason, Message, ProviderError, RateLimit, Role, ServerError, StreamEvent,
    ToolCall, ToolCallDelta, Usage,
};
pub use crate::bindings::v0_2_0::provider::turnstone::plugin0_2_0::provider_types::{
    ModelCapabilities, ServedModel,
};

/// `tool-definition` of `turnstone:plugin/provider-types@0.2.0`, with its
/// text shared between requests.
#[derive(ComponentType, Lower, Clone, Debug, PartialEq)]
#[component(record)]
pub struct ToolDefinition {
    /// Tool name.
    #[component(name = "name")]
    pub name: Arc<str>,
    /// Description for the model.
    #[component(name = "description")]
    pub description: Arc<str>,
    /// JSON Schema of the parameters.
    #[component(name = "parameters")]
    pub parameters: Arc<str>,
    /// Loaded only when the provider's native tool search finds it.
    #[component(name = "defer-loading")]
    pub defer_loading: bool,
}

/// `completion-request` of `turnstone:plugin/provider-types@0.2.0` (see
/// the WIT for each field).
#[derive(ComponentType, Lower, Clone, Debug)]
#[component(record)]
pub struct CompletionRequest {
    /// The alias's provider flavour.
    #[component(name = "provider")]
    pub provider: String,
    /// Base URL of the API.
    #[component(name = "base-url")]
    pub base_url: String,
    /// Model name.
    #[component(name = "model")]
    pub model: String,
    /// The conversation.
    #[component(name = "messages")]
    pub messages: Vec<Message>,
    /// The tools offered.
    #[component(name = "tools")]
    pub tools: Vec<ToolDefinition>,
    /// Sampling temperature.
    #[component(name = "temperature")]
    pub temperature: Option<f64>,
    /// Output token limit.
    #[component(name = "max-tokens")]
    pub max_tokens: Option<u32>,
    /// Reasoning effort.
    #[component(name = "reasoning-effort")]
    pub reasoning_effort: Option<String>,
    /// Replay stored reasoning blocks.
    #[component(name = "replay-reasoning")]
    pub replay_reasoning: bool,
    /// Operator capability overrides as a JSON object.
    #[component(name = "capabilities")]
    pub capabilities: Option<String>,
    /// Extra provider options as a JSON object.
    #[component(name = "extra")]
    pub extra: Option<String>,
    /// Offer the provider's native tool search.
    #[component(name = "tool-search")]
    pub tool_search: bool,
}
