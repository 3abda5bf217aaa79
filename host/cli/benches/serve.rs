//! Server benchmark (a bench binary; release build; instant scripted LLM on
//! loopback; SQLite; all built-in components from a warm cache):
//! cold start to `/health` 200, idle RSS, sequential turn latency (send →
//! `ws_state` on the SSE stream), the turn after a quiet spell (when the
//! server has released memory and code pages), N concurrent workstreams each streaming a
//! 500-token reply (total wall, p50/p99 time to first `content`, peak RSS,
//! CPU per turn of the server and of this bench process, SSE frames per turn,
//! the server's anonymous and file pages at the sampled peak),
//! RSS after 160 loaded workstreams (and how soon it comes back down once
//! quiet), where the memory of 100 streams in flight goes (by region of the
//! address space), 1,000 concurrent streaming workstreams (peak RSS, p99 time to
//! first content, CPU per turn), 1,100 streaming turns at once on a node that admits
//! 1,024 plugin calls (with calls beyond waiting in line, and refused at once
//! as before admission), and SSE fan-out events/s.
//!
//! Run: `cargo bench -p turnstone --bench serve`. To run only some sections
//! (for a profile), name them in `TURNSTONE_BENCH_SECTIONS`, comma-separated:
//! `cold`, `idle`, `sequential`, `quiet`, `loaded`, `concurrent`, `inflight`, `thousand`, `overload`,
//! `fanout`;
//! `TURNSTONE_BENCH_SEQ_TURNS` sets the sequential section's turn count (60);
//! `TURNSTONE_BENCH_THOUSAND_TOKENS` the tokens of each `thousand` reply (200:
//! with 1, the burst's CPU per turn is what a turn costs besides streaming).
//! `TURNSTONE_BENCH_PERF_CTL=<fifo>` writes `enable` to that FIFO when a
//! burst (`concurrent`, `thousand`) starts and `disable` when it ends, so a
//! `perf record -D -1 --control fifo:<fifo>` (or `perf stat`) started beside
//! the bench measures the bursts alone, not the set-up around them.
//! `TURNSTONE_BENCH_PROVIDER=anthropic` serves the model through the
//! anthropic component (`--provider anthropic`) and scripts its replies as
//! Messages API events; the default is openai.

#[path = "support/peak.rs"]
mod peak;
#[path = "support/smaps.rs"]
mod smaps;
#[path = "../tests/support/mod.rs"]
mod support;

use futures::future::join_all;
use serde_json::json;
use std::time::{Duration, Instant};
use support::{Events, Server, sse};
use turnstone_scripted_llm::{Step, anthropic, openai};

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn status_kb(pid: u32, key: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<f64>().ok())
        })
        .unwrap_or(0.0)
        / 1024.0
}

/// CPU time of a process (`"self"`: this one) in ms.
fn cpu_ms(pid: &str) -> f64 {
    turnstone_test_support::cpu_time(pid).as_secs_f64() * 1000.0
}

/// CPU spent during a burst: by the server, and by this bench process (its
/// clients and the scripted LLM), which share the machine's cores.
struct BurstCpu {
    server_ms: f64,
    bench_ms: f64,
    /// SSE frames the clients read during the burst, and how many of them
    /// were `content`: each costs the server an event and a write.
    frames: usize,
    contents: usize,
    /// The server's resident memory at the burst's sampled peak.
    peak: peak::Resident,
    /// The file-backed kinds of `/proc/<pid>/smaps` read right after the
    /// burst (kB): what the peak's file part is made of. Read before the
    /// server's quiet release (5 s later) unmaps them.
    files: Vec<(&'static str, u64)>,
}

impl BurstCpu {
    /// Per turn, as printed beside a burst's wall time.
    fn per_turn(&self, n: usize) -> String {
        format!(
            "CPU per turn: server {:.2} ms, bench (clients + scripted LLM) {:.2} ms; \
             SSE frames per turn {:.1} ({:.1} content); {}",
            self.server_ms / n as f64,
            self.bench_ms / n as f64,
            self.frames as f64 / n as f64,
            self.contents as f64 / n as f64,
            self.peak
        )
    }

