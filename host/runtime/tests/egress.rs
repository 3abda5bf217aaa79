//! Outgoing HTTP: denied before any connection unless granted; granted hosts
//! stream chunk by chunk; secrets are injected by the host, never seen by the guest.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};
use turnstone_runtime::{Limits, LoadedPlugin, PluginSettings, Runtime};

/// A loopback HTTP/1.1 server that counts connections, records request heads,
/// and sends a chunked body of three parts, each only after `release` says so.
struct Server {
    port: u16,
    connections: Arc<AtomicUsize>,
    heads: mpsc::UnboundedReceiver<String>,
}

async fn server(mut release: mpsc::UnboundedReceiver<()>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let (tx, heads) = mpsc::unbounded_channel();
    let count = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = Vec::new();
            let mut tmp = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = sock.read(&mut tmp).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&tmp[..n]);
            }
            let _ = tx.send(String::from_utf8_lossy(&buf).into_owned());
            sock.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-type: text/plain\r\n\r\n")
                .await
                .unwrap();
            for part in ["alpha;", "beta;", "gamma;"] {
                sock.write_all(format!("{:x}\r\n{part}\r\n", part.len()).as_bytes())
                    .await
                    .unwrap();
                sock.flush().await.unwrap();
                // The next part is sent only once the guest has streamed this one out.
                let _ = tokio::time::timeout(Duration::from_secs(5), release.recv()).await;
            }
            sock.write_all(b"0\r\n\r\n").await.unwrap();
        }
    });
    Server {
        port,
        connections,
        heads,
    }
}

async fn hostile(rt: &Runtime, grant_toml: &str) -> LoadedPlugin {
    load(
        rt,
        "test-components",
        "hostile",
        PluginSettings {
            grant: grant(grant_toml),
            limits: Limits {
                call_timeout: Duration::from_secs(20),
                ..Limits::default()
            },
            secrets: Arc::new(StaticSecrets(BTreeMap::from([(
                "HOSTILE_TOKEN".to_string(),
                "s3cret-value".to_string(),
            )]))),
            ..Default::default()
        },
    )
    .await
}

