//! `turnstone serve` under attack, over loopback against the real binary:
//! slow clients (half a request head, a declared body never sent, idle
//! connections) are closed while normal clients from another address are
//! served; a flood of wrong-password logins is throttled before any hashing
//! and leaves `/health` and a running turn working; the API answers
//! without revealing other users' workstreams; and an event stream whose
//! client stops reading catches up from the replay ring, or is told exactly
//! how many events it lost.

mod support;

use serde_json::json;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};
use support::{Server, sse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turnstone_scripted_llm::openai;

const LIMITS: &str = "[server]\nheader_timeout = 1\nbody_timeout = 1\nmax_connections_per_ip = 8\n";

fn addr(srv: &Server) -> SocketAddr {
    srv.base.trim_start_matches("http://").parse().unwrap()
}

/// A raw connection to the server from `from` (another loopback address
/// stands for another client).
async fn connect(srv: &Server, from: IpAddr) -> tokio::net::TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(from, 0)).unwrap();
    sock.connect(addr(srv)).await.unwrap()
}

/// Reads until the server closes; returns what it sent and how long it took.
async fn until_closed(
    mut s: tokio::net::TcpStream,
    within: Duration,
) -> Option<(String, Duration)> {
    let t = Instant::now();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(within, async {
        let mut chunk = [0u8; 4096];
        loop {
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await;
    read.ok()
        .map(|()| (String::from_utf8_lossy(&buf).into_owned(), t.elapsed()))
}

fn client_from(ip: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_closed_and_normal_ones_are_served() {
    let srv = Server::start(Vec::new(), LIMITS, &[]).await;
    let slow: IpAddr = "127.0.0.2".parse().unwrap();
    let normal = client_from("127.0.0.1".parse().unwrap());

    // Half a request line, half the headers, nothing at all: each closed
    // after the header timeout (1 s), without an answer.
    let opened = Instant::now();
    let mut half_line = connect(&srv, slow).await;
    half_line.write_all(b"GET /hea").await.unwrap();
    let mut half_head = connect(&srv, slow).await;
    half_head
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        .await
        .unwrap();
    let silent = connect(&srv, slow).await;
    // A declared body that never comes: 400 after the body timeout.
    let mut no_body = connect(&srv, slow).await;
    no_body
        .write_all(
            b"POST /v1/api/auth/login HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n{\"user",
        )
        .await
        .unwrap();
    for (name, conn) in [
        ("half line", half_line),
        ("half head", half_head),
        ("silent", silent),
    ] {
        let (sent, _) = until_closed(conn, Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{name}: still open after 10 s"));
        let took = opened.elapsed();
        assert!(
            took >= Duration::from_millis(800),
            "{name}: closed too early ({took:?})"
        );
        assert!(!sent.contains("200 OK"), "{name}: {sent}");
    }
    let (sent, _) = until_closed(no_body, Duration::from_secs(10))
        .await
        .expect("stalled body: still open after 10 s");
    assert!(sent.starts_with("HTTP/1.1 400"), "{sent}");
    assert!(sent.contains("could not be read"), "{sent}");

    // A full request still works on a fresh connection, and keep-alive
    // connections serve several requests.
    for _ in 0..3 {
        let r = normal.get(srv.url("/health")).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }

    // The per-address cap: eight held connections, the ninth is refused with
    // 503 — while another address is served as usual.
    let mut held = Vec::new();
    for _ in 0..8 {
        let mut c = connect(&srv, slow).await;
        c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        held.push(c);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let ninth = connect(&srv, slow).await;
    let (sent, _) = until_closed(ninth, Duration::from_secs(5))
        .await
        .expect("refused");
    assert!(sent.starts_with("HTTP/1.1 503"), "{sent}");
    assert!(sent.contains("too many connections"), "{sent}");
    let r = normal.get(srv.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), 200, "another address is not affected");
    // Once the slow ones time out, the address is welcome again.
    for c in held {
        until_closed(c, Duration::from_secs(10))
            .await
            .expect("held connection closed");
    }
    let r = client_from(slow)
        .get(srv.url("/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (_, m) = srv.call("GET", "/metrics", None, None).await;
    let m = m.as_str().unwrap_or_default().to_string();
    assert!(
        m.lines().any(
            |l| l.starts_with("turnstone_http_connections_refused_total ") && !l.ends_with(" 0")
        ),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_flood_is_throttled_and_leaves_health_and_turns_working() {
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "call_f",
                "bash",
                &[r#"{"command": "sleep 1; echo flood-proof"}"#],
            )),
            sse(openai::text(&["still here"])),
        ],
        "",
        &["--skip-permissions"],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
        .await;
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(&admin),
        Some(json!({"message": "run it"})),
    )
    .await;
    // 32 clients, 8 wrong logins each, all at once, while the turn runs.
    let flood: Vec<_> = (0..32)
        .map(|i| {
            let http = reqwest::Client::new();
            let url = srv.url("/v1/api/auth/login");
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for _ in 0..8 {
                    let body =
                        json!({"username": format!("user{}", i % 4), "password": "wrong-password"});
                    let r = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body.to_string())
                        .send()
                        .await
                        .unwrap();
                    let retry = r.headers().get("retry-after").is_some();
                    statuses.push((r.status().as_u16(), retry));
                }
                statuses
            })
        })
        .collect();
    // /health answers throughout.
    for _ in 0..20 {
        let (s, v) = srv.call("GET", "/health", None, None).await;
        assert_eq!(s, 200, "{v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut all = Vec::new();
    for f in flood {
        all.extend(f.await.unwrap());
    }
    assert_eq!(all.len(), 256);
    let unauthorized = all.iter().filter(|(s, _)| *s == 401).count();
    let throttled: Vec<_> = all.iter().filter(|(s, _)| *s == 429).collect();
    assert!(all.iter().all(|(s, _)| *s == 401 || *s == 429), "{all:?}");
    // The default per-address burst is 10: almost every attempt was refused
    // before hashing (a few refills may land during the flood).
    assert!(
        unauthorized <= 16,
        "{unauthorized} attempts reached Argon2id"
    );
    assert!(throttled.len() >= 240 && throttled.iter().all(|(_, r)| *r));
    // The running turn finished normally.
    let end = ev.turn_end().await;
    assert_eq!(end.data["state"], "idle");
    assert_eq!(end.data["content"], "still here");
    let (_, m) = srv.call("GET", "/metrics", None, None).await;
    assert!(
        m.as_str()
            .unwrap_or_default()
            .contains("turnstone_logins_throttled_total"),
        "{m}"
    );
    // Another address is not throttled by this one's failures.
    let other = client_from("127.0.0.3".parse().unwrap());
    let r = other
        .post(srv.url("/v1/api/auth/login"))
        .header("content-type", "application/json")
        .body(json!({"username": "admin", "password": "correct-horse"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_users_workstreams_stay_invisible_and_bodies_are_sized() {
    let srv = Server::start(vec![sse(openai::text(&["saved"]))], "", &[]).await;
    let admin = srv.setup_admin().await;
    let bob = srv.user("bob", "operator").await;
    let mine = srv.create(&admin, json!({})).await;

    // /new with someone else's id answers like every route does for a
    // workstream the caller cannot see; with one's own id it is a conflict.
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/workstreams/new",
            Some(&bob),
            Some(json!({"ws_id": mine})),
        )
        .await;
    assert_eq!(s, 404, "{v}");
    let (s2, v2) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{mine}"),
            Some(&bob),
            None,
        )
        .await;
    assert_eq!((s2, &v2), (404, &v), "the same answer as any other route");
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/workstreams/new",
            Some(&admin),
            Some(json!({"ws_id": mine})),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    // A free id is created as asked.
    let free = "0123456789abcdef0123456789abcdef";
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/workstreams/new",
            Some(&bob),
            Some(json!({"ws_id": free})),
        )
        .await;
    assert_eq!((s, v["ws_id"].as_str()), (200, Some(free)), "{v}");

    // A 10 MB JSON body on /new: 413 like every other route.
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(10 << 20));
    let r = srv
        .http
        .post(srv.url("/v1/api/workstreams/new"))
        .bearer_auth(&admin)
        .header("content-type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let v: serde_json::Value = serde_json::from_slice(&r.bytes().await.unwrap()).unwrap();
    assert!(v["error"].as_str().unwrap().contains("too large"), "{v}");

    // A closed (saved) workstream: its owner lists attachments, uploads one
    // and retitles it; another user gets 404 for all of it.
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{mine}/send"),
        Some(&admin),
        Some(json!({"message": "hi"})),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s, _) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{mine}/close"),
            Some(&admin),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, 200);
    let (s, v) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{mine}/attachments"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["attachments"], json!([]));
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(b"note text\n".to_vec())
            .file_name("note.txt")
            .mime_str("text/plain")
            .unwrap(),
    );
    let r = srv
        .http
        .post(srv.url(&format!("/v1/api/workstreams/{mine}/attachments")))
        .bearer_auth(&admin)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (s, v) = srv
        .call(
            "GET",
            &format!("/v1/api/workstreams/{mine}/attachments"),
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(
        (s, v["attachments"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{v}"
    );
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{mine}/title"),
            Some(&admin),
            Some(json!({"title": "Renamed while saved"})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, saved) = srv
        .call("GET", "/v1/api/workstreams/saved", Some(&admin), None)
        .await;
    let row = saved["workstreams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["ws_id"] == mine.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{saved}"));
    assert_eq!(row["title"], "Renamed while saved");
    for (method, path, body) in [
        (
            "GET",
            format!("/v1/api/workstreams/{mine}/attachments"),
            None,
        ),
        (
            "POST",
            format!("/v1/api/workstreams/{mine}/title"),
            Some(json!({"title": "mine now"})),
        ),
        ("GET", format!("/v1/api/workstreams/{mine}/history"), None),
    ] {
        let (s, v) = srv.call(method, &path, Some(&bob), body).await;
        assert_eq!(s, 404, "{method} {path}: {v}");
    }
}

/// Replies that fill the stalled connection first: 16 tokens of 64 KiB,
/// 1 MiB a turn in about 25 events, until the server's send buffer for the
/// connection stops growing (2.8 MB here, `net.ipv4.tcp_wmem`); a turn more
/// fills hyper's write queue too (about 400 KiB).
const FILL_TOKENS: usize = 16;
/// Fill turns at most before the test gives up on the send buffer filling.
const MAX_FILL_TURNS: usize = 12;
/// Then short turns, about 8 events each: 400 events that can only wait in
/// the live channel, more than a short ring's 256 slots.
const SHORT_TURNS: usize = 50;

/// Opens `path` as an event stream on a raw connection with a 4 KiB receive
/// buffer and reads only the response head: the server's writes back up as
/// soon as the socket is full, and its subscriber falls behind.
async fn stalled_subscriber(srv: &Server, token: &str, path: &str) -> tokio::net::TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(addr(srv)).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).await.unwrap(), 1, "closed in the head");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("transfer-encoding: chunked"),
        "{head}"
    );
    s
}

/// Bytes waiting in the server's send buffer on the connection whose client
/// end is `client` (`/proc/net/tcp`, `tx_queue`).
fn server_send_queue(srv: &Server, client: SocketAddr) -> u64 {
    let hex = |a: SocketAddr| match a {
        SocketAddr::V4(v4) => format!(
            "{:08X}:{:04X}",
            u32::from_le_bytes(v4.ip().octets()),
            v4.port()
        ),
        SocketAddr::V6(_) => unreachable!("the test connects over IPv4"),
    };
    let (local, remote) = (hex(addr(srv)), hex(client));
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 4 && f[1] == local && f[2] == remote)
        .and_then(|f| u64::from_str_radix(f[4].split(':').next()?, 16).ok())
        .unwrap_or_else(|| panic!("no {local} -> {remote} connection in /proc/net/tcp"))
}

