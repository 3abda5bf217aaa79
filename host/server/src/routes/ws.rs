//! Per-workstream actions: create, list, detail, send, approve, cancel,
//! close/open/delete, title, rewind, retry and slash commands. Their bodies
//! are in [`super::ws_types`].

use super::ws_types::*;
use super::{BadInput, Guarded, Missing, TooLarge};
use super::{attachments, loaded, need, node, not_found, owner, visible_row};
use crate::error::WireError;
use crate::http::{
    ApiError, AppState, Identity, bad_request, is_blank, parse, parse_optional, py_trim,
};
use crate::manager::CreateOptions;
use crate::routes::StatusOk;
use crate::workstream::Workstream;
use axum::extract::FromRequest;
use axum::extract::{Path, State};
use axum::{Extension, Json};
use turnstone_engine::runner::{Ack, OpError};
use turnstone_protocol::{Decision, Event, InputPart, Message, Op};

#[utoipa::path(post, path = "/v1/api/workstreams/new", tag = "workstreams", summary = "Create (or fork with resume_ws) a workstream", description = "The body is optional. A `multipart/form-data` variant carries the same JSON in a `meta` field and files in `file` parts (stored as pending attachments).", request_body = Option<CreateBody>, responses((status = 200, description = "Created", body = CreateResponse), BadInput, Guarded, (status = 404, description = "`resume_ws` or `ws_id` is not the caller's, or `skill` names no skill", body = crate::routes::ErrorBody), (status = 409, description = "`ws_id` is taken", body = crate::routes::ErrorBody), TooLarge, (status = 503, description = "The model alias is not loaded (`code: model_not_loaded`), or the server is at capacity (`Retry-After`)", body = WireError)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    req: axum::extract::Request,
) -> Result<Json<CreateResponse>, ApiError> {
    let ip = crate::http::client_ip(&req);
    let multipart = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    // The multipart variant: a `meta` field with the JSON body plus `file` parts.
    let (body, files) = if multipart {
        let mut mp = axum::extract::Multipart::from_request(req, &state)
            .await
            .map_err(|e| bad_request(format!("invalid multipart body: {e}")))?;
        let mut meta = None;
        let files = attachments::files(&mut mp, Some(&mut meta)).await?;
        (meta.unwrap_or_default(), files)
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
            return Err(too_large());
        }
        match axum::body::to_bytes(req.into_body(), MAX_JSON_BODY).await {
            Ok(b) => (b, Vec::new()),
            Err(e) if crate::http::is_length_limit(&e) => return Err(too_large()),
            Err(e) => return Err(crate::http::body_error(e)),
        }
    };
    let created = create_inner(&state, &id, &body, files).await?;
    crate::audit::record(
        &state.db,
        Some(&id.user_id),
        ip,
        "workstream.create",
        Some(&created.ws_id),
        serde_json::json!({ "name": created.name, "resumed": created.resumed }),
    )
    .await;
    Ok(Json(created))
}

/// Largest JSON body of `/new` (the multipart variant has its own limits).
const MAX_JSON_BODY: usize = 2 << 20;
/// Oversized bodies up to this size are read and dropped before the 413.
const DRAIN_CAP: usize = 64 << 20;

fn too_large() -> ApiError {
    ApiError::TooLarge(format!(
        "request body too large (at most {MAX_JSON_BODY} bytes)"
    ))
}

async fn create_inner(
    state: &AppState,
    id: &Identity,
    body: &[u8],
    files: Vec<(Option<String>, Option<String>, axum::body::Bytes)>,
) -> Result<CreateResponse, ApiError> {
    let b: CreateBody = parse_optional(body)?;
    if id.permissions.iter().all(|p| p != "admin.coordinator") {
        need(id, "workstreams.create")?;
    }
    let initial = b.initial_message.clone().filter(|m| !is_blank(m));
    let node = node(state)?;
    let opts = CreateOptions {
        ws_id: b.ws_id,
        name: b.name.filter(|n| !is_blank(n)),
        model: b.model,
        auto_approve: b.auto_approve,
        resume_ws: b.resume_ws,
        skill: b.skill.filter(|s| !is_blank(s)),
    };
    let (ws, resumed, copied) = node.mgr.create(Some(&id.user_id), opts).await?;
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
                return Err(e);
            }
        }
    }
    let mut initial_message_status = None;
    if let Some(text) = initial {
        match send_message(state, &ws, &text, None, &attachment_ids).await? {
            Sent::Started { .. } | Sent::Queued { .. } => {}
            Sent::Full { .. } => initial_message_status = Some("queue_full".into()),
            Sent::Closed => initial_message_status = Some("refused_closed".into()),
        }
    }
    Ok(CreateResponse {
        ws_id: ws.core.ws_id.clone(),
        name: ws.core.name(),
        resumed,
        message_count: copied,
        attachment_ids,
        initial_message_status,
    })
}

