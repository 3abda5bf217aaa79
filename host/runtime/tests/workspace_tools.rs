//! The built-in workspace tools (`bash`, `files`) through the real runtime in a
//! temp workspace: every rule and refusal of the tools' contracts.

mod common;

use common::*;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use turnstone_runtime::{CallContext, LoadedPlugin, PluginSettings, PluginSource, Runtime};

async fn builtin(rt: &Runtime, name: &str, ws: &Path) -> LoadedPlugin {
    rt.load(
        PluginSource {
            dir: staged("components", name),
            builtin: true,
        },
        PluginSettings {
            workspace: Some(ws.to_path_buf()),
            ..Default::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("loading {name}: {e}"))
}

fn call_ctx(ws: &Path, call: &str) -> CallContext {
    CallContext {
        call_id: call.into(),
        ..ctx(ws)
    }
}

async fn run(p: &LoadedPlugin, tool: &str, args: serde_json::Value, ws: &Path) -> (String, bool) {
    let r = p
        .execute(tool, &args.to_string(), &ctx(ws), sink(), None)
        .await
        .unwrap();
    (r.output, r.is_error)
}

async fn refusal(p: &LoadedPlugin, tool: &str, args: serde_json::Value, ws: &Path) -> String {
    match p.prepare(tool, &args.to_string(), &ctx(ws)).await.unwrap() {
        Err(msg) => msg,
        Ok(preview) => panic!("{tool} {args} should be refused, got {preview:?}"),
    }
}

#[tokio::test]
async fn bash_runs_in_the_workspace_and_marks_failures() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "bash", &ws).await;
    let spec = p.tool("bash").unwrap();
    assert!(!spec.auto_approve);
    assert_eq!(spec.primary_key.as_deref(), Some("command"));

    let (out, err) = run(
        &p,
        "bash",
        json!({"command": "pwd; echo out; echo err >&2"}),
        &ws,
    )
    .await;
    assert!(!err, "{out}");
    assert_eq!(out, format!("{}\nout\n[stderr] err\n", ws.display()));

    let (out, err) = run(
        &p,
        "bash",
        json!({"command": "echo both 2>&1 >&2 | cat; echo x 2>&1"}),
        &ws,
    )
    .await;
    assert!(!err);
    assert!(out.contains("x\n") && !out.contains("[stderr] x"), "{out}");

    // Exit 1 is a normal answer (grep found nothing); ≥ 2 and signals are errors.
    let (out, err) = run(&p, "bash", json!({"command": "exit 1"}), &ws).await;
    assert!(!err && out.contains("[exit code: 1]"), "{out}");
    let (out, err) = run(&p, "bash", json!({"command": "echo partial; exit 3"}), &ws).await;
    assert!(err && out == "partial\n[exit code: 3]", "{out}");
    let (out, err) = run(&p, "bash", json!({"command": "kill -9 $$"}), &ws).await;
    assert!(err && out.contains("killed by signal 9"), "{out}");

    // stop_on_error stops at the first failure.
    let (out, _) = run(
        &p,
        "bash",
        json!({"command": "false\necho after", "stop_on_error": true}),
        &ws,
    )
    .await;
    assert!(!out.contains("after"), "{out}");
    let (out, _) = run(&p, "bash", json!({"command": "false\necho after"}), &ws).await;
    assert!(out.contains("after"), "{out}");

    // Typographic characters are normalised before running.
    let (out, _) = run(
        &p,
        "bash",
        json!({"command": "echo \u{201C}quoted\u{201D} \u{2014}n"}),
        &ws,
    )
    .await;
    assert_eq!(out, "quoted -n\n");

    // Writes land in the workspace.
    run(&p, "bash", json!({"command": "echo hi > made.txt"}), &ws).await;
    assert_eq!(
        std::fs::read_to_string(ws.join("made.txt")).unwrap(),
        "hi\n"
    );
}

