//! Outgoing HTTP through `wasi:http`, allowed only to hosts granted to this
//! plugin. Bodies stream: read a response chunk by chunk with
//! [`Response::next_chunk`].

use crate::CapabilityError;
use crate::bindings::turnstone::plugin0_1_0::config;
use std::io::Read;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use wasip2::io::streams::{InputStream, OutputStream, StreamError};

/// Why a request failed.
#[derive(Debug)]
pub enum HttpError {
    /// The host is not granted to this plugin (or a secret is not).
    Denied(CapabilityError),
    /// The URL could not be used.
    InvalidUrl(String),
    /// Transport failure (DNS, connect, TLS, protocol).
    Transport(String),
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HttpError::Denied(e) => f.write_str(&crate::describe_denial(e)),
            HttpError::InvalidUrl(m) => write!(f, "invalid URL: {m}"),
            HttpError::Transport(m) => write!(f, "HTTP request failed: {m}"),
        }
    }
}

impl std::error::Error for HttpError {}

fn transport(e: ErrorCode) -> HttpError {
    match e {
        ErrorCode::HttpRequestDenied => HttpError::Denied(CapabilityError {
            capability: "http".into(),
            detail: "request denied by the host".into(),
            grant_hint: String::new(),
        }),
        other => HttpError::Transport(format!("{other:?}")),
    }
}

/// An HTTP request under construction.
#[derive(Debug, Clone)]
pub struct Request {
    method: Method,
    url: String,
    headers: Vec<(String, String)>,
    body: Option<Vec<u8>>,
}

