//! Writing LLM provider adapters: implement [`Provider`] and call
//! [`register_provider!`](crate::register_provider). The host grants the
//! adapter its API host and injects the API key (see [`crate::http`]); events
//! stream back through [`emit`].

/// Generated bindings of the provider world (imports shared with the tool world).
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "provider-plugin",
        path: "../wit/v0.1.0",
        pub_export_macro: true,
        export_macro_name: "__export_provider_plugin",
        default_bindings_module: "turnstone_plugin_sdk::provider::bindings",
        with: {
            "turnstone:plugin/types@0.1.0": crate::bindings::turnstone::plugin::types,
            "turnstone:plugin/log@0.1.0": crate::bindings::turnstone::plugin::log,
            "turnstone:plugin/config@0.1.0": crate::bindings::turnstone::plugin::config,
            "turnstone:plugin/process@0.1.0": crate::bindings::turnstone::plugin::process,
            "turnstone:plugin/kv@0.1.0": crate::bindings::turnstone::plugin::kv,
            "turnstone:plugin/clock@0.1.0": crate::bindings::turnstone::plugin::clock,
        },
    });
}

pub use bindings::turnstone::plugin::provider_types::{
    CompletionRequest, ContentPart, FinishReason, Message, ModelCapabilities, ProviderError,
    RateLimit, Role, ServerError, StreamEvent, ToolCall, ToolCallDelta, ToolDefinition, Usage,
};

/// Sends one event to the host; false means "stop streaming now".
pub fn emit(event: &StreamEvent) -> bool {
    bindings::turnstone::plugin::provider_events::emit(event)
}

/// An LLM provider adapter.
pub trait Provider {
    /// Capabilities of `model` (context window, vision, …).
    fn capabilities(model: &str) -> ModelCapabilities;
    /// The JSON body that `complete` sends for `request`.
    fn build_request(request: &CompletionRequest) -> Result<String, ProviderError>;
    /// Sends the request and streams events with [`emit`] until the response ends.
    fn complete(request: &CompletionRequest) -> Result<(), ProviderError>;
}

#[doc(hidden)]
pub mod __private {
    pub use super::bindings::exports::turnstone::plugin::provider::Guest;
}

/// Exports a [`Provider`] implementation as this component's provider.
#[macro_export]
macro_rules! register_provider {
    ($provider:ty) => {
        #[doc(hidden)]
        pub struct __TurnstoneProvider;

        impl $crate::provider::__private::Guest for __TurnstoneProvider {
            fn capabilities(model: ::std::string::String) -> $crate::provider::ModelCapabilities {
                <$provider as $crate::provider::Provider>::capabilities(&model)
            }

            fn build_request(
                request: $crate::provider::CompletionRequest,
            ) -> ::std::result::Result<::std::string::String, $crate::provider::ProviderError> {
                <$provider as $crate::provider::Provider>::build_request(&request)
            }

            fn complete(
                request: $crate::provider::CompletionRequest,
            ) -> ::std::result::Result<(), $crate::provider::ProviderError> {
                <$provider as $crate::provider::Provider>::complete(&request)
            }
        }

        $crate::provider::bindings::__export_provider_plugin!(
            __TurnstoneProvider with_types_in $crate::provider::bindings
        );
    };
}
