//! Per-workstream actions: create, list, detail, send, approve, cancel,
//! close/open/delete, title, rewind, retry and slash commands.

use super::{attachments, loaded, need, node, not_found, owner, visible_row};
use crate::http::{ApiError, AppState, Identity, bad_request, parse};
use crate::manager::{CreateOptions, ManagerError};
use crate::workstream::Workstream;
use axum::extract::FromRequest;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use turnstone_engine::runner::{Ack, OpError};
use turnstone_protocol::{Decision, Event, InputPart, Message, Op};

/// Body of `POST /api/workstreams/new` (every field optional).
#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct CreateBody {
    name: Option<String>,
    model: Option<String>,
    #[serde(default)]
    auto_approve: bool,
    resume_ws: Option<String>,
    initial_message: Option<String>,
    ws_id: Option<String>,
    kind: Option<String>,
}

#[utoipa::path(post, path = "/v1/api/workstreams/new", tag = "workstreams", summary = "Create (or fork with resume_ws) a workstream", request_body = CreateBody, responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    req: axum::extract::Request,
) -> Response {
    let multipart = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    // The multipart variant: a `meta` field with the JSON body plus `file` parts.
    let (body, files) = if multipart {
        let mut mp = match axum::extract::Multipart::from_request(req, &state).await {
            Ok(m) => m,
            Err(e) => return bad_request(format!("invalid multipart body: {e}")).into_response(),
        };
        let mut meta = None;
        match attachments::files(&mut mp, &mut meta).await {
            Ok(f) => (meta.unwrap_or_default(), f),
            Err(e) => return e.into_response(),
        }
    } else {
        let declared = req
            .headers()
            .get(axum::http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        if let Some(n) = declared.filter(|n| *n > MAX_JSON_BODY) {
            // Read what the client is sending (within reason) before saying
            // no, so it can finish writing and see the 413 instead of a
            // broken pipe.
            if n <= DRAIN_CAP {
                crate::http::drain(req.into_body(), DRAIN_CAP).await;
            }
            return too_large().into_response();
        }
        match axum::body::to_bytes(req.into_body(), MAX_JSON_BODY).await {
            Ok(b) => (b, Vec::new()),
            Err(e) if crate::http::is_length_limit(&e) => return too_large().into_response(),
            Err(e) => return crate::http::body_error(e).into_response(),
        }
    };
    match create_inner(&state, &id, &body, files).await {
        Ok(r) => r,
        Err(CreateError::Api(e)) => e.into_response(),
        Err(CreateError::Model(alias)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({
                "error": format!("The model '{alias}' isn't loaded on this server"),
                "code": "model_not_loaded",
                "alias": alias,
            })),
        )
            .into_response(),
    }
}

/// Largest JSON body of `/new` (the multipart variant has its own limits).
const MAX_JSON_BODY: usize = 2 << 20;
/// Oversized bodies up to this size are read and dropped before the 413.
const DRAIN_CAP: usize = 64 << 20;

fn too_large() -> ApiError {
    ApiError(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("request body too large (at most {MAX_JSON_BODY} bytes)"),
    )
}

enum CreateError {
    Api(ApiError),
    Model(String),
}

