//! Notification targets over HTTP: the caller's own (for all their
//! workstreams) at `/api/notify-targets`, one workstream's at
//! `/api/workstreams/{ws_id}/notify-targets`. The `notify` tool and
//! completion notifications deliver to both. A target names a secret by
//! reference only; its value stays on the host, and the host sends it only to
//! a host granted to the notify plugin by name.

use super::{BadInput, Guarded, Missing, StatusOk, visible_row};
use crate::http::{ApiError, AppState, Identity, bad_request, parse};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use turnstone_storage::types::{NewNotifyTarget, NotifyTarget};
use utoipa::ToSchema;

/// What a target is.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum TargetKind {
    /// An HTTP POST of JSON (`title`, `message`, `workstream_id`, `source`).
    Webhook,
    /// A chat channel, delivered by a channel adapter on the node.
    Channel,
}

/// `POST …/notify-targets`: a target, replacing the one of that name.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TargetBody {
    /// 1-64 letters, digits, `-`, `_` or `.`.
    name: String,
    /// `webhook` or `channel`.
    kind: TargetKind,
    /// Webhook URL (http or https).
    #[serde(default)]
    url: Option<String>,
    /// The name of a host secret sent as `Authorization: Bearer …` (granted
    /// to the notify plugin by the operator; never its value).
    #[serde(default)]
    secret: Option<String>,
    /// Channel platform (`discord`, `slack`).
    #[serde(default)]
    channel_type: Option<String>,
    /// Channel or user id on that platform.
    #[serde(default)]
    channel_id: Option<String>,
}

/// A stored target.
#[derive(Serialize, ToSchema)]
pub(crate) struct TargetView {
    /// Name.
    name: String,
    /// `webhook` or `channel`.
    kind: String,
    /// `user` (every workstream of its owner) or `workstream`.
    scope: &'static str,
    /// The workstream, for `workstream` scope.
    ws_id: Option<String>,
    /// Webhook URL.
    url: Option<String>,
    /// Secret name (never its value).
    secret: Option<String>,
    /// Channel platform.
    channel_type: Option<String>,
    /// Channel id.
    channel_id: Option<String>,
    /// When it was saved.
    created: String,
}

impl From<NotifyTarget> for TargetView {
    fn from(t: NotifyTarget) -> Self {
        Self {
            scope: if t.ws_id.is_some() {
                "workstream"
            } else {
                "user"
            },
            name: t.name,
            kind: t.kind,
            ws_id: t.ws_id,
            url: t.url,
            secret: t.secret,
            channel_type: t.channel_type,
            channel_id: t.channel_id,
            created: t.created,
        }
    }
}

/// A list of targets.
#[derive(Serialize, ToSchema)]
pub(crate) struct TargetsBody {
    /// By name.
    targets: Vec<TargetView>,
}

