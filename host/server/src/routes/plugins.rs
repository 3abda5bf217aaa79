//! `/v1/api/admin/plugins`: list, enable, disable, grants, revoke, reload,
//! install (upload, reviewed before anything is granted), uninstall, and the
//! plugin audit trail. Approve scope (checked by the middleware) plus the
//! `admin.plugins` permission.

use super::{need, node};
use crate::http::{ApiError, AppState, Identity, bad_request, parse};
use crate::plugins::{Actor, AdminError, PluginAdmin, plugin_view};
use axum::extract::{ConnectInfo, Multipart, Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use turnstone_runtime::Capabilities;

/// Largest accepted component upload.
pub(crate) const MAX_COMPONENT_BYTES: usize = 64 << 20;

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        let status = match &e {
            AdminError::NotFound(_) => StatusCode::NOT_FOUND,
            AdminError::Invalid(_) => StatusCode::BAD_REQUEST,
            AdminError::Conflict(_) => StatusCode::CONFLICT,
            AdminError::Stopped => StatusCode::SERVICE_UNAVAILABLE,
            AdminError::Storage(_) | AdminError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        ApiError(status, e.to_string())
    }
}

fn admin(state: &AppState, id: &Identity) -> Result<Arc<PluginAdmin>, ApiError> {
    need(id, "admin.plugins")?;
    node(state)?.plugins.clone().ok_or_else(|| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "plugin administration is not running on this node".into(),
        )
    })
}

fn peer(addr: Option<Extension<ConnectInfo<SocketAddr>>>) -> Option<SocketAddr> {
    addr.map(|Extension(ConnectInfo(a))| a)
}

fn actor(id: &Identity, addr: Option<SocketAddr>) -> Actor {
    Actor {
        user_id: Some(id.user_id.clone()),
        ip: addr.map(|a| a.ip().to_string()),
        via: "api",
    }
}

async fn view_of(a: &PluginAdmin, name: &str) -> Result<Value, ApiError> {
    let entry = a.entry(name)?;
    let row = a.db().get_plugin(name).await.map_err(AdminError::from)?;
    Ok(plugin_view(&entry, row.as_ref(), a.shared()))
}

#[utoipa::path(get, path = "/v1/api/admin/plugins", tag = "admin", summary = "Plugins on this node", responses((status = 200, description = "Success", body = Object), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<Value>, ApiError> {
    let a = admin(&state, &id)?;
    let rows = a.db().list_plugins().await.map_err(AdminError::from)?;
    let snap = a.reconciler().live().snapshot();
    let plugins: Vec<Value> = snap
        .entries()
        .iter()
        .map(|e| {
            let row = rows.iter().find(|r| r.name == e.name());
            plugin_view(e, row, a.shared())
        })
        .collect();
    Ok(Json(json!({
        "plugins": plugins,
        "generation": a.reconciler().live().generation(),
    })))
}

#[utoipa::path(get, path = "/v1/api/admin/plugins/{name}", tag = "admin", summary = "One plugin", params(("name" = String, Path, description = "Plugin name")), responses((status = 200, description = "Success", body = Object), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let a = admin(&state, &id)?;
    Ok(Json(view_of(&a, &name).await?))
}

#[utoipa::path(post, path = "/v1/api/admin/plugins/{name}/enable", tag = "admin", summary = "Enable a plugin", params(("name" = String, Path, description = "Plugin name")), responses((status = 200, description = "The plugin after the change", body = Object), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn enable(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    toggle(&state, &id, addr, &name, true).await
}

#[utoipa::path(post, path = "/v1/api/admin/plugins/{name}/disable", tag = "admin", summary = "Disable a plugin", params(("name" = String, Path, description = "Plugin name")), responses((status = 200, description = "The plugin after the change", body = Object), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn disable(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    toggle(&state, &id, addr, &name, false).await
}

async fn toggle(
    state: &AppState,
    id: &Identity,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    name: &str,
    on: bool,
) -> Result<Json<Value>, ApiError> {
    let a = admin(state, id)?;
    a.set_enabled(&actor(id, peer(addr)), name, on).await?;
    Ok(Json(view_of(&a, name).await?))
}

