//! Built-in `open_preview`: resolves a target (an http(s) URL, a workspace
//! file, or `attachment:<id>`) to bytes, classifies them, and hands them to
//! the host's preview interface, which stores them with the workstream and
//! opens the front end's pane. The model gets a one-line confirmation only.
//! URL targets ask first (network access); files and attachments do not.

use turnstone_plugin_sdk::http::{HttpError, Request};
use turnstone_plugin_sdk::prelude::*;
use turnstone_plugin_sdk::work::preview::{self, Content};

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;
/// Most bytes read from any source (the largest kind's cap, PDF); the host
/// enforces each kind's own cap.
const MAX_BYTES: usize = 32 * 1024 * 1024;
/// The `attachment:` prefix of a target.
const ATTACHMENT: &str = "attachment:";

/// Arguments of `open_preview`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct OpenPreviewArgs {
    /// An http(s) URL, a file path (in the workspace), or `attachment:<id>`
    /// for a file attached to the conversation.
    pub target: String,
    /// Rendering override: `web` (or `html`), `pdf`, `image`, `table`,
    /// `text` or `markdown`; detected from the content when omitted.
    #[serde(default)]
    pub kind: Option<String>,
    /// Pane title; defaults to the page title, file name or URL.
    #[serde(default)]
    pub title: Option<String>,
}

/// What a target names.
enum Target {
    Url(url::Url),
    File(String),
    Attachment(String),
}

fn target(raw: &str) -> Result<Target, ToolError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ToolError::new("`target` must not be empty"));
    }
    if let Some(id) = raw.strip_prefix(ATTACHMENT) {
        let id = id.trim();
        if id.is_empty() {
            return Err(ToolError::new("`attachment:` needs the attachment id"));
        }
        return Ok(Target::Attachment(id.to_string()));
    }
    let lower = raw.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        // A URL parser reads `http:///x` as host `x`; refuse it instead.
        let authority = raw.split_once("://").map_or("", |(_, r)| r);
        if authority.starts_with(['/', '\\', '?', '#']) || authority.is_empty() {
            return Err(ToolError::new(format!("{raw:?} has no host")));
        }
        let u = url::Url::parse(raw)
            .map_err(|e| ToolError::new(format!("invalid URL {raw:?}: {e}")))?;
        if u.host_str().is_none_or(str::is_empty) {
            return Err(ToolError::new(format!("{raw:?} has no host")));
        }
        return Ok(Target::Url(u));
    }
    if lower.contains("://") {
        return Err(ToolError::new(format!(
            "only http(s) URLs, file paths and attachment:<id> can be previewed (got {raw:?})"
        )));
    }
    Ok(Target::File(raw.to_string()))
}

/// The kind the caller asked for, normalised.
fn requested_kind(kind: Option<&str>) -> Result<Option<&'static str>, ToolError> {
    let Some(k) = kind.map(str::trim).filter(|k| !k.is_empty()) else {
        return Ok(None);
    };
    Ok(Some(match k.to_ascii_lowercase().as_str() {
        "web" | "html" | "page" => "html",
        "pdf" => "pdf",
        "image" => "image",
        "table" | "csv" | "tsv" | "json" => "table",
        "text" => "text",
        "markdown" | "md" => "markdown",
        other => {
            return Err(ToolError::new(format!(
                "unknown kind {other:?}: use web, pdf, image, table, text or markdown"
            )));
        }
    }))
}

/// The kind of `data`, from its media type, name and first bytes.
fn detect(media_type: &str, name: &str, data: &[u8]) -> &'static str {
    let mt = media_type.to_ascii_lowercase();
    let ext = name
        .rsplit('/')
        .next()
        .and_then(|n| n.rsplit_once('.'))
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    if data.starts_with(b"%PDF-") || mt.contains("pdf") || ext == "pdf" {
        return "pdf";
    }
    let image = data.starts_with(b"\x89PNG")
        || data.starts_with(&[0xff, 0xd8, 0xff])
        || data.starts_with(b"GIF8")
        || (data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP");
    if image {
        return "image";
    }
    if mt.contains("csv") || mt.contains("tab-separated") || mt.contains("json") {
        return "table";
    }
    if matches!(ext.as_str(), "csv" | "tsv" | "json") {
        return "table";
    }
    if mt.contains("markdown") || matches!(ext.as_str(), "md" | "markdown") {
        return "markdown";
    }
    if mt.contains("html") || matches!(ext.as_str(), "html" | "htm" | "svg") {
        return "html";
    }
    let head = String::from_utf8_lossy(&data[..data.len().min(512)]).to_ascii_lowercase();
    let head = head.trim_start();
    if head.starts_with("<!doctype html") || head.starts_with("<html") || head.starts_with("<svg") {
        return "html";
    }
    "text"
}

