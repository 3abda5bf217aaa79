//! The one place where plugin ABI versions meet. The host works in the latest
//! types ([`crate::provider_types`]); a component built against an older
//! `turnstone:plugin` version is adapted here, so the rest of the host never
//! sees which version a plugin was built with.
//!
//! 0.1.0 → 0.2.0, providers: `tool-definition` gained `defer-loading`,
//! `completion-request` gained `tool-search`, `model-capabilities` gained
//! `supports-tool-search`. A 0.1.0 provider has no native tool search: its
//! capabilities say so, and it gets every tool as a plain definition. 0.2.0
//! providers export `probe`; a 0.1.0 provider knows nothing about the server.

use crate::bindings::v0_1_0::provider::turnstone::plugin::provider_types as v1;
use crate::bindings::v0_2_0::provider::turnstone::plugin0_2_0::provider_types as v2;
use crate::provider_types::CompletionRequest;

/// A request for a 0.1.0 provider: deferral flags and native search dropped
/// (the engine asks for native search only where the capabilities offer it).
pub fn request_to_v1(r: &CompletionRequest) -> v1::CompletionRequest {
    v1::CompletionRequest {
        provider: r.provider.clone(),
        base_url: r.base_url.clone(),
        model: r.model.clone(),
        messages: r.messages.clone(),
        tools: r
            .tools
            .iter()
            .map(|t| v1::ToolDefinition {
                name: t.name.to_string(),
                description: t.description.to_string(),
                parameters: t.parameters.to_string(),
            })
            .collect(),
        temperature: r.temperature,
        max_tokens: r.max_tokens,
        reasoning_effort: r.reasoning_effort.clone(),
        replay_reasoning: r.replay_reasoning,
        capabilities: r.capabilities.clone(),
        extra: r.extra.clone(),
    }
}

/// A 0.1.0 provider's capabilities: no native tool search.
pub fn capabilities_from_v1(c: v1::ModelCapabilities) -> v2::ModelCapabilities {
    v2::ModelCapabilities {
        context_window: c.context_window,
        max_output_tokens: c.max_output_tokens,
        supports_tools: c.supports_tools,
        supports_vision: c.supports_vision,
        supports_reasoning: c.supports_reasoning,
        supports_temperature: c.supports_temperature,
        supports_streaming: c.supports_streaming,
        supports_tool_search: false,
    }
}

/// What a 0.1.0 provider (which has no `probe`) says about its server.
pub fn served_model_of_v1() -> v2::ServedModel {
    v2::ServedModel {
        context_window: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1_request_keeps_every_tool_and_drops_the_search_flags() {
        let r = crate::provider_types::CompletionRequest {
            provider: "openai".into(),
            base_url: "http://h/v1".into(),
            model: "m".into(),
            messages: Vec::new(),
            tools: vec![
                crate::provider_types::ToolDefinition {
                    name: "a".into(),
                    description: "d".into(),
                    parameters: "{}".into(),
                    defer_loading: false,
                },
                crate::provider_types::ToolDefinition {
                    name: "mcp__s__b".into(),
                    description: "e".into(),
                    parameters: "{\"type\":\"object\"}".into(),
                    defer_loading: true,
                },
            ],
            temperature: Some(0.5),
            max_tokens: Some(10),
            reasoning_effort: None,
            replay_reasoning: true,
            capabilities: None,
            extra: Some("{}".into()),
            tool_search: true,
        };
        let v = request_to_v1(&r);
        assert_eq!(
            v.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["a", "mcp__s__b"]
        );
        assert_eq!(v.tools[1].parameters, "{\"type\":\"object\"}");
        assert_eq!((v.temperature, v.max_tokens), (Some(0.5), Some(10)));
        assert!(v.replay_reasoning);
    }
}
