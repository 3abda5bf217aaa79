//! The `websocket` import: outbound WebSocket client connections, checked
//! like `wasi:http` requests. The URL's host must be in the plugin's
//! effective `http` grant; a host allowed only by `<public>` is resolved and
//! screened by the SSRF guard and the socket goes to the screened address.
//! Secret references are substituted in request headers (as for HTTP) and in
//! text frames when the secret's grant names the pseudo-header `ws-frame`.

use super::egress::{AsyncStream, Destination, SECRET_PREFIX, substitute};
use crate::bindings::v0_1_0::host::turnstone::plugin::types::CapabilityError;
use crate::bindings::v0_2_0::channel::turnstone::plugin0_2_0::websocket::{
    self as wit, CloseFrame, Message, WsError,
};
use crate::capability::HttpAccess;
use crate::state::HostState;
use futures::{SinkExt, StreamExt};
use std::time::Duration;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::{self, protocol::WebSocketConfig};
use wasmtime::component::Resource;

/// The pseudo-header a secret grant names to allow the secret in text frames.
pub const FRAME_HEADER: &str = "ws-frame";

/// Largest message a plugin may receive (Discord's READY can be large).
const MAX_MESSAGE: usize = 16 << 20;
/// TCP connect and upgrade, each.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest single `receive` (the guest asks again to wait longer).
const MAX_RECEIVE_WAIT: Duration = Duration::from_secs(60);
/// A frame the peer does not take within this ends the connection.
const SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// An open connection, owned by the plugin's resource table.
pub struct WsConnection {
    stream: Option<WebSocketStream<Box<dyn AsyncStream>>>,
    host: String,
    port: u16,
    /// Allowed only by `<public>`: no secrets go in its frames.
    public_only: bool,
}

impl WsConnection {
    /// The next message (pings are answered by the library on the next
    /// read or write; pongs and raw frames are skipped).
    pub(crate) async fn next_message(&mut self) -> Result<Message, WsError> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(WsError::Closed(None));
        };
        loop {
            let next = stream.next().await;
            let msg = match next {
                None => {
                    self.stream = None;
                    return Ok(Message::Close(None));
                }
                Some(Err(tungstenite::Error::ConnectionClosed))
                | Some(Err(tungstenite::Error::AlreadyClosed)) => {
                    self.stream = None;
                    return Ok(Message::Close(None));
                }
                Some(Err(tungstenite::Error::Io(_)))
                | Some(Err(tungstenite::Error::Protocol(_))) => {
                    // A dropped connection (reset, EOF without a close frame).
                    self.stream = None;
                    return Ok(Message::Close(None));
                }
                Some(Err(e)) => {
                    self.stream = None;
                    return Err(WsError::Protocol(e.to_string()));
                }
                Some(Ok(m)) => m,
            };
            match msg {
                tungstenite::Message::Text(t) => return Ok(Message::Text(t.to_string())),
                tungstenite::Message::Binary(b) => return Ok(Message::Binary(b.to_vec())),
                tungstenite::Message::Close(frame) => {
                    self.stream = None;
                    return Ok(Message::Close(frame.map(|f| CloseFrame {
                        code: f.code.into(),
                        reason: f.reason.to_string(),
                    })));
                }
                tungstenite::Message::Ping(_)
                | tungstenite::Message::Pong(_)
                | tungstenite::Message::Frame(_) => continue,
            }
        }
    }

    async fn send(&mut self, msg: tungstenite::Message) -> Result<(), WsError> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(WsError::Closed(None));
        };
        let sent = match tokio::time::timeout(SEND_TIMEOUT, stream.send(msg)).await {
            Ok(r) => r,
            Err(_) => {
                // The peer stopped reading: the connection is useless.
                self.stream = None;
                return Err(WsError::Closed(None));
            }
        };
        match sent {
            Ok(()) => Ok(()),
            Err(e) => {
                self.stream = None;
                Err(match e {
                    tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed => {
                        WsError::Closed(None)
                    }
                    other => WsError::Protocol(other.to_string()),
                })
            }
        }
    }
}

fn denied(capability: &str, detail: String, hint: String) -> WsError {
    WsError::Denied(CapabilityError {
        capability: capability.into(),
        detail,
        grant_hint: hint,
    })
}

