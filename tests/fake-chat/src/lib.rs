//! Fake chat platforms for tests: [`FakeDiscord`] and [`FakeSlack`], two
//! loopback servers that speak the platforms' documented wire formats
//! (Discord gateway v10 + REST, Slack Socket Mode + Web API; see
//! `docs/design/channels-wire.md`) so integration tests can drive the real
//! Discord and Slack adapter components against them.
//!
//! Each server binds `127.0.0.1:0`, records what it receives for assertions,
//! lets a test inject platform events and faults, and shuts down (server task
//! aborted, live WebSockets dropped) when its handle is dropped. Injection and
//! inspection methods are synchronous; the `wait_*` helpers poll.
//!
//! [`slack_signature`] and [`discord_sign`] sign bodies the way the platforms
//! do for their HTTP (webhook) modes.

mod discord;
mod http;
mod record;
mod sign;
mod slack;

/// Re-exported so tests can name `ed25519_dalek::SigningKey` without a
/// dependency of their own.
pub use ed25519_dalek;

pub use discord::{BOT_ID, BOT_NAME, FakeDiscord, MessageSpec};
pub use record::{ApiCall, RestCall, wait_until};
pub use sign::{
    discord_public_key_hex, discord_sign, discord_test_key, hmac_sha256, slack_signature,
};
pub use slack::{APP_ID, BOT_USER_ID, FakeSlack, SLACK_BOT_ID, TEAM_ID, slack_file};
