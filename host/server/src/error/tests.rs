//! The mapping table: each lower-layer error → its status and body.

use super::*;
use crate::manager::ManagerError;
use turnstone_engine::runner::OpError;
use turnstone_engine::session::{EditError, SessionError};
use turnstone_runtime::provider_error::{RateLimit, ServerError};

async fn answer(e: ApiError) -> (StatusCode, Option<String>, serde_json::Value) {
    let resp = e.into_response();
    let status = resp.status();
    let retry = resp
        .headers()
        .get(header::RETRY_AFTER)
        .map(|v| v.to_str().unwrap_or_default().to_string());
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .unwrap_or_default();
    let body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (status, retry, body)
}

fn storage_cases() -> Vec<(StorageError, u16, &'static str)> {
    vec![
        (
            StorageError::UnknownWorkstream("w".into()),
            404,
            "Workstream not found",
        ),
        (
            StorageError::NotFound("x".into()),
            404,
            "Workstream not found",
        ),
        (StorageError::UnknownUser("u".into()), 404, "unknown user u"),
        (
            StorageError::WorkstreamExists("w".into()),
            409,
            "workstream w already exists",
        ),
        (
            StorageError::DuplicateAlias("a".into()),
            409,
            "alias \"a\" is already used by another workstream",
        ),
        (
            StorageError::DuplicateUsername("bob".into()),
            409,
            "username \"bob\" is already taken",
        ),
        (
            StorageError::TokenMismatch("w".into()),
            409,
            "workstream w is not the reservation this token belongs to",
        ),
        (
            StorageError::Ambiguous {
                query: "ab".into(),
                count: 2,
            },
            400,
            "\"ab\" matches 2 workstreams; use more characters or the alias",
        ),
        (
            StorageError::InvalidInput("bad".into()),
            400,
            "invalid input: bad",
        ),
        (
            StorageError::TooLarge {
                field: "content",
                size: 10,
                limit: 5,
            },
            413,
            "content is 10 bytes; the limit is 5 bytes",
        ),
        (
            StorageError::DatabaseTooNew {
                location: "db".into(),
                db_version: 9,
                binary_version: 3,
            },
            503,
            "the database is unavailable",
        ),
        (
            StorageError::Config("no url".into()),
            503,
            "the database is unavailable",
        ),
        (
            StorageError::Migrate("x".into()),
            503,
            "the database is unavailable",
        ),
        (
            StorageError::Database(sqlx::Error::PoolClosed),
            503,
            "the database is unavailable",
        ),
        (
            StorageError::Database(sqlx::Error::PoolTimedOut),
            503,
            "the database is busy",
        ),
        (
            StorageError::Database(sqlx::Error::RowNotFound),
            500,
            "storage error",
        ),
    ]
}

#[tokio::test]
async fn storage_errors_map_to_their_status() {
    for (err, status, message) in storage_cases() {
        let shown = format!("{err:?}");
        let (got, _, body) = answer(err.into()).await;
        assert_eq!(got.as_u16(), status, "{shown}");
        assert_eq!(body["error"], message, "{shown}");
    }
}

#[tokio::test]
async fn a_busy_pool_says_when_to_retry() {
    let (status, retry, body) =
        answer(StorageError::Database(sqlx::Error::PoolTimedOut).into()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retry.as_deref(), Some("1"));
    assert_eq!(body["retry_after"], 1);
}

#[tokio::test]
async fn manager_errors_map_to_their_status() {
    let cases: Vec<(ManagerError, u16, serde_json::Value)> = vec![
        (
            ManagerError::ModelNotLoaded("big".into()),
            503,
            serde_json::json!({
                "error": "The model 'big' isn't loaded on this server",
                "code": "model_not_loaded",
                "alias": "big",
            }),
        ),
        (
            ManagerError::NotFound,
            404,
            serde_json::json!({"error": "Workstream not found"}),
        ),
        (
            ManagerError::Exists("w".into()),
            409,
            serde_json::json!({"error": "workstream w already exists"}),
        ),
        (
            ManagerError::Invalid("ws_id must be 32 hex characters".into()),
            400,
            serde_json::json!({"error": "ws_id must be 32 hex characters"}),
        ),
        (
            ManagerError::Storage(StorageError::DuplicateAlias("a".into())),
            409,
            serde_json::json!({"error": "alias \"a\" is already used by another workstream"}),
        ),
        (
            ManagerError::Session("boom".into()),
            500,
            serde_json::json!({"error": "the session could not be built: boom"}),
        ),
    ];
    for (err, status, body) in cases {
        let shown = format!("{err:?}");
        let (got, _, got_body) = answer(err.into()).await;
        assert_eq!(got.as_u16(), status, "{shown}");
        assert_eq!(got_body, body, "{shown}");
    }
    let (status, retry, body) = answer(ManagerError::AtCapacity(4).into()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(retry.as_deref(), Some("5"));
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|m| m.starts_with("at capacity: 4 workstreams")),
        "{body}"
    );
}