#[tokio::test]
async fn bash_refuses_destructive_commands_and_bad_timeouts() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "bash", &ws).await;
    for cmd in [
        "rm -rf /",
        "mkfs.ext4 /dev/sda",
        ":(){ :|:& };:",
        "dd if=/dev/zero of=/dev/sda",
    ] {
        let msg = refusal(&p, "bash", json!({"command": cmd}), &ws).await;
        // Every refusal carries exactly one "Error: " prefix.
        assert!(msg.starts_with("Error: Blocked:"), "{cmd}: {msg}");
        // execute re-checks: a call that skipped prepare is refused too.
        let (out, err) = run(&p, "bash", json!({"command": cmd}), &ws).await;
        assert!(err && out.starts_with("Error: Blocked:"), "{out}");
    }
    let msg = refusal(&p, "bash", json!({"command": "ls", "timeout": 601}), &ws).await;
    assert!(msg.contains("between 1 and 600"), "{msg}");
    let msg = refusal(&p, "bash", json!({"command": "ls", "timeout": 0}), &ws).await;
    assert!(msg.contains("between 1 and 600"), "{msg}");
    let preview = p
        .prepare("bash", &json!({"command": "ls -la"}).to_string(), &ctx(&ws))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(preview.header, "bash: ls -la");
    assert!(preview.needs_approval);
}

#[tokio::test]
async fn bash_scrubs_secrets_from_the_environment() {
    // Safe: tests in this binary do not read these variables concurrently.
    unsafe {
        std::env::set_var("HOME", "/home/turnstone-test");
        std::env::set_var("OPENAI_API_KEY", "sk-must-not-leak");
        std::env::set_var("GITHUB_TOKEN", "ghp-must-not-leak");
    }
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "bash", &ws).await;
    let (out, _) = run(&p, "bash", json!({"command": "env"}), &ws).await;
    assert!(out.contains("HOME=/home/turnstone-test"), "{out}");
    assert!(!out.contains("must-not-leak"), "{out}");
    assert!(
        !out.contains("OPENAI_API_KEY") && !out.contains("GITHUB_TOKEN"),
        "{out}"
    );
}

#[tokio::test]
async fn bash_streams_lines_in_order_and_times_out() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "bash", &ws).await;
    let chunks = sink();
    let r = p
        .execute(
            "bash",
            &json!({"command": "for i in 1 2 3; do echo line $i; echo warn $i >&2; sleep 0.05; done"}).to_string(),
            &ctx(&ws),
            chunks.clone(),
            None,
        )
        .await
        .unwrap();
    assert!(!r.is_error);
    let got = chunks.0.lock().unwrap().clone();
    assert_eq!(
        got,
        [
            "line 1\n",
            "[stderr] warn 1\n",
            "line 2\n",
            "[stderr] warn 2\n",
            "line 3\n",
            "[stderr] warn 3\n"
        ]
    );

    let t = Instant::now();
    let (out, err) = run(
        &p,
        "bash",
        json!({"command": "echo started; sleep 30", "timeout": 1}),
        &ws,
    )
    .await;
    assert!(err, "{out}");
    assert!(
        out.starts_with("started\n") && out.contains("timed out after 1 s"),
        "{out}"
    );
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[tokio::test]
async fn cancelling_bash_kills_the_process_group() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = Arc::new(builtin(&rt, "bash", &ws).await);
    let token = CancellationToken::new();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let chunks = Arc::new(Chunks(Default::default(), Some(tx)));
    let call = {
        let (p, ws, token) = (p.clone(), ws.clone(), token.clone());
        tokio::spawn(async move {
            p.execute(
                "bash",
                &json!({"command": "(sleep 60; echo survived > survived.txt) & echo $! > child.pid; echo ready; wait"}).to_string(),
                &ctx(&ws),
                chunks,
                Some(&token),
            )
            .await
        })
    };
    assert_eq!(rx.recv().await.as_deref(), Some("ready\n"));
    token.cancel();
    let r = call.await.unwrap();
    assert!(
        matches!(r, Err(turnstone_runtime::CallError::Cancelled { .. })),
        "{r:?}"
    );
    let pid: i32 = std::fs::read_to_string(ws.join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The grandchild is gone too (the whole group was killed).
    let deadline = Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        state.is_empty() || state.contains(") Z "),
        "child {pid} still running: {state}"
    );
}

