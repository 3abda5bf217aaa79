//! `/v1/api/admin/plugins`: list, enable, disable, grants, revoke, reload,
//! install (upload, reviewed before anything is granted), uninstall, and the
//! plugin audit trail. Approve scope (checked by the middleware) plus the
//! `admin.plugins` permission. The request and response types are in
//! [`super::plugins_types`].

use super::plugins_types::{
    ConfigBody, GrantBody, InstallForm, NoPluginAdmin, PluginAudit, PluginAuditEntry, PluginList,
    PluginRefused, PluginView, ReloadReport, ReloadedAll, ReloadedPlugin, RevokeBody, Uninstalled,
};
use super::{BadInput, Guarded, Missing, TooLarge, need, node};
use crate::http::{ApiError, AppState, Identity, bad_request, parse};
use crate::plugins::{Actor, AdminError, PluginAdmin};
use axum::extract::{ConnectInfo, Multipart, Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;
use turnstone_runtime::Capabilities;

/// Largest accepted component upload.
pub(crate) const MAX_COMPONENT_BYTES: usize = 64 << 20;

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        match e {
            AdminError::NotFound(_) => ApiError::NotFound(e.to_string()),
            AdminError::Invalid(m) => ApiError::BadRequest(m),
            AdminError::Conflict(m) => ApiError::Conflict(m),
            AdminError::Stopped => ApiError::Unavailable(e.to_string()),
            AdminError::Storage(s) => s.into(),
            AdminError::Io(m) => ApiError::Internal(m),
        }
    }
}

/// For actions on an existing plugin whose request was already checked, the
/// only `Invalid` left is about the plugin itself (its manifest does not
/// parse, or it is a built-in that cannot be removed): a conflict with its
/// state (409), not a bad request.
pub(super) fn state_conflict(e: AdminError) -> ApiError {
    match e {
        AdminError::Invalid(m) => ApiError::Conflict(m),
        other => other.into(),
    }
}

pub(super) fn admin(state: &AppState, id: &Identity) -> Result<Arc<PluginAdmin>, ApiError> {
    need(id, "admin.plugins")?;
    node(state)?.plugins.clone().ok_or_else(|| {
        ApiError::Unavailable("plugin administration is not running on this node".into())
    })
}

pub(super) fn peer(addr: Option<Extension<ConnectInfo<SocketAddr>>>) -> Option<SocketAddr> {
    addr.map(|Extension(ConnectInfo(a))| a)
}

pub(super) fn actor(id: &Identity, addr: Option<SocketAddr>) -> Actor {
    Actor {
        user_id: Some(id.user_id.clone()),
        ip: addr.map(|a| a.ip().to_string()),
        via: "api",
    }
}

/// The view of component or MCP server `name`.
pub(super) async fn view_of(a: &PluginAdmin, name: &str) -> Result<PluginView, ApiError> {
    let row = a.db().get_plugin(name).await.map_err(AdminError::from)?;
    if let Ok(entry) = a.entry(name) {
        let mut view = PluginView::new(&entry, row.as_ref(), a.shared());
        view.channel = a.channel_status(name);
        return Ok(view);
    }
    match a.mcp().and_then(|h| h.server(name)) {
        Some(s) => Ok(PluginView::mcp(&s, row.as_ref())),
        None => Err(AdminError::NotFound(name.to_string()).into()),
    }
}

