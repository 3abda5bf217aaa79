//! Kept-alive connections for a plugin's outgoing HTTP requests.
//!
//! Each plugin has its own pool (never shared between plugins), keyed by
//! scheme and host and remembering the address each connection went to. A
//! request reuses a connection only when that address is one the request's
//! own egress check just produced (the screened address for a `<public>`
//! grant, a resolved address of a host granted by name), so a pooled
//! connection never bypasses the check made for every request.
//!
//! HTTPS connections offer HTTP/2 and HTTP/1.1 by ALPN: an HTTP/2 connection
//! is shared by concurrent requests, an HTTP/1.1 one goes back to the pool
//! once its response body has been read to the end. One TLS client config per
//! pool keeps rustls' session cache, so new connections resume sessions.

use super::egress::AsyncStream;
use http::HeaderValue;
use http_body_util::BodyExt;
use hyper::client::conn::{TrySendError, http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use wasmtime_wasi_http::{Error as HttpError, WasiBody};

/// An idle HTTP/1.1 connection is dropped after this long unused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this many idle connections are kept per scheme and host.
const MAX_IDLE_PER_HOST: usize = 8;

/// Where a request goes, after its egress check.
pub(crate) struct Target {
    /// `https`.
    pub https: bool,
    /// The host as named in the URL (TLS server name, pool key).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The addresses the check allows, in the order to try.
    pub addrs: Vec<SocketAddr>,
}

/// Timeouts of one request.
#[derive(Clone, Copy)]
pub(crate) struct Timeouts {
    /// TCP connect plus TLS and HTTP handshakes.
    pub connect: Duration,
    /// From sending to the response head.
    pub first_byte: Duration,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    https: bool,
    host: String,
    port: u16,
}

enum Sender {
    /// With the handle of the task that drives the connection and pumps its
    /// response bodies.
    H1(http1::SendRequest<WasiBody>, super::h1_driver::Jobs),
    H2(http2::SendRequest<WasiBody>),
}

struct Idle {
    sender: Sender,
    addr: SocketAddr,
    since: Instant,
}

/// How many connections a pool opened and how many requests reused one.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Connections opened.
    pub opened: u64,
    /// Requests sent on a connection opened earlier.
    pub reused: u64,
}

/// One plugin's connection pool (see the module docs).
pub struct ConnectionPool {
    idle: Mutex<HashMap<Key, Vec<Idle>>>,
    tls: Arc<rustls::ClientConfig>,
    opened: AtomicU64,
    reused: AtomicU64,
}

impl std::fmt::Debug for ConnectionPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionPool")
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

type Response = http::Response<WasiBody>;

impl ConnectionPool {
    /// An empty pool whose TLS connections trust `tls` (ALPN is set here).
    pub(crate) fn new(tls: &rustls::ClientConfig) -> Self {
        let mut tls = tls.clone();
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self {
            idle: Mutex::new(HashMap::new()),
            tls: Arc::new(tls),
            opened: AtomicU64::new(0),
            reused: AtomicU64::new(0),
        }
    }

