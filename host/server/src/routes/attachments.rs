//! Attachments: upload (multipart, magic-byte sniffing, size limit), list,
//! content and delete; and turning attachment ids into message parts at send.

use super::{BadInput, Guarded, Missing, StatusOk, TooLarge, not_found, visible_row};
use crate::http::{ApiError, AppState, Identity, bad_request};
use axum::body::Bytes;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine as _;
use serde_json::Value;
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
    let (mime, kind) = detect(bytes, filename)?;
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

/// An image by its magic bytes, else UTF-8 text without NUL bytes (HTML, XML
/// and scripts included: they are text, whatever `infer` calls them), else 415.
fn detect(bytes: &[u8], filename: &str) -> Result<(String, &'static str), ApiError> {
    let found = infer::get(bytes);
    if let Some(t) = found.filter(|t| IMAGES.contains(&t.mime_type())) {
        return Ok((t.mime_type().to_string(), "image"));
    }
    let text_like = found.is_none_or(|t| t.matcher_type() == infer::MatcherType::Text);
    if text_like && !bytes.contains(&0) && std::str::from_utf8(bytes).is_ok() {
        return Ok((text_mime(filename).to_string(), "text"));
    }
    let message = match found {
        Some(t) => format!(
            "unsupported file type {} (images: PNG, JPEG, GIF, WebP; or UTF-8 text)",
            t.mime_type()
        ),
        None => "unrecognised binary content (images: PNG, JPEG, GIF, WebP; or UTF-8 text)".into(),
    };
    Err(ApiError::Framework {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        message,
    })
}

/// The MIME type of a text file, by its extension.
fn text_mime(filename: &str) -> &'static str {
    let ext = filename
        .rsplit('.')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "md" | "markdown" => "text/markdown",
        "json" => "application/json",
        "csv" => "text/csv",
        _ => "text/plain",
    }
}

/// The wire shape of an attachment.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct AttachmentInfo {
    /// Id (32 hex).
    pub attachment_id: String,
    /// File name as uploaded (without directories).
    pub filename: String,
    /// MIME type, from the content itself.
    pub mime_type: String,
    /// Size in bytes.
    pub size_bytes: i64,
    /// `image` or `text`.
    pub kind: String,
    /// Upload time.
    pub created: String,
}

impl From<&Attachment> for AttachmentInfo {
    fn from(a: &Attachment) -> Self {
        Self {
            attachment_id: a.attachment_id.clone(),
            filename: a.filename.clone(),
            mime_type: a.mime_type.clone(),
            size_bytes: a.size_bytes,
            kind: a.kind.clone(),
            created: a.created.clone(),
        }
    }
}

/// [`AttachmentInfo`] as JSON (for the `user_turn` event).
pub fn info(a: &Attachment) -> Value {
    serde_json::to_value(AttachmentInfo::from(a)).unwrap_or(Value::Null)
}

/// Attachments waiting to be sent.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct AttachmentList {
    /// Oldest first.
    pub attachments: Vec<AttachmentInfo>,
}

/// The multipart body of an upload (any other part is refused).
#[derive(utoipa::ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // documentation only: `files` reads the parts
pub struct UploadForm {
    /// The file: UTF-8 text without NUL bytes (HTML, XML and scripts
    /// included), or a PNG, JPEG, GIF or WebP image (binary). The type is read
    /// from the content, and a declared part type must agree. Not empty, at
    /// most 10 MiB. The schema spells out the text form.
    #[schema(value_type = String, min_length = 1, pattern = "^[^\\x00]+$")]
    pub file: Vec<u8>,
}

/// Up to 200 characters of the base name, without control characters or
/// quotes, and at most 255 bytes (what storage accepts).
fn clean_name(name: Option<&str>) -> String {
    let chars = name
        .unwrap_or("upload")
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or("upload")
        .chars()
        .filter(|c| !c.is_control() && *c != '"')
        .take(200);
    let mut n = String::new();
    for c in chars {
        if n.len() + c.len_utf8() > 255 {
            break;
        }
        n.push(c);
    }
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
        return Err(ApiError::Conflict(format!(
            "{MAX_PENDING} attachments are already waiting to be sent"
        )));
    }
    // Storage's refusals map to 400 / 413, and a workstream deleted meanwhile
    // to 404 (see `crate::error`).
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
    ApiError::TooLarge(format!(
        "attachments are limited to {} MiB",
        MAX_BYTES >> 20
    ))
}

/// Reads the `file` parts of a multipart body: (filename, declared type, bytes).
pub async fn files(
    mp: &mut Multipart,
    mut meta: Option<&mut Option<Bytes>>,
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
        match (name.as_str(), meta.as_deref_mut()) {
            ("file", _) => out.push((filename, declared, bytes)),
            ("meta", Some(m)) => *m = Some(bytes),
            _ => {
                let expected = if meta.is_some() {
                    "`file` and `meta`"
                } else {
                    "`file`"
                };
                return Err(bad_request(format!(
                    "unexpected multipart part {name:?} (expected {expected})"
                )));
            }
        }
    }
    Ok(out)
}

