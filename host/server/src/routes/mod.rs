//! The `/v1` API beyond authentication: workstreams, SSE, models, dashboard,
//! memories, and the shared helpers their handlers use.

pub(crate) mod attachments;
mod auth;
mod channels;
mod governance;
mod governance_types;
mod info;
mod info_types;
mod mcp_servers;
mod mcp_types;
mod memories;
mod notify;
mod openapi;
mod plugins;
mod plugins_types;
mod previews;
mod secret_types;
mod skills;
mod sse;
mod work;
pub(crate) mod ws;
mod ws_types;

use serde::{Deserialize, Deserializer};

/// Reads an integer, also from an integral float (`2.0`), as Python clients
/// and JSON Schema's `integer` allow.
pub(crate) fn integral<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    use serde::de::Error;
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Some(i)),
            (None, Some(f)) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(Some(f as i64)),
            _ => Err(D::Error::custom(format!("{n} is not an integer in range"))),
        },
    }
}

use crate::auth::Scope;
use crate::http::{ApiError, AppState, Identity};
use crate::manager::Manager;
use crate::metrics::Metrics;
use crate::workstream::Workstream;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub use info::{health_fields, metrics_text};
pub use openapi::{ApiDoc, docs_page, openapi_json};

/// The error body every failing route answers with.
#[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

/// The error body of an answer to retry later (429, 503).
#[derive(serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct RetryBody {
    /// What went wrong.
    pub error: String,
    /// Seconds to wait (also in `Retry-After`).
    pub retry_after: u64,
}

/// `{"status": "ok"}`, the answer of simple actions.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct StatusOk {
    /// Always `ok`.
    pub status: &'static str,
}

impl StatusOk {
    /// The answer.
    pub fn ok() -> axum::Json<Self> {
        axum::Json(Self { status: "ok" })
    }
}

/// What every route behind authentication may answer besides its own.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documentation only: the variants name the answers
pub enum Guarded {
    /// Credentials missing or invalid.
    #[response(status = 401, description = "Missing or invalid credentials")]
    Unauthorized(ErrorBody),
    /// The scope or a permission is missing.
    #[response(status = 403, description = "Scope or permission missing")]
    Forbidden(ErrorBody),
    /// Per-address rate limit (`[ratelimit] enabled`).
    #[response(status = 429, description = "Rate limit exceeded (Retry-After)")]
    RateLimited(RetryBody),
}

/// A malformed path, query or body.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documentation only
pub enum BadInput {
    /// What is wrong with the request.
    #[response(status = 400, description = "Malformed path, query or body")]
    BadRequest(ErrorBody),
}

/// The workstream (or item) named in the path is not there for the caller.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documentation only
pub enum Missing {
    /// Unknown, not loaded, or another user's.
    #[response(status = 404, description = "Not found (or not the caller's)")]
    NotFound(ErrorBody),
}

/// A body over the route's size limit.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // documentation only
pub enum TooLarge {
    /// Too large.
    #[response(status = 413, description = "Body too large")]
    PayloadTooLarge(ErrorBody),
}

/// The running node: its workstreams, metrics and shutdown signal.
pub struct Node {
    /// Loaded workstreams.
    pub mgr: Arc<Manager>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Cancelled when the server shuts down (ends SSE streams).
    pub shutdown: CancellationToken,
    /// Plugin administration (hot reload, grants); `None` without one.
    pub plugins: Option<Arc<crate::plugins::PluginAdmin>>,
    /// Chat channel adapters; `None` when channels are off.
    pub channels: Option<Arc<crate::channels::ChannelHub>>,
}

/// The auth routes (relative to `/v1`).
pub fn auth_routes() -> axum::Router<AppState> {
    auth::routes()
}

/// The routes outside `/v1`: health, metrics and the API description.
pub fn node_routes() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/health", get(info::health))
        .route("/metrics", get(info::metrics))
        .route("/openapi.json", get(openapi_json))
        .route("/docs", get(docs_page))
}

