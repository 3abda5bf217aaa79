//! Limits and capabilities enforced on a hostile component, through the real
//! runtime: deadlines, memory caps, traps, filesystem, processes, environment,
//! secrets and cancellation.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use turnstone_runtime::{CallError, Limits, LoadedPlugin, PluginSettings, Runtime};

async fn hostile(
    rt: &Runtime,
    ws: &std::path::Path,
    grant_toml: &str,
    limits: Limits,
) -> LoadedPlugin {
    load(
        rt,
        "test-components",
        "hostile",
        PluginSettings {
            grant: grant(grant_toml),
            workspace: Some(ws.to_path_buf()),
            limits,
            secrets: Arc::new(StaticSecrets(BTreeMap::from([(
                "HOSTILE_TOKEN".to_string(),
                "s3cret-value".to_string(),
            )]))),
            ..Default::default()
        },
    )
    .await
}

async fn call(
    p: &LoadedPlugin,
    ws: &std::path::Path,
    tool: &str,
    args: serde_json::Value,
) -> Result<turnstone_runtime::ToolResult, CallError> {
    p.execute(tool, &args.to_string(), &ctx(ws), sink(), None)
        .await
}

#[tokio::test]
async fn infinite_loop_is_stopped_at_the_deadline_and_the_plugin_recovers() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let limits = Limits {
        call_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let p = hostile(&rt, &ws, "", limits).await;
    let started = Instant::now();
    let err = call(&p, &ws, "spin", serde_json::json!({}))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, CallError::Deadline { .. }), "{err}");
    assert!(err.to_string().contains("deadline"), "{err}");
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let ok = call(&p, &ws, "echo", serde_json::json!({"text": "still alive"}))
        .await
        .unwrap();
    assert_eq!(ok.output, "still alive");
    assert_eq!(p.ctx.counters.failures(), 1);
}

#[tokio::test]
async fn memory_overrun_fails_clearly_and_the_host_lives_on() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let limits = Limits {
        memory_bytes: 32 << 20,
        ..Limits::default()
    };
    let p = hostile(&rt, &ws, "", limits).await;
    call(&p, &ws, "echo", serde_json::json!({"text": "x"}))
        .await
        .unwrap();
    let small = p.ctx.counters.memory_peak_bytes();
    assert!(small > 0 && small < 4 << 20, "{small}");
    let err = call(&p, &ws, "hog", serde_json::json!({"mb": 64}))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::MemoryExceeded { .. }), "{err}");
    assert!(err.to_string().contains("memory limit of 32 MiB"), "{err}");
    // The high-water mark counts what was granted, never the refused growth.
    let capped = p.ctx.counters.memory_peak_bytes();
    assert!(capped > small && capped <= 32 << 20, "{capped}");
    // Under the cap the same tool works, in a fresh store.
    let ok = call(&p, &ws, "hog", serde_json::json!({"mb": 4}))
        .await
        .unwrap();
    assert_eq!(ok.output, "allocated 4 MiB");
    // A peak, not the last call's size.
    assert_eq!(p.ctx.counters.memory_peak_bytes(), capped);
}

/// A growth the plugin's limit allows but the engine's pool slot cannot hold
/// fails in wasmtime, after the limiter said yes: the high-water mark keeps
/// what the memory reached, not the size it failed to grow to.
#[tokio::test]
async fn a_growth_the_pool_refuses_is_not_counted_as_reached() {
    let rt = Runtime::new(turnstone_runtime::RuntimeOptions {
        cache_dir: Some(target_dir().join("test-cache")),
        engine: turnstone_runtime::engine::EngineOptions {
            max_memory_bytes: 64 << 20,
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap();
    let (_t, ws) = workspace();
    let limits = Limits {
        memory_bytes: 256 << 20,
        ..Limits::default()
    };
    let p = hostile(&rt, &ws, "", limits).await;
    let err = call(&p, &ws, "hog", serde_json::json!({"mb": 128}))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Trap { .. }), "{err}");
    let peak = p.ctx.counters.memory_peak_bytes();
    assert!(peak > 32 << 20 && peak <= 64 << 20, "{peak}");
}

#[tokio::test]
async fn a_guest_panic_is_a_trap_with_the_panic_message() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(&rt, &ws, "", Limits::default()).await;
    let err = call(&p, &ws, "panic", serde_json::json!({}))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Trap { .. }), "{err}");
    assert!(err.to_string().contains("deliberate test panic"), "{err}");
    assert!(
        call(&p, &ws, "echo", serde_json::json!({"text": "x"}))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn filesystem_is_limited_to_granted_directories() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let (_o, outside) = workspace();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    std::fs::write(ws.join("ok.txt"), "fine").unwrap();
    std::os::unix::fs::symlink(outside.join("secret.txt"), ws.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, ws.join("linkdir")).unwrap();

    let ro = hostile(
        &rt,
        &ws,
        r#"filesystem = [{ path = "workspace", access = "ro" }]"#,
        Limits::default(),
    )
    .await;
    let read = |p: String| serde_json::json!({ "path": p });
    let ok = call(
        &ro,
        &ws,
        "read",
        read(ws.join("ok.txt").display().to_string()),
    )
    .await
    .unwrap();
    assert!(!ok.is_error && ok.output == "fine", "{}", ok.output);
    for path in [
        "/etc/passwd".to_string(),
        format!(
            "{}/../{}/secret.txt",
            ws.display(),
            outside.file_name().unwrap().to_string_lossy()
        ),
        outside.join("secret.txt").display().to_string(),
        ws.join("link.txt").display().to_string(),
        ws.join("linkdir/secret.txt").display().to_string(),
    ] {
        let r = call(&ro, &ws, "read", read(path.clone())).await.unwrap();
        assert!(
            r.is_error,
            "{path} must not be readable, got {:?}",
            r.output
        );
        assert!(!r.output.contains("top secret") && !r.output.contains("root:"));
    }
    let w = call(
        &ro,
        &ws,
        "write",
        serde_json::json!({"path": ws.join("new.txt"), "content": "x"}),
    )
    .await
    .unwrap();
    assert!(w.is_error, "write under a read-only grant must fail");
    assert!(!ws.join("new.txt").exists());

    let rw = hostile(
        &rt,
        &ws,
        r#"filesystem = [{ path = "workspace", access = "rw" }]"#,
        Limits::default(),
    )
    .await;
    let w = call(
        &rw,
        &ws,
        "write",
        serde_json::json!({"path": ws.join("new.txt"), "content": "x"}),
    )
    .await
    .unwrap();
    assert!(!w.is_error, "{}", w.output);
    assert_eq!(std::fs::read_to_string(ws.join("new.txt")).unwrap(), "x");

    let none = hostile(&rt, &ws, "", Limits::default()).await;
    let r = call(
        &none,
        &ws,
        "read",
        read(ws.join("ok.txt").display().to_string()),
    )
    .await
    .unwrap();
    assert!(r.is_error, "no grant, no read");
}

