//! The `wasi:http` gate: every outgoing request of a plugin passes
//! [`EgressHooks::send_request`], which checks the effective HTTP grant before
//! any DNS lookup or connection (fail-closed) and substitutes secret references
//! in headers, so the secret never enters the guest.

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
}

impl EgressHooks {
    pub(crate) fn new(plugin: Arc<PluginContext>) -> Self {
        Self {
            plugin,
            call_secrets: None,
        }
    }
}

/// Replaces every secret token in `value`. Fails on an ungranted or unknown secret.
fn substitute(
    plugin: &PluginContext,
    call_secrets: Option<&Arc<dyn SecretSource>>,
    value: &str,
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
        plugin.caps.check_secret(name).map_err(|d| d.to_string())?;
        let secret = call_secrets
            .and_then(|s| s.secret(name))
            .or_else(|| plugin.secrets.secret(name))
            .ok_or_else(|| format!("secret {name} is granted but not set on the host"))?;
        out.push_str(&secret);
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
        let decision = decision.and_then(|()| {
            for value in request.headers_mut().values_mut() {
                let Ok(text) = value.to_str() else { continue };
                if let Some(new) = substitute(&plugin, self.call_secrets.as_ref(), text)? {
                    let mut v = HeaderValue::from_str(&new)
                        .map_err(|_| "secret is not a valid header value".to_string())?;
                    v.set_sensitive(true);
                    *value = v;
                }
            }
            Ok(())
        });
        Box::new(async move {
            if let Err(reason) = decision {
                plugin.counters.denial();
                tracing::warn!(plugin = %plugin.name, %uri, "{reason}");
                return Err(HttpError::HttpRequestDenied);
            }
            use http_body_util::BodyExt;
            let (res, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                res.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}