/// An SSE frame: its `id` and its `data`.
type Sse = (Option<u64>, serde_json::Value);

/// The SSE frames in a chunked body read so far; a frame cut off at the end
/// is left out.
fn sse_frames(raw: &[u8]) -> Vec<Sse> {
    let mut body = Vec::new();
    let mut rest = raw;
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let line = std::str::from_utf8(&rest[..eol]).unwrap();
        let size = usize::from_str_radix(line.trim(), 16)
            .unwrap_or_else(|e| panic!("bad chunk size line {line:?}: {e}"));
        let start = eol + 2;
        if rest.len() < start + size + 2 {
            break;
        }
        body.extend_from_slice(&rest[start..start + size]);
        rest = &rest[start + size + 2..];
    }
    let text = String::from_utf8(body).unwrap();
    let mut blocks: Vec<&str> = text.split("\n\n").collect();
    blocks.pop(); // after the last "\n\n": an unfinished frame or nothing
    let mut frames = Vec::new();
    for block in blocks {
        let mut id = None;
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.parse().unwrap());
            } else if let Some(v) = line.strip_prefix("data: ") {
                frames.push((id, serde_json::from_str(v).unwrap()));
            }
        }
    }
    frames
}

/// A fill turn's reply.
fn fill_reply(i: usize) -> Vec<String> {
    (0..FILL_TOKENS)
        .map(|k| format!("<fill {i}.{k}>{}", "x".repeat(64 * 1024)))
        .collect()
}

