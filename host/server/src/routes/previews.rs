//! Preview pane content over HTTP, the workstream owner's like its history.
//! Everything is served so that it cannot act as the server's own origin:
//! pages under a CSP `sandbox` (no scripts, an opaque origin) that also
//! forbids every fetch (nothing of the page's site is loaded, so opening it
//! never tells the site who looked), textual kinds as inert text for the UI
//! to render, and `nosniff` throughout.

use super::{Guarded, Missing, visible_row};
use crate::http::{ApiError, AppState, Identity};
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::ToSchema;

/// One preview of a workstream.
#[derive(Serialize, ToSchema)]
pub(crate) struct PreviewEntry {
    /// Digest of the bytes (32 hex).
    preview_id: String,
    /// `html`, `markdown`, `text`, `image`, `table` or `pdf`.
    kind: String,
    /// The pane's title.
    title: String,
    /// Media type of the content.
    media_type: String,
    /// Bytes.
    size: i64,
    /// Where the content is served.
    url: String,
    /// The `open_preview` call that opened it last.
    call_id: Option<String>,
    /// When it was first opened.
    created: String,
}

/// `GET /api/workstreams/{ws_id}/previews`.
#[derive(Serialize, ToSchema)]
pub(crate) struct PreviewsBody {
    /// The workstream.
    ws_id: String,
    /// Oldest first.
    previews: Vec<PreviewEntry>,
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/previews", tag = "workstreams", summary = "What open_preview showed in a workstream (the pane reopens them after a reload)", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Its previews", body = PreviewsBody), Guarded, Missing))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<PreviewsBody>, ApiError> {
    visible_row(&state, &id, &ws_id).await?;
    let previews = state
        .db
        .list_previews(&ws_id)
        .await?
        .into_iter()
        .map(|p| PreviewEntry {
            url: turnstone_engine::session::preview_url(&ws_id, &p.preview_id),
            preview_id: p.preview_id,
            kind: p.kind,
            title: p.title,
            media_type: p.media_type,
            size: p.size_bytes,
            call_id: p.call_id,
            created: p.created,
        })
        .collect();
    Ok(Json(PreviewsBody { ws_id, previews }))
}

/// The `Content-Type` and `Content-Security-Policy` a preview of `kind`
/// (stored as `media_type`) is served with.
fn served_as(kind: &str, media_type: &str) -> (String, &'static str) {
    // Framed by the UI only; never able to fetch anything.
    const INERT: &str = "default-src 'none'; frame-ancestors 'self'; sandbox";
    match kind {
        "html" => (
            "text/html; charset=utf-8".into(),
            "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
             font-src data:; media-src data:; form-action 'none'; base-uri 'none'; \
             frame-ancestors 'self'",
        ),
        // The browser's own PDF viewer does not run under a CSP sandbox; the
        // document still may fetch nothing.
        "pdf" => (
            "application/pdf".into(),
            "default-src 'none'; frame-ancestors 'self'",
        ),
        "image" => (media_type.to_string(), INERT),
        "table" if media_type == "application/json" => ("application/json".into(), INERT),
        // Markdown, text and delimited tables: plain text, rendered by the UI.
        _ => ("text/plain; charset=utf-8".into(), INERT),
    }
}

fn bad_id(preview_id: &str) -> bool {
    preview_id.len() != 32 || !preview_id.bytes().all(|b| b.is_ascii_hexdigit())
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/previews/{preview_id}", tag = "workstreams", summary = "A preview's content (pages sandboxed: no scripts, nothing fetched)", params(("ws_id" = String, Path, description = "Workstream id (32 hex)"), ("preview_id" = String, Path, description = "Preview id (32 hex)")), responses((status = 200, description = "The content"), Guarded, Missing))]
pub(crate) async fn content(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path((ws_id, preview_id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    visible_row(&state, &id, &ws_id).await?;
    let missing = || ApiError::NotFound("Preview not found".into());
    if bad_id(&preview_id) {
        return Err(missing());
    }
    let (info, bytes) = state
        .db
        .get_preview(&ws_id, &preview_id)
        .await?
        .ok_or_else(missing)?;
    let (content_type, csp) = served_as(&info.kind, &info.media_type);
    let mut resp = bytes.into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(csp),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::X_FRAME_OPTIONS,
        HeaderValue::from_static("SAMEORIGIN"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // Content-addressed: the bytes at this URL never change.
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=86400, immutable"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("inline; filename=\"{preview_id}\"")) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_sandboxed_and_text_is_inert() {
        let (ct, csp) = served_as("html", "text/html");
        assert_eq!(ct, "text/html; charset=utf-8");
        assert!(csp.starts_with("sandbox;") && csp.contains("default-src 'none'"));
        assert!(!csp.contains("script-src"));
        for kind in ["markdown", "text", "table"] {
            let (ct, csp) = served_as(kind, "text/csv");
            assert_eq!(ct, "text/plain; charset=utf-8", "{kind}");
            assert!(csp.contains("sandbox"), "{kind}");
        }
        assert_eq!(served_as("table", "application/json").0, "application/json");
        assert_eq!(served_as("image", "image/png").0, "image/png");
        assert!(bad_id("../../etc") && bad_id("") && !bad_id(&"a".repeat(32)));
    }
}