/// The media type to send for `kind` (the host checks it against the bytes).
fn media_type_for(kind: &str, claimed: &str, name: &str) -> String {
    match kind {
        "table" => {
            let lower = format!("{claimed} {name}").to_ascii_lowercase();
            if lower.contains("json") {
                "application/json".into()
            } else if lower.contains("tab-separated") || lower.ends_with(".tsv") {
                "text/tab-separated-values".into()
            } else {
                "text/csv".into()
            }
        }
        _ => claimed.to_string(),
    }
}

/// `<title>` of an HTML page, if it has one.
fn html_title(data: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(&data[..data.len().min(64 * 1024)]);
    let lower = text.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let end = open_end + lower[open_end..].find("</title")?;
    let title: String = text[open_end..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!title.is_empty()).then_some(title)
}

fn fail(url: &url::Url, e: HttpError) -> ToolError {
    ToolError::new(format!("fetching {url} failed: {e}"))
}

/// Fetches `start` hop by hop (every hop passes the host's SSRF guard);
/// returns the final URL, its media type and body.
fn fetch(start: url::Url) -> Result<(url::Url, String, Vec<u8>), ToolError> {
    let mut url = start;
    for _ in 0..=MAX_REDIRECTS {
        let mut resp = Request::get(url.as_str())
            .header("user-agent", "Turnstone-open_preview/0.1")
            .send()
            .map_err(|e| fail(&url, e))?;
        if (300..400).contains(&resp.status) {
            let Some(location) = resp.header("location") else {
                return Err(ToolError::new(format!(
                    "{url} answered {} without a Location",
                    resp.status
                )));
            };
            let next = url
                .join(location)
                .map_err(|e| ToolError::new(format!("bad redirect target {location:?}: {e}")))?;
            url = match target(next.as_str())? {
                Target::Url(u) => u,
                _ => {
                    return Err(ToolError::new(format!(
                        "{url} redirected to {next}, which is not http(s)"
                    )));
                }
            };
            continue;
        }
        if resp.status >= 400 {
            return Err(ToolError::new(format!(
                "{url} answered HTTP {}",
                resp.status
            )));
        }
        let media_type = resp
            .header("content-type")
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let mut body = Vec::new();
        while let Some(chunk) = resp.next_chunk().map_err(|e| fail(&url, e))? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BYTES {
                return Err(ToolError::new(format!(
                    "{url} is larger than {} MB; nothing was opened",
                    MAX_BYTES >> 20
                )));
            }
        }
        return Ok((url, media_type, body));
    }
    Err(ToolError::new(format!(
        "more than {MAX_REDIRECTS} redirects; stopped at {url}"
    )))
}

/// `open_preview`.
pub struct OpenPreview;

impl Tool for OpenPreview {
    type Args = OpenPreviewArgs;
    const NAME: &'static str = "open_preview";
    const DESCRIPTION: &'static str = "Show the user rich content in a preview pane beside the conversation: a web page (an http(s) URL), a file in the workspace (HTML, Markdown, text, an image, CSV/TSV/JSON as a table, PDF), or a conversation attachment (`attachment:<id>`). You get a one-line confirmation only; to reason about the content use web_fetch or read_file.";

