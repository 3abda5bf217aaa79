//! Running the server: the accept loop with per-connection protection, the
//! idle reaper and graceful shutdown.
//!
//! The loop is ours rather than `axum::serve` because a server facing the
//! internet needs what that helper does not set: a deadline for the request
//! head (it also closes idle keep-alive connections), an inactivity deadline
//! for request bodies, and a cap on concurrent connections per client
//! address. Slow or stalled clients are closed; normal ones never notice.

use crate::http::{AppState, router};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Connection-level limits (`[server]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnectionLimits {
    /// A request head (request line and headers) must arrive within this;
    /// an idle keep-alive connection is closed after it too.
    pub header_timeout: Duration,
    /// A request body that sends nothing for this long is abandoned (400)
    /// and its connection closed.
    pub body_timeout: Duration,
    /// Concurrent connections one client address (an IPv6 client: its /64)
    /// may hold (0: no cap).
    pub max_per_ip: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(15),
            body_timeout: Duration::from_secs(30),
            max_per_ip: 256,
        }
    }
}

/// Open connections per client address.
#[derive(Default)]
struct PerIp {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's place in [`PerIp`]; freed on drop.
struct Slot {
    table: Arc<PerIp>,
    ip: IpAddr,
}

impl PerIp {
    fn claim(self: &Arc<Self>, ip: IpAddr) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(ip).or_insert(0);
        if self.max > 0 && *n >= self.max {
            return None;
        }
        *n += 1;
        Some(Slot {
            table: self.clone(),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.table.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Answers a connection over the per-address cap with 503 and closes it.
async fn refuse(mut tcp: tokio::net::TcpStream) {
    let body = r#"{"error":"too many connections from this address","retry_after":1}"#;
    let resp = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let write = async {
        tcp.write_all(resp.as_bytes()).await?;
        tcp.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// Serves `state` on `listener` until `signal` resolves, then shuts down
/// gracefully: stops accepting, ends SSE streams, lets running turns finish
/// for up to `grace` (then cancels them) and closes every workstream, so
/// history is saved.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    signal: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
    limits: ConnectionLimits,
) -> std::io::Result<()> {
    let node = state.node.clone();
    let stop = node
        .as_ref()
        .map(|n| n.shutdown.clone())
        .unwrap_or_default();
    if let Some(n) = &node {
        tokio::spawn(n.mgr.clone().reap_idle(stop.clone()));
        tokio::spawn(n.mgr.clone().publish_aggregate(stop.clone()));
    }
    let metrics = node.as_ref().map(|n| n.metrics.clone());
    let app = router(state);
    let per_ip = Arc::new(PerIp {
        max: limits.max_per_ip,
        ..PerIp::default()
    });
    let tasks = tokio_util::task::TaskTracker::new();
    tokio::pin!(signal);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: back off, keep serving.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut signal => break,
        };
        let Some(slot) = per_ip.claim(crate::ratelimit::client_key(remote.ip())) else {
            if let Some(m) = &metrics {
                m.connection_refused();
            }
            tasks.spawn(refuse(tcp));
            continue;
        };
        // Small SSE frames and JSON answers must not wait for Nagle + delayed
        // ACK (a flat ~40 ms per exchange on loopback).
        let _ = tcp.set_nodelay(true);
        tasks.spawn(connection(
            tcp,
            remote,
            app.clone(),
            limits,
            stop.clone(),
            slot,
        ));
    }
    tracing::info!("shutting down");
    // Ends the SSE streams, which would otherwise hold connections open.
    stop.cancel();
    tasks.close();
    if tokio::time::timeout(grace.max(Duration::from_secs(1)), tasks.wait())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the grace period; closing them");
    }
    if let Some(n) = &node {
        n.mgr.shutdown(grace).await;
    }
    Ok(())
}

/// Serves one HTTP/1.1 connection.
async fn connection(
    tcp: tokio::net::TcpStream,
    remote: SocketAddr,
    app: axum::Router,
    limits: ConnectionLimits,
    stop: tokio_util::sync::CancellationToken,
    _slot: Slot,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::ServiceExt;
    let body_timeout = limits.body_timeout;
    let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let mut req = req.map(|body| {
            axum::body::Body::new(tower_http::timeout::TimeoutBody::new(body_timeout, body))
        });
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(remote));
        app.clone().oneshot(req)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let conn = builder
        .serve_connection(TokioIo::new(tcp), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%remote, "connection ended: {e}");
            }
        }
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}
