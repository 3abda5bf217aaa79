//! A stdio MCP server runs in the same kernel sandbox as a component's
//! processes: it reads what its grant names, writes nothing it was not
//! granted read-write, and has no network without an `http` grant.

mod common;

use common::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use turnstone_mcp::McpHub;
use turnstone_mcp::content::tool_result_text;
use turnstone_runtime::capability::ProcessSandbox;
use turnstone_runtime::{Access, Capabilities, FsGrant};

async fn call(hub: &McpHub, tool: &str, a: serde_json::Value) -> String {
    let (server, _) = hub.tool(&format!("mcp__fx__{tool}")).expect("tool");
    let r = server
        .call_tool(tool, args(a), &CancellationToken::new(), &no_progress())
        .await
        .expect("call");
    tool_result_text(&r)
}

#[tokio::test]
async fn a_stdio_server_reads_and_writes_only_what_it_was_granted() {
    let ws = tempfile::tempdir().expect("ws");
    let ws_path = std::fs::canonicalize(ws.path()).expect("canonical");
    std::fs::write(ws_path.join("in.txt"), "inside").expect("in");
    let outside = tempfile::tempdir().expect("outside");
    std::fs::write(outside.path().join("secret.txt"), "OUTSIDE-SECRET").expect("secret");

    let hub = hub(
        vec![("fx", fixture(&[]))],
        fixture_grant(&ws_path, |_| {}),
        &ws_path,
    );
    connected(&hub, "fx").await;
    let inside = ws_path.join("in.txt").display().to_string();
    let secret = outside.path().join("secret.txt").display().to_string();
    assert_eq!(
        call(&hub, "read_path", json!({ "path": inside })).await,
        "inside"
    );
    assert_eq!(
        call(&hub, "read_path", json!({ "path": secret })).await,
        "error: Permission denied"
    );
    // The workspace is granted read-only to MCP servers by default.
    let out = ws_path.join("out.txt").display().to_string();
    assert_eq!(
        call(&hub, "write_path", json!({ "path": out, "text": "x" })).await,
        "error: Permission denied"
    );
    assert!(!ws_path.join("out.txt").exists());
    hub.shutdown();

    // Granted read-write, it writes; opted out, it reads anything.
    let hub = hub_with(&ws_path, |g| {
        g.filesystem.push(FsGrant {
            path: ws_path.display().to_string(),
            access: Access::ReadWrite,
        })
    });
    connected(&hub, "fx").await;
    let out = ws_path.join("out.txt").display().to_string();
    assert_eq!(
        call(&hub, "write_path", json!({ "path": out, "text": "x" })).await,
        "ok"
    );
    hub.shutdown();

    let hub = hub_with(&ws_path, |g| g.process_sandbox = Some(ProcessSandbox::Off));
    connected(&hub, "fx").await;
    assert_eq!(
        call(&hub, "read_path", json!({ "path": secret })).await,
        "OUTSIDE-SECRET"
    );
    hub.shutdown();
}

fn hub_with(ws: &std::path::Path, extra: impl FnOnce(&mut Capabilities)) -> std::sync::Arc<McpHub> {
    hub(vec![("fx", fixture(&[]))], fixture_grant(ws, extra), ws)
}

/// A loopback HTTP listener answering `hello`, counting connections.
async fn listener() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::Ordering;
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = l.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                    )
                    .await;
            });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn a_stdio_server_reaches_only_granted_hosts_through_the_proxy() {
    use std::sync::atomic::Ordering;
    let ws = tempfile::tempdir().expect("ws");
    let ws_path = std::fs::canonicalize(ws.path()).expect("canonical");
    let (addr, seen) = listener().await;
    let url = format!("http://127.0.0.1:{}/", addr.port());

    // No http grant: no network; the listener sees nothing.
    let hub = hub_with(&ws_path, |_| {});
    connected(&hub, "fx").await;
    let out = call(&hub, "fetch", json!({ "url": url })).await;
    assert!(out.starts_with("error:"), "{out}");
    assert_eq!(seen.load(Ordering::SeqCst), 0);
    hub.shutdown();

    // Granted by name: through the egress proxy; another port is refused.
    let hub = hub_with(&ws_path, |g| {
        g.http.push(format!("127.0.0.1:{}", addr.port()))
    });
    connected(&hub, "fx").await;
    assert_eq!(call(&hub, "fetch", json!({ "url": url })).await, "hello");
    let other = format!("http://127.0.0.1:{}/", addr.port() + 1);
    let out = call(&hub, "fetch", json!({ "url": other })).await;
    assert!(out.contains("403"), "{out}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    hub.shutdown();
}
