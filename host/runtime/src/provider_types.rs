//! The provider types the host works in: the latest `turnstone:plugin`
//! version of each (0.2.0 where it changed, 0.1.0 where it did not). Older
//! providers are adapted in [`crate::adapt`].

pub use crate::bindings::v0_1_0::provider::turnstone::plugin::provider_types::{
    ContentPart, FinishReason, Message, ProviderError, RateLimit, Role, ServerError, StreamEvent,
    ToolCall, ToolCallDelta, Usage,
};
pub use crate::bindings::v0_2_0::provider::turnstone::plugin0_2_0::provider_types::{
    CompletionRequest, ModelCapabilities, ServedModel, ToolDefinition,
};
