//! Loading: broken and incompatible components fail alone with clear reasons,
//! the registry keeps going, and the precompiled cache avoids recompiling.

mod common;

use common::*;
use turnstone_runtime::config::PluginsConfig;
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::{
    CompileSource, LoadError, PluginRegistry, PluginSettings, PluginSource, PluginStatus, Runtime,
    RuntimeOptions,
};

fn fresh_runtime(cache: &std::path::Path) -> Runtime {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(cache.to_path_buf()),
        ..Default::default()
    })
    .unwrap()
}

#[tokio::test]
async fn corrupt_and_future_components_fail_alone_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin("example-plugins", "word_count", dir.path());
    copy_plugin("test-components", "future_wit", dir.path());
    let corrupt = copy_plugin("example-plugins", "word_count", &dir.path().join("x"));
    // Same manifest shape, garbage component, distinct name.
    let m = std::fs::read_to_string(corrupt.join("plugin.toml")).unwrap();
    std::fs::write(
        corrupt.join("plugin.toml"),
        m.replace("name = \"word_count\"", "name = \"corrupt\""),
    )
    .unwrap();
    std::fs::write(
        corrupt.join("corrupt.wasm"),
        b"\0asm\x0d\0\x01\0garbage-garbage",
    )
    .unwrap();
    std::fs::rename(&corrupt, dir.path().join("corrupt")).unwrap();
    let bad_toml = dir.path().join("bad_manifest");
    std::fs::create_dir(&bad_toml).unwrap();
    std::fs::write(bad_toml.join("plugin.toml"), "[plugin]\nname = 3\n").unwrap();
    let not_wasm = dir.path().join("not_wasm");
    std::fs::create_dir(&not_wasm).unwrap();
    std::fs::write(
        not_wasm.join("plugin.toml"),
        "[plugin]\nname = \"not_wasm\"\nversion = \"1.0.0\"\nkind = \"tool\"\nwit = \"0.1.0\"\n",
    )
    .unwrap();
    std::fs::write(not_wasm.join("not_wasm.wasm"), b"#!/bin/sh\necho hi\n").unwrap();

    let rt = runtime();
    let opts = LoadOptions {
        config: PluginsConfig {
            dirs: vec![dir.path().to_path_buf()],
            ..Default::default()
        },
        ..Default::default()
    };
    let reg = PluginRegistry::load_all(&rt, &opts).await;
    let status = |name: &str| -> String {
        let e = reg
            .entries()
            .iter()
            .find(|e| e.name() == name)
            .unwrap_or_else(|| panic!("{name} listed"));
        match &e.status {
            PluginStatus::Loaded(_) => "loaded".into(),
            PluginStatus::Disabled => "disabled".into(),
            PluginStatus::Failed(r) => r.clone(),
        }
    };
    assert_eq!(status("word_count"), "loaded");
    assert!(
        status("corrupt").starts_with("invalid component:"),
        "{}",
        status("corrupt")
    );
    let future = status("future_wit");
    assert!(future.contains("turnstone:plugin/tool@0.3.0"), "{future}");
    assert!(
        future.contains("supported turnstone:plugin versions: 0.1.0"),
        "{future}"
    );
    assert!(
        status("bad_manifest").contains("invalid manifest"),
        "{}",
        status("bad_manifest")
    );
    assert!(
        status("not_wasm").contains("bad magic"),
        "{}",
        status("not_wasm")
    );
    assert!(reg.tool("word_count").is_some());
}

#[tokio::test]
async fn manifest_must_match_the_component() {
    let dir = tempfile::tempdir().unwrap();
    let p = copy_plugin("example-plugins", "word_count", dir.path());
    let m = std::fs::read_to_string(p.join("plugin.toml")).unwrap();
    std::fs::write(
        p.join("plugin.toml"),
        m.replace("kind = \"tool\"", "kind = \"provider\""),
    )
    .unwrap();
    let rt = runtime();
    let err = rt
        .load(
            PluginSource {
                dir: p,
                builtin: false,
            },
            PluginSettings::default(),
        )
        .await
        .err()
        .expect("kind mismatch must fail");
    assert!(
        err.to_string()
            .contains("kind = \"provider\" but the component implements the tool world"),
        "{err}"
    );
}

#[tokio::test]
async fn duplicate_plugins_and_disabled_plugins_are_reported() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    copy_plugin("example-plugins", "word_count", a.path());
    copy_plugin("example-plugins", "word_count", b.path());
    copy_plugin("test-components", "hostile", b.path());
    let rt = runtime();
    let opts = LoadOptions {
        config: PluginsConfig {
            dirs: vec![a.path().to_path_buf(), b.path().to_path_buf()],
            disabled: vec!["hostile".into()],
            ..Default::default()
        },
        ..Default::default()
    };
    let reg = PluginRegistry::load_all(&rt, &opts).await;
    let statuses: Vec<(String, String)> = reg
        .entries()
        .iter()
        .map(|e| {
            let s = match &e.status {
                PluginStatus::Loaded(_) => "loaded".to_string(),
                PluginStatus::Disabled => "disabled".to_string(),
                PluginStatus::Failed(r) => r.clone(),
            };
            (e.name(), s)
        })
        .collect();
    assert_eq!(
        statuses[0],
        ("word_count".to_string(), "loaded".to_string())
    );
    assert_eq!(statuses[1].0, "hostile");
    assert_eq!(statuses[1].1, "disabled");
    assert!(
        statuses[2]
            .1
            .contains("another plugin named word_count is already loaded"),
        "{statuses:?}"
    );
    assert_eq!(reg.loaded().count(), 1);
}

