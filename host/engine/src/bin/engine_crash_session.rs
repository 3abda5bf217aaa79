//! Test helper for the kill-and-resume test: runs one real `ChatSession` (openai
//! component against a scripted server, hostile test tools, SQLite storage) and
//! prints `RUNNING` once tools run, so the test can SIGKILL it mid-batch.
//!
//! Usage: `engine-crash-session <target_dir> <db_path> <ws_id> <base_url> <port>`

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use turnstone_engine::events::{EventSink, SessionEvent};
use turnstone_engine::session::{ChatSession, ModelBinding, SessionConfig};
use turnstone_protocol::{Event, SessionState};
use turnstone_runtime::config::PluginsConfig;
use turnstone_runtime::registry::LoadOptions;
use turnstone_runtime::{PluginRegistry, PluginSettings, PluginSource, Runtime, RuntimeOptions};

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
    let binding = ModelBinding::new(Arc::new(provider), "openai", base_url, "gpt-4o-mini");
    // Prints RUNNING once tools run, so the test knows when to kill us.
    let sink = EventSink::with_handler(|e| {
        if let SessionEvent::Wire(Event::StateChange(s)) = e
            && s.state == SessionState::Running
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "RUNNING");
            let _ = out.flush();
        }
    });
    let mut session = ChatSession::new(
        binding,
        Arc::new(tools),
        sink,
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
