//! The `wasi:http` gate: every outgoing request of a plugin passes
//! [`EgressHooks::send_request`], which checks the effective HTTP grant before
//! any DNS lookup or connection (fail-closed) and substitutes secret references
//! in headers, so the secret never enters the guest. Requests allowed only by a
//! `<public>` grant are resolved and screened by the SSRF guard first and sent
//! to the screened address.

use crate::capability::HttpAccess;
use crate::netguard::GuardError;
use crate::plugin::{PluginContext, SecretSource};
use http::HeaderValue;
use std::sync::Arc;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// Marker wrapping a secret name in a header value: `{{turnstone-secret:NAME}}`.
pub const SECRET_PREFIX: &str = "{{turnstone-secret:";
const SECRET_SUFFIX: &str = "}}";

/// The token a guest puts in a header to reference a granted secret.
pub fn secret_token(name: &str) -> String {
    format!("{SECRET_PREFIX}{name}{SECRET_SUFFIX}")
}

/// Per-store `wasi:http` hooks.
pub struct EgressHooks {
    plugin: Arc<PluginContext>,
    /// Per-call secret values (e.g. the API key of the model alias in use);
    /// consulted before the plugin's own secret source.
    pub(crate) call_secrets: Option<Arc<dyn SecretSource>>,
    /// Why requests of this call were denied: the guest only learns
    /// `HttpRequestDenied`, so the host adds the reason (with its grant
    /// hint) to a failed tool result.
    denials: Vec<String>,
    /// The call's capability audit.
    audit: crate::audit::AuditRecorder,
}

/// At most this many denial reasons are kept per call.
const MAX_DENIALS: usize = 4;

impl EgressHooks {
    pub(crate) fn new(plugin: Arc<PluginContext>, audit: crate::audit::AuditRecorder) -> Self {
        Self {
            plugin,
            call_secrets: None,
            denials: Vec::new(),
            audit,
        }
    }

    /// Where this call's capability audit goes.
    pub(crate) fn set_audit(&mut self, audit: crate::audit::AuditRecorder) {
        self.audit = audit;
    }

    /// The reasons requests of this call were denied, oldest first.
    pub(crate) fn take_denials(&mut self) -> Vec<String> {
        std::mem::take(&mut self.denials)
    }
}

/// Where a header value is going: the header's name and the request's host.
pub(crate) struct Destination<'a> {
    pub(crate) header: &'a str,
    pub(crate) host: &'a str,
    pub(crate) port: u16,
}

/// Replaces every secret token in `value`. Fails on an ungranted or unknown
/// secret, and on one whose binding does not cover `to` (another header or host).
pub(crate) fn substitute(
    plugin: &PluginContext,
    call_secrets: Option<&Arc<dyn SecretSource>>,
    value: &str,
    to: &Destination<'_>,
    used: &mut Vec<String>,
) -> Result<Option<String>, String> {
    if !value.contains(SECRET_PREFIX) {
        return Ok(None);
    }
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find(SECRET_PREFIX) {
        out.push_str(&rest[..start]);
        let after = &rest[start + SECRET_PREFIX.len()..];
        let end = after
            .find(SECRET_SUFFIX)
            .ok_or_else(|| "unterminated secret reference".to_string())?;
        let name = &after[..end];
        plugin
            .caps
            .check_secret_use(name, to.header, to.host, to.port)
            .map_err(|d| d.to_string())?;
        let secret = call_secrets
            .and_then(|s| s.secret(name))
            .or_else(|| plugin.secrets.secret(name))
            .ok_or_else(|| format!("secret {name} is granted but not set on the host"))?;
        out.push_str(&secret);
        used.push(name.to_string());
        rest = &after[end + SECRET_SUFFIX.len()..];
    }
    out.push_str(rest);
    Ok(Some(out))
}

