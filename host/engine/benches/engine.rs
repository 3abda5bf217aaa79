//! Engine benchmarks against the instant scripted LLM on loopback:
//!
//! 1. **Overhead per plain turn**: `send` → idle (stream through the openai
//!    provider component, two SQLite writes) minus the time a raw client needs
//!    to fetch the same response from the same server. Reported as p50/p90.
//! 2. **Streaming throughput**: a 20,000-delta reply through the provider
//!    component and the session versus the raw byte stream read off the socket.
//! 3. **CPU per plain turn**: process CPU time (user + system, including the
//!    in-process scripted server) divided by the number of turns.
//!
//! Run with `cargo bench -p turnstone-engine --bench engine` after
//! `cargo xtask build-components`. To run some sections only (for a profile),
//! name them in `TURNSTONE_BENCH_SECTIONS`, comma-separated: `turns`, `titles`,
//! `stream`; `TURNSTONE_BENCH_STREAM_RUNS` sets the stream's runs (5).
//! `TURNSTONE_BENCH_OPENAI_DIR` loads the openai component from another
//! directory (another build of it, for an A/B).
//! `TURNSTONE_BENCH_STREAM_PROVIDER=anthropic` streams the `stream` and
//! `history` sections' replies as Messages API events through the anthropic component instead
//! (`TURNSTONE_BENCH_ANTHROPIC_DIR` loads it from another directory);
//! `responses` streams it as Responses API events through the openai
//! component's Responses lane (a `gpt-5` model). With `responses` only,
//! `TURNSTONE_BENCH_REPLAY_REASONING=1` gives each `history` reply a 4 KB
//! encrypted reasoning item and replays the stored ones, as
//! `replay_reasoning = true` does (other providers refuse the setting).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turnstone_engine::events::{EventSink, SessionEvent};
use turnstone_engine::session::{ChatSession, ModelBinding, SessionConfig};
use turnstone_protocol::Event;
use turnstone_runtime::{PluginRegistry, PluginSettings, PluginSource, Runtime, RuntimeOptions};
use turnstone_scripted_llm::{ScriptedLlm, Step, anthropic, openai, responses};
use turnstone_storage::prelude::*;

const TURNS: usize = 400;
const STREAM_DELTAS: usize = 20_000;
/// New workstreams whose title call is timed.
const TITLES: usize = 100;
/// Turns of the `history` section's one conversation, and how many of the
/// last ones are measured.
const HISTORY_TURNS: usize = 120;
const HISTORY_MEASURED: usize = 40;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn step(frames: Vec<String>) -> Step {
    Step::Sse {
        frames,
        gap: Duration::ZERO,
    }
}

/// Fetches the next scripted response with a bare HTTP/1.1 client, reading
/// to the end of the chunked body: the floor any client pays for the same bytes.
/// It keeps out of delayed-ACK mode on every read, as the host's pooled
/// connections do (they set the flag once per request, which is enough
/// there; this floor sets it on every read to be sure).
async fn raw_fetch(port: u16) -> usize {
    let mut sock = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    sock.write_all(req.as_bytes()).await.expect("write");
    // The server keeps the connection open: read up to the last chunk.
    let mut buf = Vec::with_capacity(1 << 20);
    let mut tmp = vec![0u8; 64 * 1024];
    while !buf.ends_with(b"\r\n0\r\n\r\n") {
        let n = sock.read(&mut tmp).await.expect("read");
        assert!(n > 0, "the server closed before the stream ended");
        // Ack at once, as the host's pooled connections do: the scripted
        // server writes with Nagle on, and a delayed ACK would stall this
        // floor by 40 ms in some runs.
        let _ = rustix::net::sockopt::set_tcp_quickack(&sock, true);
        buf.extend_from_slice(&tmp[..n]);
    }
    buf.len()
}

