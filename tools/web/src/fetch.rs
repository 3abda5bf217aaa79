//! `web_fetch`.

use turnstone_plugin_sdk::http::{HttpError, Request};
use turnstone_plugin_sdk::prelude::*;

/// Redirects followed before giving up.
pub const MAX_REDIRECTS: usize = 5;
/// Most bytes of a page read.
pub const MAX_BYTES: usize = 5 * 1024 * 1024;
/// Most characters of page text given to the model.
pub const MAX_TEXT_CHARS: usize = 100_000;

const SYSTEM: &str = "You answer questions about one web page. Use only the page content given. Quote exact figures, names and code where relevant. If the page does not contain the answer, say so plainly.";

/// Arguments of `web_fetch`.
#[derive(Deserialize, JsonSchema)]
pub struct WebFetchArgs {
    /// The URL to fetch (must start with http:// or https://).
    pub url: String,
    /// What to extract or answer from the page content.
    pub question: String,
}

/// Refuses what a URL parser would silently rewrite: no host (`http:///x`
/// parses as host `x`) and IPv6 zone ids (interface-scoped, never public).
fn check_authority(url: &str) -> Result<(), ToolError> {
    let raw = url.trim();
    let lower = raw.to_ascii_lowercase();
    if !(lower.starts_with("http:") || lower.starts_with("https:")) {
        return Ok(()); // the scheme check below explains it
    }
    let authority = raw
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '\\', '?', '#']).next().unwrap_or(""))
        .unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host.is_empty() || host.starts_with(':') {
        return Err(ToolError::new(format!(
            "Error: {url:?} has no host; write http://HOST/PATH"
        )));
    }
    if host.starts_with('[') && host.contains('%') {
        return Err(ToolError::new(format!(
            "Error: {url:?} has an IPv6 zone id ({host}): interface-scoped addresses are never fetched"
        )));
    }
    Ok(())
}

fn parse(url: &str) -> Result<url::Url, ToolError> {
    check_authority(url)?;
    let u = url::Url::parse(url.trim())
        .map_err(|e| ToolError::new(format!("Error: invalid URL {url:?}: {e}")))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(ToolError::new(format!(
            "Error: only http:// and https:// URLs can be fetched (got {}:)",
            u.scheme()
        )));
    }
    if u.host_str().is_none() {
        return Err(ToolError::new(format!("Error: {url:?} has no host")));
    }
    Ok(u)
}

fn fail(url: &url::Url, e: HttpError) -> ToolError {
    ToolError::new(format!("Error: fetching {url} failed: {e}"))
}

/// Fetches `start`, following redirects hop by hop; returns the final URL,
/// content type and body.
fn fetch(start: url::Url) -> Result<(url::Url, String, Vec<u8>), ToolError> {
    let mut url = start;
    for _ in 0..=MAX_REDIRECTS {
        let mut resp = Request::get(url.as_str())
            .header("user-agent", "Turnstone-web_fetch/0.1")
            .header(
                "accept",
                "text/html,text/plain,application/json;q=0.9,*/*;q=0.5",
            )
            .send()
            .map_err(|e| fail(&url, e))?;
        if (300..400).contains(&resp.status) {
            let Some(location) = resp.header("location") else {
                return Err(ToolError::new(format!(
                    "Error: {url} answered {} without a Location",
                    resp.status
                )));
            };
            check_authority(location)?;
            let next = url.join(location).map_err(|e| {
                ToolError::new(format!("Error: bad redirect target {location:?}: {e}"))
            })?;
            url = parse(next.as_str())?;
            continue;
        }
        if resp.status >= 400 {
            return Err(ToolError::new(format!(
                "Error: {url} answered HTTP {}",
                resp.status
            )));
        }
        let content_type = resp
            .header("content-type")
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut body = Vec::new();
        while let Some(chunk) = resp.next_chunk().map_err(|e| fail(&url, e))? {
            body.extend_from_slice(&chunk);
            if body.len() >= MAX_BYTES {
                body.truncate(MAX_BYTES);
                break;
            }
        }
        return Ok((url, content_type, body));
    }
    Err(ToolError::new(format!(
        "Error: more than {MAX_REDIRECTS} redirects; stopped at {url}"
    )))
}

