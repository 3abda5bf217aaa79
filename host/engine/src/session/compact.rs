//! Conversation compaction: a summary replaces the model's view of the
//! history; the transcript keeps every source turn.
//!
//! Between turns the whole history is summarized. In the middle of a tool loop
//! the in-flight batch (the last assistant tool-call turn, its results and any
//! messages queued after them) stays verbatim after the summary, preceded by the
//! last real user request, so the model continues exactly where it was.

use super::stream::StreamFailure;
use super::{COMPACTION_LABEL, COMPACTION_PROMPT, ChatSession, SessionError};
use crate::turn::{Role, Turn};
use turnstone_protocol::{Event, SessionState};
use turnstone_storage::types::COMPACTION_SOURCE;

/// Which part of the history a compaction keeps verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tail {
    /// Summarize everything.
    None,
    /// Keep the in-flight tool batch and carry the last user request.
    InFlightBatch,
    /// Keep the last user request (and what followed it) verbatim.
    LastRequest,
}

impl ChatSession {
    /// Summarizes the conversation now: the summary replaces the history sent to
    /// the model; with storage it is saved as a checkpoint (source turns are kept).
    pub async fn compact(&mut self) -> Result<(), SessionError> {
        self.token = self.cancel.fresh();
        let r = self.compact_inner(Tail::None, "manual").await;
        self.state(if r.is_ok() {
            SessionState::Idle
        } else {
            SessionState::Error
        });
        r
    }

    /// Index of the first turn kept verbatim.
    pub(super) fn tail_start(&self, tail: Tail) -> usize {
        match tail {
            Tail::None => self.turns.len(),
            Tail::InFlightBatch => self
                .turns
                .iter()
                .rposition(|t| t.role == Role::Assistant && !t.tool_calls.is_empty())
                .unwrap_or(self.turns.len()),
            Tail::LastRequest => self
                .turns
                .iter()
                .rposition(|t| t.role == Role::User && t.meta.source.is_none())
                .unwrap_or(self.turns.len()),
        }
    }

    /// Compacts, announced by `compaction` start and end events (`trigger`:
    /// `manual` for `/compact`, `auto` when the window filled).
    pub(super) async fn compact_inner(
        &mut self,
        tail: Tail,
        trigger: &str,
    ) -> Result<(), SessionError> {
        self.compact_due = false;
        // The memory index is rebuilt for the compacted conversation.
        self.memory_index = None;
        if self.tail_start(tail) < 2 {
            return Ok(());
        }
        let id = crate::random_hex();
        let where_ = match tail {
            Tail::None => "turn_boundary",
            Tail::InFlightBatch => "tool_loop",
            Tail::LastRequest => "turn_start",
        };
        let event = |phase: &str, ok: Option<bool>, reason: Option<String>| {
            Event::Compaction(turnstone_protocol::Compaction {
                phase: phase.into(),
                compaction_id: id.clone(),
                target: "workstream".into(),
                trigger: trigger.into(),
                where_: where_.into(),
                ok,
                reason,
            })
        };
        self.emit(event("start", None, None));
        let r = self.summarize(tail).await;
        let reason = r.as_ref().err().map(ToString::to_string);
        self.emit(event("end", Some(r.is_ok()), reason));
        r
    }

