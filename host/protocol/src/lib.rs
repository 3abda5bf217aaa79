//! The one protocol between Turnstone's session engine and every front end
//! (the HTTP server, the terminal, and whatever comes next): [`Op`]s go in,
//! [`Event`]s come out, and the core never knows who listens.
//!
//! The types are the wire format. Serialising an [`Event`] (wrapped in a
//! [`WsEvent`] with its workstream id) through [`wire::to_json`] gives exactly
//! the `data:` line the original server's clients read
//! (`../shared/reference/wire-contract.md` §3): the `type` tag, the field names,
//! `null` where the original sends `null`, keys in sorted order. The global
//! stream's frames are [`GlobalEvent`]s. Every type derives `Serialize`,
//! `Deserialize` and `utoipa::ToSchema`, so `/openapi.json` describes the
//! events from the same definitions the server sends.
//!
//! No dependency on the engine: front ends and test tools use this crate
//! alone.

pub mod event;
pub mod global;
pub mod op;
pub mod safety;
pub mod wire;
pub mod work;

pub use event::*;
pub use global::*;
pub use op::*;
pub use safety::*;
pub use work::*;
