//! `turnstone serve` under attack, over loopback against the real binary:
//! slow clients (half a request head, a declared body never sent, idle
//! connections) are closed while normal clients from another address are
//! served; a flood of wrong-password logins is throttled before any hashing
//! and leaves `/health` and a running turn working; and the API answers
//! without revealing other users' workstreams.

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
