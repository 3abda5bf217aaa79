//! Channel adapter benchmark (a bench binary; release build; the real
//! `discord` component under the server's supervisor, a fake Discord on
//! loopback, the instant scripted LLM, SQLite):
//! - memory per connected channel plugin: server RSS with the adapter
//!   disabled, then enabled and connected (after settling);
//! - inbound message → first reply text shown on the platform (the first
//!   POST carrying model text in the conversation's thread), over many
//!   messages;
//! - reconnect time: the gateway socket dropped → RESUMED sent by the fake.
//!
//! Run: `cargo bench -p turnstone --bench channels`.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};
use support::sse;
use turnstone_fake_chat::{BOT_ID, FakeDiscord, MessageSpec};
use turnstone_scripted_llm::openai;
use turnstone_test_support::server::{Server, StartOpts};

const TOKEN: &str = "bench-token";
const MESSAGES: usize = 40;
const DROPS: usize = 15;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

async fn wait(what: &str, mut cond: impl FnMut() -> bool) {
    assert!(
        turnstone_fake_chat::wait_until(&mut cond, Duration::from_secs(30)).await,
        "timed out: {what}"
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let fake = FakeDiscord::start(TOKEN).await;
    let port = fake
        .api_base()
        .split(':')
        .nth(2)
        .and_then(|r| r.split('/').next())
        .unwrap_or_default()
        .to_string();
    let config = format!(
        r#"
[plugins.config.discord]
api_base = "http://127.0.0.1:{port}/api/v10"
[plugins.grants.discord]
http = ["127.0.0.1:{port}"]
secrets = [{{ name = "DISCORD_BOT_TOKEN", hosts = ["127.0.0.1:{port}"], header = ["authorization", "ws-frame"] }}]
"#
    );
    let script = (0..=MESSAGES)
        .map(|i| sse(openai::text(&["reply ", &format!("{i}")])))
        .collect();
    let srv = Server::start_with(
        script,
        &config,
        &[],
        StartOpts {
            env: vec![("DISCORD_BOT_TOKEN".into(), TOKEN.into())],
            ..Default::default()
        },
    )
    .await;
    let admin = srv.setup_admin().await;
    let pid = srv.pid();

    // Memory: off (the built-in adapters are off by default), then on.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let off = rss_mb(pid);
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/plugins/discord/enable",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    srv.wait_plugin(&admin, "discord", 60, |v| {
        v["channel"]["state"] == "connected"
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let on = rss_mb(pid);
    println!(
        "memory: server RSS {off:.1} MiB with the adapter off, {on:.1} MiB connected: +{:.1} MiB per connected channel plugin",
        on - off
    );

    // Link, then open a thread-backed workstream.
    let (_, v) = srv
        .call("POST", "/v1/api/channels/link-code", Some(&admin), None)
        .await;
    let code = v["code"].as_str().unwrap_or_default().to_string();
    fake.message_create(MessageSpec::dm(
        "dm",
        "u1",
        "alice",
        &format!("link {code}"),
    ));
    wait("linked", || {
        fake.messages_in("dm")
            .iter()
            .any(|m| m["content"].as_str().unwrap_or("").contains("Linked"))
    })
    .await;
    fake.add_channel("c1", 0, Some("g1"));
    let mut spec = MessageSpec::guild("c1", "g1", "u1", "alice", &format!("<@{BOT_ID}> hi"));
    spec.mentions_bot = true;
    let thread = fake.message_create(spec);
    wait("the thread's first reply", || {
        fake.messages_in(&thread)
            .iter()
            .any(|m| m["content"] == "reply 0")
    })
    .await;

    // Latency: inbound message → first reply text posted.
    let mut lat = Vec::new();
    for i in 1..=MESSAGES {
        let want = format!("reply {i}");
        let before = fake.rest_calls().len();
        let t = Instant::now();
        fake.message_create(MessageSpec::thread(&thread, "g1", "u1", "alice", "again"));
        wait("a reply", || {
            fake.rest_calls()[before..]
                .iter()
                .any(|c| c.body["content"].as_str() == Some(want.as_str()))
        })
        .await;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
        // Let the turn end before the next message.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "inbound message -> first reply text on the platform ({MESSAGES} messages): p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.9),
        pct(&mut lat, 1.0)
    );

    // Reconnect: drop the socket, time until the session is RESUMED.
    let mut rec = Vec::new();
    for _ in 0..DROPS {
        let resumes = fake.resume_count();
        let t = Instant::now();
        assert!(fake.drop_connection());
        wait("a resume", || fake.resume_count() > resumes).await;
        rec.push(t.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    println!(
        "reconnect after a dropped gateway socket ({DROPS} drops): p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms; identifies {} (all resumed)",
        pct(&mut rec, 0.5),
        pct(&mut rec, 0.9),
        pct(&mut rec, 1.0),
        fake.identify_count()
    );
    println!("server RSS at the end: {:.1} MiB", rss_mb(pid));
}