#[tokio::test]
async fn ungranted_hosts_are_denied_before_any_connection() {
    let (_tx, rx) = mpsc::unbounded_channel();
    let srv = server(rx).await;
    let rt = runtime();
    let (_t, ws) = workspace();
    // Granted some other port only.
    let p = hostile(&rt, r#"http = ["127.0.0.1:1"]"#).await;
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let via_sdk = p
        .execute(
            "fetch",
            &serde_json::json!({ "url": url }).to_string(),
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(via_sdk.is_error);
    assert!(via_sdk.output.contains("http denied"), "{}", via_sdk.output);
    assert!(
        via_sdk.output.contains(&format!(
            "[plugins.grants.hostile] http = [\"127.0.0.1:{}\"]",
            srv.port
        )),
        "the denial names the grant that would allow it: {}",
        via_sdk.output
    );
    // Straight through wasi:http, without the SDK's pre-check: the send hook denies.
    let raw = p
        .execute(
            "raw_fetch",
            &serde_json::json!({ "authority": format!("127.0.0.1:{}", srv.port) }).to_string(),
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(raw.is_error);
    // One "Error: " prefix, added by the SDK; the host adds its reason.
    let (guest, host) = raw.output.split_once("\n[host] ").unwrap();
    assert_eq!(guest, "Error: ErrorCode::HttpRequestDenied");
    assert!(
        host.starts_with("http denied for plugin \"hostile\""),
        "{host}"
    );
    assert!(host.contains("[plugins.grants.hostile] http = ["), "{host}");
    // A different name for the same address is a different (ungranted) host.
    let by_name = p
        .execute(
            "raw_fetch",
            &serde_json::json!({ "authority": format!("localhost:{}", srv.port) }).to_string(),
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(
        by_name
            .output
            .starts_with("Error: ErrorCode::HttpRequestDenied\n[host] http denied"),
        "{}",
        by_name.output
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        srv.connections.load(Ordering::SeqCst),
        0,
        "no connection may be opened"
    );
    assert_eq!(
        p.ctx.counters.denials(),
        3,
        "every denial is counted: the SDK's pre-check and the send hook's two"
    );
}

#[tokio::test]
async fn granted_host_streams_chunk_by_chunk_with_an_injected_secret() {
    let (release_tx, release_rx) = mpsc::unbounded_channel();
    let mut srv = server(release_rx).await;
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(
        &rt,
        &format!(
            "http = [\"127.0.0.1:{}\"]\nsecrets = [\"HOSTILE_TOKEN\"]",
            srv.port
        ),
    )
    .await;
    // Forward each streamed chunk to the server as the go-ahead for the next one:
    // the call can only finish if chunks reach the host while the body is open.
    let (chunk_tx, mut chunk_rx) = mpsc::unbounded_channel::<String>();
    let (done_tx, done_rx) = oneshot::channel();
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(c) = chunk_rx.recv().await {
            seen.push(c);
            let _ = release_tx.send(());
        }
        let _ = done_tx.send(seen);
    });
    let chunks = Arc::new(Chunks(Default::default(), Some(chunk_tx)));
    let url = format!("http://127.0.0.1:{}/stream", srv.port);
    let r = p
        .execute(
            "fetch",
            &serde_json::json!({ "url": url, "secret": "HOSTILE_TOKEN" }).to_string(),
            &ctx(&ws),
            chunks.clone(),
            None,
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(r.output, "status=200 chunks=3 body=alpha;beta;gamma;");
    drop(chunks);
    let seen = done_rx.await.unwrap();
    assert_eq!(seen, ["alpha;", "beta;", "gamma;"]);
    let head = srv.heads.recv().await.unwrap().to_ascii_lowercase();
    assert!(head.starts_with("get /stream http/1.1"), "{head}");
    assert!(
        head.contains("authorization: bearer s3cret-value"),
        "host injects the secret: {head}"
    );
    assert!(
        !r.output.contains("s3cret"),
        "the guest never sees the secret"
    );
    assert_eq!(srv.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn ungranted_secret_is_a_typed_denial() {
    let (_tx, rx) = mpsc::unbounded_channel();
    let srv = server(rx).await;
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(&rt, &format!("http = [\"127.0.0.1:{}\"]", srv.port)).await;
    let url = format!("http://127.0.0.1:{}/", srv.port);
    let r = p
        .execute(
            "fetch",
            &serde_json::json!({ "url": url, "secret": "HOSTILE_TOKEN" }).to_string(),
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(r.is_error);
    assert!(r.output.contains("secret denied"), "{}", r.output);
    assert!(
        r.output.contains("secrets = [\"HOSTILE_TOKEN\"]"),
        "{}",
        r.output
    );
    assert_eq!(srv.connections.load(Ordering::SeqCst), 0);
}

/// Runs the hostile `fetch` with the secret in `header` (bearer when `None`).
async fn fetch_with_secret(
    p: &LoadedPlugin,
    ws: &std::path::Path,
    port: u16,
    header: Option<&str>,
) -> turnstone_runtime::ToolResult {
    let url = format!("http://127.0.0.1:{port}/");
    let mut args = serde_json::json!({ "url": url, "secret": "HOSTILE_TOKEN" });
    if let Some(h) = header {
        args["header"] = h.into();
    }
    p.execute("fetch", &args.to_string(), &ctx(ws), sink(), None)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_secret_goes_only_in_its_header_to_its_hosts() {
    let (tx_a, rx_a) = mpsc::unbounded_channel();
    let (tx_b, rx_b) = mpsc::unbounded_channel();
    let mut a = server(rx_a).await;
    let mut b = server(rx_b).await;
    for _ in 0..3 {
        let _ = tx_a.send(());
        let _ = tx_b.send(());
    }
    let rt = runtime();
    let (_t, ws) = workspace();
    // Both hosts granted for HTTP; the secret bound to the first only.
    let p = hostile(
        &rt,
        &format!(
            "http = [\"127.0.0.1:{pa}\", \"127.0.0.1:{pb}\"]\n\
             secrets = [{{ name = \"HOSTILE_TOKEN\", hosts = [\"127.0.0.1:{pa}\"], header = \"authorization\" }}]",
            pa = a.port,
            pb = b.port
        ),
    )
    .await;

    // The hostile case: the reference in a header of the plugin's choosing.
    let r = fetch_with_secret(&p, &ws, a.port, Some("X-Leak")).await;
    assert!(r.is_error, "{}", r.output);
    assert!(r.output.contains("secret denied"), "{}", r.output);
    assert!(r.output.contains("in header x-leak"), "{}", r.output);
    assert!(
        r.output.contains("may be sent only in authorization"),
        "the hint says where it may go: {}",
        r.output
    );
    assert_eq!(
        a.connections.load(Ordering::SeqCst),
        0,
        "denied before connecting"
    );

    // The second granted host never sees it, in any header.
    let r = fetch_with_secret(&p, &ws, b.port, None).await;
    assert!(r.is_error, "{}", r.output);
    assert!(r.output.contains("secret denied"), "{}", r.output);
    assert_eq!(b.connections.load(Ordering::SeqCst), 0);

    // The granted header to the granted host still works.
    let r = fetch_with_secret(&p, &ws, a.port, None).await;
    assert!(!r.is_error, "{}", r.output);
    let head = a.heads.recv().await.unwrap().to_ascii_lowercase();
    assert!(
        head.contains("authorization: bearer s3cret-value"),
        "{head}"
    );
    assert!(!head.contains("x-leak"), "{head}");

    // The second host still answers requests without the secret.
    let url = format!("http://127.0.0.1:{}/", b.port);
    let r = p
        .execute(
            "fetch",
            &serde_json::json!({ "url": url }).to_string(),
            &ctx(&ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    let head = b.heads.recv().await.unwrap().to_ascii_lowercase();
    assert!(!head.contains("s3cret"), "{head}");
}

#[tokio::test]
async fn a_bare_secret_grant_goes_only_in_authorization() {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut srv = server(rx).await;
    for _ in 0..3 {
        let _ = tx.send(());
    }
    let rt = runtime();
    let (_t, ws) = workspace();
    // The form configurations had before bindings existed.
    let p = hostile(
        &rt,
        &format!(
            "http = [\"127.0.0.1:{}\"]\nsecrets = [\"HOSTILE_TOKEN\"]",
            srv.port
        ),
    )
    .await;
    let r = fetch_with_secret(&p, &ws, srv.port, Some("x-leak")).await;
    assert!(
        r.is_error && r.output.contains("secret denied"),
        "{}",
        r.output
    );
    assert_eq!(srv.connections.load(Ordering::SeqCst), 0);
    let r = fetch_with_secret(&p, &ws, srv.port, Some("Authorization")).await;
    assert!(!r.is_error, "{}", r.output);
    let head = srv.heads.recv().await.unwrap().to_ascii_lowercase();
    assert!(head.contains("authorization: s3cret-value"), "{head}");
}
