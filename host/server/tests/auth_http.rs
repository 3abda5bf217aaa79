//! The auth endpoints and middleware over real HTTP on loopback, with real
//! SQLite storage.

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use turnstone_server::auth::JwtKeys;
use turnstone_server::http::{AppState, router};
use turnstone_storage::prelude::*;

const SECRET: &str = "test-secret-test-secret-test-secret!";

struct Server {
    base: String,
    db: Storage,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

async fn start() -> Server {
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
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(state)).await;
    });
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
