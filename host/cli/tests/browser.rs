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
