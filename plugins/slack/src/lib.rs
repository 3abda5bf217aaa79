//! Slack channel adapter: Socket Mode for events and button presses, the
//! Web API for posts, edits and approval prompts (per-method rate limits),
//! and signed HTTP Events/interactivity requests delivered as webhooks.
//!
//! Config keys: `api_base` (default `https://slack.com/api`) and
//! `max_attachment_bytes` (default 8 MiB). Secrets: `SLACK_APP_TOKEN` (xapp-…),
//! `SLACK_BOT_TOKEN` (xoxb-…) and `SLACK_SIGNING_SECRET` (webhooks only).

#![warn(missing_docs)]

pub mod adapter;
pub mod blocks;
pub mod commands;
pub mod events;
pub mod socket;
pub mod util;
pub mod web;
pub mod webhook;

use turnstone_plugin_sdk::channel::{Channel, ChannelInfo};
use turnstone_plugin_sdk::host::{self, Level};

/// The platform name.
pub const PLATFORM: &str = "slack";
/// The longest message text the adapter posts (Slack truncates far later,
/// but recommends at most 4000 characters).
pub const MAX_MESSAGE_CHARS: u32 = 3900;
/// The default attachment download limit (8 MiB).
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 8 * 1024 * 1024;

/// The operator's settings for this plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The Web API base URL (`api_base`).
    pub api_base: String,
    /// Files above this size are skipped (`max_attachment_bytes`).
    pub max_attachment_bytes: u64,
}

impl Config {
    /// Builds the config from raw values (defaults for missing or bad ones).
    pub fn from_values(api_base: Option<&str>, max_attachment_bytes: Option<&str>) -> Self {
        Self {
            api_base: api_base
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .unwrap_or(web::DEFAULT_API_BASE)
                .trim_end_matches('/')
                .to_string(),
            max_attachment_bytes: max_attachment_bytes
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(DEFAULT_MAX_ATTACHMENT_BYTES),
        }
    }

    /// Reads the plugin config from the host.
    pub fn load() -> Self {
        Self::from_values(
            host::config("api_base").as_deref(),
            host::config("max_attachment_bytes").as_deref(),
        )
    }
}

pub(crate) fn info(message: &str) {
    host::log(Level::Info, message);
}

pub(crate) fn warn(message: &str) {
    host::log(Level::Warn, message);
}

/// The adapter.
pub struct Slack;

impl Channel for Slack {
    fn info() -> ChannelInfo {
        ChannelInfo {
            platform: PLATFORM.into(),
            max_message_chars: MAX_MESSAGE_CHARS,
        }
    }

    fn run() -> Result<(), String> {
        let config = Config::load();
        let mut adapter = adapter::Adapter::new(&config);
        socket::run(&mut adapter)
    }
}

turnstone_plugin_sdk::register_channel!(Slack);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_defaults() {
        let c = Config::from_values(None, None);
        assert_eq!(c.api_base, "https://slack.com/api");
        assert_eq!(c.max_attachment_bytes, 8_388_608);
        let c = Config::from_values(Some("http://127.0.0.1:9/api/"), Some("1024"));
        assert_eq!(c.api_base, "http://127.0.0.1:9/api");
        assert_eq!(c.max_attachment_bytes, 1024);
        assert_eq!(
            Config::from_values(Some(" "), Some("lots")),
            Config::from_values(None, None)
        );
    }
}
