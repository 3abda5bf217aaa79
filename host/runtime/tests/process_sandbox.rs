//! Processes the built-in `bash` tool spawns run under the plugin's grants,
//! enforced by the kernel (Landlock, seccomp, a network namespace with the
//! host's egress proxy): real component, real runtime, real processes.

mod common;

use common::*;
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use turnstone_runtime::audit::Touched;
use turnstone_runtime::sandboxing::{Sandbox, Support, SystemPaths};
use turnstone_runtime::{LoadedPlugin, PluginSettings, PluginSource, Runtime};

async fn bash(rt: &Runtime, ws: &Path, settings: PluginSettings) -> LoadedPlugin {
    rt.load(
        PluginSource {
            dir: staged("components", "bash"),
            builtin: true,
        },
        PluginSettings {
            workspace: Some(ws.to_path_buf()),
            ..settings
        },
    )
    .await
    .expect("loading bash")
}

async fn run(p: &LoadedPlugin, ws: &Path, command: &str) -> (String, bool, Touched) {
    let args = json!({ "command": command }).to_string();
    let (r, touched) = p
        .execute_audited("bash", &args, &ctx(ws), sink(), None)
        .await;
    let r = r.expect("call");
    (r.output, r.is_error, touched)
}

/// A file planted in the host user's `$HOME`, removed on drop.
struct Planted(PathBuf);

impl Planted {
    fn new() -> Self {
        let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
        let p = home.join(format!(".turnstone-sandbox-test-{}", std::process::id()));
        std::fs::write(&p, "PLANTED-SECRET").expect("plant");
        Self(p)
    }
}

impl Drop for Planted {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[tokio::test]
async fn bash_with_default_grants_is_confined_to_the_workspace() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let outside = tempfile::tempdir().expect("outside");
    let planted = Planted::new();
    let p = bash(&rt, &ws, PluginSettings::default()).await;

    let (out, err, touched) = run(
        &p,
        &ws,
        &format!(
            "echo inside > a.txt && cat a.txt; \
             echo pwned > {o}/x.txt; echo write=$?; \
             cat {s}; echo read=$?; \
             bash -c 'sh -c \"cat {s}; echo deep=\\$?\"'; \
             f=$(mktemp) && echo t > \"$f\" && echo tmp=ok; \
             echo x > /tmp/turnstone-shared-$$; echo shared-tmp=$?",
            o = outside.path().display(),
            s = planted.0.display(),
        ),
    )
    .await;
    assert!(!err, "{out}");
    assert!(out.starts_with("inside\n"), "{out}");
    assert!(out.contains("write=1"), "{out}");
    assert!(out.contains("read=1"), "{out}");
    assert!(
        out.contains("deep=1"),
        "a grandchild is confined too: {out}"
    );
    assert!(out.contains("tmp=ok"), "a private temp directory: {out}");
    assert!(
        out.contains("shared-tmp=1"),
        "/tmp itself is not writable: {out}"
    );
    assert!(!out.contains("PLANTED-SECRET"), "{out}");
    assert!(out.contains("Permission denied"), "{out}");
    assert!(!outside.path().join("x.txt").exists());
    // The host says which grant would allow it, once.
    assert_eq!(
        out.matches("[process sandbox] bash's processes may write only in: ")
            .count(),
        1,
        "{out}"
    );
    assert!(
        out.contains(&format!("may write only in: {}", ws.display())),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).expect("a"),
        "inside\n"
    );
    // The capability audit says how the process ran.
    let proc = &touched.processes[0];
    assert_eq!(proc.program, "bash");
    let how = proc.sandbox.as_deref().expect("confinement recorded");
    assert!(how.starts_with("sandboxed: Landlock, seccomp"), "{how}");
    assert!(
        how.contains("egress proxy"),
        "bash's default grant is <public>: {how}"
    );

    let (out, err, _) = run(
        &p,
        &ws,
        "git init -q . && git -c user.name=t -c user.email=t@example.com add a.txt && \
         git -c user.name=t -c user.email=t@example.com commit -q -m one && git log --format=%s",
    )
    .await;
    assert!(!err, "{out}");
    assert_eq!(out.trim(), "one");
}

/// A loopback HTTP listener counting connections.
async fn listener() -> (SocketAddr, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut s, _)) = l.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let _ = s.read(&mut buf).await;
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                    )
                    .await;
            });
        }
    });
    (addr, seen)
}

const BASE_GRANT: &str = r#"
filesystem = [{ path = "workspace", access = "read-write" }]
exec = ["bash"]
"#;

