//! The auth endpoints of the wire contract: `status`, `setup`, `login`,
//! `logout`, `whoami`.

use crate::auth::{self, COOKIE, Claims, Scope};
use crate::error::retry_secs;
use crate::http::{
    ApiError, AppState, Identity, SESSION_SECS, bad_request, body_error, client_ip, parse,
};
use crate::passwords;
use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};
use utoipa::ToSchema;

/// The auth routes (relative to `/v1`).
pub fn routes() -> axum::Router<AppState> {
    use axum::routing::{get, post};
    axum::Router::new()
        .route("/api/auth/status", get(auth_status))
        .route("/api/auth/setup", post(setup))
        .route("/api/auth/login", post(login))
        .route("/api/auth/logout", post(logout))
        .route("/api/auth/whoami", get(whoami))
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
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

/// The avatar object of the wire contract (initial only; no pictures yet).
#[derive(Serialize, Deserialize, ToSchema)]
pub(crate) struct Avatar {
    /// Always `null`.
    color: Option<String>,
    /// The display name's first letter, upper-cased.
    initial: String,
    /// Always `null`.
    picture: Option<String>,
}

impl Avatar {
    fn of(display_name: &str) -> Self {
        Self {
            color: None,
            initial: display_name
                .chars()
                .next()
                .unwrap_or('?')
                .to_uppercase()
                .collect(),
            picture: None,
        }
    }
}

/// What `GET /api/auth/status` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct AuthStatus {
    /// Always true: authentication cannot be switched off.
    auth_enabled: bool,
    /// Some user exists.
    has_users: bool,
    /// No user exists yet: `POST /api/auth/setup` creates the first.
    setup_required: bool,
    /// Always false (OIDC is not built yet).
    oidc_enabled: bool,
    /// Always `null`.
    oidc_provider_name: Option<String>,
    /// Always true.
    password_enabled: bool,
}

/// A session: what setup and login answer (the JWT is also set as a cookie).
#[derive(Serialize, ToSchema)]
pub(crate) struct SessionBody {
    /// Always `ok`.
    status: &'static str,
    /// The user.
    user_id: String,
    /// Login name.
    username: String,
    /// Display name.
    display_name: String,
    /// Avatar.
    avatar: Avatar,
    /// Role (`admin`, `user`, …).
    role: String,
    /// Comma-separated scopes.
    scopes: String,
    /// Comma-separated permissions.
    permissions: String,
    /// The session JWT (valid 24 h).
    jwt: String,
    /// False for a session made from an API token.
    can_refresh: bool,
}

/// What `GET /api/auth/whoami` answers.
#[derive(Serialize, ToSchema)]
pub(crate) struct WhoAmI {
    /// The user.
    user_id: String,
    /// Login name.
    username: String,
    /// Display name.
    display_name: String,
    /// Avatar.
    avatar: Avatar,
    /// Comma-separated scopes of this credential.
    scopes: String,
    /// Comma-separated permissions.
    permissions: String,
    /// Always false.
    can_refresh: bool,
}

/// Body of `POST /api/auth/setup`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct SetupBody {
    /// 1-64 letters, digits, `.`, `_`, `-`.
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    username: String,
    /// Shown in the UI (blank: the username).
    display_name: String,
    /// At least 8 characters.
    #[schema(min_length = 8)]
    password: String,
}

/// Body of `POST /api/auth/login`: `username` and `password`, or `token`.
#[derive(Deserialize)]
pub(crate) struct LoginBody {
    /// Login name.
    username: Option<String>,
    /// Password.
    password: Option<String>,
    /// An API token (`ts_…`), instead of a password.
    token: Option<String>,
}