/// `PUT …/grants`: the whole grant, or `{"default": true}` to go back to the
/// default for the plugin's origin.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct GrantBody {
    /// The new grant (capabilities object).
    #[schema(value_type = Object)]
    grant: Option<Capabilities>,
    /// Drop the operator grant (built-ins get their request, others nothing).
    #[serde(default)]
    default: bool,
}

#[utoipa::path(put, path = "/v1/api/admin/plugins/{name}/grants", tag = "admin", summary = "Set a plugin's grant", params(("name" = String, Path, description = "Plugin name")), request_body = GrantBody, responses((status = 200, description = "The plugin after the change", body = Object), (status = 400, description = "Bad grant", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn set_grants(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: GrantBody = parse(&body)?;
    let grant = match (body.grant, body.default) {
        (Some(g), false) => Some(g),
        (None, true) => None,
        _ => {
            return Err(bad_request(
                "send either {\"grant\": {...}} or {\"default\": true}",
            ));
        }
    };
    let a = admin(&state, &id)?;
    a.set_grant(&actor(&id, peer(addr)), &name, grant.as_ref())
        .await?;
    Ok(Json(view_of(&a, &name).await?))
}

/// `PUT …/config`: the plugin's config overlay (string values).
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ConfigBody {
    /// Key → value; replaces the stored overlay (`{}` clears it).
    config: std::collections::BTreeMap<String, String>,
}

#[utoipa::path(put, path = "/v1/api/admin/plugins/{name}/config", tag = "admin", summary = "Set a plugin's config overlay", params(("name" = String, Path, description = "Plugin name")), request_body = ConfigBody, responses((status = 200, description = "The plugin after the change", body = Object), (status = 400, description = "Bad body", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn set_config(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: ConfigBody = parse(&body)?;
    let a = admin(&state, &id)?;
    a.set_config(&actor(&id, peer(addr)), &name, &body.config)
        .await?;
    Ok(Json(view_of(&a, &name).await?))
}

/// `POST …/revoke`: capabilities to remove; an empty body or `{}` with
/// `"all": true` removes every one.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct RevokeBody {
    /// What to remove (capabilities object).
    #[schema(value_type = Object)]
    revoke: Option<Capabilities>,
    /// Remove everything.
    #[serde(default)]
    all: bool,
}

#[utoipa::path(post, path = "/v1/api/admin/plugins/{name}/revoke", tag = "admin", summary = "Revoke capabilities", params(("name" = String, Path, description = "Plugin name")), request_body = RevokeBody, responses((status = 200, description = "The plugin after the change", body = Object), (status = 400, description = "Bad body", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn revoke(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let body: RevokeBody = if body.iter().all(u8::is_ascii_whitespace) {
        RevokeBody {
            revoke: None,
            all: true,
        }
    } else {
        parse(&body)?
    };
    let what = match (body.revoke, body.all) {
        (Some(w), false) => Some(w),
        (None, true) => None,
        _ => {
            return Err(bad_request(
                "send either {\"revoke\": {...}} or {\"all\": true}",
            ));
        }
    };
    let a = admin(&state, &id)?;
    a.revoke(&actor(&id, peer(addr)), &name, what.as_ref())
        .await?;
    Ok(Json(view_of(&a, &name).await?))
}

fn report_json(r: &turnstone_runtime::reconcile::Report) -> Value {
    json!({
        "generation": r.generation,
        "elapsed_ms": r.elapsed.as_secs_f64() * 1000.0,
        "changes": r.changes.iter().map(|c| json!({
            "plugin": c.plugin, "change": format!("{:?}", c.kind),
        })).collect::<Vec<_>>(),
    })
}

#[utoipa::path(post, path = "/v1/api/admin/plugins/{name}/reload", tag = "admin", summary = "Reload a plugin from disk on every node", params(("name" = String, Path, description = "Plugin name")), responses((status = 200, description = "What changed here", body = Object), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn reload_one(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let a = admin(&state, &id)?;
    let r = a.reload(&actor(&id, peer(addr)), Some(&name)).await?;
    Ok(Json(
        json!({ "report": report_json(&r), "plugin": view_of(&a, &name).await? }),
    ))
}

