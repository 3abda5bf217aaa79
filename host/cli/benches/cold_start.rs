//! Cold first start (a bench binary): `turnstone serve` spawned with an
//! **empty** component cache until `/health` answers 200 — every built-in is
//! loaded by then (start-up finishes loading before it listens). Three
//! layouts of the built-in directory, 5 runs each, a fresh cache every run:
//!
//! 1. components as built (`cargo xtask build-components`): all compiled now;
//! 2. the same after `turnstone plugins precompile` (what `cargo xtask build`
//!    ships): loaded from the precompiled entries beside them;
//! 3. a warm user cache, for reference.
//!
//! Also `turnstone plugins list` (which loads every built-in) in layouts 1
//! and 2, with its peak RSS.
//!
//! Run: `cargo bench -p turnstone --bench cold_start`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 5;

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &dest);
        } else if !e.file_name().to_string_lossy().ends_with(".cwasm") {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn health_ok(addr: &str) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

/// Spawn → `/health` 200, in ms.
fn serve_once(builtin: &Path, cache: &Path, scratch: &Path) -> f64 {
    std::fs::write(
        scratch.join("config.toml"),
        "[auth]\njwt_secret = \"cold-start-bench-secret-0123456789abcdef\"\n[titles]\nenabled = false\n",
    )
    .unwrap();
    let t = Instant::now();
    let mut child = Command::new(target().join("release/turnstone"))
        .arg("--builtin-dir")
        .arg(builtin)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--config")
        .arg(scratch.join("config.toml"))
        .arg("--db")
        .arg(scratch.join("t.db"))
        .arg("--workspace")
        .arg(scratch)
        .args(["--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
        .args(["serve", "--host", "127.0.0.1", "--port", "0"])
        .env_remove("TURNSTONE_BUILTIN_PLUGINS")
        .env_remove("TURNSTONE_JWT_SECRET")
        .env("XDG_DATA_HOME", scratch.join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("build the release binary first");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next()
            .expect("the server printed its address")
            .unwrap();
        if let Some(a) = line
            .split("serving http://")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
        {
            break a.to_string();
        }
    };
    while !health_ok(&addr) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    let _ = child.kill();
    let _ = child.wait();
    std::thread::spawn(move || lines.for_each(drop));
    ms
}

/// `plugins list` wall ms and peak RSS in MB.
fn list_once(builtin: &Path, cache: &Path, scratch: &Path) -> (f64, f64) {
    let t = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg(target().join("release/turnstone"))
        .arg("--builtin-dir")
        .arg(builtin)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--config")
        .arg(scratch.join("config.toml"))
        .arg("--workspace")
        .arg(scratch)
        .args(["plugins", "list"])
        .env_remove("TURNSTONE_BUILTIN_PLUGINS")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(out.status.success());
    let kb: f64 = String::from_utf8_lossy(&out.stderr)
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0.0);
    (ms, kb / 1024.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let built = target().join("components");
    assert!(
        built.join("openai/plugin.toml").is_file(),
        "run `cargo xtask build-components` first"
    );
    let layout = tempfile::tempdir().unwrap();
    let plain = layout.path().join("plain");
    let shipped = layout.path().join("shipped");
    copy_dir(&built, &plain);
    copy_dir(&built, &shipped);
    let status = Command::new(target().join("release/turnstone"))
        .arg("--builtin-dir")
        .arg(&shipped)
        .args(["plugins", "precompile"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "plugins precompile");

    let warm_cache = tempfile::tempdir().unwrap();
    for (label, dir, warm) in [
        ("empty cache, components as built", &plain, false),
        ("empty cache, precompiled built-ins", &shipped, false),
        ("warm cache", &plain, true),
    ] {
        let mut starts = Vec::new();
        let mut lists = Vec::new();
        for _ in 0..RUNS {
            let scratch = tempfile::tempdir().unwrap();
            let fresh = tempfile::tempdir().unwrap();
            let cache = if warm {
                warm_cache.path()
            } else {
                fresh.path()
            };
            if warm && starts.is_empty() {
                serve_once(dir, cache, scratch.path());
            }
            starts.push(serve_once(dir, cache, scratch.path()));
            if !warm {
                let fresh = tempfile::tempdir().unwrap();
                lists.push(list_once(dir, fresh.path(), scratch.path()));
            }
        }
        print!(
            "{label:<36} spawn → /health 200: p50 {:.1} ms",
            median(starts)
        );
        if !lists.is_empty() {
            let ms = median(lists.iter().map(|l| l.0).collect());
            let mb = median(lists.iter().map(|l| l.1).collect());
            print!("; `plugins list` {ms:.0} ms, peak RSS {mb:.1} MB");
        }
        println!();
    }
}
