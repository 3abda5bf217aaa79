//! Drives both fakes with a plain WebSocket client and raw HTTP/1.1, checking
//! the wire behaviour the adapter tests rely on.

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{WebSocketStream, client_async};
use turnstone_fake_chat::{FakeDiscord, FakeSlack, MessageSpec, slack_file};

type Ws = WebSocketStream<TcpStream>;

/// `host:port` of an `http://` or `ws://` URL.
fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?']).next().unwrap().to_string()
}

/// One request over a fresh connection; returns (status, headers, body).
async fn http(
    url: &str,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let hp = host_port(url);
    let path = &url[url.find(&hp).unwrap() + hp.len()..];
    let mut s = TcpStream::connect(&hp).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {hp}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.unwrap();
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text.as_str(), ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, head.to_ascii_lowercase(), body.to_string())
}

async fn connect(url: &str) -> Ws {
    let tcp = TcpStream::connect(host_port(url)).await.unwrap();
    client_async(url, tcp).await.unwrap().0
}

/// The next text frame as JSON (5 s timeout); `None` when the socket ends.
async fn next_json(ws: &mut Ws) -> Option<Value> {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("frame in time");
        match msg {
            Some(Ok(Message::Text(t))) => return Some(serde_json::from_str(t.as_str()).unwrap()),
            Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return None,
            Some(Ok(_)) => {}
        }
    }
}

async fn send(ws: &mut Ws, v: Value) {
    ws.send(Message::text(v.to_string())).await.unwrap();
}