#[tokio::test]
async fn network_follows_the_http_grant() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let (addr, seen) = listener().await;
    let curl = |port: u16| format!("curl -sS -m 5 http://127.0.0.1:{port}/; echo \" rc=$?\"");

    // No http grant: no network at all; the listener sees nothing.
    let p = bash(
        &rt,
        &ws,
        PluginSettings {
            grant: grant(BASE_GRANT),
            ..Default::default()
        },
    )
    .await;
    let (out, _, touched) = run(&p, &ws, &curl(addr.port())).await;
    assert!(out.contains("rc=7"), "{out}");
    let (out, _, _) = run(&p, &ws, "curl -sS -m 5 http://example.invalid/").await;
    assert!(
        out.contains("have no network: the plugin has no http grant"),
        "{out}"
    );
    assert_eq!(seen.load(Ordering::SeqCst), 0);
    assert!(
        touched.processes[0]
            .sandbox
            .as_deref()
            .is_some_and(|s| s.contains("no network")),
        "{touched:?}"
    );

    // The host granted by name: through the proxy; another port is refused
    // with the hint, and both are in the capability audit.
    let p = bash(
        &rt,
        &ws,
        PluginSettings {
            grant: grant(&format!(
                "{BASE_GRANT}\nhttp = [\"127.0.0.1:{}\"]",
                addr.port()
            )),
            ..Default::default()
        },
    )
    .await;
    let (out, _, touched) = run(
        &p,
        &ws,
        &format!("{}; {}", curl(addr.port()), curl(addr.port() + 1)),
    )
    .await;
    assert!(out.contains("hello rc=0"), "{out}");
    assert!(out.contains("refused 127.0.0.1"), "{out}");
    assert!(out.contains("http"), "the refusal names the grant: {out}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    let hosts: Vec<(String, bool)> = touched
        .hosts
        .iter()
        .map(|h| (h.host.clone(), h.denied.is_some()))
        .collect();
    assert_eq!(
        hosts,
        [
            (format!("127.0.0.1:{}", addr.port()), false),
            (format!("127.0.0.1:{}", addr.port() + 1), true)
        ]
    );

    // `<public>` screens addresses like component egress: loopback is refused.
    let p = bash(
        &rt,
        &ws,
        PluginSettings {
            grant: grant(&format!("{BASE_GRANT}\nhttp = [\"<public>\"]")),
            ..Default::default()
        },
    )
    .await;
    let (out, _, _) = run(&p, &ws, &curl(addr.port())).await;
    assert!(out.contains("refused 127.0.0.1"), "{out}");
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_operator_can_opt_a_plugin_out_and_it_shows() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let outside = tempfile::tempdir().expect("outside");
    let p = bash(
        &rt,
        &ws,
        PluginSettings {
            grant: grant(&format!("{BASE_GRANT}\nprocess_sandbox = \"off\"")),
            ..Default::default()
        },
    )
    .await;
    let (out, err, touched) = run(
        &p,
        &ws,
        &format!("echo free > {}/x.txt; echo rc=$?", outside.path().display()),
    )
    .await;
    assert!(!err && out.contains("rc=0"), "{out}");
    assert!(outside.path().join("x.txt").exists());
    assert!(
        touched.processes[0]
            .sandbox
            .as_deref()
            .is_some_and(|s| s.starts_with("not sandboxed")),
        "{touched:?}"
    );
}

#[tokio::test]
async fn without_landlock_processes_are_refused_unless_opted_out() {
    let rt = runtime();
    let (_t, ws) = workspace();
    let unsupported = Arc::new(Sandbox::new(
        Support::simulated_unsupported(),
        SystemPaths::default(),
    ));
    let p = bash(
        &rt,
        &ws,
        PluginSettings {
            sandbox: unsupported.clone(),
            ..Default::default()
        },
    )
    .await;
    let (out, err, touched) = run(&p, &ws, "echo should-not-run").await;
    assert!(err, "{out}");
    assert!(!out.contains("should-not-run"));
    assert!(out.contains("Landlock"), "{out}");
    assert!(
        out.contains("process_sandbox = \"off\""),
        "names the opt-out: {out}"
    );
    assert!(touched.processes[0].denied.is_some(), "{touched:?}");

    let p = bash(
        &rt,
        &ws,
        PluginSettings {
            sandbox: unsupported,
            grant: grant(&format!("{BASE_GRANT}\nprocess_sandbox = \"off\"")),
            ..Default::default()
        },
    )
    .await;
    let (out, err, _) = run(&p, &ws, "echo ran").await;
    assert!(!err && out.contains("ran"), "{out}");
}
