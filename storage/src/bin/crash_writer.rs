//! Test helper for the crash-safety test: saves turns in a loop and prints each
//! acknowledged turn id on its own line, until it is killed.
//!
//! Usage: `storage-crash-writer sqlite <path> <ws_id>` or
//! `storage-crash-writer postgresql <url> <ws_id>`.

use std::io::Write;
use turnstone_storage::prelude::*;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [backend, target, ws_id] = args.as_slice() else {
        return Err("usage: storage-crash-writer <sqlite|postgresql> <path|url> <ws_id>".into());
    };
    let cfg = DbConfig {
        backend: if backend == "sqlite" {
            BackendKind::Sqlite
        } else {
            BackendKind::Postgresql
        },
        path: Some(target.into()),
        url: Some(target.clone()),
        pool_size: Some(2),
    };
    let db = turnstone_storage::open(&cfg).await?;
    let mut out = std::io::stdout().lock();
    for i in 0u64.. {
        let id = db
            .save_turn(ws_id, &NewTurn::text(Role::User, format!("turn {i}")))
            .await?;
        writeln!(out, "{id} {i}")?;
        out.flush()?;
    }
    Ok(())
}
