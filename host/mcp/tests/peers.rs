//! The MCP client against real peers: npm `server-everything` over stdio and
//! streamable HTTP, and a fixture written with the PyPI `mcp` SDK.

use serde_json::{Map, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use turnstone_mcp::config::ServerConfig;
use turnstone_mcp::content::{prompt_text, read_resource_text, tool_result_text};
use turnstone_mcp::{McpCallError, McpHub, ServerState};
use turnstone_runtime::Capabilities;
use turnstone_test_support::mcp::{everything_server, free_port, node};

mod common;
use common::{CONNECT, args, connected, fixture, fixture_rw, hub, no_progress, stdio};

/// Waits until server `name` reports why it could not connect.
async fn failure_reason(hub: &McpHub, name: &str) -> String {
    let server = hub.server(name).unwrap();
    let mut rx = hub.subscribe();
    loop {
        if let Some(r) = server.last_error() {
            return r;
        }
        tokio::time::timeout(Duration::from_secs(10), rx.changed())
            .await
            .expect("the refusal is reported")
            .unwrap();
    }
}

/// Waits for the supervisor to notice a dropped connection and reconnect.
async fn reconnected(hub: &McpHub, name: &str) {
    let mut rx = hub.subscribe();
    tokio::time::timeout(CONNECT, async {
        while hub.server(name).unwrap().state() == ServerState::Connected {
            rx.changed().await.unwrap();
        }
    })
    .await
    .expect("the drop is noticed");
    connected(hub, name).await;
}

#[tokio::test]
async fn everything_over_stdio_tools_resources_prompts_errors_and_a_cancelled_long_call() {
    let ws = tempfile::tempdir().unwrap();
    let js = everything_server().display().to_string();
    let hub = hub(
        vec![("ev", stdio(node(), &[&js, "stdio"]))],
        BTreeMap::new(),
        ws.path(),
    );
    connected(&hub, "ev").await;
    let never = CancellationToken::new();

    let names: Vec<String> = hub
        .tools()
        .iter()
        .map(|(_, t)| t.prefixed.clone())
        .collect();
    for want in [
        "mcp__ev__echo",
        "mcp__ev__get-sum",
        "mcp__ev__trigger-long-running-operation",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} missing from {names:?}"
        );
    }
    let (server, echo) = hub.tool("mcp__ev__echo").unwrap();
    let r = server
        .call_tool(
            &echo.name,
            args(json!({"message": "hello mcp"})),
            &never,
            &no_progress(),
        )
        .await
        .unwrap();
    assert!(tool_result_text(&r).contains("hello mcp"), "{r:?}");
    assert_ne!(r.is_error, Some(true));

    let r = server
        .call_tool(
            "get-sum",
            args(json!({"a": 2, "b": 40})),
            &never,
            &no_progress(),
        )
        .await
        .unwrap();
    assert!(tool_result_text(&r).contains("42"), "{r:?}");

    // Arguments of the wrong type: the server says so as a tool error.
    let bad = server
        .call_tool("get-sum", args(json!({"a": "two"})), &never, &no_progress())
        .await;
    match bad {
        Ok(r) => assert_eq!(r.is_error, Some(true), "{r:?}"),
        Err(McpCallError::Rpc { message, .. }) => assert!(!message.is_empty()),
        Err(other) => panic!("a bad argument is a tool error, not {other:?}"),
    }

    // Resources: a templated text one, a blob, and routing by template.
    let uri = "demo://resource/dynamic/text/1";
    let owner = hub.resource_owner(uri).expect("a template serves it");
    let text = read_resource_text(&owner.read_resource(uri, &never).await.unwrap());
    assert!(text.contains("Resource 1"), "{text}");
    let blob_uri = "demo://resource/dynamic/blob/2";
    let blob = read_resource_text(&owner.read_resource(blob_uri, &never).await.unwrap());
    assert!(blob.starts_with(&format!("[blob {blob_uri}")), "{blob}");
    let cat = server.catalog();
    assert!(!cat.templates.is_empty() && !cat.resources.is_empty());
    let listed = cat.resources[0].uri.clone();
    let listed_text = read_resource_text(&owner.read_resource(&listed, &never).await.unwrap());
    assert!(!listed_text.is_empty());

    // A prompt with arguments.
    let (ps, prompt) = hub
        .prompt("mcp__ev__args-prompt")
        .expect("args-prompt listed");
    let got = ps
        .get_prompt(&prompt.name, args(json!({"city": "Lisbon"})), &never)
        .await
        .unwrap();
    let text = prompt_text(&got);
    assert!(
        text.starts_with("[user]: ") && text.contains("Lisbon"),
        "{text}"
    );

    // A long call reports progress, then is cancelled mid-way.
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let cancel = CancellationToken::new();
    let sink = {
        let seen = seen.clone();
        let cancel = cancel.clone();
        move |m: String| {
            seen.lock().unwrap().push(m);
            cancel.cancel();
        }
    };
    let started = std::time::Instant::now();
    let r = server
        .call_tool(
            "trigger-long-running-operation",
            args(json!({"duration": 20, "steps": 20})),
            &cancel,
            &sink,
        )
        .await;
    assert_eq!(r.unwrap_err(), McpCallError::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "cancelled, not waited out"
    );
    assert!(
        !seen.lock().unwrap().is_empty(),
        "progress arrived before the cancel"
    );
    // The server is fine afterwards.
    let r = server
        .call_tool(
            "echo",
            args(json!({"message": "still here"})),
            &never,
            &no_progress(),
        )
        .await
        .unwrap();
    assert!(tool_result_text(&r).contains("still here"));
    hub.shutdown();
}

