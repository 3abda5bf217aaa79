//! Session fixtures: the real runtime, the real openai provider component
//! and the real tool components, against the scripted LLM on loopback.

use crate::{Recorder, root};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use turnstone_engine::events::EventSink;
use turnstone_engine::session::{ChatSession, ModelBinding, SessionConfig, SessionError};
use turnstone_protocol::Event;
use turnstone_runtime::config::PluginsConfig;
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::{
    LoadedPlugin, PluginRegistry, PluginSettings, PluginSource, Runtime, RuntimeOptions,
};
use turnstone_scripted_llm::{ScriptedLlm, Step};

/// A runtime sharing the on-disk component cache of the test build.
pub fn test_runtime() -> Runtime {
    Runtime::new(RuntimeOptions {
        cache_dir: Some(root().join("target/test-cache")),
        ..Default::default()
    })
    .expect("test runtime")
}

/// The openai provider component, granted loopback `ports` and `api_key`.
pub async fn openai_provider(rt: &Runtime, ports: &[u16]) -> LoadedPlugin {
    provider_component(rt, "openai", ports).await
}

/// The built-in provider component `name` (`openai`, `anthropic`), granted
/// loopback `ports` and `api_key`.
pub async fn provider_component(rt: &Runtime, name: &str, ports: &[u16]) -> LoadedPlugin {
    let hosts: Vec<String> = ports.iter().map(|p| format!("\"127.0.0.1:{p}\"")).collect();
    let grant = toml::from_str(&format!(
        "http = [{}]\nsecrets = [\"api_key\"]",
        hosts.join(", ")
    ))
    .expect("grant");
    rt.load(
        PluginSource {
            dir: root().join("target/components").join(name),
            builtin: true,
        },
        PluginSettings {
            grant: Some(grant),
            ..Default::default()
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!("the {name} component is staged (cargo xtask build-components): {e}")
    })
}

/// The built-in tools plus the test components (`hostile` granted the
/// workspace read-write; `future_wit` disabled), for `workspace`.
pub async fn tools(rt: &Runtime, workspace: &std::path::Path) -> Arc<PluginRegistry> {
    let mut config = PluginsConfig {
        dirs: vec![root().join("target/test-components")],
        disabled: vec!["future_wit".into()],
        ..Default::default()
    };
    config.grants.insert(
        "hostile".into(),
        toml::from_str(r#"filesystem = [{ path = "workspace", access = "rw" }]"#).expect("grant"),
    );
    let tools = PluginRegistry::load_all(
        rt,
        &LoadOptions {
            builtin_dir: Some(root().join("target/components")),
            config,
            workspace: Some(workspace.to_path_buf()),
            ..Default::default()
        },
    )
    .await;
    assert!(
        tools.tool("read_file").is_some(),
        "the built-in components are staged (cargo xtask build-components)"
    );
    Arc::new(tools)
}

/// A session on the scripted LLM, its recorder and everything it was built from.
pub struct TestSession {
    /// The session.
    pub session: ChatSession,
    /// Its events and approval script.
    pub recorder: Recorder,
    /// The sink (build more sessions on the same recorder with it).
    pub sink: EventSink,
    /// The model binding (openai component → the scripted LLM).
    pub binding: ModelBinding,
    /// The tools.
    pub tools: Arc<PluginRegistry>,
    /// The scripted LLM.
    pub llm: ScriptedLlm,
    /// The workspace (canonical path).
    pub ws: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestSession {
    /// Session settings for another session in this workspace.
    pub fn config(&self, session_id: &str) -> SessionConfig {
        SessionConfig {
            retry_base: Duration::from_millis(20),
            ..SessionConfig::new(session_id, self.ws.clone())
        }
    }

    /// Another session on the same binding, tools and recorder.
    pub fn another(&self, binding: ModelBinding, cfg: SessionConfig) -> ChatSession {
        ChatSession::new(binding, self.tools.clone(), self.sink.clone(), cfg)
    }
}

/// A session in a fresh workspace answering from `script` (retry backoff
/// 20 ms; `skip_permissions` runs every tool without asking).
pub async fn session(script: Vec<Step>, skip_permissions: bool) -> TestSession {
    let llm = ScriptedLlm::start(script).await.expect("scripted LLM");
    let dir = tempfile::tempdir().expect("temp dir");
    let ws = std::fs::canonicalize(dir.path()).expect("workspace");
    let rt = test_runtime();
    let provider = openai_provider(&rt, &[llm.port()]).await;
    let tools = tools(&rt, &ws).await;
    let binding = ModelBinding::for_test(Arc::new(provider), &format!("{}/v1", llm.base_url()));
    let (recorder, sink) = Recorder::new();
    let session = ChatSession::new(
        binding.clone(),
        tools.clone(),
        sink.clone(),
        SessionConfig {
            skip_permissions,
            retry_base: Duration::from_millis(20),
            ..SessionConfig::new("ws_test", ws.clone())
        },
    );
    TestSession {
        session,
        recorder,
        sink,
        binding,
        tools,
        llm,
        ws,
        _dir: dir,
    }
}

/// Sends `text` and returns the turn's result with exactly the events it
/// emitted.
pub async fn send_and_collect(
    session: &mut ChatSession,
    recorder: &Recorder,
    text: &str,
) -> (Result<(), SessionError>, Vec<Event>) {
    let before = recorder.events().len();
    let r = session.send(text).await;
    let events = recorder.events().split_off(before);
    (r, events)
}