#[tokio::test]
async fn background_shells_are_read_incrementally_filtered_and_killed() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "bash", &ws).await;
    let (out, err) = run(
        &p,
        "bash",
        json!({"command": "for i in 1 2 3 4; do echo tick $i; echo note $i >&2; sleep 0.1; done; sleep 60", "run_in_background": true}),
        &ws,
    )
    .await;
    assert!(!err, "{out}");
    let id = out
        .split_whitespace()
        .find(|w| w.starts_with("bash_"))
        .unwrap()
        .trim_end_matches('.')
        .to_string();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (first, _) = run(
        &p,
        "bash_output",
        json!({"shell_id": id, "filter": "tick [12]"}),
        &ws,
    )
    .await;
    assert_eq!(first, "tick 1\ntick 2\n[still running]", "{first}");
    // Output already read is not returned again.
    let (second, _) = run(&p, "bash_output", json!({"shell_id": id}), &ws).await;
    assert_eq!(second, "(no new output)\n[still running]", "{second}");
    let (killed, err) = run(&p, "kill_shell", json!({"shell_id": id}), &ws).await;
    assert!(!err, "{killed}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (last, _) = run(&p, "bash_output", json!({"shell_id": id}), &ws).await;
    assert!(last.contains("[finished: killed by signal 9]"), "{last}");
    // Finished and read: forgotten.
    let (gone, err) = run(&p, "bash_output", json!({"shell_id": id}), &ws).await;
    assert!(err && gone.contains("no background shell"), "{gone}");
    // Another session cannot see this session's shells.
    let (out, _) = run(
        &p,
        "bash",
        json!({"command": "sleep 30", "run_in_background": true}),
        &ws,
    )
    .await;
    let id = out
        .split_whitespace()
        .find(|w| w.starts_with("bash_"))
        .unwrap()
        .trim_end_matches('.')
        .to_string();
    let other = CallContext {
        session_id: "ws_other".into(),
        ..ctx(&ws)
    };
    let r = p
        .execute(
            "kill_shell",
            &json!({"shell_id": id}).to_string(),
            &other,
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(r.is_error, "{}", r.output);
    let (_, err) = run(&p, "kill_shell", json!({"shell_id": id}), &ws).await;
    assert!(!err);
    let msg = refusal(&p, "bash_output", json!({"shell_id": "nope"}), &ws).await;
    assert!(msg.contains("not a shell id"), "{msg}");
}

#[tokio::test]
async fn write_and_diff_files() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "files", &ws).await;
    let preview = p
        .prepare(
            "write_file",
            &json!({"path": "new/dir/a.txt", "content": "one\n"}).to_string(),
            &ctx(&ws),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(preview.needs_approval);
    assert!(
        preview
            .header
            .starts_with("write_file: create new/dir/a.txt"),
        "{}",
        preview.header
    );
    assert!(preview.body.unwrap().contains("+one"));
    let (out, err) = run(
        &p,
        "write_file",
        json!({"path": "new/dir/a.txt", "content": "one\n"}),
        &ws,
    )
    .await;
    assert!(!err, "{out}");
    run(
        &p,
        "write_file",
        json!({"path": "new/dir/a.txt", "content": "two\n", "mode": "append"}),
        &ws,
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(ws.join("new/dir/a.txt")).unwrap(),
        "one\ntwo\n"
    );
    let msg = refusal(
        &p,
        "write_file",
        json!({"path": "a", "content": "", "mode": "insert"}),
        &ws,
    )
    .await;
    assert!(msg.contains("overwrite"), "{msg}");

    std::fs::write(ws.join("b.txt"), "one\nTWO\n").unwrap();
    let (diff, err) = run(
        &p,
        "diff_file",
        json!({"path": "new/dir/a.txt", "path2": "b.txt"}),
        &ws,
    )
    .await;
    assert!(!err, "{diff}");
    assert!(
        diff.contains("-two\n+TWO\n") && diff.contains("@@"),
        "{diff}"
    );
    let (same, _) = run(
        &p,
        "diff_file",
        json!({"path": "b.txt", "content": "one\nTWO\n"}),
        &ws,
    )
    .await;
    assert_eq!(same, "No differences.");
    let (ctx0, _) = run(
        &p,
        "diff_file",
        json!({"path": "b.txt", "content": "one\nthree\n", "context_lines": 0}),
        &ws,
    )
    .await;
    assert!(!ctx0.contains(" one"), "no context lines: {ctx0}");
    std::fs::write(ws.join("bin.dat"), [0u8, 1, 2]).unwrap();
    let (bin, err) = run(
        &p,
        "diff_file",
        json!({"path": "bin.dat", "content": "x"}),
        &ws,
    )
    .await;
    assert!(err && bin.contains("binary"), "{bin}");
    let msg = refusal(
        &p,
        "diff_file",
        json!({"path": "b.txt", "context_lines": 21, "content": ""}),
        &ws,
    )
    .await;
    assert!(msg.contains("between 0 and 20"), "{msg}");
    let msg = refusal(&p, "diff_file", json!({"path": "b.txt"}), &ws).await;
    assert!(msg.contains("exactly one"), "{msg}");
}

