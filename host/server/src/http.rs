//! The HTTP surface built so far: `/health`, the auth endpoints of the wire
//! contract (`status`, `setup`, `login`, `logout`, `whoami`) and the
//! authentication middleware every other route sits behind.

use crate::auth::{self, COOKIE, Claims, JwtKeys, Scope};
use crate::passwords;
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
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

/// A JSON error with a status: `{"error": "..."}`.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

/// An error the client should retry later: `{"error", "retry_after"}` and a
/// `Retry-After` header.
#[derive(Debug)]
pub struct RetryLater {
    /// 429 or 503.
    pub status: StatusCode,
    /// What happened.
    pub message: String,
    /// Seconds to wait.
    pub secs: u64,
}

impl IntoResponse for RetryLater {
    fn into_response(self) -> Response {
        let body = json!({"error": self.message, "retry_after": self.secs});
        let mut resp = (self.status, Json(body)).into_response();
        if let Ok(v) = HeaderValue::from_str(&self.secs.to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        resp
    }
}

/// What a login or setup can fail with.
#[derive(Debug)]
pub enum LoginError {
    /// A plain API error.
    Api(ApiError),
    /// Throttled or busy.
    Retry(RetryLater),
}

impl From<ApiError> for LoginError {
    fn from(e: ApiError) -> Self {
        Self::Api(e)
    }
}

impl From<turnstone_storage::StorageError> for LoginError {
    fn from(e: turnstone_storage::StorageError) -> Self {
        Self::Api(e.into())
    }
}

impl IntoResponse for LoginError {
    fn into_response(self) -> Response {
        match self {
            Self::Api(e) => e.into_response(),
            Self::Retry(r) => r.into_response(),
        }
    }
}

impl From<turnstone_storage::StorageError> for ApiError {
    fn from(e: turnstone_storage::StorageError) -> Self {
        tracing::error!("storage: {e}");
        ApiError(StatusCode::INTERNAL_SERVER_ERROR, "storage error".into())
    }
}

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
        .route("/api/auth/status", get(auth_status))
        .route("/api/auth/setup", post(setup))
        .route("/api/auth/login", post(login))
        .route("/api/auth/logout", post(logout))
        .route("/api/auth/whoami", get(whoami))
        .merge(crate::routes::api());
    axum::Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(crate::routes::openapi_json))
        .route("/docs", get(crate::routes::docs_page))
        .merge(crate::web::routes())
        .nest("/v1", api)
        .fallback(|| async { ApiError(StatusCode::NOT_FOUND, "Not found".into()) })
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
    let mut out = ApiError(parts.status, msg).into_response();
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
        let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
        let mut resp = (
            StatusCode::TOO_MANY_REQUESTS,
            Json(json!({"error": "Rate limit exceeded", "retry_after": secs})),
        )
            .into_response();
        if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
            resp.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return resp;
    }
    next.run(req).await
}

#[utoipa::path(get, path = "/metrics", tag = "node", summary = "Prometheus metrics", responses((status = 200, description = "Success", body = Object)))]
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        crate::routes::metrics_text(&state),
    )
        .into_response()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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

/// Whether the request reached us over HTTPS (through a TLS-terminating proxy).
fn came_over_tls(headers: &HeaderMap) -> bool {
    let forwarded_proto = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .next()
                .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
        });
    let forwarded = headers
        .get(header::FORWARDED)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split([';', ','])
                .filter_map(|kv| kv.split_once('='))
                .any(|(k, v)| {
                    k.trim().eq_ignore_ascii_case("proto")
                        && v.trim().trim_matches('"').eq_ignore_ascii_case("https")
                })
        });
    forwarded_proto || forwarded
}

/// `Set-Cookie` attributes for the session cookie.
fn cookie_attrs(state: &AppState, headers: &HeaderMap) -> &'static str {
    if state.login.cookie_secure || came_over_tls(headers) {
        "; Path=/; HttpOnly; SameSite=Strict; Secure"
    } else {
        "; Path=/; HttpOnly; SameSite=Strict"
    }
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
        return ApiError(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: missing or invalid token".into(),
        )
        .into_response();
    };
    if !auth::has_scope(&identity.scopes, needed) {
        let msg = if needed == Scope::Service {
            "service scope required".to_string()
        } else {
            format!("{} scope required", needed.as_str())
        };
        return ApiError(StatusCode::FORBIDDEN, msg).into_response();
    }
    req.extensions_mut().insert(identity);
    next.run(req).await
}