impl HostState {
    fn ws_denial(&mut self, target: &str, reason: String) -> WsError {
        self.plugin.counters.denial();
        tracing::warn!(plugin = %self.plugin.name, "{reason}");
        self.audit
            .host(target.to_string(), "WEBSOCKET".into(), Some(reason.clone()));
        denied("http", reason, String::new())
    }

    async fn ws_connect(
        &mut self,
        url: &str,
        headers: &[(String, String)],
    ) -> Result<WsConnection, WsError> {
        let parsed = url::Url::parse(url)
            .map_err(|e| WsError::ConnectFailed(format!("invalid URL {url:?}: {e}")))?;
        let tls = match parsed.scheme() {
            "wss" => true,
            "ws" => false,
            other => {
                return Err(WsError::ConnectFailed(format!(
                    "{url}: scheme {other:?} is not ws or wss"
                )));
            }
        };
        crate::netguard::check_url_authority(url)
            .map_err(|e| WsError::ConnectFailed(e.to_string()))?;
        let host = parsed.host_str().unwrap_or_default().to_string();
        let port = parsed.port_or_known_default().unwrap_or(443);
        let target = format!("{host}:{port}");
        let access = match self.plugin.caps.check_http(&host, port) {
            Ok(a) => a,
            Err(d) => {
                self.plugin.counters.denial();
                tracing::warn!(plugin = %self.plugin.name, "{d}");
                self.audit
                    .host(target, "WEBSOCKET".into(), Some(d.to_string()));
                return Err(WsError::Denied(super::denial_to_wit(&d)));
            }
        };
        // The upgrade request, with the plugin's headers (secrets substituted
        // only for a host granted by name, like HTTP).
        let mut request = tungstenite::client::IntoClientRequest::into_client_request(url)
            .map_err(|e| WsError::ConnectFailed(e.to_string()))?;
        let mut used = Vec::new();
        for (name, value) in headers {
            let header = http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| WsError::ConnectFailed(format!("bad header name {name:?}")))?;
            // The pseudo-header that binds secrets to frames is not a header.
            if header.as_str() == FRAME_HEADER {
                return Err(WsError::ConnectFailed(format!(
                    "{FRAME_HEADER} is reserved and cannot be sent as a header"
                )));
            }
            if access == HttpAccess::PublicOnly && value.contains(SECRET_PREFIX) {
                let reason = format!(
                    "a secret is sent only to a host granted by name; {target} is allowed only as a public host"
                );
                return Err(self.ws_denial(&target, reason));
            }
            let to = Destination {
                header: header.as_str(),
                host: &host,
                port,
            };
            let value = match substitute(
                &self.plugin,
                self.call_secrets().as_ref(),
                value,
                &to,
                &mut used,
            ) {
                Ok(Some(v)) => v,
                Ok(None) => value.clone(),
                Err(reason) => return Err(self.ws_denial(&target, reason)),
            };
            let mut v = http::HeaderValue::from_str(&value)
                .map_err(|_| WsError::ConnectFailed(format!("bad value for header {name}")))?;
            v.set_sensitive(!used.is_empty());
            request.headers_mut().insert(header, v);
        }
        let addr = match access {
            HttpAccess::PublicOnly => match self.plugin.network.screen(&host, port).await {
                Ok(a) => a,
                Err(e) => return Err(self.ws_denial(&target, e.to_string())),
            },
            HttpAccess::Granted => {
                tokio::net::lookup_host((host.trim_start_matches('[').trim_end_matches(']'), port))
                    .await
                    .map_err(|e| WsError::ConnectFailed(format!("{host}: {e}")))?
                    .next()
                    .ok_or_else(|| WsError::ConnectFailed(format!("{host}: no address")))?
            }
        };
        self.audit.host(target.clone(), "WEBSOCKET".into(), None);
        for name in &used {
            self.audit.secret(name);
        }
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(addr))
            .await
            .map_err(|_| WsError::ConnectFailed(format!("{target}: connect timed out")))?
            .map_err(|e| WsError::ConnectFailed(format!("{target}: {e}")))?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn AsyncStream> = if tls {
            let connector = tokio_rustls::TlsConnector::from(self.plugin.tls.clone());
            let name = rustls::pki_types::ServerName::try_from(host.clone())
                .map_err(|_| WsError::ConnectFailed(format!("{host}: not a TLS server name")))?;
            Box::new(
                tokio::time::timeout(CONNECT_TIMEOUT, connector.connect(name, tcp))
                    .await
                    .map_err(|_| WsError::ConnectFailed(format!("{target}: TLS timed out")))?
                    .map_err(|e| WsError::ConnectFailed(format!("{target}: TLS: {e}")))?,
            )
        } else {
            Box::new(tcp)
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let (stream, _response) = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio_tungstenite::client_async_with_config(request, io, Some(config)),
        )
        .await
        .map_err(|_| WsError::ConnectFailed(format!("{target}: upgrade timed out")))?
        .map_err(|e| WsError::ConnectFailed(format!("{target}: {e}")))?;
        Ok(WsConnection {
            stream: Some(stream),
            host,
            port,
            public_only: access == HttpAccess::PublicOnly,
        })
    }
}