fn summary(w: &Workstream) -> WorkstreamSummary {
    WorkstreamSummary {
        ws_id: w.core.ws_id.clone(),
        name: w.core.name(),
        state: w.core.status().state,
        kind: w.core.kind.clone(),
        parent_ws_id: None,
        user_id: w.core.user_id.clone(),
        project_id: None,
        persistence_state: "persisted".into(),
        model: w.core.model.1.clone(),
        model_alias: w.core.model.0.clone(),
    }
}

#[utoipa::path(get, path = "/v1/api/workstreams", tag = "workstreams", summary = "Loaded workstreams of the caller", responses((status = 200, description = "The caller's loaded workstreams", body = WorkstreamList), Guarded))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<WorkstreamList>, ApiError> {
    let node = node(&state)?;
    let workstreams = node
        .mgr
        .all()
        .iter()
        .filter(|w| owner(&id).is_none() || w.core.user_id.as_deref() == owner(&id))
        .map(|w| summary(w))
        .collect();
    Ok(Json(WorkstreamList { workstreams }))
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}", tag = "workstreams", summary = "One loaded workstream with pending approvals", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "The workstream", body = WorkstreamDetail), Guarded, Missing))]
pub(crate) async fn detail(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<WorkstreamDetail>, ApiError> {
    let w = loaded(&state, &id, &ws_id)?;
    let cycles = w.session.pending_approvals();
    Ok(Json(WorkstreamDetail {
        summary: summary(&w),
        pending_approval: !cycles.is_empty(),
        pending_approval_details: cycles
            .into_iter()
            .map(|c| PendingApprovalDetail {
                call_id: c.items.first().map(|i| i.call_id.clone()),
                cycle_id: c.cycle_id,
                judge_pending: c.judge_pending,
                items: c.items,
            })
            .collect(),
        queued: w.session.queued(),
    }))
}

fn valid_client_send_id(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/send", tag = "workstreams", summary = "Send a message: ok, queued (joins at the next tool-result seam) or queue_full", request_body = SendBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "What the send did", body = SendResponse), BadInput, Guarded, Missing, TooLarge))]
pub(crate) async fn send(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<SendResponse>, ApiError> {
    let b: SendBody = parse(&body)?;
    let message = b
        .message
        .filter(|m| !is_blank(m))
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
    let answer = |status, attached_ids, dropped_attachment_ids| SendResponse {
        status,
        priority: None,
        msg_id: None,
        position: None,
        attached_ids,
        dropped_attachment_ids,
    };
    Ok(Json(match sent {
        Sent::Started { attached, dropped } => answer(SendStatus::Ok, attached, dropped),
        Sent::Queued {
            msg_id,
            position,
            dropped,
        } => SendResponse {
            priority: Some("normal".into()),
            msg_id: Some(msg_id),
            position: Some(position),
            ..answer(SendStatus::Queued, Vec::new(), dropped)
        },
        Sent::Full { dropped } => answer(SendStatus::QueueFull, Vec::new(), dropped),
        Sent::Closed => return Err(not_found()),
    }))
}

/// What a send did.
pub(crate) enum Sent {
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
pub(crate) async fn send_message(
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

#[utoipa::path(delete, path = "/v1/api/workstreams/{ws_id}/send", tag = "workstreams", summary = "Retract a queued message", request_body = UnsendBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Whether it was still queued", body = UnsendResponse), BadInput, Guarded, Missing))]
pub(crate) async fn unsend(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<UnsendResponse>, ApiError> {
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
    Ok(Json(UnsendResponse {
        status: if removed {
            UnsendStatus::Removed
        } else {
            UnsendStatus::NotFound
        },
        msg_id,
    }))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/approve", tag = "workstreams", summary = "Resolve an approval cycle (by cycle_id, call_id, else the oldest)", request_body = ApproveBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Resolved (`cycle_id: null`: nothing was pending)", body = ApproveResponse), BadInput, Guarded, (status = 404, description = "Not found, or no pending cycle matches `cycle_id`/`call_id`", body = crate::routes::ErrorBody)))]
pub(crate) async fn approve(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<ApproveResponse>, ApiError> {
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
            feedback: b.feedback.filter(|f| !is_blank(f)),
        },
    };
    let cycle_id = match w.session.submit(op).await {
        Ok(Ack::Resolved { cycle_id }) => cycle_id,
        Ok(_) => None,
        Err(e) => return Err(e.into()),
    };
    Ok(Json(ApproveResponse {
        status: "ok",
        cycle_id,
    }))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/cancel", tag = "workstreams", summary = "Cancel the running turn", request_body = Option<CancelBody>, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "What was stopped", body = CancelResponse), BadInput, Guarded, Missing))]
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<CancelResponse>, ApiError> {
    let b: CancelBody = parse_optional(&body)?;
    let w = loaded(&state, &id, &ws_id)?;
    let (was_running, queued) = match w.session.submit(Op::Cancel { force: b.force }).await {
        Ok(Ack::Cancelled {
            was_running,
            dropped,
        }) => (was_running, dropped),
        _ => (false, 0),
    };
    Ok(Json(CancelResponse {
        status: "ok",
        dropped: Dropped {
            was_running,
            queued,
        },
    }))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/close", tag = "workstreams", summary = "Unload a workstream (it stays saved)", request_body = Option<CloseBody>, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Closed", body = StatusOk), BadInput, Guarded, Missing))]