/// Process CPU time (all threads, user + system), to the nanosecond.
fn precise_cpu_time() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Context switches of the whole process so far (all threads, ended ones
/// too): voluntary (a thread waited) and involuntary (it was preempted).
fn context_switches() -> (i64, i64) {
    // SAFETY: getrusage writes the zeroed struct it is handed, nothing else.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid, writable rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    (usage.ru_nvcsw, usage.ru_nivcsw)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Process CPU time (user + system), in 10 ms ticks.
fn cpu_time() -> Duration {
    turnstone_test_support::cpu_time("self")
}

const SECTIONS: [&str; 4] = ["turns", "titles", "stream", "history"];

/// Whether `section` runs: all do unless `TURNSTONE_BENCH_SECTIONS` names some.
fn runs(section: &str) -> bool {
    std::env::var("TURNSTONE_BENCH_SECTIONS")
        .map_or(true, |v| v.split(',').any(|s| s.trim() == section))
}

fn main() {
    // A misspelt section would otherwise run nothing and print nothing.
    if let Ok(v) = std::env::var("TURNSTONE_BENCH_SECTIONS") {
        for s in v.split(',').map(str::trim) {
            assert!(
                SECTIONS.contains(&s),
                "TURNSTONE_BENCH_SECTIONS: unknown section {s:?} (one of {SECTIONS:?})"
            );
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(run());
}

async fn run() {
    let llm = ScriptedLlm::start(Vec::new()).await.expect("llm");
    let runtime = Runtime::new(RuntimeOptions {
        cache_dir: Some(root().join("target/test-cache")),
        ..Default::default()
    })
    .expect("runtime");
    let grant: turnstone_runtime::Capabilities = toml::from_str(&format!(
        "http = [\"127.0.0.1:{}\"]\nsecrets = [\"api_key\"]",
        llm.port()
    ))
    .expect("grant");
    // A provider component: the built one, or another build of it named by
    // `dir_var` (for an A/B of a guest change).
    let load_provider = async |dir_var: &str, name: &str| {
        let dir = std::env::var_os(dir_var).map_or_else(
            || root().join("target/components").join(name),
            PathBuf::from,
        );
        let settings = PluginSettings {
            grant: Some(grant.clone()),
            ..Default::default()
        };
        let source = PluginSource { dir, builtin: true };
        let plugin = runtime.load(source, settings).await;
        Arc::new(plugin.expect("run `cargo xtask build-components` first"))
    };
    let provider = load_provider("TURNSTONE_BENCH_OPENAI_DIR", "openai").await;
    let binding = ModelBinding::for_test(provider.clone(), &format!("{}/v1", llm.base_url()));
    // The `stream` section's provider and API: openai's Chat Completions
    // unless asked for anthropic or for openai's Responses lane.
    let stream_api = std::env::var("TURNSTONE_BENCH_STREAM_PROVIDER").unwrap_or_default();
    let replay_reasoning = std::env::var("TURNSTONE_BENCH_REPLAY_REASONING").as_deref() == Ok("1");
    assert!(
        !replay_reasoning || stream_api == "responses",
        "TURNSTONE_BENCH_REPLAY_REASONING=1 needs TURNSTONE_BENCH_STREAM_PROVIDER=responses"
    );
    let stream_binding = match stream_api.as_str() {
        "anthropic" => {
            let plugin = load_provider("TURNSTONE_BENCH_ANTHROPIC_DIR", "anthropic").await;
            ModelBinding::new(plugin, "anthropic", &llm.base_url(), "claude-sonnet-4-5")
                .with_api_key("sk-test")
        }
        "responses" => {
            let mut binding = ModelBinding::new(
                provider.clone(),
                "openai",
                &format!("{}/v1", llm.base_url()),
                "gpt-5",
            )
            .with_api_key("sk-test");
            binding.replay_reasoning = replay_reasoning;
            binding
        }
        "" | "openai" => binding.clone(),
        other => panic!(
            "TURNSTONE_BENCH_STREAM_PROVIDER: {other:?} is not anthropic, responses or openai"
        ),
    };
    let tools = Arc::new(PluginRegistry::default());
    let dir = tempfile::tempdir().expect("tempdir");
    let db = turnstone_storage::open(&turnstone_storage::DbConfig {
        path: Some(dir.path().join("bench.db")),
        ..Default::default()
    })
    .await
    .expect("sqlite");
    let reply = || step(openai::text(&["Hello", ", world", "!"]));

    // Warm up: connection setup, instance pools, SQLite pages.
    for _ in 0..20 {
        llm.push(reply());
        raw_fetch(llm.port()).await;
    }

    // A new stored workstream's session.
    let stored_session = async || {
        let created = db
            .create_workstream(&NewWorkstream::default())
            .await
            .expect("create");
        db.publish_workstream(&created).await.expect("publish");
        ChatSession::new(
            binding.clone(),
            tools.clone(),
            EventSink::with_handler(|_| {}),
            SessionConfig::new(created.ws_id.clone(), dir.path().to_path_buf()),
        )
        .with_storage(db.clone(), created.ws_id)
    };

    if runs("turns") {
        let mut session_times = Vec::with_capacity(TURNS);
        let mut raw_times = Vec::with_capacity(TURNS);
        let cpu_before = cpu_time();
        let mut session_total = Duration::ZERO;
        for i in 0..TURNS {
            let mut session = stored_session().await;
            llm.push(reply());
            let t = Instant::now();
            session.send("hi").await.expect("turn");
            let elapsed = t.elapsed();
            session_total += elapsed;
            if i >= 20 {
                session_times.push(elapsed);
            }
            llm.push(reply());
            let t = Instant::now();
            raw_fetch(llm.port()).await;
            if i >= 20 {
                raw_times.push(t.elapsed());
            }
        }
        let cpu = cpu_time() - cpu_before;
        session_times.sort();
        raw_times.sort();
        let mut overheads: Vec<Duration> = session_times
            .iter()
            .zip(&raw_times)
            .map(|(s, r)| s.saturating_sub(*r))
            .collect();
        overheads.sort();
        println!(
            "plain turn ({} measured turns, SQLite, openai component):",
            session_times.len()
        );
        println!(
            "  send→idle    p50 {:>9.3?}  p90 {:>9.3?}",
            percentile(&session_times, 0.5),
            percentile(&session_times, 0.9)
        );
        println!(
            "  raw fetch    p50 {:>9.3?}  p90 {:>9.3?}",
            percentile(&raw_times, 0.5),
            percentile(&raw_times, 0.9)
        );
        println!(
            "  overhead     p50 {:>9.3?}  p90 {:>9.3?}  (send→idle minus raw fetch, rank-matched)",
            percentile(&overheads, 0.5),
            percentile(&overheads, 0.9)
        );
        println!(
            "  CPU per turn {:>9.3?}  (process user+sys incl. the in-process server and the raw fetches; {:.1?} wall in sessions)",
            cpu / TURNS as u32,
            session_total
        );
    }
    if runs("titles") {
        // Titles: the extra model call a new workstream makes after its first
        // exchange (one per workstream), timed from the job's start to the
        // stored title.
        let mut title_times = Vec::new();
        let before = llm.requests().len();
        for _ in 0..TITLES {
            let mut session = stored_session().await.with_titles(None);
            llm.push(reply());
            session.send("hi").await.expect("turn");
            llm.push(step(openai::text(&["Greeting ", "the world"])));
            let job = session.title_job().await.expect("a title is due");
            let t = Instant::now();
            let title = job.run().await;
            title_times.push(t.elapsed());
            assert_eq!(title.as_deref(), Some("Greeting the world"));
            assert!(session.title_job().await.is_none(), "asked once");
        }
        let calls = llm.requests().len() - before;
        title_times.sort();
        println!(
            "titles ({TITLES} new workstreams): {:.1} model calls per workstream ({} of them the title)",
            calls as f64 / TITLES as f64,
            (calls - TITLES) / TITLES
        );
        println!(
            "  title call   p50 {:>9.3?}  p90 {:>9.3?}  (after the turn, beside the session)",
            percentile(&title_times, 0.5),
            percentile(&title_times, 0.9)
        );
    }
    if runs("history") {
        // One long conversation through the stream section's provider.
        let created = db
            .create_workstream(&NewWorkstream::default())
            .await
            .expect("create");
        db.publish_workstream(&created).await.expect("publish");
        let mut session = ChatSession::new(
            stream_binding.clone(),
            tools.clone(),
            EventSink::with_handler(|_| {}),
            SessionConfig::new(created.ws_id.clone(), dir.path().to_path_buf()),
        )
        .with_storage(db.clone(), created.ws_id);
        let sentence = "The quick brown fox \"jumps\" over the lazy dog; é ☕.\n";
        let message = sentence.repeat(600 / sentence.len() + 1);
        let reply_parts: Vec<String> = (0..20)
            .map(|i| format!("{i:03} {}", &sentence.repeat(2)))
            .collect();
        let parts: Vec<&str> = reply_parts.iter().map(String::as_str).collect();
        // A real encrypted item's size; base64, so nothing to escape.
        let encrypted = format!("gAAAA{}", "QUJD".repeat(1024));
        let mut times = Vec::with_capacity(HISTORY_MEASURED);
        let mut cpu = Duration::ZERO;
        for i in 0..HISTORY_TURNS {
            llm.push(step(match stream_api.as_str() {
                "anthropic" => anthropic::text(&parts),
                "responses" if replay_reasoning => responses::reasoned_text(&encrypted, &parts),
                "responses" => responses::text(&parts),
                _ => openai::text(&parts),
            }));
            let measured = i >= HISTORY_TURNS - HISTORY_MEASURED;
            let (t, c) = (Instant::now(), cpu_time());
            session.send(&message).await.expect("turn");
            if measured {
                times.push(t.elapsed());
                cpu += cpu_time() - c;
            }
        }
        let last_request = llm
            .requests()
            .last()
            .map_or(0, |r| r.body.to_string().len());
        times.sort();
        println!(
            "long conversation ({HISTORY_TURNS} turns, the last {HISTORY_MEASURED} measured; last request {} KB):",
            last_request / 1000
        );
        println!(
            "  send→idle    p50 {:>9.3?}  p90 {:>9.3?}",
            percentile(&times, 0.5),
            percentile(&times, 0.9)
        );
        println!(
            "  CPU per turn {:>9.3?}  (process user+sys incl. the in-process server)",
            cpu / HISTORY_MEASURED as u32
        );
        let plugin = &stream_binding.plugin;
        println!(
            "  provider's largest linear memory of a call: {:.2} MB ({})",
            plugin.ctx.counters.memory_peak_bytes() as f64 / 1e6,
            plugin.name()
        );
    }
    if runs("stream") {
        // Streaming throughput.
        let words: Vec<String> = (0..STREAM_DELTAS).map(|i| format!("tok{i} ")).collect();
        let parts: Vec<&str> = words.iter().map(String::as_str).collect();
        let long = || {
            step(match stream_api.as_str() {
                "anthropic" => anthropic::text(&parts),
                "responses" => responses::text(&parts),
                _ => openai::text(&parts),
            })
        };
        let mut raw_runs = Vec::new();
        let mut session_runs = Vec::new();
        // Content events per run: fewer than the deltas when the provider
        // merges the deltas of one read.
        let mut event_counts = Vec::new();
        // Process CPU spent in each kind of run: the server's share is the
        // same in both, so the difference is what the consumer costs.
        let (mut raw_cpu, mut session_cpu) = (Duration::ZERO, Duration::ZERO);
        // Context switches in each kind of run: how often a thread of the
        // pipeline waited for another (the hand-off the ratio pays for).
        let (mut raw_switches, mut session_switches) = ((0, 0), (0, 0));
        let add = |total: &mut (i64, i64), before: (i64, i64)| {
            let now = context_switches();
            total.0 += now.0 - before.0;
            total.1 += now.1 - before.1;
        };
        let n: usize = std::env::var("TURNSTONE_BENCH_STREAM_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(5);
        for _ in 0..n {
            llm.push(long());
            let t = Instant::now();
            let cpu = precise_cpu_time();
            let switches = context_switches();
            let bytes = raw_fetch(llm.port()).await;
            raw_runs.push(t.elapsed());
            raw_cpu += precise_cpu_time() - cpu;
            add(&mut raw_switches, switches);
            assert!(
                bytes > STREAM_DELTAS * 20,
                "the raw stream arrived ({bytes} bytes)"
            );

            let contents = Arc::new(AtomicUsize::new(0));
            let counter = contents.clone();
            let mut session = ChatSession::new(
                stream_binding.clone(),
                tools.clone(),
                EventSink::with_handler(move |ev| {
                    if matches!(ev, SessionEvent::Wire(Event::Content(_))) {
                        counter.fetch_add(1, Ordering::Relaxed);
                    }
                }),
                SessionConfig::new("bench_stream", dir.path().to_path_buf()),
            );
            llm.push(long());
            let t = Instant::now();
            let cpu = precise_cpu_time();
            let switches = context_switches();
            session.send("stream").await.expect("stream turn");
            session_runs.push(t.elapsed());
            session_cpu += precise_cpu_time() - cpu;
            add(&mut session_switches, switches);
            event_counts.push(contents.load(Ordering::Relaxed));
            let text = session
                .turns()
                .last()
                .map(|t| t.text_content())
                .unwrap_or_default();
            assert_eq!(text.len(), words.iter().map(String::len).sum::<usize>());
        }
        raw_runs.sort();
        session_runs.sort();
        let raw = percentile(&raw_runs, 0.5);
        let via = percentile(&session_runs, 0.5);
        let rate = |d: Duration| STREAM_DELTAS as f64 / d.as_secs_f64();
        println!("streaming {STREAM_DELTAS} deltas (median of {n}):");
        println!(
            "  raw socket           {:>9.3?}  {:>10.0} deltas/s",
            raw,
            rate(raw)
        );
        println!(
            "  provider + session   {:>9.3?}  {:>10.0} deltas/s",
            via,
            rate(via)
        );
        println!(
            "  ratio                {:.1} % of the raw stream",
            rate(via) / rate(raw) * 100.0
        );
        println!(
            "  process CPU per run  raw {:.1?}, provider + session {:.1?}",
            raw_cpu / n as u32,
            session_cpu / n as u32
        );
        let per_run = |(v, i): (i64, i64)| (v / n as i64, i / n as i64);
        let (raw_v, raw_i) = per_run(raw_switches);
        let (via_v, via_i) = per_run(session_switches);
        println!(
            "  context switches     raw {raw_v} voluntary + {raw_i} preempted, \
             provider + session {via_v} + {via_i} per run"
        );
        event_counts.sort_unstable();
        println!(
            "  content events       {} per run (median; {STREAM_DELTAS} deltas sent)",
            event_counts[event_counts.len() / 2]
        );
    }
}
