//! Scratch PostgreSQL databases for multi-node tests (`TURNSTONE_TEST_PG_URL`,
//! which CI sets; without it such tests say they skipped).

/// Drops its database (with `FORCE`, so open connections do not block it).
pub struct PgGuard {
    base: String,
    name: String,
}

impl Drop for PgGuard {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .arg(&self.base)
            .args([
                "-q",
                "-c",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

/// A fresh database named `turnstone_<prefix>_<pid>` and its URL, or `None`
/// when `TURNSTONE_TEST_PG_URL` is not set.
pub fn scratch_database(prefix: &str) -> Option<(String, PgGuard)> {
    let base = std::env::var("TURNSTONE_TEST_PG_URL").ok()?;
    let name = format!("turnstone_{prefix}_{}", std::process::id());
    let admin = |sql: &str| {
        let out = std::process::Command::new("psql")
            .arg(&base)
            .args(["-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "{sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    admin(&format!("DROP DATABASE IF EXISTS {name}"));
    admin(&format!("CREATE DATABASE {name}"));
    let url = match base.rsplit_once('/') {
        Some((head, _)) => format!("{head}/{name}"),
        None => panic!("TURNSTONE_TEST_PG_URL has no database part: {base}"),
    };
    Some((url, PgGuard { base, name }))
}
