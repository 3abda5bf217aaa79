//! The `preview` host interface of a session: content `open_preview` shows
//! in the front end's preview pane. The host is the judge of what is shown:
//! kinds, media types and per-kind size caps are checked here, whatever the
//! component claims, and the bytes are stored with the workstream (served
//! by the server behind the workstream's auth, or written to a file for the
//! terminal).

use super::agent::SessionAgent;
use futures::future::BoxFuture;
use turnstone_runtime::host::work::{AttachmentData, Content, Opened, PreviewError};
use turnstone_storage::types::NewPreview;

/// Size cap of `kind` in bytes (the reference's: pages 4 MB, PDFs 32 MB,
/// images 4 MB, tables 2 MB, text 512 KB); none for an unknown kind.
pub fn preview_cap(kind: &str) -> Option<usize> {
    const MB: usize = 1024 * 1024;
    Some(match kind {
        "html" => 4 * MB,
        "pdf" => 32 * MB,
        "image" => 4 * MB,
        "table" => 2 * MB,
        "text" | "markdown" => 512 * 1024,
        _ => return None,
    })
}

/// Longest title kept.
const MAX_TITLE: usize = 200;

/// The media type a preview of `kind` is stored and served with, checked
/// against its bytes. Scripts cannot ride in: SVG is not an image here (it
/// may carry script), and everything textual must be UTF-8.
fn checked_media_type(kind: &str, claimed: &str, data: &[u8]) -> Result<&'static str, String> {
    let claimed = claimed
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    let utf8 = || {
        std::str::from_utf8(data)
            .map(|_| ())
            .map_err(|_| format!("a {kind} preview must be UTF-8 text"))
    };
    match kind {
        "html" => utf8().map(|()| "text/html"),
        "markdown" => utf8().map(|()| "text/markdown"),
        "text" => utf8().map(|()| "text/plain"),
        "table" => {
            utf8()?;
            Ok(match claimed.as_str() {
                "application/json" => "application/json",
                "text/tab-separated-values" => "text/tab-separated-values",
                _ => "text/csv",
            })
        }
        "pdf" if data.starts_with(b"%PDF-") => Ok("application/pdf"),
        "pdf" => Err("the content is not a PDF (it does not start with %PDF-)".into()),
        "image" => match sniff_image(data) {
            Some(t) => Ok(t),
            None => Err(
                "the content is not a PNG, JPEG, GIF or WebP image (open SVG as html, which is sandboxed)"
                    .into(),
            ),
        },
        other => Err(format!(
            "unknown preview kind {other:?} (html, markdown, text, image, table or pdf)"
        )),
    }
}

fn sniff_image(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if data.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// File extension for a preview written for the terminal.
fn extension(media_type: &str) -> &'static str {
    match media_type {
        "text/html" => "html",
        "text/markdown" => "md",
        "text/plain" => "txt",
        "application/json" => "json",
        "text/tab-separated-values" => "tsv",
        "text/csv" => "csv",
        "application/pdf" => "pdf",
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "bin",
    }
}

/// The URL a stored preview is served at.
pub fn preview_url(ws_id: &str, preview_id: &str) -> String {
    format!("/v1/api/workstreams/{ws_id}/previews/{preview_id}")
}