async fn wait_listening(port: u16) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on {port}");
}

#[tokio::test]
async fn everything_over_streamable_http_on_loopback() {
    let ws = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = tokio::process::Command::new(node())
        .arg(everything_server())
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_listening(port).await;
    let cfg = ServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        ..Default::default()
    };
    let hub = hub(vec![("web", cfg)], BTreeMap::new(), ws.path());
    connected(&hub, "web").await;
    let (server, tool) = hub.tool("mcp__web__get-sum").expect("listed over HTTP");
    let never = CancellationToken::new();
    let r = server
        .call_tool(
            &tool.name,
            args(json!({"a": 1, "b": 2})),
            &never,
            &no_progress(),
        )
        .await
        .unwrap();
    assert!(tool_result_text(&r).contains('3'), "{r:?}");
    let got = server
        .get_prompt("simple-prompt", Map::new(), &never)
        .await
        .unwrap();
    assert!(prompt_text(&got).starts_with("[user]: "));
    hub.shutdown();
    let _ = child.kill().await;
}

#[tokio::test]
async fn an_http_server_on_an_ungranted_host_is_refused_before_any_connection() {
    let ws = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let cfg = ServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        ..Default::default()
    };
    // An explicit grant without the host (e.g. one written for another server).
    let grants = BTreeMap::from([(
        "remote".to_string(),
        Capabilities {
            http: vec!["mcp.example.com".into()],
            ..Default::default()
        },
    )]);
    let hub = hub(vec![("remote", cfg)], grants, ws.path());
    let reason = failure_reason(&hub, "remote").await;
    assert!(
        reason.contains("[plugins.grants.remote] http = [\"127.0.0.1:")
            && reason.contains(&port.to_string()),
        "{reason}"
    );
    let accepted = tokio::time::timeout(Duration::from_millis(700), listener.accept()).await;
    assert!(accepted.is_err(), "the listener saw a connection");
    assert!(hub.tools().is_empty());
    hub.shutdown();
}