    /// Connections opened and reused so far.
    pub fn stats(&self) -> PoolStats {
        PoolStats {
            opened: self.opened.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Vec<Idle>>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection to one of `target`'s addresses, if one is usable.
    fn checkout(&self, key: &Key, addrs: &[SocketAddr]) -> Option<(Sender, SocketAddr)> {
        let mut idle = self.lock();
        let list = idle.get_mut(key)?;
        list.retain(|i| !closed(&i.sender) && i.since.elapsed() < IDLE_TIMEOUT);
        let at = list.iter().rposition(|i| addrs.contains(&i.addr))?;
        let ready = match &list[at].sender {
            // An HTTP/2 connection stays in the pool for concurrent requests.
            Sender::H2(s) => return Some((Sender::H2(s.clone()), list[at].addr)),
            Sender::H1(s, _) => s.is_ready(),
        };
        if !ready {
            return None;
        }
        let i = list.remove(at);
        Some((i.sender, i.addr))
    }

    fn put(&self, key: Key, sender: Sender, addr: SocketAddr) {
        let mut idle = self.lock();
        let list = idle.entry(key).or_default();
        list.retain(|i| !closed(&i.sender) && i.since.elapsed() < IDLE_TIMEOUT);
        if list.len() < MAX_IDLE_PER_HOST {
            list.push(Idle {
                sender,
                addr,
                since: Instant::now(),
            });
        }
    }

    /// Sends `request` to `target` on a pooled connection or a new one.
    pub(crate) async fn send(
        self: &Arc<Self>,
        mut request: http::Request<WasiBody>,
        target: Target,
        timeouts: Timeouts,
    ) -> Result<Response, HttpError> {
        let key = Key {
            https: target.https,
            host: target.host.clone(),
            port: target.port,
        };
        if let Some((sender, addr)) = self.checkout(&key, &target.addrs) {
            self.reused.fetch_add(1, Ordering::Relaxed);
            match self
                .send_on(sender, addr, key.clone(), request, &timeouts)
                .await
            {
                Ok(res) => return Ok(res),
                // The server closed the idle connection before it took the
                // request: nothing was sent, so a new connection may carry it.
                Err(Retry::Unsent(req)) => request = req,
                Err(Retry::Failed(e)) => return Err(e),
            }
        }
        let (sender, addr) = self.connect(&target, timeouts.connect).await?;
        self.opened.fetch_add(1, Ordering::Relaxed);
        if let Sender::H2(s) = &sender {
            self.put(key.clone(), Sender::H2(s.clone()), addr);
        }
        match self.send_on(sender, addr, key, request, &timeouts).await {
            Ok(res) => Ok(res),
            Err(Retry::Unsent(_)) => Err(HttpError::ConnectionTerminated),
            Err(Retry::Failed(e)) => Err(e),
        }
    }

    async fn send_on(
        self: &Arc<Self>,
        sender: Sender,
        addr: SocketAddr,
        key: Key,
        mut request: http::Request<WasiBody>,
        timeouts: &Timeouts,
    ) -> Result<Response, Retry> {
        match sender {
            Sender::H1(mut s, jobs) => {
                origin_form(&mut request).map_err(Retry::Failed)?;
                let sent = tokio::time::timeout(timeouts.first_byte, s.try_send_request(request))
                    .await
                    .map_err(|_| Retry::Failed(HttpError::ConnectionReadTimeout))?;
                let res = sent.map_err(unsent_or_failed)?;
                // Back to the pool once the body has been read to its end;
                // a body dropped early closes the connection instead.
                let pool = Arc::downgrade(self);
                let (parts, body) = res.into_parts();
                let body = jobs.read_ahead(body.map_err(HttpError::from).boxed_unsync());
                tokio::spawn(return_when_ready(pool, key, s, jobs, addr));
                Ok(http::Response::from_parts(parts, body))
            }
            Sender::H2(mut s) => {
                request.headers_mut().remove(http::header::HOST);
                match tokio::time::timeout(timeouts.connect, s.ready()).await {
                    Err(_) => return Err(Retry::Failed(HttpError::ConnectionTimeout)),
                    Ok(Err(_)) => return Err(Retry::Unsent(request)),
                    Ok(Ok(())) => {}
                }
                let sent = tokio::time::timeout(timeouts.first_byte, s.try_send_request(request))
                    .await
                    .map_err(|_| Retry::Failed(HttpError::ConnectionReadTimeout))?;
                Ok(sent.map_err(unsent_or_failed)?.map(boxed_body))
            }
        }
    }

    async fn connect(
        &self,
        target: &Target,
        timeout: Duration,
    ) -> Result<(Sender, SocketAddr), HttpError> {
        let mut last = HttpError::ConnectionRefused;
        let mut connected = None;
        for addr in &target.addrs {
            match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
                Ok(Ok(tcp)) => {
                    connected = Some((tcp, *addr));
                    break;
                }
                Ok(Err(_)) => last = HttpError::ConnectionRefused,
                Err(_) => last = HttpError::ConnectionTimeout,
            }
        }
        let (tcp, addr) = connected.ok_or(last)?;
        // Model streams are many small frames: do not hold them back.
        let _ = tcp.set_nodelay(true);
        let tcp = super::quickack::QuickAck::new(tcp);
        let handshake = async {
            if !target.https {
                return http1_sender(Box::new(tcp)).await;
            }
            let name = rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|_| HttpError::HttpRequestUriInvalid)?;
            let mut tls = tokio_rustls::TlsConnector::from(self.tls.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| {
                    tracing::debug!("TLS handshake with {} failed: {e}", target.host);
                    HttpError::TlsProtocolError
                })?;
            if tls.get_ref().1.alpn_protocol() == Some(&b"h2"[..]) {
                // Other streams' uploads may go out while a response streams.
                tls.get_mut().0.ack_every_read();
                let (sender, conn) =
                    http2::handshake(TokioExecutor::new(), TokioIo::new(tls)).await?;
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!("HTTP/2 connection ended: {e}");
                    }
                });
                return Ok(Sender::H2(sender));
            }
            http1_sender(Box::new(tls)).await
        };
        let sender = tokio::time::timeout(timeout, handshake)
            .await
            .map_err(|_| HttpError::ConnectionTimeout)??;
        Ok((sender, addr))
    }
}

enum Retry {
    /// The request was not sent and is handed back.
    Unsent(http::Request<WasiBody>),
    Failed(HttpError),
}

fn unsent_or_failed(mut e: TrySendError<http::Request<WasiBody>>) -> Retry {
    match e.take_message() {
        Some(req) => Retry::Unsent(req),
        None => Retry::Failed(HttpError::from(e.into_error())),
    }
}

fn closed(s: &Sender) -> bool {
    match s {
        Sender::H1(s, _) => s.is_closed(),
        Sender::H2(s) => s.is_closed(),
    }
}

/// Bytes a pooled HTTP/1.1 connection reads from its socket at a time.
const READ_BYTES: usize = 4 * 1024;