/// Readable text of a response body.
pub fn readable(content_type: &str, body: &[u8]) -> Result<String, ToolError> {
    let looks_html = content_type.contains("html")
        || (content_type.is_empty()
            && String::from_utf8_lossy(&body[..body.len().min(512)])
                .to_ascii_lowercase()
                .contains("<html"));
    if looks_html {
        return html2text::from_read(body, 100)
            .map_err(|e| ToolError::new(format!("Error: could not read the page: {e}")));
    }
    let textual = content_type.is_empty()
        || content_type.starts_with("text/")
        || content_type.contains("json")
        || content_type.contains("xml")
        || content_type.contains("javascript");
    if !textual || body[..body.len().min(8192)].contains(&0) {
        return Err(ToolError::new(format!(
            "Error: the response is not text ({content_type}); web_fetch reads web pages and text documents"
        )));
    }
    Ok(String::from_utf8_lossy(body).into_owned())
}

/// `web_fetch`.
pub struct WebFetch;

impl Tool for WebFetch {
    type Args = WebFetchArgs;
    const NAME: &'static str = "web_fetch";
    const DESCRIPTION: &'static str = "Fetch a URL and answer a question about it: the page is converted to readable text and the answer is extracted from it. Private and internal addresses are refused.";

    fn meta() -> ToolMeta {
        ToolMeta {
            task_agent: true,
            primary_key: Some("url"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &WebFetchArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        parse(&args.url)?;
        if args.question.trim().is_empty() {
            return Err(ToolError::new("Error: question must not be empty."));
        }
        Ok(Preview::ask(format!("web_fetch: {}", args.url))
            .with_body(format!("Question: {}", args.question)))
    }

    fn execute(args: WebFetchArgs, ctx: &Context) -> Result<Output, ToolError> {
        let (url, content_type, body) = fetch(parse(&args.url)?)?;
        let text = readable(&content_type, &body)?;
        let mut text: String = text.chars().take(MAX_TEXT_CHARS).collect();
        if text.len() < body.len() && text.chars().count() == MAX_TEXT_CHARS {
            text.push_str("\n[page text truncated]");
        }
        ctx.emit(&format!("fetched {url} ({} bytes)\n", body.len()));
        let prompt = format!(
            "Page: {url}\n\n<page>\n{text}\n</page>\n\nQuestion: {}",
            args.question
        );
        match turnstone_plugin_sdk::model::complete(SYSTEM, &prompt, 2048) {
            Ok(answer) => Ok(format!("Source: {url}\n\n{}", answer.trim()).into()),
            Err(turnstone_plugin_sdk::model::ModelError::Unavailable(_)) => {
                let head: String = text.chars().take(20_000).collect();
                Ok(format!(
                    "Source: {url}\n(No model is attached to this call, so here is the page text.)\n\n{head}"
                )
                .into())
            }
            Err(e) => Err(ToolError::new(format!(
                "Error: {}",
                turnstone_plugin_sdk::model::describe(&e)
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_without_a_host_or_with_a_zone_id_are_refused_clearly() {
        for (url, why) in [
            ("http:///nohost", "has no host"),
            ("https://", "has no host"),
            ("http://:8080/x", "has no host"),
            ("http://[fd00::1%eth0]/", "zone id"),
            ("http://[fe80::1%25eth0]:80/", "zone id"),
        ] {
            let err = parse(url).unwrap_err().into_text();
            assert!(err.contains(why), "{url}: {err}");
            assert!(
                err.starts_with("Error: ") && !err.contains("Error: Error:"),
                "{err}"
            );
        }
        for url in [
            "http://example.com/a",
            "https://[2606:4700::1111]/",
            " https://u:p@example.com:8443/?q#f ",
        ] {
            assert!(parse(url).is_ok(), "{url}");
        }
        assert!(
            parse("ftp://example.com/")
                .unwrap_err()
                .message()
                .contains("only http")
        );
    }
}