impl wit::Host for HostState {
    async fn connect(
        &mut self,
        url: String,
        headers: Vec<(String, String)>,
    ) -> wasmtime::Result<Result<Resource<WsConnection>, WsError>> {
        match self.ws_connect(&url, &headers).await {
            Ok(conn) => Ok(Ok(self.table().push(conn)?)),
            Err(e) => Ok(Err(e)),
        }
    }
}

impl wit::HostConnection for HostState {
    async fn send_text(
        &mut self,
        conn: Resource<WsConnection>,
        text: String,
    ) -> wasmtime::Result<Result<(), WsError>> {
        let (host, port, public_only) = {
            let c = self.table().get(&conn)?;
            (c.host.clone(), c.port, c.public_only)
        };
        if public_only && text.contains(SECRET_PREFIX) {
            let reason = format!(
                "a secret is sent only to a host granted by name; {host}:{port} is allowed only as a public host"
            );
            return Ok(Err(self.ws_denial(&format!("{host}:{port}"), reason)));
        }
        let text = if text.contains(SECRET_PREFIX) {
            let to = Destination {
                header: FRAME_HEADER,
                host: &host,
                port,
            };
            let mut used = Vec::new();
            match substitute(
                &self.plugin,
                self.call_secrets().as_ref(),
                &text,
                &to,
                &mut used,
            ) {
                Ok(v) => {
                    for name in &used {
                        self.audit.secret(name);
                    }
                    v.unwrap_or(text)
                }
                Err(reason) => return Ok(Err(self.ws_denial(&format!("{host}:{port}"), reason))),
            }
        } else {
            text
        };
        let c = self.table().get_mut(&conn)?;
        Ok(c.send(tungstenite::Message::Text(text.into())).await)
    }

    async fn send_binary(
        &mut self,
        conn: Resource<WsConnection>,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<(), WsError>> {
        let c = self.table().get_mut(&conn)?;
        Ok(c.send(tungstenite::Message::Binary(data.into())).await)
    }

    async fn receive(
        &mut self,
        conn: Resource<WsConnection>,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<Option<Message>, WsError>> {
        let c = self.table().get_mut(&conn)?;
        let wait = Duration::from_millis(timeout_ms.into()).min(MAX_RECEIVE_WAIT);
        match tokio::time::timeout(wait, c.next_message()).await {
            Err(_) => Ok(Ok(None)),
            Ok(r) => Ok(r.map(Some)),
        }
    }

    async fn close(
        &mut self,
        conn: Resource<WsConnection>,
        code: u16,
        reason: String,
    ) -> wasmtime::Result<()> {
        let c = self.table().get_mut(&conn)?;
        if let Some(mut stream) = c.stream.take() {
            let frame = tungstenite::protocol::CloseFrame {
                code: code.into(),
                reason: reason.chars().take(120).collect::<String>().into(),
            };
            // Best effort, bounded: the peer may already be gone.
            let _ = tokio::time::timeout(Duration::from_secs(2), stream.close(Some(frame))).await;
        }
        Ok(())
    }

    async fn drop(&mut self, conn: Resource<WsConnection>) -> wasmtime::Result<()> {
        self.table().delete(conn)?;
        Ok(())
    }
}
