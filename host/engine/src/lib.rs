//! Turnstone's session engine (no HTTP or terminal code here).
//!
//! - [`turn`]: the provider-neutral canonical turn IR; [`repair`] mends
//!   orphaned tool calls; [`truncate`] bounds tool output; [`lower`] turns
//!   history into the provider WIT; [`persist`] maps turns to storage rows.
//! - [`session`]: one conversation — stream the model, prepare, approve and
//!   run tools in parallel, retry and fall back, persist and resume, cancel,
//!   compact. It emits [`turnstone_protocol::Event`]s into an
//!   [`events::EventSink`] and never knows who listens.
//! - [`runner`]: the one way front ends drive a session: a
//!   [`runner::SessionHandle`] takes [`turnstone_protocol::Op`]s, the events
//!   come out of a stream.
//! - [`models`]: the model registry (aliases, fallbacks, live reload).
//! - [`watch`]: watches of a session and the node's scheduler that polls them.

pub mod event_log;
pub mod events;
pub mod lower;
pub mod models;
pub mod persist;
pub mod repair;
pub mod runner;
pub mod safety;
pub mod session;
pub mod skills;
pub mod truncate;
pub mod turn;
pub mod watch;

pub use turn::{ContentPart, EffectStatus, ProviderNative, Role, ToolCall, Turn, TurnMeta};
pub use turnstone_protocol::SessionState;

/// A random 32-hex id (approval cycles, compactions, queued messages).
pub fn random_hex() -> String {
    let mut b = [0u8; 16];
    // The OS RNG failing is not recoverable in any useful way; fall back to
    // time-derived bytes rather than abort the turn.
    if getrandom::fill(&mut b).is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b = t.to_le_bytes();
    }
    hex::encode(b)
}
