//! Real processes under the real kernel sandbox: files, network, syscalls.

use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use turnstone_sandbox::{EgressPolicy, Policy, Sandbox, Support, SystemPaths};

fn sandbox() -> Sandbox {
    let support = Support::probe();
    assert!(
        support.complete(),
        "this machine must support the sandbox: {}",
        support.summary()
    );
    Sandbox::new(
        support,
        SystemPaths::default().with_toolchains(std::env::var_os("PATH").as_deref(), None),
    )
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

async fn run(sb: &Sandbox, policy: &Policy, cwd: &Path, script: &str) -> Out {
    let mut prepared = sb.prepare(policy).expect("prepare");
    let mut cmd = tokio::process::Command::new("/bin/bash");
    cmd.arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .kill_on_drop(true);
    prepared.install(&mut cmd);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let _running = prepared.start().expect("start");
    let out = child.wait_with_output().await.expect("wait");
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A workspace and, beside it, a directory the process was not granted.
fn dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let root = tempfile::tempdir().expect("tempdir");
    let ws = root.path().join("workspace");
    let outside = root.path().join("home");
    std::fs::create_dir_all(&ws).expect("ws");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("secret.txt"), "TOP-SECRET").expect("secret");
    std::fs::write(ws.join("in.txt"), "inside\n").expect("in");
    (root, ws, outside)
}

fn rw(ws: &Path) -> Policy {
    Policy {
        read_write: vec![ws.to_path_buf()],
        ..Policy::default()
    }
}

#[tokio::test]
async fn files_outside_the_grants_are_neither_read_nor_written() {
    let sb = sandbox();
    let (_root, ws, outside) = dirs();
    let policy = rw(&ws);
    let script = format!(
        "cat in.txt; echo written > out.txt && cat out.txt; \
         cat {o}/secret.txt; echo read=$?; echo pwned > {o}/new.txt; echo write=$?; \
         bash -c 'cat {o}/secret.txt; sh -c \"echo x > {o}/deep.txt\"'; echo deep=$?",
        o = outside.display()
    );
    let out = run(&sb, &policy, &ws, &script).await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        ["inside", "written", "read=1", "write=1", "deep=2"],
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("TOP-SECRET"));
    assert!(out.stderr.contains("Permission denied"), "{}", out.stderr);
    assert!(!outside.join("new.txt").exists());
    assert!(!outside.join("deep.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("out.txt")).expect("out"),
        "written\n"
    );
}

#[tokio::test]
async fn a_read_only_grant_reads_but_does_not_write() {
    let sb = sandbox();
    let (_root, ws, outside) = dirs();
    let policy = Policy {
        read_only: vec![ws.clone()],
        ..Policy::default()
    };
    let out = run(
        &sb,
        &policy,
        &ws,
        "cat in.txt; echo x > in.txt; echo $?; rm in.txt; echo $?",
    )
    .await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines, ["inside", "1", "1"], "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(ws.join("in.txt")).expect("in"),
        "inside\n"
    );
    drop(outside);
}

#[tokio::test]
async fn git_works_inside_the_workspace() {
    let sb = sandbox();
    let (_root, ws, _outside) = dirs();
    let out = run(
        &sb,
        &rw(&ws),
        &ws,
        "git init -q . && git -c user.name=t -c user.email=t@example.com add in.txt \
         && git -c user.name=t -c user.email=t@example.com commit -q -m first && git log --oneline | wc -l",
    )
    .await;
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "1");
}

/// Runs a Python snippet that prints one line.
fn py(code: &str) -> String {
    format!("python3 -c '{code}' 2>&1 | tail -1")
}

/// Python that tries `what` and prints `allowed` or the errno's name.
fn attempt(what: &str) -> String {
    py(&format!(
        "import socket, os, errno\ntry:\n  {what}\n  print(\"allowed\")\nexcept OSError as e:\n  print(errno.errorcode[e.errno])"
    ))
}

