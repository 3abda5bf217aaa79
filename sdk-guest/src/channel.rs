//! Writing chat-platform adapters (Discord, Slack): implement [`Channel`] and
//! call [`register_channel!`](crate::register_channel). One long-lived
//! instance runs [`Channel::run`]: it holds the platform's WebSocket
//! ([`Socket`]) and loops on [`wait`], which returns the socket's next
//! message, a [`Command`] from the host (post, edit, approval prompt,
//! webhook), a timeout (heartbeats, rate-limit retries) or a stop.
//! Outbound REST calls go through [`crate::http`] as usual.

/// Generated bindings of the channel world (imports shared with the tool world).
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        world: "channel-plugin",
        path: "../wit/v0.2.0",
        pub_export_macro: true,
        export_macro_name: "__export_channel_plugin",
        default_bindings_module: "turnstone_plugin_sdk::channel::bindings",
        with: {
            "turnstone:plugin/types@0.1.0": crate::bindings::turnstone::plugin0_1_0::types,
            "turnstone:plugin/log@0.1.0": crate::bindings::turnstone::plugin0_1_0::log,
            "turnstone:plugin/config@0.1.0": crate::bindings::turnstone::plugin0_1_0::config,
            "turnstone:plugin/process@0.1.0": crate::bindings::turnstone::plugin0_1_0::process,
            "turnstone:plugin/kv@0.1.0": crate::bindings::turnstone::plugin0_1_0::kv,
            "turnstone:plugin/clock@0.1.0": crate::bindings::turnstone::plugin0_1_0::clock,
            "turnstone:plugin/session-info@0.2.0": crate::bindings::turnstone::plugin0_2_0::session_info,
            "turnstone:plugin/memory@0.2.0": crate::bindings::turnstone::plugin0_2_0::memory,
            "turnstone:plugin/history@0.2.0": crate::bindings::turnstone::plugin0_2_0::history,
            "turnstone:plugin/skills@0.2.0": crate::bindings::turnstone::plugin0_2_0::skills,
            "turnstone:plugin/agents@0.2.0": crate::bindings::turnstone::plugin0_2_0::agents,
            "turnstone:plugin/watches@0.2.0": crate::bindings::turnstone::plugin0_2_0::watches,
            "turnstone:plugin/notify-targets@0.2.0": crate::bindings::turnstone::plugin0_2_0::notify_targets,
            "turnstone:plugin/preview@0.2.0": crate::bindings::turnstone::plugin0_2_0::preview,
            "turnstone:plugin/websocket@0.2.0": generate,
            "turnstone:plugin/channel-types@0.2.0": generate,
            "turnstone:plugin/channel-host@0.2.0": generate,
        },
    });
}

use bindings::turnstone::plugin0_2_0::{channel_host, websocket};

pub use bindings::turnstone::plugin0_2_0::channel_types::{
    ApprovalAction, ApprovalPrompt, Attachment, ChannelInfo, Command, CommandResult, Conversation,
    Decision, Edit, Inbound, InboundMessage, LinkState, Post, Posted, SettlePrompt, WebhookRequest,
    WebhookResponse,
};
pub use channel_host::Wake;
pub use websocket::{CloseFrame, Message, WsError};

/// An open WebSocket connection (granted per host like `http`).
pub type Socket = websocket::Connection;

/// Opens a WebSocket to `url` with extra headers (secret references allowed).
pub fn connect(url: &str, headers: &[(String, String)]) -> Result<Socket, WsError> {
    websocket::connect(url, headers)
}

/// Waits for the socket's next message, a host command, `timeout_ms` or a stop.
pub fn wait(socket: Option<&Socket>, timeout_ms: u32) -> Wake {
    channel_host::wait(socket, timeout_ms)
}

/// Reports an inbound message or button press to the host.
pub fn emit(event: &Inbound) {
    channel_host::emit(event)
}

/// Answers host command `id`.
pub fn complete(id: u64, result: Result<CommandResult, String>) {
    channel_host::complete(id, result.as_ref().map_err(String::as_str))
}

/// Reports the platform link's state (shown in `plugins list`).
pub fn set_state(state: LinkState, detail: &str) {
    channel_host::set_state(state, detail)
}

/// Checks an HMAC-SHA256 signature made with a granted secret the adapter
/// never sees (Slack's signing secret).
pub fn verify_hmac_sha256(
    secret: &str,
    message: &[u8],
    signature_hex: &str,
) -> Result<bool, crate::CapabilityError> {
    channel_host::verify_hmac_sha256(secret, message, signature_hex)
}

/// Checks an Ed25519 signature (Discord's interaction signature).
pub fn verify_ed25519(public_key_hex: &str, message: &[u8], signature_hex: &str) -> bool {
    channel_host::verify_ed25519(public_key_hex, message, signature_hex)
}

/// A chat-platform adapter.
pub trait Channel {
    /// The platform this adapter serves.
    fn info() -> ChannelInfo;
    /// Serves the platform until [`wait`] returns [`Wake::Stop`] (return
    /// `Ok`) or the link fails for good (`Err`; the host restarts it with
    /// backoff).
    fn run() -> Result<(), String>;
}

#[doc(hidden)]
pub mod __private {
    pub use super::bindings::exports::turnstone::plugin0_2_0::channel::Guest;
}

/// Exports a [`Channel`] implementation as this component's channel.
#[macro_export]
macro_rules! register_channel {
    ($channel:ty) => {
        #[doc(hidden)]
        pub struct __TurnstoneChannel;

        impl $crate::channel::__private::Guest for __TurnstoneChannel {
            fn info() -> $crate::channel::ChannelInfo {
                <$channel as $crate::channel::Channel>::info()
            }

            fn run() -> ::std::result::Result<(), ::std::string::String> {
                <$channel as $crate::channel::Channel>::run()
            }
        }

        $crate::channel::bindings::__export_channel_plugin!(__TurnstoneChannel with_types_in $crate::channel::bindings);
    };
}
