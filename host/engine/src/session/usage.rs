//! Usage accounting: every model call a session makes (its turns,
//! compactions, titles, judge reviews and tools asking the model) becomes a
//! `usage_events` row, written in the background so no call waits on it.

use super::ModelBinding;
use std::time::Instant;
use turnstone_runtime::provider_types as wit;
use turnstone_storage::Storage;
use turnstone_storage::prelude::*;

/// What a call was for, as the `purpose` column names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A turn of the session's conversation.
    Turn,
    /// A turn of a sub-agent.
    Agent,
    /// A compaction summary.
    Compaction,
    /// A workstream title.
    Title,
    /// The intent judge reviewing a call.
    Judge,
    /// A tool asking the session's model (`model` interface).
    Tool,
}

impl Purpose {
    fn as_str(self) -> &'static str {
        match self {
            Self::Turn => "turn",
            Self::Agent => "agent",
            Self::Compaction => "compaction",
            Self::Title => "title",
            Self::Judge => "judge",
            Self::Tool => "tool",
        }
    }
}

/// Where a session's usage rows go, and whose they are.
#[derive(Clone)]
pub struct UsageLedger {
    db: Storage,
    user_id: Option<String>,
    ws_id: Option<String>,
}

impl UsageLedger {
    /// Rows for `user_id` in workstream `ws_id`.
    pub fn new(db: Storage, user_id: Option<String>, ws_id: Option<String>) -> Self {
        Self { db, user_id, ws_id }
    }

    /// Records one call through `binding` that began at `started`.
    pub fn record(
        &self,
        binding: &ModelBinding,
        usage: Option<&wit::Usage>,
        tool_calls: usize,
        started: Instant,
        purpose: Purpose,
    ) {
        let u = usage.cloned().unwrap_or(wit::Usage {
            prompt_tokens: 0,
            completion_tokens: 0,
            cached_tokens: 0,
            reasoning_tokens: 0,
        });
        let event = UsageEvent {
            user_id: self.user_id.clone(),
            ws_id: self.ws_id.clone(),
            model: Some(binding.model.clone()),
            model_alias: binding.alias.clone(),
            prompt_tokens: i64::from(u.prompt_tokens),
            completion_tokens: i64::from(u.completion_tokens),
            cached_tokens: i64::from(u.cached_tokens),
            cache_creation_tokens: 0,
            reasoning_tokens: i64::from(u.reasoning_tokens),
            tool_calls: tool_calls as i64,
            latency_ms: started.elapsed().as_millis().min(i64::MAX as u128) as i64,
            purpose: purpose.as_str().to_string(),
        };
        let db = self.db.clone();
        tokio::spawn(async move {
            if let Err(e) = db.record_usage(&event).await {
                tracing::warn!("cannot record model usage: {e}");
            }
        });
    }
}