/// What a stalled subscriber and a reading one saw of the same turns.
struct Lag {
    /// The stalled subscriber's frames, once it read again.
    stalled: Vec<Sse>,
    /// The numbered frames of a subscriber that read all along.
    live: Vec<(u64, serde_json::Value)>,
    /// Turns run (fill and short).
    turns: usize,
    /// The server's counts of lagging workstream subscribers.
    resynced: u64,
    truncated: u64,
}

/// Starts a server with `config`, then runs the turns on a new workstream
/// while a stalled subscriber of its event stream reads nothing, then reads
/// that subscriber until the last turn's end.
async fn turns_past_a_stalled_subscriber(config: &str) -> Lag {
    let srv = Server::start(Vec::new(), config, &[]).await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let path = format!("/v1/api/workstreams/{ws}/events?user_turn=1");
    let (srv, admin, ws, path) = (&srv, admin.as_str(), ws.as_str(), path.as_str());
    let mut stalled = stalled_subscriber(srv, admin, path).await;
    let mut reader = srv.events(path, admin, None).await;
    let turn = |i: usize, reply: Vec<String>| async move {
        let parts: Vec<&str> = reply.iter().map(String::as_str).collect();
        srv.llm.push(sse(openai::text(&parts)));
        let (s, v) = srv
            .call(
                "POST",
                &format!("/v1/api/workstreams/{ws}/send"),
                Some(admin),
                Some(json!({"message": format!("turn {i}")})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
    };
    let client = stalled.local_addr().unwrap();
    let mut turns = 0;
    let mut queued = 0;
    loop {
        turn(turns, fill_reply(turns)).await;
        reader.turn_end().await;
        turns += 1;
        let now = server_send_queue(srv, client);
        if now > 0 && now == queued {
            break;
        }
        queued = now;
        assert!(
            turns < MAX_FILL_TURNS,
            "the send buffer still grows: {now} bytes"
        );
    }
    for k in 0..SHORT_TURNS {
        turn(turns, vec![format!("<short {k}>")]).await;
        reader.turn_end().await;
        turns += 1;
    }
    let last = format!("<short {}>", SHORT_TURNS - 1);
    let mut raw = Vec::new();
    let mut seen_last = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut chunk = vec![0u8; 1 << 16];
    let stalled_frames = loop {
        let n = tokio::time::timeout_at(deadline, stalled.read(&mut chunk))
            .await
            .unwrap_or_else(|_| panic!("the last turn's end not seen within 60 s"))
            .unwrap();
        assert!(n > 0, "the server closed the stream");
        // Only the new bytes (and a marker's length before them) can hold
        // the last reply's text for the first time.
        let from = raw.len().saturating_sub(last.len());
        raw.extend_from_slice(&chunk[..n]);
        seen_last = seen_last
            || raw[from..]
                .windows(last.len())
                .any(|w| w == last.as_bytes());
        if !seen_last || !raw.ends_with(b"\n\n\r\n") {
            continue;
        }
        let frames = sse_frames(&raw);
        let ended = frames
            .iter()
            .skip_while(|(_, d)| d["text"] != last.as_str())
            .any(|(_, d)| d["type"] == "ws_state");
        if ended {
            break frames;
        }
    };
    let metrics = srv.metrics().await;
    let counter = |outcome: &str| {
        let key =
            format!("turnstone_sse_lag_total{{stream=\"workstream\",outcome=\"{outcome}\"}} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(key.as_str()))
            .unwrap_or_else(|| panic!("no {key} in {metrics}"))
            .parse::<u64>()
            .unwrap()
    };
    let live = reader
        .seen
        .iter()
        .filter_map(|f| Some((f.id.as_deref()?.parse().unwrap(), f.data.clone())))
        .collect();
    Lag {
        stalled: stalled_frames,
        live,
        turns,
        resynced: counter("resynced"),
        truncated: counter("truncated"),
    }
}

/// The numbered ones of `frames`.
fn numbered(frames: &[Sse]) -> Vec<(u64, serde_json::Value)> {
    frames
        .iter()
        .filter_map(|(id, d)| Some(((*id)?, d.clone())))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_stops_reading_gets_every_event_once_and_in_order() {
    let lag = turns_past_a_stalled_subscriber("").await;
    // It fell behind the live channel and caught up from the ring (the
    // default 2,000 events hold every event of the turns), so it got what
    // a subscriber reading all along got: the same events, ids and order.
    assert!(lag.resynced >= 1, "the subscriber never fell behind");
    assert_eq!(lag.truncated, 0);
    assert!(
        lag.stalled
            .iter()
            .all(|(_, d)| d["type"] != "replay_truncated")
    );
    let stalled = numbered(&lag.stalled);
    assert_eq!(stalled.len(), lag.live.len());
    for (got, want) in stalled.iter().zip(&lag.live) {
        assert!(got == want, "event {} differs from the live one", got.0);
    }
    let users = stalled.iter().filter(|(_, d)| d["type"] == "user_turn");
    assert_eq!(users.count(), lag.turns);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_left_behind_by_a_short_ring_is_told_exactly_what_it_lost() {
    let lag = turns_past_a_stalled_subscriber("[server]\nevent_ring = 16\n").await;
    // 16 events in the ring and 256 in the live channel cannot cover the
    // short turns. Each time the subscriber falls that far behind, it is told
    // how many events it lost and the last one it got, and its ids then jump
    // by exactly that many; every event it got is the one a subscriber
    // reading all along got, and nothing is unaccounted for.
    let notices = lag
        .stalled
        .iter()
        .filter(|(_, d)| d["type"] == "replay_truncated")
        .count() as u64;
    assert!(notices >= 1, "the subscriber was never told it lost events");
    assert_eq!(lag.truncated, notices);
    let live: std::collections::BTreeMap<u64, &serde_json::Value> =
        lag.live.iter().map(|(id, d)| (*id, d)).collect();
    let mut prev: Option<u64> = None;
    let mut skip = 0;
    let (mut got, mut lost_total) = (0u64, 0u64);
    for (id, data) in &lag.stalled {
        match id {
            None if data["type"] == "replay_truncated" => {
                assert_eq!(data["reason"], "subscriber_lagged", "{data}");
                assert_eq!(data["last_event_id"], json!(prev), "{data}");
                skip = data["lost_count"].as_u64().unwrap();
                assert!(skip > 0, "{data}");
                lost_total += skip;
            }
            None => {}
            Some(id) => {
                if let Some(p) = prev {
                    assert_eq!(*id, p + skip + 1, "ids jump by other than what was lost");
                }
                assert!(
                    live.get(id) == Some(&data),
                    "event {id} differs from the live one"
                );
                prev = Some(*id);
                skip = 0;
                got += 1;
            }
        }
    }
    assert_eq!(skip, 0, "a notice with no event after it");
    assert_eq!(got + lost_total, live.len() as u64);
}

/// Anonymous mappings of process `pid`: (start, end, permissions).
fn anonymous_mappings(pid: u32) -> Vec<(u64, u64, String)> {
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // Anonymous: no path, inode 0.
            (f.len() == 5 && f[4] == "0").then(|| {
                let (a, b) = f[0].split_once('-').unwrap();
                let hex = |v: &str| u64::from_str_radix(v, 16).unwrap();
                (hex(a), hex(b), f[1].to_string())
            })
        })
        .collect()
}

/// The open-file soft limit of this process (`/proc/self/limits`).
fn open_file_limit() -> u64 {
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let soft = line.split_whitespace().nth(3).unwrap();
    soft.parse().unwrap_or(u64::MAX)
}

/// What the server sets up before its threads start, so a first burst does
/// not stall on it (docs/server.md, "Set up before the first thread"): its
/// descriptor table already holds the open-file limit (up to 16,384), and
/// glibc's thread arena is already writable for 32 MiB. Against a build
/// without them it fails with "FDSize 256", and with only the first with
/// "thread arena writable for Some(2007040) bytes".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_descriptor_table_and_thread_arena_are_sized_before_the_first_burst() {
    let srv = Server::start(Vec::new(), "", &[]).await;
    let status = std::fs::read_to_string(format!("/proc/{}/status", srv.pid())).unwrap();
    let slots: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("FDSize:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    // The server inherits this process's limit.
    let limit = open_file_limit().min(16_384);
    assert!(slots >= limit, "FDSize {slots}, open-file limit {limit}");
    // A glibc thread heap: 64 MiB reserved at a multiple of 64 MiB, its
    // writable part first and the rest inaccessible.
    const HEAP_MAX: u64 = 64 << 20;
    let maps = anonymous_mappings(srv.pid());
    let arena = maps
        .windows(2)
        .find(|w| {
            let ((start, end, perms), (next, next_end, next_perms)) = (&w[0], &w[1]);
            start % HEAP_MAX == 0
                && perms == "rw-p"
                && next == end
                && next_perms == "---p"
                && *next_end == start + HEAP_MAX
        })
        .map(|w| w[0].1 - w[0].0);
    // Under strict overcommit glibc makes freed arena space inaccessible
    // again, so the reserve cannot last there (memory.rs says so).
    let strict = std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
        .is_ok_and(|mode| mode.trim() == "2");
    if strict {
        eprintln!("vm.overcommit_memory = 2: the thread arena's reserve is not checked");
    } else {
        assert!(
            arena.is_some_and(|writable| writable >= 32 << 20),
            "thread arena writable for {arena:?} bytes"
        );
    }
    let health = reqwest::get(format!("{}/health", srv.base)).await.unwrap();
    assert_eq!(health.status(), 200);
}