#[tokio::test]
async fn a_crashed_server_is_a_tool_error_opens_the_breaker_and_a_probe_after_restart_closes_it() {
    let ws = tempfile::tempdir().unwrap();
    let starts = ws.path().join("starts");
    let mut cfg = fixture(&[("FIXTURE_STARTS", &starts.display().to_string())]);
    cfg.breaker_threshold = Some(2);
    cfg.breaker_cool_down_secs = Some(1.5);
    let hub = hub(vec![("fx", cfg)], fixture_rw(ws.path()), ws.path());
    connected(&hub, "fx").await;
    let server = hub.server("fx").unwrap();
    let never = CancellationToken::new();

    let e = server
        .call_tool("die", Map::new(), &never, &no_progress())
        .await
        .unwrap_err();
    assert!(matches!(e, McpCallError::Closed { .. }), "{e:?}");
    assert!(
        e.to_string()
            .contains("closed the connection during the call"),
        "{e}"
    );
    reconnected(&hub, "fx").await;
    let e = server
        .call_tool("die", Map::new(), &never, &no_progress())
        .await
        .unwrap_err();
    assert!(matches!(e, McpCallError::Closed { .. }), "{e:?}");
    assert!(
        matches!(server.state(), ServerState::CircuitOpen { .. }),
        "{:?}",
        server.state()
    );
    assert_eq!(server.breaker_openings(), 1);
    // Refused at once while open, without reaching the server.
    let e = server
        .call_tool("echo", args(json!({"text": "x"})), &never, &no_progress())
        .await
        .unwrap_err();
    assert!(matches!(e, McpCallError::CircuitOpen { .. }), "{e:?}");

    // The supervisor restarted the server; after the cool-down one probe closes it.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    connected(&hub, "fx").await;
    let r = server
        .call_tool(
            "echo",
            args(json!({"text": "back"})),
            &never,
            &no_progress(),
        )
        .await
        .unwrap();
    assert_eq!(tool_result_text(&r), "back");
    assert_eq!(server.state(), ServerState::Connected);
    let n = std::fs::read_to_string(&starts).unwrap().lines().count();
    assert!(n >= 3, "started {n} times");

    // A tool error is not a server failure.
    let r = server
        .call_tool(
            "fail",
            args(json!({"message": "nope"})),
            &never,
            &no_progress(),
        )
        .await
        .unwrap();
    assert_eq!(r.is_error, Some(true));
    assert!(tool_result_text(&r).contains("nope"));
    assert_eq!(server.state(), ServerState::Connected);
    hub.shutdown();
}

