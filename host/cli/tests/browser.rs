//! The browser UI in headless Chromium (Debian `chromium` driven by npm
//! `playwright-core`, see tests/browser/ui.mjs) against the real server: set
//! up, create a workstream, send, approve a tool call, watch it stream, reload.

mod support;

use std::path::Path;
use std::process::Command;
use support::{Server, sse};
use turnstone_scripted_llm::openai;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_runs_a_turn_with_an_approval_and_survives_a_reload() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser");
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "run `npm install` in tests/browser first (cargo xtask test does it)"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "headless Chromium is needed at {chromium} (Debian: apt-get install chromium)"
    );
    let answer = "The command printed **streamed-from-bash**. As promised: $e^{i\\pi}+1=0$.\n\n\
                  ```rust\nfn main() { println!(\"hi\"); }\n```\n";
    let srv = Server::start(
        vec![
            sse(openai::tool_call(
                "call_ui",
                "bash",
                &[r#"{"command": "echo streamed-from-bash"}"#],
            )),
            sse(openai::text(&[&answer[..20], &answer[20..]])),
            sse(openai::text(&["Summary: milk."])),
        ],
        "",
        &[],
    )
    .await;
    let out = tokio::task::spawn_blocking({
        let base = srv.base.clone();
        let dir = dir.clone();
        move || {
            Command::new("node")
                .arg("ui.mjs")
                .arg(base)
                .env("CHROMIUM", chromium)
                .current_dir(dir)
                .output()
        }
    })
    .await
    .unwrap()
    .expect("node runs");
    assert!(
        out.status.success(),
        "browser test failed:\n{}\n{}\nserver: {:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        srv.stderr.lock().unwrap()
    );
    // The model really got the approved tool's output.
    let second = srv.llm.requests()[1].body.to_string();
    assert!(second.contains("streamed-from-bash"));
    // The attached file went to the model with the message.
    let third = srv.llm.requests()[2].body.to_string();
    assert!(
        third.contains("remember the milk") && third.contains("summarise the file"),
        "{third}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugin_console_toggles_grants_and_installs_through_the_api() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "headless Chromium needed at {chromium}"
    );
    let comps = support::target().join("test-components");
    let plugins = tempfile::tempdir().unwrap();
    for name in ["marker", "hostile"] {
        let d = plugins.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for f in std::fs::read_dir(comps.join(name)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
        }
    }
    // The upload: the marker component under another name, requesting one host.
    let upload = tempfile::tempdir().unwrap();
    let manifest = std::fs::read_to_string(comps.join("marker/plugin.toml"))
        .unwrap()
        .replace("name = \"marker\"", "name = \"marker_ui\"")
        + "\n[capabilities]\nhttp = [\"api.example.com\"]\n";
    std::fs::write(upload.path().join("plugin.toml"), manifest).unwrap();
    std::fs::copy(
        comps.join("marker/marker.wasm"),
        upload.path().join("marker_ui.wasm"),
    )
    .unwrap();
    let cfg = format!(
        "[plugins]\ndirs = [{:?}]\n",
        plugins.path().display().to_string()
    );
    let srv = Server::start(vec![], &cfg, &[]).await;
    let admin = srv.setup_admin().await;
    let out = tokio::task::spawn_blocking({
        let base = srv.base.clone();
        let up = upload.path().to_path_buf();
        move || {
            Command::new("node")
                .arg("console.mjs")
                .arg(base)
                .arg(up.join("plugin.toml"))
                .arg(up.join("marker_ui.wasm"))
                .arg(turnstone_test_support::mcp::python())
                .arg(turnstone_test_support::mcp::fixture_server())
                .env("CHROMIUM", chromium)
                .current_dir(dir)
                .output()
        }
    })
    .await
    .unwrap()
    .expect("node runs");
    assert!(
        out.status.success(),
        "console test failed:\n{}\n{}\nserver: {:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        srv.stderr.lock().unwrap()
    );
    // What the browser did is what the API reports.
    let (s, v) = srv
        .call("GET", "/v1/api/admin/plugins", Some(&admin), None)
        .await;
    assert_eq!(s, 200);
    let by_name = |n: &str| {
        v["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("{n} missing: {v}"))
    };
    assert_eq!(by_name("marker")["state"], "disabled");
    let hostile = by_name("hostile");
    assert_eq!(hostile["granted"]["http"], serde_json::json!(["127.0.0.1"]));
    assert_eq!(hostile["granted"]["exec"], serde_json::json!([]));
    assert_eq!(hostile["grant_source"], "operator");
    let ui = by_name("marker_ui");
    assert_eq!(ui["state"], "loaded");
    assert_eq!(
        ui["granted"]["http"],
        serde_json::json!(["api.example.com"])
    );
    let fx = by_name("fx");
    assert_eq!(fx["kind"], "mcp");
    assert_eq!(fx["state"], "connected", "{fx}");
    assert_eq!(fx["grant_source"], "operator");
    assert_eq!(fx["granted"]["exec"], serde_json::json!(["python"]));
}

/// A 1×1 PNG.
const DOT_PNG: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\x0d\x49\x44\x41\x54\x78\xda\x63\xfc\xcf\xc0\x50\x0f\x00\x04\x85\x01\x80\x84\xa9\x8c\x21\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_preview_pane_shows_every_kind_and_the_page_stays_sandboxed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "headless Chromium needed at {chromium}"
    );
    let open = |id: &str, target: &str| {
        sse(openai::tool_call(
            id,
            "open_preview",
            &[&serde_json::json!({ "target": target }).to_string()],
        ))
    };
    let srv = Server::start(
        vec![
            open("p1", "report.html"),
            open("p2", "notes.md"),
            open("p3", "numbers.csv"),
            open("p4", "dot.png"),
            open("p5", "paper.pdf"),
            sse(openai::text(&["All five are open."])),
        ],
        "",
        &[],
    )
    .await;
    let ws = srv.dir.path().join("ws");
    std::fs::write(
        ws.join("report.html"),
        "<!doctype html><html><head><title>Quarterly report</title></head><body>\
         <h1>Hello preview</h1>\
         <script>document.body.insertAdjacentHTML('beforeend','<p id=ran>ran</p>');\
         parent.document.body.dataset.owned='1';fetch('/v1/api/auth/whoami');</script>\
         <img src=\"http://203.0.113.9/beacon.png\"></body></html>",
    )
    .unwrap();
    std::fs::write(ws.join("notes.md"), "## Findings\n\n- one\n- two\n").unwrap();
    std::fs::write(
        ws.join("numbers.csv"),
        "name,score\ncarol,9\nbob,3\n\"al, jr\",5\n",
    )
    .unwrap();
    std::fs::write(ws.join("dot.png"), DOT_PNG).unwrap();
    std::fs::write(
        ws.join("paper.pdf"),
        "%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n",
    )
    .unwrap();
    let out = tokio::task::spawn_blocking({
        let base = srv.base.clone();
        move || {
            Command::new("node")
                .arg("preview.mjs")
                .arg(base)
                .env("CHROMIUM", chromium)
                .current_dir(dir)
                .output()
        }
    })
    .await
    .unwrap()
    .expect("node runs");
    assert!(
        out.status.success(),
        "preview test failed:\n{}\n{}\nserver: {:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        srv.stderr.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_governance_console_manages_policies_and_shows_usage_and_audit() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/browser");
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists(),
        "headless Chromium needed at {chromium}"
    );
    let srv = Server::start(Vec::new(), "", &[]).await;
    let out = tokio::task::spawn_blocking({
        let base = srv.base.clone();
        move || {
            Command::new("node")
                .arg("governance.mjs")
                .arg(base)
                .env("CHROMIUM", chromium)
                .current_dir(dir)
                .output()
        }
    })
    .await
    .unwrap()
    .expect("node runs");
    assert!(
        out.status.success(),
        "governance console test failed:\n{}\n{}\nserver: {:?}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        srv.stderr.lock().unwrap()
    );
    // What the browser did is what the database holds.
    let (s, login) = srv
        .call(
            "POST",
            "/v1/api/auth/login",
            None,
            Some(serde_json::json!({"username": "ada", "password": "analytical-engine"})),
        )
        .await;
    assert_eq!(s, 200, "{login}");
    let admin = login["jwt"].as_str().unwrap().to_string();
    let (s, v) = srv
        .call("GET", "/v1/api/admin/policies", Some(&admin), None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(v["policies"][0]["name"], "no-github-writes");
    assert_eq!(v["policies"][0]["enabled"], false);
    assert_eq!(v["policies"][0]["role"], "operator");
}
