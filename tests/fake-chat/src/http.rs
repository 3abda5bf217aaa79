//! Small helpers shared by both fakes: locking, responses, body parsing,
//! timestamps and the WebSocket connection loop.

use axum::body::Body;
use axum::extract::ws::{CloseFrame, Message, WebSocket};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Map, Value};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Locks, ignoring poison (a panicking test must not wedge the server).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A response with a body and extra headers.
pub(crate) fn respond(
    status: u16,
    content_type: &str,
    headers: &[(&str, String)],
    body: impl Into<Body>,
) -> Response {
    let mut b = Response::builder()
        .status(status)
        .header("content-type", content_type);
    for (k, v) in headers {
        b = b.header(*k, v.as_str());
    }
    b.body(body.into())
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// A JSON response.
pub(crate) fn json_response(status: u16, v: &Value) -> Response {
    respond(status, "application/json", &[], v.to_string())
}

/// An empty response (204 and the like).
pub(crate) fn empty_response(status: u16) -> Response {
    Response::builder()
        .status(status)
        .body(Body::empty())
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

/// Headers as `(lower-case name, value)` pairs.
pub(crate) fn header_list(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// One header's value as text.
pub(crate) fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// Parses a request body by content type: JSON, form fields (as strings),
/// or multipart (`payload_json` merged in, files listed under `_files`).
/// Anything else is tried as JSON, then as a form; empty gives `Null`.
pub(crate) fn parse_body(content_type: Option<&str>, body: &[u8]) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    let ct = content_type.unwrap_or("").to_ascii_lowercase();
    if ct.starts_with("multipart/form-data")
        && let Some(boundary) = boundary_of(content_type.unwrap_or(""))
    {
        return parse_multipart(&boundary, body);
    }
    if ct.starts_with("application/x-www-form-urlencoded") {
        return form_object(&String::from_utf8_lossy(body));
    }
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return v;
    }
    let text = String::from_utf8_lossy(body);
    if text.contains('=') {
        return form_object(&text);
    }
    Value::Null
}

/// Form fields as a JSON object of strings (a repeated key keeps the last).
pub(crate) fn form_object(s: &str) -> Value {
    let mut map = Map::new();
    for (k, v) in form_decode(s) {
        map.insert(k, Value::String(v));
    }
    Value::Object(map)
}

/// Decodes `application/x-www-form-urlencoded` pairs.
pub(crate) fn form_decode(s: &str) -> Vec<(String, String)> {
    s.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn boundary_of(content_type: &str) -> Option<String> {
    content_type.split(';').find_map(|p| {
        let p = p.trim();
        let v = p.strip_prefix("boundary=")?;
        Some(v.trim_matches('"').to_string())
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `name="x"` style parameter from a Content-Disposition header line.
fn disposition_param(head: &str, param: &str) -> Option<String> {
    let line = head
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("content-disposition"))?;
    line.split(';').find_map(|seg| {
        let (k, v) = seg.trim().split_once('=')?;
        (k.trim().eq_ignore_ascii_case(param)).then(|| v.trim().trim_matches('"').to_string())
    })
}

fn part_content_type(head: &str) -> Option<String> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case("content-type")
            .then(|| v.trim().to_string())
    })
}

fn parse_multipart(boundary: &str, body: &[u8]) -> Value {
    let delim = format!("--{boundary}").into_bytes();
    let mut obj = Map::new();
    let mut files = Vec::new();
    let mut rest = body;
    // Skip the preamble up to the first delimiter.
    match find(rest, &delim) {
        Some(i) => rest = &rest[i + delim.len()..],
        None => return Value::Null,
    }
    loop {
        if rest.starts_with(b"--") {
            break; // closing delimiter
        }
        let Some(end) = find(rest, &delim) else { break };
        let mut part = &rest[..end];
        rest = &rest[end + delim.len()..];
        if part.starts_with(b"\r\n") {
            part = &part[2..];
        }
        if part.ends_with(b"\r\n") {
            part = &part[..part.len() - 2];
        }
        let Some(h_end) = find(part, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..h_end]).into_owned();
        let content = &part[h_end + 4..];
        let name = disposition_param(&head, "name").unwrap_or_default();
        if let Some(filename) = disposition_param(&head, "filename") {
            files.push(serde_json::json!({
                "field": name, "filename": filename, "size": content.len(),
                "content_type": part_content_type(&head),
            }));
        } else if name == "payload_json" {
            if let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(content) {
                obj.extend(m);
            }
        } else {
            obj.insert(
                name,
                Value::String(String::from_utf8_lossy(content).into_owned()),
            );
        }
    }
    obj.insert("_files".into(), Value::Array(files));
    Value::Object(obj)
}

