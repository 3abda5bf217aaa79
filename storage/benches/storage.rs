//! Storage benchmark (a bench binary, not a timed test):
//! inserting 100k turns with one writer and with 8 concurrent writers, FTS query
//! p50/p99 over those 100k rows, and resuming a 10k-turn workstream — on SQLite,
//! and on PostgreSQL when `TURNSTONE_TEST_PG_URL` is set.
//!
//! Run: `cargo bench -p turnstone-storage` (add `TURNSTONE_TEST_PG_URL=postgres://…`).

mod common;

use common::{Words, drop_scratch, pct, scratch};
use std::time::Instant;
use turnstone_storage::prelude::*;

const TURNS: usize = 100_000;
const WRITERS: usize = 8;
const RESUME_TURNS: usize = 10_000;

async fn ws(db: &Storage) -> String {
    let r = db
        .create_workstream(&NewWorkstream::default())
        .await
        .unwrap();
    db.publish_workstream(&r).await.unwrap();
    r.ws_id
}

async fn run(
    label: &str,
    db: Storage,
    reopen: impl Fn() -> futures::future::BoxFuture<'static, Storage>,
) {
    let mut words = Words(0x9E37_79B9_7F4A_7C15);
    let contents: Vec<String> = (0..TURNS).map(|_| words.sentence(24)).collect();

    // 1. Single writer, one autocommitted save per turn (what the engine does).
    let single = ws(&db).await;
    let t = Instant::now();
    for c in &contents {
        db.save_turn(&single, &NewTurn::text(Role::User, c.clone()))
            .await
            .unwrap();
    }
    let single_time = t.elapsed();
    println!(
        "{label}: insert {TURNS} turns, 1 writer: {:.2} s ({:.0} turns/s, {:.1} µs/turn)",
        single_time.as_secs_f64(),
        TURNS as f64 / single_time.as_secs_f64(),
        single_time.as_secs_f64() * 1e6 / TURNS as f64
    );

    // 2. Eight concurrent writers, each with its own pool and workstream.
    let t = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let db = reopen().await;
        let chunk: Vec<String> = contents[w * TURNS / WRITERS..(w + 1) * TURNS / WRITERS].to_vec();
        tasks.push(tokio::spawn(async move {
            let ws = ws(&db).await;
            let mut lat = Vec::with_capacity(chunk.len());
            for c in chunk {
                let t = Instant::now();
                db.save_turn(&ws, &NewTurn::text(Role::Assistant, c))
                    .await
                    .unwrap();
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut lat = Vec::with_capacity(TURNS);
    for task in tasks {
        lat.extend(task.await.unwrap());
    }
    let conc_time = t.elapsed();
    lat.sort();
    println!(
        "{label}: insert {TURNS} turns, {WRITERS} concurrent writers: {:.2} s ({:.0} turns/s); \
         one save p50 {:.3} ms, p99 {:.3} ms, max {:.1} ms",
        conc_time.as_secs_f64(),
        TURNS as f64 / conc_time.as_secs_f64(),
        pct(&lat, 0.5).as_secs_f64() * 1e3,
        pct(&lat, 0.99).as_secs_f64() * 1e3,
        lat.last().map_or(0.0, |d| d.as_secs_f64() * 1e3)
    );

    // 3. FTS over the first 100k rows (the single writer's workstream).
    let mut q = Words(42);
    let mut lat = Vec::new();
    let mut hits = 0;
    for i in 0..300 {
        let query = if i % 2 == 0 {
            q.word()
        } else {
            format!("{} {}", q.word(), q.word())
        };
        let filter = SearchFilter {
            ws_id: Some(single.clone()),
            limit: Some(20),
            ..Default::default()
        };
        let t = Instant::now();
        hits += db.search_history(&query, &filter).await.unwrap().len();
        lat.push(t.elapsed());
    }
    lat.sort();
    println!(
        "{label}: FTS on {TURNS} rows (300 queries, limit 20, {hits} hits): p50 {:.2} ms, p99 {:.2} ms",
        pct(&lat, 0.5).as_secs_f64() * 1e3,
        pct(&lat, 0.99).as_secs_f64() * 1e3
    );

    // 4. Resume a 10k-turn workstream.
    let resume_ws = ws(&db).await;
    let batch: Vec<NewTurn> = contents[..RESUME_TURNS]
        .iter()
        .map(|c| NewTurn::text(Role::User, c.clone()))
        .collect();
    db.save_turns(&resume_ws, &batch).await.unwrap();
    let mut lat = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let turns = db.load_turns(&resume_ws, LoadMode::Resume).await.unwrap();
        lat.push(t.elapsed());
        assert_eq!(turns.len(), RESUME_TURNS);
    }
    lat.sort();
    println!(
        "{label}: resume {RESUME_TURNS}-turn workstream (20 runs): p50 {:.1} ms, max {:.1} ms",
        pct(&lat, 0.5).as_secs_f64() * 1e3,
        lat.last().unwrap().as_secs_f64() * 1e3
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
    let db = turnstone_storage::open(&cfg).await.unwrap();
    let c2 = cfg.clone();
    run("sqlite", db, move || {
        let c = c2.clone();
        Box::pin(async move { turnstone_storage::open(&c).await.unwrap() })
    })
    .await;

    let Ok(admin) = std::env::var("TURNSTONE_TEST_PG_URL") else {
        println!("postgresql: skipped (set TURNSTONE_TEST_PG_URL)");
        return;
    };
    let (admin_pool, name, cfg) = scratch(&admin).await;
    let db = turnstone_storage::open(&cfg).await.unwrap();
    let c2 = cfg.clone();
    run("postgresql", db.clone(), move || {
        let c = c2.clone();
        Box::pin(async move { turnstone_storage::open(&c).await.unwrap() })
    })
    .await;
    db.close().await;
    drop(db);
    drop_scratch(&admin_pool, &name).await;
}
