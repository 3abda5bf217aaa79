//! Merging the deltas of one network read into one event.
//!
//! A model server that streams faster than the host consumes (a local model,
//! a burst after a stall, many workstreams on one node) hands a provider
//! dozens of SSE events per read. Sending each as its own host event costs a
//! host call, an engine event and an SSE frame per token; merging the
//! consecutive deltas of one read costs nothing in latency, because the batch
//! is sent before the provider waits for the next read. When the server is
//! slower than the host, each read holds one event and nothing changes.

use crate::provider::{ProviderError, StreamEvent, ToolCallDelta};

/// Holds back the last text, reasoning or tool-argument delta so that the
/// next one of the same kind can join it. Anything else sends it first, so the
/// order of events is kept.
#[derive(Debug, Default)]
pub struct DeltaBatch {
    pending: Option<StreamEvent>,
}

impl DeltaBatch {
    /// Adds `event`, sending through `send` whatever can no longer grow.
    /// [`ProviderError::Cancelled`] once `send` returned false (the host
    /// asked to stop).
    pub fn push(
        &mut self,
        event: StreamEvent,
        send: &mut dyn FnMut(StreamEvent) -> bool,
    ) -> Result<(), ProviderError> {
        let event = match (self.pending.as_mut(), event) {
            (Some(StreamEvent::TextDelta(held)), StreamEvent::TextDelta(more))
            | (Some(StreamEvent::ReasoningDelta(held)), StreamEvent::ReasoningDelta(more)) => {
                held.push_str(&more);
                return Ok(());
            }
            (Some(StreamEvent::ToolCallDelta(held)), StreamEvent::ToolCallDelta(more))
                if continues(held, &more) =>
            {
                held.arguments_delta.push_str(&more.arguments_delta);
                return Ok(());
            }
            (_, event) => event,
        };
        self.flush(send)?;
        if mergeable(&event) {
            self.pending = Some(event);
            Ok(())
        } else {
            sent(send(event))
        }
    }

    /// Adds a text delta (a reasoning delta with `reasoning`) given as
    /// borrowed text: joined to a held delta of the same kind it costs no
    /// allocation, so a parser that borrows from the payload copies each
    /// delta's text only once, into the merged event. Otherwise as
    /// [`DeltaBatch::push`].
    pub fn push_text(
        &mut self,
        reasoning: bool,
        text: &str,
        send: &mut dyn FnMut(StreamEvent) -> bool,
    ) -> Result<(), ProviderError> {
        match (self.pending.as_mut(), reasoning) {
            (Some(StreamEvent::TextDelta(held)), false)
            | (Some(StreamEvent::ReasoningDelta(held)), true) => {
                held.push_str(text);
                Ok(())
            }
            _ => {
                let text = text.to_string();
                self.push(
                    if reasoning {
                        StreamEvent::ReasoningDelta(text)
                    } else {
                        StreamEvent::TextDelta(text)
                    },
                    send,
                )
            }
        }
    }

    /// Sends the held delta, if any. Call it before waiting for more input
    /// and before the stream ends. [`ProviderError::Cancelled`] if `send`
    /// returned false.
    pub fn flush(
        &mut self,
        send: &mut dyn FnMut(StreamEvent) -> bool,
    ) -> Result<(), ProviderError> {
        match self.pending.take() {
            Some(event) => sent(send(event)),
            None => Ok(()),
        }
    }
}

fn sent(accepted: bool) -> Result<(), ProviderError> {
    if accepted {
        Ok(())
    } else {
        Err(ProviderError::Cancelled)
    }
}

/// Only argument text continues a tool call: a delta naming an id or a
/// function starts (or re-announces) one and is kept apart.
fn continues(held: &ToolCallDelta, more: &ToolCallDelta) -> bool {
    held.index == more.index && more.id.is_none() && more.name.is_none()
}

