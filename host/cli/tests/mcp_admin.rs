//! MCP servers administered like plugins: created through the admin API on one
//! node, granted, connected on another node on the same PostgreSQL, disabled
//! (their tools leave the next model request), deleted; refusals of bad input.

use serde_json::{Value, json};
use std::time::Duration;
use turnstone_scripted_llm::openai;
use turnstone_test_support::mcp::{fixture_server, python};
use turnstone_test_support::server::{Server, StartOpts};
use turnstone_test_support::sse;

/// The tool names of the model request `n` the scripted LLM received.
fn request_tools(srv: &Server, n: usize) -> Vec<String> {
    let reqs = srv.llm.requests();
    let body = &reqs.get(n).unwrap_or_else(|| panic!("no request {n}")).body;
    body["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_created_on_one_node_connects_on_another_and_disable_hides_its_tools() {
    let Some((url, _guard)) = turnstone_test_support::pg::scratch_database("mcpadmin") else {
        eprintln!("skipped: set TURNSTONE_TEST_PG_URL (CI does)");
        return;
    };
    let opts = StartOpts {
        pg_url: Some(url),
        ..Default::default()
    };
    let a = Server::start_with(vec![], "", &[], opts.clone()).await;
    let b = Server::start_with(
        vec![sse(openai::text(&["one"])), sse(openai::text(&["two"]))],
        // Every MCP tool is listed (never deferred behind tool_search, which
        // the built-in tools alone would otherwise switch on).
        "[tools]\nsearch = \"off\"\n",
        &[],
        opts,
    )
    .await;
    let admin = a.setup_admin().await;
    let admin_b = b.login_admin().await;
    // A directory both nodes see, for the server's working directory.
    let shared = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(shared.path()).unwrap();
    let definition = json!({
        "type": "stdio",
        "command": python().display().to_string(),
        "args": [fixture_server().display().to_string(), "stdio"],
        "cwd": cwd.display().to_string(),
        "env": {"FIXTURE_MODE": "plain"},
    });

    // Created on A: it starts with nothing granted, so it cannot run.
    let (s, v) = a
        .call(
            "POST",
            "/v1/api/admin/mcp-servers",
            Some(&admin),
            Some(json!({"name": "fx", "server": definition})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["kind"], "mcp");
    assert_eq!(v["grant_source"], "none");
    assert_eq!(v["mcp"]["origin"], "api");
    assert_eq!(v["requested"]["exec"], json!(["python"]));
    // Its working directory and what its command line runs (the virtualenv,
    // the script's directory): what the kernel sandbox will let it read.
    let requested_fs = v["requested"]["filesystem"].clone();
    assert_eq!(requested_fs.as_array().map(Vec::len), Some(3), "{v}");
    let refused = a
        .wait_plugin(&admin, "fx", 10, |p| p["state"] == "failed")
        .await;
    let reason = refused["last_error"].as_str().unwrap_or_default();
    assert!(reason.contains("python"), "{refused}");
    // The other node sees it too, refused the same way.
    b.wait_plugin(&admin_b, "fx", 10, |p| p["state"] == "failed")
        .await;

    // Granted on A, it connects on B.
    let (s, v) = a
        .call(
            "PUT",
            "/v1/api/admin/plugins/fx/grants",
            Some(&admin),
            Some(json!({"grant": {
                "exec": ["python"],
                "filesystem": requested_fs,
            }})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let on_b = b
        .wait_plugin(&admin_b, "fx", 20, |p| p["state"] == "connected")
        .await;
    assert_eq!(on_b["grant_source"], "operator");
    let tools: Vec<&str> = on_b["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(tools.contains(&"mcp__fx__echo"), "{on_b}");
    // The list shows it next to the components.
    let (_, list) = b
        .call("GET", "/v1/api/admin/plugins", Some(&admin_b), None)
        .await;
    let kinds: Vec<(&str, &str)> = list["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["kind"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert!(kinds.contains(&("fx", "mcp")), "{kinds:?}");
    assert!(kinds.iter().any(|(_, k)| *k == "tool"), "{kinds:?}");

    // A model request on B offers its tools...
    let ws = b.create(&admin_b, json!({"name": "w"})).await;
    b.send_and_finish(&admin_b, &ws, "hello").await;
    assert!(
        request_tools(&b, 0).iter().any(|t| t == "mcp__fx__echo"),
        "{:?}",
        request_tools(&b, 0)
    );
    // ...until it is disabled (on A): the next request has none of them.
    let (s, v) = a
        .call(
            "POST",
            "/v1/api/admin/plugins/fx/disable",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("disabled")), "{v}");
    b.wait_plugin(&admin_b, "fx", 10, |p| p["state"] == "disabled")
        .await;
    b.send_and_finish(&admin_b, &ws, "again").await;
    let after = request_tools(&b, 1);
    assert!(
        !after.iter().any(|t| t.starts_with("mcp__fx__")),
        "{after:?}"
    );
    assert!(after.iter().any(|t| t == "read_file"), "{after:?}");

    // The definition can be read and changed; the grant stays.
    let (s, v) = a
        .call("GET", "/v1/api/admin/mcp-servers", Some(&admin), None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["servers"][0]["name"], "fx");
    assert_eq!(v["servers"][0]["origin"], "api");
    assert_eq!(
        v["servers"][0]["definition"]["env"]["FIXTURE_MODE"],
        "plain"
    );
    let mut changed = definition.clone();
    changed["auto_approve_tools"] = json!(["echo"]);
    let (s, v) = a
        .call(
            "PUT",
            "/v1/api/admin/mcp-servers/fx",
            Some(&admin),
            Some(json!({"server": changed})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["mcp"]["auto_approve_tools"], json!(["echo"]));
    assert_eq!(v["grant_source"], "operator");
    assert_eq!(v["state"], "disabled", "an update keeps it disabled");

    // Every change is audited, without the values written into env.
    let (_, audit) = a
        .call(
            "GET",
            "/v1/api/admin/plugins/audit?limit=50",
            Some(&admin),
            None,
        )
        .await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for want in [
        "plugin.mcp.create",
        "plugin.grant",
        "plugin.disable",
        "plugin.mcp.update",
    ] {
        assert!(actions.contains(&want), "{want} missing from {actions:?}");
    }
    assert!(!audit.to_string().contains("plain"), "{audit}");

    // Deleted on B: gone on A too.
    let (s, v) = b
        .call(
            "DELETE",
            "/v1/api/admin/mcp-servers/fx",
            Some(&admin_b),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    for _ in 0..50 {
        let (s, _) = a
            .call("GET", "/v1/api/admin/plugins/fx", Some(&admin), None)
            .await;
        if s == 404 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the deleted server is still on node A");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_mcp_server_definitions_are_refused_with_the_reason() {
    let srv = Server::start(
        vec![],
        "[mcp.servers.cfg]\ncommand = \"/bin/true\"\ndisabled = true\n",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let create = |body: Value| {
        let srv = &srv;
        let admin = admin.clone();
        async move {
            srv.call(
                "POST",
                "/v1/api/admin/mcp-servers",
                Some(&admin),
                Some(body),
            )
            .await
        }
    };
    for (body, status, needle) in [
        (
            json!({"name": "a__b", "server": {"type": "stdio", "command": "x"}}),
            400,
            "must not contain `__`",
        ),
        (
            json!({"name": "ok", "server": {"command": "x"}}),
            400,
            "type",
        ),
        (
            json!({"name": "ok", "server": {"type": "stdio", "command": "  "}}),
            400,
            "needs `command`",
        ),
        (
            json!({"name": "ok", "server": {"type": "stdio", "command": "x", "url": "http://h/"}}),
            400,
            "url",
        ),
        (
            json!({"name": "ok", "server": {"type": "http", "url": "ftp://h/x"}}),
            400,
            "http(s)",
        ),
        (
            json!({"name": "ok", "server": {"type": "sse", "url": "http://h/x"}}),
            400,
            "sse",
        ),
        (
            json!({"name": "ok", "server": {"type": "stdio", "command": "x", "timeout_secs": 0}}),
            400,
            "between 1 and 86400",
        ),
        (
            json!({"name": "ok", "server": {"type": "stdio", "command": "x", "bogus": 1}}),
            400,
            "bogus",
        ),
        (
            json!({"name": "read_file", "server": {"type": "stdio", "command": "x"}}),
            404,
            "",
        ),
        (
            json!({"name": "files", "server": {"type": "stdio", "command": "x"}}),
            409,
            "plugin component",
        ),
        (
            json!({"name": "cfg", "server": {"type": "stdio", "command": "x"}}),
            409,
            "config.toml",
        ),
    ] {
        let (s, v) = create(body.clone()).await;
        if status == 404 {
            // Not a component name (read_file is a tool of `files`): accepted.
            assert_eq!(s, 201, "{body}: {v}");
            continue;
        }
        assert_eq!(s, status, "{body}: {v}");
        assert!(
            v["error"].as_str().unwrap_or_default().contains(needle),
            "{body}: {v}"
        );
    }
    let (s, v) =
        create(json!({"name": "read_file", "server": {"type": "stdio", "command": "y"}})).await;
    assert_eq!(s, 409, "{v}");
    // A config.toml server cannot be changed or deleted through the API.
    let (s, v) = srv
        .call(
            "DELETE",
            "/v1/api/admin/mcp-servers/cfg",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 409, "{v}");
    let (s, _) = srv
        .call(
            "PUT",
            "/v1/api/admin/mcp-servers/nope",
            Some(&admin),
            Some(json!({"server": {"type": "stdio", "command": "x"}})),
        )
        .await;
    assert_eq!(s, 404);
    // MCP servers take no config overlay.
    let (s, v) = srv
        .call(
            "PUT",
            "/v1/api/admin/plugins/cfg/config",
            Some(&admin),
            Some(json!({"config": {"a": "b"}})),
        )
        .await;
    assert_eq!(s, 409, "{v}");
    assert!(v["error"].as_str().unwrap().contains("definition"), "{v}");
    // The CLI acts on MCP servers through the same database: a grant for the
    // config.toml server, then the run-time `read_file` server is removed.
    let cli = |args: &[&str]| {
        let out = srv.db_command().arg("plugins").args(args).output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, out) = cli(&["grant", "cfg", "--exec", "true"]);
    assert!(ok, "{out}");
    let p = srv
        .wait_plugin(&admin, "cfg", 10, |p| p["grant_source"] == "operator")
        .await;
    assert_eq!(p["granted"]["exec"], json!(["true"]), "{p}");
    assert_eq!(p["state"], "disabled", "a grant does not enable it");
    let (ok, out) = cli(&["uninstall", "read_file"]);
    assert!(ok && out.contains("MCP server deleted"), "{out}");
    for _ in 0..50 {
        let (s, _) = srv
            .call("GET", "/v1/api/admin/plugins/read_file", Some(&admin), None)
            .await;
        if s == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (s, _) = srv
        .call("GET", "/v1/api/admin/plugins/read_file", Some(&admin), None)
        .await;
    assert_eq!(s, 404, "the CLI's delete reached the server");
    let (ok, out) = cli(&["disable", "nope"]);
    assert!(!ok && out.contains("no plugin named"), "{out}");

    // A read/write token cannot touch them.
    let rw = srv.token("admin", "read,write");
    let (s, _) = srv
        .call(
            "POST",
            "/v1/api/admin/mcp-servers",
            Some(&rw),
            Some(json!({"name": "z", "server": {"type": "stdio", "command": "x"}})),
        )
        .await;
    assert_eq!(s, 403);
}
