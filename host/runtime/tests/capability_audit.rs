//! The capability audit of a call: a test component reads one workspace
//! file, fetches one loopback URL and is denied another — and the host's
//! record of the call holds exactly those three entries. Writes, removals
//! and refusals inside the sandbox are recorded too.

mod common;

use common::*;
use turnstone_runtime::PluginSettings;

/// A loopback HTTP server answering every request with 200 `ok`.
async fn listener() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    port
}

#[tokio::test]
async fn a_call_is_audited_with_exactly_what_it_touched() {
    let (_t, ws) = workspace();
    std::fs::write(ws.join("a.txt"), "alpha").unwrap();
    let port = listener().await;
    let rt = runtime();
    let p = rt
        .load(
            source("test-components", "auditee", false),
            PluginSettings {
                grant: grant(&format!(
                    "filesystem = [{{ path = \"workspace\", access = \"ro\" }}]\nhttp = [\"127.0.0.1:{port}\"]"
                )),
                workspace: Some(ws.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let denied_port = port.wrapping_add(1).max(1024);
    let args = serde_json::json!({
        "path": "a.txt",
        "urls": [format!("http://127.0.0.1:{port}/ok"), format!("http://127.0.0.1:{denied_port}/no")],
    })
    .to_string();
    let (r, touched) = p
        .execute_audited("touch", &args, &ctx(&ws), sink(), None)
        .await;
    let r = r.unwrap();
    assert!(r.output.contains("read 5 bytes"), "{}", r.output);
    assert!(r.output.contains(": 200"), "{}", r.output);
    assert_eq!(touched.files.len(), 1, "{touched:?}");
    assert_eq!(
        touched.files[0].path,
        ws.join("a.txt").display().to_string()
    );
    assert_eq!(
        (touched.files[0].access, &touched.files[0].denied),
        ("read", &None)
    );
    assert_eq!(touched.hosts.len(), 2, "{touched:?}");
    assert_eq!(touched.hosts[0].host, format!("127.0.0.1:{port}"));
    assert_eq!(
        (touched.hosts[0].method.as_str(), &touched.hosts[0].denied),
        ("GET", &None)
    );
    assert_eq!(touched.hosts[1].host, format!("127.0.0.1:{denied_port}"));
    let why = touched.hosts[1].denied.as_deref().expect("a denial");
    assert!(
        why.contains("http denied") && why.contains("grant it with"),
        "{why}"
    );
    assert!(
        touched.processes.is_empty() && touched.secrets.is_empty() && touched.denials.is_empty()
    );
    assert_eq!(touched.dropped, 0);
}

#[tokio::test]
async fn writes_removals_and_read_only_refusals_are_recorded() {
    let (_t, ws) = workspace();
    std::fs::write(ws.join("old.txt"), "x").unwrap();
    let rt = runtime();
    // A built-in: its default grant is its own request (workspace rw).
    let rw = rt
        .load(
            source("components", "files", true),
            PluginSettings {
                workspace: Some(ws.clone()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let args = serde_json::json!({"path": "new.txt", "content": "hello"}).to_string();
    let (r, touched) = rw
        .execute_audited("write_file", &args, &ctx(&ws), sink(), None)
        .await;
    let r = r.unwrap();
    assert!(!r.is_error, "{}", r.output);
    let new = ws.join("new.txt").display().to_string();
    assert!(
        touched
            .files
            .iter()
            .any(|f| f.path == new && f.access == "write" && f.denied.is_none()),
        "{touched:?}"
    );
    // The same tool granted the workspace read-only: the write is refused by
    // the sandbox, and the refusal is in the audit.
    let ro = load(
        &rt,
        "components",
        "files",
        PluginSettings {
            workspace: Some(ws.clone()),
            grant: grant("filesystem = [{ path = \"workspace\", access = \"ro\" }]"),
            ..Default::default()
        },
    )
    .await;
    let args = serde_json::json!({"path": "old.txt", "content": "y"}).to_string();
    let (r, touched) = ro
        .execute_audited("write_file", &args, &ctx(&ws), sink(), None)
        .await;
    let r = r.unwrap();
    assert!(r.is_error, "{}", r.output);
    // write_file makes the parent directory first: that is what the
    // read-only grant refuses.
    let f = touched
        .files
        .iter()
        .find(|f| {
            f.path.starts_with(&ws.display().to_string()) && matches!(f.access, "write" | "mkdir")
        })
        .unwrap_or_else(|| panic!("{touched:?}"));
    let why = f.denied.as_deref().unwrap_or_else(|| panic!("{touched:?}"));
    assert!(why.contains("filesystem grant does not allow it"), "{why}");
    assert_eq!(std::fs::read_to_string(ws.join("old.txt")).unwrap(), "x");
}