    /// The file-backed part by kind, as printed under a burst's line.
    fn files(&self) -> String {
        let parts: Vec<String> = self
            .files
            .iter()
            .map(|(kind, kb)| format!("{:.1} MB {kind}", *kb as f64 / 1024.0))
            .collect();
        format!("  file pages right after the burst: {}", parts.join("; "))
    }
}

/// Tells a `perf` waiting on `TURNSTONE_BENCH_PERF_CTL` to `enable` or
/// `disable` its events. Best effort: with no FIFO, or no `perf` reading it,
/// nothing happens. Opened for reading as well, which on Linux never waits
/// for a reader (a write-only open would block until `perf` opens it).
fn perf_ctl(command: &str) {
    use std::io::Write;
    let Ok(path) = std::env::var("TURNSTONE_BENCH_PERF_CTL") else {
        return;
    };
    let fifo = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path);
    if let Ok(mut fifo) = fifo {
        let _ = writeln!(fifo, "{command}");
    }
}

/// Sends "go" to workstream `ws`.
async fn send_go(srv: &Server, tok: &str, ws: &str) {
    srv.call(
        "POST",
        &format!("/v1/api/workstreams/{ws}/send"),
        Some(tok),
        Some(json!({"message": "go"})),
    )
    .await;
}

/// Whether the model is served through the anthropic component.
fn anthropic_provider() -> bool {
    std::env::var("TURNSTONE_BENCH_PROVIDER").is_ok_and(|p| p == "anthropic")
}

/// A text reply in `parts`, in the wire format of the provider in use.
fn reply_text(parts: &[&str]) -> Vec<String> {
    if anthropic_provider() {
        anthropic::text(parts)
    } else {
        openai::text(parts)
    }
}

fn reply_500() -> Vec<String> {
    let words: Vec<String> = (0..500).map(|i| format!("w{i} ")).collect();
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    reply_text(&refs)
}

async fn one_turn(srv: &Server, tok: &str, ws: &str) -> (f64, f64) {
    let mut ev = srv
        .events(&format!("/v1/api/workstreams/{ws}/events"), tok, None)
        .await;
    for _ in 0..3 {
        ev.next(10).await;
    }
    let t = Instant::now();
    send_go(srv, tok, ws).await;
    let first = ev.until(60, |f| f.kind() == "content").await;
    let ttfc = t.elapsed().as_secs_f64() * 1000.0;
    let _ = first;
    ev.turn_end().await;
    (ttfc, t.elapsed().as_secs_f64() * 1000.0)
}

/// `n` new workstreams, one scripted reply (`step`) queued for each, and
/// their event streams open past the initial frames: the clock of a
/// concurrent section starts after this, at the first send.
async fn ready_workstreams(
    srv: &Server,
    tok: &str,
    n: usize,
    step: impl Fn() -> Step,
) -> (Vec<String>, Vec<support::Events>) {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(srv.create(tok, json!({})).await);
        srv.llm.push(step());
    }
    let mut streams = Vec::new();
    for ws in &ids {
        let mut ev = srv
            .events(&format!("/v1/api/workstreams/{ws}/events"), tok, None)
            .await;
        for _ in 0..3 {
            ev.next(10).await;
        }
        streams.push(ev);
    }
    (ids, streams)
}