pub(crate) async fn close(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<StatusOk>, ApiError> {
    let b: CloseBody = parse_optional(&body)?;
    need(&id, "workstreams.close")?;
    let w = loaded(&state, &id, &ws_id)?;
    let reason = b.reason.unwrap_or_else(|| "closed".into());
    node(&state)?.mgr.unload(&w.core.ws_id, &reason).await;
    crate::audit::record(
        &state.db,
        Some(&id.user_id),
        addr.map(|Extension(axum::extract::ConnectInfo(a))| a.ip()),
        "workstream.close",
        Some(&w.core.ws_id),
        serde_json::json!({ "reason": reason }),
    )
    .await;
    Ok(StatusOk::ok())
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/open", tag = "workstreams", summary = "Load a saved workstream", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Loaded", body = OpenResponse), Guarded, Missing, (status = 503, description = "The saved model alias is not loaded, or the server is at capacity", body = WireError)))]
pub(crate) async fn open(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<OpenResponse>, ApiError> {
    let w = node(&state)?.mgr.open(&ws_id, owner(&id)).await?;
    Ok(Json(OpenResponse {
        ws_id: w.core.ws_id.clone(),
        name: w.core.name(),
    }))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/delete", tag = "workstreams", summary = "Delete a workstream and its history", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Deleted", body = DeleteResponse), Guarded, Missing))]
pub(crate) async fn delete_ws(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    Path(ws_id): Path<String>,
) -> Result<Json<DeleteResponse>, ApiError> {
    let node = node(&state)?;
    let row = visible_row(&state, &id, &ws_id).await?;
    node.mgr.unload(&ws_id, "deleted").await;
    let deleted = state.db.delete_workstream(&ws_id).await?;
    crate::audit::record(
        &state.db,
        Some(&id.user_id),
        addr.map(|Extension(axum::extract::ConnectInfo(a))| a.ip()),
        "workstream.delete",
        Some(&ws_id),
        serde_json::json!({ "deleted": deleted, "owner": row.user_id, "name": row.name }),
    )
    .await;
    Ok(Json(DeleteResponse { deleted }))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/title", tag = "workstreams", summary = "Set the title", request_body = TitleBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "The title as stored", body = TitleResponse), BadInput, Guarded, Missing))]
pub(crate) async fn title(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<TitleResponse>, ApiError> {
    let b: TitleBody = parse(&body)?;
    let title = b
        .title
        .filter(|t| !is_blank(t) && t.chars().count() <= MAX_TITLE_CHARS)
        .map(|t| py_trim(&t).to_string())
        .ok_or_else(|| bad_request("title is required (1-200 characters)"))?;
    // Loaded or saved: the owner may retitle either.
    visible_row(&state, &id, &ws_id).await?;
    state.db.set_title(&ws_id, Some(&title)).await?;
    if let Ok(w) = loaded(&state, &id, &ws_id) {
        w.core.rename(&title);
    }
    Ok(Json(TitleResponse {
        status: "ok",
        title,
    }))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/rewind", tag = "workstreams", summary = "Drop the last N user turns and what followed", request_body = RewindBody, params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Done, or `busy` while a turn runs", body = EditResponse), BadInput, Guarded, Missing, (status = 409, description = "Fewer user messages than `turns`", body = crate::routes::ErrorBody)))]