#[utoipa::path(
    get,
    path = "/v1/api/admin/plugins",
    tag = "admin",
    summary = "Plugins on this node",
    responses(
        (status = 200, description = "Every plugin found, loaded or not", body = PluginList),
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<PluginList>, ApiError> {
    let a = admin(&state, &id)?;
    let rows = a.db().list_plugins().await.map_err(AdminError::from)?;
    let snap = a.reconciler().live().snapshot();
    let row = |name: &str| rows.iter().find(|r| r.name == name);
    let mut plugins: Vec<PluginView> = snap
        .entries()
        .iter()
        .map(|e| {
            let mut view = PluginView::new(e, row(&e.name()), a.shared());
            view.channel = a.channel_status(&e.name());
            view
        })
        .collect();
    // MCP servers next to the components: one registry, one console.
    if let Some(hub) = a.mcp() {
        plugins.extend(
            hub.servers()
                .iter()
                .map(|s| PluginView::mcp(s, row(&s.name))),
        );
    }
    Ok(Json(PluginList {
        plugins,
        generation: a.reconciler().live().generation(),
    }))
}

#[utoipa::path(
    get,
    path = "/v1/api/admin/plugins/{name}",
    tag = "admin",
    summary = "One plugin",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, description = "The plugin", body = PluginView),
        Missing,
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn detail(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(name): Path<String>,
) -> Result<Json<PluginView>, ApiError> {
    let a = admin(&state, &id)?;
    Ok(Json(view_of(&a, &name).await?))
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/plugins/{name}/enable",
    tag = "admin",
    summary = "Enable a plugin",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, description = "The plugin after the change", body = PluginView),
        PluginRefused,
    )
)]
pub(crate) async fn enable(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<PluginView>, ApiError> {
    toggle(&state, &id, addr, &name, true).await
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/plugins/{name}/disable",
    tag = "admin",
    summary = "Disable a plugin",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, description = "The plugin after the change", body = PluginView),
        PluginRefused,
    )
)]
pub(crate) async fn disable(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<PluginView>, ApiError> {
    toggle(&state, &id, addr, &name, false).await
}

async fn toggle(
    state: &AppState,
    id: &Identity,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    name: &str,
    on: bool,
) -> Result<Json<PluginView>, ApiError> {
    let a = admin(state, id)?;
    a.set_enabled(&actor(id, peer(addr)), name, on)
        .await
        .map_err(state_conflict)?;
    Ok(Json(view_of(&a, name).await?))
}

/// Refuses a wildcard in front of an IP address (`*.[…]`), which the host
/// parser does not handle, with the 400 of the other malformed hosts.
fn check_hosts(g: &Capabilities) -> Result<(), ApiError> {
    match g.http.iter().find(|h| h.contains("*.[")) {
        Some(h) => Err(bad_request(format!(
            "http grant {h:?} is not allowed: a wildcard cannot precede an IP address"
        ))),
        None => Ok(()),
    }
}

#[utoipa::path(
    put,
    path = "/v1/api/admin/plugins/{name}/grants",
    tag = "admin",
    summary = "Set a plugin's grant",
    params(("name" = String, Path, description = "Plugin name")),
    request_body = GrantBody,
    responses(
        (status = 200, description = "The plugin after the change", body = PluginView),
        BadInput,
        TooLarge,
        PluginRefused,
    )
)]
pub(crate) async fn set_grants(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<PluginView>, ApiError> {
    let body: GrantBody = parse(&body)?;
    let grant: Option<Capabilities> = match (body.grant, body.default) {
        (Some(g), false) => Some(g.into()),
        (None, true) => None,
        _ => {
            return Err(bad_request(
                "send either {\"grant\": {...}} or {\"default\": true}",
            ));
        }
    };
    let a = admin(&state, &id)?;
    a.subject(&name)?;
    if let Some(g) = &grant {
        check_hosts(g)?;
        g.validate()?;
    }
    a.set_grant(&actor(&id, peer(addr)), &name, grant.as_ref())
        .await
        .map_err(state_conflict)?;
    Ok(Json(view_of(&a, &name).await?))
}

#[utoipa::path(
    put,
    path = "/v1/api/admin/plugins/{name}/config",
    tag = "admin",
    summary = "Set a plugin's config overlay",
    params(("name" = String, Path, description = "Plugin name")),
    request_body = ConfigBody,
    responses(
        (status = 200, description = "The plugin after the change", body = PluginView),
        BadInput,
        TooLarge,
        PluginRefused,
    )
)]
pub(crate) async fn set_config(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<PluginView>, ApiError> {
    let body: ConfigBody = parse(&body)?;
    let a = admin(&state, &id)?;
    a.set_config(&actor(&id, peer(addr)), &name, &body.config)
        .await
        .map_err(state_conflict)?;
    Ok(Json(view_of(&a, &name).await?))
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/plugins/{name}/revoke",
    tag = "admin",
    summary = "Revoke capabilities",
    params(("name" = String, Path, description = "Plugin name")),
    request_body = Option<RevokeBody>,
    responses(
        (status = 200, description = "The plugin after the change", body = PluginView),
        BadInput,
        TooLarge,
        PluginRefused,
    )
)]
pub(crate) async fn revoke(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<PluginView>, ApiError> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        RevokeBody::all()
    } else {
        parse::<Option<RevokeBody>>(&body)?.unwrap_or_else(RevokeBody::all)
    };
    let what: Option<Capabilities> = match (body.revoke, body.all) {
        (Some(w), false) => Some(w.into()),
        (None, true) => None,
        _ => {
            return Err(bad_request(
                "send either {\"revoke\": {...}} or {\"all\": true}",
            ));
        }
    };
    let a = admin(&state, &id)?;
    a.revoke(&actor(&id, peer(addr)), &name, what.as_ref())
        .await
        .map_err(state_conflict)?;
    Ok(Json(view_of(&a, &name).await?))
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/plugins/{name}/reload",
    tag = "admin",
    summary = "Reload a plugin from disk on every node",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, description = "What changed here, and the plugin after it",
            body = ReloadedPlugin),
        PluginRefused,
    )
)]
pub(crate) async fn reload_one(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<ReloadedPlugin>, ApiError> {
    let a = admin(&state, &id)?;
    let r = a
        .reload(&actor(&id, peer(addr)), Some(&name))
        .await
        .map_err(state_conflict)?;
    Ok(Json(ReloadedPlugin {
        report: ReloadReport::from(&r),
        plugin: view_of(&a, &name).await?,
    }))
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/plugins/reload",
    tag = "admin",
    summary = "Rescan and reload every plugin on this node",
    responses(
        (status = 200, description = "What changed", body = ReloadedAll),
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn reload_all(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
) -> Result<Json<ReloadedAll>, ApiError> {
    let a = admin(&state, &id)?;
    let r = a.reload(&actor(&id, peer(addr)), None).await?;
    Ok(Json(ReloadedAll {
        report: ReloadReport::from(&r),
    }))
}

/// Query of an install.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct InstallQuery {
    /// Upgrade an installed third-party plugin of the same name.
    #[serde(default)]
    replace: bool,
}

/// The `manifest` and `component` parts of an install (a body over the
/// limit is 413, a broken one 400; see `crate::error`).
async fn install_parts(
    form: &mut Multipart,
) -> Result<(String, Vec<u8>, Option<String>), ApiError> {
    let mut manifest: Option<String> = None;
    let mut wasm: Option<Vec<u8>> = None;
    let mut signature: Option<String> = None;
    while let Some(field) = form.next_field().await? {
        match field.name().unwrap_or_default() {
            "manifest" => manifest = Some(field.text().await?),
            "component" => wasm = Some(field.bytes().await?.to_vec()),
            "signature" => signature = Some(field.text().await?),
            other => return Err(bad_request(format!("unexpected part {other:?}"))),
        }
    }
    let manifest =
        manifest.ok_or_else(|| bad_request("the `manifest` part (plugin.toml) is missing"))?;
    let wasm = wasm.ok_or_else(|| bad_request("the `component` part (.wasm) is missing"))?;
    Ok((manifest, wasm, signature))
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/plugins/install",
    tag = "admin",
    summary = "Install (or upgrade) a plugin from an upload: multipart parts `manifest` \
        (plugin.toml), `component` (.wasm) and, when signed, `signature` (plugin.sig; required \
        with [plugins] require_signatures). New plugins land disabled with nothing granted; \
        the answer lists what it requests for review.",
    params(InstallQuery),
    request_body(content = InstallForm, content_type = "multipart/form-data"),
    responses(
        (status = 201, description = "Installed; review `requested` before granting",
            body = PluginView),
        (status = 400, description = "Not a loadable plugin, a malformed upload, or no install \
            directory on this node", body = crate::routes::ErrorBody),
        (status = 409, description = "A built-in of that name, already installed (without \
            `replace=true`), or installed outside the install directory",
            body = crate::routes::ErrorBody),
        TooLarge,
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn install(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Query(q): Query<InstallQuery>,
    mut form: Multipart,
) -> Result<(StatusCode, Json<PluginView>), ApiError> {
    let (manifest, wasm, signature) = install_parts(&mut form).await?;
    let a = admin(&state, &id)?;
    let name = a
        .install(
            &actor(&id, peer(addr)),
            &manifest,
            wasm,
            signature.as_deref(),
            q.replace,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(view_of(&a, &name).await?)))
}

#[utoipa::path(
    delete,
    path = "/v1/api/admin/plugins/{name}",
    tag = "admin",
    summary = "Uninstall a third-party plugin",
    params(("name" = String, Path, description = "Plugin name")),
    responses(
        (status = 200, description = "Removed", body = Uninstalled),
        Missing,
        (status = 409, description = "A built-in plugin (disable it instead)",
            body = crate::routes::ErrorBody),
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn uninstall(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<Uninstalled>, ApiError> {
    let a = admin(&state, &id)?;
    a.uninstall(&actor(&id, peer(addr)), &name)
        .await
        .map_err(state_conflict)?;
    Ok(Json(Uninstalled {
        status: "ok",
        removed: name,
    }))
}

/// Query of the plugin audit trail.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct AuditQuery {
    /// Most entries (default 100; clamped to 1–1000).
    #[param(minimum = -9223372036854775808i64, maximum = 9223372036854775807i64)]
    limit: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/v1/api/admin/plugins/audit",
    tag = "admin",
    summary = "Plugin changes from the audit log, newest first",
    params(AuditQuery),
    responses(
        (status = 200, description = "The entries", body = PluginAudit),
        BadInput,
        NoPluginAdmin,
        Guarded,
    )
)]
pub(crate) async fn audit(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Query(q): Query<AuditQuery>,
) -> Result<Json<PluginAudit>, ApiError> {
    let a = admin(&state, &id)?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let entries = a
        .db()
        .list_audit(limit * 4)
        .await
        .map_err(AdminError::from)?;
    let entries = entries
        .into_iter()
        .filter(|e| e.action.starts_with("plugin."))
        .take(limit as usize)
        .map(PluginAuditEntry::from)
        .collect();
    Ok(Json(PluginAudit { entries }))
}
