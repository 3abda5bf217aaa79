//! Running the server: the listener, the idle reaper and graceful shutdown.

use crate::http::{AppState, router};
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

/// Serves `state` on `listener` until `signal` resolves, then shuts down
/// gracefully: stops accepting, ends SSE streams, lets running turns finish
/// for up to `grace` (then cancels them) and closes every workstream, so
/// history is saved.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    signal: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
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
    // Small SSE frames and JSON answers must not wait for Nagle + delayed ACK
    // (a flat ~40 ms per exchange on loopback).
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    let stop_http = stop.clone();
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        signal.await;
        tracing::info!("shutting down");
        // Ends the SSE streams, which would otherwise hold the server open.
        stop_http.cancel();
    });
    let result = server.await;
    stop.cancel();
    if let Some(n) = &node {
        n.mgr.shutdown(grace).await;
    }
    result
}