#[utoipa::path(get, path = "/health", tag = "node", summary = "Liveness, version, workstream counts", responses((status = 200, description = "Success", body = Object)))]
pub(crate) async fn health(State(state): State<AppState>) -> Json<Value> {
    Json(crate::routes::health_fields(&state))
}

#[utoipa::path(get, path = "/v1/api/auth/status", tag = "auth", summary = "Whether setup is needed", responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn auth_status(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let users = state.db.count_users().await?;
    Ok(Json(json!({
        "auth_enabled": true,
        "has_users": users > 0,
        "setup_required": users == 0,
        "oidc_enabled": false,
        "oidc_provider_name": null,
        "password_enabled": true,
    })))
}

/// Body of `POST /api/auth/setup`.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct SetupBody {
    username: String,
    display_name: String,
    password: String,
}

/// Body of `POST /api/auth/login`.
#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct LoginBody {
    username: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

pub(crate) fn bad_request(msg: impl Into<String>) -> ApiError {
    ApiError(StatusCode::BAD_REQUEST, msg.into())
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
        ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request body too large".into(),
        )
    } else {
        bad_request("the request body could not be read (it stalled or was cut off)")
    }
}

/// Parses a JSON body, answering 400 (never 422/500) for a bad one.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad_request(format!("invalid JSON body: {e}")))
}

/// The avatar object of the wire contract (initial only; no pictures yet).
fn avatar(display_name: &str) -> Value {
    let initial: String = display_name
        .chars()
        .next()
        .unwrap_or('?')
        .to_uppercase()
        .collect();
    json!({"color": null, "initial": initial, "picture": null})
}

fn session_response(
    state: &AppState,
    headers: &HeaderMap,
    user: &turnstone_storage::types::User,
    scopes: Vec<Scope>,
    src: &str,
) -> Result<Response, ApiError> {
    let permissions: Vec<String> = auth::role_permissions(&user.role)
        .unwrap_or_default()
        .into_iter()
        .map(String::from)
        .collect();
    let scopes_csv = scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let iat = now();
    let jwt = state
        .keys
        .mint(Claims {
            sub: user.user_id.clone(),
            username: user.username.clone(),
            scopes: scopes_csv.clone(),
            permissions: permissions.clone(),
            src: src.into(),
            iss: String::new(),
            aud: String::new(),
            iat,
            exp: iat + SESSION_SECS,
        })
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let body = json!({
        "status": "ok",
        "user_id": user.user_id,
        "username": user.username,
        "display_name": user.display_name,
        "avatar": avatar(&user.display_name),
        "role": user.role,
        "scopes": scopes_csv,
        "permissions": permissions.join(","),
        "jwt": jwt,
        "can_refresh": src != "token",
    });
    let cookie = format!(
        "{COOKIE}={jwt}{}; Max-Age={SESSION_SECS}",
        cookie_attrs(state, headers)
    );
    let mut resp = Json(body).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    Ok(resp)
}

#[utoipa::path(post, path = "/v1/api/auth/setup", tag = "auth", summary = "Create the first administrator (once)", request_body = SetupBody, responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn setup(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, LoginError> {
    let b: SetupBody = parse(&body)?;
    passwords::validate_username(&b.username).map_err(bad_request)?;
    if b.password.chars().count() < passwords::MIN_PASSWORD_CHARS {
        return Err(bad_request(format!(
            "password must have at least {} characters",
            passwords::MIN_PASSWORD_CHARS
        ))
        .into());
    }
    if state.db.count_users().await? > 0 {
        return Err(ApiError(StatusCode::CONFLICT, "Setup already completed".into()).into());
    }
    let hash = state
        .login
        .passwords
        .hash(b.password.clone())
        .await
        .map_err(busy)?
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e))?;
    let display = if b.display_name.trim().is_empty() {
        b.username.clone()
    } else {
        b.display_name.clone()
    };
    let user = match state
        .db
        .create_user(&b.username, &display, &hash, "admin")
        .await
    {
        Ok(u) => u,
        // Two setups racing: the loser sees the same answer as a late one.
        Err(turnstone_storage::StorageError::DuplicateUsername(_)) => {
            return Err(ApiError(StatusCode::CONFLICT, "Setup already completed".into()).into());
        }
        Err(e) => return Err(e.into()),
    };
    Ok(session_response(
        &state,
        &headers,
        &user,
        auth::role_scopes(&user.role),
        "setup",
    )?)
}