#[tokio::test]
async fn session_and_provider_errors_map_to_their_status() {
    let provider = |e: ProviderError| OpError::Session(SessionError::Provider(e));
    let cases: Vec<(OpError, u16, Option<&str>, &str)> = vec![
        (OpError::Busy, 409, None, "Workstream is busy"),
        (OpError::Closed, 404, None, "Workstream not found"),
        (
            OpError::Session(SessionError::Edit(EditError::TooFar {
                asked: 3,
                available: 1,
            })),
            409,
            None,
            "cannot rewind 3 message(s): only 1 can be rewound",
        ),
        (
            OpError::Session(SessionError::Edit(EditError::NothingToEdit("retry"))),
            409,
            None,
            "there is no earlier message to retry",
        ),
        (
            OpError::Session(SessionError::Storage(StorageError::UnknownWorkstream(
                "w".into(),
            ))),
            404,
            None,
            "Workstream not found",
        ),
        (
            provider(ProviderError::RateLimit(RateLimit {
                message: "slow down".into(),
                retry_after_ms: Some(2500),
            })),
            503,
            Some("3"),
            "model request failed: rate limited: slow down (retry after 2.5 s)",
        ),
        (
            provider(ProviderError::Server(ServerError {
                status: 502,
                message: "bad gateway".into(),
            })),
            503,
            Some("1"),
            "model request failed: the provider answered 502: bad gateway",
        ),
        (
            provider(ProviderError::Auth("invalid key".into())),
            502,
            None,
            "model request failed: authentication failed: invalid key",
        ),
        (
            provider(ProviderError::ContextLength("too long".into())),
            502,
            None,
            "model request failed: the conversation is too long for the model: too long",
        ),
        (
            OpError::Session(SessionError::EmptySummary),
            500,
            None,
            "the model returned an empty summary; the conversation was not compacted",
        ),
    ];
    for (err, status, retry, message) in cases {
        let shown = format!("{err:?}");
        let (got, got_retry, body) = answer(err.into()).await;
        assert_eq!(got.as_u16(), status, "{shown}");
        assert_eq!(got_retry.as_deref(), retry, "{shown}");
        assert_eq!(body["error"], message, "{shown}");
    }
}

#[tokio::test]
async fn busy_carries_the_contract_status_field() {
    let (status, _, body) = answer(ApiError::Busy).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body,
        serde_json::json!({"error": "Workstream is busy", "status": "busy"})
    );
}

#[tokio::test]
async fn capability_errors_map_to_their_status() {
    let (status, _, body) = answer(CapabilityParseError::BadHost("*".into()).into()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|m| m.starts_with("http grant \"*\" is not allowed")),
        "{body}"
    );
    let denial = Denial {
        plugin: "web".into(),
        capability: turnstone_runtime::capability::CapabilityKind::Http,
        detail: "request to example.com:443".into(),
        hint: "grant it".into(),
    };
    let (status, _, body) = answer(denial.into()).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        body["error"],
        "http denied for plugin \"web\": request to example.com:443; grant it"
    );
}

#[tokio::test]
async fn throttles_say_when_to_retry() {
    let (status, retry, body) = answer(ApiError::RateLimited {
        message: "Too many failed logins; try again in 7 s".into(),
        secs: 7,
    })
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(retry.as_deref(), Some("7"));
    assert_eq!(
        body,
        serde_json::json!({"error": "Too many failed logins; try again in 7 s", "retry_after": 7})
    );
    assert_eq!(retry_secs(Duration::from_millis(1)), 1);
    assert_eq!(retry_secs(Duration::from_millis(2100)), 3);
}
