//! Notifications end to end: the real `notify` component reads the caller's
//! targets through the `notify-targets` interface and POSTs to a webhook on
//! loopback through its own egress grant, with the target's secret
//! substituted by the host; ungranted hosts are refused before any
//! connection; the per-session rate limit holds; a long turn sends a
//! completion notification down the same path.

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use turnstone_engine::session::{AgentContext, ChatSession, SessionConfig};
use turnstone_protocol::Event;
use turnstone_runtime::config::PluginsConfig;
use turnstone_runtime::netguard::{NetworkPolicy, Resolve, Resolved};
use turnstone_runtime::plugin::SecretSource;
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::{PluginRegistry, PluginSet};
use turnstone_scripted_llm::{Step, openai};
use turnstone_storage::prelude::*;
use turnstone_storage::types::NewNotifyTarget;
use turnstone_test_support::engine::{TestSession, session as fixture, test_runtime};
use turnstone_test_support::{root, sse};

const SECRET_VALUE: &str = "hook-token-7f3a91";

/// One request the webhook receiver read.
#[derive(Debug, Clone)]
struct Received {
    path: String,
    headers: BTreeMap<String, String>,
    body: Value,
}

/// A webhook on loopback: answers each request with the next status of
/// `statuses` (then 200), recording requests and counting connections.
struct Receiver {
    port: u16,
    requests: Arc<Mutex<Vec<Received>>>,
    connections: Arc<Mutex<usize>>,
}

impl Receiver {
    async fn start(statuses: Vec<u16>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(Mutex::new(0));
        let statuses = Arc::new(Mutex::new(statuses));
        let (reqs, conns) = (requests.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                *conns.lock().unwrap() += 1;
                let (reqs, statuses) = (reqs.clone(), statuses.clone());
                tokio::spawn(async move {
                    let Some(r) = read_request(&mut sock).await else {
                        return;
                    };
                    reqs.lock().unwrap().push(r);
                    let status = {
                        let mut s = statuses.lock().unwrap();
                        if s.is_empty() { 200 } else { s.remove(0) }
                    };
                    let reply = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok"
                    );
                    let _ = sock.write_all(reply.as_bytes()).await;
                });
            }
        });
        Self {
            port,
            requests,
            connections,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hook", self.port)
    }

    fn requests(&self) -> Vec<Received> {
        self.requests.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Received> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: BTreeMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers.get("content-length")?.parse().ok()?;
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[head_end..head_end + len]).ok()?;
    Some(Received {
        path,
        headers,
        body,
    })
}

struct HookSecret;

impl SecretSource for HookSecret {
    fn secret(&self, name: &str) -> Option<String> {
        (name == "HOOK_TOKEN").then(|| SECRET_VALUE.to_string())
    }
}

/// `public.test` "resolves" to a public address but is served on loopback
/// (the receiver's port), so the `<public>` path can be tested here.
struct PublicTest(u16);

impl Resolve for PublicTest {
    fn resolve(
        &self,
        host: &str,
        _port: u16,
    ) -> futures::future::BoxFuture<'static, std::io::Result<Vec<Resolved>>> {
        let out = match host {
            "public.test" => vec![Resolved {
                screened: "93.184.216.34".parse::<IpAddr>().unwrap(),
                connect: SocketAddr::from(([127, 0, 0, 1], self.0)),
            }],
            _ => Vec::new(),
        };
        Box::pin(async move { Ok(out) })
    }
}

/// The built-in components with `notify` granted `http` (TOML array items).
async fn tools_with_notify_grant(ws: &std::path::Path, http: &str) -> PluginSet {
    tools_on_network(ws, http, NetworkPolicy::default()).await
}

async fn tools_on_network(ws: &std::path::Path, http: &str, network: NetworkPolicy) -> PluginSet {
    let mut config = PluginsConfig::default();
    config.grants.insert(
        "notify".into(),
        toml::from_str(&format!(
            "notify = true\nhttp = [{http}]\nsecrets = [\"HOOK_TOKEN\"]"
        ))
        .unwrap(),
    );
    let registry = PluginRegistry::load_all(
        &test_runtime(),
        &LoadOptions {
            builtin_dir: Some(root().join("target/components")),
            config,
            workspace: Some(ws.to_path_buf()),
            secrets: Arc::new(HookSecret),
            network,
            ..Default::default()
        },
    )
    .await;
    let failures: Vec<String> = registry
        .entries()
        .iter()
        .filter_map(|e| match &e.status {
            turnstone_runtime::registry::PluginStatus::Failed(m) => {
                Some(format!("{}: {m}", e.name()))
            }
            _ => None,
        })
        .collect();
    assert!(registry.tool("notify").is_some(), "{failures:?}");
    Arc::new(registry).into()
}

