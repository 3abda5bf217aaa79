//! The API against its own description: schemathesis (PyPI, pinned in
//! `tests/schemathesis/requirements.txt`, installed by `cargo xtask test`)
//! fuzzes every operation of the real server's `/openapi.json` with an admin
//! API token and every check it has (`--checks all`): no server errors, no
//! response outside the schema, no valid request refused, no invalid one
//! accepted.

mod support;

use serde_json::json;
use std::process::Command;
use std::time::Instant;
use support::{Server, sse, target};
use turnstone_scripted_llm::openai;

/// Examples per operation and phase: enough to find schema drift, small
/// enough for CI (the whole run takes about a minute here).
const MAX_EXAMPLES: u32 = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_matches_the_openapi_document() {
    let bin = target().join("schemathesis/bin/schemathesis");
    assert!(
        bin.is_file(),
        "{} is missing: `cargo xtask test` installs the pinned schemathesis",
        bin.display()
    );
    // Every turn the fuzzer starts gets a reply (an exhausted script would
    // answer 500 and make compactions fail for reasons outside the API).
    let replies = (0..4000).map(|_| sse(openai::text(&["ok"]))).collect();
    let srv = Server::start(
        replies,
        "",
        &[
            "--max-workstreams",
            "5000",
            "--workstream-idle-timeout",
            "0",
        ],
    )
    .await;
    srv.setup_admin().await;
    let token = srv.token("admin", "read,write,approve");
    // A loaded workstream with history, so the ws_id routes reach their
    // handlers instead of answering 404 to random ids.
    let ws = srv
        .create(&token, json!({"initial_message": "hello"}))
        .await;
    // Closing and deleting get their own, so the one above stays loaded.
    let doomed = srv.create(&token, json!({})).await;
    let config = srv.dir.path().join("schemathesis.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[generation]
max-examples = {MAX_EXAMPLES}

[parameters]
"path.ws_id" = "{ws}"

# The wire contract answers an unknown model alias on /new with 503
# `model_not_loaded` (documented there); the schema lists the loaded aliases,
# so only requests the document calls invalid get it.
[[operations]]
include-path = "/v1/api/workstreams/new"
checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]

[[operations]]
include-path-regex = "/(close|delete)$"
parameters = {{ "path.ws_id" = "{doomed}" }}

# What makes an upload installable (a manifest that parses, a component that
# compiles and matches it) is beyond JSON Schema: the fuzzer's schema-valid
# uploads are refused with 400, as they must be.
[[operations]]
include-path = "/v1/api/admin/plugins/install"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]

# Likewise a SKILL.md: YAML frontmatter with a valid name and description is
# beyond JSON Schema, so schema-valid documents may be refused with 400.
[[operations]]
include-path-regex = "^/v1/api/admin/skills"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429"]
"#
        ),
    )
    .unwrap();
    // A fixed seed keeps CI reproducible; TURNSTONE_FUZZ_SEED explores others.
    let seed = std::env::var("TURNSTONE_FUZZ_SEED").unwrap_or_else(|_| "15".into());
    let started = Instant::now();
    let out = tokio::task::spawn_blocking({
        let base = srv.base.clone();
        let dir = srv.dir.path().to_path_buf();
        move || {
            Command::new(&bin)
                .arg("--config-file")
                .arg(&config)
                .arg("run")
                .arg(format!("{base}/openapi.json"))
                .args(["--checks", "all"])
                .args(["--header", &format!("Authorization: Bearer {token}")])
                // The event streams never end; their frames are `WsEvent` /
                // `GlobalEvent` JSON, checked by the wire tests.
                .args(["--exclude-path-regex", "/events"])
                .args(["--seed", &seed])
                .args(["--request-timeout", "20"])
                .arg("--no-color")
                .env("SCHEMATHESIS_HOOKS", "")
                .current_dir(dir)
                .output()
        }
    })
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "schemathesis found problems ({:.0} s):\n{stdout}\n{stderr}\nserver log tail:\n{}",
        started.elapsed().as_secs_f64(),
        srv.stderr
            .lock()
            .map(|l| l
                .iter()
                .rev()
                .take(40)
                .rev()
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"))
            .unwrap_or_default()
    );
    // It really ran: every operation but the two streams was exercised.
    assert!(
        stdout.contains("passed") && !stdout.contains(" 0 passed"),
        "{stdout}"
    );
}