// Written out: "a non-empty token, or a username and a password" is a
// union the derive cannot express, and the schema must say exactly what the
// handler accepts.
impl utoipa::PartialSchema for LoginBody {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{
            AllOfBuilder, AnyOfBuilder, ObjectBuilder, SchemaType, Type,
        };
        let string = || ObjectBuilder::new().schema_type(Type::String);
        let nullable =
            || ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::String, Type::Null]));
        let fields = ObjectBuilder::new()
            .property("username", nullable())
            .property("password", nullable())
            .property("token", nullable());
        let by_token = ObjectBuilder::new()
            .description(Some("An API token (`ts_…`)"))
            .property("token", string().min_length(Some(1)))
            .required("token");
        let by_password = ObjectBuilder::new()
            .description(Some("A username and its password"))
            .property("username", string())
            .property("password", string())
            .required("username")
            .required("password");
        AllOfBuilder::new()
            .description(Some(
                "A non-empty `token`, or `username` and `password` (with both, the token is used)",
            ))
            .item(fields)
            .item(AnyOfBuilder::new().item(by_token).item(by_password))
            .into()
    }
}

impl ToSchema for LoginBody {}

#[utoipa::path(get, path = "/v1/api/auth/status", tag = "auth", summary = "Whether setup is needed", security(()), responses((status = 200, description = "Success", body = AuthStatus)))]
pub(crate) async fn auth_status(
    State(state): State<AppState>,
) -> Result<Json<AuthStatus>, ApiError> {
    let users = state.db.count_users().await?;
    Ok(Json(AuthStatus {
        auth_enabled: true,
        has_users: users > 0,
        setup_required: users == 0,
        oidc_enabled: false,
        oidc_provider_name: None,
        password_enabled: true,
    }))
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
        .map_err(|e| ApiError::Internal(format!("minting the session token failed: {e}")))?;
    let body = SessionBody {
        status: "ok",
        user_id: user.user_id.clone(),
        username: user.username.clone(),
        display_name: user.display_name.clone(),
        avatar: Avatar::of(&user.display_name),
        role: user.role.clone(),
        scopes: scopes_csv,
        permissions: permissions.join(","),
        jwt: jwt.clone(),
        can_refresh: src != "token",
    };
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

#[utoipa::path(post, path = "/v1/api/auth/setup", tag = "auth", summary = "Create the first administrator (once)", security(()), request_body = SetupBody, responses((status = 200, description = "The administrator's session", body = SessionBody), crate::routes::BadInput, (status = 409, description = "Setup already completed", body = crate::routes::ErrorBody), (status = 503, description = "Password checks saturated (Retry-After)", body = crate::routes::RetryBody)))]
pub(crate) async fn setup(
    State(state): State<AppState>,
    headers: HeaderMap,
    addr: Option<axum::Extension<axum::extract::ConnectInfo<std::net::SocketAddr>>>,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let ip = addr.map(|axum::Extension(axum::extract::ConnectInfo(a))| a.ip());
    let b: SetupBody = parse(&body)?;
    passwords::validate_username(&b.username).map_err(bad_request)?;
    if b.password.chars().count() < passwords::MIN_PASSWORD_CHARS {
        return Err(bad_request(format!(
            "password must have at least {} characters",
            passwords::MIN_PASSWORD_CHARS
        )));
    }
    let done = || ApiError::Conflict("Setup already completed".into());
    if state.db.count_users().await? > 0 {
        return Err(done());
    }
    let hash = state
        .login
        .passwords
        .hash(b.password.clone())
        .await?
        .map_err(|e| ApiError::Internal(format!("hashing the password failed: {e}")))?;
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
        Err(turnstone_storage::StorageError::DuplicateUsername(_)) => return Err(done()),
        Err(e) => return Err(e.into()),
    };
    crate::audit::record(
        &state.db,
        Some(&user.user_id),
        ip,
        "auth.setup",
        Some(&user.username),
        serde_json::json!({ "role": user.role }),
    )
    .await;
    session_response(
        &state,
        &headers,
        &user,
        auth::role_scopes(&user.role),
        "setup",
    )
}