impl WasiHttpHooks for EgressHooks {
    fn send_request(
        &mut self,
        mut request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Box<
        dyn Future<
                Output = Result<
                    (
                        http::Response<WasiBody>,
                        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                    ),
                    HttpError,
                >,
            > + Send,
    > {
        let _ = fut;
        let plugin = self.plugin.clone();
        let uri = request.uri().clone();
        let https = uri.scheme_str() == Some("https");
        let host = uri.host().unwrap_or_default().to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let decision = plugin
            .caps
            .check_http(&host, port)
            .map_err(|d| d.to_string());
        let mut used = Vec::new();
        let decision = decision.and_then(|access| {
            for (name, value) in request.headers_mut().iter_mut() {
                let Ok(text) = value.to_str() else { continue };
                // A secret goes only to a host the operator named: `<public>`
                // lets a plugin reach any public host, and whoever chooses
                // the URL (a user's webhook target, a fetched page's link)
                // must not be able to receive the operator's secret.
                if access == HttpAccess::PublicOnly && text.contains(SECRET_PREFIX) {
                    return Err(format!(
                        "a secret is sent only to a host granted by name; {host}:{port} is allowed only as a public host"
                    ));
                }
                let to = Destination {
                    header: name.as_str(),
                    host: &host,
                    port,
                };
                if let Some(new) =
                    substitute(&plugin, self.call_secrets.as_ref(), text, &to, &mut used)?
                {
                    let mut v = HeaderValue::from_str(&new)
                        .map_err(|_| "secret is not a valid header value".to_string())?;
                    v.set_sensitive(true);
                    *value = v;
                }
            }
            Ok(access)
        });
        if let Err(reason) = &decision
            && self.denials.len() < MAX_DENIALS
            && !self.denials.contains(reason)
        {
            self.denials.push(reason.clone());
        }
        // A public-only request is recorded once the address is screened.
        let audit = self.audit.clone();
        let target = format!("{host}:{port}");
        let method = request.method().to_string();
        if decision != Ok(HttpAccess::PublicOnly) {
            audit.host(
                target.clone(),
                method.clone(),
                decision.as_ref().err().cloned(),
            );
        }
        if decision.is_ok() {
            for name in &used {
                self.audit.secret(name);
            }
        }
        Box::new(async move {
            let access = match decision {
                Ok(a) => a,
                Err(reason) => {
                    plugin.counters.denial();
                    tracing::warn!(plugin = %plugin.name, %uri, "{reason}");
                    return Err(HttpError::HttpRequestDenied);
                }
            };
            use http_body_util::BodyExt;
            if access == HttpAccess::PublicOnly {
                let addr = match plugin.network.screen(&host, port).await {
                    Ok(a) => {
                        audit.host(target, method, None);
                        a
                    }
                    Err(e) => {
                        audit.host(target, method, Some(e.to_string()));
                        plugin.counters.denial();
                        tracing::warn!(plugin = %plugin.name, %uri, "{e}");
                        return Err(match e {
                            GuardError::Resolve { .. } => HttpError::DnsError {
                                rcode: Some("address not available".into()),
                                info_code: None,
                            },
                            GuardError::NoHost { .. } | GuardError::ZoneId { .. } => {
                                HttpError::HttpRequestUriInvalid
                            }
                            GuardError::Blocked { .. } => HttpError::DestinationIpProhibited,
                        });
                    }
                };
                return guarded_send(request, addr, host, https, options).await;
            }
            let (res, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                res.map(|b| super::readahead::read_ahead(b.boxed_unsync())),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}

type SendResult = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ),
    HttpError,
>;

/// Sends `request` to the already-screened `addr` (never re-resolving the
/// name), with TLS verified against `host`.
async fn guarded_send(
    mut request: http::Request<WasiBody>,
    addr: std::net::SocketAddr,
    host: String,
    https: bool,
    options: Option<RequestOptions>,
) -> SendResult {
    use http_body_util::BodyExt;
    use std::time::Duration;
    use wasmtime_wasi_http::io::TokioIo;
    let connect_timeout = options
        .and_then(|o| o.connect_timeout)
        .unwrap_or(Duration::from_secs(30));
    let first_byte_timeout = options
        .and_then(|o| o.first_byte_timeout)
        .unwrap_or(Duration::from_secs(120));
    let tcp = tokio::time::timeout(connect_timeout, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| HttpError::ConnectionTimeout)?
        .map_err(|_| HttpError::ConnectionRefused)?;
    let io: Box<dyn AsyncStream> = if https {
        let connector =
            tls_connector().map_err(|e| HttpError::InternalError(Some(e.to_string())))?;
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|_| HttpError::HttpRequestUriInvalid)?;
        let tls = connector
            .connect(name, tcp)
            .await
            .map_err(|e| HttpError::TlsProtocolError.tap(&e))?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (mut sender, conn) = tokio::time::timeout(
        connect_timeout,
        hyper::client::conn::http1::handshake(TokioIo::new(io)),
    )
    .await
    .map_err(|_| HttpError::ConnectionTimeout)?
    .map_err(HttpError::from)?;
    // Origin-form on the wire; the Host header names the original host.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = path.parse().map_err(|_| HttpError::HttpRequestUriInvalid)?;
    if !request.headers().contains_key(http::header::HOST) {
        let value = HeaderValue::from_str(&host).map_err(|_| HttpError::HttpRequestUriInvalid)?;
        request.headers_mut().insert(http::header::HOST, value);
    }
    let driver = tokio::spawn(conn);
    let res = tokio::time::timeout(first_byte_timeout, sender.send_request(request))
        .await
        .map_err(|_| HttpError::ConnectionReadTimeout)?
        .map_err(HttpError::from)?;
    let res =
        res.map(|body| super::readahead::read_ahead(body.map_err(HttpError::from).boxed_unsync()));
    let io = async move {
        match driver.await {
            Ok(r) => r.map_err(HttpError::from),
            Err(_) => Err(HttpError::InternalError(Some(
                "connection task failed".into(),
            ))),
        }
    };
    Ok((res, Box::new(io)))
}

/// A TLS client verifying servers against the Web PKI roots (the same trust
/// for every connection a plugin makes, HTTP or WebSocket).
pub(crate) fn tls_connector() -> Result<tokio_rustls::TlsConnector, rustls::Error> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// A connected byte stream (plain TCP or TLS).
pub(crate) trait AsyncStream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send
{
}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> AsyncStream for T {}

/// Logs a TLS failure's cause before it is reduced to a wasi-http error code.
trait Tap {
    fn tap(self, cause: &dyn std::fmt::Display) -> Self;
}

impl Tap for HttpError {
    fn tap(self, cause: &dyn std::fmt::Display) -> Self {
        tracing::debug!("TLS handshake failed: {cause}");
        self
    }
}
