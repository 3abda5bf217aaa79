//! The browser UI: the files of `web/`, embedded in the binary at build time
//! (no CDN, nothing fetched at run time). The build script gzips the text
//! files; a client that takes gzip (every browser) gets those bytes as they
//! are, any other gets them inflated.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::io::Read;

/// One embedded file.
struct Asset {
    /// Its path under `web/`, `/`-separated.
    path: &'static str,
    /// Its bytes: gzipped when `gzipped`.
    body: &'static [u8],
    /// Whether the build script gzipped it.
    gzipped: bool,
}

/// Every file of `web/`, sorted by path (the build script writes it).
static ASSETS: &[Asset] = include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

/// `/` and `/static/*`.
pub fn routes<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    axum::Router::new()
        .route(
            "/",
            get(|headers: HeaderMap| async move { asset("index.html", &headers) }),
        )
        .route(
            "/static/{*path}",
            get(
                |axum::extract::Path(p): axum::extract::Path<String>, headers: HeaderMap| async move {
                    asset(&p, &headers)
                },
            ),
        )
}

fn find(path: &str) -> Option<&'static Asset> {
    ASSETS
        .binary_search_by(|a| a.path.cmp(path))
        .ok()
        .and_then(|i| ASSETS.get(i))
}

/// `bytes` inflated from gzip.
pub(crate) fn gunzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len() * 4);
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out)?;
    Ok(out)
}

/// Whether a request with `headers` takes a gzip-encoded body: `gzip` (or
/// `x-gzip`) listed with a non-zero weight, or else `*` with one (RFC 9110,
/// 12.5.3).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut wildcard = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let weight = parts
                .filter_map(|p| {
                    let (k, v) = p.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("q").then(|| v.trim())
                })
                .next()
                .map_or(1.0, |q| q.parse::<f32>().unwrap_or(0.0));
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                return weight > 0.0;
            }
            if coding == "*" {
                wildcard = Some(weight > 0.0);
            }
        }
    }
    wildcard.unwrap_or(false)
}

/// One embedded file with its content type and security headers, gzipped
/// when the request takes it.
pub fn asset(path: &str, request: &HeaderMap) -> Response {
    let Some(file) = find(path) else {
        return crate::http::ApiError::NotFound("Not found".into()).into_response();
    };
    let encoded = file.gzipped && accepts_gzip(request);
    let body = if file.gzipped && !encoded {
        match gunzip(file.body) {
            Ok(bytes) => Body::from(bytes),
            Err(e) => {
                return crate::http::ApiError::Internal(format!("embedded {path}: {e}"))
                    .into_response();
            }
        }
    } else {
        Body::from(file.body)
    };
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(mime_for(path)),
    );
    if file.gzipped {
        // The body depends on the request's Accept-Encoding: caches must key on it.
        h.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    if encoded {
        h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use std::path::Path;

    fn accept(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(header::ACCEPT_ENCODING, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn gzip_is_taken_when_listed_or_matched_by_a_wildcard_with_a_weight() {
        for yes in [
            &["gzip"][..],
            &["gzip, deflate, br, zstd"],
            &["br;q=1.0, GZIP;q=0.5"],
            &["x-gzip"],
            &["*"],
            &["br", "gzip"],
            &["deflate, *;q=0.1"],
            &["gzip ; q=1"],
        ] {
            assert!(accepts_gzip(&accept(yes)), "{yes:?}");
        }
        for no in [
            &[][..],
            &[""],
            &["identity"],
            &["br, deflate"],
            &["gzip;q=0"],
            &["gzip;q=0.000"],
            &["*;q=0"],
            &["gzip;q=0, *"],
            &["*, gzip;q=0"],
            &["gzip;q=nonsense"],
            &["gzipped"],
        ] {
            assert!(!accepts_gzip(&accept(no)), "{no:?}");
        }
    }

    async fn body_of(resp: Response) -> Vec<u8> {
        resp.into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec()
    }

    /// Every file of `web/` is embedded, and comes back byte for byte whether
    /// the client takes gzip or not.
    #[tokio::test]
    async fn every_file_of_web_is_served_as_it_is_on_disk_either_way() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../web");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    on_disk.push(path);
                }
            }
        }
        assert_eq!(
            on_disk.len(),
            ASSETS.len(),
            "a file of web/ is not embedded"
        );
        assert!(ASSETS.windows(2).all(|w| w[0].path < w[1].path), "sorted");
        let mut gzipped = 0;
        for file in on_disk {
            let rel = file
                .strip_prefix(&root)
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned();
            let want = std::fs::read(&file).unwrap();
            let compressible = ["html", "js", "css", "svg", "json", "txt", "map"]
                .iter()
                .any(|ext| rel.ends_with(&format!(".{ext}")));
            let plain = asset(&rel, &accept(&["identity"]));
            assert_eq!(plain.status(), 200, "{rel}");
            assert!(
                plain.headers().get(header::CONTENT_ENCODING).is_none(),
                "{rel}"
            );
            // The plain answer varies with the header too (caches key on it).
            assert_eq!(
                plain.headers().get(header::VARY).is_some(),
                compressible,
                "{rel}"
            );
            assert_eq!(body_of(plain).await, want, "{rel}");

            let resp = asset(&rel, &accept(&["gzip, br"]));
            let h = resp.headers().clone();
            assert_eq!(h[header::CONTENT_TYPE], mime_for(&rel), "{rel}");
            assert_eq!(h["x-content-type-options"], "nosniff");
            let body = body_of(resp).await;
            if compressible {
                gzipped += 1;
                assert_eq!(h[header::CONTENT_ENCODING], "gzip", "{rel}");
                assert_eq!(h[header::VARY], "accept-encoding", "{rel}");
                assert_eq!(gunzip(&body).unwrap(), want, "{rel}");
                assert!(body.len() < want.len(), "{rel} did not shrink");
            } else {
                assert!(h.get(header::CONTENT_ENCODING).is_none(), "{rel}");
                assert!(h.get(header::VARY).is_none(), "{rel}");
                assert_eq!(body, want, "{rel}");
            }
        }
        assert!(
            gzipped >= 5,
            "the UI's scripts, styles and pages are gzipped"
        );
    }

    #[tokio::test]
    async fn unknown_paths_are_not_found() {
        for path in [
            "",
            "nope.js",
            "../Cargo.toml",
            "vendor",
            "vendor/",
            "APP.JS",
            "app.js/",
        ] {
            assert_eq!(asset(path, &HeaderMap::new()).status(), 404, "{path:?}");
        }
    }
}
