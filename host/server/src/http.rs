//! The router and what every request passes through: authentication, rate
//! limiting, JSON errors and request metrics; plus the body helpers the
//! handlers share. The handlers are in [`crate::routes`].

use crate::auth::{self, COOKIE, JwtKeys, Scope};
use crate::passwords;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::Instant;
use turnstone_storage::Storage;

/// Lifetime of a session JWT.
pub const SESSION_SECS: u64 = 24 * 3600;

/// Shared state of every handler.
#[derive(Clone)]
pub struct AppState {
    /// Storage.
    pub db: Storage,
    /// JWT keys.
    pub keys: Arc<JwtKeys>,
    /// Process start.
    pub started: Instant,
    /// This node's id.
    pub node_id: String,
    /// The session engine side (`None`: auth-only, every engine route 503s).
    pub node: Option<Arc<crate::routes::Node>>,
    /// Per-IP rate limiting, when enabled.
    pub limiter: Option<Arc<crate::ratelimit::RateLimiter>>,
    /// Password hashing, failed-login throttling and the cookie policy.
    pub login: Arc<LoginPolicy>,
}

/// How logins are protected and their cookie is marked.
#[derive(Default)]
pub struct LoginPolicy {
    /// Argon2id off the async workers.
    pub passwords: passwords::PasswordPool,
    /// Failed-login throttling per address and username.
    pub throttle: crate::login_throttle::LoginThrottle,
    /// Mark the session cookie `Secure` on every response (`[auth]
    /// cookie_secure`); it is marked anyway when the request came over HTTPS
    /// (`X-Forwarded-Proto: https` from a TLS-terminating proxy).
    pub cookie_secure: bool,
}

pub use crate::error::ApiError;

/// Who made the request (set by [`authenticate`]).
#[derive(Debug, Clone)]
pub struct Identity {
    /// User id.
    pub user_id: String,
    /// Login name.
    pub username: String,
    /// Granted scopes.
    pub scopes: Vec<Scope>,
    /// Granted permissions.
    pub permissions: Vec<String>,
}

/// The router (without a listener).
pub fn router(state: AppState) -> axum::Router {
    let api = axum::Router::new()
        .merge(crate::routes::auth_routes())
        .merge(crate::routes::api());
    let mut root = axum::Router::new()
        .merge(crate::routes::node_routes())
        .merge(crate::web::routes())
        .nest("/v1", api);
    // Our tool components served over MCP (streamable HTTP), behind the same
    // bearer auth as the API (a `ts_` token or a session JWT).
    if let Some(node) = &state.node {
        let d = &node.mgr.deps;
        let db = state.db.clone();
        // The caller's role, from the identity the auth layer put on the
        // HTTP request (policies may name roles).
        let gate = turnstone_engine::safety::PolicyGate::new(
            d.safety.clone(),
            move |ext: &turnstone_mcp::serve::Extensions| {
                let user = ext
                    .get::<http::request::Parts>()
                    .and_then(|p| p.extensions.get::<Identity>())
                    .map(|id| id.user_id.clone());
                let db = db.clone();
                Box::pin(async move {
                    let user = user?;
                    db.get_user(&user).await.ok().flatten().map(|u| u.role)
                }) as futures::future::BoxFuture<'static, Option<String>>
            },
        );
        let server = turnstone_mcp::serve::ComponentServer::new(
            d.registry.clone(),
            d.mcp_serve_allow.clone(),
            d.workspace.clone(),
        )
        .with_gate(std::sync::Arc::new(gate));
        root = root.nest_service("/mcp", turnstone_mcp::serve::http_service(server));
    }
    root.fallback(|| async { ApiError::NotFound("Not found".into()) })
        // Order (outermost first): metrics, JSON errors, authentication, rate limit.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            rate_limit,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            record_request,
        ))
        .with_state(state)
}

/// Counts requests and their durations per matched route.
async fn record_request(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(node) = state.node.clone() else {
        return next.run(req).await;
    };
    let method = req.method().to_string();
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let started = Instant::now();
    let resp = next.run(req).await;
    node.metrics.request(
        &method,
        &route,
        resp.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    resp
}

/// Client errors produced by extractors (bad path or query) come back as the
/// contract's `{"error": "..."}` instead of plain text.
async fn json_errors(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let msg = String::from_utf8_lossy(&bytes).trim().to_string();
    let msg = if msg.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        msg
    };
    let mut out = ApiError::Framework {
        status: parts.status,
        message: msg,
    }
    .into_response();
    for (k, v) in parts.headers.iter() {
        if k != header::CONTENT_TYPE && k != header::CONTENT_LENGTH {
            out.headers_mut().insert(k.clone(), v.clone());
        }
    }
    out
}

