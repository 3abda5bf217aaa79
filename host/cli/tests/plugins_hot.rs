//! Hot reload and plugin administration against the real `turnstone serve`
//! binary: component swaps under load, broken updates, disable/enable,
//! revoke/grant, install by upload, the CLI on the same database, and two
//! servers on one PostgreSQL.

mod support;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::{Server, StartOpts, sse, target};
use turnstone_scripted_llm::{Step, openai};

const V1: &str = "MARKER-v1-c0ffee7d";
const V2: &str = "MARKER-v2-c0ffee7d";

/// The marker component with its baked-in marker set to `marker`.
fn marker_wasm(marker: &str) -> Vec<u8> {
    let mut wasm = std::fs::read(target().join("test-components/marker/marker.wasm")).unwrap();
    let at = wasm
        .windows(V1.len())
        .position(|w| w == V1.as_bytes())
        .expect("marker string in the component");
    wasm[at..at + V1.len()].copy_from_slice(marker.as_bytes());
    wasm
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Replaces a file the way a deploy does: write beside it, then rename.
fn replace_file(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp-upload");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A third-party plugin directory holding `marker` (v1) and optionally `hostile`.
fn plugin_root(with_hostile: bool) -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let m = root.path().join("marker");
    std::fs::create_dir(&m).unwrap();
    std::fs::copy(
        target().join("test-components/marker/plugin.toml"),
        m.join("plugin.toml"),
    )
    .unwrap();
    std::fs::write(m.join("marker.wasm"), marker_wasm(V1)).unwrap();
    if with_hostile {
        let h = root.path().join("hostile");
        std::fs::create_dir(&h).unwrap();
        for f in ["plugin.toml", "hostile.wasm"] {
            std::fs::copy(target().join("test-components/hostile").join(f), h.join(f)).unwrap();
        }
    }
    let wasm = m.join("marker.wasm");
    (root, wasm)
}

fn plugins_config(root: &Path) -> String {
    format!("[plugins]\ndirs = [{:?}]\n", root.display().to_string())
}

async fn plugin(srv: &Server, token: &str, name: &str) -> Value {
    let (s, v) = srv
        .call(
            "GET",
            &format!("/v1/api/admin/plugins/{name}"),
            Some(token),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v
}

fn call_step(id: &str, name: &str, args: Value) -> Step {
    sse(openai::tool_call(id, name, &[&args.to_string()]))
}

/// Sends `message` and collects every tool result of the turn, in order.
async fn turn_results(srv: &Server, token: &str, ws: &str, message: &str) -> (Vec<Value>, Value) {
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), token, None)
        .await;
    let (s, v) = srv
        .call(
            "POST",
            &format!("/v1/api/workstreams/{ws}/send"),
            Some(token),
            Some(json!({"message": message})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let end = ev.turn_end().await;
    let results = ev
        .seen
        .iter()
        .filter(|f| f.kind() == "tool_result" && f.data.get("accepted").is_none())
        .map(|f| f.data.clone())
        .collect();
    (results, end.data)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn swapping_a_component_under_twenty_busy_workstreams_fails_no_turn() {
    const WORKSTREAMS: usize = 20;
    const CALLS: usize = 12;
    let (root, wasm) = plugin_root(false);
    // Every model request gets the next step: 240 marker calls, then 20 answers.
    let mut script = Vec::new();
    for i in 0..WORKSTREAMS * CALLS {
        script.push(call_step(
            &format!("call_{i}"),
            "marker",
            json!({"sleep_ms": 150}),
        ));
    }
    for _ in 0..WORKSTREAMS {
        script.push(sse(openai::text(&["done"])));
    }
    let srv = Server::start(
        script,
        &plugins_config(root.path()),
        &["--max-workstreams", "40"],
    )
    .await;
    let admin = srv.setup_admin().await;
    let before = plugin(&srv, &admin, "marker").await;
    assert_eq!(before["state"], "loaded", "{before}");
    assert_eq!(before["wasm_sha256"], sha(&marker_wasm(V1)));

    let mut streams = Vec::new();
    for i in 0..WORKSTREAMS {
        let ws = srv
            .create(&admin, json!({"name": format!("load-{i}")}))
            .await;
        let ev = srv
            .events(&format!("/v1/api/workstreams/{ws}/events"), &admin, None)
            .await;
        streams.push((ws, ev));
    }
    for (ws, _) in &streams {
        let (s, v) = srv
            .call(
                "POST",
                &format!("/v1/api/workstreams/{ws}/send"),
                Some(&admin),
                Some(json!({"message": "call the marker until told to stop"})),
            )
            .await;
        assert_eq!(s, 200, "{v}");
    }
    // Let every workstream get going on v1, then deploy v2.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let v2 = marker_wasm(V2);
    replace_file(&wasm, &v2);
    let after = srv
        .wait_plugin(&admin, "marker", 60, |p| p["wasm_sha256"] == sha(&v2))
        .await;
    let swapped_at = Instant::now();
    assert_eq!(after["state"], "loaded");

    let mut v1_total = 0;
    let mut v2_total = 0;
    for (ws, mut ev) in streams {
        let end = ev.until(120, |f| f.kind() == "ws_state").await;
        assert_eq!(end.data["state"], "idle", "{ws}: {:?}", end.data);
        assert!(
            !ev.kinds().iter().any(|k| k == "error"),
            "{ws}: {:?}",
            ev.kinds()
        );
        let mut markers = Vec::new();
        for f in ev.seen.iter().filter(|f| f.kind() == "tool_result") {
            assert_eq!(f.data["is_error"], false, "{ws}: {}", f.data);
            let out = f.data["output"].as_str().unwrap().to_string();
            assert!(out == V1 || out == V2, "{ws}: unexpected output {out:?}");
            markers.push(out);
        }
        // Calls started before the swap answer v1, later ones v2: never back.
        if let Some(first_v2) = markers.iter().position(|m| m == V2) {
            assert!(
                markers[first_v2..].iter().all(|m| m == V2),
                "{ws}: v1 after v2: {markers:?}"
            );
        }
        v1_total += markers.iter().filter(|m| *m == V1).count();
        v2_total += markers.iter().filter(|m| *m == V2).count();
    }
    assert_eq!(
        v1_total + v2_total,
        WORKSTREAMS * CALLS,
        "every call returned"
    );
    eprintln!("marker calls: {v1_total} on v1, {v2_total} on v2");
    assert!(v1_total > 0 && v2_total > 0, "v1 {v1_total}, v2 {v2_total}");
    assert!(swapped_at.elapsed() < Duration::from_secs(120));
    let failed = srv
        .stderr
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("panicked"));
    assert!(!failed, "the server panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_update_leaves_the_old_version_serving_with_the_reason() {
    let (root, wasm) = plugin_root(false);
    let srv = Server::start(
        vec![
            call_step("c1", "marker", json!({})),
            sse(openai::text(&["still v1"])),
            call_step("c2", "marker", json!({})),
            sse(openai::text(&["now v2"])),
        ],
        &plugins_config(root.path()),
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let v1_sha = sha(&marker_wasm(V1));

    // Not WebAssembly at all.
    replace_file(&wasm, b"this is not a component");
    let p = srv
        .wait_plugin(&admin, "marker", 30, |p| p["state"] == "update_failed")
        .await;
    assert!(
        p["last_error"]
            .as_str()
            .unwrap()
            .contains("not a WebAssembly file"),
        "{p}"
    );
    assert_eq!(p["wasm_sha256"], v1_sha, "v1 keeps serving");
    assert_eq!(p["tools"], json!(["marker"]));

    // A real component built against a WIT version this host does not know.
    let future =
        std::fs::read(target().join("test-components/future_wit/future_wit.wasm")).unwrap();
    replace_file(&wasm, &future);
    let p = srv
        .wait_plugin(&admin, "marker", 30, |p| {
            p["last_error"]
                .as_str()
                .is_some_and(|e| e.contains("does not support"))
        })
        .await;
    assert_eq!(p["state"], "update_failed");
    assert_eq!(p["wasm_sha256"], v1_sha);

    // The database records it too.
    let ws = srv.create(&admin, json!({})).await;
    let (results, end) = turn_results(&srv, &admin, &ws, "marker please").await;
    assert_eq!(end["state"], "idle");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["output"], V1, "the old version answered");

    // A good v2 replaces it and clears the error.
    let v2 = marker_wasm(V2);
    replace_file(&wasm, &v2);
    let p = srv
        .wait_plugin(&admin, "marker", 60, |p| p["wasm_sha256"] == sha(&v2))
        .await;
    assert_eq!(p["state"], "loaded");
    assert!(p["last_error"].is_null(), "{p}");
    let (results, _) = turn_results(&srv, &admin, &ws, "again").await;
    assert_eq!(results[0]["output"], V2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabling_a_plugin_removes_its_tools_and_enabling_brings_them_back() {
    let (root, _wasm) = plugin_root(false);
    let srv = Server::start(
        vec![
            sse(openai::text(&["hello"])),
            // The model calls the tool anyway, right after it was disabled.
            call_step("c1", "marker", json!({})),
            sse(openai::text(&["it is gone"])),
            call_step("c2", "marker", json!({})),
            sse(openai::text(&["it is back"])),
        ],
        &plugins_config(root.path()),
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    let ws = srv.create(&admin, json!({})).await;
    let tools_of = |req: &turnstone_scripted_llm::Recorded| -> Vec<String> {
        req.body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .map(|t| t["function"]["name"].as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    turn_results(&srv, &admin, &ws, "hi").await;
    assert!(tools_of(&srv.llm.requests()[0]).contains(&"marker".to_string()));

    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/plugins/marker/disable",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "disabled");
    let metrics = srv
        .http
        .get(srv.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("turnstone_plugin_state{plugin=\"marker\",state=\"disabled\"} 1")
            && metrics.contains("turnstone_plugin_state{plugin=\"bash\",state=\"loaded\"} 1")
            && metrics.contains("turnstone_plugin_registry_generation 1\n"),
        "{metrics}"
    );
    let (results, end) = turn_results(&srv, &admin, &ws, "use the marker").await;
    assert_eq!(end["state"], "idle");
    let reqs = srv.llm.requests();
    assert!(
        !tools_of(&reqs[1]).contains(&"marker".to_string()),
        "disabled tool offered: {:?}",
        tools_of(&reqs[1])
    );
    assert_eq!(results[0]["is_error"], true);
    let out = results[0]["output"].as_str().unwrap();
    assert!(
        out.contains("no longer available") && out.contains("marker"),
        "{out}"
    );

    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/plugins/marker/enable",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("loaded")), "{v}");
    let (results, _) = turn_results(&srv, &admin, &ws, "again").await;
    assert!(tools_of(&srv.llm.requests()[3]).contains(&"marker".to_string()));
    assert_eq!(results[0]["output"], V1);

    // Both changes are in the audit log with the acting user.
    let (_, who) = srv
        .call("GET", "/v1/api/auth/whoami", Some(&admin), None)
        .await;
    let (s, audit) = srv
        .call("GET", "/v1/api/admin/plugins/audit", Some(&admin), None)
        .await;
    assert_eq!(s, 200, "{audit}");
    let actions: Vec<(&str, &str)> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap(),
                e["user_id"].as_str().unwrap(),
            )
        })
        .collect();
    let me = who["user_id"].as_str().unwrap();
    assert_eq!(actions, vec![("plugin.enable", me), ("plugin.disable", me)]);
}

/// A loopback HTTP server answering `ok` to every request; counts requests.
async fn ok_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = hits.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
            });
        }
    });
    (port, hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_capability_denies_the_next_call_and_granting_it_back_allows_it() {
    use std::sync::atomic::Ordering;
    let (root, _wasm) = plugin_root(true);
    let (port, hits) = ok_server().await;
    let url = format!("http://127.0.0.1:{port}/");
    let fetch = || json!({"url": url});
    let srv = Server::start(
        vec![
            call_step("c1", "fetch", fetch()),
            sse(openai::text(&["fetched"])),
            call_step("c2", "fetch", fetch()),
            sse(openai::text(&["denied"])),
            call_step("c3", "fetch", fetch()),
            sse(openai::text(&["fetched again"])),
        ],
        &plugins_config(root.path()),
        &["--skip-permissions"],
    )
    .await;
    let admin = srv.setup_admin().await;
    // Third-party: nothing granted until the operator says so.
    let p = plugin(&srv, &admin, "hostile").await;
    assert_eq!(p["grant_source"], "none", "{p}");
    assert_eq!(p["granted"]["http"], json!([]));
    assert_eq!(p["requested"]["http"], json!(["127.0.0.1"]));
    let (s, v) = srv
        .call(
            "PUT",
            "/v1/api/admin/plugins/hostile/grants",
            Some(&admin),
            Some(json!({"grant": {"http": ["127.0.0.1"]}})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["granted"]["http"], json!(["127.0.0.1"]));
    assert_eq!(v["grant_source"], "operator");
    let ws = srv.create(&admin, json!({})).await;
    let (r, _) = turn_results(&srv, &admin, &ws, "fetch").await;
    assert_eq!(r[0]["is_error"], false, "{}", r[0]);
    assert!(
        r[0]["output"].as_str().unwrap().contains("body=ok"),
        "{}",
        r[0]
    );
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/plugins/hostile/revoke",
            Some(&admin),
            Some(json!({"revoke": {"http": ["127.0.0.1"]}})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["granted"]["http"], json!([]));
    let (r, _) = turn_results(&srv, &admin, &ws, "fetch again").await;
    assert_eq!(r[0]["is_error"], true);
    let out = r[0]["output"].as_str().unwrap();
    assert!(out.contains("denied") && out.contains("127.0.0.1"), "{out}");
    assert_eq!(hits.load(Ordering::SeqCst), 1, "nothing left the sandbox");
    let p = plugin(&srv, &admin, "hostile").await;
    assert!(p["counters"]["denials"].as_u64().unwrap() >= 1, "{p}");

    let (s, _) = srv
        .call(
            "PUT",
            "/v1/api/admin/plugins/hostile/grants",
            Some(&admin),
            Some(json!({"grant": {"http": ["127.0.0.1"]}})),
        )
        .await;
    assert_eq!(s, 200);
    let (r, _) = turn_results(&srv, &admin, &ws, "and again").await;
    assert_eq!(r[0]["is_error"], false, "{}", r[0]);
    assert_eq!(hits.load(Ordering::SeqCst), 2);

    // Malformed grants are refused with a reason and change nothing.
    for (body, why) in [
        (json!({"grant": {"http": ["*"]}}), "not allowed"),
        (json!({"grant": {"nonsense": true}}), "unknown field"),
        (json!({}), "either"),
    ] {
        let (s, v) = srv
            .call(
                "PUT",
                "/v1/api/admin/plugins/hostile/grants",
                Some(&admin),
                Some(body),
            )
            .await;
        assert_eq!(s, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains(why), "{v}");
    }
    let (s, _) = srv
        .call(
            "PUT",
            "/v1/api/admin/plugins/nope/grants",
            Some(&admin),
            Some(json!({"grant": {}})),
        )
        .await;
    assert_eq!(s, 404);
    assert_eq!(
        plugin(&srv, &admin, "hostile").await["granted"]["http"],
        json!(["127.0.0.1"])
    );

    // The config overlay reaches the loaded plugin (re-bound, same component).
    let sha = plugin(&srv, &admin, "hostile").await["wasm_sha256"].clone();
    let (s, v) = srv
        .call(
            "PUT",
            "/v1/api/admin/plugins/hostile/config",
            Some(&admin),
            Some(json!({"config": {"mode": "strict"}})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["config"], json!({"mode": "strict"}));
    assert_eq!(v["wasm_sha256"], sha);
    let (s, v) = srv
        .call(
            "PUT",
            "/v1/api/admin/plugins/hostile/config",
            Some(&admin),
            Some(json!({"config": {"n": 5}})),
        )
        .await;
    assert_eq!(s, 400, "{v}");
}

async fn upload(
    srv: &Server,
    token: &str,
    manifest: &str,
    wasm: Vec<u8>,
    query: &str,
) -> (u16, Value) {
    let form = reqwest::multipart::Form::new()
        .part(
            "manifest",
            reqwest::multipart::Part::text(manifest.to_string()),
        )
        .part(
            "component",
            reqwest::multipart::Part::bytes(wasm).file_name("c.wasm"),
        );
    let resp = srv
        .http
        .post(srv.url(&format!("/v1/api/admin/plugins/install{query}")))
        .bearer_auth(token)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let s = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        s,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_by_upload_lands_disabled_for_review_and_admin_routes_are_guarded() {
    let srv = Server::start(
        vec![
            call_step("c1", "marker", json!({})),
            sse(openai::text(&["ok"])),
        ],
        "",
        &[],
    )
    .await;
    let admin = srv.setup_admin().await;
    // The marker's manifest with a request added, to see it offered for review.
    let manifest = std::fs::read_to_string(target().join("test-components/marker/plugin.toml"))
        .unwrap()
        + "\n[capabilities]\nhttp = [\"api.example.com\"]\n";

    // Not a component: refused, nothing installed.
    let (s, v) = upload(&srv, &admin, &manifest, b"garbage".to_vec(), "").await;
    assert_eq!(s, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("does not load"),
        "{v}"
    );
    let (s, v) = upload(&srv, &admin, "not toml [", marker_wasm(V1), "").await;
    assert_eq!(s, 400, "{v}");
    let (_, list) = srv
        .call("GET", "/v1/api/admin/plugins", Some(&admin), None)
        .await;
    assert!(
        !list["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "marker")
    );

    // A real one: disabled, nothing granted, its request shown for review.
    let (s, v) = upload(&srv, &admin, &manifest, marker_wasm(V1), "").await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["state"], "disabled");
    assert_eq!(v["requested"]["http"], json!(["api.example.com"]));
    assert_eq!(v["granted"]["http"], json!([]));
    let (s, v) = upload(&srv, &admin, &manifest, marker_wasm(V1), "").await;
    assert_eq!(s, 409, "{v}");
    let (s, v) = srv
        .call(
            "POST",
            "/v1/api/admin/plugins/marker/enable",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("loaded")), "{v}");
    let ws = srv.create(&admin, json!({})).await;
    let (r, _) = turn_results(&srv, &admin, &ws, "marker").await;
    assert_eq!(r[0]["output"], V1);
    // Upgrade in place keeps it enabled.
    let (s, v) = upload(&srv, &admin, &manifest, marker_wasm(V2), "?replace=true").await;
    assert_eq!((s, v["state"].as_str()), (201, Some("loaded")), "{v}");
    assert_eq!(v["wasm_sha256"], sha(&marker_wasm(V2)));
    // Built-ins cannot be replaced or uninstalled.
    let bash_manifest =
        std::fs::read_to_string(target().join("components/bash/plugin.toml")).unwrap();
    let (s, _) = upload(
        &srv,
        &admin,
        &bash_manifest,
        marker_wasm(V1),
        "?replace=true",
    )
    .await;
    assert_eq!(s, 409);
    let (s, _) = srv
        .call("DELETE", "/v1/api/admin/plugins/bash", Some(&admin), None)
        .await;
    assert_eq!(s, 409, "a built-in is disabled, not uninstalled");

    // Guards: operator (no admin.plugins), viewer, and an admin's read-scope token.
    let op = srv.user("olga", "operator").await;
    let viewer = srv.user("vic", "viewer").await;
    let read = srv.token("admin", "read");
    for t in [&op, &viewer, &read] {
        for (m, p) in [
            ("GET", "/v1/api/admin/plugins"),
            ("POST", "/v1/api/admin/plugins/marker/disable"),
            ("DELETE", "/v1/api/admin/plugins/marker"),
        ] {
            let (s, v) = srv.call(m, p, Some(t), None).await;
            assert_eq!(s, 403, "{m} {p}: {v}");
        }
    }
    let (s, _) = srv.call("GET", "/v1/api/admin/plugins", None, None).await;
    assert_eq!(s, 401);

    let (s, v) = srv
        .call("DELETE", "/v1/api/admin/plugins/marker", Some(&admin), None)
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, list) = srv
        .call("GET", "/v1/api/admin/plugins", Some(&admin), None)
        .await;
    assert!(
        !list["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "marker")
    );
    let (_, audit) = srv
        .call("GET", "/v1/api/admin/plugins/audit", Some(&admin), None)
        .await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "plugin.uninstall",
            "plugin.upgrade",
            "plugin.enable",
            "plugin.install"
        ]
    );
}

fn cli(srv: &Server, args: &[&str]) -> (bool, String) {
    let out = srv.db_command().arg("plugins").args(args).output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_changes_on_the_same_database_reach_the_running_server() {
    let (root, _wasm) = plugin_root(true);
    let cfg = plugins_config(root.path());
    let srv = Server::start(vec![], &cfg, &[]).await;
    let admin = srv.setup_admin().await;

    let (ok, out) = cli(&srv, &["disable", "marker"]);
    assert!(ok, "{out}");
    srv.wait_plugin(&admin, "marker", 10, |p| p["state"] == "disabled")
        .await;
    let (ok, out) = cli(&srv, &["enable", "marker"]);
    assert!(ok, "{out}");
    srv.wait_plugin(&admin, "marker", 10, |p| p["state"] == "loaded")
        .await;

    let (ok, out) = cli(
        &srv,
        &["grant", "hostile", "--http", "127.0.0.1", "--exec", "echo"],
    );
    assert!(ok, "{out}");
    let p = srv
        .wait_plugin(&admin, "hostile", 10, |p| {
            p["granted"]["exec"] == json!(["echo"])
        })
        .await;
    assert_eq!(p["granted"]["http"], json!(["127.0.0.1"]));
    let (ok, out) = cli(&srv, &["revoke", "hostile", "--exec", "echo"]);
    assert!(ok, "{out}");
    let p = srv
        .wait_plugin(&admin, "hostile", 10, |p| p["granted"]["exec"] == json!([]))
        .await;
    assert_eq!(p["granted"]["http"], json!(["127.0.0.1"]));
    let (ok, out) = cli(&srv, &["revoke", "hostile"]);
    assert!(!ok && out.contains("--all"), "{out}");
    let (ok, out) = cli(&srv, &["grant", "hostile", "--http", "*"]);
    assert!(!ok && out.contains("not allowed"), "{out}");
    let (ok, out) = cli(&srv, &["config", "marker", "mode=fast", "depth=2"]);
    assert!(ok, "{out}");
    srv.wait_plugin(&admin, "marker", 10, |p| {
        p["config"] == json!({"mode": "fast", "depth": "2"})
    })
    .await;
    let (ok, out) = cli(&srv, &["config", "marker", "--unset", "depth"]);
    assert!(ok, "{out}");
    srv.wait_plugin(&admin, "marker", 10, |p| {
        p["config"] == json!({"mode": "fast"})
    })
    .await;
    let (ok, out) = cli(&srv, &["config", "marker", "no-equals-sign"]);
    assert!(!ok && out.contains("KEY=VALUE"), "{out}");
    let (ok, out) = cli(&srv, &["disable", "nope"]);
    assert!(!ok && out.contains("no plugin named"), "{out}");

    // Reload: the server recompiles from disk (same bytes, new generation).
    let gen_before = srv
        .call("GET", "/v1/api/admin/plugins", Some(&admin), None)
        .await
        .1["generation"]
        .as_u64()
        .unwrap();
    let (ok, out) = cli(&srv, &["reload", "marker"]);
    assert!(ok, "{out}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, l) = srv
            .call("GET", "/v1/api/admin/plugins", Some(&admin), None)
            .await;
        if l["generation"].as_u64().unwrap() > gen_before {
            break;
        }
        assert!(Instant::now() < deadline, "reload never applied");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Install from a directory: lands disabled, nothing granted, request shown.
    let src = tempfile::tempdir().unwrap();
    let manifest = std::fs::read_to_string(target().join("test-components/marker/plugin.toml"))
        .unwrap()
        .replace("name = \"marker\"", "name = \"marker_two\"");
    std::fs::write(src.path().join("plugin.toml"), &manifest).unwrap();
    std::fs::write(src.path().join("marker_two.wasm"), marker_wasm(V2)).unwrap();
    let (ok, out) = cli(&srv, &["install", src.path().to_str().unwrap()]);
    assert!(ok, "{out}");
    assert!(out.contains("disabled, nothing granted"), "{out}");
    let p = srv
        .wait_plugin(&admin, "marker_two", 10, |p| p["state"] == "disabled")
        .await;
    assert_eq!(p["granted"]["http"], json!([]));
    let (ok, out) = cli(&srv, &["install", src.path().to_str().unwrap()]);
    assert!(!ok && out.contains("already installed"), "{out}");

    let (_, audit) = srv
        .call("GET", "/v1/api/admin/plugins/audit", Some(&admin), None)
        .await;
    let vias: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["detail"]["via"].as_str().unwrap())
        .collect();
    assert!(
        vias.len() >= 6 && vias.iter().all(|v| *v == "cli"),
        "{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disable_on_one_server_reaches_another_on_the_same_postgres() {
    let Some((url, _guard)) = turnstone_test_support::pg::scratch_database("hot") else {
        eprintln!("skipped: set TURNSTONE_TEST_PG_URL (CI does)");
        return;
    };
    let (root, _wasm) = plugin_root(false);
    let cfg = plugins_config(root.path());
    let opts = StartOpts {
        pg_url: Some(url),
        ..Default::default()
    };
    let a = Server::start_with(vec![], &cfg, &[], opts.clone()).await;
    let b = Server::start_with(vec![], &cfg, &[], opts).await;
    let admin = a.setup_admin().await;
    // The same user logs in on the other node (one users table).
    let admin_b = b.login_admin().await;
    assert_eq!(plugin(&b, &admin_b, "marker").await["state"], "loaded");

    let (s, v) = a
        .call(
            "POST",
            "/v1/api/admin/plugins/marker/disable",
            Some(&admin),
            None,
        )
        .await;
    assert_eq!((s, v["state"].as_str()), (200, Some("disabled")), "{v}");
    let t = Instant::now();
    b.wait_plugin(&admin_b, "marker", 5, |p| p["state"] == "disabled")
        .await;
    let lag = t.elapsed();
    eprintln!("disable reached the second node after {lag:?}");

    let (s, _) = b
        .call(
            "PUT",
            "/v1/api/admin/plugins/marker/grants",
            Some(&admin_b),
            Some(json!({"grant": {"http": ["api.example.com"]}})),
        )
        .await;
    assert_eq!(s, 200);
    let (s, _) = b
        .call(
            "POST",
            "/v1/api/admin/plugins/marker/enable",
            Some(&admin_b),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let p = a
        .wait_plugin(&admin, "marker", 5, |p| p["state"] == "loaded")
        .await;
    assert_eq!(p["grant_source"], "operator");
    assert_eq!(p["granted"]["http"], json!(["api.example.com"]));
    let row = p["stored"].clone();
    assert_eq!(row["enabled"], true, "{p}");
}
