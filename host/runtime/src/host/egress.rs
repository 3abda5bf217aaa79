//! The `wasi:http` gate: every outgoing request of a plugin passes
//! [`EgressHooks::send_request`], which checks the effective HTTP grant before
//! any DNS lookup or connection (fail-closed) and substitutes secret references
//! in headers, so the secret never enters the guest. Requests allowed only by a
//! `<public>` grant are resolved and screened by the SSRF guard first and sent
//! to the screened address.

use super::pool::{Target, Timeouts};
use crate::capability::HttpAccess;
use crate::netguard::GuardError;
use crate::plugin::{PluginContext, SecretSource};
use http::HeaderValue;
use std::sync::Arc;
use std::time::Duration;
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
            let addrs = if access == HttpAccess::PublicOnly {
                match plugin.network.screen(&host, port).await {
                    Ok(a) => {
                        audit.host(target, method, None);
                        vec![a]
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
                }
            } else {
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                match tokio::net::lookup_host((bare, port)).await {
                    Ok(a) => a.collect(),
                    Err(e) => {
                        tracing::warn!(plugin = %plugin.name, %uri, "cannot resolve: {e}");
                        return Err(HttpError::DnsError {
                            rcode: Some(e.to_string()),
                            info_code: None,
                        });
                    }
                }
            };
            let timeouts = Timeouts {
                connect: options
                    .and_then(|o| o.connect_timeout)
                    .unwrap_or(Duration::from_secs(30)),
                first_byte: options
                    .and_then(|o| o.first_byte_timeout)
                    .unwrap_or(Duration::from_secs(120)),
            };
            let target = Target {
                https,
                host,
                port,
                addrs,
            };
            let res = plugin.http_pool.send(request, target, timeouts).await?;
            // The connection outlives the response (it is pooled): nothing
            // for wasi-http to drive.
            let io = async { Ok(()) };
            Ok((res, Box::new(io) as Box<dyn Future<Output = _> + Send>))
        })
    }
}

/// The TLS client settings of every connection a plugin makes, HTTP or
/// WebSocket: the Web PKI roots plus the operator's extra roots. One config
/// per plugin, so its session cache lets new connections resume.
pub(crate) fn tls_config(
    extra_roots: &[rustls::pki_types::CertificateDer<'static>],
) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    for cert in extra_roots {
        if let Err(e) = roots.add(cert.clone()) {
            tracing::warn!("ignoring an extra TLS root: {e}");
        }
    }
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        // Proven invariant: the ring provider implements the default versions.
        .expect("ring supports TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

/// A connected byte stream (plain TCP or TLS).
pub(crate) trait AsyncStream:
    tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send
{
}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> AsyncStream for T {}