#[tokio::test]
async fn discord_identify_dispatch_resume_and_rest() {
    let d = FakeDiscord::start("tok").await;
    let auth = [
        ("Authorization", "Bot tok"),
        ("Content-Type", "application/json"),
    ];

    let (status, _, _) = http(&format!("{}/gateway/bot", d.api_base()), "GET", &[], "").await;
    assert_eq!(status, 401);
    let (status, _, body) = http(&format!("{}/gateway/bot", d.api_base()), "GET", &auth, "").await;
    assert_eq!(status, 200);
    let url = serde_json::from_str::<Value>(&body).unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();

    let mut ws = connect(&format!("{url}?v=10&encoding=json")).await;
    let hello = next_json(&mut ws).await.unwrap();
    assert_eq!(hello["op"], 10);
    assert_eq!(hello["d"]["heartbeat_interval"], 1000);
    send(&mut ws, json!({"op": 1, "d": null})).await;
    assert_eq!(next_json(&mut ws).await.unwrap()["op"], 11);
    send(
        &mut ws,
        json!({"op": 2, "d": {"token": "tok", "intents": 37377, "properties": {}}}),
    )
    .await;
    let ready = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (ready["t"].as_str(), ready["s"].as_u64()),
        (Some("READY"), Some(1))
    );
    let session = ready["d"]["session_id"].as_str().unwrap().to_string();
    assert_eq!(d.identify_intents(), vec![json!(37377)]);

    let mut spec = MessageSpec::guild("1200", "222", "333", "alice", "hello");
    spec.attachments.push((
        "log.txt".into(),
        3,
        d.add_file("log.txt", b"abc", "text/plain"),
        "text/plain".into(),
    ));
    let mid = d.message_create(spec);
    let m = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (m["t"].as_str(), m["s"].as_u64()),
        (Some("MESSAGE_CREATE"), Some(2))
    );
    assert_eq!(m["d"]["id"], json!(mid));
    assert_eq!(m["d"]["attachments"][0]["filename"], "log.txt");

    // Drop, inject while down, resume: the missed dispatch is replayed, then RESUMED.
    assert!(d.drop_connection());
    assert!(next_json(&mut ws).await.is_none());
    d.message_create(MessageSpec::dm("1201", "333", "alice", "while down"));
    let mut ws = connect(&d.gateway_url()).await;
    assert_eq!(next_json(&mut ws).await.unwrap()["op"], 10);
    send(
        &mut ws,
        json!({"op": 6, "d": {"token": "tok", "session_id": session, "seq": 2}}),
    )
    .await;
    let replayed = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (replayed["s"].as_u64(), replayed["d"]["content"].as_str()),
        (Some(3), Some("while down"))
    );
    let resumed = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (resumed["t"].as_str(), resumed["s"].as_u64()),
        (Some("RESUMED"), Some(4))
    );
    send(
        &mut ws,
        json!({"op": 6, "d": {"token": "tok", "session_id": "nope", "seq": 1}}),
    )
    .await;
    let invalid = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (invalid["op"].as_u64(), invalid["d"].as_bool()),
        (Some(9), Some(false))
    );
    assert_eq!((d.identify_count(), d.resume_count()), (1, 2));

    // REST: post, edit, thread, interaction callbacks, 429.
    let msgs = format!("{}/channels/1200/messages", d.api_base());
    let (status, _, body) = http(
        &msgs,
        "POST",
        &auth,
        r#"{"content": "hi", "components": []}"#,
    )
    .await;
    assert_eq!(status, 200);
    let posted: Value = serde_json::from_str(&body).unwrap();
    let pid = posted["id"].as_str().unwrap().to_string();
    assert_eq!(posted["author"]["bot"], true);
    let (status, _, _) = http(
        &format!("{msgs}/{pid}"),
        "PATCH",
        &auth,
        r#"{"content": "edited"}"#,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(d.messages_in("1200")[0]["content"], "edited");
    assert_eq!(d.messages_in("1200")[0]["edit_count"], 1);
    let (status, _, body) = http(
        &format!("{msgs}/999"),
        "PATCH",
        &auth,
        r#"{"content": "x"}"#,
    )
    .await;
    assert_eq!(
        (
            status,
            serde_json::from_str::<Value>(&body).unwrap()["code"].as_u64()
        ),
        (404, Some(10008))
    );
    let (status, _, body) = http(
        &format!("{msgs}/{pid}/threads"),
        "POST",
        &auth,
        r#"{"name": "job 17"}"#,
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["id"],
        json!(pid)
    );
    let (status, _, _) = http(
        &format!("{}/channels/{pid}/messages", d.api_base()),
        "POST",
        &auth,
        r#"{"content": "in thread"}"#,
    )
    .await;
    assert_eq!(status, 200);

    let (iid, token) = d.interaction_button("1200", Some("222"), &pid, "333", "fb:17:up");
    let click = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (click["t"].as_str(), click["d"]["type"].as_u64()),
        (Some("INTERACTION_CREATE"), Some(3))
    );
    assert_eq!(click["d"]["message"]["content"], "edited");
    let cb = format!("{}/interactions/{iid}/{token}/callback", d.api_base());
    let json_ct = [("Content-Type", "application/json")];
    let (status, _, _) = http(&cb, "POST", &json_ct, r#"{"type": 6}"#).await;
    assert_eq!(status, 204);
    let (status, _, body) = http(&cb, "POST", &json_ct, r#"{"type": 6}"#).await;
    assert_eq!(
        (
            status,
            serde_json::from_str::<Value>(&body).unwrap()["code"].as_u64()
        ),
        (400, Some(40060))
    );

    d.rate_limit_next("POST /channels/1200/messages", 1.5);
    let (status, head, body) = http(&msgs, "POST", &auth, r#"{"content": "limited"}"#).await;
    assert_eq!(status, 429);
    assert!(head.contains("retry-after: 2"), "{head}");
    assert!(head.contains("x-ratelimit-bucket: abcd1234"), "{head}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["retry_after"],
        1.5
    );
    assert!(d.limited_at().is_some());
    let (status, _, _) = http(&msgs, "POST", &auth, r#"{"content": "after"}"#).await;
    assert_eq!(status, 200);
    assert!(
        d.rest_calls()
            .iter()
            .any(|c| c.status == 429 && c.path == "/channels/1200/messages")
    );

    let (status, head, body) = http(&d.cdn_url("log.txt"), "GET", &[], "").await;
    assert_eq!((status, body.as_str()), (200, "abc"));
    assert!(head.contains("content-type: text/plain"));
}

#[tokio::test]
async fn discord_bad_token_closes_4004() {
    let d = FakeDiscord::start("tok").await;
    let mut ws = connect(&d.gateway_url()).await;
    next_json(&mut ws).await.unwrap();
    send(
        &mut ws,
        json!({"op": 2, "d": {"token": "wrong", "intents": 1}}),
    )
    .await;
    let close = tokio::time::timeout(Duration::from_secs(5), ws.next())
        .await
        .unwrap();
    match close {
        Some(Ok(Message::Close(Some(frame)))) => assert_eq!(u16::from(frame.code), 4004),
        other => panic!("expected close 4004, got {other:?}"),
    }
}

#[tokio::test]
async fn slack_socket_mode_acks_retries_and_web_api() {
    let s = FakeSlack::start("xapp-1", "xoxb-1").await;
    s.set_ack_timeout(Duration::from_millis(200));
    let open = format!("{}/apps.connections.open", s.api_base());
    let (_, _, body) = http(&open, "POST", &[("Authorization", "Bearer xoxb-1")], "").await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "invalid_auth"
    );
    let (_, _, body) = http(&open, "POST", &[("Authorization", "Bearer xapp-1")], "").await;
    let url = serde_json::from_str::<Value>(&body).unwrap()["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(s.open_count(), 1);

    // Queued before any connection: delivered after hello.
    let f = slack_file(
        "F001",
        "log.txt",
        "text/plain",
        3,
        &s.add_file("T111-F001/log.txt", b"abc", "text/plain"),
    );
    let ts = s.message("C111", "U222", "hi", None, "channel", vec![f]);
    let mut ws = connect(&url).await;
    assert_eq!(next_json(&mut ws).await.unwrap()["type"], "hello");
    let env = next_json(&mut ws).await.unwrap();
    assert_eq!(env["type"], "events_api");
    assert_eq!(env["payload"]["event"]["ts"], json!(ts));
    assert_eq!(env["retry_attempt"], 0);

    // Not acked: re-sent with retry_attempt 1 and retry_reason "timeout".
    let again = next_json(&mut ws).await.unwrap();
    assert_eq!(again["envelope_id"], env["envelope_id"]);
    assert_eq!(
        (
            again["retry_attempt"].as_u64(),
            again["retry_reason"].as_str()
        ),
        (Some(1), Some("timeout"))
    );
    send(&mut ws, json!({"envelope_id": env["envelope_id"]})).await;
    let eid = env["envelope_id"].as_str().unwrap().to_string();
    assert!(turnstone_fake_chat::wait_until(|| s.is_acked(&eid), Duration::from_secs(5)).await);

    // Tickets are single-use.
    let tcp = TcpStream::connect(host_port(&url)).await.unwrap();
    assert!(client_async(url.as_str(), tcp).await.is_err());

    // Web API: post (JSON), update (form), 429, files.
    let bot = [
        ("Authorization", "Bearer xoxb-1"),
        ("Content-Type", "application/json; charset=utf-8"),
    ];
    let post = format!("{}/chat.postMessage", s.api_base());
    let (_, _, body) = http(
        &post,
        "POST",
        &bot,
        r#"{"channel": "C111", "text": "Job 17", "blocks": []}"#,
    )
    .await;
    let posted: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(posted["ok"], true);
    let pts = posted["ts"].as_str().unwrap().to_string();
    assert!(pts > ts, "{pts} after {ts}");
    let form = [
        ("Authorization", "Bearer xoxb-1"),
        ("Content-Type", "application/x-www-form-urlencoded"),
    ];
    let update = format!("{}/chat.update", s.api_base());
    let (_, _, body) = http(
        &update,
        "POST",
        &form,
        &format!("channel=C111&ts={pts}&text=Job+17+done"),
    )
    .await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["ok"], true);
    assert_eq!(s.messages_in("C111")[0]["text"], "Job 17 done");
    let (_, _, body) = http(&update, "POST", &form, "channel=C111&ts=1.000001&text=x").await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "message_not_found"
    );

    s.rate_limit_next("chat.postMessage", 1);
    let (status, head, body) =
        http(&post, "POST", &bot, r#"{"channel": "C111", "text": "x"}"#).await;
    assert_eq!(status, 429);
    assert!(head.contains("retry-after: 1"), "{head}");
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "ratelimited"
    );

    let file_url = format!("{}/files-pri/T111-F001/log.txt", s.base_url());
    let (_, head, body) = http(&file_url, "GET", &[], "").await;
    assert!(head.contains("content-type: text/html"), "{head}");
    assert!(body.contains("<html"));
    let (_, _, body) = http(&file_url, "GET", &[("Authorization", "Bearer xoxb-1")], "").await;
    assert_eq!(body, "abc");

    // Interactivity: block_actions, then views.open with its trigger.
    let action = s.block_action("C111", &pts, None, "U222", "fb_up", "17:up", "111.222.abc");
    let click = next_json(&mut ws).await.unwrap();
    assert_eq!(click["envelope_id"], json!(action));
    assert_eq!(click["payload"]["message"]["text"], "Job 17 done");
    send(&mut ws, json!({"envelope_id": action, "payload": {}})).await;
    let views = format!("{}/views.open", s.api_base());
    let view = r#"{"trigger_id": "111.222.abc", "view": {"type": "modal", "callback_id": "fbmodal", "blocks": []}}"#;
    let (_, _, body) = http(&views, "POST", &bot, view).await;
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["ok"], true);
    let (_, _, body) = http(&views, "POST", &bot, view).await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "exchanged_trigger_id"
    );

    assert!(s.disconnect("refresh_requested"));
    let bye = next_json(&mut ws).await.unwrap();
    assert_eq!(
        (bye["type"].as_str(), bye["reason"].as_str()),
        (Some("disconnect"), Some("refresh_requested"))
    );
}
