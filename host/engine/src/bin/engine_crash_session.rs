//! Test helper for the kill-and-resume test: runs one real `ChatSession` (openai
//! component against a scripted server, hostile test tools, SQLite storage) and
//! prints `RUNNING` once tools run, so the test can SIGKILL it mid-batch.
//!
//! Usage: `engine-crash-session <target_dir> <db_path> <ws_id> <base_url> <port>`

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use turnstone_engine::session::{ChatSession, ModelBinding, SessionConfig};
use turnstone_engine::ui::{Approval, PendingTool, SessionState, SessionUi};
use turnstone_runtime::config::PluginsConfig;
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::{PluginRegistry, PluginSettings, PluginSource, Runtime, RuntimeOptions};

struct PrintUi;

#[async_trait::async_trait]
impl SessionUi for PrintUi {
    async fn approve_tools(&self, _cycle: u64, _items: &[PendingTool]) -> Approval {
        Approval {
            approved: true,
            always: false,
            feedback: None,
        }
    }
    fn on_state_change(&self, s: SessionState) {
        if s == SessionState::Running {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "RUNNING");
            let _ = out.flush();
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [target, db_path, ws_id, base_url, port] = args.as_slice() else {
        return Err(
            "usage: engine-crash-session <target_dir> <db_path> <ws_id> <base_url> <port>".into(),
        );
    };
    let target = PathBuf::from(target);
    let rt = Runtime::new(RuntimeOptions {
        cache_dir: Some(target.join("test-cache")),
        ..Default::default()
    })?;
    // No key: the scripted server needs none, so only the host is granted.
    let grant = toml::from_str(&format!("http = [\"127.0.0.1:{port}\"]"))?;
    let provider = rt
        .load(
            PluginSource {
                dir: target.join("components/openai"),
                builtin: true,
            },
            PluginSettings {
                grant: Some(grant),
                ..Default::default()
            },
        )
        .await?;
    let tools = PluginRegistry::load_all(
        &rt,
        &LoadOptions {
            config: PluginsConfig {
                dirs: vec![target.join("test-components")],
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .await;
    let db = turnstone_storage::open(&turnstone_storage::DbConfig {
        path: Some(db_path.into()),
        ..Default::default()
    })
    .await?;
    let binding = ModelBinding {
        plugin: Arc::new(provider),
        provider: "openai".into(),
        base_url: base_url.clone(),
        model: "gpt-4o-mini".into(),
        context_window: 128_000,
        secrets: None,
        temperature: None,
        max_tokens: None,
        reasoning_effort: None,
        capabilities: None,
        replay_reasoning: false,
        admission: None,
    };
    let mut session = ChatSession::new(
        binding,
        Arc::new(tools),
        Arc::new(PrintUi),
        SessionConfig {
            skip_permissions: true,
            ..SessionConfig::new(ws_id.clone(), std::env::temp_dir())
        },
    )
    .with_storage(db, ws_id.clone())
    .resume()
    .await?;
    session.send("run the long job").await?;
    Ok(())
}
