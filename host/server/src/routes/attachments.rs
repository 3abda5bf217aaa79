//! Attachments: upload (multipart, magic-byte sniffing, size limit), list,
//! content and delete; and turning attachment ids into message parts at send.

use super::visible_row;
use crate::http::{ApiError, AppState, Identity, bad_request};
use axum::body::Bytes;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine as _;
use serde_json::{Value, json};
use turnstone_engine::ContentPart;
use turnstone_storage::prelude::*;

/// Largest upload.
pub const MAX_BYTES: usize = turnstone_storage::types::MAX_ATTACHMENT_BYTES;
/// Most unconsumed attachments per workstream.
pub const MAX_PENDING: usize = 20;

const IMAGES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// (MIME type, kind) from the bytes themselves; the declared type must agree.
pub fn sniff(
    bytes: &[u8],
    filename: &str,
    declared: Option<&str>,
) -> Result<(String, &'static str), ApiError> {
    let declared = declared
        .map(|d| {
            d.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|d| !d.is_empty() && d != "application/octet-stream");
    let (mime, kind) = match infer::get(bytes) {
        Some(t) if IMAGES.contains(&t.mime_type()) => (t.mime_type().to_string(), "image"),
        Some(t) => {
            return Err(ApiError(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!(
                    "unsupported file type {} (images: PNG, JPEG, GIF, WebP; or UTF-8 text)",
                    t.mime_type()
                ),
            ));
        }
        None if !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok() => {
            let ext = filename
                .rsplit('.')
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            let mime = match ext.as_str() {
                "md" | "markdown" => "text/markdown",
                "json" => "application/json",
                "csv" => "text/csv",
                _ => "text/plain",
            };
            (mime.to_string(), "text")
        }
        None => {
            return Err(ApiError(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unrecognised binary content (images: PNG, JPEG, GIF, WebP; or UTF-8 text)".into(),
            ));
        }
    };
    if let Some(d) = declared {
        let d = if d == "image/jpg" {
            "image/jpeg".to_string()
        } else {
            d
        };
        let agrees = if kind == "image" {
            d == mime
        } else {
            d.starts_with("text/") || d == "application/json"
        };
        if !agrees {
            return Err(bad_request(format!(
                "MIME mismatch: declared {d} but the content is {mime}"
            )));
        }
    }
    Ok((mime, kind))
}

/// The wire shape of an attachment.
pub fn info(a: &Attachment) -> Value {
    json!({
        "attachment_id": a.attachment_id, "filename": a.filename, "mime_type": a.mime_type,
        "size_bytes": a.size_bytes, "kind": a.kind, "created": a.created,
    })
}

fn clean_name(name: Option<&str>) -> String {
    let n: String = name
        .unwrap_or("upload")
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("upload")
        .chars()
        .filter(|c| !c.is_control() && *c != '"')
        .take(200)
        .collect();
    if n.trim().is_empty() {
        "upload".into()
    } else {
        n
    }
}

/// Stores one uploaded file for `ws_id`.
pub async fn store(
    state: &AppState,
    ws_id: &str,
    user_id: &str,
    filename: Option<&str>,
    declared: Option<&str>,
    bytes: Bytes,
) -> Result<Attachment, ApiError> {
    if bytes.len() > MAX_BYTES {
        return Err(too_large());
    }
    if bytes.is_empty() {
        return Err(bad_request("the file is empty"));
    }
    let filename = clean_name(filename);
    let (mime, kind) = sniff(&bytes, &filename, declared)?;
    if state.db.list_attachments(ws_id, true).await?.len() >= MAX_PENDING {
        return Err(bad_request(format!(
            "{MAX_PENDING} attachments are already waiting to be sent"
        )));
    }
    Ok(state
        .db
        .save_attachment(&NewAttachment {
            ws_id: ws_id.into(),
            user_id: Some(user_id.into()),
            filename,
            mime_type: mime,
            kind: kind.into(),
            content: bytes.to_vec(),
        })
        .await?)
}

fn too_large() -> ApiError {
    ApiError(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("attachments are limited to {} MiB", MAX_BYTES >> 20),
    )
}

/// Reads the `file` parts of a multipart body: (filename, declared type, bytes).
pub async fn files(
    mp: &mut Multipart,
    meta: &mut Option<Bytes>,
) -> Result<Vec<(Option<String>, Option<String>, Bytes)>, ApiError> {
    let mut out = Vec::new();
    loop {
        let field = match mp.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => return Err(too_large()),
            Err(e) => return Err(bad_request(format!("invalid multipart body: {e}"))),
        };
        let name = field.name().unwrap_or("").to_string();
        let filename = field.file_name().map(String::from);
        let declared = field.content_type().map(String::from);
        let bytes = field.bytes().await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large()
            } else {
                bad_request(format!("invalid multipart body: {e}"))
            }
        })?;
        match name.as_str() {
            "file" => out.push((filename, declared, bytes)),
            "meta" => *meta = Some(bytes),
            _ => {}
        }
    }
    Ok(out)
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/attachments", tag = "attachments",
    summary = "Upload one file (multipart field `file`): images or UTF-8 text, at most 10 MiB",
    params(("ws_id" = String, Path, description = "Workstream id (32 hex)")),
    responses((status = 200, description = "Stored", body = Object),
        (status = 400, description = "MIME mismatch or bad body", body = crate::routes::ErrorBody),
        (status = 413, description = "Too large", body = crate::routes::ErrorBody),
        (status = 415, description = "Unsupported type", body = crate::routes::ErrorBody)))]