impl SessionAgent {
    pub(super) fn attachment_for_preview(
        &self,
        id: String,
    ) -> BoxFuture<'static, Result<AttachmentData, PreviewError>> {
        let (db, ws) = (self.db.clone(), self.ws_id.clone());
        Box::pin(async move {
            let (Some(db), Some(ws)) = (db, ws) else {
                return Err(PreviewError::Unavailable(
                    "this session keeps no attachments".into(),
                ));
            };
            match db.get_attachment(&ws, &id).await {
                Ok(Some((a, data))) => Ok(AttachmentData {
                    filename: a.filename,
                    media_type: a.mime_type,
                    data,
                }),
                Ok(None) => Err(PreviewError::Invalid(format!(
                    "no attachment {id:?} in this workstream"
                ))),
                Err(e) => Err(PreviewError::Unavailable(e.to_string())),
            }
        })
    }

    pub(super) fn open_preview(
        &self,
        call_id: String,
        content: Content,
    ) -> BoxFuture<'static, Result<Opened, PreviewError>> {
        let (db, ws) = (self.db.clone(), self.ws_id.clone());
        let dir = self.ctx.preview_dir.clone();
        let events = self.events.clone();
        Box::pin(async move {
            let (Some(db), Some(ws)) = (db, ws) else {
                return Err(PreviewError::Unavailable(
                    "there is no preview pane in this session".into(),
                ));
            };
            let kind = content.kind.trim().to_ascii_lowercase();
            let cap = preview_cap(&kind).ok_or_else(|| {
                PreviewError::Invalid(format!(
                    "unknown preview kind {kind:?} (html, markdown, text, image, table or pdf)"
                ))
            })?;
            if content.data.len() > cap {
                return Err(PreviewError::Invalid(format!(
                    "a {kind} preview is at most {} KB; this one is {} KB",
                    cap / 1024,
                    content.data.len().div_ceil(1024)
                )));
            }
            if content.data.is_empty() {
                return Err(PreviewError::Invalid("the content is empty".into()));
            }
            let media_type = checked_media_type(&kind, &content.media_type, &content.data)
                .map_err(PreviewError::Invalid)?;
            let mut title: String = content
                .title
                .chars()
                .filter(|c| !c.is_control())
                .take(MAX_TITLE)
                .collect();
            if title.trim().is_empty() {
                title = "Preview".into();
            }
            let info = db
                .save_preview(&NewPreview {
                    ws_id: ws.clone(),
                    kind: kind.clone(),
                    title: title.clone(),
                    media_type: media_type.into(),
                    content: content.data.clone(),
                    call_id: Some(call_id.clone()).filter(|c| !c.is_empty()),
                })
                .await
                .map_err(|e| match e {
                    turnstone_storage::StorageError::TooLarge { .. } => {
                        PreviewError::Invalid(e.to_string())
                    }
                    other => PreviewError::Unavailable(other.to_string()),
                })?;
            let location = match dir {
                // The terminal has no pane: the content goes to a file.
                Some(dir) => {
                    let path = dir.join(format!("{}.{}", info.preview_id, extension(media_type)));
                    tokio::fs::create_dir_all(&dir).await.map_err(|e| {
                        PreviewError::Unavailable(format!("{}: {e}", dir.display()))
                    })?;
                    tokio::fs::write(&path, &content.data).await.map_err(|e| {
                        PreviewError::Unavailable(format!("{}: {e}", path.display()))
                    })?;
                    path.display().to_string()
                }
                None => preview_url(&ws, &info.preview_id),
            };
            events.emit(turnstone_protocol::Event::Preview(
                turnstone_protocol::Preview {
                    preview_id: info.preview_id.clone(),
                    kind,
                    title,
                    media_type: media_type.into(),
                    size: content.data.len() as u64,
                    url: location.clone(),
                    call_id: Some(call_id).filter(|c| !c.is_empty()),
                },
            ));
            Ok(Opened {
                id: info.preview_id,
                location,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_follow_the_bytes_not_the_claim() {
        let png = b"\x89PNG\r\n\x1a\nrest";
        assert_eq!(
            checked_media_type("image", "image/svg+xml", png),
            Ok("image/png")
        );
        assert!(checked_media_type("image", "image/svg+xml", b"<svg onload=x>").is_err());
        assert!(checked_media_type("pdf", "application/pdf", b"<html>").is_err());
        assert_eq!(
            checked_media_type("pdf", "", b"%PDF-1.7"),
            Ok("application/pdf")
        );
        assert_eq!(
            checked_media_type("html", "application/xhtml+xml", b"<p>"),
            Ok("text/html")
        );
        assert!(checked_media_type("text", "text/plain", &[0xff, 0xfe]).is_err());
        assert_eq!(
            checked_media_type("table", "application/json; charset=utf-8", b"[]"),
            Ok("application/json")
        );
        assert_eq!(
            checked_media_type("table", "text/plain", b"a,b"),
            Ok("text/csv")
        );
        assert!(checked_media_type("video", "", b"x").is_err());
    }

    #[test]
    fn caps_are_the_references() {
        assert_eq!(preview_cap("pdf"), Some(32 << 20));
        assert_eq!(preview_cap("text"), Some(512 << 10));
        assert_eq!(preview_cap("table"), Some(2 << 20));
        assert_eq!(preview_cap("web"), None);
    }
}
