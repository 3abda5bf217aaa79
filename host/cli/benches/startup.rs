//! CLI start-up benchmark (a bench binary, not a timed test):
//!
//! 1. **one-shot piped turn**: `echo hi | turnstone …` against the instant
//!    scripted LLM with every built-in plugin loaded from a warm component
//!    cache: wall time and max RSS from `/usr/bin/time`.
//! 2. **start-up to prompt** in a pseudo-terminal: spawn until the first
//!    prompt is drawn.
//!
//! Run: `cargo bench -p turnstone --bench startup` (builds the release binary).

use expectrl::Expect;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use turnstone_scripted_llm::{ScriptedLlm, Step, openai};

const RUNS: usize = 20;

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn base(dir: &Path, url: &str) -> Vec<String> {
    let p = |x: PathBuf| x.display().to_string();
    vec![
        "--builtin-dir".into(),
        p(target().join("components")),
        "--cache-dir".into(),
        p(dir.join("cache")),
        "--workspace".into(),
        p(dir.to_path_buf()),
        "--db".into(),
        p(dir.join("bench.db")),
        "--config".into(),
        p(dir.join("config.toml")),
        "--base-url".into(),
        format!("{url}/v1"),
        "--model".into(),
        "bench".into(),
        "--api-key".into(),
        "sk-bench".into(),
    ]
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let llm = rt
        .block_on(ScriptedLlm::start(Vec::new()))
        .expect("scripted llm");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("config.toml"), "").expect("config");
    let args = base(dir.path(), &llm.base_url());
    let exe = env!("CARGO_BIN_EXE_turnstone");

    // Warm the component cache (first run compiles every component).
    llm.push(Step::Sse {
        frames: openai::text(&["warm"]),
        gap: Duration::ZERO,
    });
    let warm = Command::new(exe)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().map(|mut s| s.write_all(b"warm\n"));
            c.wait()
        })
        .expect("warm-up run");
    assert!(warm.success(), "warm-up failed");

    let mut wall = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..RUNS {
        llm.push(Step::Sse {
            frames: openai::text(&["Hello", " there"]),
            gap: Duration::ZERO,
        });
        let t0 = Instant::now();
        let out = Command::new("/usr/bin/time")
            .args(["-f", "%M"])
            .arg(exe)
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().map(|mut s| s.write_all(b"hi\n"));
                c.wait_with_output()
            })
            .expect("run");
        wall.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Hello there"),
            "no reply: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        let kb: f64 = err
            .lines()
            .last()
            .and_then(|l| l.trim().parse().ok())
            .expect("max RSS from /usr/bin/time");
        rss.push(kb / 1024.0);
    }
    println!(
        "one-shot piped turn ({RUNS} runs, warm cache): wall p50 {:.1} ms, p90 {:.1} ms; max RSS p50 {:.1} MB, max {:.1} MB",
        percentile(&mut wall, 0.5),
        percentile(&mut wall, 0.9),
        percentile(&mut rss, 0.5),
        rss.iter().cloned().fold(0.0, f64::max)
    );

    let mut to_prompt = Vec::new();
    for _ in 0..RUNS {
        let mut cmd = Command::new(exe);
        cmd.args(&args).env("TERM", "xterm-256color");
        let t0 = Instant::now();
        let mut p = expectrl::session::OsSession::spawn(cmd).expect("pty");
        p.set_expect_timeout(Some(Duration::from_secs(30)));
        p.expect("main › ").expect("prompt");
        to_prompt.push(t0.elapsed().as_secs_f64() * 1000.0);
        p.send("/exit\r").expect("exit");
        let _ = p.expect(expectrl::Eof);
    }
    println!(
        "start-up to prompt in a pty ({RUNS} runs): p50 {:.1} ms, p90 {:.1} ms",
        percentile(&mut to_prompt, 0.5),
        percentile(&mut to_prompt, 0.9)
    );
}