struct Fixture {
    f: TestSession,
    db: Storage,
    ws: String,
    _dir: tempfile::TempDir,
}

async fn fixture_with(script: Vec<Step>) -> Fixture {
    let f = fixture(script, true).await;
    let dir = tempfile::tempdir().unwrap();
    let db = turnstone_storage::open(&DbConfig {
        backend: BackendKind::Sqlite,
        path: Some(dir.path().join("t.db")),
        ..Default::default()
    })
    .await
    .unwrap();
    let r = db
        .create_workstream(&NewWorkstream {
            name: "deploy watcher".into(),
            user_id: Some("u1".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    db.publish_workstream(&r).await.unwrap();
    Fixture {
        f,
        db,
        ws: r.ws_id,
        _dir: dir,
    }
}

impl Fixture {
    async fn target(&self, name: &str, url: &str, secret: Option<&str>) {
        self.db
            .save_notify_target(&NewNotifyTarget {
                user_id: Some("u1".into()),
                ws_id: None,
                name: name.into(),
                kind: "webhook".into(),
                url: Some(url.into()),
                secret: secret.map(String::from),
                channel_type: None,
                channel_id: None,
            })
            .await
            .unwrap();
    }

    fn session(&self, tools: PluginSet, agent: AgentContext) -> ChatSession {
        let cfg = SessionConfig {
            skip_permissions: true,
            acting_user_id: Some("u1".into()),
            ..self.f.config(&self.ws)
        };
        ChatSession::new(self.f.binding.clone(), tools, self.f.sink.clone(), cfg)
            .with_storage(self.db.clone(), &self.ws)
            .with_agent(agent)
    }

    fn results(&self) -> Vec<(String, bool)> {
        self.f
            .recorder
            .events()
            .into_iter()
            .filter_map(|e| match e {
                Event::ToolResult(r) if r.name == "notify" => Some((r.output, r.is_error)),
                _ => None,
            })
            .collect()
    }
}

fn notify_call(id: &str, args: Value) -> Step {
    sse(openai::tool_call(id, "notify", &[&args.to_string()]))
}

#[tokio::test]
async fn a_webhook_gets_the_notification_with_the_secret_the_host_substitutes() {
    let hook = Receiver::start(vec![]).await;
    let x = fixture_with(vec![
        notify_call(
            "n1",
            json!({"title": "Build", "message": "The build is green."}),
        ),
        sse(openai::text(&["Sent."])),
    ])
    .await;
    x.target("phone", &hook.url(), Some("HOOK_TOKEN")).await;
    let tools = tools_with_notify_grant(&x.f.ws, &format!("\"127.0.0.1:{}\"", hook.port)).await;
    let mut s = x.session(tools, AgentContext::default());
    s.send("tell me when the build is done").await.unwrap();

    let results = x.results();
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(!results[0].1, "{results:?}");
    assert!(
        results[0].0.contains("Delivered to phone (HTTP 200)"),
        "{results:?}"
    );
    let reqs = hook.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].path, "/hook");
    assert_eq!(
        reqs[0].headers.get("authorization").map(String::as_str),
        Some(format!("Bearer {SECRET_VALUE}").as_str())
    );
    assert_eq!(
        reqs[0].headers.get("content-type").map(String::as_str),
        Some("application/json")
    );
    assert_eq!(reqs[0].body["title"], "Build");
    assert_eq!(reqs[0].body["message"], "The build is green.");
    assert_eq!(reqs[0].body["workstream_id"], x.ws.as_str());
    // The value never reached the model or the event stream.
    let events = format!("{:?}", x.f.recorder.events());
    assert!(!events.contains(SECRET_VALUE));
}

#[tokio::test]
async fn hosts_not_granted_by_name_are_refused_before_any_connection() {
    let hook = Receiver::start(vec![]).await;
    let x = fixture_with(vec![
        notify_call("n1", json!({"message": "three targets"})),
        sse(openai::text(&["One went out."])),
    ])
    .await;
    // Granted: another port on loopback, and any public host. `plain` is on
    // the receiver's (private, ungranted) port; `keyed` is public but would
    // get a secret, which never follows a `<public>` grant; `open` is public
    // and plain, so it is delivered.
    x.target("plain", &hook.url(), None).await;
    let public = format!("http://public.test:{}/hook", hook.port);
    x.target("keyed", &public, Some("HOOK_TOKEN")).await;
    x.target("open", &public, None).await;
    let network = NetworkPolicy {
        allow_private_network: false,
        resolver: Arc::new(PublicTest(hook.port)),
        ..NetworkPolicy::default()
    };
    let tools = tools_on_network(&x.f.ws, "\"127.0.0.1:9\", \"<public>\"", network).await;
    let mut s = x.session(tools, AgentContext::default());
    s.send("notify").await.unwrap();

    let results = x.results();
    assert_eq!(results.len(), 1, "{results:?}");
    let (output, is_error) = &results[0];
    assert!(!is_error, "{output}");
    assert!(output.contains("Delivered to open (HTTP 200)"), "{output}");
    assert!(
        output.contains("Not delivered to plain: http denied: SSRF guard"),
        "{output}"
    );
    assert!(
        output.contains("Not delivered to keyed: http denied: request denied by the host"),
        "{output}"
    );
    // Only `open` connected, and carried no credential.
    let reqs = hook.requests();
    assert_eq!(hook.connections(), 1, "{reqs:?}");
    assert_eq!(reqs.len(), 1);
    assert!(!reqs[0].headers.contains_key("authorization"), "{reqs:?}");
}

#[tokio::test]
async fn failures_retry_but_client_errors_do_not_and_the_rate_limit_holds() {
    // 500 twice, then 200: delivered on the third attempt; then 404: one try.
    let hook = Receiver::start(vec![500, 500, 200, 404]).await;
    let mut script = vec![
        notify_call("n1", json!({"message": "retried"})),
        notify_call("n2", json!({"message": "not found"})),
    ];
    for i in 3..=7 {
        script.push(notify_call(
            &format!("n{i}"),
            json!({"message": format!("number {i}")}),
        ));
    }
    script.push(sse(openai::text(&["Done."])));
    let x = fixture_with(script).await;
    x.target("hook", &hook.url(), None).await;
    let tools = tools_with_notify_grant(&x.f.ws, &format!("\"127.0.0.1:{}\"", hook.port)).await;
    let mut s = x.session(tools, AgentContext::default());
    s.send("notify a lot").await.unwrap();

    let results = x.results();
    assert_eq!(results.len(), 7, "{results:?}");
    assert!(
        !results[0].1 && results[0].0.contains("HTTP 200"),
        "{results:?}"
    );
    assert!(
        results[1].1 && results[1].0.contains("HTTP 404"),
        "{results:?}"
    );
    // Only deliveries count: #1 and #3..#6 make five; #7 is refused unsent.
    for r in &results[2..6] {
        assert!(!r.1, "{results:?}");
    }
    assert!(
        results[6].1 && results[6].0.contains("at most 5 notifications"),
        "{results:?}"
    );
    let messages: Vec<Value> = hook
        .requests()
        .iter()
        .map(|r| r.body["message"].clone())
        .collect();
    assert_eq!(
        messages,
        vec![
            json!("retried"),
            json!("retried"),
            json!("retried"),
            json!("not found"),
            json!("number 3"),
            json!("number 4"),
            json!("number 5"),
            json!("number 6"),
        ]
    );
}

#[tokio::test]
async fn a_long_turn_sends_a_completion_notification_and_a_short_one_does_not() {
    let hook = Receiver::start(vec![]).await;
    let x = fixture_with(vec![
        sse(openai::text(&["All 41 migrations applied cleanly."])),
        sse(openai::text(&["Quick answer."])),
    ])
    .await;
    x.target("hook", &hook.url(), None).await;
    let tools = tools_with_notify_grant(&x.f.ws, &format!("\"127.0.0.1:{}\"", hook.port)).await;
    let mut long = x.session(
        tools.clone(),
        AgentContext {
            notify_after: Some(Duration::ZERO),
            ..Default::default()
        },
    );
    long.send("migrate").await.unwrap();
    let reqs = hook.requests();
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].body["title"], "Turn finished");
    let message = reqs[0].body["message"].as_str().unwrap();
    assert!(
        message.starts_with("deploy watcher finished a turn after"),
        "{message}"
    );
    assert!(
        message.ends_with("All 41 migrations applied cleanly."),
        "{message}"
    );
    assert_eq!(reqs[0].body["workstream_id"], x.ws.as_str());

    let mut short = x.session(
        tools,
        AgentContext {
            notify_after: Some(Duration::from_secs(3600)),
            ..Default::default()
        },
    );
    short.send("quick").await.unwrap();
    assert_eq!(hook.requests().len(), 1, "{:?}", hook.requests());
}
