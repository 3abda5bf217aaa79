//! What the sandbox costs a spawned process (`cargo bench -p
//! turnstone-sandbox --bench spawn`): `bash -c true` spawned and reaped,
//! sandboxed vs not (p50/p99 over many runs), and the wall time of a small
//! real build (`cargo build` of a fresh crate, offline) inside vs outside.

use std::path::Path;
use std::time::{Duration, Instant};
use turnstone_sandbox::{Policy, Sandbox, Support, SystemPaths};

const RUNS: usize = 300;
const BUILDS: usize = 5;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn report(label: &str, mut d: Vec<Duration>) -> Duration {
    d.sort();
    let (p50, p99) = (percentile(&d, 0.5), percentile(&d, 0.99));
    println!(
        "{label:<34} p50 {:>9.3} ms   p99 {:>9.3} ms   (n = {})",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        d.len()
    );
    p50
}

async fn run(
    sb: Option<&Sandbox>,
    policy: &Policy,
    cwd: &Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Duration {
    let start = Instant::now();
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let prepared = match sb {
        Some(sb) => {
            let mut p = sb.prepare(policy).expect("prepare");
            p.install(&mut cmd);
            Some(p)
        }
        None => None,
    };
    let child = cmd.spawn().expect("spawn");
    let _running = prepared.map(|p| p.start().expect("start"));
    let out = child.wait_with_output().await.expect("wait");
    assert!(
        out.status.success(),
        "{program} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    start.elapsed()
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let support = Support::probe();
    println!("kernel: {}", support.summary());
    let sb = Sandbox::new(
        support,
        SystemPaths::default().with_toolchains(
            std::env::var_os("PATH").as_deref(),
            std::env::var_os("RUSTUP_HOME").map(Into::into),
        ),
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = std::fs::canonicalize(dir.path()).expect("ws");
    let policy = Policy {
        read_write: vec![ws.clone()],
        ..Policy::default()
    };
    rt.block_on(async {
        // Warm-up (page cache, first fork).
        for _ in 0..20 {
            run(None, &policy, &ws, "bash", &["-c", "true"], &[]).await;
            run(Some(&sb), &policy, &ws, "bash", &["-c", "true"], &[]).await;
        }
        let mut plain = Vec::new();
        let mut boxed = Vec::new();
        for _ in 0..RUNS {
            plain.push(run(None, &policy, &ws, "bash", &["-c", "true"], &[]).await);
            boxed.push(run(Some(&sb), &policy, &ws, "bash", &["-c", "true"], &[]).await);
        }
        let a = report("bash -c true, unsandboxed", plain);
        let b = report("bash -c true, sandboxed", boxed);
        println!(
            "sandbox spawn overhead: +{:.3} ms at p50 ({:.2}x)",
            (b.as_secs_f64() - a.as_secs_f64()) * 1e3,
            b.as_secs_f64() / a.as_secs_f64()
        );

        // A small real build: a fresh binary crate, offline, its own target
        // dir and temp dir inside the (granted) directory.
        let krate = ws.join("tiny");
        std::fs::create_dir_all(krate.join("src")).expect("src");
        std::fs::write(
            krate.join("Cargo.toml"),
            "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        )
        .expect("manifest");
        std::fs::write(
            krate.join("src/main.rs"),
            "fn main() { let v: Vec<u64> = (1..=10).collect(); println!(\"{}\", v.iter().sum::<u64>()); }\n",
        )
        .expect("main");
        let tmp = ws.join("tmp");
        std::fs::create_dir_all(&tmp).expect("tmp");
        let home = std::env::var("HOME").unwrap_or_default();
        let cargo_home = format!("{}/cargo-home", ws.display());
        let tmp_s = tmp.display().to_string();
        let env = [
            ("CARGO_HOME", cargo_home.as_str()),
            ("RUSTUP_HOME", &*format!("{home}/.rustup")),
            ("TMPDIR", tmp_s.as_str()),
            ("CARGO_TARGET_DIR", "target"),
        ];
        let build_policy = Policy {
            read_write: vec![ws.clone()],
            ..Policy::default()
        };
        let mut plain = Vec::new();
        let mut boxed = Vec::new();
        for _ in 0..BUILDS {
            for (sandboxed, out) in [(false, &mut plain), (true, &mut boxed)] {
                let _ = std::fs::remove_dir_all(krate.join("target"));
                let sb = sandboxed.then_some(&sb);
                out.push(
                    run(sb, &build_policy, &krate, "cargo", &["build", "--offline", "-q"], &env)
                        .await,
                );
            }
        }
        let a = report("cargo build (tiny crate), unsandboxed", plain);
        let b = report("cargo build (tiny crate), sandboxed", boxed);
        println!(
            "build wall time ratio sandboxed/unsandboxed at p50: {:.3}",
            b.as_secs_f64() / a.as_secs_f64()
        );
    });
}