/// API routes (relative to `/v1`).
pub fn api() -> axum::Router<AppState> {
    axum::Router::new()
        .route("/api/workstreams", get(ws::list))
        .route(
            "/api/workstreams/new",
            post(ws::create).layer(DefaultBodyLimit::max(
                attachments::MAX_PENDING.min(4) * attachments::MAX_BYTES + (1 << 20),
            )),
        )
        .route("/api/workstreams/saved", get(info::saved))
        .route("/api/workstreams/{ws_id}", get(ws::detail))
        .route(
            "/api/workstreams/{ws_id}/send",
            post(ws::send).delete(ws::unsend),
        )
        .route("/api/workstreams/{ws_id}/approve", post(ws::approve))
        .route("/api/workstreams/{ws_id}/cancel", post(ws::cancel))
        .route("/api/workstreams/{ws_id}/close", post(ws::close))
        .route("/api/workstreams/{ws_id}/open", post(ws::open))
        .route("/api/workstreams/{ws_id}/delete", post(ws::delete_ws))
        .route("/api/workstreams/{ws_id}/title", post(ws::title))
        .route("/api/workstreams/{ws_id}/rewind", post(ws::rewind))
        .route("/api/workstreams/{ws_id}/retry", post(ws::retry))
        .route("/api/workstreams/{ws_id}/history", get(info::history))
        .route("/api/workstreams/{ws_id}/export", get(info::export))
        .route("/api/workstreams/{ws_id}/children", get(work::children))
        .route("/api/workstreams/{ws_id}/watches", get(work::watches))
        .route(
            "/api/workstreams/{ws_id}/watches/{watch_id}/cancel",
            post(work::cancel_watch),
        )
        .route("/api/workstreams/{ws_id}/previews", get(previews::list))
        .route(
            "/api/workstreams/{ws_id}/previews/{preview_id}",
            get(previews::content),
        )
        .route(
            "/api/workstreams/{ws_id}/notify-targets",
            get(notify::ws_list).post(notify::ws_create),
        )
        .route(
            "/api/workstreams/{ws_id}/notify-targets/{name}",
            axum::routing::delete(notify::ws_delete),
        )
        .route(
            "/api/notify-targets",
            get(notify::list).post(notify::create),
        )
        .route(
            "/api/notify-targets/{name}",
            axum::routing::delete(notify::delete),
        )
        .route(
            "/api/workstreams/{ws_id}/events",
            get(sse::workstream_events),
        )
        .route("/api/events/global", get(sse::global_events))
        .route("/api/channels/link-code", post(channels::link_code))
        .route("/api/channels/links", get(channels::links))
        .route(
            "/api/channels/links/{channel_type}/{channel_user_id}",
            axum::routing::delete(channels::unlink),
        )
        .route(
            "/channels/{plugin}/webhook",
            post(channels::webhook).layer(DefaultBodyLimit::max(channels::MAX_WEBHOOK_BODY)),
        )
        .route("/api/command", post(ws::command))
        .route("/api/dashboard", get(info::dashboard))
        .route("/api/models", get(info::models))
        .route("/api/skills", get(skills::list))
        .route(
            "/api/admin/skills",
            get(skills::admin_list).post(skills::create),
        )
        .route(
            "/api/admin/skills/{name}",
            axum::routing::put(skills::update).delete(skills::delete),
        )
        .route("/api/admin/skills/{name}/versions", get(skills::versions))
        .route("/api/memories", get(memories::list).post(memories::save))
        .route(
            "/api/memories/search",
            post(memories::search)
                .get(memories::get_named_search)
                .delete(memories::remove_named_search),
        )
        .route(
            "/api/memories/{name}",
            get(memories::get_one).delete(memories::remove),
        )
        .route(
            "/api/workstreams/{ws_id}/attachments",
            get(attachments::list)
                .post(attachments::upload)
                .layer(DefaultBodyLimit::max(attachments::MAX_BYTES + (1 << 20))),
        )
        .route(
            "/api/workstreams/{ws_id}/attachments/{attachment_id}",
            delete(attachments::remove),
        )
        .route(
            "/api/workstreams/{ws_id}/attachments/{attachment_id}/content",
            get(attachments::content),
        )
        .route("/api/admin/plugins", get(plugins::list))
        .route("/api/admin/plugins/audit", get(plugins::audit))
        .route("/api/admin/plugins/reload", post(plugins::reload_all))
        .route(
            "/api/admin/plugins/install",
            post(plugins::install).layer(DefaultBodyLimit::max(
                plugins::MAX_COMPONENT_BYTES + (1 << 20),
            )),
        )
        .route(
            "/api/admin/plugins/{name}",
            get(plugins::detail).delete(plugins::uninstall),
        )
        .route("/api/admin/plugins/{name}/enable", post(plugins::enable))
        .route("/api/admin/plugins/{name}/disable", post(plugins::disable))
        .route(
            "/api/admin/plugins/{name}/grants",
            axum::routing::put(plugins::set_grants),
        )
        .route("/api/admin/plugins/{name}/revoke", post(plugins::revoke))
        .route(
            "/api/admin/plugins/{name}/config",
            axum::routing::put(plugins::set_config),
        )
        .route(
            "/api/admin/plugins/{name}/reload",
            post(plugins::reload_one),
        )
        .route(
            "/api/admin/mcp-servers",
            get(mcp_servers::list).post(mcp_servers::create),
        )
        .route(
            "/api/admin/policies",
            get(governance::list_policies).post(governance::create_policy),
        )
        .route(
            "/api/admin/policies/{policy_id}",
            axum::routing::put(governance::update_policy).delete(governance::delete_policy),
        )
        .route("/api/admin/usage", get(governance::usage))
        .route("/api/admin/audit", get(governance::audit))
        .route(
            "/api/admin/mcp-servers/{name}",
            axum::routing::put(mcp_servers::update).delete(mcp_servers::delete),
        )
}