/// `n` workstreams, each with its event stream open and `reply` queued;
/// then every one sends at once. Returns the workstream ids, the wall time
/// from the first send to the last `ws_state` (ms), each turn's time to
/// first `content` (ms), and the CPU the burst took.
async fn concurrent_turns(
    srv: &Server,
    tok: &str,
    n: usize,
    reply: &[String],
) -> (Vec<String>, f64, Vec<f64>, BurstCpu) {
    let (ids, mut streams) = ready_workstreams(srv, tok, n, || sse(reply.to_vec())).await;
    // Count only the burst's frames.
    streams.iter_mut().for_each(Events::reset);
    let server = srv.pid().to_string();
    let (server_cpu, bench_cpu) = (cpu_ms(&server), cpu_ms("self"));
    let sampler = peak::PeakSampler::start(srv.pid());
    perf_ctl("enable");
    let t = Instant::now();
    let ttfc = join_all(
        ids.iter()
            .zip(streams.iter_mut())
            .map(|(ws, ev)| async move {
                let sent = Instant::now();
                send_go(srv, tok, ws).await;
                ev.until(120, |f| f.kind() == "content").await;
                let ttfc = sent.elapsed().as_secs_f64() * 1000.0;
                ev.turn_end().await;
                ttfc
            }),
    )
    .await;
    let wall = t.elapsed().as_secs_f64() * 1000.0;
    perf_ctl("disable");
    let peak = sampler.finish();
    let kinds = smaps::by_kind(srv.pid());
    let files = smaps::FILE_KINDS
        .iter()
        .map(|k| (*k, kinds.get(k).copied().unwrap_or(0)))
        .collect();
    let seen = streams.iter().flat_map(|ev| ev.seen.iter());
    let cpu = BurstCpu {
        server_ms: cpu_ms(&server) - server_cpu,
        bench_ms: cpu_ms("self") - bench_cpu,
        frames: seen.clone().count(),
        contents: seen.filter(|f| f.kind() == "content").count(),
        peak,
        files,
    };
    (ids, wall, ttfc, cpu)
}

const SECTIONS: [&str; 10] = [
    "cold",
    "idle",
    "sequential",
    "quiet",
    "loaded",
    "concurrent",
    "inflight",
    "thousand",
    "overload",
    "fanout",
];

/// Whether `section` runs: all do unless `TURNSTONE_BENCH_SECTIONS` names some.
fn runs(section: &str) -> bool {
    std::env::var("TURNSTONE_BENCH_SECTIONS")
        .map_or(true, |v| v.split(',').any(|s| s.trim() == section))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = vec!["--workstream-idle-timeout", "0", "--max-workstreams", "250"];
    if anthropic_provider() {
        args.extend(["--provider", "anthropic"]);
    }
    let args = args.as_slice();
    // A misspelt section would otherwise run nothing and print nothing.
    if let Ok(v) = std::env::var("TURNSTONE_BENCH_SECTIONS") {
        for s in v.split(',').map(str::trim) {
            assert!(
                SECTIONS.contains(&s),
                "TURNSTONE_BENCH_SECTIONS: unknown section {s:?} (one of {SECTIONS:?})"
            );
        }
    }
    if runs("cold") {
        cold_start(args).await;
    }
    if runs("idle") {
        idle(args).await;
    }
    if runs("sequential") {
        sequential(args).await;
    }
    if runs("quiet") {
        after_quiet(args).await;
    }
    if runs("loaded") {
        loaded_fresh(args).await;
    }
    if runs("concurrent") {
        concurrent(args).await;
    }
    if runs("inflight") {
        inflight(args).await;
    }
    if runs("thousand") {
        thousand().await;
    }
    if runs("overload") {
        overload().await;
    }
    if runs("fanout") {
        fanout(args).await;
    }
}

/// Cold start to `/health`, and idle RSS just after.
async fn cold_start(args: &[&str]) {
    let mut starts = Vec::new();
    let mut idle_rss = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        let srv = Server::start(vec![], "", args).await;
        loop {
            if let Ok(r) = srv.http.get(srv.url("/health")).send().await
                && r.status().as_u16() == 200
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        starts.push(t.elapsed().as_secs_f64() * 1000.0);
        tokio::time::sleep(Duration::from_millis(300)).await;
        idle_rss.push(status_kb(srv.pid(), "VmRSS:"));
    }
    println!(
        "cold start to /health 200: p50 {:.1} ms, p90 {:.1} ms; idle RSS p50 {:.1} MB",
        pct(&mut starts, 0.5),
        pct(&mut starts, 0.9),
        pct(&mut idle_rss, 0.5)
    );
}

