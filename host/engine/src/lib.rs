//! Turnstone's session engine (no HTTP or terminal code here).
//!
//! Built so far: the provider-neutral canonical turn IR ([`turn`]), orphan
//! repair ([`repair`]) and tool-output truncation ([`truncate`]). The
//! conversation loop, approvals, model registry and provider bindings build on
//! these.

pub mod lower;
pub mod repair;
pub mod truncate;
pub mod turn;

pub use turn::{ContentPart, EffectStatus, ProviderNative, Role, ToolCall, Turn, TurnMeta};