pub(crate) async fn upload(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    mut mp: Multipart,
) -> Result<Json<Value>, ApiError> {
    // Loaded or saved: attachments live in storage, like history.
    let w = visible_row(&state, &id, &ws_id).await?;
    let mut meta = None;
    let mut parts = files(&mut mp, &mut meta).await?;
    if parts.len() != 1 {
        return Err(bad_request("send exactly one `file` part"));
    }
    let (name, declared, bytes) = parts.remove(0);
    let a = store(
        &state,
        &w.ws_id,
        &id.user_id,
        name.as_deref(),
        declared.as_deref(),
        bytes,
    )
    .await?;
    Ok(Json(info(&a)))
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/attachments", tag = "attachments",
    summary = "Attachments waiting to be sent",
    params(("ws_id" = String, Path, description = "Workstream id (32 hex)")),
    responses((status = 200, description = "Success", body = Object), (status = 404, description = "Unknown workstream", body = crate::routes::ErrorBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    // Loaded or saved: attachments live in storage, like history.
    let w = visible_row(&state, &id, &ws_id).await?;
    let list = state.db.list_attachments(&w.ws_id, true).await?;
    Ok(Json(
        json!({"attachments": list.iter().map(info).collect::<Vec<_>>()}),
    ))
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/attachments/{attachment_id}/content", tag = "attachments",
    summary = "The raw bytes with their stored Content-Type",
    params(("ws_id" = String, Path, description = "Workstream id"), ("attachment_id" = String, Path, description = "Attachment id")),
    responses((status = 200, description = "The file"), (status = 404, description = "Unknown", body = crate::routes::ErrorBody)))]
pub(crate) async fn content(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path((ws_id, attachment_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    // Loaded or saved: attachments live in storage, like history.
    let w = visible_row(&state, &id, &ws_id).await?;
    let (a, bytes) = state
        .db
        .get_attachment(&w.ws_id, &attachment_id)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "Attachment not found".into()))?;
    let mut resp = bytes.into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&a.mime_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!(
        "inline; filename=\"{}\"",
        a.filename
            .replace(|c: char| !c.is_ascii_graphic() && c != ' ', "_")
    )) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

#[utoipa::path(delete, path = "/v1/api/workstreams/{ws_id}/attachments/{attachment_id}", tag = "attachments",
    summary = "Delete an attachment that was not sent yet",
    params(("ws_id" = String, Path, description = "Workstream id"), ("attachment_id" = String, Path, description = "Attachment id")),
    responses((status = 200, description = "Deleted", body = Object), (status = 404, description = "Unknown or already sent", body = crate::routes::ErrorBody)))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path((ws_id, attachment_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    // Loaded or saved: attachments live in storage, like history.
    let w = visible_row(&state, &id, &ws_id).await?;
    if !state.db.delete_attachment(&w.ws_id, &attachment_id).await? {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            "Attachment not found (or already sent)".into(),
        ));
    }
    Ok(Json(json!({"status": "ok"})))
}

/// What a send carries besides its text.
#[derive(Default)]
pub struct Consumed {
    /// Text with text attachments appended.
    pub text: String,
    /// Image parts.
    pub images: Vec<ContentPart>,
    /// Ids used.
    pub attached: Vec<String>,
    /// Ids that were unknown or already sent.
    pub dropped: Vec<String>,
    /// Wire descriptions for `user_turn`.
    pub infos: Vec<Value>,
}

/// Consumes `ids` for a send of `text`: text files are appended to the message,
/// images become `data:` URL parts (kept with the turn for resume and retry).
pub async fn consume(
    state: &AppState,
    ws_id: &str,
    text: &str,
    ids: &[String],
) -> Result<Consumed, ApiError> {
    let mut out = Consumed {
        text: text.to_string(),
        ..Default::default()
    };
    if ids.is_empty() {
        return Ok(out);
    }
    let got = state.db.consume_attachments(ws_id, ids).await?;
    for (a, bytes) in got {
        if a.kind == "image" {
            let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
            out.images.push(ContentPart::Image {
                attachment_id: Some(a.attachment_id.clone()),
                url: Some(format!("data:{};base64,{data}", a.mime_type)),
            });
        } else {
            let body = String::from_utf8_lossy(&bytes);
            out.text.push_str(&format!(
                "\n\n<attachment filename=\"{}\">\n{body}\n</attachment>",
                a.filename
            ));
        }
        out.infos.push(info(&a));
        out.attached.push(a.attachment_id);
    }
    out.dropped = ids
        .iter()
        .filter(|i| !out.attached.contains(i))
        .cloned()
        .collect();
    Ok(out)
}
