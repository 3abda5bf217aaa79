//! Memory and recall benchmark (a bench binary, not a timed test): 100k
//! structured memories spread over 100 users (user, workstream and global
//! scopes), then what the `memory` tool and the memory index ask — search and
//! list of what one caller may see — and `recall` (the caller's own history,
//! FTS over 100k turns of 100 users), as p50/p99 over 300 queries; on SQLite,
//! and on PostgreSQL when `TURNSTONE_TEST_PG_URL` is set.
//!
//! Run: `cargo bench -p turnstone-storage --bench memories`.

mod common;

use common::{Words, drop_scratch, pct, scratch};
use std::time::{Duration, Instant};
use turnstone_storage::prelude::*;
use turnstone_storage::types::{MemoryView, NewMemory};

const MEMORIES: usize = 100_000;
const TURNS: usize = 100_000;
const USERS: usize = 100;
const QUERIES: usize = 300;

fn report(label: &str, what: &str, mut lat: Vec<Duration>, found: usize) {
    lat.sort();
    println!(
        "{label}: {what} ({} queries, {found} results): p50 {:.2} ms, p99 {:.2} ms",
        lat.len(),
        pct(&lat, 0.5).as_secs_f64() * 1e3,
        pct(&lat, 0.99).as_secs_f64() * 1e3
    );
}

async fn run(label: &str, db: Storage) {
    let mut words = Words(0x9E37_79B9_7F4A_7C15);
    // One workstream per user, owned by it.
    let mut workstreams = Vec::new();
    for u in 0..USERS {
        let r = db
            .create_workstream(&NewWorkstream {
                user_id: Some(format!("user{u}")),
                ..Default::default()
            })
            .await
            .unwrap();
        db.publish_workstream(&r).await.unwrap();
        workstreams.push(r.ws_id);
    }

    let t = Instant::now();
    for i in 0..MEMORIES {
        let u = i % USERS;
        let (scope, scope_id) = match i % 10 {
            0 => ("global", String::new()),
            1..=4 => ("workstream", workstreams[u].clone()),
            _ => ("user", format!("user{u}")),
        };
        db.save_memory(&NewMemory {
            name: format!("m{i}_{}", words.word()),
            description: words.sentence(8),
            memory_type: Some(["user", "general", "feedback", "reference"][i % 4].into()),
            scope: Some(scope.into()),
            scope_id,
            content: words.sentence(40),
        })
        .await
        .unwrap();
    }
    println!(
        "{label}: saved {MEMORIES} memories in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let view = |u: usize| MemoryView {
        user_id: Some(format!("user{u}")),
        ws_id: Some(workstreams[u].clone()),
        project_id: None,
    };
    let mut q = Words(42);
    let (mut lat, mut found) = (Vec::new(), 0);
    for i in 0..QUERIES {
        let query = if i % 2 == 0 {
            q.word()
        } else {
            format!("{} {}", q.word(), q.word())
        };
        let v = view(i % USERS);
        let t = Instant::now();
        found += db
            .search_visible_memories(&query, &v, None, 20)
            .await
            .unwrap()
            .len();
        lat.push(t.elapsed());
    }
    report(
        label,
        "memory search of one caller's view over 100k",
        lat,
        found,
    );

    let (mut lat, mut found) = (Vec::new(), 0);
    for i in 0..QUERIES {
        let v = view(i % USERS);
        let t = Instant::now();
        found += db
            .list_visible_memories(&v, None, None, 200)
            .await
            .unwrap()
            .len();
        lat.push(t.elapsed());
    }
    report(
        label,
        "memory index candidates (list 200) over 100k",
        lat,
        found,
    );

    // Recall: 1,000 turns per user's workstream.
    let t = Instant::now();
    for ws in &workstreams {
        let batch: Vec<NewTurn> = (0..TURNS / USERS)
            .map(|k| {
                let role = if k % 2 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                };
                NewTurn::text(role, words.sentence(24))
            })
            .collect();
        db.save_turns(ws, &batch).await.unwrap();
    }
    println!(
        "{label}: saved {TURNS} turns of {USERS} users in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let (mut lat, mut found) = (Vec::new(), 0);
    for i in 0..QUERIES {
        let query = if i % 2 == 0 {
            q.word()
        } else {
            format!("{} {}", q.word(), q.word())
        };
        let filter = SearchFilter {
            user_id: Some(format!("user{}", i % USERS)),
            limit: Some(20),
            ..Default::default()
        };
        let t = Instant::now();
        found += db.search_history(&query, &filter).await.unwrap().len();
        lat.push(t.elapsed());
    }
    report(
        label,
        "recall (one user's history, FTS over 100k turns)",
        lat,
        found,
    );
}

#[tokio::main]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = DbConfig {
        backend: BackendKind::Sqlite,
        path: Some(dir.path().join("bench.db")),
        ..Default::default()
    };
    run("sqlite", turnstone_storage::open(&cfg).await.unwrap()).await;

    let Ok(admin) = std::env::var("TURNSTONE_TEST_PG_URL") else {
        println!("postgresql: skipped (set TURNSTONE_TEST_PG_URL)");
        return;
    };
    let (admin_pool, name, cfg) = scratch(&admin).await;
    let db = turnstone_storage::open(&cfg).await.unwrap();
    run("postgresql", db.clone()).await;
    db.close().await;
    drop(db);
    drop_scratch(&admin_pool, &name).await;
}