#[utoipa::path(post, path = "/v1/api/auth/login", tag = "auth", summary = "Password or API-token login; returns a JWT and sets the cookie. Failed logins are throttled per client address and per username.", request_body = LoginBody, responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Invalid credentials", body = crate::routes::ErrorBody), (status = 413, description = "Body too large", body = crate::routes::ErrorBody), (status = 429, description = "Too many failed logins (Retry-After)", body = crate::routes::ErrorBody), (status = 503, description = "Password checks saturated (Retry-After)", body = crate::routes::ErrorBody)))]
pub(crate) async fn login(
    State(state): State<AppState>,
    req: Request,
) -> Result<Response, LoginError> {
    let ip = client_ip(&req);
    let headers = req.headers().clone();
    let body = axum::body::to_bytes(req.into_body(), 64 * 1024)
        .await
        .map_err(body_error)?;
    let b: LoginBody = parse(&body)?;
    let invalid = || ApiError(StatusCode::UNAUTHORIZED, "Invalid credentials".into());
    let throttle = &state.login.throttle;
    if let Some(token) = b.token.filter(|t| !t.is_empty()) {
        throttle.attempt(ip, None).map_err(throttled)?;
        let Some((tok, user)) = state.db.verify_api_token(&token).await? else {
            return Err(invalid().into());
        };
        throttle.succeeded(ip, None);
        let scopes = tok.scopes.iter().filter_map(|s| Scope::parse(s)).collect();
        return Ok(session_response(&state, &headers, &user, scopes, "token")?);
    }
    let (Some(username), Some(password)) = (b.username, b.password) else {
        return Err(bad_request("username and password, or token, are required").into());
    };
    // Refused before any hashing: guessing costs the server nothing.
    if let Err(wait) = throttle.attempt(ip, Some(&username)) {
        if let Some(n) = &state.node {
            n.metrics.login_throttled();
        }
        return Err(throttled(wait));
    }
    let user = state.db.get_user_by_name(&username).await?;
    // An unknown user is verified against a dummy hash, so timing does not
    // reveal which usernames exist.
    let ok = state
        .login
        .passwords
        .verify(password, user.as_ref().map(|u| u.password_hash.clone()))
        .await
        .map_err(busy)?;
    match user {
        Some(u) if ok => {
            throttle.succeeded(ip, Some(&username));
            Ok(session_response(
                &state,
                &headers,
                &u,
                auth::role_scopes(&u.role),
                "password",
            )?)
        }
        _ => Err(invalid().into()),
    }
}

/// 429 for a throttled login, with `Retry-After`.
fn throttled(wait: std::time::Duration) -> LoginError {
    let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
    LoginError::Retry(RetryLater {
        status: StatusCode::TOO_MANY_REQUESTS,
        message: format!("Too many failed logins; try again in {secs} s"),
        secs,
    })
}

/// 503 while the password pool is saturated.
fn busy(e: passwords::PoolBusy) -> LoginError {
    LoginError::Retry(RetryLater {
        status: StatusCode::SERVICE_UNAVAILABLE,
        message: e.to_string(),
        secs: 1,
    })
}

#[utoipa::path(post, path = "/v1/api/auth/logout", tag = "auth", summary = "Clear the session cookie", responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let mut resp = Json(json!({"status": "ok"})).into_response();
    let clear = format!("{COOKIE}={}; Max-Age=0", cookie_attrs(&state, &headers));
    if let Ok(v) = HeaderValue::from_str(&clear) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

#[utoipa::path(get, path = "/v1/api/auth/whoami", tag = "auth", summary = "The caller", responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn whoami(
    State(state): State<AppState>,
    axum::Extension(id): axum::Extension<Identity>,
) -> Result<Json<Value>, ApiError> {
    let user = state
        .db
        .get_user(&id.user_id)
        .await?
        .ok_or_else(|| ApiError(StatusCode::UNAUTHORIZED, "user no longer exists".into()))?;
    Ok(Json(json!({
        "user_id": user.user_id,
        "username": user.username,
        "display_name": user.display_name,
        "avatar": avatar(&user.display_name),
        "scopes": id.scopes.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","),
        "permissions": id.permissions.join(","),
        "can_refresh": false,
    })))
}
