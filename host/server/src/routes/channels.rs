//! Chat channel routes: the platforms' inbound webhooks (public; the adapter
//! checks the platform's signature), and a user's chat-account links.

use super::{Guarded, node};
use crate::channels::bridge::{LINK_CODE_TTL, link_code_hash, new_link_code};
use crate::http::{AppState, Identity};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;
use turnstone_runtime::channel::{ChannelError, Command, CommandResult, WebhookRequest};

/// Largest webhook body taken.
pub const MAX_WEBHOOK_BODY: usize = 1 << 20;

#[utoipa::path(post, path = "/v1/channels/{plugin}/webhook", tag = "channels", summary = "A chat platform's webhook (Slack events and interactivity, Discord interactions); the channel plugin verifies the signature and answers", security(()), params(("plugin" = String, Path, description = "Channel plugin name")), request_body(content = String, description = "The platform's payload, passed through", content_type = "application/json"), responses((status = 200, description = "The plugin's answer (JSON or plain text)"), (status = 401, description = "The plugin rejected the signature", body = crate::routes::ErrorBody), (status = 404, description = "No such channel plugin runs here", body = crate::routes::ErrorBody), (status = 413, description = "Body over 1 MiB", body = crate::routes::ErrorBody), (status = 502, description = "The plugin failed to answer", body = crate::routes::ErrorBody), (status = 503, description = "The plugin did not answer in time, or too many webhooks are in flight", body = crate::routes::ErrorBody)))]
pub(crate) async fn webhook(
    State(state): State<AppState>,
    Path(plugin): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let Some(hub) = state.node.as_ref().and_then(|n| n.channels.clone()) else {
        return (StatusCode::NOT_FOUND, "no channel adapters run here").into_response();
    };
    if !hub.statuses().contains_key(&plugin) {
        return (StatusCode::NOT_FOUND, "no such channel plugin runs here").into_response();
    }
    // The caller's credentials for us are not the plugin's business.
    let headers = headers
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "cookie" | "authorization" | "proxy-authorization" | "x-api-key"
            )
        })
        .filter_map(|(k, v)| {
            Some((
                k.as_str().to_ascii_lowercase(),
                v.to_str().ok()?.to_string(),
            ))
        })
        .collect();
    let cmd = Command::Webhook(WebhookRequest {
        headers,
        body: body.to_vec(),
    });
    let Some(answer) = hub.webhook(&plugin, cmd).await else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many webhook requests in flight",
        )
            .into_response();
    };
    match answer {
        Ok(CommandResult::Webhook(r)) => {
            let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_GATEWAY);
            // A plugin's answer is served on our origin: JSON or plain text
            // only, never a page a browser would render.
            let ctype = if r.content_type.starts_with("application/json") {
                "application/json"
            } else {
                "text/plain; charset=utf-8"
            };
            (
                status,
                [
                    (axum::http::header::CONTENT_TYPE, ctype),
                    (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                    (
                        axum::http::header::CONTENT_SECURITY_POLICY,
                        "sandbox; default-src 'none'",
                    ),
                ],
                r.body,
            )
                .into_response()
        }
        Ok(_) => (
            StatusCode::BAD_GATEWAY,
            "the channel plugin gave no webhook answer",
        )
            .into_response(),
        Err(ChannelError::Failed(e)) => (StatusCode::BAD_GATEWAY, e).into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

/// A new link code.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LinkCode {
    /// Send `link <code>` to the bot from the platform account to link.
    pub code: String,
    /// When it stops working (UTC).
    pub expires: String,
    /// What to do with it.
    pub instructions: String,
}

#[utoipa::path(post, path = "/v1/api/channels/link-code", tag = "channels", summary = "A one-time code that links a chat account (Discord, Slack) to the caller", responses((status = 200, description = "The code (valid 10 minutes; a new one replaces the old)", body = LinkCode), Guarded))]
pub(crate) async fn link_code(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<LinkCode>, crate::http::ApiError> {
    node(&state)?;
    let code = new_link_code().ok_or_else(|| {
        crate::http::ApiError::Unavailable("no randomness for a link code".into())
    })?;
    let expires = turnstone_storage::util::format_ts(std::time::SystemTime::now() + LINK_CODE_TTL);
    state
        .db
        .create_link_code(&link_code_hash(&code), &id.user_id, &expires)
        .await?;
    Ok(Json(LinkCode {
        instructions: format!(
            "Send `link {code}` to the Turnstone bot (a direct message, or mention it) within 10 minutes."
        ),
        code,
        expires,
    }))
}

/// One linked chat account.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChannelLinkView {
    /// The platform (`discord`, `slack`).
    pub channel_type: String,
    /// The platform's user id.
    pub channel_user_id: String,
    /// When it was linked.
    pub created: String,
}

/// The caller's linked chat accounts.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ChannelLinks {
    /// Links, by platform.
    pub links: Vec<ChannelLinkView>,
}

#[utoipa::path(get, path = "/v1/api/channels/links", tag = "channels", summary = "The caller's linked chat accounts", responses((status = 200, description = "Links", body = ChannelLinks), Guarded))]
pub(crate) async fn links(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<ChannelLinks>, crate::http::ApiError> {
    let links = state
        .db
        .channel_links(&id.user_id)
        .await?
        .into_iter()
        .map(|(channel_type, channel_user_id, created)| ChannelLinkView {
            channel_type,
            channel_user_id,
            created,
        })
        .collect();
    Ok(Json(ChannelLinks { links }))
}

#[utoipa::path(delete, path = "/v1/api/channels/links/{channel_type}/{channel_user_id}", tag = "channels", summary = "Unlinks one of the caller's chat accounts", params(("channel_type" = String, Path, description = "Platform"), ("channel_user_id" = String, Path, description = "Platform user id")), responses((status = 200, description = "Unlinked", body = crate::routes::StatusOk), (status = 404, description = "Not one of the caller's links", body = crate::routes::ErrorBody), Guarded))]
pub(crate) async fn unlink(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path((channel_type, channel_user_id)): Path<(String, String)>,
) -> Result<Json<crate::routes::StatusOk>, crate::http::ApiError> {
    if state
        .db
        .unlink_channel_user(&channel_type, &channel_user_id, &id.user_id)
        .await?
    {
        Ok(crate::routes::StatusOk::ok())
    } else {
        Err(crate::http::ApiError::NotFound("no such link".into()))
    }
}