#[utoipa::path(post, path = "/v1/api/admin/plugins/reload", tag = "admin", summary = "Rescan and reload every plugin on this node", responses((status = 200, description = "What changed", body = Object), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody)))]
pub(crate) async fn reload_all(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Result<Json<Value>, ApiError> {
    let a = admin(&state, &id)?;
    let r = a.reload(&actor(&id, peer(addr)), None).await?;
    Ok(Json(json!({ "report": report_json(&r) })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct InstallQuery {
    /// Upgrade an installed third-party plugin of the same name.
    #[serde(default)]
    replace: bool,
}

#[utoipa::path(post, path = "/v1/api/admin/plugins/install", tag = "admin", summary = "Install (or upgrade) a plugin from an upload: multipart parts `manifest` (plugin.toml) and `component` (.wasm). New plugins land disabled with nothing granted; the answer lists what it requests for review.", params(InstallQuery), responses((status = 201, description = "Installed; review `requested` before granting", body = Object), (status = 400, description = "Not a loadable plugin", body = crate::routes::ErrorBody), (status = 409, description = "Name taken", body = crate::routes::ErrorBody), (status = 413, description = "Too large", body = crate::routes::ErrorBody)))]
pub(crate) async fn install(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Query(q): Query<InstallQuery>,
    mut form: Multipart,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let mut manifest: Option<String> = None;
    let mut wasm: Option<Vec<u8>> = None;
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|e| bad_request(format!("invalid multipart body: {e}")))?
    {
        match field.name().unwrap_or_default() {
            "manifest" => {
                let text = field
                    .text()
                    .await
                    .map_err(|e| bad_request(format!("manifest: {e}")))?;
                manifest = Some(text);
            }
            "component" => {
                let bytes = field.bytes().await.map_err(|e| {
                    ApiError(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        format!("component: {e} (limit {} MiB)", MAX_COMPONENT_BYTES >> 20),
                    )
                })?;
                wasm = Some(bytes.to_vec());
            }
            other => return Err(bad_request(format!("unexpected part {other:?}"))),
        }
    }
    let manifest =
        manifest.ok_or_else(|| bad_request("the `manifest` part (plugin.toml) is missing"))?;
    let wasm = wasm.ok_or_else(|| bad_request("the `component` part (.wasm) is missing"))?;
    let a = admin(&state, &id)?;
    let name = a
        .install(&actor(&id, peer(addr)), &manifest, wasm, q.replace)
        .await?;
    Ok((StatusCode::CREATED, Json(view_of(&a, &name).await?)))
}

#[utoipa::path(delete, path = "/v1/api/admin/plugins/{name}", tag = "admin", summary = "Uninstall a third-party plugin", params(("name" = String, Path, description = "Plugin name")), responses((status = 200, description = "Removed", body = Object), (status = 400, description = "Built-in", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn uninstall(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let a = admin(&state, &id)?;
    a.uninstall(&actor(&id, peer(addr)), &name).await?;
    Ok(Json(json!({ "status": "ok", "removed": name })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    limit: Option<i64>,
}

#[utoipa::path(get, path = "/v1/api/admin/plugins/audit", tag = "admin", summary = "Plugin changes from the audit log, newest first", params(AuditQuery), responses((status = 200, description = "Success", body = Object), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody)))]
pub(crate) async fn audit(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Query(q): Query<AuditQuery>,
) -> Result<Json<Value>, ApiError> {
    let a = admin(&state, &id)?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let entries = a
        .db()
        .list_audit(limit * 4)
        .await
        .map_err(AdminError::from)?;
    let entries: Vec<Value> = entries
        .into_iter()
        .filter(|e| e.action.starts_with("plugin."))
        .take(limit as usize)
        .map(|e| {
            json!({
                "id": e.id, "timestamp": e.timestamp, "user_id": e.user_id,
                "action": e.action, "target": e.target,
                "detail": e.detail.as_deref().and_then(|d| serde_json::from_str::<Value>(d).ok()),
                "ip": e.ip,
            })
        })
        .collect();
    Ok(Json(json!({ "entries": entries })))
}