impl From<ApiError> for CreateError {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

async fn create_inner(
    state: &AppState,
    id: &Identity,
    body: &[u8],
    files: Vec<(Option<String>, Option<String>, axum::body::Bytes)>,
) -> Result<Response, CreateError> {
    let b: CreateBody = if body.iter().all(u8::is_ascii_whitespace) {
        CreateBody::default()
    } else {
        parse(body)?
    };
    if id.permissions.iter().all(|p| p != "admin.coordinator") {
        need(id, "workstreams.create")?;
    }
    if let Some(k) = &b.kind
        && k != "interactive"
    {
        return Err(bad_request(format!(
            "kind {k:?} is not supported here (only \"interactive\")"
        ))
        .into());
    }
    let initial = b.initial_message.clone().filter(|m| !m.trim().is_empty());
    let node = node(state)?;
    let opts = CreateOptions {
        ws_id: b.ws_id,
        name: b.name,
        model: b.model,
        auto_approve: b.auto_approve,
        resume_ws: b.resume_ws,
    };
    let (ws, resumed, copied) = match node.mgr.create(Some(&id.user_id), opts).await {
        Ok(v) => v,
        Err(ManagerError::ModelNotLoaded(a)) => return Err(CreateError::Model(a)),
        Err(e) => return Err(CreateError::Api(e.into())),
    };
    let mut attachment_ids = Vec::new();
    for (name, declared, bytes) in files {
        match attachments::store(
            state,
            &ws.core.ws_id,
            &id.user_id,
            name.as_deref(),
            declared.as_deref(),
            bytes,
        )
        .await
        {
            Ok(a) => attachment_ids.push(a.attachment_id),
            Err(e) => {
                // Nothing half-made stays behind.
                node.mgr.unload(&ws.core.ws_id, "create failed").await;
                let _ = state.db.delete_workstream(&ws.core.ws_id).await;
                return Err(e.into());
            }
        }
    }
    let mut initial_status = Value::Null;
    if let Some(text) = initial {
        match send_message(state, &ws, &text, None, &attachment_ids).await? {
            Sent::Started { .. } | Sent::Queued { .. } => {}
            Sent::Full { .. } => initial_status = "queue_full".into(),
            Sent::Closed => initial_status = "refused_closed".into(),
        }
    }
    Ok(Json(json!({
        "ws_id": ws.core.ws_id,
        "name": ws.core.name(),
        "resumed": resumed,
        "message_count": copied,
        "attachment_ids": attachment_ids,
        "initial_message_status": initial_status,
    }))
    .into_response())
}

fn summary(w: &crate::workstream::Workstream) -> Value {
    let s = w.core.status();
    json!({
        "ws_id": w.core.ws_id,
        "name": w.core.name(),
        "state": s.state.as_str(),
        "kind": w.core.kind,
        "parent_ws_id": null,
        "user_id": w.core.user_id,
        "project_id": null,
        "persistence_state": "persisted",
        "model": w.core.model.1,
        "model_alias": w.core.model.0,
    })
}

#[utoipa::path(get, path = "/v1/api/workstreams", tag = "workstreams", summary = "Loaded workstreams of the caller", responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state)?;
    let list: Vec<Value> = node
        .mgr
        .all()
        .iter()
        .filter(|w| owner(&id).is_none() || w.core.user_id.as_deref() == owner(&id))
        .map(|w| summary(w))
        .collect();
    Ok(Json(json!({ "workstreams": list })))
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}", tag = "workstreams", summary = "One loaded workstream with pending approvals", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let w = loaded(&state, &id, &ws_id)?;
    let mut v = summary(&w);
    let cycles = w.session.pending_approvals();
    v["pending_approval"] = (!cycles.is_empty()).into();
    v["pending_approval_details"] = cycles
        .iter()
        .map(|c| {
            json!({
                "cycle_id": c.cycle_id,
                "call_id": c.items.first().map(|i| i.call_id.clone()),
                "judge_pending": c.judge_pending,
                "items": c.items,
            })
        })
        .collect::<Vec<_>>()
        .into();
    v["queued"] = w.session.queued().into();
    Ok(Json(v))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct SendBody {
    message: Option<String>,
    #[serde(default)]
    attachment_ids: Vec<String>,
    client_send_id: Option<String>,
}

