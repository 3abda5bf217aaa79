//! Chat channels end to end: the real Discord adapter component, run by the
//! real server's channel supervisor, against a fake Discord (gateway over
//! WebSocket + REST on loopback) that speaks the documented frames.

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use turnstone_fake_chat::{BOT_ID, FakeDiscord, MessageSpec};
use turnstone_scripted_llm::{Step, openai};
use turnstone_test_support::server::{Server, StartOpts};
use turnstone_test_support::sse;

const TOKEN: &str = "discord-test-token";

/// A server whose `discord` plugin talks to `fake` (REST through `rest_host`).
async fn server(fake: &FakeDiscord, rest_host: &str, script: Vec<Step>) -> Server {
    server_with(fake, rest_host, script, "").await
}

/// [`server`] with extra `[plugins.config.discord]` lines.
async fn server_with(
    fake: &FakeDiscord,
    rest_host: &str,
    script: Vec<Step>,
    discord_config: &str,
) -> Server {
    let port = fake
        .api_base()
        .split(':')
        .nth(2)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let api_base = format!("http://{rest_host}:{port}/api/v10");
    let config = format!(
        r#"
[plugins]
enabled = ["discord"]
[plugins.config.discord]
api_base = "{api_base}"
{discord_config}
[plugins.grants.discord]
http = ["{rest_host}:{port}"]
secrets = [{{ name = "DISCORD_BOT_TOKEN", hosts = ["{rest_host}:{port}"], header = ["authorization", "ws-frame"] }}]
[channels]
edit_interval_ms = 200
restart_backoff_max_secs = 2
[[channels.routes]]
channel = "c2"
mode = "channel"
[[channels.routes]]
plugin = "discord"
channel = "c3"
mode = "ignore"
"#
    );
    Server::start_with(
        script,
        &config,
        &[],
        StartOpts {
            env: vec![("DISCORD_BOT_TOKEN".into(), TOKEN.into())],
            ..Default::default()
        },
    )
    .await
}

async fn rest(
    fake: &FakeDiscord,
    what: &str,
    pred: impl Fn(&turnstone_fake_chat::RestCall) -> bool,
) -> turnstone_fake_chat::RestCall {
    match fake.wait_rest(pred, Duration::from_secs(30)).await {
        Some(c) => c,
        None => panic!(
            "no REST call: {what}; calls: {:#?}",
            fake.rest_calls()
                .iter()
                .map(|c| c.route())
                .collect::<Vec<_>>()
        ),
    }
}

/// The latest text of every message the bot posted in `channel`.
fn texts(fake: &FakeDiscord, channel: &str) -> Vec<String> {
    fake.messages_in(channel)
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    assert!(
        turnstone_fake_chat::wait_until(&mut cond, Duration::from_secs(30)).await,
        "timed out waiting for {what}"
    );
}

