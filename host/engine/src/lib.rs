//! Turnstone's session engine (no HTTP or terminal code here).
//!
//! Built so far: the provider-neutral canonical turn IR ([`turn`]), orphan
//! repair ([`repair`]), tool-output truncation ([`truncate`]), lowering to the
//! provider WIT ([`lower`]), the front-end trait ([`ui`]) and a first
//! conversation loop ([`session`]: stream, prepare, approve, execute in
//! parallel, retry and fallback, persistence and resume via [`persist`]).
//! cancel and compaction) and the model registry ([`models`]).

pub mod lower;
pub mod models;
pub mod persist;
pub mod repair;
pub mod session;
pub mod truncate;
pub mod turn;
pub mod ui;

pub use turn::{ContentPart, EffectStatus, ProviderNative, Role, ToolCall, Turn, TurnMeta};