fn valid_client_send_id(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/send", tag = "workstreams", summary = "Send a message: ok, queued (joins at the next tool-result seam) or queue_full", request_body = SendBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn send(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: SendBody = parse(&body)?;
    let message = b
        .message
        .filter(|m| !m.trim().is_empty())
        .ok_or_else(|| bad_request("message is required"))?;
    if let Some(c) = &b.client_send_id
        && !valid_client_send_id(c)
    {
        return Err(bad_request(
            "client_send_id must match [A-Za-z0-9_-]{1,128}",
        ));
    }
    let w = loaded(&state, &id, &ws_id)?;
    if w.is_closed() {
        return Err(not_found());
    }
    let sent = send_message(
        &state,
        &w,
        &message,
        b.client_send_id.as_deref(),
        &b.attachment_ids,
    )
    .await?;
    Ok(Json(match sent {
        Sent::Started { attached, dropped } => json!({
            "status": "ok",
            "attached_ids": attached,
            "dropped_attachment_ids": dropped,
        }),
        Sent::Queued {
            msg_id,
            position,
            dropped,
        } => json!({
            "status": "queued",
            "priority": "normal",
            "msg_id": msg_id,
            "position": position,
            "attached_ids": [],
            "dropped_attachment_ids": dropped,
        }),
        Sent::Full { dropped } => json!({
            "status": "queue_full",
            "attached_ids": [],
            "dropped_attachment_ids": dropped,
        }),
        Sent::Closed => return Err(not_found()),
    }))
}

/// What a send did.
enum Sent {
    Started {
        attached: Vec<String>,
        dropped: Vec<String>,
    },
    Queued {
        msg_id: String,
        position: usize,
        dropped: Vec<String>,
    },
    Full {
        dropped: Vec<String>,
    },
    Closed,
}

