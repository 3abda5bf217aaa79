//! What the storage bench binaries share: deterministic text, percentiles,
//! and a scratch PostgreSQL database.
#![allow(dead_code)]

use sqlx::AssertSqlSafe;
use std::time::Duration;
use turnstone_storage::prelude::*;

/// Deterministic pseudo-random words (xorshift), so both backends get the same data.
pub struct Words(pub u64);

impl Words {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn word(&mut self) -> String {
        const SYL: [&str; 16] = [
            "ka", "lo", "mi", "ren", "tu", "sa", "vo", "qui", "ze", "pa", "dor", "fi", "gu", "hel",
            "ny", "bo",
        ];
        let n = 2 + (self.next() % 2) as usize;
        (0..n).map(|_| SYL[(self.next() % 16) as usize]).collect()
    }
    pub fn sentence(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| self.word())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

pub fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A fresh database on the server at `admin` (dropped by [`drop_scratch`]).
pub async fn scratch(admin: &str) -> (sqlx::PgPool, String, DbConfig) {
    let name = format!("turnstone_bench_{}", turnstone_storage::util::random_hex(4));
    let admin_pool = sqlx::PgPool::connect(admin).await.unwrap();
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&admin_pool)
        .await
        .unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(admin);
    let cfg = DbConfig {
        backend: BackendKind::Postgresql,
        url: Some(format!("{base}/{name}")),
        pool_size: Some(5),
        ..Default::default()
    };
    (admin_pool, name, cfg)
}

/// Drops what [`scratch`] made.
pub async fn drop_scratch(admin_pool: &sqlx::PgPool, name: &str) {
    sqlx::query(AssertSqlSafe(format!("DROP DATABASE {name} WITH (FORCE)")))
        .execute(admin_pool)
        .await
        .unwrap();
}