/// Idle RSS of a server left alone.
async fn idle(args: &[&str]) {
    // Idle: started, set up, then left alone (the server trims its heap
    // once quiet).
    let srv = Server::start(vec![], "", args).await;
    srv.setup_admin().await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    let early = status_kb(srv.pid(), "VmRSS:");
    // Code that runs while idle maps its pages back (a whole large folio
    // at a time on kernels that cache files in them), so the first reading,
    // just after the quiet-time release, is not where an idle server stays.
    tokio::time::sleep(Duration::from_secs(28)).await;
    println!(
        "idle RSS 12 s after start: {early:.1} MB; 40 s after start: {:.1} MB",
        status_kb(srv.pid(), "VmRSS:")
    );
}

/// Sequential turns on one workstream, send → `ws_state`.
async fn sequential(args: &[&str]) {
    let turns: usize = std::env::var("TURNSTONE_BENCH_SEQ_TURNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(60)
        .max(11);
    let srv = Server::start(vec![], "", args).await;
    let tok = srv.setup_admin().await;
    let ws = srv.create(&tok, json!({})).await;
    let mut lat = Vec::new();
    for i in 0..turns {
        srv.llm.push(sse(reply_text(&["ok"])));
        let (_, total) = one_turn(&srv, &tok, &ws).await;
        if i >= 10 {
            lat.push(total);
        }
    }
    println!(
        "sequential turn send→ws_state: p50 {:.2} ms, p90 {:.2} ms",
        pct(&mut lat, 0.5),
        pct(&mut lat, 0.9)
    );
}

/// A turn after a quiet spell, when the server has trimmed its heap and
/// released its code pages (which the turn faults back in), against the
/// turn right after it.
async fn after_quiet(args: &[&str]) {
    let srv = Server::start(vec![], "", args).await;
    let tok = srv.setup_admin().await;
    let ws = srv.create(&tok, json!({})).await;
    for _ in 0..3 {
        srv.llm.push(sse(reply_text(&["ok"])));
        one_turn(&srv, &tok, &ws).await;
    }
    let (mut cold, mut warm, mut rss) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..5 {
        // The server acts on 5 s without activity, checked every 5 s.
        tokio::time::sleep(Duration::from_secs(11)).await;
        rss.push(status_kb(srv.pid(), "VmRSS:"));
        for lat in [&mut cold, &mut warm] {
            srv.llm.push(sse(reply_text(&["ok"])));
            lat.push(one_turn(&srv, &tok, &ws).await.1);
        }
    }
    println!(
        "turn after 11 s quiet send→ws_state: p50 {:.2} ms (max {:.2}); the next turn p50 {:.2} ms; \
         RSS while quiet p50 {:.1} MB",
        pct(&mut cold, 0.5),
        pct(&mut cold, 1.0),
        pct(&mut warm, 0.5),
        pct(&mut rss, 0.5)
    );
}

/// RSS with 160 loaded workstreams that have not run a turn yet.
async fn loaded_fresh(args: &[&str]) {
    let srv = Server::start(vec![], "", args).await;
    let tok = srv.setup_admin().await;
    for _ in 0..160 {
        srv.create(&tok, json!({})).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    println!(
        "RSS with 160 loaded workstreams (fresh): {:.1} MB",
        status_kb(srv.pid(), "VmRSS:")
    );
}

/// 100 and 200 concurrent 500-token turns, then how soon RSS comes back down.
async fn concurrent(args: &[&str]) {
    for n in [100usize, 200] {
        // One client address holds 2n connections here (a stream and a send
        // per workstream): lift the per-address cap that guards real servers.
        let srv = Server::start(vec![], "[server]\nmax_connections_per_ip = 0", args).await;
        let tok = srv.setup_admin().await;
        let (ids, wall, mut ttfc, cpu) = concurrent_turns(&srv, &tok, n, &reply_500()).await;
        println!(
            "{n} concurrent workstreams × 500-token reply: wall {:.0} ms (first send → last ws_state; streams opened before), \
             first content p50 {:.1} ms p99 {:.1} ms, peak RSS {:.1} MB; {}",
            wall,
            pct(&mut ttfc, 0.5),
            pct(&mut ttfc, 0.99),
            status_kb(srv.pid(), "VmHWM:"),
            cpu.per_turn(n)
        );
        println!("{}", cpu.files());
        if n == 200 {
            // RSS with 160 loaded: close 40.
            for ws in ids.iter().take(40) {
                srv.call(
                    "POST",
                    &format!("/v1/api/workstreams/{ws}/close"),
                    Some(&tok),
                    Some(json!({})),
                )
                .await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            println!(
                "RSS with 160 loaded workstreams (after the turns): {:.1} MB",
                status_kb(srv.pid(), "VmRSS:")
            );
            // The server gives the burst's memory back once quiet (target:
            // ≤ 40 MB within 30 s); sampled each second.
            let quiet = Instant::now();
            let mut rss = status_kb(srv.pid(), "VmRSS:");
            while rss > 40.0 && quiet.elapsed() < Duration::from_secs(30) {
                tokio::time::sleep(Duration::from_secs(1)).await;
                rss = status_kb(srv.pid(), "VmRSS:");
            }
            println!(
                "RSS after the burst, quiet: {rss:.1} MB {:.0} s later",
                quiet.elapsed().as_secs_f64()
            );
        }
    }
}

/// A server for `n` loaded workstreams with their streams from one address
/// (no per-IP cap, no idle unloading) and `extra` config; with its admin token.
async fn many_streams_server(n: usize, extra: &str) -> (Server, String) {
    let n = n.to_string();
    let srv = Server::start(
        vec![],
        &format!("[server]\nmax_connections_per_ip = 0\n{extra}"),
        &["--workstream-idle-timeout", "0", "--max-workstreams", &n],
    )
    .await;
    let tok = srv.setup_admin().await;
    (srv, tok)
}

/// Where the memory of streams in flight goes: 100 turns whose replies
/// stream slowly (100 tokens 40 ms apart), all in flight at once, and the
/// process's resident memory by region once every stream has shown content,
/// against a reading just before the sends, by kind of mapping
/// (`support/smaps.rs`). Per stream: the growth over 100.
async fn inflight(args: &[&str]) {
    let n = 100;
    let srv = Server::start(vec![], "[server]\nmax_connections_per_ip = 0", args).await;
    let tok = srv.setup_admin().await;
    let words: Vec<String> = (0..100).map(|i| format!("w{i} ")).collect();
    let reply = reply_text(&words.iter().map(String::as_str).collect::<Vec<_>>());
    let (ids, mut streams) = ready_workstreams(&srv, &tok, n, || Step::Sse {
        frames: reply.clone(),
        gap: Duration::from_millis(40),
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = smaps::by_kind(srv.pid());
    let rss_before = status_kb(srv.pid(), "VmRSS:");
    join_all(ids.iter().zip(streams.iter_mut()).map(|(ws, ev)| {
        let (srv, tok) = (&srv, tok.as_str());
        async move {
            send_go(srv, tok, ws).await;
            ev.until(60, |f| f.kind() == "content").await;
        }
    }))
    .await;
    let slots = srv
        .metrics()
        .await
        .lines()
        .find(|l| l.starts_with("turnstone_instance_slots{state=\"in_use\"}"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_default();
    let after = smaps::by_kind(srv.pid());
    let rss_after = status_kb(srv.pid(), "VmRSS:");
    // What each model call sends: the request the guest builds in its memory.
    let request = srv
        .llm
        .requests()
        .last()
        .map_or(0, |r| r.body.to_string().len());
    println!(
        "{n} streams in flight ({slots} plugin instances in use; model request body {request} bytes): \
         RSS {rss_before:.1} → {rss_after:.1} MB, {:.0} kB per stream; growth by kind of mapping:",
        (rss_after - rss_before) * 1024.0 / n as f64
    );
    for (kind, kb) in smaps::growth(&before, &after) {
        println!(
            "  {kb:>7} kB ({:>5.1} kB per stream) {kind}",
            kb as f64 / n as f64
        );
    }
    join_all(streams.iter_mut().map(|ev| ev.turn_end())).await;
}

/// 1,000 concurrent streaming workstreams, 200 tokens each unless
/// `TURNSTONE_BENCH_THOUSAND_TOKENS` says otherwise (target: peak RSS ≤ 1 GB,
/// p99 time to first content ≤ 100 ms).
async fn thousand() {
    let n = 1000;
    let tokens: usize = std::env::var("TURNSTONE_BENCH_THOUSAND_TOKENS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let (srv, tok) = many_streams_server(n, "").await;
    let words: Vec<String> = (0..tokens).map(|i| format!("w{i} ")).collect();
    let (_, wall, mut ttfc, cpu) = concurrent_turns(
        &srv,
        &tok,
        n,
        &reply_text(&words.iter().map(String::as_str).collect::<Vec<_>>()),
    )
    .await;
    println!(
        "{n} concurrent streaming workstreams × {tokens} tokens: wall {wall:.0} ms, first content p50 {:.1} ms p99 {:.1} ms, \
         peak RSS {:.1} MB; {}",
        pct(&mut ttfc, 0.5),
        pct(&mut ttfc, 0.99),
        status_kb(srv.pid(), "VmHWM:"),
        cpu.per_turn(n)
    );
}

/// 1,100 streaming turns at once (6 s each) on a node admitting 1,024 plugin calls:
/// the 76 beyond wait in line for a slot (the default), or are refused at
/// once (`admission_wait_secs = 0`, what a call beyond the pool met before
/// admission). Counts the turns that replied and that failed.
async fn overload() {
    let n = 1100;
    for (label, plugins) in [
        ("calls beyond wait in line", ""),
        ("calls beyond refused at once", "admission_wait_secs = 0\n"),
    ] {
        let (srv, tok) = many_streams_server(n, &format!("[plugins]\n{plugins}")).await;
        // 100 tokens 60 ms apart: every stream holds its slot for 6 s, so
        // all 1,100 calls are in flight at once.
        let words: Vec<String> = (0..100).map(|i| format!("w{i} ")).collect();
        let reply = reply_text(&words.iter().map(String::as_str).collect::<Vec<_>>());
        let (ids, mut streams) = ready_workstreams(&srv, &tok, n, || Step::Sse {
            frames: reply.clone(),
            gap: Duration::from_millis(60),
        })
        .await;
        let t = Instant::now();
        let ends = join_all(ids.iter().zip(streams.iter_mut()).map(|(ws, ev)| {
            let tok = tok.as_str();
            let srv = &srv;
            async move {
                send_go(srv, tok, ws).await;
                ev.turn_end().await.data["state"] == "idle"
            }
        }))
        .await;
        let wall = t.elapsed().as_secs_f64() * 1000.0;
        let replied = ends.iter().filter(|ok| **ok).count();
        println!(
            "{n} streaming turns at once, 1,024 plugin calls admitted, {label}: {replied} replied, \
             {} failed, wall {wall:.0} ms, peak RSS {:.1} MB",
            n - replied,
            status_kb(srv.pid(), "VmHWM:")
        );
    }
}

/// SSE fan-out: 50 subscribers on one workstream, one 500-delta turn.
async fn fanout(args: &[&str]) {
    let srv = Server::start(vec![], "", args).await;
    let tok = srv.setup_admin().await;
    let ws = srv.create(&tok, json!({})).await;
    let mut subs = Vec::new();
    for _ in 0..50 {
        let mut e = srv
            .events(&format!("/v1/api/workstreams/{ws}/events"), &tok, None)
            .await;
        for _ in 0..3 {
            e.next(10).await;
        }
        subs.push(e);
    }
    srv.llm.push(sse(reply_500()));
    let t = Instant::now();
    send_go(&srv, &tok, &ws).await;
    let counts = join_all(subs.iter_mut().map(|e| async move {
        e.turn_end().await;
        e.seen.len()
    }))
    .await;
    let secs = t.elapsed().as_secs_f64();
    let total: usize = counts.iter().sum();
    println!(
        "SSE fan-out: 50 subscribers received {total} events in {:.1} ms = {:.0} events/s",
        secs * 1000.0,
        total as f64 / secs
    );
}