#[tokio::test]
async fn edit_file_rules() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "files", &ws).await;
    std::fs::write(ws.join("code.rs"), "let a = 1;\nlet b = 2;\nlet a = 1;\n").unwrap();
    let edit = |args: serde_json::Value| args;

    // Without a prior read the edit is refused.
    let msg = refusal(
        &p,
        "edit_file",
        edit(json!({"path": "code.rs", "old_string": "b = 2", "new_string": "b = 3"})),
        &ws,
    )
    .await;
    assert!(msg.contains("read_file"), "{msg}");
    run(&p, "read_file", json!({"path": "code.rs"}), &ws).await;

    // Ambiguous, missing, identical.
    let msg = refusal(
        &p,
        "edit_file",
        json!({"path": "code.rs", "old_string": "let a = 1;", "new_string": "let a = 9;"}),
        &ws,
    )
    .await;
    assert!(msg.contains("matches 2 locations (lines 1, 3)"), "{msg}");
    let msg = refusal(
        &p,
        "edit_file",
        json!({"path": "code.rs", "old_string": "nope", "new_string": "x"}),
        &ws,
    )
    .await;
    assert!(msg.contains("not found"), "{msg}");
    let msg = refusal(
        &p,
        "edit_file",
        json!({"path": "code.rs", "old_string": "b", "new_string": "b"}),
        &ws,
    )
    .await;
    assert!(msg.contains("identical"), "{msg}");
    let msg = refusal(&p, "edit_file", json!({"path": "code.rs", "old_string": "a", "new_string": "b", "replace_all": true, "near_line": 1}), &ws).await;
    assert!(msg.contains("cannot be combined"), "{msg}");

    // near_line picks the nearest occurrence; the preview is a diff.
    let args = json!({"path": "code.rs", "old_string": "let a = 1;", "new_string": "let a = 9;", "near_line": 3});
    let preview = p
        .prepare("edit_file", &args.to_string(), &call_ctx(&ws, "c1"))
        .await
        .unwrap()
        .unwrap();
    assert!(preview.needs_approval);
    assert!(
        preview
            .body
            .as_deref()
            .unwrap()
            .contains("-let a = 1;\n+let a = 9;"),
        "{preview:?}"
    );
    let r = p
        .execute(
            "edit_file",
            &args.to_string(),
            &call_ctx(&ws, "c1"),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(
        std::fs::read_to_string(ws.join("code.rs")).unwrap(),
        "let a = 1;\nlet b = 2;\nlet a = 9;\n"
    );

    // The file changing between prepare and execute is detected; nothing is written.
    let args = json!({"path": "code.rs", "old_string": "let b = 2;", "new_string": "let b = 5;"});
    p.prepare("edit_file", &args.to_string(), &call_ctx(&ws, "c2"))
        .await
        .unwrap()
        .unwrap();
    std::fs::write(ws.join("code.rs"), "let a = 1;\nlet b = 2;\n// changed\n").unwrap();
    let r = p
        .execute(
            "edit_file",
            &args.to_string(),
            &call_ctx(&ws, "c2"),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(
        r.is_error && r.output.contains("changed after this edit was previewed"),
        "{}",
        r.output
    );
    assert!(
        std::fs::read_to_string(ws.join("code.rs"))
            .unwrap()
            .ends_with("// changed\n")
    );

    // Batches: overlap refused, otherwise all applied at once.
    let msg = refusal(
        &p,
        "edit_file",
        json!({"path": "code.rs", "edits": [
        {"old_string": "let a = 1;\nlet b", "new_string": "x"},
        {"old_string": "b = 2;", "new_string": "y"}]}),
        &ws,
    )
    .await;
    assert!(msg.contains("overlap"), "{msg}");
    let (out, err) = run(
        &p,
        "edit_file",
        json!({"path": "code.rs", "edits": [
        {"old_string": "// changed", "new_string": "// done"},
        {"old_string": "let a = 1;", "new_string": "let a = 0;"}]}),
        &ws,
    )
    .await;
    assert!(!err, "{out}");
    assert_eq!(
        std::fs::read_to_string(ws.join("code.rs")).unwrap(),
        "let a = 0;\nlet b = 2;\n// done\n"
    );
    // A batch with one bad entry writes nothing.
    let (out, err) = run(
        &p,
        "edit_file",
        json!({"path": "code.rs", "edits": [
        {"old_string": "let a = 0;", "new_string": "let a = 7;"},
        {"old_string": "missing", "new_string": "y"}]}),
        &ws,
    )
    .await;
    assert!(err && out.contains("edits[1]"), "{out}");
    assert!(
        std::fs::read_to_string(ws.join("code.rs"))
            .unwrap()
            .starts_with("let a = 0;")
    );

    // replace_all.
    let (out, err) = run(
        &p,
        "edit_file",
        json!({"path": "code.rs", "old_string": "let", "new_string": "const", "replace_all": true}),
        &ws,
    )
    .await;
    assert!(!err && out.contains("2 replacements"), "{out}");

    // diff_file satisfies the read guard for another file.
    std::fs::write(ws.join("other.txt"), "alpha\n").unwrap();
    run(
        &p,
        "diff_file",
        json!({"path": "other.txt", "content": "beta\n"}),
        &ws,
    )
    .await;
    let (out, err) = run(
        &p,
        "edit_file",
        json!({"path": "other.txt", "old_string": "alpha", "new_string": "beta"}),
        &ws,
    )
    .await;
    assert!(!err, "{out}");
}

#[tokio::test]
async fn file_tools_cannot_leave_the_workspace() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let (_o, outside) = workspace();
    std::fs::write(outside.join("secret.txt"), "top secret\n").unwrap();
    let p = builtin(&rt, "files", &ws).await;
    let target = outside.join("secret.txt");
    let (out, err) = run(&p, "read_file", json!({"path": target}), &ws).await;
    assert!(err && !out.contains("top secret"), "{out}");
    let (out, err) = run(
        &p,
        "write_file",
        json!({"path": outside.join("x.txt"), "content": "x"}),
        &ws,
    )
    .await;
    assert!(err, "{out}");
    assert!(!outside.join("x.txt").exists());
    let escape = format!(
        "../{}/secret.txt",
        outside.file_name().unwrap().to_string_lossy()
    );
    let (out, err) = run(&p, "read_file", json!({"path": escape}), &ws).await;
    assert!(err && !out.contains("top secret"), "{out}");
    std::os::unix::fs::symlink(&target, ws.join("link.txt")).unwrap();
    let (out, err) = run(&p, "read_file", json!({"path": "link.txt"}), &ws).await;
    assert!(err && !out.contains("top secret"), "{out}");
    let (out, err) = run(
        &p,
        "diff_file",
        json!({"path": "link.txt", "content": ""}),
        &ws,
    )
    .await;
    assert!(err && !out.contains("top secret"), "{out}");
}

