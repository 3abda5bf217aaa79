//! The browser UI: the files of `web/`, embedded in the binary at build time
//! (no CDN, nothing fetched at run time).

use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

#[derive(rust_embed::RustEmbed)]
#[folder = "../../web/"]
struct Assets;

/// `/` and `/static/*`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    axum::Router::new()
        .route("/", get(|| async { asset("index.html") }))
        .route(
            "/static/{*path}",
            get(|Path(p): Path<String>| async move { asset(&p) }),
        )
}

/// One embedded file with its content type and security headers.
pub fn asset(path: &str) -> Response {
    let Some(file) = Assets::get(path) else {
        return crate::http::ApiError::NotFound("Not found".into()).into_response();
    };
    let mime = mime_for(path);
    let mut resp = file.data.into_owned().into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
    // The UI loads nothing from elsewhere; say so to the browser.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; \
             font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    resp
}

fn mime_for(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "html" => "text/html; charset=utf-8",
        "js" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "svg" => "image/svg+xml",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "ttf" => "font/ttf",
        "json" => "application/json",
        "png" => "image/png",
        _ => "application/octet-stream",
    }
}