/// The workstream row the caller may see (404 otherwise; no id has a NUL,
/// and some databases refuse to compare with one).
async fn row(
    state: &AppState,
    id: &Identity,
    ws_id: &str,
) -> Result<turnstone_storage::types::Workstream, ApiError> {
    if ws_id.contains('\0') {
        return Err(not_found());
    }
    // Loaded or saved: attachments live in storage, like history.
    visible_row(state, id, ws_id).await
}

fn attachment_not_found() -> ApiError {
    ApiError::NotFound("Attachment not found".into())
}

/// 404 for an attachment id with a NUL (no id has one, and some databases
/// refuse to compare with one).
fn check_id(attachment_id: &str) -> Result<(), ApiError> {
    if attachment_id.contains('\0') {
        return Err(attachment_not_found());
    }
    Ok(())
}

#[utoipa::path(
    post,
    path = "/v1/api/workstreams/{ws_id}/attachments",
    tag = "attachments",
    summary = "Upload one file (multipart part `file`): images or UTF-8 text, at most 10 MiB",
    params(
        ("ws_id" = String, Path, description = "Workstream id (32 hex)",
            pattern = "^[0-9a-f]{32}$"),
    ),
    request_body(content = UploadForm, content_type = "multipart/form-data"),
    responses(
        (status = 200, description = "Stored; waits for the next send", body = AttachmentInfo),
        BadInput,
        Missing,
        (status = 409, description = "20 attachments are already waiting to be sent",
            body = crate::routes::ErrorBody),
        TooLarge,
        (status = 415, description = "Not an image (PNG, JPEG, GIF, WebP) or UTF-8 text",
            body = crate::routes::ErrorBody),
        Guarded,
    )
)]
pub(crate) async fn upload(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    mut mp: Multipart,
) -> Result<Json<AttachmentInfo>, ApiError> {
    let w = row(&state, &id, &ws_id).await?;
    let mut parts = files(&mut mp, None).await?;
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
    Ok(Json(AttachmentInfo::from(&a)))
}

#[utoipa::path(
    get,
    path = "/v1/api/workstreams/{ws_id}/attachments",
    tag = "attachments",
    summary = "Attachments waiting to be sent",
    params(
        ("ws_id" = String, Path, description = "Workstream id (32 hex)",
            pattern = "^[0-9a-f]{32}$"),
    ),
    responses(
        (status = 200, description = "The pending attachments", body = AttachmentList),
        Missing,
        Guarded,
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<AttachmentList>, ApiError> {
    let w = row(&state, &id, &ws_id).await?;
    let list = state.db.list_attachments(&w.ws_id, true).await?;
    Ok(Json(AttachmentList {
        attachments: list.iter().map(AttachmentInfo::from).collect(),
    }))
}

#[utoipa::path(
    get,
    path = "/v1/api/workstreams/{ws_id}/attachments/{attachment_id}/content",
    tag = "attachments",
    summary = "The raw bytes with their stored Content-Type",
    params(
        ("ws_id" = String, Path, description = "Workstream id (32 hex)",
            pattern = "^[0-9a-f]{32}$"),
        ("attachment_id" = String, Path, description = "Attachment id (32 hex)",
            pattern = "^[0-9a-f]{32}$"),
    ),
    responses(
        (status = 200, description = "The file, sent or not, with the type read at upload",
            headers(
                ("content-disposition" = String, description = "`inline; filename=\"...\"`"),
                ("x-content-type-options" = String, description = "Always `nosniff`"),
            ),
            content(
                ("image/png"), ("image/jpeg"), ("image/gif"), ("image/webp"),
                ("text/plain"), ("text/markdown"), ("text/csv"), ("application/json"),
                ("application/octet-stream"),
            )),
        Missing,
        Guarded,
    )
)]
pub(crate) async fn content(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path((ws_id, attachment_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let w = row(&state, &id, &ws_id).await?;
    check_id(&attachment_id)?;
    let (a, bytes) = state
        .db
        .get_attachment(&w.ws_id, &attachment_id)
        .await?
        .ok_or_else(attachment_not_found)?;
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

#[utoipa::path(
    delete,
    path = "/v1/api/workstreams/{ws_id}/attachments/{attachment_id}",
    tag = "attachments",
    summary = "Delete an attachment that was not sent yet",
    params(
        ("ws_id" = String, Path, description = "Workstream id (32 hex)",
            pattern = "^[0-9a-f]{32}$"),
        ("attachment_id" = String, Path, description = "Attachment id (32 hex)",
            pattern = "^[0-9a-f]{32}$"),
    ),
    responses(
        (status = 200, description = "Deleted", body = StatusOk),
        (status = 404, description = "Unknown workstream or attachment, or already sent",
            body = crate::routes::ErrorBody),
        Guarded,
    )
)]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path((ws_id, attachment_id)): Path<(String, String)>,
) -> Result<Json<StatusOk>, ApiError> {
    let w = row(&state, &id, &ws_id).await?;
    check_id(&attachment_id)?;
    if !state.db.delete_attachment(&w.ws_id, &attachment_id).await? {
        return Err(ApiError::NotFound(
            "Attachment not found (or already sent)".into(),
        ));
    }
    Ok(StatusOk::ok())
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
