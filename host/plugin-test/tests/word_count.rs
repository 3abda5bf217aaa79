//! The example third-party tool, tested the way its author would with the
//! kit: built from its crate, loaded in the real runtime, called with and
//! without the grant it needs.

use serde_json::json;
use std::path::{Path, PathBuf};
use turnstone_plugin_test::TestPlugin;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Built from `plugins/word_count`, with the kit's plain `cargo build`, into
/// a target directory of its own: `cargo xtask build` builds guests with
/// remapped source paths, and other flags in its `target/wasm` would make
/// each build undo the other's.
fn word_count() -> turnstone_plugin_test::Builder {
    TestPlugin::build_in(
        root().join("plugins/word_count"),
        root().join("target/wasm-kit"),
    )
    .expect("building word_count")
}

#[tokio::test]
async fn counts_text_and_previews_without_approval() {
    let p = word_count().load().await.unwrap();
    assert_eq!(p.tools().len(), 1);
    assert_eq!(p.tools()[0].name, "word_count");
    assert!(p.tools()[0].auto_approve);

    let preview = p
        .prepare("word_count", json!({"text": "a b c"}))
        .await
        .unwrap()
        .unwrap();
    assert!(!preview.needs_approval);
    assert_eq!(preview.header, "word_count: 5 chars of text");

    let out = p
        .call(
            "word_count",
            json!({"text": "the cat and the hat", "top": 1}),
        )
        .await
        .unwrap();
    assert_eq!(out.ok(), "lines: 1\nwords: 5\nchars: 19\n2\tthe");
    // A bare string is the primary key, as the host maps it.
    let bare = p.call("word_count", json!("one two")).await.unwrap();
    assert!(bare.ok().contains("words: 2"), "{bare:?}");
}

#[tokio::test]
async fn bad_arguments_are_refused_before_running() {
    let p = word_count().load().await.unwrap();
    let both = p
        .call("word_count", json!({"text": "x", "path": "y"}))
        .await
        .unwrap();
    assert_eq!(both.err(), "Error: give exactly one of `text` or `path`");
}

#[tokio::test]
async fn a_file_needs_the_workspace_grant() {
    // Third-party: nothing granted, so the workspace is not there to read.
    let bare = word_count()
        .file("notes.txt", "one two three\nfour")
        .load()
        .await
        .unwrap();
    let denied = bare
        .call("word_count", json!({"path": "notes.txt"}))
        .await
        .unwrap();
    assert!(denied.is_error, "{denied:?}");

    let granted = word_count()
        .grant(r#"filesystem = [{ path = "workspace", access = "read-only" }]"#)
        .unwrap()
        .file("notes.txt", "one two three\nfour")
        .load()
        .await
        .unwrap();
    let out = granted
        .call("word_count", json!({"path": "notes.txt"}))
        .await
        .unwrap();
    assert_eq!(out.ok(), "lines: 2\nwords: 4\nchars: 18");
}

#[test]
fn a_bad_grant_is_reported() {
    let Err(e) = word_count().grant("filesystem = 3") else {
        panic!("accepted")
    };
    assert!(e.to_string().starts_with("grant:"), "{e}");
}