    fn meta() -> ToolMeta {
        ToolMeta {
            primary_key: Some("target"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &OpenPreviewArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        requested_kind(args.kind.as_deref())?;
        Ok(match target(&args.target)? {
            // Network access: the user confirms it, like web_fetch.
            Target::Url(u) => Preview::ask(format!("open_preview {u}")),
            Target::File(p) => Preview::auto(format!("open_preview {p}")),
            Target::Attachment(id) => Preview::auto(format!("open_preview attachment {id}")),
        })
    }

    fn execute(args: OpenPreviewArgs, ctx: &Context) -> Result<Output, ToolError> {
        let asked = requested_kind(args.kind.as_deref())?;
        let (name, media_type, data, fallback_title) = match target(&args.target)? {
            Target::Url(u) => {
                let (last, media_type, data) = fetch(u)?;
                (last.path().to_string(), media_type, data, last.to_string())
            }
            Target::File(p) => {
                let path = ctx.resolve(&p);
                let meta = std::fs::metadata(&path)
                    .map_err(|e| ToolError::new(turnstone_plugin_sdk::fs::explain(&path, &e)))?;
                if meta.is_dir() {
                    return Err(ToolError::new(format!("{} is a directory", path.display())));
                }
                if meta.len() > MAX_BYTES as u64 {
                    return Err(ToolError::new(format!(
                        "{} is larger than {} MB",
                        path.display(),
                        MAX_BYTES >> 20
                    )));
                }
                let data = std::fs::read(&path)
                    .map_err(|e| ToolError::new(turnstone_plugin_sdk::fs::explain(&path, &e)))?;
                let file = path
                    .file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_else(|| p.clone());
                (file.clone(), String::new(), data, file)
            }
            Target::Attachment(id) => {
                let a = preview::attachment(&id).map_err(|e| ToolError::new(e.to_string()))?;
                (a.filename.clone(), a.media_type, a.data, a.filename)
            }
        };
        let kind = asked.unwrap_or_else(|| detect(&media_type, &name, &data));
        let title = args
            .title
            .filter(|t| !t.trim().is_empty())
            .or_else(|| (kind == "html").then(|| html_title(&data)).flatten())
            .unwrap_or(fallback_title);
        let size = data.len();
        let opened = preview::open(&Content {
            kind: kind.into(),
            title: title.clone(),
            media_type: media_type_for(kind, &media_type, &name),
            data,
        })
        .map_err(|e| ToolError::new(e.to_string()))?;
        Ok(format!(
            "Opened {title:?} in the preview pane ({kind}, {size} bytes): {}",
            opened.location
        )
        .into())
    }
}

register_tools!(OpenPreview);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_urls_files_or_attachments() {
        assert!(matches!(
            target("https://example.com/a"),
            Ok(Target::Url(_))
        ));
        assert!(matches!(target("attachment:ab12"), Ok(Target::Attachment(id)) if id == "ab12"));
        assert!(matches!(target("docs/report.pdf"), Ok(Target::File(_))));
        assert!(target("ftp://example.com/x").is_err());
        assert!(target("attachment:").is_err());
        assert!(target("http:///x").is_err());
        assert!(target("  ").is_err());
    }

    #[test]
    fn kinds_come_from_bytes_then_media_type_then_name() {
        assert_eq!(detect("text/plain", "x.txt", b"%PDF-1.4"), "pdf");
        assert_eq!(detect("", "a.bin", b"\x89PNG\r\n\x1a\n"), "image");
        assert_eq!(detect("application/json", "x", b"[1]"), "table");
        assert_eq!(detect("", "data.tsv", b"a\tb"), "table");
        assert_eq!(detect("", "README.md", b"# hi"), "markdown");
        assert_eq!(detect("text/html", "/", b"<p>"), "html");
        assert_eq!(detect("", "page", b"<!DOCTYPE html><p>"), "html");
        assert_eq!(detect("", "notes", b"plain words"), "text");
        assert_eq!(requested_kind(Some("web")).unwrap(), Some("html"));
        assert!(requested_kind(Some("video")).is_err());
    }

    #[test]
    fn html_titles_are_read_from_the_page() {
        assert_eq!(
            html_title(b"<html><head><TITLE>  Quarterly\n report </title>").as_deref(),
            Some("Quarterly report")
        );
        assert_eq!(html_title(b"<p>no title</p>"), None);
    }
}