#[utoipa::path(post, path = "/v1/api/auth/login", tag = "auth", summary = "Password or API-token login; returns a JWT and sets the cookie. Failed logins are throttled per client address and per username.", security(()), request_body = LoginBody, responses((status = 200, description = "The session", body = SessionBody), crate::routes::BadInput, (status = 401, description = "Invalid credentials", body = crate::routes::ErrorBody), crate::routes::TooLarge, (status = 429, description = "Too many failed logins (Retry-After)", body = crate::routes::RetryBody), (status = 503, description = "Password checks saturated (Retry-After)", body = crate::routes::RetryBody)))]
pub(crate) async fn login(
    State(state): State<AppState>,
    req: Request,
) -> Result<Response, ApiError> {
    let ip = client_ip(&req);
    let headers = req.headers().clone();
    let body = axum::body::to_bytes(req.into_body(), 64 * 1024)
        .await
        .map_err(body_error)?;
    let b: LoginBody = parse(&body)?;
    let invalid = || ApiError::Unauthorized("Invalid credentials".into());
    let throttle = &state.login.throttle;
    if let Some(token) = b.token.filter(|t| !t.is_empty()) {
        throttle.attempt(ip, None).map_err(throttled)?;
        let Some((tok, user)) = state.db.verify_api_token(&token).await? else {
            crate::audit::record(
                &state.db,
                None,
                ip,
                "auth.login_failed",
                None,
                serde_json::json!({ "method": "token" }),
            )
            .await;
            return Err(invalid());
        };
        throttle.succeeded(ip, None);
        crate::audit::record(
            &state.db,
            Some(&user.user_id),
            ip,
            "auth.login",
            Some(&user.username),
            serde_json::json!({ "method": "token", "token_id": tok.token_id }),
        )
        .await;
        let scopes = tok.scopes.iter().filter_map(|s| Scope::parse(s)).collect();
        return session_response(&state, &headers, &user, scopes, "token");
    }
    let (Some(username), Some(password)) = (b.username, b.password) else {
        return Err(bad_request("username and password, or token, are required"));
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
        .await?;
    match user {
        Some(u) if ok => {
            throttle.succeeded(ip, Some(&username));
            crate::audit::record(
                &state.db,
                Some(&u.user_id),
                ip,
                "auth.login",
                Some(&u.username),
                serde_json::json!({ "method": "password" }),
            )
            .await;
            session_response(&state, &headers, &u, auth::role_scopes(&u.role), "password")
        }
        u => {
            // A failed attempt names the account tried (and its id when it
            // exists); the throttle bounds how many such rows a flood leaves.
            crate::audit::record(
                &state.db,
                u.as_ref().map(|u| u.user_id.as_str()),
                ip,
                "auth.login_failed",
                Some(&username),
                serde_json::json!({ "method": "password", "known_user": u.is_some() }),
            )
            .await;
            Err(invalid())
        }
    }
}

/// 429 for a throttled login, with `Retry-After`.
fn throttled(wait: std::time::Duration) -> ApiError {
    let secs = retry_secs(wait);
    ApiError::RateLimited {
        message: format!("Too many failed logins; try again in {secs} s"),
        secs,
    }
}

#[utoipa::path(post, path = "/v1/api/auth/logout", tag = "auth", summary = "Clear the session cookie", security(()), responses((status = 200, description = "Success", body = crate::routes::StatusOk)))]
pub(crate) async fn logout(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let mut resp = crate::routes::StatusOk::ok().into_response();
    let clear = format!("{COOKIE}={}; Max-Age=0", cookie_attrs(&state, &headers));
    if let Ok(v) = HeaderValue::from_str(&clear) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

#[utoipa::path(get, path = "/v1/api/auth/whoami", tag = "auth", summary = "The caller", responses((status = 200, description = "The caller", body = WhoAmI), crate::routes::Guarded))]
pub(crate) async fn whoami(
    State(state): State<AppState>,
    axum::Extension(id): axum::Extension<Identity>,
) -> Result<Json<WhoAmI>, ApiError> {
    let user = state
        .db
        .get_user(&id.user_id)
        .await?
        .ok_or_else(|| ApiError::Unauthorized("user no longer exists".into()))?;
    Ok(Json(WhoAmI {
        avatar: Avatar::of(&user.display_name),
        user_id: user.user_id,
        username: user.username,
        display_name: user.display_name,
        scopes: id
            .scopes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(","),
        permissions: id.permissions.join(","),
        can_refresh: false,
    }))
}
