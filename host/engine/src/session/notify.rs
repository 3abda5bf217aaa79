//! Completion notifications: when a turn ran longer than `[notify]
//! complete_after_secs`, the host asks the `notify` component to tell the
//! workstream's targets, the same path the model's own `notify` calls take
//! (the plugin's grants, its rate limit, its retries).

use super::ChatSession;
use super::tools::Preparing;
use crate::turn::Role;
use std::sync::Arc;
use std::time::Duration;
use turnstone_runtime::{CallContext, SessionHost, ToolOutputSink};

/// The tool completion notifications go through.
pub const NOTIFY_TOOL: &str = "notify";
/// Longest excerpt of the answer a notification carries.
const EXCERPT_CHARS: usize = 300;

/// "4m 05s" for a turn's length.
fn span(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s / 60) % 60),
    }
}

impl ChatSession {
    /// Sends a completion notification for a turn that took `elapsed`, when
    /// that is at least the configured threshold. Failures are logged: a
    /// notification never fails the turn it reports.
    pub(super) async fn notify_completion(&mut self, elapsed: Duration) {
        let Some(after) = self.agent.notify_after else {
            return;
        };
        // A sub-agent's turn is part of its parent's, which reports itself.
        if elapsed < after || self.cfg.task.is_some() {
            return;
        }
        let registry = self.tools.snapshot();
        let Some((plugin, _)) = registry.tool(NOTIFY_TOOL) else {
            tracing::debug!("no notify tool is loaded; completion notification skipped");
            return;
        };
        let name = match &self.store {
            Some((db, ws)) => db
                .get_workstream(ws)
                .await
                .ok()
                .flatten()
                .map(|w| w.name)
                .filter(|n| !n.is_empty()),
            None => None,
        }
        .unwrap_or_else(|| "A workstream".to_string());
        let answer = self
            .turns
            .iter()
            .rev()
            .find(|t| t.role == Role::Assistant)
            .map(|t| t.text_content())
            .unwrap_or_default();
        let mut excerpt: String = answer.trim().chars().take(EXCERPT_CHARS).collect();
        if answer.trim().chars().count() > EXCERPT_CHARS {
            excerpt.push('…');
        }
        let mut message = format!("{name} finished a turn after {}.", span(elapsed));
        if !excerpt.is_empty() {
            message.push_str("\n\n");
            message.push_str(&excerpt);
        }
        let args = serde_json::json!({"title": "Turn finished", "message": message}).to_string();
        let ws = self.cfg.workspace.display().to_string();
        let ctx = CallContext {
            call_id: format!("notify-complete-{}", self.usage.turn_count),
            session_id: self.cfg.session_id.clone(),
            workspace_dir: Some(ws.clone()),
            working_dir: ws,
            supports_vision: false,
        };
        let agent: Arc<dyn SessionHost> = self.session_agent().await;
        let sink: Arc<dyn ToolOutputSink> = Arc::new(Preparing { session: agent });
        match plugin.execute(NOTIFY_TOOL, &args, &ctx, sink, None).await {
            Ok(r) if !r.is_error => {
                tracing::info!(session = %self.cfg.session_id, "completion notification: {}", r.output)
            }
            Ok(r) => {
                tracing::info!(session = %self.cfg.session_id, "completion notification not sent: {}", r.output)
            }
            Err(e) => {
                tracing::warn!(session = %self.cfg.session_id, "completion notification failed: {e}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::span;
    use std::time::Duration;

    #[test]
    fn spans_read_as_a_person_would_say_them() {
        assert_eq!(span(Duration::from_secs(42)), "42s");
        assert_eq!(span(Duration::from_secs(245)), "4m 05s");
        assert_eq!(span(Duration::from_secs(3 * 3600 + 7 * 60 + 9)), "3h 07m");
    }
}