#[tokio::test]
async fn search_finds_lines_respects_gitignore_and_caps_output() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "search", &ws).await;
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    std::fs::create_dir_all(ws.join("target")).unwrap();
    std::fs::write(ws.join(".gitignore"), "target/\n*.log\n").unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {\n    helper();\n}\n").unwrap();
    std::fs::write(ws.join("src/deep/util.rs"), "pub fn helper() {}\n").unwrap();
    std::fs::write(ws.join("target/gen.rs"), "fn helper() {}\n").unwrap();
    std::fs::write(ws.join("debug.log"), "helper\n").unwrap();
    std::fs::write(ws.join("blob.bin"), b"helper\0\x01").unwrap();
    let (out, err) = run(&p, "search", json!({"query": "helper\\(\\)"}), &ws).await;
    assert!(!err, "{out}");
    let mut lines: Vec<&str> = out.lines().filter(|l| l.contains(':')).collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "src/deep/util.rs:1: pub fn helper() {}",
            "src/main.rs:2:     helper();"
        ]
    );
    assert!(out.contains("[2 matches in 2 files]"), "{out}");
    // A sub-path narrows the search.
    let (out, _) = run(
        &p,
        "search",
        json!({"query": "helper", "path": "src/deep"}),
        &ws,
    )
    .await;
    assert!(
        out.starts_with("src/deep/util.rs:1:") && !out.contains("main.rs"),
        "{out}"
    );
    // Bad regex, no match, a path outside the workspace.
    let msg = refusal(&p, "search", json!({"query": "("}), &ws).await;
    assert!(msg.contains("invalid regular expression"), "{msg}");
    let (out, _) = run(&p, "search", json!({"query": "zzz_nothing"}), &ws).await;
    assert!(out.starts_with("No matches"), "{out}");
    let (out, err) = run(&p, "search", json!({"query": "root", "path": "/etc"}), &ws).await;
    assert!(err, "{out}");
    // Output is capped.
    let many: String = (0..500).map(|i| format!("hit {i}\n")).collect();
    std::fs::write(ws.join("many.txt"), many).unwrap();
    let (out, _) = run(&p, "search", json!({"query": "^hit"}), &ws).await;
    assert_eq!(
        out.lines().filter(|l| l.starts_with("many.txt:")).count(),
        200
    );
    assert!(out.contains("stopped after 200 matches"), "{out}");
}

