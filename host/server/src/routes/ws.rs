//! Per-workstream actions: create, list, detail, send, approve, cancel,
//! close/open/delete, title, rewind, retry and slash commands.

use super::{loaded, need, node, not_found, owner};
use crate::http::{ApiError, AppState, Identity, bad_request, parse};
use crate::manager::{CreateOptions, ManagerError};
use crate::workstream::{Job, SendOutcome, random_hex, state_name};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use turnstone_engine::ui::Approval;

/// Body of `POST /api/workstreams/new` (every field optional).
#[derive(Deserialize, Default)]
pub(super) struct CreateBody {
    name: Option<String>,
    model: Option<String>,
    #[serde(default)]
    auto_approve: bool,
    resume_ws: Option<String>,
    initial_message: Option<String>,
    ws_id: Option<String>,
    kind: Option<String>,
}

pub(super) async fn create(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    body: axum::body::Bytes,
) -> Response {
    match create_inner(&state, &id, &body).await {
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
    let mut initial_status = Value::Null;
    if let Some(text) = initial {
        match ws.core.claim_or_queue(&ws.queue, &text) {
            SendOutcome::Start => {
                ws.core.emit_user_turn(&text, None);
                if ws.submit(Job::Send(text)).await.is_err() {
                    ws.core.release();
                    initial_status = "refused_closed".into();
                }
            }
            SendOutcome::Queued(_) => {}
            SendOutcome::Full => initial_status = "queue_full".into(),
        }
    }
    Ok(Json(json!({
        "ws_id": ws.core.ws_id,
        "name": ws.core.name(),
        "resumed": resumed,
        "message_count": copied,
        "attachment_ids": [],
        "initial_message_status": initial_status,
    }))
    .into_response())
}

fn summary(w: &crate::workstream::Workstream) -> Value {
    let s = w.core.status();
    json!({
        "ws_id": w.core.ws_id,
        "name": w.core.name(),
        "state": state_name(s.state),
        "kind": w.core.kind,
        "parent_ws_id": null,
        "user_id": w.core.user_id,
        "project_id": null,
        "persistence_state": "persisted",
        "model": w.core.model.1,
        "model_alias": w.core.model.0,
    })
}

pub(super) async fn list(
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

pub(super) async fn detail(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let w = loaded(&state, &id, &ws_id)?;
    let mut v = summary(&w);
    let cycles = w.core.pending_cycles();
    v["pending_approval"] = (!cycles.is_empty()).into();
    v["pending_approval_details"] = cycles
        .iter()
        .map(|c| {
            json!({
                "cycle_id": c["cycle_id"],
                "call_id": c["items"].get(0).map(|i| i["call_id"].clone()),
                "judge_pending": false,
                "items": c["items"],
            })
        })
        .collect::<Vec<_>>()
        .into();
    v["queued"] = w.queue.len().into();
    Ok(Json(v))
}

#[derive(Deserialize)]
pub(super) struct SendBody {
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

pub(super) async fn send(
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
    if w.core.is_closed() {
        return Err(not_found());
    }
    let dropped = b.attachment_ids;
    match w.core.claim_or_queue(&w.queue, &message) {
        SendOutcome::Start => {
            w.core.emit_user_turn(&message, b.client_send_id.as_deref());
            if let Err(e) = w.submit(Job::Send(message)).await {
                w.core.release();
                return Err(ApiError(StatusCode::CONFLICT, e));
            }
            Ok(Json(json!({
                "status": "ok",
                "attached_ids": [],
                "dropped_attachment_ids": dropped,
            })))
        }
        SendOutcome::Queued(pos) => {
            let msg_id = random_hex();
            w.core.remember_queued(&msg_id, &message);
            w.core.emit(
                "message_queued",
                json!({
                    "message": message, "msg_id": msg_id, "priority": "normal",
                    "sender": id.user_id, "client_send_id": b.client_send_id,
                }),
            );
            Ok(Json(json!({
                "status": "queued",
                "priority": "normal",
                "msg_id": msg_id,
                "position": pos,
                "attached_ids": [],
                "dropped_attachment_ids": dropped,
            })))
        }
        SendOutcome::Full => Ok(Json(json!({
            "status": "queue_full",
            "attached_ids": [],
            "dropped_attachment_ids": dropped,
        }))),
    }
}

#[derive(Deserialize)]
pub(super) struct UnsendBody {
    msg_id: Option<String>,
}

pub(super) async fn unsend(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: UnsendBody = parse(&body)?;
    let msg_id = b.msg_id.ok_or_else(|| bad_request("msg_id is required"))?;
    let w = loaded(&state, &id, &ws_id)?;
    let removed = w
        .core
        .forget_queued(&msg_id)
        .is_some_and(|text| w.queue.remove_text(&text));
    Ok(Json(json!({
        "status": if removed { "removed" } else { "not_found" },
        "msg_id": msg_id,
    })))
}

#[derive(Deserialize)]
pub(super) struct ApproveBody {
    approved: Option<bool>,
    feedback: Option<String>,
    #[serde(default)]
    always: bool,
    cycle_id: Option<String>,
    call_id: Option<String>,
}

pub(super) async fn approve(
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
    let answer = Approval {
        approved,
        always: b.always,
        feedback: b.feedback.filter(|f| !f.trim().is_empty()),
    };
    let cycle = w
        .core
        .resolve(b.cycle_id.as_deref(), b.call_id.as_deref(), answer)
        .map_err(|e| ApiError(StatusCode::NOT_FOUND, e))?;
    Ok(Json(json!({"status": "ok", "cycle_id": cycle})))
}

#[derive(Deserialize, Default)]
pub(super) struct CancelBody {
    #[serde(default)]
    force: bool,
}

pub(super) async fn cancel(
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
    let was_running = w.core.is_busy();
    // A forced cancel also drops what was queued behind the turn.
    let dropped_queued = if b.force { w.queue.drain().len() } else { 0 };
    w.cancel.cancel();
    Ok(Json(json!({
        "status": "ok",
        "dropped": {"was_running": was_running, "queued": dropped_queued},
    })))
}

#[derive(Deserialize, Default)]
pub(super) struct CloseBody {
    reason: Option<String>,
}

pub(super) async fn close(
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

pub(super) async fn open(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let w = node(&state)?.mgr.open(&ws_id, owner(&id)).await?;
    Ok(Json(json!({"ws_id": w.core.ws_id, "name": w.core.name()})))
}

pub(super) async fn delete_ws(
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

#[derive(Deserialize)]
pub(super) struct TitleBody {
    title: Option<String>,
}

pub(super) async fn title(
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
    let w = loaded(&state, &id, &ws_id)?;
    state.db.set_title(&ws_id, Some(&title)).await?;
    w.core.rename(&title);
    Ok(Json(json!({"status": "ok", "title": title})))
}

#[derive(Deserialize)]
pub(super) struct RewindBody {
    turns: Option<i64>,
}

pub(super) async fn rewind(
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
    if !w.core.try_claim() {
        return Ok(Json(json!({"status": "busy"})));
    }
    let (tx, rx) = oneshot::channel();
    w.submit(Job::Rewind(turns as usize, tx))
        .await
        .map_err(|e| ApiError(StatusCode::CONFLICT, e))?;
    match rx.await {
        Ok(Ok(text)) => Ok(Json(json!({"status": "ok", "message": text}))),
        Ok(Err(e)) => Err(bad_request(e)),
        Err(_) => Err(ApiError(
            StatusCode::CONFLICT,
            "the workstream closed".into(),
        )),
    }
}

pub(super) async fn retry(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    need(&id, "conversation.modify")?;
    let w = loaded(&state, &id, &ws_id)?;
    if state.db.count_turns(&ws_id).await? == 0 {
        return Err(bad_request("nothing to retry"));
    }
    if !w.core.try_claim() {
        return Ok(Json(json!({"status": "busy"})));
    }
    let (tx, rx) = oneshot::channel();
    w.submit(Job::Retry(tx))
        .await
        .map_err(|e| ApiError(StatusCode::CONFLICT, e))?;
    match rx.await {
        Ok(Ok(())) => Ok(Json(json!({"status": "ok"}))),
        Ok(Err(e)) => Err(bad_request(e)),
        Err(_) => Err(ApiError(
            StatusCode::CONFLICT,
            "the workstream closed".into(),
        )),
    }
}

#[derive(Deserialize)]
pub(super) struct CommandBody {
    ws_id: Option<String>,
    command: Option<String>,
}

/// `POST /api/command`: `/clear`, `/compact`, `/name <title>`.
pub(super) async fn command(
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
    if !w.core.try_claim() {
        w.core.emit(
            "busy_error",
            json!({"message": format!("{name} refused: a turn is running")}),
        );
        return Ok((
            StatusCode::CONFLICT,
            Json(json!({"error": "Workstream is busy", "status": "busy"})),
        )
            .into_response());
    }
    let result = if name == "/compact" {
        let (tx, rx) = oneshot::channel();
        w.submit(Job::Compact(tx))
            .await
            .map_err(|e| ApiError(StatusCode::CONFLICT, e))?;
        rx.await
            .unwrap_or_else(|_| Err("the workstream closed".into()))
    } else {
        let (tx, rx) = oneshot::channel();
        w.submit(Job::Clear(tx))
            .await
            .map_err(|e| ApiError(StatusCode::CONFLICT, e))?;
        rx.await.map_err(|_| "the workstream closed".to_string())
    };
    match result {
        Ok(()) => Ok(Json(json!({"status": "ok"})).into_response()),
        Err(e) => Err(ApiError(StatusCode::CONFLICT, e)),
    }
}

/// Attachments need the blob store, which is not built yet: say so plainly.
pub(super) async fn no_attachments() -> ApiError {
    ApiError(
        StatusCode::NOT_IMPLEMENTED,
        "attachments are not supported by this server yet".into(),
    )
}
