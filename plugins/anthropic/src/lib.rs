//! Anthropic Messages API adapter: request bodies (system hoisting, tool_use /
//! tool_result grouping, verbatim thinking-block replay, prompt caching) and the
//! SSE stream. Serves `anthropic` and `anthropic-compatible`.

pub mod body;
pub mod models;
pub mod stream;

use turnstone_plugin_sdk::provider::{
    CompletionRequest, ModelCapabilities, Provider, ProviderError,
};

/// The adapter.
pub struct Anthropic;

impl Provider for Anthropic {
    fn capabilities(model: &str) -> ModelCapabilities {
        models::lookup(model, "anthropic", None).capabilities()
    }

    fn build_request(request: &CompletionRequest) -> Result<String, ProviderError> {
        body::messages_body(request).map(|v| v.to_string())
    }

    fn complete(request: &CompletionRequest) -> Result<(), ProviderError> {
        stream::complete(request)
    }
}

turnstone_plugin_sdk::register_provider!(Anthropic);