    async fn summarize(&mut self, tail: Tail) -> Result<(), SessionError> {
        let split = self.tail_start(tail);
        // Where the summarized part starts: later when even the summary
        // request is too long for the model.
        let mut start = 0;
        let summary = loop {
            let mut history = self.turns[start..split].to_vec();
            history.push(Turn::text(Role::User, COMPACTION_PROMPT));
            self.request_override = Some(history);
            let result = self.stream_turn().await;
            self.request_override = None;
            match result {
                Ok(t) => break t.text_content(),
                Err(StreamFailure::Cancelled(_)) => return Err(SessionError::Cancelled),
                Err(StreamFailure::Error(e))
                    if is_overflow(&e)
                        && split - start > 2
                        && user_boundary(&self.turns, start + (split - start) / 2, split)
                            .is_some() =>
                {
                    let from = user_boundary(&self.turns, start + (split - start) / 2, split)
                        .unwrap_or(split);
                    self.emit(Event::info(format!(
                        "Too long to summarize at once: leaving the oldest {} turns out of the summary.",
                        from - start
                    )));
                    start = from;
                }
                Err(StreamFailure::Error(e)) => return Err(e),
            }
        };
        if summary.trim().is_empty() {
            return Err(SessionError::EmptySummary);
        }
        let mut synthetic = vec![
            Turn::text(Role::User, COMPACTION_LABEL),
            Turn::text(Role::Assistant, summary),
        ];
        if split < self.turns.len()
            && tail == Tail::InFlightBatch
            && let Some(request) = self.turns[..split]
                .iter()
                .rev()
                .find(|t| t.role == Role::User && t.meta.source.is_none())
        {
            synthetic.push(Turn::text(Role::User, request.text_content()));
        }
        for t in &mut synthetic {
            t.meta.source = Some(COMPACTION_SOURCE.to_string());
        }
        let mut synthetic_ids = vec![0; synthetic.len()];
        if let Some((db, ws_id)) = &self.store {
            // The watermark is the newest row the summary covers; rows after it
            // (the verbatim tail) follow the summary on resume.
            let watermark = self.row_ids[..split].iter().copied().max().unwrap_or(0);
            let rows: Vec<_> = synthetic.iter().map(crate::persist::to_row).collect();
            let cp = db.save_compaction(ws_id, watermark, &rows).await?;
            if cp.summary_ids.len() == synthetic_ids.len() {
                synthetic_ids = cp.summary_ids.clone();
            }
            self.last_saved_id = cp
                .summary_ids
                .iter()
                .copied()
                .max()
                .unwrap_or(0)
                .max(self.last_saved_id);
        }
        let kept = self.turns.split_off(split);
        let kept_ids = self.row_ids.split_off(split.min(self.row_ids.len()));
        self.turns = synthetic;
        self.turns.extend(kept);
        self.row_ids = synthetic_ids;
        self.row_ids.extend(kept_ids);
        self.compactions += 1;
        self.emit(Event::info(format!(
            "Conversation compacted: {split} turns summarized."
        )));
        Ok(())
    }
}

/// Whether a failure is the provider refusing a request longer than the
/// model's context window.
pub(super) fn is_overflow(e: &SessionError) -> bool {
    matches!(
        e,
        SessionError::Provider(turnstone_runtime::provider_error::ProviderError::ContextLength(_))
    )
}

/// The first real user turn at or after `from` (before `end`), so a shortened
/// history starts at a request (providers refuse one that starts with an
/// answer or a tool result); `None` when there is none to start from.
fn user_boundary(turns: &[Turn], from: usize, end: usize) -> Option<usize> {
    (from..end).find(|&i| turns[i].role == Role::User && turns[i].meta.source.is_none())
}

impl ChatSession {
    /// After a context-length refusal: compacts (keeping an in-flight tool
    /// batch verbatim) so the request can be sent again; false when there is
    /// nothing to compact or the compaction failed.
    pub(super) async fn recover_from_overflow(&mut self) -> bool {
        // Inside a tool loop (the last tool-call turn follows the last real
        // request, even with queued messages after its results) the batch
        // stays verbatim; otherwise the request does.
        let last_request = self
            .turns
            .iter()
            .rposition(|t| t.role == Role::User && t.meta.source.is_none());
        let last_calls = self
            .turns
            .iter()
            .rposition(|t| t.role == Role::Assistant && !t.tool_calls.is_empty());
        let tail = match (last_calls, last_request) {
            (Some(c), Some(r)) if c > r => Tail::InFlightBatch,
            (Some(_), None) => Tail::InFlightBatch,
            _ => Tail::LastRequest,
        };
        if self.tail_start(tail) < 2 {
            return false;
        }
        self.emit(Event::info(
            "The conversation is longer than the model's context window: compacting it and trying again.",
        ));
        match self.compact_inner(tail, "overflow").await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("compaction after a context-length error failed: {e}");
                false
            }
        }
    }
}