async fn http1_sender(io: Box<dyn AsyncStream>) -> Result<Sender, HttpError> {
    // Reads of exactly 4 KiB. The size is fixed because hyper's default
    // grows a connection's reads up to 400 KB; it is small because a frame
    // queued for the guest keeps its whole read buffer alive, so hyper
    // allocates a fresh buffer for its next read, even for the read that
    // only waits for the next response on an idle connection, and every such
    // buffer is READ_BYTES. The guest does not see the size: the read-ahead
    // queue merges frames for each guest read. Against 16 KiB: the 100-turn
    // peak 1-2 MB lower, streaming and CPU per turn unchanged (docs/server.md).
    let (sender, conn) = http1::Builder::new()
        .read_buf_exact_size(Some(READ_BYTES))
        .handshake(TokioIo::new(io))
        .await?;
    Ok(Sender::H1(sender, super::h1_driver::spawn(conn)))
}

async fn return_when_ready(
    pool: Weak<ConnectionPool>,
    key: Key,
    mut sender: http1::SendRequest<WasiBody>,
    jobs: super::h1_driver::Jobs,
    addr: SocketAddr,
) {
    if sender.ready().await.is_ok()
        && let Some(pool) = pool.upgrade()
    {
        pool.put(key, Sender::H1(sender, jobs), addr);
    }
}

/// Origin-form on the wire for HTTP/1.1; the Host header names the URL's
/// authority (with its port when not the default).
fn origin_form(request: &mut http::Request<WasiBody>) -> Result<(), HttpError> {
    let authority = request.uri().authority().map(|a| a.as_str().to_string());
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = path.parse().map_err(|_| HttpError::HttpRequestUriInvalid)?;
    if !request.headers().contains_key(http::header::HOST)
        && let Some(authority) = authority
    {
        let value =
            HeaderValue::from_str(&authority).map_err(|_| HttpError::HttpRequestUriInvalid)?;
        request.headers_mut().insert(http::header::HOST, value);
    }
    Ok(())
}

fn boxed_body(body: hyper::body::Incoming) -> WasiBody {
    super::readahead::read_ahead(body.map_err(HttpError::from).boxed_unsync())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::{Empty, Full};
    use hyper::service::service_fn;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::sync::atomic::AtomicUsize;

    fn tls_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/tls")
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A loopback HTTPS server that speaks only HTTP/2 and answers every
    /// request with its path; counts the connections it accepted.
    async fn h2_server() -> (u16, Arc<AtomicUsize>) {
        let cert = CertificateDer::from_pem_file(tls_dir().join("localhost.crt")).expect("cert");
        let key = PrivateKeyDer::from_pem_file(tls_dir().join("localhost.key")).expect("key");
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("server config");
        cfg.alpn_protocols = vec![b"h2".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::Relaxed);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(sock).await else {
                        return;
                    };
                    let service =
                        service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                            let path = req.uri().path().to_string();
                            Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(
                                Bytes::from(path),
                            )))
                        });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), service)
                        .await;
                });
            }
        });
        (port, accepted)
    }

    fn client_tls() -> rustls::ClientConfig {
        let mut roots = rustls::RootCertStore::empty();
        let cert = CertificateDer::from_pem_file(tls_dir().join("localhost.crt")).expect("cert");
        roots.add(cert).expect("root");
        rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth()
    }

    fn get(port: u16, path: &str) -> http::Request<WasiBody> {
        http::Request::get(format!("https://localhost:{port}{path}"))
            .body(Empty::new().map_err(|e| match e {}).boxed_unsync())
            .expect("request")
    }

    async fn text(res: Response) -> String {
        let body = res.into_body().collect().await.expect("body").to_bytes();
        String::from_utf8(body.to_vec()).expect("utf-8")
    }

    /// A server that offers HTTP/2 gets one connection, shared by requests
    /// in flight at once and reused after them; every response arrives
    /// whole (its reads go through the every-read quick-ACK mode).
    #[tokio::test]
    async fn an_h2_server_gets_one_shared_connection() {
        let (port, accepted) = h2_server().await;
        let pool = Arc::new(ConnectionPool::new(&client_tls()));
        let target = || Target {
            https: true,
            host: "localhost".into(),
            port,
            addrs: vec![SocketAddr::from(([127, 0, 0, 1], port))],
        };
        let timeouts = Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(10),
        };
        let first = pool
            .send(get(port, "/first"), target(), timeouts)
            .await
            .expect("first request");
        assert_eq!(text(first).await, "/first");
        let (a, b) = tokio::join!(
            pool.send(get(port, "/a"), target(), timeouts),
            pool.send(get(port, "/b"), target(), timeouts),
        );
        assert_eq!(text(a.expect("a")).await, "/a");
        assert_eq!(text(b.expect("b")).await, "/b");
        assert_eq!(accepted.load(Ordering::Relaxed), 1, "one TCP connection");
        assert_eq!(
            pool.stats(),
            PoolStats {
                opened: 1,
                reused: 2
            }
        );
    }
}
