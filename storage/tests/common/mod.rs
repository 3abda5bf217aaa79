//! Test harness: every test runs against SQLite, and against PostgreSQL when
//! `TURNSTONE_TEST_PG_URL` is set (each test gets its own database, dropped after).
#![allow(dead_code)]

use futures::FutureExt;
use sqlx::AssertSqlSafe;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use turnstone_storage::prelude::*;

/// Raw access for tests that must forge state (old timestamps, corruption).
#[derive(Clone)]
pub enum Raw {
    Sqlite(sqlx::SqlitePool),
    Pg(sqlx::PgPool),
}

impl Raw {
    pub async fn exec(&self, sql: &str) {
        match self {
            Raw::Sqlite(p) => sqlx::query(AssertSqlSafe(sql.to_string()))
                .execute(p)
                .await
                .map(|_| ()),
            Raw::Pg(p) => sqlx::query(AssertSqlSafe(sql.to_string()))
                .execute(p)
                .await
                .map(|_| ()),
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }

    pub async fn scalar_string(&self, sql: &str) -> Option<String> {
        match self {
            Raw::Sqlite(p) => {
                sqlx::query_scalar(AssertSqlSafe(sql.to_string()))
                    .fetch_optional(p)
                    .await
            }
            Raw::Pg(p) => {
                sqlx::query_scalar(AssertSqlSafe(sql.to_string()))
                    .fetch_optional(p)
                    .await
            }
        }
        .unwrap()
    }
}

/// One backend under test.
pub struct Harness {
    pub db: Storage,
    pub raw: Raw,
    pub cfg: DbConfig,
    pub backend: &'static str,
}

impl Harness {
    /// Opens another independent handle (its own pool) on the same database.
    pub async fn reopen(&self) -> Storage {
        turnstone_storage::open(&self.cfg).await.unwrap()
    }
}

pub async fn with_sqlite<F, Fut>(f: F)
where
    F: FnOnce(Harness) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    let cfg = DbConfig {
        backend: BackendKind::Sqlite,
        path: Some(dir.path().join("t.db")),
        ..Default::default()
    };
    let db = turnstone_storage::open(&cfg).await.unwrap();
    let raw = Raw::Sqlite(
        sqlx::SqlitePool::connect_with(
            sqlx::sqlite::SqliteConnectOptions::new()
                .filename(dir.path().join("t.db"))
                .busy_timeout(std::time::Duration::from_secs(30)),
        )
        .await
        .unwrap(),
    );
    f(Harness {
        db,
        raw,
        cfg,
        backend: "sqlite",
    })
    .await;
}

fn pg_url_with_db(admin: &str, db: &str) -> String {
    let (base, query) = admin
        .split_once('?')
        .map_or((admin, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let host_end = base[scheme_end..]
        .find('/')
        .map(|i| i + scheme_end)
        .unwrap_or(base.len());
    let mut url = format!("{}/{db}", &base[..host_end]);
    if let Some(q) = query {
        url.push('?');
        url.push_str(q);
    }
    url
}

pub async fn with_postgres<F, Fut>(f: F)
where
    F: FnOnce(Harness) -> Fut,
    Fut: Future<Output = ()>,
{
    let Ok(admin) = std::env::var("TURNSTONE_TEST_PG_URL") else {
        eprintln!("TURNSTONE_TEST_PG_URL is not set: PostgreSQL half of this test not run");
        return;
    };
    let name = format!("turnstone_test_{}", turnstone_storage::util::random_hex(6));
    let admin_pool = sqlx::PgPool::connect(&admin)
        .await
        .expect("connect TURNSTONE_TEST_PG_URL");
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin_pool)
        .await
        .unwrap();
    let url = pg_url_with_db(&admin, &name);
    let cfg = DbConfig {
        backend: BackendKind::Postgresql,
        url: Some(url.clone()),
        pool_size: Some(10),
        ..Default::default()
    };
    let db = turnstone_storage::open(&cfg).await.unwrap();
    let raw_pool = sqlx::PgPool::connect(&url).await.unwrap();
    let result = AssertUnwindSafe(f(Harness {
        db: db.clone(),
        raw: Raw::Pg(raw_pool.clone()),
        cfg,
        backend: "postgresql",
    }))
    .catch_unwind()
    .await;
    db.close().await;
    raw_pool.close().await;
    sqlx::query(AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
    )))
    .execute(&admin_pool)
    .await
    .unwrap();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

/// Generates `sqlite::<name>` and `postgres::<name>` tests for each listed async fn.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    $crate::common::with_sqlite(super::$name).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    $crate::common::with_postgres(super::$name).await;
                }
            )*
        }
    };
}

/// Creates and publishes a workstream.
pub async fn published(db: &Storage, alias: Option<&str>) -> String {
    let r = db
        .create_workstream(&NewWorkstream {
            alias: alias.map(str::to_string),
            name: "test".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(db.publish_workstream(&r).await.unwrap());
    r.ws_id
}

pub fn user(text: &str) -> NewTurn {
    NewTurn::text(Role::User, text)
}