pub(crate) async fn rewind(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<EditResponse>, ApiError> {
    let b: RewindBody = parse(&body)?;
    let turns = b
        .turns
        .filter(|n| (1..=MAX_REWIND).contains(n))
        .ok_or_else(|| bad_request(format!("turns must be an integer from 1 to {MAX_REWIND}")))?;
    need(&id, "conversation.modify")?;
    let w = loaded(&state, &id, &ws_id)?;
    let _starting = w.starting.lock().await;
    edit_answer(
        w.session
            .submit(Op::Rewind {
                turns: turns as usize,
            })
            .await,
    )
}

/// Rewind and retry answer `busy` with a 200 while a turn runs (the wire
/// contract); every other refusal is an error.
fn edit_answer(r: Result<Ack, OpError>) -> Result<Json<EditResponse>, ApiError> {
    let ok = |message| {
        Ok(Json(EditResponse {
            status: EditStatus::Ok,
            message,
        }))
    };
    match r {
        Ok(Ack::Rewound { text }) => ok(Some(text)),
        Ok(_) => ok(None),
        Err(OpError::Busy) => Ok(Json(EditResponse {
            status: EditStatus::Busy,
            message: None,
        })),
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/retry", tag = "workstreams", summary = "Ask the model again for the last user message", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "The new turn started, or `busy` while a turn runs", body = EditResponse), Guarded, Missing, (status = 409, description = "Nothing to retry", body = crate::routes::ErrorBody)))]
pub(crate) async fn retry(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<EditResponse>, ApiError> {
    need(&id, "conversation.modify")?;
    let w = loaded(&state, &id, &ws_id)?;
    if state.db.count_turns(&ws_id).await? == 0 {
        return Err(ApiError::Conflict("nothing to retry".into()));
    }
    let _starting = w.starting.lock().await;
    edit_answer(w.session.submit(Op::Retry).await)
}

/// `POST /api/command`: `/clear`, `/compact`, `/name <title>`, `/skill …`.
#[utoipa::path(post, path = "/v1/api/command", tag = "workstreams", summary = "Run /clear, /compact, /name <title> or /skill NAME [ARGS] | off", request_body = CommandBody, responses((status = 200, description = "Done", body = StatusOk), BadInput, Guarded, Missing, (status = 409, description = "A turn is running", body = BusyBody)))]
pub(crate) async fn command(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    body: axum::body::Bytes,
) -> Result<Json<StatusOk>, ApiError> {
    let b: CommandBody = parse(&body)?;
    let (Some(ws_id), Some(cmd)) = (b.ws_id, b.command) else {
        return Err(bad_request("ws_id and command are required"));
    };
    let cmd = py_trim(&cmd);
    let (name, arg) = cmd.split_once(' ').unwrap_or((cmd, ""));
    if !matches!(
        name,
        "/clear" | "/new" | "/compact" | "/name" | "/title" | "/skill"
    ) {
        return Err(bad_request(format!(
            "unknown command {name:?} (supported: /clear, /compact, /name <title>, /skill NAME [ARGS] | off)"
        )));
    }
    let title = py_trim(arg);
    if matches!(name, "/name" | "/title") && title.is_empty() {
        return Err(bad_request("usage: /name <title>"));
    }
    let w = loaded(&state, &id, &ws_id)?;
    if matches!(name, "/name" | "/title") {
        state.db.set_title(&ws_id, Some(title)).await?;
        w.core.rename(title);
        return Ok(StatusOk::ok());
    }
    let op = match name {
        "/compact" => Op::Compact,
        "/skill" => skill_op(&state, title).await?,
        _ => Op::Clear,
    };
    let _starting = w.starting.lock().await;
    match w.session.submit(op).await {
        Ok(_) => Ok(StatusOk::ok()),
        Err(OpError::Busy) => {
            w.core.emit(Event::BusyError(Message {
                message: format!("{name} refused: a turn is running"),
            }));
            Err(ApiError::Busy)
        }
        Err(e) => Err(e.into()),
    }
}

/// The op for `/skill ARGS`: `off`, or a skill with its arguments bound.
async fn skill_op(state: &AppState, arg: &str) -> Result<Op, ApiError> {
    use turnstone_engine::skills::{SkillCommand, bind_arguments, parse_command};
    Ok(match parse_command(arg).map_err(bad_request)? {
        SkillCommand::List => return Err(bad_request("usage: /skill NAME [ARGS] | /skill off")),
        SkillCommand::Off => Op::UseSkill {
            name: None,
            arguments: Default::default(),
        },
        SkillCommand::Use {
            name,
            positional,
            named,
        } => {
            let lib = super::skills::library(state)?;
            let catalog = lib.catalog().await;
            if catalog.get(&name).is_none() {
                return Err(ApiError::NotFound(format!("no skill named {name:?}")));
            }
            Op::UseSkill {
                arguments: bind_arguments(&catalog, &name, positional, named)
                    .map_err(bad_request)?,
                name: Some(name),
            }
        }
    })
}