/// Microseconds since the Unix epoch.
pub(crate) fn unix_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_micros()
}

/// Seconds since the Unix epoch.
pub(crate) fn unix_secs() -> u64 {
    (unix_micros() / 1_000_000) as u64
}

/// Now as ISO 8601 with microseconds and `+00:00`, as Discord writes it.
pub(crate) fn iso_now() -> String {
    let micros = unix_micros();
    let secs = (micros / 1_000_000) as i64;
    let frac = (micros % 1_000_000) as u32;
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:06}+00:00",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )
}

/// Howard Hinnant's days-to-civil conversion.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = (if z >= 0 { z } else { z - 146_096 }) / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// What a WebSocket connection task is told to do by the rest of the fake.
#[derive(Debug)]
pub(crate) enum Out {
    /// Send one text frame.
    Text(String),
    /// Send a close frame with this code and reason, then hang up.
    Close(u16, String),
    /// Hang up at once: no close frame, the TCP connection just ends.
    Drop,
}

/// What a connection task reports about a frame it received.
pub(crate) enum In<'a> {
    /// A text (or binary, decoded lossily) frame.
    Text(&'a str),
    /// The client sent a close frame: code (1005 when it carried none) and
    /// reason. [`In::Gone`] follows.
    ClientClose(u16, String),
    /// The connection ended otherwise: the server closed or dropped it, or
    /// the TCP stream ended or failed.
    Gone,
}

/// Runs one WebSocket: writes what arrives on `rx` in order, and hands each
/// received text frame, a client close, and finally [`In::Gone`] (always
/// exactly once) to `on_in`. Pings are answered by the WebSocket layer
/// itself. Returns when either side hangs up.
pub(crate) async fn run_socket(
    mut socket: WebSocket,
    mut rx: mpsc::UnboundedReceiver<Out>,
    mut on_in: impl FnMut(In<'_>),
) {
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(Out::Text(t)) => {
                    if socket.send(Message::Text(t.into())).await.is_err() {
                        on_in(In::Gone);
                        return;
                    }
                }
                Some(Out::Close(code, reason)) => {
                    let frame = CloseFrame { code, reason: reason.into() };
                    let _ = socket.send(Message::Close(Some(frame))).await;
                    // Give the client a moment to answer the close handshake.
                    let _ = tokio::time::timeout(Duration::from_secs(2), async {
                        while let Some(Ok(m)) = socket.recv().await {
                            if matches!(m, Message::Close(_)) {
                                break;
                            }
                        }
                    })
                    .await;
                    on_in(In::Gone);
                    return;
                }
                Some(Out::Drop) | None => {
                    on_in(In::Gone);
                    return; // dropping `socket` ends the TCP connection, no close frame
                }
            },
            msg = socket.recv() => match msg {
                Some(Ok(Message::Text(t))) => on_in(In::Text(t.as_str())),
                Some(Ok(Message::Binary(b))) => {
                    on_in(In::Text(&String::from_utf8_lossy(&b)));
                }
                Some(Ok(Message::Close(frame))) => {
                    let (code, reason) = frame
                        .map(|f| (f.code, f.reason.to_string()))
                        .unwrap_or((1005, String::new()));
                    on_in(In::ClientClose(code, reason));
                    // axum/tungstenite answers the close frame when we keep polling;
                    // flush it, then hang up.
                    let _ = tokio::time::timeout(Duration::from_millis(500), socket.recv()).await;
                    on_in(In::Gone);
                    return;
                }
                Some(Ok(_)) => {} // ping/pong: answered by tungstenite
                Some(Err(_)) | None => {
                    on_in(In::Gone);
                    return;
                }
            },
        }
    }
}