/// The node, or 503 when this server runs without an engine.
pub(crate) fn node(state: &AppState) -> Result<&Arc<Node>, ApiError> {
    state
        .node
        .as_ref()
        .ok_or_else(|| ApiError::Unavailable("this server runs without a session engine".into()))
}

/// The owner filter: `None` for service identities (they see everything).
pub(crate) fn owner(id: &Identity) -> Option<&str> {
    if id.scopes.contains(&Scope::Service) {
        None
    } else {
        Some(id.user_id.as_str())
    }
}

/// A loaded workstream the caller may touch (404 otherwise, so other users'
/// ids are not revealed).
pub(crate) fn loaded(
    state: &AppState,
    id: &Identity,
    ws_id: &str,
) -> Result<Arc<Workstream>, ApiError> {
    let node = node(state)?;
    match node.mgr.get(ws_id) {
        Some(w) if owner(id).is_none() || w.core.user_id.as_deref() == owner(id) => Ok(w),
        _ => Err(not_found()),
    }
}

/// A workstream row (loaded or saved) the caller may see (404 otherwise).
pub(crate) async fn visible_row(
    state: &AppState,
    id: &Identity,
    ws_id: &str,
) -> Result<turnstone_storage::types::Workstream, ApiError> {
    let row = state
        .db
        .get_workstream(ws_id)
        .await?
        .ok_or_else(not_found)?;
    if owner(id).is_some() && row.user_id.as_deref() != owner(id) {
        return Err(not_found());
    }
    Ok(row)
}

/// 404 `Workstream not found`.
pub(crate) fn not_found() -> ApiError {
    ApiError::workstream_not_found()
}

/// 403 unless the caller holds `perm` (or, for creation, `alt`).
pub(crate) fn need(id: &Identity, perm: &str) -> Result<(), ApiError> {
    if id.scopes.contains(&Scope::Service) || id.permissions.iter().any(|p| p == perm) {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!("permission {perm} required")))
    }
}