impl Request {
    /// A GET request.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new(Method::Get, url)
    }

    /// A POST request with a body.
    pub fn post(url: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        let mut r = Self::new(Method::Post, url);
        r.body = Some(body.into());
        r
    }

    /// A PATCH request with a body.
    pub fn patch(url: impl Into<String>, body: impl Into<Vec<u8>>) -> Self {
        let mut r = Self::new(Method::Patch, url);
        r.body = Some(body.into());
        r
    }

    fn new(method: Method, url: impl Into<String>) -> Self {
        Self {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: None,
        }
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Adds `Authorization: Bearer <secret>` using a host-held secret.
    pub fn bearer_secret(self, secret_name: &str) -> Result<Self, HttpError> {
        let token = config::secret_ref(secret_name).map_err(HttpError::Denied)?;
        Ok(self.header("authorization", format!("Bearer {token}")))
    }

    /// Adds `Authorization: Bearer <secret>` when the host holds
    /// `secret_name` for this plugin, and leaves the request as it is when it
    /// does not (a local model server run without a key): unlike cloning the
    /// request to try [`Request::bearer_secret`], it never copies the body.
    pub fn bearer_secret_if_granted(self, secret_name: &str) -> Self {
        match config::secret_ref(secret_name) {
            Ok(token) => self.header("authorization", format!("Bearer {token}")),
            Err(_) => self,
        }
    }

    /// A POST request whose body is written by [`Request::send_json`] (sent
    /// with [`Request::send`], it would go out with an empty body of
    /// unknown length, chunked).
    pub fn post_json(url: impl Into<String>) -> Self {
        Self::new(Method::Post, url)
    }

    /// Sends the request and waits for the response head.
    pub fn send(mut self) -> Result<Response, HttpError> {
        let data = self.body.take();
        let length = data.as_ref().map(|b| b.len() as u64);
        self.send_with(length, |out| {
            for chunk in data.iter().flat_map(|d| d.chunks(WRITE_BYTES)) {
                out.blocking_write_and_flush(chunk)
                    .map_err(|e| HttpError::Transport(format!("writing body: {e:?}")))?;
            }
            Ok(())
        })
    }

    /// Sends the request with `body` as its JSON body (in place of any body
    /// given before), and waits for the response head. The JSON is written
    /// into the request stream as it is serialized, a few KiB at a time, so
    /// the guest never holds the whole text: a model request is mostly tool
    /// schemas, tens of KiB each turn, and an instance keeps its heap's
    /// high-water mark resident until the call ends. The body goes out with
    /// its Content-Length (measured by a first, counting pass), not chunked,
    /// so `body` must serialize to the same bytes twice (as serde_json does
    /// for any value; a body that did not would fail in the host).
    pub fn send_json<T: serde::Serialize + ?Sized>(self, body: &T) -> Result<Response, HttpError> {
        let serialize = |e: serde_json::Error| HttpError::InvalidUrl(format!("request body: {e}"));
        // One writer type for both passes: the body's serializer is
        // instantiated once for them, not once per pass.
        let mut counted = BodyWriter::counting();
        serde_json::to_writer(&mut counted, body).map_err(serialize)?;
        let length = counted.written;
        self.send_with(Some(length), |out| {
            let mut w = BodyWriter::streaming(out);
            let result = serde_json::to_writer(&mut w, body).and_then(|()| {
                use std::io::Write;
                w.flush().map_err(serde_json::Error::io)
            });
            if let Some(e) = w.failed.take() {
                return Err(e);
            }
            // Serializing is deterministic, and a body that differed from
            // its Content-Length anyway would fail in the host (wasi:http
            // checks what is written against it), not reach the server.
            result.map_err(serialize)
        })
    }

    /// Sends the request with a body of `length` bytes (none if `None`)
    /// that `write` writes into the request's body stream.
    fn send_with(
        self,
        length: Option<u64>,
        write: impl FnOnce(&OutputStream) -> Result<(), HttpError>,
    ) -> Result<Response, HttpError> {
        config::check_http(&self.url).map_err(|e| {
            if e.detail.starts_with("invalid URL") {
                HttpError::InvalidUrl(e.detail)
            } else {
                HttpError::Denied(e)
            }
        })?;
        let (scheme, authority, path) = split_url(&self.url)?;
        let headers = Fields::new();
        // A known body goes out with Content-Length, not chunked: some servers
        // (several LLM servers among them) refuse chunked request bodies.
        let has_length = self
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-length"));
        if let (Some(len), false) = (length, has_length) {
            headers
                .append("content-length", len.to_string().as_bytes())
                .map_err(|e| HttpError::InvalidUrl(format!("content-length: {e:?}")))?;
        }
        for (k, v) in &self.headers {
            headers
                .append(k, v.as_bytes())
                .map_err(|e| HttpError::InvalidUrl(format!("header {k}: {e:?}")))?;
        }
        let req = OutgoingRequest::new(headers);
        let bad = |what: &str| HttpError::InvalidUrl(format!("{what} rejected"));
        req.set_method(&self.method).map_err(|_| bad("method"))?;
        req.set_scheme(Some(&scheme)).map_err(|_| bad("scheme"))?;
        req.set_authority(Some(&authority))
            .map_err(|_| bad("authority"))?;
        req.set_path_with_query(Some(&path))
            .map_err(|_| bad("path"))?;
        let body = req.body().map_err(|_| bad("body"))?;
        let pending = outgoing_handler::handle(req, None).map_err(transport)?;
        {
            let out = body.write().map_err(|_| bad("body stream"))?;
            write(&out)?;
        }
        OutgoingBody::finish(body, None).map_err(transport)?;
        pending.subscribe().block();
        let response = match pending.get() {
            Some(Ok(Ok(r))) => r,
            Some(Ok(Err(e))) => return Err(transport(e)),
            _ => return Err(HttpError::Transport("no response".into())),
        };
        let status = response.status();
        let headers = response
            .headers()
            .entries()
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
            .collect();
        let body = response
            .consume()
            .map_err(|_| HttpError::Transport("response body unavailable".into()))?;
        let stream = body
            .stream()
            .map_err(|_| HttpError::Transport("response body unavailable".into()))?;
        Ok(Response {
            status,
            headers,
            stream: Some(stream),
            _body: body,
            _response: response,
        })
    }
}

/// Most bytes one `blocking-write-and-flush` takes (the wasi:io limit).
const WRITE_BYTES: usize = 4096;

/// Counts what is written to it and, given a request body stream, writes it
/// there in pieces of [`WRITE_BYTES`]. A failed write is kept in `failed`, as
/// the typed error the caller returns.
struct BodyWriter<'a> {
    out: Option<&'a OutputStream>,
    buf: Vec<u8>,
    written: u64,
    failed: Option<HttpError>,
}

