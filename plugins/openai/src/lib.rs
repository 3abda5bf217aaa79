//! OpenAI-style provider adapter: builds Chat Completions requests and parses
//! the SSE stream into typed events. Serves the `openai`, `openai-compatible`
//! and `google` (Gemini's OpenAI endpoint) flavours.

pub mod body;
pub mod chat_messages;
pub mod chunk;
pub mod fast_chunk;
pub mod responses;
pub mod responses_event;
pub mod responses_input;
pub mod sse;
pub mod stream;
pub mod tools;

use turnstone_plugin_sdk::provider::{
    CompletionRequest, ModelCapabilities, Provider, ProviderError, ServedModel,
};

/// The adapter.
pub struct OpenAi;

impl Provider for OpenAi {
    fn capabilities(model: &str) -> ModelCapabilities {
        body::capabilities(model)
    }

    fn build_request(request: &CompletionRequest) -> Result<String, ProviderError> {
        body::request_body(request).map(|(_, body)| body)
    }

    fn complete(request: &CompletionRequest) -> Result<(), ProviderError> {
        let (api, mut resp) = stream::send(request)?;
        stream::read(api, &mut resp)
    }

    fn complete_owned(request: CompletionRequest) -> Result<(), ProviderError> {
        let (api, mut resp) = stream::send(&request)?;
        // The request and its body are freed before the response is read.
        drop(request);
        stream::read(api, &mut resp)
    }

    /// A self-hosted server (vLLM, SGLang, llama.cpp) says how long a context
    /// it runs the model with; OpenAI's and Google's APIs do not, and are
    /// not asked.
    fn probe(request: &CompletionRequest) -> Result<ServedModel, ProviderError> {
        let hosted = ["api.openai.com", "generativelanguage.googleapis.com"]
            .iter()
            .any(|h| turnstone_plugin_sdk::served::is_host(&request.base_url, h));
        if hosted {
            return Ok(ServedModel {
                context_window: None,
            });
        }
        // Local servers often run without a key: no granted key, no header.
        let auth =
            |r: turnstone_plugin_sdk::http::Request| Ok(r.bearer_secret_if_granted("api_key"));
        turnstone_plugin_sdk::served::probe_self_hosted(&request.base_url, &request.model, &auth)
    }
}

turnstone_plugin_sdk::register_provider!(OpenAi);