#[tokio::test]
async fn system_calls_on_the_deny_list_fail() {
    let sb = sandbox();
    let (_root, ws, _outside) = dirs();
    let script = [
        // New namespaces (the unshare tool, and unshare(2) directly).
        "unshare -U true 2>&1 | tail -1".to_string(),
        py(
            "import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\nr = libc.unshare(0x40000000)\nprint(\"allowed\" if r == 0 else errno.errorcode[ctypes.get_errno()])",
        ),
        // Raw and packet sockets.
        attempt("socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)"),
        attempt("socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)"),
        // Unix sockets: a session bus or container socket would be a way out.
        attempt("socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)"),
        // socketpair (pipes between processes) still works.
        attempt("socket.socketpair()"),
        // Ordinary TCP sockets can be made (the namespace confines them).
        attempt("socket.socket(socket.AF_INET, socket.SOCK_STREAM)"),
    ]
    .join("; ");
    let out = run(&sb, &rw(&ws), &ws, &script).await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "unshare: unshare failed: Operation not permitted",
            "EPERM",
            "EPERM",
            "EPERM",
            "EPERM",
            "allowed",
            "allowed"
        ],
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn the_host_is_out_of_reach_signals_terminal_and_root() {
    let sb = sandbox();
    let (_root, ws, _outside) = dirs();
    let host = std::process::id();
    let out = run(
        &sb,
        &rw(&ws),
        &ws,
        &format!(
            "kill -0 {host} 2>/dev/null; echo kill=$?; \
             cat /proc/{host}/environ >/dev/null 2>&1; echo environ=$?; \
             (: < /dev/tty) 2>/dev/null; echo tty=$?; \
             id -u"
        ),
    )
    .await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    // SAFETY: a plain getter.
    let uid = unsafe { libc::geteuid() };
    let inside = if uid == 0 {
        "1000".to_string()
    } else {
        uid.to_string()
    };
    assert_eq!(
        lines,
        ["kill=1", "environ=1", "tty=1", inside.as_str()],
        "{}",
        out.stderr
    );
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

/// Allows exactly one host:port.
struct Only(SocketAddr, Arc<AtomicUsize>);

impl EgressPolicy for Only {
    fn resolve<'a>(
        &'a self,
        host: &'a str,
        port: u16,
        _method: &'a str,
    ) -> Pin<Box<dyn std::future::Future<Output = Result<SocketAddr, String>> + Send + 'a>> {
        self.1.fetch_add(1, Ordering::SeqCst);
        let ok = host == "127.0.0.1" && port == self.0.port();
        let addr = self.0;
        Box::pin(async move {
            if ok {
                Ok(addr)
            } else {
                Err(format!(
                    "http denied: {host}:{port} is not granted; add it to the plugin's http grant"
                ))
            }
        })
    }
}

#[tokio::test]
async fn without_network_a_loopback_listener_sees_nothing() {
    let sb = sandbox();
    let (_root, ws, _outside) = dirs();
    let (addr, seen) = listener().await;
    let out = run(
        &sb,
        &rw(&ws),
        &ws,
        &format!("curl -sS -m 5 http://{addr}/; echo rc=$?"),
    )
    .await;
    assert!(!out.stdout.contains("hello"), "{}", out.stdout);
    assert!(
        out.stdout.contains("rc=7"),
        "curl cannot connect: {} {}",
        out.stdout,
        out.stderr
    );
    assert_eq!(seen.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn with_a_grant_traffic_goes_through_the_proxy_and_others_are_refused() {
    let sb = sandbox();
    let (_root, ws, _outside) = dirs();
    let (addr, seen) = listener().await;
    let asked = Arc::new(AtomicUsize::new(0));
    let policy = Policy {
        network: Some(Arc::new(Only(addr, asked.clone()))),
        ..rw(&ws)
    };
    let out = run(
        &sb,
        &policy,
        &ws,
        &format!(
            "curl -sS -m 5 http://127.0.0.1:{p}/; echo; \
             curl -sS -m 5 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{q}/; echo; \
             curl -sS -m 5 http://10.1.2.3:{q}/ ; echo; \
             curl -sS -m 5 -x http://127.0.0.1:3128 -p http://127.0.0.1:{p}/; echo; \
             curl -sS -m 5 --noproxy '*' http://127.0.0.1:{p}/; echo rc=$?",
            p = addr.port(),
            q = addr.port() + 1,
        ),
    )
    .await;
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "hello", "{} {}", out.stdout, out.stderr);
    assert_eq!(lines[1], "403");
    assert!(lines[2].contains("is not granted"), "{}", lines[2]);
    // The refusal body ends its line; then the CONNECT tunnel (`-p`), as
    // HTTPS goes.
    assert_eq!(lines[3], "");
    assert_eq!(lines[4], "hello", "{}", out.stderr);
    // Bypassing the proxy reaches only the namespace's own loopback.
    assert!(out.stdout.contains("rc=7"), "{}", out.stdout);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        2,
        "only the granted requests arrived"
    );
    assert_eq!(asked.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn an_unsupported_kernel_is_refused_not_ignored() {
    let sb = Sandbox::new(Support::simulated_unsupported(), SystemPaths::default());
    let err = sb.prepare(&Policy::default()).err().expect("refused");
    assert!(err.to_string().contains("Landlock"), "{err}");
    assert!(err.to_string().contains("assume_unsupported"), "{err}");
}
