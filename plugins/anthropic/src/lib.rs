//! Anthropic Messages API adapter: request bodies (system hoisting, tool_use /
//! tool_result grouping, verbatim thinking-block replay, prompt caching) and the
//! SSE stream. Serves `anthropic` and `anthropic-compatible`.

pub mod body;
pub mod delta_event;
mod messages;
pub mod models;
pub mod stream;

use turnstone_plugin_sdk::provider::{
    CompletionRequest, ModelCapabilities, Provider, ProviderError, ServedModel,
};

/// The adapter.
pub struct Anthropic;

impl Provider for Anthropic {
    fn capabilities(model: &str) -> ModelCapabilities {
        models::lookup(model, "anthropic", None).capabilities()
    }

    fn build_request(request: &CompletionRequest) -> Result<String, ProviderError> {
        body::messages_body(request)?.to_json()
    }

    fn complete(request: &CompletionRequest) -> Result<(), ProviderError> {
        stream::read(&mut stream::send(request)?)
    }

    fn complete_owned(request: CompletionRequest) -> Result<(), ProviderError> {
        let mut resp = stream::send(&request)?;
        // The request and its body are freed before the response is read.
        drop(request);
        stream::read(&mut resp)
    }

    /// A self-hosted Messages server (vLLM's `/v1/messages`) also serves
    /// `/v1/models`; Anthropic's API is not asked.
    fn probe(request: &CompletionRequest) -> Result<ServedModel, ProviderError> {
        if turnstone_plugin_sdk::served::is_host(&request.base_url, "api.anthropic.com") {
            return Ok(ServedModel {
                context_window: None,
            });
        }
        // The base URL is the server root; tolerate a pasted trailing /v1.
        let root = request
            .base_url
            .trim_end_matches('/')
            .trim_end_matches("/v1");
        let auth = |r: turnstone_plugin_sdk::http::Request| {
            Ok(match turnstone_plugin_sdk::host::secret_ref("api_key") {
                // vLLM checks a bearer token; Anthropic-style servers x-api-key.
                Ok(token) => r
                    .header("x-api-key", token.clone())
                    .header("authorization", format!("Bearer {token}")),
                Err(_) => r,
            })
        };
        turnstone_plugin_sdk::served::probe_self_hosted(
            &format!("{root}/v1"),
            &request.model,
            &auth,
        )
    }
}

turnstone_plugin_sdk::register_provider!(Anthropic);
