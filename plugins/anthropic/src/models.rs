//! Per-model behaviour: thinking mode, sampling defaults, where system turns go.

use serde_json::{Map, Value, json};
use turnstone_plugin_sdk::provider::ModelCapabilities;

/// How a model takes extended thinking.
#[derive(Debug, Clone, PartialEq)]
pub enum Thinking {
    /// Not requested.
    None,
    /// Native `thinking` parameter with this value.
    Native(Value),
    /// Local servers: a chat-template switch (`chat_template_kwargs.<param> = true`).
    TemplateFlag(String),
}

/// Resolved model profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Context window.
    pub context_window: u32,
    /// Output cap.
    pub max_output_tokens: u32,
    /// Thinking mode.
    pub thinking: Thinking,
    /// Default temperature sent when the request sets none.
    pub default_temperature: Option<f64>,
    /// Whether the model accepts the `temperature` parameter.
    pub supports_temperature: bool,
    /// Mid-conversation system turns stay inline (else hoisted into `system`).
    pub inline_system: bool,
    /// Images accepted.
    pub vision: bool,
    /// Stored thinking blocks may be replayed.
    pub reasoning_replay: bool,
    /// Server-side tool search (`tool_search_tool_bm25`, `defer_loading`).
    pub tool_search: bool,
}

impl Profile {
    /// As WIT capabilities.
    pub fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities {
            context_window: self.context_window,
            max_output_tokens: self.max_output_tokens,
            supports_tools: true,
            supports_vision: self.vision,
            supports_reasoning: self.thinking != Thinking::None,
            supports_temperature: self.supports_temperature,
            supports_streaming: true,
            supports_tool_search: self.tool_search,
        }
    }
}

/// Claude models with server-side tool search: Sonnet and Opus 4 and later,
/// Haiku 4.5 and later.
fn supports_tool_search(model: &str) -> bool {
    let Some(rest) = model.strip_prefix("claude-") else {
        return false;
    };
    let (family, version) = rest.split_once('-').unwrap_or((rest, ""));
    let mut parts = version.split('-');
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts
        .next()
        .filter(|p| p.len() <= 2)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    match family {
        "opus" | "sonnet" => major >= 4,
        "haiku" => major > 4 || (major == 4 && minor >= 5),
        _ => false,
    }
}

/// The profile for `model` under `provider`, with operator overrides applied.
pub fn lookup(model: &str, provider: &str, overrides: Option<&Map<String, Value>>) -> Profile {
    let m = model.to_ascii_lowercase();
    let mut p = if provider == "anthropic-compatible" {
        // A local server serves whatever the operator named it: plain defaults,
        // never the commercial table (a name collision must not change behaviour).
        Profile {
            context_window: 200_000,
            max_output_tokens: 64_000,
            thinking: Thinking::None,
            default_temperature: None,
            supports_temperature: true,
            inline_system: false,
            vision: false,
            reasoning_replay: false,
            tool_search: false,
        }
    } else if m.starts_with("claude-opus-4-8") {
        Profile {
            context_window: 1_000_000,
            max_output_tokens: 128_000,
            thinking: Thinking::Native(json!({"type": "adaptive", "display": "summarized"})),
            default_temperature: None,
            supports_temperature: false,
            inline_system: true,
            vision: true,
            reasoning_replay: true,
            tool_search: true,
        }
    } else if m.starts_with("claude-")
        && (m.contains("-4-6") || m.contains("-4-7") || m.contains("-4-5"))
    {
        Profile {
            context_window: 200_000,
            max_output_tokens: 64_000,
            thinking: Thinking::Native(json!({"type": "adaptive"})),
            default_temperature: Some(1.0),
            supports_temperature: true,
            inline_system: false,
            vision: true,
            reasoning_replay: true,
            tool_search: true,
        }
    } else {
        Profile {
            context_window: 200_000,
            max_output_tokens: 8192,
            thinking: Thinking::None,
            default_temperature: None,
            supports_temperature: true,
            inline_system: false,
            vision: m.starts_with("claude-"),
            reasoning_replay: false,
            tool_search: supports_tool_search(&m),
        }
    };
    if let Some(o) = overrides {
        let u32_of = |k: &str| o.get(k).and_then(Value::as_u64).map(|v| v as u32);
        if let Some(v) = u32_of("context_window") {
            p.context_window = v;
        }
        if let Some(v) = u32_of("max_output_tokens") {
            p.max_output_tokens = v;
        }
        if let Some(v) = o.get("supports_vision").and_then(Value::as_bool) {
            p.vision = v;
        }
        if let Some(v) = o.get("supports_reasoning_replay").and_then(Value::as_bool) {
            p.reasoning_replay = v;
        }
        if let Some(v) = o.get("supports_temperature").and_then(Value::as_bool) {
            p.supports_temperature = v;
        }
        if let Some(v) = o.get("supports_tool_search").and_then(Value::as_bool) {
            p.tool_search = v;
        }
        match o.get("thinking_mode").and_then(Value::as_str) {
            Some("none") => p.thinking = Thinking::None,
            Some("manual") if provider == "anthropic-compatible" => {
                let param = o
                    .get("thinking_param")
                    .and_then(Value::as_str)
                    .unwrap_or("enable_thinking");
                p.thinking = Thinking::TemplateFlag(param.to_string());
            }
            Some("adaptive") => p.thinking = Thinking::Native(json!({"type": "adaptive"})),
            _ => {}
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_search_follows_the_model_family_and_version() {
        for m in [
            "claude-sonnet-4-20250514",
            "claude-opus-4-1",
            "claude-haiku-4-5-20251001",
            "claude-sonnet-5",
        ] {
            assert!(supports_tool_search(m), "{m}");
        }
        for m in [
            "claude-3-5-sonnet-latest",
            "claude-haiku-4-20250101",
            "gpt-5",
            "claude-",
        ] {
            assert!(!supports_tool_search(m), "{m}");
        }
        assert!(lookup("claude-opus-4-8", "anthropic", None).tool_search);
        assert!(!lookup("claude-opus-4-8", "anthropic-compatible", None).tool_search);
        let off = serde_json::json!({"supports_tool_search": false});
        assert!(!lookup("claude-opus-4-8", "anthropic", off.as_object()).tool_search);
    }
}
