//! `turnstone admin` against a real SQLite database, checked through the
//! storage API the server will use.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use turnstone_storage::prelude::*;

fn admin(db: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_turnstone"))
        .arg("--db")
        .arg(db)
        .arg("--config")
        .arg(db.with_file_name("none.toml"))
        .arg("admin")
        .args(args)
        .env_remove("TURNSTONE_DB_URL")
        .env_remove("TURNSTONE_DB_BACKEND")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

async fn open(path: &Path) -> Storage {
    turnstone_storage::open(&DbConfig {
        path: Some(path.to_path_buf()),
        ..Default::default()
    })
    .await
    .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn users_and_tokens_are_managed_offline_with_hashed_secrets() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("none.toml"), "").unwrap();
    let db_path = dir.path().join("server.db");
    let create = |name: &str, pw: &str, role: &str| {
        admin(
            &db_path,
            &["create-user", name, "--role", role, "--password-stdin"],
            &format!("{pw}\n"),
        )
    };
    let ok = create("alice", "correct horse battery", "admin");
    assert!(ok.status.success(), "{:?}", text(&ok));
    assert!(text(&ok).0.contains("created user alice"));

    // Refusals, each with the reason and nothing written.
    for (out, needle) in [
        (
            create("alice", "another password", "viewer"),
            "already exists",
        ),
        (
            create("bad name!", "long enough pw", "viewer"),
            "is invalid",
        ),
        (create("bob", "short", "viewer"), "at least 8 characters"),
        (create("bob", "long enough pw", "root"), "unknown role"),
        (
            admin(&db_path, &["create-token", "--user", "nobody"], ""),
            "no user named \"nobody\"",
        ),
        (
            admin(
                &db_path,
                &["create-token", "--user", "alice", "--scopes", "read,sudo"],
                "",
            ),
            "unknown scope \"sudo\"",
        ),
        (
            admin(&db_path, &["revoke-token", "tok_nope"], ""),
            "no token",
        ),
    ] {
        let (_, err) = text(&out);
        assert!(
            !out.status.success() && err.contains(needle),
            "{needle}: {err}"
        );
    }

    let tok = admin(
        &db_path,
        &[
            "create-token",
            "--user",
            "alice",
            "--name",
            "ci",
            "--scopes",
            "read,approve",
        ],
        "",
    );
    assert!(tok.status.success(), "{:?}", text(&tok));
    let raw = text(&tok).0.trim().to_string();
    assert!(raw.starts_with("ts_") && raw.len() == 67, "{raw}");

    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let db = open(&db_path).await;
        assert_eq!(db.count_users().await.unwrap(), 1);
        let alice = db.get_user_by_name("alice").await.unwrap().unwrap();
        assert_eq!(alice.role, "admin");
        assert!(alice.password_hash.starts_with("$argon2id$"));
        assert!(!alice.password_hash.contains("correct horse"));
        use argon2::PasswordVerifier;
        let parsed = argon2::PasswordHash::new(&alice.password_hash).unwrap();
        assert!(
            argon2::Argon2::default()
                .verify_password(b"correct horse battery", &parsed)
                .is_ok()
        );
        assert!(
            argon2::Argon2::default()
                .verify_password(b"wrong", &parsed)
                .is_err()
        );
        let (token, user) = db.verify_api_token(&raw).await.unwrap().unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(token.scopes, ["read", "approve"]);
    });

    // Listing shows the prefix, never the token; revoking makes it useless.
    let list = admin(&db_path, &["list-tokens", "--json"], "");
    let (listed, _) = text(&list);
    assert!(!listed.contains(&raw));
    let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let id = v[0]["token_id"].as_str().unwrap().to_string();
    assert!(raw.starts_with(v[0]["token_prefix"].as_str().unwrap()));
    let users = admin(&db_path, &["list-users"], "");
    assert!(text(&users).0.contains("alice"));
    assert!(!text(&users).0.contains("argon2"));
    let rev = admin(&db_path, &["revoke-token", &id], "");
    assert!(rev.status.success(), "{:?}", text(&rev));
    rt.block_on(async {
        let db = open(&db_path).await;
        assert!(db.verify_api_token(&raw).await.unwrap().is_none());
    });
}