#[tokio::test]
async fn processes_need_an_exec_grant_and_stream_output() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(
        &rt,
        &ws,
        r#"exec = ["sh"]
env = ["GREETING"]
filesystem = [{ path = "workspace", access = "ro" }]"#,
        Limits::default(),
    )
    .await;
    let chunks = sink();
    let r = p
        .execute(
            "exec",
            &serde_json::json!({"program": "sh", "args": ["-c", "echo one; sleep 0.2; echo two; echo $GREETING; env | grep -c . "], "env": [["GREETING", "hi"]]}).to_string(),
            &ctx(&ws),
            chunks.clone(),
            None,
        )
        .await
        .unwrap();
    assert!(!r.is_error, "{}", r.output);
    assert!(
        r.output.starts_with("exit=0 out=one\ntwo\nhi\n"),
        "{}",
        r.output
    );
    let got = chunks.0.lock().unwrap().clone();
    assert!(
        got.len() >= 2,
        "output should arrive in pieces while running: {got:?}"
    );
    assert_eq!(got[0], "one\n");

    let denied = call(
        &p,
        &ws,
        "exec",
        serde_json::json!({"program": "echo", "args": ["x"]}),
    )
    .await
    .unwrap();
    assert!(denied.is_error);
    assert!(denied.output.contains("exec denied"), "{}", denied.output);
    assert!(
        denied
            .output
            .contains("[plugins.grants.hostile] exec = [\"echo\"]"),
        "{}",
        denied.output
    );

    let env_denied = call(
        &p,
        &ws,
        "exec",
        serde_json::json!({"program": "sh", "args": ["-c", "true"], "env": [["AWS_SECRET_ACCESS_KEY", "x"]]}),
    )
    .await
    .unwrap();
    assert!(
        env_denied.is_error && env_denied.output.contains("env denied"),
        "{}",
        env_denied.output
    );
    assert!(
        env_denied.output.contains("manifest does not request it"),
        "{}",
        env_denied.output
    );
    assert_eq!(p.ctx.counters.denials(), 2);
}

#[tokio::test]
async fn guests_see_no_host_environment() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(&rt, &ws, "", Limits::default()).await;
    let r = call(&p, &ws, "env", serde_json::json!({})).await.unwrap();
    assert_eq!(r.output, "vars=");
}

#[tokio::test]
async fn cancel_stops_a_call_promptly_and_kills_its_process() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(&rt, &ws, r#"exec = ["sh"]"#, Limits::default()).await;
    let marker = ws.join("survived");
    let token = tokio_util::sync::CancellationToken::new();
    let t2 = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        t2.cancel();
    });
    let started = Instant::now();
    let args = serde_json::json!({"program": "sh", "args": ["-c", format!("sleep 2; touch {}", marker.display())]});
    let err = p
        .execute("exec", &args.to_string(), &ctx(&ws), sink(), Some(&token))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Cancelled { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(1));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !marker.exists(),
        "the child process group must be killed on cancel"
    );

    let t3 = tokio_util::sync::CancellationToken::new();
    t3.cancel();
    let err = p
        .execute("sleep", r#"{"ms": 5000}"#, &ctx(&ws), sink(), Some(&t3))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Cancelled { .. }));
}

#[tokio::test]
async fn kv_persists_across_calls_of_one_plugin() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let p = hostile(&rt, &ws, "", Limits::default()).await;
    let a = call(&p, &ws, "kv", serde_json::json!({"text": "first"}))
        .await
        .unwrap();
    assert_eq!(a.output, "prev=");
    let b = call(&p, &ws, "kv", serde_json::json!({"text": "second"}))
        .await
        .unwrap();
    assert_eq!(b.output, "prev=first");
}