/// Arguments as a model might send them, repaired the way the engine does
/// (`ToolSpec::coerce_arguments`) before the call.
fn coerced(p: &LoadedPlugin, tool: &str, args: serde_json::Value) -> String {
    p.tool(tool)
        .unwrap()
        .coerce_arguments(&args.to_string())
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

#[tokio::test]
async fn edit_file_overlaps_deletions_and_string_numbers() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "files", &ws).await;
    std::fs::write(ws.join("a.txt"), "aaa\nx\naaa\n").unwrap();
    run(&p, "read_file", json!({"path": "a.txt"}), &ws).await;

    // Overlapping occurrences are two occurrences: ambiguous, nothing written.
    std::fs::write(ws.join("o.txt"), "aaa\n").unwrap();
    run(&p, "read_file", json!({"path": "o.txt"}), &ws).await;
    let msg = refusal(
        &p,
        "edit_file",
        json!({"path": "o.txt", "old_string": "aa", "new_string": "X"}),
        &ws,
    )
    .await;
    assert!(msg.contains("matches 2 locations (all at line 1"), "{msg}");
    assert!(
        msg.contains("near_line") && msg.contains("replace_all"),
        "{msg}"
    );
    assert_eq!(msg.matches("Error:").count(), 1, "{msg}");
    let (out, err) = run(
        &p,
        "edit_file",
        json!({"path": "o.txt", "old_string": "aa", "new_string": "X"}),
        &ws,
    )
    .await;
    assert!(
        err && out.starts_with("Error: ") && !out.starts_with("Error: Error:"),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(ws.join("o.txt")).unwrap(), "aaa\n");

    // near_line sent as a string is accepted after coercion.
    let args = coerced(
        &p,
        "edit_file",
        json!({"path": "a.txt", "old_string": "aaa", "new_string": "bbb", "near_line": "3"}),
    );
    assert!(args.contains("\"near_line\":3"), "{args}");
    let r = p
        .execute("edit_file", &args, &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "aaa\nx\nbbb\n"
    );

    // A missing new_string deletes (single and batch form).
    let (out, err) = run(
        &p,
        "edit_file",
        json!({"path": "a.txt", "old_string": "x\n"}),
        &ws,
    )
    .await;
    assert!(!err, "{out}");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "aaa\nbbb\n"
    );
    let args = json!({"path": "a.txt", "edits": [{"old_string": "bbb\n"}]});
    let preview = p
        .prepare("edit_file", &args.to_string(), &ctx(&ws))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(preview.header, "edit_file: a.txt (1 edit)");
    let (out, err) = run(&p, "edit_file", args, &ws).await;
    assert!(!err, "{out}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "aaa\n");
    let two = json!({"path": "a.txt", "edits": [{"old_string": "aaa", "new_string": "c"}, {"old_string": "\n", "new_string": "!\n"}]});
    let preview = p
        .prepare("edit_file", &two.to_string(), &ctx(&ws))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(preview.header, "edit_file: a.txt (2 edits)");
    let msg = refusal(
        &p,
        "edit_file",
        json!({"path": "a.txt", "new_string": "y"}),
        &ws,
    )
    .await;
    assert!(msg.contains("needs the old_string"), "{msg}");

    // Deleted between approval and execution: the same one-prefix format.
    std::fs::write(ws.join("gone.txt"), "v1\n").unwrap();
    run(&p, "read_file", json!({"path": "gone.txt"}), &ws).await;
    let args = json!({"path": "gone.txt", "old_string": "v1", "new_string": "v2"}).to_string();
    p.prepare("edit_file", &args, &call_ctx(&ws, "g1"))
        .await
        .unwrap()
        .unwrap();
    std::fs::remove_file(ws.join("gone.txt")).unwrap();
    let r = p
        .execute("edit_file", &args, &call_ctx(&ws, "g1"), sink(), None)
        .await
        .unwrap();
    assert!(r.is_error, "{}", r.output);
    assert!(
        r.output.starts_with("Error: file not found: "),
        "{}",
        r.output
    );
}