async fn link(srv: &Server, fake: &FakeDiscord, token: &str, dm: &str, user: &str) {
    let (s, v) = srv
        .call("POST", "/v1/api/channels/link-code", Some(token), None)
        .await;
    assert_eq!(s, 200, "{v}");
    let code = v["code"].as_str().unwrap().to_string();
    fake.message_create(MessageSpec::dm(dm, user, "alice", &format!("link {code}")));
    until("the link reply", || {
        texts(fake, dm).iter().any(|t| t.contains("Linked"))
    })
    .await;
    // A code works once.
    fake.message_create(MessageSpec::dm(dm, user, "alice", &format!("link {code}")));
    until("the reused-code reply", || {
        texts(fake, dm)
            .iter()
            .any(|t| t.contains("unknown or has expired"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_messages_become_workstreams_with_streamed_replies_approvals_and_resume() {
    let fake = FakeDiscord::start(TOKEN).await;
    fake.set_heartbeat_interval(500);
    let srv = server(
        &fake,
        "127.0.0.1",
        vec![
            Step::Sse {
                frames: openai::text(&["Hello ", "from ", "Turnstone", "."]),
                gap: Duration::from_millis(150),
            },
            sse(openai::tool_call(
                "c1",
                "bash",
                &[r#"{"command": "echo approved-output"}"#],
            )),
            sse(openai::text(&["Ran it."])),
            sse(openai::tool_call(
                "c2",
                "bash",
                &[r#"{"command": "rm -rf build"}"#],
            )),
            sse(openai::text(&["OK, I will use ls instead."])),
            sse(openai::text(&["Still here after the drop."])),
            sse(openai::tool_call(
                "n1",
                "notify",
                &[r#"{"message": "Job done", "title": "Build", "target": "team"}"#],
            )),
            sse(openai::text(&["Notified the team."])),
            sse(openai::text(&["Channel reply one."])),
            sse(openai::text(&["Channel reply two."])),
        ],
    )
    .await;
    let admin = srv.setup_admin().await;
    let view = srv
        .wait_plugin(&admin, "discord", 60, |v| {
            v["channel"]["state"] == "connected"
        })
        .await;
    assert_eq!(view["channel"]["platform"], "discord", "{view}");
    // IDENTIFY carried the real token (substituted by the host into the frame).
    assert_eq!(fake.identify_count(), 1);

    // An unlinked user is refused, clearly, and nothing is created.
    fake.message_create(MessageSpec::dm("dm1", "u1", "alice", "hello?"));
    until("the unlinked reply", || {
        texts(&fake, "dm1")
            .iter()
            .any(|t| t.contains("don't know who you are"))
    })
    .await;
    let (_, list) = srv
        .call("GET", "/v1/api/workstreams", Some(&admin), None)
        .await;
    assert_eq!(
        list["workstreams"].as_array().map(Vec::len),
        Some(0),
        "{list}"
    );

    link(&srv, &fake, &admin, "dm1", "u1").await;

    // A mention in a channel: a thread, a workstream, a reply edited in place.
    fake.add_channel("c1", 0, Some("g1"));
    let started = Instant::now();
    let mut spec = MessageSpec::guild("c1", "g1", "u1", "alice", &format!("<@{BOT_ID}> say hello"));
    spec.mentions_bot = true;
    let mid = fake.message_create(spec);
    rest(&fake, "thread start", |c| {
        c.method == "POST" && c.path == format!("/channels/c1/messages/{mid}/threads")
    })
    .await;
    let thread = mid.clone();
    until("the final reply text", || {
        texts(&fake, &thread)
            .iter()
            .any(|t| t == "Hello from Turnstone.")
    })
    .await;
    let first_reply = started.elapsed();
    let msgs = fake.messages_in(&thread);
    let reply = msgs
        .iter()
        .find(|m| m["content"] == "Hello from Turnstone.")
        .unwrap();
    assert!(
        reply["edit_count"].as_u64().unwrap() >= 2,
        "the reply was edited in place as it streamed: {reply}"
    );
    eprintln!("inbound message -> final reply: {first_reply:?}");
    let (_, list) = srv
        .call("GET", "/v1/api/workstreams", Some(&admin), None)
        .await;
    assert_eq!(
        list["workstreams"].as_array().map(Vec::len),
        Some(1),
        "{list}"
    );

    // A tool call needing approval: buttons → approve → output → answer.
    let mut spec = MessageSpec::thread(&thread, "g1", "u1", "alice", "run the check");
    spec.mentions_bot = false;
    fake.message_create(spec);
    let prompt = rest(&fake, "approval prompt", |c| {
        c.method == "POST"
            && c.path == format!("/channels/{thread}/messages")
            && c.body["components"].is_array()
    })
    .await;
    let buttons = &prompt.body["components"][0]["components"];
    let approve = buttons
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["label"] == "Approve")
        .unwrap()["custom_id"]
        .as_str()
        .unwrap()
        .to_string();
    let prompt_id = prompt.response["id"].as_str().unwrap().to_string();
    let (iid, _) = fake.interaction_button(&thread, Some("g1"), &prompt_id, "u1", &approve);
    until("the deferred-update callback", || {
        fake.interaction_callbacks(&iid)
            .iter()
            .any(|b| b["type"] == 6)
    })
    .await;
    until("the settled prompt with the output", || {
        fake.messages_in(&thread).iter().any(|m| {
            m["id"] == prompt_id.as_str()
                && m["content"]
                    .as_str()
                    .unwrap_or("")
                    .contains("approved-output")
                && m["components"].as_array().is_some_and(Vec::is_empty)
        })
    })
    .await;
    until("the answer after the tool", || {
        texts(&fake, &thread).iter().any(|t| t == "Ran it.")
    })
    .await;

    // Deny with feedback: the button opens a modal; its text reaches the model.
    fake.message_create(MessageSpec::thread(
        &thread,
        "g1",
        "u1",
        "alice",
        "clean the build",
    ));
    let prompt = rest(&fake, "second prompt", |c| {
        c.method == "POST"
            && c.path == format!("/channels/{thread}/messages")
            && c.body["components"].is_array()
            && c.response["id"].as_str() != Some(prompt_id.as_str())
    })
    .await;
    let prompt2 = prompt.response["id"].as_str().unwrap().to_string();
    let deny_fb = prompt.body["components"][0]["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| {
            b["custom_id"]
                .as_str()
                .unwrap_or("")
                .starts_with("ts:denyfb:")
        })
        .unwrap()["custom_id"]
        .as_str()
        .unwrap()
        .to_string();
    let cycle = deny_fb.trim_start_matches("ts:denyfb:").to_string();
    let (iid, _) = fake.interaction_button(&thread, Some("g1"), &prompt2, "u1", &deny_fb);
    until("the feedback modal", || {
        fake.interaction_callbacks(&iid)
            .iter()
            .any(|b| b["type"] == 9)
    })
    .await;
    let modal = fake
        .interaction_callbacks(&iid)
        .into_iter()
        .find(|b| b["type"] == 9)
        .unwrap();
    let modal_id = modal["data"]["custom_id"].as_str().unwrap().to_string();
    fake.interaction_modal_submit(
        &thread,
        Some("g1"),
        Some(&prompt2),
        "u1",
        &modal_id,
        "feedback",
        "use ls instead",
    );
    until("the denied prompt", || {
        fake.messages_in(&thread).iter().any(|m| {
            m["id"] == prompt2.as_str()
                && m["content"]
                    .as_str()
                    .unwrap_or("")
                    .contains("feedback: use ls instead")
        })
    })
    .await;
    until("the answer after the denial", || {
        texts(&fake, &thread)
            .iter()
            .any(|t| t == "OK, I will use ls instead.")
    })
    .await;
    let requests = srv.llm.requests();
    let denial = requests.last().unwrap().body.to_string();
    assert!(
        denial.contains("use ls instead"),
        "the model saw the feedback: {denial}"
    );
    assert!(!cycle.is_empty());

    // The socket drops: the adapter RESUMEs (no new IDENTIFY) and the
    // conversation goes on in the same workstream.
    let resumes = fake.resume_count();
    assert!(fake.drop_connection());
    until("a RESUME", || fake.resume_count() > resumes).await;
    assert_eq!(fake.identify_count(), 1, "resumed, not re-identified");
    // A 429 on posting is honoured: no request on that route before
    // retry_after elapsed, and the reply still arrives.
    let route = format!("POST /channels/{thread}/messages");
    fake.rate_limit_next(&route, 1.0);
    fake.message_create(MessageSpec::thread(
        &thread,
        "g1",
        "u1",
        "alice",
        "still there?",
    ));
    until("the answer after the drop", || {
        texts(&fake, &thread)
            .iter()
            .any(|t| t == "Still here after the drop.")
    })
    .await;
    let (limited, at, secs) = fake
        .limited()
        .into_iter()
        .next()
        .expect("a request was rate limited");
    assert_eq!(limited, route);
    let retry = Duration::from_secs_f64(secs);
    let later: Vec<_> = fake
        .rest_calls()
        .into_iter()
        .filter(|c| c.route() == route && c.at > at)
        .collect();
    assert!(!later.is_empty(), "the post was retried");
    for c in &later {
        assert!(
            c.at >= at + retry,
            "a request came {:?} after the 429 (retry_after {secs} s)",
            c.at - at
        );
    }
    let (_, list) = srv
        .call("GET", "/v1/api/workstreams", Some(&admin), None)
        .await;
    assert_eq!(
        list["workstreams"].as_array().map(Vec::len),
        Some(1),
        "one workstream throughout: {list}"
    );

    // The notify tool delivers to a channel target through the adapter.
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/notify-targets",
            Some(&admin),
            Some(json!({"kind": "channel", "name": "team", "channel_type": "discord", "channel_id": "c1"})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    fake.message_create(MessageSpec::thread(
        &thread,
        "g1",
        "u1",
        "alice",
        "tell the team",
    ));
    rest(&fake, "the notification in c1", |c| {
        c.method == "POST"
            && c.path == "/channels/c1/messages"
            && c.body["content"] == "**Build**\nJob done"
    })
    .await;
    until("the answer after notifying", || {
        texts(&fake, &thread)
            .iter()
            .any(|t| t == "Notified the team.")
    })
    .await;

    // Routing rules: c3 is ignored; c2 is one workstream answered in the
    // channel itself (no thread).
    fake.add_channel("c3", 0, Some("g1"));
    let mut spec = MessageSpec::guild("c3", "g1", "u1", "alice", &format!("<@{BOT_ID}> hello?"));
    spec.mentions_bot = true;
    fake.message_create(spec);
    fake.add_channel("c2", 0, Some("g1"));
    for text in ["first", "second"] {
        let mut spec =
            MessageSpec::guild("c2", "g1", "u1", "alice", &format!("<@{BOT_ID}> {text}"));
        spec.mentions_bot = true;
        fake.message_create(spec);
        let want = if text == "first" {
            "Channel reply one."
        } else {
            "Channel reply two."
        };
        until("the reply in the channel", || {
            texts(&fake, "c2").iter().any(|t| t == want)
        })
        .await;
    }
    assert!(
        !fake
            .rest_calls()
            .iter()
            .any(|c| c.path.contains("/threads") && c.path.starts_with("/channels/c2/")),
        "no thread in a channel routed as a whole"
    );
    assert!(
        texts(&fake, "c3").is_empty(),
        "the ignored channel got no answer"
    );
    let (_, list) = srv
        .call("GET", "/v1/api/workstreams", Some(&admin), None)
        .await;
    assert_eq!(
        list["workstreams"].as_array().map(Vec::len),
        Some(2),
        "the thread's and c2's: {list}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ungranted_gateway_host_is_refused_before_connecting_and_the_adapter_restarts_with_backoff()
 {
    let fake = FakeDiscord::start(TOKEN).await;
    // REST goes to `localhost` (granted); the gateway URL the fake hands out
    // is 127.0.0.1, which is not granted.
    let srv = server(&fake, "localhost", vec![]).await;
    let admin = srv.setup_admin().await;
    let view = srv
        .wait_plugin(&admin, "discord", 60, |v| {
            v["channel"]["restarts"].as_u64().unwrap_or(0) >= 2
        })
        .await;
    let detail = view["channel"]["detail"].as_str().unwrap_or("").to_string();
    assert!(
        detail.contains("denied") || detail.contains("127.0.0.1"),
        "{view}"
    );
    assert_eq!(
        fake.connection_count(),
        0,
        "no socket reached the fake gateway"
    );
    // The host stays up.
    let (s, _) = srv.call("GET", "/health", None, None).await;
    assert_eq!(s, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_with_a_bad_signature_is_rejected_and_a_good_ping_answered() {
    let fake = FakeDiscord::start(TOKEN).await;
    let key = turnstone_fake_chat::discord_test_key();
    let public = turnstone_fake_chat::discord_public_key_hex(&key);
    let srv = server_with(
        &fake,
        "127.0.0.1",
        vec![],
        &format!("public_key = \"{public}\""),
    )
    .await;
    let admin = srv.setup_admin().await;
    srv.wait_plugin(&admin, "discord", 60, |v| {
        v["channel"]["state"] == "connected"
    })
    .await;
    let body = json!({"type": 1, "id": "1", "application_id": "1", "token": "t", "version": 1})
        .to_string();
    let ts = "1700000000";
    let good = turnstone_fake_chat::discord_sign(&key, ts, body.as_bytes());
    let post = |sig: String| {
        srv.http
            .post(srv.url("/v1/channels/discord/webhook"))
            .header("x-signature-ed25519", sig)
            .header("x-signature-timestamp", ts)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
    };
    let bad = post("00".repeat(64)).await.unwrap();
    assert_eq!(bad.status(), 401);
    let ok = post(good).await.unwrap();
    assert_eq!(ok.status(), 200);
    let v: Value = ok.json().await.unwrap();
    assert_eq!(v["type"], 1);
    // A plugin that does not run here is a 404, not a hang.
    let r = srv
        .http
        .post(srv.url("/v1/channels/nope/webhook"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

const APP: &str = "xapp-test";
const BOT: &str = "xoxb-test";
const SIGNING: &str = "8f742231b10e8888abcd99yyyzzz85a5";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_mentions_threads_approvals_reconnects_and_files() {
    use turnstone_fake_chat::FakeSlack;
    let fake = FakeSlack::start(APP, BOT).await;
    fake.add_channel("C1");
    fake.add_channel("D1");
    let hostport = fake
        .api_base()
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let config = format!(
        r#"
[plugins]
enabled = ["slack"]
[plugins.config.slack]
api_base = "{api}"
[plugins.grants.slack]
http = ["{hostport}"]
secrets = [
  {{ name = "SLACK_APP_TOKEN", hosts = ["{hostport}"], header = "authorization" }},
  {{ name = "SLACK_BOT_TOKEN", hosts = ["{hostport}"], header = "authorization" }},
  {{ name = "SLACK_SIGNING_SECRET", hosts = ["{hostport}"], header = "authorization" }},
]
[channels]
edit_interval_ms = 200
"#,
        api = fake.api_base()
    );
    let srv = Server::start_with(
        vec![
            Step::Sse {
                frames: openai::text(&["Hello ", "from ", "Slack", "."]),
                gap: Duration::from_millis(150),
            },
            sse(openai::tool_call(
                "s1",
                "bash",
                &[r#"{"command": "echo slack-output"}"#],
            )),
            sse(openai::text(&["Ran it on Slack."])),
            sse(openai::text(&["Back again."])),
            sse(openai::text(&["Read the file."])),
        ],
        &config,
        &[],
        StartOpts {
            env: vec![
                ("SLACK_APP_TOKEN".into(), APP.into()),
                ("SLACK_BOT_TOKEN".into(), BOT.into()),
                ("SLACK_SIGNING_SECRET".into(), SIGNING.into()),
            ],
            ..Default::default()
        },
    )
    .await;
    let admin = srv.setup_admin().await;
    srv.wait_plugin(&admin, "slack", 60, |v| {
        v["channel"]["state"] == "connected"
    })
    .await;
    let slack_texts = |ch: &str| -> Vec<String> {
        fake.messages_in(ch)
            .iter()
            .map(|m| m["text"].as_str().unwrap_or("").to_string())
            .collect()
    };

    // Unlinked, then linked through a DM.
    fake.message("D1", "U1", "hi", None, "im", vec![]);
    until("the unlinked reply", || {
        slack_texts("D1")
            .iter()
            .any(|t| t.contains("don't know who you are"))
    })
    .await;
    let (s, v) = srv
        .call("POST", "/v1/api/channels/link-code", Some(&admin), None)
        .await;
    assert_eq!(s, 200, "{v}");
    fake.message(
        "D1",
        "U1",
        &format!("link {}", v["code"].as_str().unwrap()),
        None,
        "im",
        vec![],
    );
    until("the link reply", || {
        slack_texts("D1").iter().any(|t| t.contains("Linked"))
    })
    .await;

    // A mention: the reply lives in the message's thread and is edited in place.
    let root = fake.app_mention("C1", "U1", "<@UBOT> say hello", None);
    until("the final reply", || {
        slack_texts("C1").iter().any(|t| t == "Hello from Slack.")
    })
    .await;
    let msgs = fake.messages_in("C1");
    let reply = msgs
        .iter()
        .find(|m| m["text"] == "Hello from Slack.")
        .unwrap();
    assert_eq!(reply["thread_ts"], root.as_str(), "{reply}");
    assert!(
        reply["edit_count"].as_u64().unwrap() >= 1,
        "edited in place: {reply}"
    );
    // Every envelope was acknowledged.
    assert!(!fake.acks().is_empty());

    // Approval by button in the thread.
    fake.message("C1", "U1", "run the check", Some(&root), "channel", vec![]);
    let prompt = fake
        .wait_call(
            |c| {
                c.method == "chat.postMessage"
                    && c.body["blocks"].as_array().is_some_and(|b| !b.is_empty())
            },
            Duration::from_secs(30),
        )
        .await
        .expect("an approval prompt");
    let prompt_ts = prompt.response["ts"].as_str().unwrap().to_string();
    let blocks = prompt.body["blocks"].to_string();
    let cycle = prompt.body["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["elements"].as_array().cloned().unwrap_or_default())
        .find(|e| e["action_id"] == "ts_approve")
        .expect(&blocks)["value"]
        .as_str()
        .unwrap()
        .to_string();
    fake.block_action(
        "C1",
        &prompt_ts,
        Some(&root),
        "U1",
        "ts_approve",
        &cycle,
        "trigger-1",
    );
    until("the settled prompt", || {
        fake.messages_in("C1").iter().any(|m| {
            m["ts"] == prompt_ts.as_str()
                && m["text"].as_str().unwrap_or("").contains("slack-output")
                && m["blocks"].as_array().is_none_or(Vec::is_empty)
        })
    })
    .await;
    until("the answer after the tool", || {
        slack_texts("C1").iter().any(|t| t == "Ran it on Slack.")
    })
    .await;

    // Slack asks for a reconnect: a new connection, the same conversation.
    let opens = fake.open_count();
    assert!(fake.disconnect("refresh_requested"));
    until("a new Socket Mode connection", || {
        fake.open_count() > opens && fake.connected()
    })
    .await;
    fake.message("C1", "U1", "still there?", Some(&root), "channel", vec![]);
    until("the answer after the reconnect", || {
        slack_texts("C1").iter().any(|t| t == "Back again.")
    })
    .await;

    // A file in a DM becomes a workstream attachment the model reads.
    let url = fake.add_file(
        "T111-F1/notes.txt",
        b"the secret word is turnip",
        "text/plain",
    );
    let file = turnstone_fake_chat::slack_file("F1", "notes.txt", "text/plain", 25, &url);
    fake.message("D1", "U1", "summarise this", None, "im", vec![file]);
    until("the DM answer", || {
        slack_texts("D1").iter().any(|t| t == "Read the file.")
    })
    .await;
    let last = srv.llm.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("the secret word is turnip"),
        "the attachment reached the model: {last}"
    );
    assert!(
        fake.file_fetches().iter().all(|(_, authed)| *authed),
        "files fetched with the bot token"
    );
    let (_, list) = srv
        .call("GET", "/v1/api/workstreams", Some(&admin), None)
        .await;
    assert_eq!(
        list["workstreams"].as_array().map(Vec::len),
        Some(2),
        "the thread and the DM: {list}"
    );

    // Signed HTTP webhooks: the adapter checks the signature through the
    // host (it never holds the signing secret).
    let body = json!({"token": "x", "challenge": "ch-123", "type": "url_verification"}).to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let post = |ts: i64, sig: String| {
        srv.http
            .post(srv.url("/v1/channels/slack/webhook"))
            .header("x-slack-request-timestamp", ts.to_string())
            .header("x-slack-signature", sig)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
    };
    let good = post(
        now,
        turnstone_fake_chat::slack_signature(SIGNING, now, body.as_bytes()),
    )
    .await
    .unwrap();
    assert_eq!(good.status(), 200);
    assert_eq!(good.headers()["x-content-type-options"], "nosniff");
    let v: Value = good.json().await.unwrap();
    assert_eq!(v["challenge"], "ch-123");
    let bad = post(
        now,
        turnstone_fake_chat::slack_signature("wrong-secret", now, body.as_bytes()),
    )
    .await
    .unwrap();
    assert_eq!(bad.status(), 401);
    let stale = now - 600;
    let old = post(
        stale,
        turnstone_fake_chat::slack_signature(SIGNING, stale, body.as_bytes()),
    )
    .await
    .unwrap();
    assert_eq!(old.status(), 401, "a replayed (stale) request is refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_the_adapter_disconnects_it_and_a_reload_swaps_and_reconnects() {
    let fake = FakeDiscord::start(TOKEN).await;
    let srv = server(&fake, "127.0.0.1", vec![]).await;
    let admin = srv.setup_admin().await;
    srv.wait_plugin(&admin, "discord", 60, |v| {
        v["channel"]["state"] == "connected"
    })
    .await;
    until("one gateway connection", || fake.connected()).await;
    let connections = fake.connection_count();

    // Reload: the running instance is drained and a new one connects.
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/plugins/discord/reload",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    until("a new gateway connection", || {
        fake.connection_count() > connections && fake.connected()
    })
    .await;
    srv.wait_plugin(&admin, "discord", 60, |v| {
        v["channel"]["state"] == "connected"
    })
    .await;
    assert!(
        fake.client_closes().iter().any(|(code, _)| *code == 1000),
        "the old instance closed its socket: {:?}",
        fake.client_closes()
    );

    // Disable: the adapter disconnects and is no longer supervised.
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/plugins/discord/disable",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    until("the gateway disconnected", || !fake.connected()).await;
    let view = srv
        .wait_plugin(&admin, "discord", 30, |v| v["channel"].is_null())
        .await;
    assert_eq!(view["state"], "disabled", "{view}");
    let quiet = fake.connection_count();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        fake.connection_count(),
        quiet,
        "a disabled adapter stays away"
    );
}