#[tokio::test]
async fn second_load_comes_from_the_cache_without_recompiling() {
    let cache = tempfile::tempdir().unwrap();
    let first = fresh_runtime(cache.path());
    let p1 = first
        .load(
            source("example-plugins", "word_count", false),
            PluginSettings::default(),
        )
        .await
        .unwrap();
    assert_eq!(p1.compile_source, CompileSource::Compiled);
    assert_eq!(cwasm_entries(cache.path()).len(), 1, "one .cwasm written");
    drop(p1);
    drop(first);

    // A new runtime (as after a restart) loads the .cwasm instead of compiling.
    let second = fresh_runtime(cache.path());
    let p2 = second
        .load(
            source("example-plugins", "word_count", false),
            PluginSettings::default(),
        )
        .await
        .unwrap();
    assert_eq!(p2.compile_source, CompileSource::Cache);
    let (_t, ws) = workspace();
    let out = p2
        .execute("word_count", r#"{"text":"a b"}"#, &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(out.output.contains("words: 2"));

    // A cache entry that anyone could have written is not trusted: recompiled.
    let entry = cwasm_entries(cache.path()).remove(0);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o666)).unwrap();
    let p3 = second
        .load(
            source("example-plugins", "word_count", false),
            PluginSettings::default(),
        )
        .await
        .unwrap();
    assert_eq!(p3.compile_source, CompileSource::Compiled);

    // A corrupted entry is discarded and rebuilt, not loaded.
    std::fs::write(&entry, b"not a cwasm").unwrap();
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o600)).unwrap();
    let p4 = second
        .load(
            source("example-plugins", "word_count", false),
            PluginSettings::default(),
        )
        .await
        .unwrap();
    assert_eq!(p4.compile_source, CompileSource::Compiled);
    let p5 = second
        .load(
            source("example-plugins", "word_count", false),
            PluginSettings::default(),
        )
        .await
        .unwrap();
    assert_eq!(p5.compile_source, CompileSource::Cache);
}

/// The compiled entries in a cache directory.
fn cwasm_entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .collect()
}

