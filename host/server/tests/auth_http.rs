//! The auth endpoints and middleware over real HTTP on loopback, with real
//! SQLite storage.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use turnstone_server::auth::JwtKeys;
use turnstone_server::http::{AppState, LoginPolicy};
use turnstone_server::login_throttle::{LoginThrottle, LoginThrottleConfig};
use turnstone_server::serve::ConnectionLimits;
use turnstone_storage::prelude::*;

const SECRET: &str = "test-secret-test-secret-test-secret!";

struct Server {
    base: String,
    db: Storage,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn start() -> Server {
    start_with(LoginPolicy::default()).await
}

async fn start_with(login: LoginPolicy) -> Server {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let db = turnstone_storage::open(&DbConfig {
        path: Some(dir.path().join("s.db")),
        ..Default::default()
    })
    .await
    .unwrap();
    let state = AppState {
        db: db.clone(),
        keys: Arc::new(JwtKeys::new(SECRET).unwrap()),
        started: std::time::Instant::now(),
        node_id: "node-test".into(),
        node: None,
        limiter: None,
        login: Arc::new(login),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(turnstone_server::serve::serve(
        listener,
        state,
        std::future::pending(),
        std::time::Duration::from_secs(1),
        ConnectionLimits::default(),
    ));
    Server {
        base: format!("http://{addr}"),
        db,
        http: reqwest::Client::new(),
        _dir: dir,
    }
}

/// The JSON body (Null when it is not JSON).
async fn json_of(r: reqwest::Response) -> Value {
    let bytes = r.bytes().await.unwrap();
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

impl Server {
    async fn get(&self, path: &str, token: Option<&str>) -> (StatusCode, Value) {
        let mut r = self.http.get(format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        let resp = r.send().await.unwrap();
        (resp.status(), json_of(resp).await)
    }

    async fn post(&self, path: &str, token: Option<&str>, body: &str) -> reqwest::Response {
        let mut r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r.send().await.unwrap()
    }
}

#[tokio::test]
async fn setup_once_login_whoami_and_scope_checks() {
    let s = start().await;
    // Public: health and auth status.
    let (st, health) = s.get("/health", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["node_id"], "node-test");
    let (_, status) = s.get("/v1/api/auth/status", None).await;
    assert_eq!(status["setup_required"], true);
    assert_eq!(status["auth_enabled"], true);

    // Everything else needs credentials.
    let (st, body) = s.get("/v1/api/auth/whoami", None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body,
        json!({"error": "Unauthorized: missing or invalid token"})
    );
    let (st, _) = s.get("/v1/api/auth/whoami", Some("ts_forged")).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let (st, _) = s.get("/v1/api/auth/whoami", Some("a.b.c")).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);

    // Bad setup bodies are 400 and create nothing.
    for bad in [
        "not json",
        r#"{"username": "admin"}"#,
        r#"{"username": "bad name", "display_name": "A", "password": "long enough"}"#,
        r#"{"username": "admin", "display_name": "A", "password": "short"}"#,
    ] {
        let r = s.post("/v1/api/auth/setup", None, bad).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        let v = json_of(r).await;
        assert!(v["error"].is_string(), "{v}");
    }
    assert_eq!(s.db.count_users().await.unwrap(), 0);

    let ok = s
        .post(
            "/v1/api/auth/setup",
            None,
            r#"{"username": "admin", "display_name": "Ada", "password": "correct horse"}"#,
        )
        .await;
    assert_eq!(ok.status(), StatusCode::OK);
    let cookie = ok
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(cookie.starts_with("turnstone_auth_server=") && cookie.contains("HttpOnly"));
    let v = json_of(ok).await;
    assert_eq!(v["role"], "admin");
    assert_eq!(v["scopes"], "approve,read,write");
    assert!(v["permissions"].as_str().unwrap().contains("tools.approve"));
    let jwt = v["jwt"].as_str().unwrap().to_string();

    // Setup works once.
    let again = s
        .post(
            "/v1/api/auth/setup",
            None,
            r#"{"username": "eve", "display_name": "E", "password": "another one"}"#,
        )
        .await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert_eq!(json_of(again).await["error"], "Setup already completed");

    // The session JWT works as a bearer token and as the cookie.
    let (st, me) = s.get("/v1/api/auth/whoami", Some(&jwt)).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(me["username"], "admin");
    let by_cookie = s
        .http
        .get(format!("{}/v1/api/auth/whoami", s.base))
        .header("cookie", format!("other=1; turnstone_auth_server={jwt}"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_cookie.status(), StatusCode::OK);

    // Password login: wrong password and unknown user look the same.
    for body in [
        r#"{"username": "admin", "password": "wrong password"}"#,
        r#"{"username": "nobody", "password": "correct horse"}"#,
    ] {
        let r = s.post("/v1/api/auth/login", None, body).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(json_of(r).await["error"], "Invalid credentials");
    }
    let r = s
        .post("/v1/api/auth/login", None, r#"{"username": "admin"}"#)
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let r = s
        .post(
            "/v1/api/auth/login",
            None,
            r#"{"username": "admin", "password": "correct horse"}"#,
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json_of(r).await["can_refresh"], true);

    // An API token with only `read`: login exchanges it for a read-only JWT,
    // and routes that need more answer 403 with the scope named.
    let admin = s.db.get_user_by_name("admin").await.unwrap().unwrap();
    let (raw, _) =
        s.db.create_api_token(&admin.user_id, "ro", &["read".to_string()], None)
            .await
            .unwrap();
    let r = s
        .post(
            "/v1/api/auth/login",
            None,
            &json!({"token": raw}).to_string(),
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    let v = json_of(r).await;
    assert_eq!(v["scopes"], "read");
    assert_eq!(v["can_refresh"], false);
    let ro_jwt = v["jwt"].as_str().unwrap().to_string();
    for token in [raw.as_str(), ro_jwt.as_str()] {
        let (st, _) = s.get("/v1/api/auth/whoami", Some(token)).await;
        assert_eq!(st, StatusCode::OK);
        let r = s.post("/v1/api/workstreams/new", Some(token), "{}").await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        assert_eq!(json_of(r).await["error"], "write scope required");
        // Read scope reaches the (per-user filtered) global stream; this
        // auth-only router has no engine behind it.
        let (st, body) = s.get("/v1/api/events/global", Some(token)).await;
        assert_eq!(st, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("without a session engine")
        );
    }
    // Authenticated but unknown route: a JSON 404, not a 500.
    let (st, body) = s.get("/v1/api/nothing-here", Some(&jwt)).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert!(body["error"].is_string());

    // Logout clears the cookie.
    let out = s.post("/v1/api/auth/logout", None, "").await;
    assert_eq!(out.status(), StatusCode::OK);
    assert!(
        out.headers()
            .get("set-cookie")
            .unwrap()
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
}

async fn admin_jwt(s: &Server) -> String {
    let r = s
        .post(
            "/v1/api/auth/setup",
            None,
            r#"{"username": "admin", "display_name": "Ada", "password": "correct horse"}"#,
        )
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    json_of(r).await["jwt"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn credentials_are_read_however_the_client_spells_them() {
    let s = start().await;
    let jwt = admin_jwt(&s).await;
    let whoami = |auth: Option<String>, cookie: Option<String>| {
        let mut r = s.http.get(format!("{}/v1/api/auth/whoami", s.base));
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        if let Some(c) = cookie {
            r = r.header("cookie", c);
        }
        async move { r.send().await.unwrap().status() }
    };
    // RFC 9110: the auth scheme is case-insensitive.
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        assert_eq!(
            whoami(Some(format!("{scheme} {jwt}")), None).await,
            StatusCode::OK,
            "{scheme}"
        );
    }
    assert_eq!(
        whoami(Some(format!("  Bearer   {jwt}  ")), None).await,
        StatusCode::OK
    );
    // Cookie values with whitespace around them, or quoted.
    for cookie in [
        format!("turnstone_auth_server= {jwt} "),
        format!("a=1 ;  turnstone_auth_server = {jwt} ; b=2"),
        format!("turnstone_auth_server=\"{jwt}\""),
    ] {
        assert_eq!(
            whoami(None, Some(cookie.clone())).await,
            StatusCode::OK,
            "{cookie}"
        );
    }
    // Other schemes and empty values are not credentials.
    for auth in [
        format!("Basic {jwt}"),
        "Bearer".into(),
        "Bearer    ".into(),
        format!("Bearerx {jwt}"),
    ] {
        assert_eq!(
            whoami(Some(auth.clone()), None).await,
            StatusCode::UNAUTHORIZED,
            "{auth}"
        );
    }
    assert_eq!(
        whoami(None, Some("turnstone_auth_server=".into())).await,
        StatusCode::UNAUTHORIZED
    );
    // A non-bearer Authorization header does not hide a valid cookie.
    assert_eq!(
        whoami(
            Some("Basic dXNlcjpwdw==".into()),
            Some(format!("turnstone_auth_server={jwt}"))
        )
        .await,
        StatusCode::OK
    );
}

fn set_cookie(r: &reqwest::Response) -> String {
    r.headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn the_session_cookie_is_secure_over_tls_or_when_configured() {
    let s = start().await;
    admin_jwt(&s).await;
    let login = |headers: Vec<(&'static str, &'static str)>| {
        let mut r = s
            .http
            .post(format!("{}/v1/api/auth/login", s.base))
            .header("content-type", "application/json")
            .body(r#"{"username": "admin", "password": "correct horse"}"#);
        for (k, v) in headers {
            r = r.header(k, v);
        }
        async move { r.send().await.unwrap() }
    };
    let plain = login(vec![]).await;
    assert_eq!(plain.status(), StatusCode::OK);
    assert!(
        !set_cookie(&plain).contains("Secure"),
        "{}",
        set_cookie(&plain)
    );
    for h in [
        ("x-forwarded-proto", "https"),
        ("x-forwarded-proto", "HTTPS, http"),
        ("forwarded", "for=192.0.2.1;proto=https;by=203.0.113.9"),
    ] {
        let r = login(vec![h]).await;
        let c = set_cookie(&r);
        assert!(
            c.contains("; Secure") && c.contains("HttpOnly"),
            "{h:?}: {c}"
        );
    }
    let r = login(vec![("x-forwarded-proto", "http")]).await;
    assert!(!set_cookie(&r).contains("Secure"));

    let s = start_with(LoginPolicy {
        cookie_secure: true,
        ..LoginPolicy::default()
    })
    .await;
    let r = s
        .post(
            "/v1/api/auth/setup",
            None,
            r#"{"username": "admin", "display_name": "Ada", "password": "correct horse"}"#,
        )
        .await;
    assert!(set_cookie(&r).contains("; Secure"), "{}", set_cookie(&r));
    let out = s.post("/v1/api/auth/logout", None, "").await;
    let c = set_cookie(&out);
    assert!(c.contains("; Secure") && c.contains("Max-Age=0"), "{c}");
}

#[tokio::test]
async fn failed_logins_are_throttled_per_address_and_per_username() {
    let s = start_with(LoginPolicy {
        throttle: LoginThrottle::new(&LoginThrottleConfig {
            enabled: true,
            per_ip_burst: 6,
            per_ip_per_minute: 6.0,
            per_user_burst: 2,
            per_user_per_minute: 60.0,
        }),
        ..LoginPolicy::default()
    })
    .await;
    admin_jwt(&s).await;
    let server = &s;
    let login = |user: &str, pw: &str| {
        let body = json!({"username": user, "password": pw}).to_string();
        async move { server.post("/v1/api/auth/login", None, &body).await }
    };
    for _ in 0..2 {
        assert_eq!(
            login("admin", "wrong").await.status(),
            StatusCode::UNAUTHORIZED
        );
    }
    // The username is throttled: even the right password waits.
    let r = login("Admin", "correct horse").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "1");
    let v = json_of(r).await;
    assert_eq!(v["retry_after"], 1);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("Too many failed logins"),
        "{v}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(
        login("admin", "correct horse").await.status(),
        StatusCode::OK
    );
    // The address: its burst is spent across usernames (2 used above).
    for user in ["bob", "carol", "dave", "erin"] {
        assert_eq!(
            login(user, "guess").await.status(),
            StatusCode::UNAUTHORIZED,
            "{user}"
        );
    }
    let r = login("frank", "guess").await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=10).contains(&wait), "{wait}");
    // Token guessing from that address is throttled too, before any lookup.
    let r = s
        .post("/v1/api/auth/login", None, r#"{"token": "ts_guess"}"#)
        .await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
}