impl<'a> BodyWriter<'a> {
    /// Only counts.
    fn counting() -> Self {
        Self {
            out: None,
            buf: Vec::new(),
            written: 0,
            failed: None,
        }
    }

    /// Writes into `out`.
    fn streaming(out: &'a OutputStream) -> Self {
        Self {
            out: Some(out),
            buf: Vec::with_capacity(WRITE_BYTES),
            written: 0,
            failed: None,
        }
    }

    fn send_buffered(&mut self) -> std::io::Result<()> {
        let Some(out) = self.out else { return Ok(()) };
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Err(e) = out.blocking_write_and_flush(&self.buf) {
            self.failed = Some(HttpError::Transport(format!("writing body: {e:?}")));
            return Err(std::io::ErrorKind::BrokenPipe.into());
        }
        self.buf.clear();
        Ok(())
    }
}

impl std::io::Write for BodyWriter<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.out.is_none() {
            self.written += data.len() as u64;
            return Ok(data.len());
        }
        let n = data.len().min(WRITE_BYTES - self.buf.len());
        // Not `&data[..n]`: its bounds check would add a panic location to
        // every component's data image.
        self.buf.extend(data.iter().take(n));
        self.written += n as u64;
        if self.buf.len() == WRITE_BYTES {
            self.send_buffered()?;
        }
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.send_buffered()
    }
}

fn split_url(url: &str) -> Result<(Scheme, String, String), HttpError> {
    let (scheme, rest) = if let Some(r) = url.strip_prefix("https://") {
        (Scheme::Https, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (Scheme::Http, r)
    } else {
        return Err(HttpError::InvalidUrl(format!("{url}: only http and https")));
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() {
        return Err(HttpError::InvalidUrl(format!("{url}: no host")));
    }
    Ok((scheme, authority.to_string(), path))
}

/// Most bytes [`Response::next_chunk`] returns at once. It bounds a streaming
/// call's memory when the server sends faster than the guest reads (a local
/// model, a stalled network catching up): the chunk and the SSE decoder's copy
/// of it are the guest heap's largest allocations, and an instance's memory
/// never shrinks while it runs. 16 KiB is still a hundred or more SSE deltas
/// per read.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// A response whose body is read as it arrives.
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers (lower-case names).
    pub headers: Vec<(String, String)>,
    stream: Option<InputStream>,
    _body: IncomingBody,
    _response: wasip2::http::types::IncomingResponse,
}

impl Response {
    /// The next chunk of the body (at most [`CHUNK_BYTES`]), `None` at the end.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
        let Some(stream) = &self.stream else {
            return Ok(None);
        };
        match stream.blocking_read(CHUNK_BYTES as u64) {
            Ok(mut bytes) => {
                // Take whatever else is already buffered without waiting, so a
                // burst of small chunks costs one wake-up instead of one each;
                // the buffer is sized once, not doubled on every append.
                while bytes.len() < CHUNK_BYTES {
                    match stream.read((CHUNK_BYTES - bytes.len()) as u64) {
                        Ok(more) if !more.is_empty() => {
                            bytes.reserve_exact(CHUNK_BYTES - bytes.len());
                            bytes.extend_from_slice(&more);
                        }
                        _ => break,
                    }
                }
                Ok(Some(bytes))
            }
            Err(StreamError::Closed) => {
                self.stream = None;
                Ok(None)
            }
            Err(StreamError::LastOperationFailed(e)) => {
                Err(HttpError::Transport(e.to_debug_string()))
            }
        }
    }

    /// The whole body.
    pub fn bytes(mut self) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        if let Some(mut s) = self.stream.take() {
            s.read_to_end(&mut out)
                .map_err(|e| HttpError::Transport(e.to_string()))?;
        }
        Ok(out)
    }

    /// The whole body as (lossy) UTF-8.
    pub fn text(self) -> Result<String, HttpError> {
        Ok(String::from_utf8_lossy(&self.bytes()?).into_owned())
    }

    /// A header value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