/// A second load of a tool component takes its tools from the cache
/// instead of running the component's `describe`; an entry that is not
/// trustworthy or not readable is ignored and `describe` runs again.
#[tokio::test]
async fn a_second_load_takes_the_described_tools_from_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let load = |rt: Runtime| async move {
        rt.load(
            source("example-plugins", "word_count", false),
            PluginSettings::default(),
        )
        .await
        .unwrap()
    };
    // First start: `describe` runs once (one call) and its output is kept.
    let p1 = load(fresh_runtime(cache.path())).await;
    assert_eq!(p1.ctx.counters.calls(), 1, "describe ran");
    let described: Vec<_> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".describe-v1.json"))
        .collect();
    assert_eq!(described.len(), 1, "{described:?}");
    assert!(
        described[0]
            .to_string_lossy()
            .contains(p1.wasm_sha256.as_str())
    );

    // Restart: the same tools, and the component was not run to get them.
    let p2 = load(fresh_runtime(cache.path())).await;
    assert_eq!(p2.ctx.counters.calls(), 0, "describe did not run");
    assert_eq!(p2.tools, p1.tools);
    let (_t, ws) = workspace();
    let out = p2
        .execute("word_count", r#"{"text":"a b c"}"#, &ctx(&ws), sink(), None)
        .await
        .unwrap();
    assert!(out.output.contains("words: 3"), "{}", out.output);

    // Writable by others: not trusted, so `describe` runs again.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&described[0], std::fs::Permissions::from_mode(0o666)).unwrap();
    let p3 = load(fresh_runtime(cache.path())).await;
    assert_eq!(p3.ctx.counters.calls(), 1, "an untrusted entry is ignored");
    assert_eq!(p3.tools, p1.tools);

    // Unreadable JSON: discarded, `describe` runs and rewrites it.
    std::fs::write(&described[0], b"{not json").unwrap();
    std::fs::set_permissions(&described[0], std::fs::Permissions::from_mode(0o600)).unwrap();
    let p4 = load(fresh_runtime(cache.path())).await;
    assert_eq!(p4.ctx.counters.calls(), 1, "a corrupt entry is ignored");
    let p5 = load(fresh_runtime(cache.path())).await;
    assert_eq!(p5.ctx.counters.calls(), 0, "the rewritten entry is used");
    assert_eq!(p5.tools, p1.tools);

    // Other settings (config a describe could read): asked again.
    let p6 = fresh_runtime(cache.path())
        .load(
            source("example-plugins", "word_count", false),
            PluginSettings {
                config: [("mode".to_string(), "strict".to_string())].into(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(p6.ctx.counters.calls(), 1, "other settings, other entry");
}

/// `plugins precompile` writes a built-in's machine code beside it: a start
/// with an empty cache loads that instead of compiling, but only for a
/// built-in, only while no one else could have written the file, and never
/// for bytes that changed since.
#[tokio::test]
async fn a_built_in_precompiled_beside_its_component_loads_with_an_empty_cache() {
    use std::os::unix::fs::PermissionsExt;
    let install = tempfile::tempdir().unwrap();
    let dir = copy_plugin("example-plugins", "word_count", install.path());
    let written = runtime().precompile_builtin(&dir).await.unwrap();
    assert_eq!(written.parent(), Some(dir.as_path()));
    assert!(written.extension().is_some_and(|e| e == "cwasm"));
    let builtin = PluginSource {
        dir: dir.clone(),
        builtin: true,
    };
    let load = |source: PluginSource| async move {
        let cache = tempfile::tempdir().unwrap();
        let p = fresh_runtime(cache.path())
            .load(source, PluginSettings::default())
            .await
            .unwrap();
        p.compile_source
    };
    assert_eq!(load(builtin.clone()).await, CompileSource::Shipped);
    // A third-party directory's files come from its author: never trusted.
    let third_party = PluginSource {
        dir: dir.clone(),
        builtin: false,
    };
    assert_eq!(load(third_party).await, CompileSource::Compiled);
    // Writable by others (the file, then its directory): compiled instead.
    std::fs::set_permissions(&written, std::fs::Permissions::from_mode(0o664)).unwrap();
    assert_eq!(load(builtin.clone()).await, CompileSource::Compiled);
    std::fs::set_permissions(&written, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert_eq!(load(builtin.clone()).await, CompileSource::Compiled);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(load(builtin.clone()).await, CompileSource::Shipped);
    // A garbage entry is refused by wasmtime's header check, not run.
    std::fs::write(&written, b"not a cwasm").unwrap();
    assert_eq!(load(builtin.clone()).await, CompileSource::Compiled);
    // Precompiling again replaces it; other bytes never match its name.
    runtime().precompile_builtin(&dir).await.unwrap();
    assert_eq!(load(builtin.clone()).await, CompileSource::Shipped);
    let wasm = dir.join("word_count.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    // A custom section appended: same code, different bytes.
    bytes.extend_from_slice(&[0, 4, 3, b'x', b'y', b'z']);
    std::fs::write(&wasm, &bytes).unwrap();
    assert_eq!(load(builtin).await, CompileSource::Compiled);
    let entries = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".cwasm")
        })
        .count();
    assert_eq!(entries, 1, "precompile leaves one entry per directory");
}

#[tokio::test]
async fn unknown_wit_version_is_refused_directly() {
    let rt = runtime();
    let err = rt
        .load(
            source("test-components", "future_wit", false),
            PluginSettings::default(),
        )
        .await
        .err()
        .unwrap();
    assert!(matches!(err, LoadError::UnsupportedWit { .. }), "{err}");
}

/// The pages the data segments of `wasm`'s largest core module span.
fn data_pages(wasm: &[u8]) -> u64 {
    let mut widest = 0;
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        let wasmparser::Payload::DataSection(reader) = payload.unwrap() else {
            continue;
        };
        let (mut lo, mut hi) = (u64::MAX, 0);
        for data in reader {
            let data = data.unwrap();
            let wasmparser::DataKind::Active { offset_expr, .. } = data.kind else {
                continue;
            };
            let Ok(wasmparser::Operator::I32Const { value }) =
                offset_expr.get_operators_reader().read()
            else {
                panic!("a data segment at an offset that is not a constant");
            };
            let start = u64::from(value.cast_unsigned());
            lo = lo.min(start);
            hi = hi.max(start + data.data.len() as u64);
        }
        if hi > lo {
            widest = widest.max(hi.div_ceil(4096) - lo / 4096);
        }
    }
    widest
}

/// Every instance of a component maps its data segments whole (the kernel's
/// fault-around maps them all at the first read, and resident size counts
/// them per instance), and a provider adapter runs one instance per model
/// stream in flight: their data is memory per stream. Core's float parsing
/// (3 pages) and zmij's float formatting tables (4 pages) left it: the
/// guest SDK reads `retry-after` by hand, and the plugins workspace patches
/// zmij with core's formatting (`plugins/zmij-shim`). A provider that links
/// either again, or a patch no longer applied (a serde_json that needs a
/// newer zmij), fails here.
#[test]
fn provider_adapters_map_at_most_seven_pages_of_data_per_instance() {
    for name in ["openai", "anthropic"] {
        let path = staged("components", name).join(format!("{name}.wasm"));
        let pages = data_pages(&std::fs::read(&path).unwrap());
        assert!(pages >= 1, "{name}: no data segments found");
        assert!(pages <= 7, "{name}: its data spans {pages} pages");
    }
}
