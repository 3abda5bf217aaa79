//! OpenAI-style provider adapter: builds Chat Completions requests and parses
//! the SSE stream into typed events. Serves the `openai`, `openai-compatible`
//! and `google` (Gemini's OpenAI endpoint) flavours.

pub mod body;
pub mod responses;
pub mod sse;
pub mod stream;

use turnstone_plugin_sdk::provider::{
    CompletionRequest, ModelCapabilities, Provider, ProviderError,
};

/// The adapter.
pub struct OpenAi;

impl Provider for OpenAi {
    fn capabilities(model: &str) -> ModelCapabilities {
        body::capabilities(model)
    }

    fn build_request(request: &CompletionRequest) -> Result<String, ProviderError> {
        body::request_body(request).map(|(_, v)| v.to_string())
    }

    fn complete(request: &CompletionRequest) -> Result<(), ProviderError> {
        stream::complete(request)
    }
}

turnstone_plugin_sdk::register_provider!(OpenAi);
