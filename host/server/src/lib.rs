//! Turnstone's HTTP server: the original's `/v1` API and SSE wire contract on
//! axum, with authentication always on.
//!
//! - [`auth`]: scopes, roles and permissions, the per-route scope table, JWTs.
//! - [`passwords`]: Argon2id hashing (shared with `turnstone admin`).
//! - [`http`]: the router, authentication, rate limiting, JSON errors, metrics.
//! - [`manager`] / [`workstream`]: loaded workstreams, their session workers and
//!   the bridge from engine callbacks to SSE events ([`events`], [`global`]).
//! - [`plugins`]: plugin administration (hot reload, grants, install) and its
//!   state in the `plugins` table, polled so every node follows.
//! - [`serve`]: listener, idle reaper and graceful shutdown.
//! - [`web`]: the browser UI, embedded in the binary.

pub mod audit;
pub mod auth;
pub mod channels;
pub mod content_batch;
pub mod error;
pub mod events;
pub mod fd_table;
pub mod global;
pub mod http;
pub mod image_pages;
pub mod login_throttle;
pub mod manager;
pub mod memory;
pub mod metrics;
pub mod passwords;
pub mod plugins;
pub mod ratelimit;
pub mod routes;
pub mod serve;
pub mod watches;
pub mod web;
pub mod workstream;
