//! Connection reuse to a model provider over TLS: one streamed completion
//! (40 text deltas) through the real `openai` provider component, its
//! `wasi:http` requests going through the host's egress gate and connection
//! pool, against a loopback HTTPS server. Three server behaviours:
//!
//! - `new connection, full TLS handshake`: the server closes after each
//!   response and resumes no TLS session — what every call cost before the
//!   pool (each call opened a connection with a fresh TLS config);
//! - `new connection, TLS resumed`: closes after each response, resumes
//!   sessions (the pool's shared TLS config keeps the session cache);
//! - `kept alive (pooled)`: the server keeps connections open, the pool
//!   reuses one.
//!
//! Prints per-call p50/p90 and the connections the server accepted.
//! Run: `cargo bench -p turnstone-engine --bench provider_tls` (after
//! `cargo xtask build-components`).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use turnstone_runtime::netguard::NetworkPolicy;
use turnstone_runtime::plugin::ProviderEventSink;
use turnstone_runtime::provider_types as wit;
use turnstone_runtime::{LoadedPlugin, PluginSettings, PluginSource, Runtime, RuntimeOptions};

const CALLS: usize = 200;
const WARMUP: usize = 5;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    FullHandshake,
    Resumed,
    KeptAlive,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::FullHandshake => "new connection, full TLS handshake",
            Mode::Resumed => "new connection, TLS resumed",
            Mode::KeptAlive => "kept alive (pooled)",
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Tls {
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
}

fn tls() -> Tls {
    let dir = root().join("tests/tls");
    Tls {
        cert: CertificateDer::from_pem_file(dir.join("localhost.crt")).unwrap(),
        key: PrivateKeyDer::from_pem_file(dir.join("localhost.key")).unwrap(),
    }
}

/// A loopback HTTPS server answering every POST with `body` as SSE.
async fn server(tls: &Tls, mode: Mode, body: Bytes) -> (u16, Arc<AtomicUsize>) {
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![tls.cert.clone()], tls.key.clone_key())
    .unwrap();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    if mode == Mode::FullHandshake {
        cfg.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
    }
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::Relaxed);
            let (acceptor, body) = (acceptor.clone(), body.clone());
            tokio::spawn(async move {
                let _ = sock.set_nodelay(true);
                let Ok(tls) = acceptor.accept(sock).await else {
                    return;
                };
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let body = body.clone();
                    async move {
                        let _ = req.into_body().collect().await;
                        hyper::Response::builder()
                            .header("content-type", "text/event-stream")
                            .body(Full::new(body))
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(mode == Mode::KeptAlive)
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (port, accepted)
}

async fn provider(rt: &Runtime, port: u16, tls: &Tls) -> LoadedPlugin {
    let grant = toml::from_str(&format!(
        "http = [\"localhost:{port}\"]\nsecrets = [\"api_key\"]"
    ))
    .unwrap();
    rt.load(
        PluginSource {
            dir: root().join("target/components/openai"),
            builtin: true,
        },
        PluginSettings {
            grant: Some(grant),
            network: NetworkPolicy {
                extra_roots: Arc::from(vec![tls.cert.clone()]),
                ..NetworkPolicy::default()
            },
            ..Default::default()
        },
    )
    .await
    .expect("run `cargo xtask build-components` first")
}

struct Key;

impl turnstone_runtime::SecretSource for Key {
    fn secret(&self, name: &str) -> Option<String> {
        (name == "api_key").then(|| "sk-bench".to_string())
    }
}

#[derive(Default)]
struct Deltas(AtomicUsize);

impl ProviderEventSink for Deltas {
    fn event(&self, e: wit::StreamEvent) -> bool {
        if let wit::StreamEvent::TextDelta(_) = e {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        true
    }
}

fn request(port: u16) -> wit::CompletionRequest {
    wit::CompletionRequest {
        provider: "openai".into(),
        base_url: format!("https://localhost:{port}/v1"),
        model: "bench-model".into(),
        messages: vec![wit::Message {
            role: wit::Role::User,
            content: vec![wit::ContentPart::Text("hello".into())],
            tool_calls: Vec::new(),
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            reasoning: None,
            provider_data: None,
            source: None,
        }],
        tools: Vec::new(),
        temperature: None,
        max_tokens: None,
        reasoning_effort: None,
        replay_reasoning: false,
        capabilities: None,
        extra: None,
        tool_search: false,
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

async fn measure(rt: &Runtime, tls: &Tls, mode: Mode, body: Bytes) -> f64 {
    let (port, accepted) = server(tls, mode, body).await;
    let p = provider(rt, port, tls).await;
    let req = request(port);
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let sink = Arc::new(Deltas::default());
        let t = Instant::now();
        p.provider_complete(&req, sink.clone(), Some(Arc::new(Key)), None)
            .await
            .expect("no trap")
            .expect("the completion succeeds");
        let took = t.elapsed();
        assert_eq!(sink.0.load(Ordering::Relaxed), 40, "every delta arrived");
        if i >= WARMUP {
            times.push(took);
        }
    }
    times.sort();
    let (p50, p90) = (percentile(&times, 0.5), percentile(&times, 0.9));
    let stats = p.ctx.http_pool.stats();
    println!(
        "{:<38} per call p50 {p50:.3} ms, p90 {p90:.3} ms; server accepted {} connections for {} calls (pool: {} opened, {} reused)",
        mode.label(),
        accepted.load(Ordering::Relaxed),
        WARMUP + CALLS,
        stats.opened,
        stats.reused
    );
    p50
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let tls = tls();
        let words: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
        let parts: Vec<&str> = words.iter().map(String::as_str).collect();
        let body = Bytes::from(turnstone_scripted_llm::openai::text(&parts).concat());
        let rt = Runtime::new(RuntimeOptions {
            cache_dir: Some(root().join("target/test-cache")),
            ..Default::default()
        })
        .unwrap();
        let full = measure(&rt, &tls, Mode::FullHandshake, body.clone()).await;
        let resumed = measure(&rt, &tls, Mode::Resumed, body.clone()).await;
        let pooled = measure(&rt, &tls, Mode::KeptAlive, body).await;
        println!(
            "saving per call: {:.3} ms vs a full handshake ({:.1}x faster), {:.3} ms vs a resumed one",
            full - pooled,
            full / pooled,
            resumed - pooled
        );
    });
}
