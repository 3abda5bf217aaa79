//! One query plan per statement, whatever its bound values.
//!
//! SQLite (3.51) lets some bound values shape a statement's plan: a `LIMIT $n`
//! is read as the integer bound to it, a `LIKE $n` pattern's prefix picks an
//! index range. A statement compiled that way is marked expired whenever a
//! value is bound to such a parameter, and its next step compiles it again
//! (`sqlite3Reprepare`): sqlx's statement cache then saves nothing. The
//! visible-memories query a workstream runs when it loads (four `LIMIT $6`
//! subqueries under a `UNION ALL`) was recompiled on every run: in the serve
//! bench's 100 concurrent fresh workstreams that was a fifth of the SQLite
//! worker threads' time.
//!
//! The query planner stability guarantee (`SQLITE_DBCONFIG_ENABLE_QPSG`)
//! turns that off: a plan depends on the SQL alone, and a cached statement is
//! compiled again only when the schema changes or sqlx's cache (100
//! statements per connection) evicts it. What is given up: a bound `LIMIT`
//! no longer informs the plan's cost of a sort, a bound `LIKE` prefix no
//! longer picks an index range, and a partial index is used only where its
//! condition follows from the SQL itself. No query here relied on those: the
//! `LIKE`s compare case-insensitively or start with `%`, and the two partial
//! indexes (`notify_targets`) test `ws_id IS [NOT] NULL`.

use libsqlite3_sys::{SQLITE_DBCONFIG_ENABLE_QPSG, SQLITE_OK, sqlite3, sqlite3_db_config};
use std::os::raw::c_int;

/// Turns on the query planner stability guarantee for `conn`.
pub(crate) async fn stable(conn: &mut sqlx::SqliteConnection) -> Result<(), sqlx::Error> {
    let mut handle = conn.lock_handle().await?;
    let db: *mut sqlite3 = handle.as_raw_handle().as_ptr();
    let mut now: c_int = 0;
    // SAFETY: `db` is this connection's open handle, locked for the call;
    // this verb takes an int (1: on) and a pointer to an int that receives
    // the setting afterwards, which outlives the call.
    let rc = unsafe {
        sqlite3_db_config(
            db,
            SQLITE_DBCONFIG_ENABLE_QPSG,
            1 as c_int,
            &mut now as *mut c_int,
        )
    };
    if rc == SQLITE_OK && now == 1 {
        Ok(())
    } else {
        Err(sqlx::Error::Protocol(format!(
            "SQLITE_DBCONFIG_ENABLE_QPSG failed with code {rc} (setting now {now})"
        )))
    }
}

#[cfg(test)]
mod tests {
    use libsqlite3_sys::{
        SQLITE_STMTSTATUS_REPREPARE, sqlite3, sqlite3_next_stmt, sqlite3_stmt_status,
    };
    use sqlx::{Connection, SqliteConnection};

    /// Re-preparations of every statement `conn` holds.
    async fn reprepares(conn: &mut SqliteConnection) -> i64 {
        let mut handle = conn.lock_handle().await.unwrap();
        let db: *mut sqlite3 = handle.as_raw_handle().as_ptr();
        let mut total = 0i64;
        // SAFETY: the handle is locked; sqlite3_next_stmt walks the
        // connection's own statement list, which nothing changes meanwhile.
        unsafe {
            let mut stmt = sqlite3_next_stmt(db, std::ptr::null_mut());
            while !stmt.is_null() {
                total += i64::from(sqlite3_stmt_status(stmt, SQLITE_STMTSTATUS_REPREPARE, 0));
                stmt = sqlite3_next_stmt(db, stmt);
            }
        }
        total
    }

    /// Runs a `LIMIT $1` query under a `UNION ALL` (the visible-memories
    /// shape) with three different limits; returns the re-preparations.
    async fn limits_run(conn: &mut SqliteConnection) -> i64 {
        let sql = "SELECT * FROM (SELECT * FROM (SELECT 1 AS x UNION ALL SELECT 2) LIMIT $1) \
                   UNION ALL SELECT * FROM (SELECT 3 AS x) ORDER BY x LIMIT $1";
        for limit in [1i64, 2, 3] {
            let rows: Vec<i64> = sqlx::query_scalar(sql)
                .bind(limit)
                .fetch_all(&mut *conn)
                .await
                .unwrap();
            assert_eq!(rows.len(), limit as usize, "limit {limit}");
        }
        reprepares(conn).await
    }

    /// Whether `conn` has the guarantee on (read back, not set).
    async fn qpsg_on(conn: &mut SqliteConnection) -> bool {
        use libsqlite3_sys::{SQLITE_DBCONFIG_ENABLE_QPSG, sqlite3_db_config};
        let mut handle = conn.lock_handle().await.unwrap();
        let db: *mut sqlite3 = handle.as_raw_handle().as_ptr();
        let mut now: std::os::raw::c_int = -1;
        // SAFETY: as in `stable`; -1 leaves the setting as it is.
        unsafe { sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_QPSG, -1, &mut now as *mut _) };
        now == 1
    }

    #[tokio::test]
    async fn every_connection_of_the_store_has_stable_plans() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::sqlite::SqliteStore::open(&dir.path().join("t.db"))
            .await
            .unwrap();
        // Several connections at once, so the pool opens more than one.
        let mut conns = Vec::new();
        for _ in 0..3 {
            conns.push(store.pool.acquire().await.unwrap());
        }
        for conn in &mut conns {
            assert!(qpsg_on(conn).await);
        }
        let mut plain = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        assert!(!qpsg_on(&mut plain).await);
    }

    #[tokio::test]
    async fn a_bound_limit_no_longer_recompiles_the_statement() {
        // Without the guarantee, each new limit recompiles: the counter sees it.
        let mut plain = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        assert!(limits_run(&mut plain).await >= 2);

        let mut stable = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        super::stable(&mut stable).await.unwrap();
        assert_eq!(limits_run(&mut stable).await, 0);
    }
}
