//! Runtime benchmarks: cold compile vs cached load per component, per-call
//! overhead of a trivial tool call (fresh store + instantiate + call + drop),
//! host start-up with every component loaded from the cache, and the same
//! tool built against WIT 0.1.0 (the committed fixture) and 0.2.0: load and
//! call under the current host.
//!
//! Run with `cargo xtask bench` (builds the components first).

use criterion::{Criterion, criterion_group, criterion_main};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use turnstone_runtime::cache::ComponentCache;
use turnstone_runtime::config::PluginsConfig;
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::state::NullSink;
use turnstone_runtime::{
    CallContext, PluginRegistry, PluginSettings, PluginSource, Runtime, RuntimeOptions,
};

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

fn components() -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for set in ["components", "example-plugins", "test-components"] {
        let Ok(rd) = std::fs::read_dir(target().join(set)) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let wasm = e.path().join(format!("{name}.wasm"));
            if wasm.is_file() {
                out.push((name, wasm));
            }
        }
    }
    assert!(!out.is_empty(), "run `cargo xtask build-components` first");
    out.sort();
    out
}

fn compile_vs_cache(c: &mut Criterion) {
    let rt = Runtime::new(RuntimeOptions::default()).unwrap();
    let engine = rt.engine();
    let no_cache = ComponentCache::new(engine, None).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = ComponentCache::new(engine, Some(dir.path().to_path_buf())).unwrap();
    let mut g = c.benchmark_group("load");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for (name, path) in components() {
        let wasm = std::fs::read(&path).unwrap();
        g.bench_function(format!("compile/{name}"), |b| {
            b.iter(|| no_cache.load(engine, &wasm).unwrap())
        });
        cache.load(engine, &wasm).unwrap();
        g.bench_function(format!("cached/{name}"), |b| {
            b.iter(|| {
                let (_c, src) = cache.load(engine, &wasm).unwrap();
                assert_eq!(src, turnstone_runtime::CompileSource::Cache);
            })
        });
    }
    g.finish();
}

fn call_overhead(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let rt = Runtime::new(RuntimeOptions {
        cache_dir: Some(target().join("test-cache")),
        ..Default::default()
    })
    .unwrap();
    let plugin = tokio
        .block_on(rt.load(
            PluginSource {
                dir: target().join("test-components/hostile"),
                builtin: false,
            },
            PluginSettings::default(),
        ))
        .unwrap();
    let ctx = CallContext {
        call_id: "c".into(),
        session_id: "s".into(),
        workspace_dir: None,
        working_dir: "/".into(),
        supports_vision: false,
    };
    let sink = Arc::new(NullSink);
    let mut g = c.benchmark_group("call");
    g.bench_function("trivial_tool_call", |b| {
        b.to_async(&tokio).iter(|| async {
            let r = plugin
                .execute("echo", r#"{"text":"hi"}"#, &ctx, sink.clone(), None)
                .await
                .unwrap();
            assert_eq!(r.output, "hi");
        })
    });
    g.finish();
}

fn startup(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let opts = LoadOptions {
        builtin_dir: Some(target().join("components")),
        config: PluginsConfig {
            dirs: vec![target().join("example-plugins")],
            ..Default::default()
        },
        ..Default::default()
    };
    let start = || async {
        let rt = Runtime::new(RuntimeOptions {
            cache_dir: Some(cache.path().to_path_buf()),
            ..Default::default()
        })
        .unwrap();
        let reg = PluginRegistry::load_all(&rt, &opts).await;
        assert!(reg.loaded().count() >= 2);
        (rt, reg)
    };
    tokio.block_on(start()); // warm the cache
    let mut g = c.benchmark_group("startup");
    g.sample_size(20);
    g.bench_function("runtime_and_all_plugins_from_cache", |b| {
        b.to_async(&tokio).iter(start)
    });
    g.finish();
}

/// `word_count` as the 0.1.0 SDK built it (committed) and as this tree builds it.
fn word_counts() -> [(&'static str, PathBuf); 2] {
    [
        (
            "0.1.0",
            target().join("../tests/fixtures/wit-0.1.0/word_count"),
        ),
        ("0.2.0", target().join("example-plugins/word_count")),
    ]
}

fn wit_versions(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let rt = Runtime::new(RuntimeOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Default::default()
    })
    .unwrap();
    let cold = Runtime::new(RuntimeOptions::default()).unwrap();
    let load = |rt: &Runtime, dir: &PathBuf| {
        tokio
            .block_on(rt.load(
                PluginSource {
                    dir: dir.clone(),
                    builtin: false,
                },
                PluginSettings::default(),
            ))
            .unwrap()
    };
    let ctx = CallContext {
        call_id: "c".into(),
        session_id: "s".into(),
        workspace_dir: None,
        working_dir: "/".into(),
        supports_vision: false,
    };
    let sink = Arc::new(NullSink);
    let mut g = c.benchmark_group("wit");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for (version, dir) in word_counts() {
        g.bench_function(format!("load_uncached/word_count@{version}"), |b| {
            b.iter(|| load(&cold, &dir))
        });
        load(&rt, &dir); // warm the cache
        g.bench_function(format!("load_cached/word_count@{version}"), |b| {
            b.iter(|| load(&rt, &dir))
        });
        let plugin = load(&rt, &dir);
        g.bench_function(format!("call/word_count@{version}"), |b| {
            b.to_async(&tokio).iter(|| async {
                let r = plugin
                    .execute(
                        "word_count",
                        r#"{"text":"a b c"}"#,
                        &ctx,
                        sink.clone(),
                        None,
                    )
                    .await
                    .unwrap();
                assert!(!r.is_error, "{}", r.output);
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    compile_vs_cache,
    call_overhead,
    startup,
    wit_versions
);
criterion_main!(benches);
