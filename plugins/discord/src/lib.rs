//! Discord channel adapter: gateway v10 for inbound messages and button
//! presses, REST v10 for posts, edits and approval prompts, and HTTP
//! interactions (webhook mode) verified with the application's Ed25519 key.
//!
//! Configuration (operator-set strings): `api_base` (default
//! `https://discord.com/api/v10`), `max_attachment_bytes` (default 8 MiB),
//! `public_key` (hex, for HTTP interactions) and `intents` (default 37377).
//! The bot token is the secret `DISCORD_BOT_TOKEN`; the adapter only ever holds a
//! reference to it, which the host substitutes in the `Authorization`
//! header and in the gateway's IDENTIFY/RESUME frames.

#![warn(missing_docs)]

pub mod config;
pub mod gateway;
pub mod interactions;
pub mod messages;
pub mod queue;
pub mod rest;
pub mod util;

use config::Config;
use gateway::{Event, Gateway};
use queue::{Job, Queue};
use rest::{Call, Outcome, Rest};
use serde_json::Value;
use turnstone_plugin_sdk::channel::{
    Channel, ChannelInfo, Command, CommandResult, Inbound, LinkState, Wake, complete, emit,
    set_state, wait,
};
use turnstone_plugin_sdk::host::{Level, log, now_ms, secret_ref, sleep_ms};

/// The longest a synchronous step (interaction callback, attachment
/// download wait) may hold the loop while a global rate limit passes.
const SYNC_BUDGET_MS: u64 = 3000;
/// The longest `wait` when nothing is scheduled.
const IDLE_WAIT_MS: u64 = 60_000;
/// Attempts at `GET /gateway/bot` when it is rate limited.
const GATEWAY_BOT_TRIES: u32 = 5;

/// The Discord adapter.
pub struct Discord;

impl Channel for Discord {
    fn info() -> ChannelInfo {
        ChannelInfo {
            platform: "discord".into(),
            max_message_chars: util::MAX_CONTENT_CHARS as u32,
        }
    }

    fn run() -> Result<(), String> {
        let result = start();
        if let Err(e) = &result {
            set_state(LinkState::Failed, e);
        }
        result
    }
}

turnstone_plugin_sdk::register_channel!(Discord);

/// The `wait` timeout for the next deadline: at least 10 ms, at most a minute.
pub fn wait_timeout(deadline: Option<u64>, now: u64) -> u32 {
    let ms = deadline.map_or(IDLE_WAIT_MS, |d| {
        d.saturating_sub(now).clamp(10, IDLE_WAIT_MS)
    });
    u32::try_from(ms).unwrap_or(u32::MAX)
}

fn start() -> Result<(), String> {
    let config = Config::load();
    set_state(LinkState::Connecting, "fetching the gateway URL");
    let token_ref = secret_ref("DISCORD_BOT_TOKEN").map_err(|e| {
        format!(
            "the bot token: {}",
            turnstone_plugin_sdk::describe_denial(&e)
        )
    })?;
    let mut rest = Rest::new(&config.api_base, &token_ref);
    let url = gateway_bot_url(&mut rest)?;
    let gateway = Gateway::new(&url, &token_ref, config.intents, now_ms());
    Adapter {
        config,
        rest,
        gateway,
        queue: Queue::default(),
    }
    .serve()
}

/// `GET /gateway/bot`'s `url`.
fn gateway_bot_url(rest: &mut Rest) -> Result<String, String> {
    let call = Call::get("/gateway/bot");
    for _ in 0..GATEWAY_BOT_TRIES {
        match rest.send(&call, true) {
            Outcome::Ok(v) => {
                return util::str_at(&v, "url")
                    .map(str::to_string)
                    .ok_or_else(|| "GET /gateway/bot returned no url".to_string());
            }
            Outcome::Failed {
                status: Some(401), ..
            } => return Err("Discord rejected the bot token (401)".into()),
            Outcome::Failed { message, .. } => return Err(message),
            Outcome::Limited(ms) => {
                if !sleep_ms(ms) {
                    return Err("stopped while rate limited".into());
                }
            }
        }
    }
    Err("GET /gateway/bot is still rate limited".into())
}

struct Adapter {
    config: Config,
    rest: Rest,
    gateway: Gateway,
    queue: Queue,
}

impl Adapter {
    fn serve(mut self) -> Result<(), String> {
        let result = self.serve_loop();
        if let Err(e) = &result {
            self.queue
                .fail_all(&format!("the Discord adapter failed: {e}"));
        }
        result
    }

    fn serve_loop(&mut self) -> Result<(), String> {
        loop {
            self.gateway.connect_if_due(now_ms())?;
            self.queue.pump(&mut self.rest);
            self.gateway.tick(now_ms())?;
            let deadline = [self.gateway.next_deadline(), self.queue.next_deadline()]
                .into_iter()
                .flatten()
                .min();
            let timeout = wait_timeout(deadline, now_ms());
            match wait(self.gateway.socket(), timeout) {
                Wake::Socket(message) => {
                    if let Some(event) = self.gateway.on_message(message, now_ms())? {
                        self.on_event(event);
                    }
                }
                Wake::Command((id, command)) => self.on_command(id, command),
                Wake::Timeout => {}
                Wake::Stop => {
                    log(Level::Info, "stopping the Discord adapter");
                    self.gateway.shutdown();
                    self.queue
                        .fail_all("the Discord adapter stopped before the request was sent");
                    return Ok(());
                }
            }
        }
    }

    fn on_event(&mut self, event: Event) {
        let budget = self.gateway.slack_ms(now_ms(), SYNC_BUDGET_MS);
        match event {
            Event::Message(d) => self.on_message_create(&d, budget),
            Event::Interaction(d) => {
                interactions::on_gateway_interaction(&d, &mut self.rest, budget);
            }
        }
    }

    fn on_message_create(&mut self, d: &Value, budget: u64) {
        let max = self.config.max_attachment_bytes;
        let Some(draft) = messages::parse_message(d, self.gateway.bot_id(), max) else {
            return;
        };
        let message = messages::fetch_attachments(draft, &self.rest, max, budget);
        emit(&Inbound::Message(message));
    }

    fn on_command(&mut self, id: u64, command: Command) {
        if let Command::Webhook(request) = &command {
            let response = interactions::on_webhook(request, self.config.public_key.as_deref());
            complete(id, Ok(CommandResult::Webhook(response)));
            return;
        }
        if let Some(job) = Job::from_command(command) {
            self.queue.push(id, job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_timeouts_are_bounded() {
        assert_eq!(wait_timeout(None, 5), 60_000);
        assert_eq!(wait_timeout(Some(3), 5), 10);
        assert_eq!(wait_timeout(Some(505), 5), 500);
        assert_eq!(wait_timeout(Some(u64::MAX), 5), 60_000);
    }
}
