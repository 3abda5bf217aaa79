//! Turnstone's MCP side.
//!
//! * A client on rmcp for stdio and streamable-HTTP servers
//!   ([`hub::McpHub`], [`server::McpServer`]): each server is supervised
//!   (reconnect with backoff, a circuit breaker, list_changed refreshes) and
//!   may touch only what `[plugins.grants.<server>]` grants ([`grants`]).
//! * `tool_search` ([`search`]): BM25 over tool names and descriptions.
//! * The other direction ([`serve`]): enabled tool components served to
//!   MCP clients over stdio or streamable HTTP.

pub mod breaker;
pub mod config;
pub mod connect;
pub mod content;
pub mod grants;
pub mod handler;
pub mod hub;
pub mod search;
pub mod serve;
pub mod server;
pub mod tool;

pub use config::{ConfigError, McpConfig, ServerConfig};
pub use connect::ServerEnv;
pub use grants::Origin;
pub use hub::{HubChange, McpHub, ServerWish, Summary};
pub use server::{McpCallError, McpServer, ServerState};
pub use tool::McpTool;
