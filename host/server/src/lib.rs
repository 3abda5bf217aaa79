//! Turnstone's HTTP server. Built so far: the authorization model shared by
//! every route ([`auth`]): scopes, roles and permissions, the per-route scope
//! table of the original server's wire contract, and HS256 session JWTs. The
//! routes, SSE and the browser UI arrive in later steps of issue #7.

pub mod auth;
