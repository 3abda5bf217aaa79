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

/// `POST …/notify-targets`: a target, replacing the one of that name. The
/// patterns are the whole check (a URL that matches but does not parse, such
/// as a numeric host out of range, fails when it is delivered to). Fields a
/// kind does not take are ignored.
#[derive(Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum TargetBody {
    /// An HTTP POST of JSON (`title`, `message`, `workstream_id`, `source`).
    Webhook {
        /// 1-64 letters, digits, `-`, `_` or `.`.
        #[schema(pattern = "^[A-Za-z0-9_.-]{1,64}$")]
        name: String,
        /// http(s) URL; no credentials (name a secret instead).
        #[schema(
            pattern = "^https?://[A-Za-z0-9][A-Za-z0-9._-]*(:[0-9]{1,5})?(/[!-~]*)?$",
            max_length = 2048
        )]
        url: String,
        /// The name of a host secret sent as `Authorization: Bearer …`
        /// (granted to the notify plugin by the operator; never its value).
        #[serde(default)]
        #[schema(pattern = "^[A-Za-z0-9_.-]{1,128}$")]
        secret: Option<String>,
    },
    /// A chat channel, delivered by a channel adapter on the node.
    Channel {
        /// 1-64 letters, digits, `-`, `_` or `.`.
        #[schema(pattern = "^[A-Za-z0-9_.-]{1,64}$")]
        name: String,
        /// Channel platform (`discord`, `slack`).
        #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
        channel_type: String,
        /// Channel or user id on that platform.
        #[schema(pattern = "^[A-Za-z0-9_.:-]{1,128}$")]
        channel_id: String,
    },
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

/// Whether every character of `s` (1 to `max` of them) is allowed by `ok`.
fn chars_ok(s: &str, max: usize, ok: impl Fn(char) -> bool) -> bool {
    (1..=max).contains(&s.len()) && s.chars().all(ok)
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.-".contains(c)
}

/// The webhook URL pattern of [`TargetBody`], checked by hand.
fn webhook_url_ok(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
    else {
        return false;
    };
    if url.len() > 2048 {
        return false;
    }
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    let (host, port) = match authority.split_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (authority, None),
    };
    let host_ok = host
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    let port_ok = port.is_none_or(|p| chars_ok(p, 5, |c| c.is_ascii_digit()));
    let path_ok = path.chars().all(|c| ('!'..='~').contains(&c));
    host_ok && port_ok && path_ok
}

fn new_target(
    b: TargetBody,
    user_id: &str,
    ws_id: Option<String>,
) -> Result<NewNotifyTarget, ApiError> {
    let bad_name = |n: &str| {
        bad_request(format!(
            "target name {n:?} must be 1-64 letters, digits, '-', '_' or '.'"
        ))
    };
    Ok(match b {
        TargetBody::Webhook { name, url, secret } => {
            if !chars_ok(&name, 64, name_char) {
                return Err(bad_name(&name));
            }
            if !webhook_url_ok(&url) {
                return Err(bad_request(
                    "url must be an http or https URL with a host and no credentials (name a host secret in `secret` instead)",
                ));
            }
            if let Some(s) = &secret
                && !chars_ok(s, 128, name_char)
            {
                return Err(bad_request(
                    "secret is the name of a host secret (1-128 letters, digits, '_', '-', '.')",
                ));
            }
            NewNotifyTarget {
                user_id: Some(user_id.to_string()),
                ws_id,
                name,
                kind: "webhook".into(),
                url: Some(url),
                secret,
                channel_type: None,
                channel_id: None,
            }
        }
        TargetBody::Channel {
            name,
            channel_type,
            channel_id,
        } => {
            if !chars_ok(&name, 64, name_char) {
                return Err(bad_name(&name));
            }
            let id_char = |c: char| name_char(c) || c == ':';
            if !chars_ok(&channel_type, 128, id_char) || !chars_ok(&channel_id, 128, id_char) {
                return Err(bad_request(
                    "channel_type and channel_id are 1-128 letters, digits, '_', '-', '.' or ':'",
                ));
            }
            NewNotifyTarget {
                user_id: Some(user_id.to_string()),
                ws_id,
                name,
                kind: "channel".into(),
                url: None,
                secret: None,
                channel_type: Some(channel_type),
                channel_id: Some(channel_id),
            }
        }
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

#[cfg(test)]
mod tests {
    use super::webhook_url_ok;

    #[test]
    fn webhook_urls_follow_the_documented_pattern() {
        for ok in [
            "https://hooks.example.com/t/1?x=y",
            "http://10.0.0.5:8080",
            "http://a_b-c.d/",
        ] {
            assert!(webhook_url_ok(ok), "{ok}");
        }
        for bad in [
            "ftp://h/x",
            "https://u:p@h/x",
            "https://",
            "https://-a/",
            "https://h:123456/",
            "https://h:/",
            "https://h/a b",
            "https://[::1]/",
            "HTTPS://h/",
        ] {
            assert!(!webhook_url_ok(bad), "{bad}");
        }
    }
}