fn mergeable(event: &StreamEvent) -> bool {
    matches!(
        event,
        StreamEvent::TextDelta(_) | StreamEvent::ReasoningDelta(_) | StreamEvent::ToolCallDelta(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{FinishReason, ToolCallDelta};

    fn call(index: u32, id: Option<&str>, args: &str) -> StreamEvent {
        StreamEvent::ToolCallDelta(ToolCallDelta {
            index,
            id: id.map(str::to_string),
            name: id.map(|_| "read_file".to_string()),
            arguments_delta: args.to_string(),
        })
    }

    fn describe(ev: &StreamEvent) -> String {
        match ev {
            StreamEvent::TextDelta(t) => format!("text:{t}"),
            StreamEvent::ReasoningDelta(t) => format!("reasoning:{t}"),
            StreamEvent::ToolCallDelta(d) => format!(
                "call{}:{}:{}",
                d.index,
                d.id.as_deref().unwrap_or("-"),
                d.arguments_delta
            ),
            StreamEvent::Finish(_) => "finish".into(),
            other => format!("{other:?}"),
        }
    }

    /// A host that accepts every event and records it in `sent`.
    fn recorder(sent: &mut Vec<String>) -> impl FnMut(StreamEvent) -> bool + '_ {
        |ev| {
            sent.push(describe(&ev));
            true
        }
    }

    #[test]
    fn runs_of_one_kind_merge_and_order_is_kept() {
        let mut sent = Vec::new();
        let mut send = recorder(&mut sent);
        let mut batch = DeltaBatch::default();
        for ev in [
            StreamEvent::ReasoningDelta("think ".into()),
            StreamEvent::ReasoningDelta("hard".into()),
            StreamEvent::TextDelta("Hel".into()),
            StreamEvent::TextDelta("lo".into()),
            call(0, Some("c1"), "{\"pa"),
            call(0, None, "th\":"),
            call(0, None, "\"a\"}"),
            call(1, Some("c2"), "{"),
            call(1, None, "}"),
            StreamEvent::Finish(FinishReason::ToolCalls),
            StreamEvent::TextDelta("late".into()),
        ] {
            batch.push(ev, &mut send).unwrap();
        }
        batch.flush(&mut send).unwrap();
        drop(send);
        assert_eq!(
            sent,
            [
                "reasoning:think hard",
                "text:Hello",
                "call0:c1:{\"path\":\"a\"}",
                "call1:c2:{}",
                "finish",
                "text:late",
            ]
        );
    }

    #[test]
    fn nothing_is_held_back_across_a_flush_and_a_stop_is_reported() {
        let mut sent = Vec::new();
        let mut batch = DeltaBatch::default();
        let mut send = recorder(&mut sent);
        batch
            .push(StreamEvent::TextDelta("a".into()), &mut send)
            .unwrap();
        batch.flush(&mut send).unwrap();
        batch
            .push(StreamEvent::TextDelta("b".into()), &mut send)
            .unwrap();
        batch.flush(&mut send).unwrap();
        batch.flush(&mut send).unwrap();
        drop(send);
        assert_eq!(sent, ["text:a", "text:b"], "an empty flush sends nothing");

        let mut refuse = |_: StreamEvent| false;
        batch
            .push(StreamEvent::TextDelta("c".into()), &mut refuse)
            .unwrap();
        assert!(
            matches!(
                batch.push(StreamEvent::Finish(FinishReason::Stop), &mut refuse),
                Err(ProviderError::Cancelled)
            ),
            "the host's stop reaches the parser at the next send"
        );
    }

    #[test]
    fn borrowed_text_joins_its_own_kind_and_starts_a_new_event_otherwise() {
        let mut sent = Vec::new();
        let mut send = recorder(&mut sent);
        let mut batch = DeltaBatch::default();
        batch.push_text(true, "mull ", &mut send).unwrap();
        batch
            .push(StreamEvent::ReasoningDelta("it".into()), &mut send)
            .unwrap();
        batch.push_text(false, "An", &mut send).unwrap();
        batch.push_text(false, "swer", &mut send).unwrap();
        batch.push(call(0, Some("c1"), "{}"), &mut send).unwrap();
        batch.push_text(false, "after", &mut send).unwrap();
        batch.flush(&mut send).unwrap();
        drop(send);
        assert_eq!(
            sent,
            [
                "reasoning:mull it",
                "text:Answer",
                "call0:c1:{}",
                "text:after"
            ]
        );
        let mut refuse = |_: StreamEvent| false;
        batch.push_text(false, "x", &mut refuse).unwrap();
        assert!(
            matches!(
                batch.push_text(true, "y", &mut refuse),
                Err(ProviderError::Cancelled)
            ),
            "a new kind sends the held text, and the refusal is reported"
        );
    }
}
