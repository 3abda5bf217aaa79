//! A plugin's HTTP requests reuse kept-alive connections, but only to an
//! address the request's own egress check produced; a connection the server
//! closed is replaced without failing the request.

mod common;

use common::*;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use turnstone_runtime::netguard::{NetworkPolicy, Resolve, Resolved};
use turnstone_runtime::{Limits, LoadedPlugin, PluginSettings, PluginSource, Runtime};

/// A loopback HTTP/1.1 server answering every request on a connection with
/// `ok`, counting connections and requests. With `close_after_each`, it
/// closes the connection after each answer without saying so (as a server
/// whose keep-alive timeout expired does).
struct KeepAlive {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

async fn keep_alive_server(close_after_each: bool) -> KeepAlive {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (connections, requests) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (c, r) = (connections.clone(), requests.clone());
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(sock, r.clone(), close_after_each));
        }
    });
    KeepAlive {
        port,
        connections,
        requests,
    }
}

async fn serve(mut sock: TcpStream, requests: Arc<AtomicUsize>, close_after_each: bool) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 1024];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match sock.read(&mut tmp).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&tmp[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        buf.drain(..end);
        requests.fetch_add(1, Ordering::SeqCst);
        let answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok";
        if sock.write_all(answer).await.is_err() || close_after_each {
            return;
        }
    }
}

/// `flip.test` resolves to whatever the test set last.
#[derive(Clone, Default)]
struct Flip(Arc<Mutex<Vec<Resolved>>>);

impl Flip {
    fn set(&self, screened: &str, port: u16) {
        *self.0.lock().unwrap() = vec![Resolved {
            screened: screened.parse::<IpAddr>().unwrap(),
            connect: SocketAddr::from(([127, 0, 0, 1], port)),
        }];
    }
}

impl Resolve for Flip {
    fn resolve(
        &self,
        _host: &str,
        _port: u16,
    ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<Resolved>>> {
        let out = self.0.lock().unwrap().clone();
        Box::pin(async move { Ok(out) })
    }
}

/// The hostile test component, its manifest also requesting `<public>`
/// (copied, so the shared fixture stays as it is).
async fn hostile(rt: &Runtime, grant_toml: &str, network: NetworkPolicy) -> LoadedPlugin {
    let copy = tempfile::tempdir().unwrap();
    let dir = copy_plugin("test-components", "hostile", copy.path());
    let manifest = std::fs::read_to_string(dir.join("plugin.toml")).unwrap();
    let widened = manifest.replace(
        r#"http = ["127.0.0.1"]"#,
        r#"http = ["127.0.0.1", "<public>"]"#,
    );
    assert_ne!(manifest, widened, "the fixture's http request changed");
    std::fs::write(dir.join("plugin.toml"), widened).unwrap();
    rt.load(
        PluginSource {
            dir,
            builtin: false,
        },
        PluginSettings {
            grant: grant(grant_toml),
            limits: Limits {
                call_timeout: Duration::from_secs(20),
                ..Limits::default()
            },
            network,
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

async fn fetch(p: &LoadedPlugin, ws: &std::path::Path, url: &str) -> (bool, String) {
    let r = p
        .execute(
            "fetch",
            &serde_json::json!({ "url": url }).to_string(),
            &ctx(ws),
            sink(),
            None,
        )
        .await
        .unwrap();
    (r.is_error, r.output)
}

#[tokio::test]
async fn sequential_requests_share_one_kept_alive_connection() {
    let srv = keep_alive_server(false).await;
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(
        &rt,
        &format!("http = [\"127.0.0.1:{}\"]", srv.port),
        NetworkPolicy::default(),
    )
    .await;
    let url = format!("http://127.0.0.1:{}/v1/chat", srv.port);
    for _ in 0..4 {
        let (err, out) = fetch(&p, &ws, &url).await;
        assert!(!err, "{out}");
        assert_eq!(out, "status=200 chunks=1 body=ok");
    }
    assert_eq!(srv.requests.load(Ordering::SeqCst), 4);
    assert_eq!(
        srv.connections.load(Ordering::SeqCst),
        1,
        "four calls, one connection"
    );
    let stats = p.ctx.http_pool.stats();
    assert_eq!((stats.opened, stats.reused), (1, 3));
}

#[tokio::test]
async fn a_pooled_connection_is_used_only_for_the_address_the_check_just_screened() {
    let (a, b) = (
        keep_alive_server(false).await,
        keep_alive_server(false).await,
    );
    let flip = Flip::default();
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(
        &rt,
        r#"http = ["<public>"]"#,
        NetworkPolicy {
            resolver: Arc::new(flip.clone()),
            ..NetworkPolicy::default()
        },
    )
    .await;
    let url = "http://flip.test/";
    flip.set("93.184.216.34", a.port);
    let (err, out) = fetch(&p, &ws, url).await;
    assert!(!err, "{out}");
    // The name now resolves elsewhere: the idle connection to the first
    // address must not carry this request.
    flip.set("93.184.216.35", b.port);
    assert!(!fetch(&p, &ws, url).await.0);
    assert_eq!(
        (
            a.connections.load(Ordering::SeqCst),
            b.connections.load(Ordering::SeqCst)
        ),
        (1, 1)
    );
    // Rebound to a private address: refused, although two connections to
    // this host sit in the pool.
    flip.set("10.1.2.3", a.port);
    let (err, out) = fetch(&p, &ws, url).await;
    assert!(err, "a private address is refused: {out}");
    assert_eq!(
        a.requests.load(Ordering::SeqCst),
        1,
        "nothing reached the server"
    );
    // Back to the first address: its idle connection is reused.
    flip.set("93.184.216.34", a.port);
    assert!(!fetch(&p, &ws, url).await.0);
    assert_eq!(a.connections.load(Ordering::SeqCst), 1);
    assert_eq!(a.requests.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_connection_the_server_closed_is_replaced_without_an_error() {
    let srv = keep_alive_server(true).await;
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(
        &rt,
        &format!("http = [\"127.0.0.1:{}\"]", srv.port),
        NetworkPolicy::default(),
    )
    .await;
    let url = format!("http://127.0.0.1:{}/", srv.port);
    for _ in 0..3 {
        let (err, out) = fetch(&p, &ws, &url).await;
        assert!(!err, "{out}");
        // Give the client time to see the close, as after any idle gap.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(srv.requests.load(Ordering::SeqCst), 3);
    assert_eq!(srv.connections.load(Ordering::SeqCst), 3);
}
