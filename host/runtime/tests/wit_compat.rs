//! WIT versions side by side: the committed `word_count` built with the 0.1.0
//! SDK (`tests/fixtures/wit-0.1.0`) loads and runs unchanged next to the same
//! plugin built against 0.2.0, and answers the same; a provider of either
//! version is adapted to the host's types; an unknown version fails alone.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use turnstone_runtime::config::PluginsConfig;
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::{LoadError, PluginRegistry, PluginSettings, PluginSource, PluginStatus};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/wit-0.1.0/word_count")
}

/// The exported and imported `turnstone:plugin` interfaces of a component.
fn interfaces(rt: &turnstone_runtime::Runtime, wasm: &Path) -> Vec<String> {
    let c = wasmtime::component::Component::from_file(rt.engine(), wasm).unwrap();
    let ty = c.component_type();
    ty.imports(rt.engine())
        .map(|(n, _)| n.to_string())
        .chain(ty.exports(rt.engine()).map(|(n, _)| n.to_string()))
        .filter(|n| n.starts_with("turnstone:plugin/"))
        .collect()
}

#[tokio::test]
async fn a_component_built_against_0_1_0_loads_and_runs_beside_a_0_2_0_one() {
    let rt = runtime();
    let grant_ws = || PluginSettings {
        grant: grant(r#"filesystem = [{ path = "workspace", access = "ro" }]"#),
        ..Default::default()
    };
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one two\nthree\n").unwrap();
    let settings = |s: PluginSettings| PluginSettings {
        workspace: Some(ws.path().to_path_buf()),
        ..s
    };

    // The fixture really is a 0.1.0 component: its manifest and every
    // turnstone:plugin interface it names say so.
    let manifest = std::fs::read_to_string(fixture().join("plugin.toml")).unwrap();
    assert!(manifest.contains("wit = \"0.1.0\""), "{manifest}");
    let names = interfaces(&rt, &fixture().join("word_count.wasm"));
    assert!(!names.is_empty());
    assert!(
        names.iter().all(|n| n.ends_with("@0.1.0")),
        "the fixture uses only 0.1.0: {names:?}"
    );
    let current = staged("example-plugins", "word_count");
    let current_manifest = std::fs::read_to_string(current.join("plugin.toml")).unwrap();
    assert!(
        current_manifest.contains("wit = \"0.2.0\""),
        "{current_manifest}"
    );

    let old = rt
        .load(
            PluginSource {
                dir: fixture(),
                builtin: false,
            },
            settings(grant_ws()),
        )
        .await
        .expect("the 0.1.0 component loads under this host");
    let new = load(&rt, "example-plugins", "word_count", settings(grant_ws())).await;
    assert_eq!(old.manifest.plugin.wit, "0.1.0");
    assert_eq!(new.manifest.plugin.wit, "0.2.0");
    // Same description, same answers, through the same host paths.
    assert_eq!(old.tools.len(), 1);
    assert_eq!(old.tools[0].name, new.tools[0].name);
    assert_eq!(old.tools[0].parameters, new.tools[0].parameters);
    for args in [r#"{"text": "a b c\nd"}"#, r#"{"path": "a.txt"}"#] {
        let a = old
            .execute("word_count", args, &ctx(ws.path()), sink(), None)
            .await
            .unwrap();
        let b = new
            .execute("word_count", args, &ctx(ws.path()), sink(), None)
            .await
            .unwrap();
        assert!(!a.is_error, "{args}: {}", a.output);
        assert_eq!(a.output, b.output, "{args}");
    }
    // Denials reach the old component as they always did.
    let bare = rt
        .load(
            PluginSource {
                dir: fixture(),
                builtin: false,
            },
            settings(PluginSettings::default()),
        )
        .await
        .unwrap();
    let denied = bare
        .execute(
            "word_count",
            r#"{"path": "a.txt"}"#,
            &ctx(ws.path()),
            sink(),
            None,
        )
        .await
        .unwrap();
    assert!(denied.is_error, "{}", denied.output);
    assert!(
        denied
            .output
            .contains("outside the directories granted to this plugin (granted: none)"),
        "{}",
        denied.output
    );
}

#[tokio::test]
async fn both_versions_load_in_one_registry_and_a_future_one_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("word_count_v1");
    std::fs::create_dir(&old).unwrap();
    std::fs::copy(
        fixture().join("word_count.wasm"),
        old.join("word_count_v1.wasm"),
    )
    .unwrap();
    std::fs::write(
        old.join("plugin.toml"),
        std::fs::read_to_string(fixture().join("plugin.toml"))
            .unwrap()
            .replace("name = \"word_count\"", "name = \"word_count_v1\""),
    )
    .unwrap();
    // A 0.2.0 component beside it (one registry cannot hold two tools of
    // one name, so not word_count itself).
    copy_plugin("test-components", "marker", dir.path());
    copy_plugin("test-components", "future_wit", dir.path());
    let rt = runtime();
    let reg = PluginRegistry::load_all(
        &rt,
        &LoadOptions {
            config: PluginsConfig {
                dirs: vec![dir.path().to_path_buf()],
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    let status = |n: &str| match &reg.entry(n).unwrap().status {
        PluginStatus::Loaded(p) => format!("loaded {}", p.manifest.plugin.wit),
        PluginStatus::Failed(e) => format!("failed: {e}"),
        PluginStatus::Disabled => "disabled".into(),
    };
    assert_eq!(status("word_count_v1"), "loaded 0.1.0");
    assert_eq!(status("marker"), "loaded 0.2.0");
    let future = status("future_wit");
    assert!(future.contains("turnstone:plugin/tool@0.3.0"), "{future}");
    assert!(
        future.contains("supported turnstone:plugin versions: 0.1.0, 0.2.0"),
        "{future}"
    );
}

#[tokio::test]
async fn a_manifest_older_than_the_component_is_refused_with_the_reason() {
    // The 0.2.0 openai provider exports provider@0.2.0; a manifest claiming
    // 0.1.0 is wrong about what the component needs.
    let dir = tempfile::tempdir().unwrap();
    let p = copy_plugin("components", "openai", dir.path());
    let m = std::fs::read_to_string(p.join("plugin.toml")).unwrap();
    std::fs::write(
        p.join("plugin.toml"),
        m.replace("wit = \"0.2.0\"", "wit = \"0.1.0\""),
    )
    .unwrap();
    let rt = runtime();
    let err = rt
        .load(
            PluginSource {
                dir: p,
                builtin: true,
            },
            PluginSettings::default(),
        )
        .await
        .err()
        .expect("refused");
    assert!(
        err.to_string()
            .contains("wit = \"0.1.0\" but the component uses turnstone:plugin@0.2.0"),
        "{err}"
    );
    // An unknown version in the manifest is refused by name.
    let p = copy_plugin("example-plugins", "word_count", dir.path());
    let m = std::fs::read_to_string(p.join("plugin.toml")).unwrap();
    std::fs::write(
        p.join("plugin.toml"),
        m.replace("wit = \"0.2.0\"", "wit = \"0.9.0\""),
    )
    .unwrap();
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
        .expect("refused");
    assert!(matches!(err, LoadError::UnsupportedWit { .. }), "{err}");
    assert!(err.to_string().contains("0.9.0"), "{err}");
}
