//! The egress proxy a sandboxed process reaches at `127.0.0.1:3128` inside
//! its namespace — its only way out. `CONNECT host:port` (HTTPS and any
//! TCP) and absolute-form plain HTTP requests; each is checked against the
//! plugin's host rules and screened like component egress
//! ([`EgressPolicy`]) before any connection, and a refusal is a `403` whose
//! body says which grant would allow it.

use crate::SandboxError;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Decides where a sandboxed process may connect.
pub trait EgressPolicy: Send + Sync + 'static {
    /// The address to connect to for `host:port` (resolved, and screened
    /// when the grant is `<public>`), or why the connection is refused.
    /// `method` is `CONNECT` or the plain HTTP method, for the audit.
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        method: &'a str,
    ) -> Pin<Box<dyn Future<Output = Result<SocketAddr, String>> + Send + 'a>>;
}

type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// Concurrent connections one sandboxed process may hold open.
const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send a request's head.
const HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

fn text(status: StatusCode, body: String) -> Response<ProxyBody> {
    let mut res = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *res.status_mut() = status;
    res
}

/// Serves `listener` (in the child's namespace) until the returned task is
/// aborted; open tunnels close with it.
pub(crate) fn serve(
    listener: std::net::TcpListener,
    egress: Arc<dyn EgressPolicy>,
) -> Result<tokio::task::JoinHandle<()>, SandboxError> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    Ok(tokio::spawn(async move {
        // Dropped when this task is aborted: every tunnel watching it ends.
        let (_alive, stop) = watch::channel(());
        let mut conns = tokio::task::JoinSet::new();
        // A process cannot hold more of the host's sockets than this.
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let Ok(slot) = slots.clone().try_acquire_owned() else {
                            tracing::warn!("egress proxy: {MAX_CONNECTIONS} connections open; refusing more");
                            drop(stream);
                            continue;
                        };
                        let (egress, stop) = (egress.clone(), stop.clone());
                        conns.spawn(async move {
                            connection(stream, egress, stop).await;
                            drop(slot);
                        });
                    }
                    Err(e) => {
                        tracing::debug!("egress proxy accept failed: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
            }
        }
    }))
}

async fn connection(stream: TcpStream, egress: Arc<dyn EgressPolicy>, stop: watch::Receiver<()>) {
    let svc = hyper::service::service_fn(move |req| {
        let egress = egress.clone();
        let stop = stop.clone();
        async move { Ok::<_, Infallible>(handle(req, egress, stop).await) }
    });
    let _ = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(TokioIo::new(stream), svc)
        .with_upgrades()
        .await;
}

async fn handle(
    req: Request<Incoming>,
    egress: Arc<dyn EgressPolicy>,
    stop: watch::Receiver<()>,
) -> Response<ProxyBody> {
    let https = req.method() == Method::CONNECT;
    let Some(authority) = req.uri().authority().cloned() else {
        return text(
            StatusCode::BAD_REQUEST,
            "turnstone egress proxy: send an absolute URL or CONNECT host:port\n".into(),
        );
    };
    if !https && req.uri().scheme_str() != Some("http") {
        return text(
            StatusCode::BAD_REQUEST,
            "turnstone egress proxy: only http:// URLs are forwarded; use CONNECT for TLS\n".into(),
        );
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let method = req.method().as_str().to_string();
    let addr = match egress.resolve(&host, port, &method).await {
        Ok(a) => a,
        Err(reason) => {
            return text(
                StatusCode::FORBIDDEN,
                format!("turnstone egress proxy refused {host}:{port}: {reason}\n"),
            );
        }
    };
    let upstream =
        match tokio::time::timeout(std::time::Duration::from_secs(30), TcpStream::connect(addr))
            .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return text(
                    StatusCode::BAD_GATEWAY,
                    format!("turnstone egress proxy: cannot connect to {host}:{port}: {e}\n"),
                );
            }
            Err(_) => {
                return text(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!("turnstone egress proxy: connecting to {host}:{port} timed out\n"),
                );
            }
        };
    if https {
        tokio::spawn(tunnel(req, upstream, stop));
        return Response::new(
            Full::new(Bytes::new())
                .map_err(|never| match never {})
                .boxed(),
        );
    }
    forward(req, upstream, &authority).await
}

/// Splices the upgraded client connection with `upstream`.
async fn tunnel(req: Request<Incoming>, mut upstream: TcpStream, mut stop: watch::Receiver<()>) {
    let Ok(upgraded) = hyper::upgrade::on(req).await else {
        return;
    };
    let mut client = TokioIo::new(upgraded);
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        _ = stop.changed() => {}
    }
}

/// Forwards one plain HTTP request (origin-form upstream).
async fn forward(
    mut req: Request<Incoming>,
    upstream: TcpStream,
    authority: &http::uri::Authority,
) -> Response<ProxyBody> {
    let bad_gateway = |e: &dyn std::fmt::Display| {
        text(
            StatusCode::BAD_GATEWAY,
            format!("turnstone egress proxy: {authority}: {e}\n"),
        )
    };
    let (mut sender, conn) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(p) => p,
            Err(e) => return bad_gateway(&e),
        };
    tokio::spawn(conn);
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    match path.parse() {
        Ok(uri) => *req.uri_mut() = uri,
        Err(e) => return bad_gateway(&e),
    }
    let headers = req.headers_mut();
    headers.remove("proxy-connection");
    headers.remove(http::header::PROXY_AUTHORIZATION);
    // The checked host, whatever the client wrote: a shared front end must
    // not route to a virtual host that was not granted.
    match http::HeaderValue::from_str(authority.as_str()) {
        Ok(v) => {
            headers.insert(http::header::HOST, v);
        }
        Err(e) => return bad_gateway(&e),
    }
    match sender.send_request(req).await {
        Ok(res) => res.map(|b| b.boxed()),
        Err(e) => bad_gateway(&e),
    }
}
