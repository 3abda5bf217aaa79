//! `/v1/api/admin/mcp-servers`: MCP servers defined at run time — create,
//! update, delete (audited) and the definitions of every server on this node.
//! Enabling, granting, revoking and reloading are the plugin routes
//! (`/v1/api/admin/plugins/{name}/…`): an MCP server is a plugin of kind `mcp`.
//! Approve scope (checked by the middleware) plus `admin.plugins`.

use super::mcp_types::{CreateMcpServer, McpServerDefinition, McpServerList, UpdateMcpServer};
use super::plugins::{actor, admin, peer, state_conflict, view_of};
use super::plugins_types::{NoPluginAdmin, PluginRefused, PluginView, Uninstalled};
use super::{BadInput, Guarded, Missing, TooLarge};
use crate::http::{ApiError, AppState, Identity, parse};
use crate::plugins::AdminError;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use std::net::SocketAddr;

#[utoipa::path(
    get,
    path = "/v1/api/admin/mcp-servers",
    tag = "admin",
    summary = "MCP server definitions on this node (config.toml and database)",
    responses(
        (status = 200, description = "Every server, by name", body = McpServerList),
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<McpServerList>, ApiError> {
    let a = admin(&state, &id)?;
    let servers = a
        .mcp()
        .map(|h| h.servers())
        .unwrap_or_default()
        .iter()
        .map(|s| {
            let mut config = s.config.clone();
            // Enabled is the plugin toggle, not part of the definition.
            config.disabled = false;
            McpServerDefinition {
                name: s.name.clone(),
                origin: s.origin.into(),
                definition: serde_json::to_value(&config).unwrap_or_default(),
            }
        })
        .collect();
    Ok(Json(McpServerList { servers }))
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/mcp-servers",
    tag = "admin",
    summary = "Create an MCP server (nothing granted: grant it before it can connect)",
    request_body = CreateMcpServer,
    responses(
        (status = 201, description = "Created; review `requested` and grant it", body = PluginView),
        BadInput,
        (status = 409, description = "The name is taken by a component, a config.toml server \
            or another MCP server", body = crate::routes::ErrorBody),
        TooLarge,
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<PluginView>), ApiError> {
    let body: CreateMcpServer = parse(&body)?;
    let a = admin(&state, &id)?;
    a.create_mcp_server(
        &actor(&id, peer(addr)),
        &body.name,
        body.server.into(),
        body.enabled.unwrap_or(true),
    )
    .await?;
    Ok((StatusCode::CREATED, Json(view_of(&a, &body.name).await?)))
}

#[utoipa::path(
    put,
    path = "/v1/api/admin/mcp-servers/{name}",
    tag = "admin",
    summary = "Replace an MCP server's definition (grant and enabled state are kept)",
    params(("name" = String, Path, description = "Server name")),
    request_body = UpdateMcpServer,
    responses(
        (status = 200, description = "The server after the change", body = PluginView),
        BadInput,
        TooLarge,
        PluginRefused,
    )
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<PluginView>, ApiError> {
    let body: UpdateMcpServer = parse(&body)?;
    let a = admin(&state, &id)?;
    a.update_mcp_server(&actor(&id, peer(addr)), &name, body.server.into())
        .await?;
    Ok(Json(view_of(&a, &name).await?))
}

#[utoipa::path(
    delete,
    path = "/v1/api/admin/mcp-servers/{name}",
    tag = "admin",
    summary = "Delete an MCP server defined at run time (its plugin row goes with it)",
    params(("name" = String, Path, description = "Server name")),
    responses(
        (status = 200, description = "Removed", body = Uninstalled),
        Missing,
        (status = 409, description = "Defined in config.toml (change it there or disable it)",
            body = crate::routes::ErrorBody),
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<Uninstalled>, ApiError> {
    let a = admin(&state, &id)?;
    a.delete_mcp_server(&actor(&id, peer(addr)), &name)
        .await
        .map_err(|e| match e {
            AdminError::Invalid(m) => ApiError::Conflict(m),
            other => state_conflict(other),
        })?;
    Ok(Json(Uninstalled {
        status: "ok",
        removed: name,
    }))
}