/// Sends `text`: starts a turn (consuming the attachments) or queues it
/// (attachments stay pending and are reported as dropped). Under the
/// workstream's start lock, a session seen idle is one this send starts.
async fn send_message(
    state: &AppState,
    w: &Workstream,
    text: &str,
    client_send_id: Option<&str>,
    attachment_ids: &[String],
) -> Result<Sent, ApiError> {
    let _starting = w.starting.lock().await;
    let starts = !w.is_busy();
    let consumed = if starts {
        attachments::consume(state, &w.core.ws_id, text, attachment_ids).await?
    } else {
        attachments::Consumed {
            text: text.to_string(),
            dropped: attachment_ids.to_vec(),
            ..Default::default()
        }
    };
    let parts = consumed
        .images
        .iter()
        .filter_map(|p| match p {
            turnstone_engine::ContentPart::Image { attachment_id, url } => Some(InputPart::Image {
                attachment_id: attachment_id.clone(),
                url: url.clone(),
            }),
            turnstone_engine::ContentPart::Text { .. } => None,
        })
        .collect();
    let op = Op::Send {
        text: consumed.text,
        parts,
        client_send_id: client_send_id.map(String::from),
        sender: w.core.user_id.clone(),
        attachments: consumed.infos,
    };
    Ok(match w.session.submit(op).await {
        Ok(Ack::Started) => Sent::Started {
            attached: consumed.attached,
            dropped: consumed.dropped,
        },
        Ok(Ack::Queued { msg_id, position }) => Sent::Queued {
            msg_id,
            position,
            dropped: consumed.dropped,
        },
        Ok(_) => Sent::Full {
            dropped: consumed.dropped,
        },
        Err(_) => Sent::Closed,
    })
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct UnsendBody {
    msg_id: Option<String>,
}

#[utoipa::path(delete, path = "/v1/api/workstreams/{ws_id}/send", tag = "workstreams", summary = "Retract a queued message", request_body = UnsendBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn unsend(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: UnsendBody = parse(&body)?;
    let msg_id = b.msg_id.ok_or_else(|| bad_request("msg_id is required"))?;
    let w = loaded(&state, &id, &ws_id)?;
    let removed = matches!(
        w.session
            .submit(Op::Unqueue {
                msg_id: msg_id.clone()
            })
            .await,
        Ok(Ack::Unqueued { removed: true })
    );
    Ok(Json(json!({
        "status": if removed { "removed" } else { "not_found" },
        "msg_id": msg_id,
    })))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct ApproveBody {
    approved: Option<bool>,
    feedback: Option<String>,
    #[serde(default)]
    always: bool,
    cycle_id: Option<String>,
    call_id: Option<String>,
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/approve", tag = "workstreams", summary = "Resolve an approval cycle (by cycle_id, call_id, else the oldest)", request_body = ApproveBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn approve(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: ApproveBody = parse(&body)?;
    let approved = b
        .approved
        .ok_or_else(|| bad_request("approved (boolean) is required"))?;
    need(&id, "tools.approve")?;
    let w = loaded(&state, &id, &ws_id)?;
    let op = Op::Approve {
        cycle_id: b.cycle_id,
        call_id: b.call_id,
        decision: Decision {
            approved,
            always: b.always,
            feedback: b.feedback.filter(|f| !f.trim().is_empty()),
        },
    };
    let cycle = match w.session.submit(op).await {
        Ok(Ack::Resolved { cycle_id }) => cycle_id,
        Ok(_) => None,
        Err(OpError::Approval(e)) => return Err(ApiError(StatusCode::NOT_FOUND, e.to_string())),
        Err(_) => return Err(not_found()),
    };
    Ok(Json(json!({"status": "ok", "cycle_id": cycle})))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct CancelBody {
    #[serde(default)]
    force: bool,
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/cancel", tag = "workstreams", summary = "Cancel the running turn", request_body = CancelBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: CancelBody = if body.iter().all(u8::is_ascii_whitespace) {
        CancelBody::default()
    } else {
        parse(&body)?
    };
    let w = loaded(&state, &id, &ws_id)?;
    let (was_running, dropped_queued) = match w.session.submit(Op::Cancel { force: b.force }).await
    {
        Ok(Ack::Cancelled {
            was_running,
            dropped,
        }) => (was_running, dropped),
        _ => (false, 0),
    };
    Ok(Json(json!({
        "status": "ok",
        "dropped": {"was_running": was_running, "queued": dropped_queued},
    })))
}

#[derive(Deserialize, Default, utoipa::ToSchema)]
pub(crate) struct CloseBody {
    reason: Option<String>,
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/close", tag = "workstreams", summary = "Unload a workstream (it stays saved)", request_body = CloseBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn close(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: CloseBody = if body.iter().all(u8::is_ascii_whitespace) {
        CloseBody::default()
    } else {
        parse(&body)?
    };
    need(&id, "workstreams.close")?;
    let w = loaded(&state, &id, &ws_id)?;
    let reason = b.reason.unwrap_or_else(|| "closed".into());
    node(&state)?.mgr.unload(&w.core.ws_id, &reason).await;
    Ok(Json(json!({"status": "ok"})))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/open", tag = "workstreams", summary = "Load a saved workstream", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn open(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let w = node(&state)?.mgr.open(&ws_id, owner(&id)).await?;
    Ok(Json(json!({"ws_id": w.core.ws_id, "name": w.core.name()})))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/delete", tag = "workstreams", summary = "Delete a workstream and its history", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn delete_ws(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = node(&state)?;
    let row = state
        .db
        .get_workstream(&ws_id)
        .await?
        .ok_or_else(not_found)?;
    if owner(&id).is_some() && row.user_id.as_deref() != owner(&id) {
        return Err(not_found());
    }
    node.mgr.unload(&ws_id, "deleted").await;
    let deleted = state.db.delete_workstream(&ws_id).await?;
    Ok(Json(json!({"deleted": deleted})))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct TitleBody {
    title: Option<String>,
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/title", tag = "workstreams", summary = "Set the title", request_body = TitleBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn title(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: TitleBody = parse(&body)?;
    let title = b
        .title
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty() && t.chars().count() <= 200)
        .ok_or_else(|| bad_request("title is required (1-200 characters)"))?;
    // Loaded or saved: the owner may retitle either.
    visible_row(&state, &id, &ws_id).await?;
    state.db.set_title(&ws_id, Some(&title)).await?;
    if let Ok(w) = loaded(&state, &id, &ws_id) {
        w.core.rename(&title);
    }
    Ok(Json(json!({"status": "ok", "title": title})))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct RewindBody {
    turns: Option<i64>,
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/rewind", tag = "workstreams", summary = "Drop the last N user turns and what followed", request_body = RewindBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn rewind(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: RewindBody = parse(&body)?;
    let turns = b
        .turns
        .filter(|n| *n >= 1)
        .ok_or_else(|| bad_request("turns must be a positive integer"))?;
    need(&id, "conversation.modify")?;
    let w = loaded(&state, &id, &ws_id)?;
    let _starting = w.starting.lock().await;
    match w
        .session
        .submit(Op::Rewind {
            turns: turns as usize,
        })
        .await
    {
        Ok(Ack::Rewound { text }) => Ok(Json(json!({"status": "ok", "message": text}))),
        Ok(_) => Ok(Json(json!({"status": "ok"}))),
        Err(OpError::Busy) => Ok(Json(json!({"status": "busy"}))),
        Err(OpError::Session(e)) => Err(bad_request(e.to_string())),
        Err(e) => Err(ApiError(StatusCode::CONFLICT, e.to_string())),
    }
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/retry", tag = "workstreams", summary = "Ask the model again for the last user message", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn retry(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    need(&id, "conversation.modify")?;
    let w = loaded(&state, &id, &ws_id)?;
    if state.db.count_turns(&ws_id).await? == 0 {
        return Err(bad_request("nothing to retry"));
    }
    let _starting = w.starting.lock().await;
    match w.session.submit(Op::Retry).await {
        Ok(_) => Ok(Json(json!({"status": "ok"}))),
        Err(OpError::Busy) => Ok(Json(json!({"status": "busy"}))),
        Err(OpError::Session(e)) => Err(bad_request(e.to_string())),
        Err(e) => Err(ApiError(StatusCode::CONFLICT, e.to_string())),
    }
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct CommandBody {
    ws_id: Option<String>,
    command: Option<String>,
}

/// `POST /api/command`: `/clear`, `/compact`, `/name <title>`.
#[utoipa::path(post, path = "/v1/api/command", tag = "workstreams", summary = "Run /clear, /compact or /name <title>", request_body = CommandBody, responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn command(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let b: CommandBody = parse(&body)?;
    let (Some(ws_id), Some(cmd)) = (b.ws_id, b.command) else {
        return Err(bad_request("ws_id and command are required"));
    };
    let cmd = cmd.trim();
    let (name, arg) = cmd.split_once(' ').unwrap_or((cmd, ""));
    if !matches!(name, "/clear" | "/new" | "/compact" | "/name" | "/title") {
        return Err(bad_request(format!(
            "unknown command {name:?} (supported: /clear, /compact, /name <title>)"
        )));
    }
    let w = loaded(&state, &id, &ws_id)?;
    if matches!(name, "/name" | "/title") {
        let title = arg.trim();
        if title.is_empty() {
            return Err(bad_request("usage: /name <title>"));
        }
        state.db.set_title(&ws_id, Some(title)).await?;
        w.core.rename(title);
        return Ok(Json(json!({"status": "ok"})).into_response());
    }
    let op = if name == "/compact" {
        Op::Compact
    } else {
        Op::Clear
    };
    let _starting = w.starting.lock().await;
    match w.session.submit(op).await {
        Ok(_) => Ok(Json(json!({"status": "ok"})).into_response()),
        Err(OpError::Busy) => {
            w.core.emit(Event::BusyError(Message {
                message: format!("{name} refused: a turn is running"),
            }));
            Ok((
                StatusCode::CONFLICT,
                Json(json!({"error": "Workstream is busy", "status": "busy"})),
            )
                .into_response())
        }
        Err(e) => Err(ApiError(StatusCode::CONFLICT, e.to_string())),
    }
}