#[tokio::test]
async fn a_cancelled_call_reaches_the_server_as_notifications_cancelled() {
    let ws = tempfile::tempdir().unwrap();
    let marker = ws.path().join("cancelled");
    let cfg = fixture(&[("FIXTURE_CANCELLED", &marker.display().to_string())]);
    let hub = hub(vec![("fx", cfg)], fixture_rw(ws.path()), ws.path());
    connected(&hub, "fx").await;
    let server = hub.server("fx").unwrap();
    let cancel = CancellationToken::new();
    let seen = Arc::new(Mutex::new(0usize));
    let sink = {
        let (seen, cancel) = (seen.clone(), cancel.clone());
        move |_m: String| {
            *seen.lock().unwrap() += 1;
            cancel.cancel();
        }
    };
    let e = server
        .call_tool("slow", args(json!({"seconds": 30})), &cancel, &sink)
        .await
        .unwrap_err();
    assert_eq!(e, McpCallError::Cancelled);
    assert!(*seen.lock().unwrap() >= 1, "progress came first");
    // The server's task was cancelled (it writes the marker as it unwinds).
    let mut found = false;
    for _ in 0..100 {
        if std::fs::read_to_string(&marker).is_ok_and(|s| s.contains("cancelled")) {
            found = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(found, "the server never saw notifications/cancelled");
    // A cancelled call is no failure: the server stays usable.
    let r = server
        .call_tool(
            "echo",
            args(json!({"text": "ok"})),
            &CancellationToken::new(),
            &no_progress(),
        )
        .await
        .unwrap();
    assert_eq!(tool_result_text(&r), "ok");
    hub.shutdown();
}

#[tokio::test]
async fn a_public_grant_screens_the_connection_and_refuses_loopback() {
    let ws = tempfile::tempdir().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    for host in ["127.0.0.1", "localhost"] {
        let cfg = ServerConfig {
            url: Some(format!("http://{host}:{port}/mcp")),
            ..Default::default()
        };
        let grants = BTreeMap::from([(
            "pub".to_string(),
            Capabilities {
                http: vec!["<public>".into()],
                ..Default::default()
            },
        )]);
        let hub = hub(vec![("pub", cfg)], grants, ws.path());
        let reason = failure_reason(&hub, "pub").await;
        assert!(
            reason.contains("SSRF guard") && reason.contains("127.0.0.1"),
            "{host}: {reason}"
        );
        hub.shutdown();
    }
    let accepted = tokio::time::timeout(Duration::from_millis(500), listener.accept()).await;
    assert!(accepted.is_err(), "the listener saw a connection");
}

async fn pids(server: &turnstone_mcp::McpServer) -> (u32, u32) {
    let r = server
        .call_tool(
            "pids",
            Map::new(),
            &CancellationToken::new(),
            &no_progress(),
        )
        .await
        .unwrap();
    let text = tool_result_text(&r);
    let mut it = text.split_whitespace().map(|p| p.parse::<u32>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// Alive and not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, a)| !a.starts_with('Z')))
        .unwrap_or(false)
}

async fn all_gone(pids: &[u32]) -> bool {
    for _ in 0..100 {
        if pids.iter().all(|p| !alive(*p)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn stopping_or_crashing_kills_the_whole_process_group() {
    let ws = tempfile::tempdir().unwrap();
    let hub = hub(vec![("fx", fixture(&[]))], BTreeMap::new(), ws.path());
    connected(&hub, "fx").await;
    let server = hub.server("fx").unwrap();

    // A crash: the server dies, its helper must not outlive it.
    let (srv_pid, helper) = pids(&server).await;
    assert!(alive(srv_pid) && alive(helper));
    let _ = server
        .call_tool("die", Map::new(), &CancellationToken::new(), &no_progress())
        .await;
    assert!(
        all_gone(&[srv_pid, helper]).await,
        "a helper of a crashed server survived"
    );

    // A stop (disable, removal, shutdown): the restarted server and its helper go.
    let old = srv_pid;
    let (srv_pid, helper) = tokio::time::timeout(CONNECT, async {
        loop {
            connected(&hub, "fx").await;
            if let Ok(r) = server
                .call_tool(
                    "pids",
                    Map::new(),
                    &CancellationToken::new(),
                    &no_progress(),
                )
                .await
            {
                let text = tool_result_text(&r);
                let mut it = text.split_whitespace().map(|p| p.parse::<u32>().unwrap());
                let (a, b) = (it.next().unwrap(), it.next().unwrap());
                if a != old {
                    return (a, b);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the server restarts");
    assert!(alive(srv_pid) && alive(helper));
    server.stop();
    assert!(
        all_gone(&[srv_pid, helper]).await,
        "stop() left processes behind"
    );
    assert_eq!(server.state(), ServerState::Disabled);
}

#[tokio::test]
async fn a_list_changed_notification_refreshes_the_tools_of_a_live_connection() {
    let ws = tempfile::tempdir().unwrap();
    let starts = ws.path().join("starts");
    let cfg = fixture(&[("FIXTURE_STARTS", &starts.display().to_string())]);
    let hub = hub(vec![("fx", cfg)], fixture_rw(ws.path()), ws.path());
    connected(&hub, "fx").await;
    assert!(hub.tool("mcp__fx__fresh").is_none());
    // Builds the cached search index before the change.
    assert!(
        hub.search_tools("fresh added at run time", 5)
            .iter()
            .all(|(n, _)| n != "mcp__fx__fresh")
    );
    let server = hub.server("fx").unwrap();
    let mut rx = hub.subscribe();
    let r = server
        .call_tool(
            "add_tool",
            args(json!({"name": "fresh"})),
            &CancellationToken::new(),
            &no_progress(),
        )
        .await
        .unwrap();
    assert_eq!(tool_result_text(&r), "added fresh");
    let found = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(t) = hub.tool("mcp__fx__fresh") {
                return t;
            }
            rx.changed().await.unwrap();
        }
    })
    .await
    .expect("the new tool appears without a reconnect");
    assert!(found.1.description.contains("added at run time"));
    let hits = hub.search_tools("fresh added at run time", 5);
    assert_eq!(
        hits[0].0, "mcp__fx__fresh",
        "the cached index was rebuilt: {hits:?}"
    );
    let r = server
        .call_tool(
            "fresh",
            Map::new(),
            &CancellationToken::new(),
            &no_progress(),
        )
        .await
        .unwrap();
    assert_eq!(tool_result_text(&r), "fresh says hello");
    let n = std::fs::read_to_string(&starts).unwrap().lines().count();
    assert_eq!(n, 1, "refreshed on the live connection, not by a reconnect");
    hub.shutdown();
}