#[tokio::test]
async fn every_numeric_and_boolean_parameter_accepts_a_string() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let mut checked = Vec::new();
    for name in ["files", "bash", "search", "web"] {
        let p = builtin(&rt, name, &ws).await;
        for spec in &p.tools {
            let props = spec.parameters["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            for (param, schema) in props {
                let types: Vec<String> = match &schema["type"] {
                    serde_json::Value::String(t) => vec![t.clone()],
                    serde_json::Value::Array(a) => a
                        .iter()
                        .filter_map(|v| v.as_str().map(String::from))
                        .collect(),
                    _ => continue,
                };
                let (text, want) = if types.iter().any(|t| t == "integer") {
                    ("7", json!(7))
                } else if types.iter().any(|t| t == "number") {
                    ("1.5", json!(1.5))
                } else if types.iter().any(|t| t == "boolean") {
                    ("true", json!(true))
                } else {
                    continue;
                };
                let args = spec
                    .coerce_arguments(&json!({ param.as_str(): text }).to_string())
                    .unwrap();
                let v: serde_json::Value = serde_json::from_str(&args).unwrap();
                assert_eq!(v[&param], want, "{}.{param}: {args}", spec.name);
                checked.push(format!("{}.{param}", spec.name));
            }
        }
    }
    for must in [
        "read_file.offset",
        "read_file.limit",
        "edit_file.near_line",
        "edit_file.replace_all",
        "bash.timeout",
        "diff_file.context_lines",
    ] {
        assert!(
            checked.iter().any(|c| c == must),
            "{must} not among {checked:?}"
        );
    }
    // Through a real call: read_file with string offset and limit.
    let files = builtin(&rt, "files", &ws).await;
    std::fs::write(ws.join("n.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    let args = coerced(
        &files,
        "read_file",
        json!({"path": "n.txt", "offset": "2", "limit": "2"}),
    );
    let r = files
        .execute("read_file", &args, &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    assert!(
        r.output.contains("two") && r.output.contains("three") && !r.output.contains("four"),
        "{}",
        r.output
    );
    let bash = builtin(&rt, "bash", &ws).await;
    let args = coerced(&bash, "bash", json!({"command": "echo hi", "timeout": "5"}));
    let r = bash
        .execute("bash", &args, &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(!r.is_error && r.output.contains("hi"), "{}", r.output);
}

#[tokio::test]
async fn bash_guard_refuses_secrets_and_system_paths_but_not_words() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = builtin(&rt, "bash", &ws).await;
    for cmd in [
        "cat /proc/1/environ",
        "cat /proc/self/environ",
        "rm -rf /srv/cache",
        "mv / /tmp/x",
        "sudo -u root rm -rf /etc",
        "bash -c 'reboot'",
    ] {
        let msg = refusal(&p, "bash", json!({ "command": cmd }), &ws).await;
        assert!(msg.starts_with("Error: Blocked:"), "{cmd}: {msg}");
        assert_eq!(msg.matches("Error:").count(), 1, "{msg}");
    }
    for cmd in [
        "echo asphalt",
        "git commit -m 'reboot the docs' --dry-run",
        "echo make mkfs-tool",
    ] {
        let preview = p
            .prepare("bash", &json!({ "command": cmd }).to_string(), &ctx(&ws))
            .await
            .unwrap();
        assert!(preview.is_ok(), "{cmd}: {preview:?}");
    }
    // Inside the workspace an absolute path is the user's own, even under /tmp.
    let inside = format!("rm -rf {}/build", ws.display());
    assert!(
        p.prepare("bash", &json!({ "command": inside }).to_string(), &ctx(&ws))
            .await
            .unwrap()
            .is_ok()
    );
}