/// Per-IP token bucket (after authentication, like the original).
async fn rate_limit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(limiter) = &state.limiter else {
        return next.run(req).await;
    };
    if crate::ratelimit::exempt(req.uri().path()) {
        return next.run(req).await;
    }
    let ip = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip());
    if let Some(ip) = ip
        && let Err(wait) = limiter.check(ip)
    {
        if let Some(n) = &state.node {
            n.metrics.ratelimited();
        }
        return ApiError::RateLimited {
            message: "Rate limit exceeded".into(),
            secs: crate::error::retry_secs(wait),
        }
        .into_response();
    }
    next.run(req).await
}

/// The session credential: an `Authorization` bearer token (the scheme is
/// case-insensitive, RFC 9110 §11.1) or the session cookie.
fn bearer(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some((scheme, token)) = v.trim().split_once([' ', '\t'])
        && scheme.eq_ignore_ascii_case("bearer")
        && !token.trim().is_empty()
    {
        return Some(token.trim().to_string());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == COOKIE)
        .map(|(_, v)| {
            let v = v.trim();
            // RFC 6265 allows a quoted cookie value.
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
                .to_string()
        })
        .filter(|v| !v.is_empty())
}

/// The client's address, when the connection recorded one.
pub(crate) fn client_ip(req: &Request) -> Option<std::net::IpAddr> {
    req.extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0.ip())
}

async fn identify(state: &AppState, token: &str) -> Option<Identity> {
    if token.starts_with("ts_") {
        let (tok, user) = state.db.verify_api_token(token).await.ok()??;
        let scopes = tok.scopes.iter().filter_map(|s| Scope::parse(s)).collect();
        let permissions = auth::role_permissions(&user.role)
            .unwrap_or_default()
            .into_iter()
            .map(String::from)
            .collect();
        return Some(Identity {
            user_id: user.user_id,
            username: user.username,
            scopes,
            permissions,
        });
    }
    let c = state.keys.verify(token).ok()?;
    Some(Identity {
        scopes: c.scope_list(),
        user_id: c.sub,
        username: c.username,
        permissions: c.permissions,
    })
}

/// Checks credentials and the route's scope before any handler runs.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let stripped = path.strip_prefix("/v1").unwrap_or(path);
    let stripped = if stripped.is_empty() { "/" } else { stripped };
    let Some(needed) = auth::required_scope(req.method().as_str(), stripped) else {
        return next.run(req).await;
    };
    let identity = match bearer(req.headers()) {
        Some(t) => identify(&state, &t).await,
        None => None,
    };
    let Some(identity) = identity else {
        return ApiError::Unauthorized("Unauthorized: missing or invalid token".into())
            .into_response();
    };
    if !auth::has_scope(&identity.scopes, needed) {
        let msg = if needed == Scope::Service {
            "service scope required".to_string()
        } else {
            format!("{} scope required", needed.as_str())
        };
        return ApiError::Forbidden(msg).into_response();
    }
    req.extensions_mut().insert(identity);
    next.run(req).await
}

/// 400 with `msg`.
pub(crate) fn bad_request(msg: impl Into<String>) -> ApiError {
    ApiError::BadRequest(msg.into())
}

/// Whether reading a body failed on its length limit (413, not 400).
pub(crate) fn is_length_limit(e: &axum::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Reads and discards up to `cap` bytes of `body` (its inactivity timeout
/// still applies), so a refused client can finish sending and read the answer.
pub(crate) async fn drain(body: axum::body::Body, cap: usize) {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut seen = 0usize;
    while seen < cap {
        match body.frame().await {
            Some(Ok(f)) => seen += f.data_ref().map_or(0, |d| d.len()),
            Some(Err(_)) | None => break,
        }
    }
}

/// The answer to a body that could not be read: 413 when too large, else
/// 400 (it stalled past the body timeout or the connection broke).
pub(crate) fn body_error(e: axum::Error) -> ApiError {
    if is_length_limit(&e) {
        ApiError::TooLarge("request body too large".into())
    } else {
        bad_request("the request body could not be read (it stalled or was cut off)")
    }
}

/// Whether `s` is empty or only whitespace, by Python's `str.isspace` (the
/// original's `strip()`; the schema's patterns spell the same set out): Unicode
/// whitespace plus the information separators U+001C..U+001F.
pub(crate) fn is_blank(s: &str) -> bool {
    s.chars().all(is_py_space)
}

/// `s` without leading and trailing whitespace as [`is_blank`] means it.
pub(crate) fn py_trim(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Parses an optional JSON body: none, blank or `null` is `T::default()`.
pub(crate) fn parse_optional<T: serde::de::DeserializeOwned + Default>(
    body: &[u8],
) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    Ok(parse::<Option<T>>(body)?.unwrap_or_default())
}

/// Parses a JSON body, answering 400 (never 422/500) for a bad one.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad_request(format!("invalid JSON body: {e}")))
}
