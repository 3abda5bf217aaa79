//! Concurrency, crash safety and schema-version safety on both backends.

mod common;

use common::*;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;
use turnstone_storage::prelude::*;

both_backends!(
    many_concurrent_writers_all_succeed,
    concurrent_forks_of_one_source_stay_consistent,
    killed_writer_loses_no_acknowledged_turn,
    a_database_from_a_newer_binary_is_refused,
);

async fn many_concurrent_writers_all_succeed(h: Harness) {
    let ws = published(&h.db, None).await;
    let mut tasks = Vec::new();
    for w in 0..16 {
        // Each writer has its own pool, as separate processes would.
        let db = h.reopen().await;
        let ws = ws.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..40 {
                db.save_turn(&ws, &user(&format!("w{w} t{i}"))).await?;
                if i % 10 == 0 {
                    db.save_turns(&ws, &[user("batch a"), user("batch b")])
                        .await?;
                    db.set_config(&ws, &format!("writer{w}"), Some(&i.to_string()))
                        .await?;
                    let r = db.create_workstream(&NewWorkstream::default()).await?;
                    db.publish_workstream(&r).await?;
                }
            }
            Ok::<_, StorageError>(())
        }));
    }
    for t in tasks {
        t.await
            .unwrap()
            .unwrap_or_else(|e| panic!("writer failed: {e}"));
    }
    assert_eq!(h.db.count_turns(&ws).await.unwrap(), 16 * 40 + 16 * 4 * 2);
    assert_eq!(h.db.list_config(&ws).await.unwrap().len(), 16);
}

async fn concurrent_forks_of_one_source_stay_consistent(h: Harness) {
    let src = published(&h.db, None).await;
    h.db.save_turns(
        &src,
        &(0..50).map(|i| user(&format!("s{i}"))).collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let appender = {
        let db = h.reopen().await;
        let src = src.clone();
        tokio::spawn(async move {
            for i in 50..150 {
                db.save_turn(&src, &user(&format!("s{i}"))).await.unwrap();
            }
        })
    };
    let mut forks = Vec::new();
    for _ in 0..8 {
        let db = h.reopen().await;
        let src = src.clone();
        forks.push(tokio::spawn(async move {
            let dest = db
                .create_workstream(&NewWorkstream::default())
                .await
                .unwrap();
            let n = db.fork_workstream(&src, &dest).await.unwrap();
            db.publish_workstream(&dest).await.unwrap();
            (dest.ws_id, n)
        }));
    }
    appender.await.unwrap();
    let source: Vec<String> =
        h.db.load_turns(&src, LoadMode::Resume)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.turn.content.unwrap())
            .collect();
    assert_eq!(source.len(), 150);
    for f in forks {
        let (dest, n) = f.await.unwrap();
        let copy: Vec<String> =
            h.db.load_turns(&dest, LoadMode::Resume)
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.turn.content.unwrap())
                .collect();
        assert_eq!(copy.len(), n);
        assert!(n >= 50);
        assert_eq!(
            copy[..],
            source[..n],
            "a fork is an exact prefix snapshot of its source"
        );
    }
}

async fn killed_writer_loses_no_acknowledged_turn(h: Harness) {
    let ws = published(&h.db, None).await;
    let target = match h.cfg.backend {
        BackendKind::Sqlite => h.cfg.sqlite_path().display().to_string(),
        BackendKind::Postgresql => h.cfg.url.clone().unwrap(),
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_storage-crash-writer"))
        .args([h.backend, target.as_str(), ws.as_str()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let acked = tokio::task::spawn_blocking(move || {
        let mut acked = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            let (id, i) = line.split_once(' ').unwrap();
            acked.push((id.parse::<i64>().unwrap(), i.parse::<u64>().unwrap()));
            if acked.len() == 300 {
                break;
            }
        }
        acked
    });
    let mut acked = tokio::time::timeout(Duration::from_secs(60), acked)
        .await
        .unwrap()
        .unwrap();
    child.kill().unwrap(); // SIGKILL mid-stream
    child.wait().unwrap();
    assert_eq!(
        acked.len(),
        300,
        "the writer must have acknowledged 300 saves"
    );
    // A fresh handle sees every acknowledged turn, intact and in order.
    let db = h.reopen().await;
    let rows = db.load_turns(&ws, LoadMode::Everything).await.unwrap();
    assert!(rows.len() >= acked.len());
    acked.sort();
    for (id, i) in &acked {
        let row = rows
            .iter()
            .find(|r| r.id == *id)
            .unwrap_or_else(|| panic!("acked turn {id} lost"));
        assert_eq!(
            row.turn.content.as_deref(),
            Some(format!("turn {i}").as_str())
        );
    }
    if let Raw::Sqlite(_) = h.raw {
        let check = h.raw.scalar_string("PRAGMA integrity_check").await;
        assert_eq!(check.as_deref(), Some("ok"));
    }
    // And the database keeps working.
    db.save_turn(&ws, &user("after the crash")).await.unwrap();
}

async fn a_database_from_a_newer_binary_is_refused(h: Harness) {
    h.db.close().await;
    h.raw
        .exec(
            "INSERT INTO _sqlx_migrations (version, description, installed_on, success, checksum, execution_time) \
             VALUES (9999, 'from the future', CURRENT_TIMESTAMP, TRUE, X'00', 0)"
                .replace("X'00'", if matches!(h.raw, Raw::Pg(_)) { "'\\x00'::bytea" } else { "X'00'" })
                .as_str(),
        )
        .await;
    // The binary's version is its newest migration file.
    let newest = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite"))
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .split('_')
                .next()?
                .parse::<i64>()
                .ok()
        })
        .max()
        .unwrap();
    let err = turnstone_storage::open(&h.cfg)
        .await
        .err()
        .expect("must refuse");
    match &err {
        StorageError::DatabaseTooNew {
            db_version,
            binary_version,
            ..
        } => {
            assert_eq!(*db_version, 9999);
            assert_eq!(*binary_version, newest);
        }
        other => panic!("expected DatabaseTooNew, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!(
            "schema version 9999, newer than this binary supports ({newest})"
        )),
        "{msg}"
    );
}

/// Our commit hook replaces SQLite's automatic checkpoint, so it must
/// checkpoint itself: without that, every commit would grow the WAL file.
#[tokio::test]
async fn sqlite_wal_is_checkpointed_as_commits_pile_up() {
    with_sqlite(|h| async move {
        let ws = published(&h.db, None).await;
        let text = "x".repeat(2_000);
        // Each save commits at least one 4 KiB page: 3,000 of them would make
        // a WAL of 12 MB or more if nothing checkpointed it.
        for i in 0..3_000 {
            h.db.save_turn(&ws, &user(&format!("{i} {text}")))
                .await
                .unwrap();
        }
        let wal = h.cfg.path.as_ref().unwrap().with_extension("db-wal");
        let len = std::fs::metadata(&wal).unwrap().len();
        // Checkpoints restart the WAL at 1,000 frames (about 4 MB).
        assert!(len < 8 << 20, "WAL grew to {len} bytes");
        let turns = h.db.load_turns(&ws, LoadMode::Everything).await.unwrap();
        assert_eq!(turns.len(), 3_000);
    })
    .await;
}
