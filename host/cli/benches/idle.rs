//! Idle cost of `turnstone serve` (a bench binary; release build): with no
//! clients and no workstreams, how much CPU the process uses and how often
//! its threads wake, over a minute (`IDLE_SECS` to change), after start-up
//! has settled. Then the same with one loaded, idle workstream.
//!
//! Run: `cargo bench -p turnstone --bench idle`.

#[path = "../tests/support/mod.rs"]
mod support;

use serde_json::json;
use std::time::Duration;
use support::Server;

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux).
fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// User + system clock ticks, and context switches per thread name.
fn sample(pid: u32) -> (u64, std::collections::BTreeMap<String, u64>) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = fields
        .get(11)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
        + fields
            .get(12)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    let mut switches = std::collections::BTreeMap::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            let n: u64 = status
                .lines()
                .filter(|l| {
                    l.starts_with("voluntary_ctxt_switches")
                        || l.starts_with("nonvoluntary_ctxt_switches")
                })
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum();
            *switches.entry(name.trim().to_string()).or_insert(0) += n;
        }
    }
    (ticks, switches)
}

async fn measure(srv: &Server, label: &str, secs: u64) -> f64 {
    let (t0, s0) = sample(srv.pid());
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let (t1, s1) = sample(srv.pid());
    let cpu = (t1 - t0) as f64 / clk_tck() / secs as f64 * 100.0;
    let per_thread: Vec<String> = s1
        .iter()
        .map(|(name, n)| {
            let before = s0.get(name).copied().unwrap_or(0);
            format!(
                "{name} {:.1}",
                n.saturating_sub(before) as f64 / secs as f64
            )
        })
        .collect();
    let total: u64 = s1.values().sum::<u64>() - s0.values().sum::<u64>().min(s1.values().sum());
    println!(
        "{label:<30} {:>4} ticks in {secs} s = {cpu:.3} % of a core; {:.1} wake-ups/s ({})",
        t1 - t0,
        total as f64 / secs as f64,
        per_thread.join(", ")
    );
    cpu
}

#[tokio::main]
async fn main() {
    let secs: u64 = std::env::var("IDLE_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let srv = Server::start(Vec::new(), "", &[]).await;
    // Let start-up work (first table sync, caches) finish.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let empty = measure(&srv, "idle, nothing loaded", secs).await;
    let admin = srv.setup_admin().await;
    srv.create(&admin, json!({"name": "idle"})).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let one = measure(&srv, "idle, one workstream loaded", secs).await;
    // Stop the server before exiting (process::exit skips destructors).
    drop(srv);
    let budget = 0.5;
    if empty > budget || one > budget {
        eprintln!("over the idle budget of {budget} % of a core");
        std::process::exit(1);
    }
}
