//! Operator-set configuration (`[plugins.config]` strings).

/// The default REST base URL.
pub const DEFAULT_API_BASE: &str = "https://discord.com/api/v10";
/// The default attachment download limit (8 MiB).
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 8_388_608;
/// GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT.
pub const DEFAULT_INTENTS: u64 = 37_377;

/// The adapter's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// REST base URL without a trailing slash (`api_base`).
    pub api_base: String,
    /// Attachments larger than this are not downloaded (`max_attachment_bytes`).
    pub max_attachment_bytes: u64,
    /// The application's Ed25519 public key in hex, for HTTP interactions
    /// (`public_key`).
    pub public_key: Option<String>,
    /// Gateway intents (`intents`).
    pub intents: u64,
}

impl Config {
    /// Reads the settings from the host's plugin configuration.
    pub fn load() -> Self {
        Self::from_lookup(turnstone_plugin_sdk::host::config)
    }

    /// Builds the settings from a key lookup; unset, empty or unparsable
    /// values fall back to the defaults.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Self {
        let value = |key: &str| {
            get(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let api_base = value("api_base")
            .map(|v| v.trim_end_matches('/').to_string())
            .unwrap_or_else(|| DEFAULT_API_BASE.to_string());
        Self {
            api_base,
            max_attachment_bytes: value("max_attachment_bytes")
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_MAX_ATTACHMENT_BYTES),
            public_key: value("public_key"),
            intents: value("intents")
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_INTENTS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_overrides() {
        let c = Config::from_lookup(|_| None);
        assert_eq!(c.api_base, DEFAULT_API_BASE);
        assert_eq!(c.max_attachment_bytes, DEFAULT_MAX_ATTACHMENT_BYTES);
        assert_eq!(c.intents, DEFAULT_INTENTS);
        assert_eq!(c.public_key, None);
        let c = Config::from_lookup(|k| match k {
            "api_base" => Some("http://127.0.0.1:9/api/v10/".into()),
            "max_attachment_bytes" => Some("10".into()),
            "intents" => Some("oops".into()),
            "public_key" => Some(" ab ".into()),
            _ => None,
        });
        assert_eq!(c.api_base, "http://127.0.0.1:9/api/v10");
        assert_eq!(c.max_attachment_bytes, 10);
        assert_eq!(c.intents, DEFAULT_INTENTS);
        assert_eq!(c.public_key.as_deref(), Some("ab"));
    }
}