fn new_target(
    b: TargetBody,
    user_id: &str,
    ws_id: Option<String>,
) -> Result<NewNotifyTarget, ApiError> {
    let blank = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    let (kind, url, secret, channel_type, channel_id) = match b.kind {
        TargetKind::Webhook => {
            if b.channel_type.is_some() || b.channel_id.is_some() {
                return Err(bad_request(
                    "a webhook target takes url and secret, not channel_type or channel_id",
                ));
            }
            let url = blank(b.url).ok_or_else(|| bad_request("a webhook target needs url"))?;
            let parsed =
                url::Url::parse(&url).map_err(|e| bad_request(format!("url is not a URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
                return Err(bad_request("url must be an http or https URL with a host"));
            }
            if !parsed.username().is_empty() || parsed.password().is_some() {
                return Err(bad_request(
                    "url must not carry credentials; name a host secret in `secret` instead",
                ));
            }
            let secret = blank(b.secret);
            if let Some(s) = &secret
                && !s
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
            {
                return Err(bad_request(
                    "secret is the name of a host secret (letters, digits, '_', '-', '.')",
                ));
            }
            ("webhook", Some(url), secret, None, None)
        }
        TargetKind::Channel => {
            if b.url.is_some() || b.secret.is_some() {
                return Err(bad_request(
                    "a channel target takes channel_type and channel_id, not url or secret",
                ));
            }
            let ty = blank(b.channel_type)
                .ok_or_else(|| bad_request("a channel target needs channel_type"))?;
            let id = blank(b.channel_id)
                .ok_or_else(|| bad_request("a channel target needs channel_id"))?;
            ("channel", None, None, Some(ty), Some(id))
        }
    };
    Ok(NewNotifyTarget {
        user_id: Some(user_id.to_string()),
        ws_id,
        name: b.name,
        kind: kind.into(),
        url,
        secret,
        channel_type,
        channel_id,
    })
}

async fn save(
    state: &AppState,
    t: NewNotifyTarget,
) -> Result<(StatusCode, Json<TargetView>), ApiError> {
    let saved = state.db.save_notify_target(&t).await?;
    Ok((StatusCode::CREATED, Json(saved.into())))
}

#[utoipa::path(get, path = "/v1/api/notify-targets", tag = "notify", summary = "The caller's notification targets (for all their workstreams)", responses((status = 200, description = "By name", body = TargetsBody), Guarded))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<TargetsBody>, ApiError> {
    let rows = state
        .db
        .list_notify_targets(Some(&id.user_id), None)
        .await?;
    Ok(Json(TargetsBody {
        targets: rows.into_iter().map(TargetView::from).collect(),
    }))
}

#[utoipa::path(post, path = "/v1/api/notify-targets", tag = "notify", summary = "Save one of the caller's targets (replacing the one of that name)", request_body = TargetBody, responses((status = 201, description = "Saved", body = TargetView), BadInput, Guarded))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<TargetView>), ApiError> {
    let b: TargetBody = parse(&body)?;
    save(&state, new_target(b, &id.user_id, None)?).await
}

#[utoipa::path(delete, path = "/v1/api/notify-targets/{name}", tag = "notify", summary = "Delete one of the caller's targets", params(("name" = String, Path, description = "Target name")), responses((status = 200, description = "Deleted", body = StatusOk), Guarded, Missing))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(name): Path<String>,
) -> Result<Json<StatusOk>, ApiError> {
    if state
        .db
        .delete_notify_target(Some(&id.user_id), None, &name)
        .await?
    {
        Ok(StatusOk::ok())
    } else {
        Err(ApiError::NotFound(format!(
            "no notification target named {name:?}"
        )))
    }
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/notify-targets", tag = "notify", summary = "A workstream's own targets and its owner's, which its notifications go to", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "By name", body = TargetsBody), Guarded, Missing))]
pub(crate) async fn ws_list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<TargetsBody>, ApiError> {
    let row = visible_row(&state, &id, &ws_id).await?;
    let rows = state
        .db
        .list_notify_targets(row.user_id.as_deref(), Some(&ws_id))
        .await?;
    Ok(Json(TargetsBody {
        targets: rows.into_iter().map(TargetView::from).collect(),
    }))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/notify-targets", tag = "notify", summary = "Save a target of this workstream only", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), request_body = TargetBody, responses((status = 201, description = "Saved", body = TargetView), BadInput, Guarded, Missing))]
pub(crate) async fn ws_create(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<TargetView>), ApiError> {
    let row = visible_row(&state, &id, &ws_id).await?;
    let b: TargetBody = parse(&body)?;
    let owner = row.user_id.unwrap_or_else(|| id.user_id.clone());
    save(&state, new_target(b, &owner, Some(ws_id))?).await
}

#[utoipa::path(delete, path = "/v1/api/workstreams/{ws_id}/notify-targets/{name}", tag = "notify", summary = "Delete a target of this workstream", params(("ws_id" = String, Path, description = "Workstream id (32 hex)"), ("name" = String, Path, description = "Target name")), responses((status = 200, description = "Deleted", body = StatusOk), Guarded, Missing))]
pub(crate) async fn ws_delete(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path((ws_id, name)): Path<(String, String)>,
) -> Result<Json<StatusOk>, ApiError> {
    let row = visible_row(&state, &id, &ws_id).await?;
    if state
        .db
        .delete_notify_target(row.user_id.as_deref(), Some(&ws_id), &name)
        .await?
    {
        Ok(StatusOk::ok())
    } else {
        Err(ApiError::NotFound(format!(
            "no notification target named {name:?}"
        )))
    }
}
