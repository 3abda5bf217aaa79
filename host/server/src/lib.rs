//! Turnstone's HTTP server. Built so far: the authorization model shared by
//! every route ([`auth`]: scopes, roles and permissions, the per-route scope
//! table of the original server's wire contract, HS256 session JWTs), password
//! hashing ([`passwords`]), and the first routes with the authentication
//! middleware ([`http`]: `/health`, auth status/setup/login/logout/whoami).
//! Workstream routes, SSE, `turnstone serve` and the browser UI arrive in later
//! steps of issue #7.

pub mod auth;
pub mod http;
pub mod passwords;
