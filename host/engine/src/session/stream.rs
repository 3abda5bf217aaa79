//! One model turn: the request, the streamed events, the retry ladder,
//! re-issues of broken streams and fallbacks.

use super::{ChatSession, MAX_ATTEMPTS, MAX_REISSUES, ModelBinding, SessionError};
use crate::events::EventSink;
use crate::lower::{AttachmentResolver, to_wit_messages};
use crate::repair::repair_orphans;
use crate::turn::{ProviderNative, Role, ToolCall, Turn};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use turnstone_protocol::{Event, SessionState, Status};
use turnstone_runtime::CallError;
use turnstone_runtime::plugin::ProviderEventSink;
use turnstone_runtime::provider_types as wit;

/// How a failed model call may be recovered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recovery {
    /// Retry the same model (after the given minimum wait).
    Retry(Option<std::time::Duration>),
    /// Give up on this model; a fallback may serve.
    Unreachable,
    /// Give up.
    Fatal,
}

fn recovery(e: &wit::ProviderError) -> Recovery {
    if e.is_retryable() {
        Recovery::Retry(e.retry_after())
    } else if e.is_unreachable() {
        Recovery::Unreachable
    } else {
        Recovery::Fatal
    }
}

#[derive(Default)]
struct Accum {
    text: String,
    reasoning: String,
    calls: BTreeMap<u32, (Option<String>, Option<String>, String)>,
    finish: Option<wit::FinishReason>,
    usage: Option<wit::Usage>,
    native: Option<String>,
}

/// Forwards stream events to the UI while assembling the assistant turn.
struct Collector {
    events: EventSink,
    acc: Mutex<Accum>,
    /// The thinking indicator went off (at the first answer token).
    answering: std::sync::atomic::AtomicBool,
}

impl Collector {
    fn acc(&self) -> std::sync::MutexGuard<'_, Accum> {
        self.acc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The first content or tool-call token ends "thinking" (reasoning does
    /// not: it is the thinking), as the original's event order shows.
    fn answer_started(&self) {
        if !self
            .answering
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            self.events.emit(Event::ThinkingStop);
        }
    }
}

impl ProviderEventSink for Collector {
    fn event(&self, event: wit::StreamEvent) -> bool {
        match event {
            wit::StreamEvent::TextDelta(t) => {
                self.answer_started();
                self.acc().text.push_str(&t);
                self.events.emit(Event::content(t));
            }
            wit::StreamEvent::ReasoningDelta(t) => {
                self.acc().reasoning.push_str(&t);
                self.events.emit(Event::reasoning(t));
            }
            wit::StreamEvent::ToolCallDelta(d) => {
                self.answer_started();
                let mut acc = self.acc();
                let entry = acc.calls.entry(d.index).or_default();
                if d.id.is_some() {
                    entry.0 = d.id;
                }
                if d.name.is_some() {
                    entry.1 = d.name;
                }
                entry.2.push_str(&d.arguments_delta);
            }
            wit::StreamEvent::Usage(u) => self.acc().usage = Some(u),
            wit::StreamEvent::Finish(f) => self.acc().finish = Some(f),
            wit::StreamEvent::ProviderBlock(b) => self.acc().native = Some(b),
            wit::StreamEvent::Info(m) => self.events.emit(Event::info(m)),
        }
        true
    }
}

enum AttemptError {
    Provider(wit::ProviderError),
    Session(SessionError),
    Cancelled(String),
}

/// How a model turn ended without a reply.
pub(super) enum StreamFailure {
    Error(SessionError),
    /// Cancelled, with the partial text streamed so far.
    Cancelled(String),
}

pub(super) struct NoAttachments;

impl AttachmentResolver for NoAttachments {
    fn data_url(&self, _id: &str) -> Option<String> {
        None
    }
}

impl ChatSession {
    /// The `status` event for a model call's usage.
    fn status(&self, u: &wit::Usage, window: u32) -> Status {
        let pct = if window == 0 {
            0.0
        } else {
            (f64::from(u.prompt_tokens) / f64::from(window) * 1000.0).round() / 10.0
        };
        Status {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u64::from(u.prompt_tokens) + u64::from(u.completion_tokens),
            context_window: window,
            pct,
            effort: None,
            cache_creation_tokens: 0,
            cache_read_tokens: 0,
            tool_calls_this_turn: self.usage.tool_calls_this_turn,
            turn_count: self.usage.turn_count,
        }
    }

    /// One model turn with the retry ladder, then the fallback models.
    pub(super) async fn stream_turn(&mut self) -> Result<Turn, StreamFailure> {
        self.binding.resolve_window().await;
        let bindings: Vec<ModelBinding> = std::iter::once(self.binding.clone())
            .chain(self.fallbacks.iter().cloned())
            .collect();
        let mut last_err = None;
        for (i, mut b) in bindings.into_iter().enumerate() {
            if i > 0 {
                b.resolve_window().await;
                self.emit(Event::info(format!(
                    "Falling back to {} ({}).",
                    b.model, b.provider
                )));
            }
            for attempt in 0..MAX_ATTEMPTS {
                match self.attempt_with_reissue(&b).await {
                    Ok(turn) => return Ok(turn),
                    Err(AttemptError::Session(e)) => return Err(StreamFailure::Error(e)),
                    Err(AttemptError::Cancelled(partial)) => {
                        return Err(StreamFailure::Cancelled(partial));
                    }
                    Err(AttemptError::Provider(e)) => {
                        let message = e.message();
                        match recovery(&e) {
                            Recovery::Fatal => {
                                return Err(StreamFailure::Error(SessionError::Provider(e)));
                            }
                            Recovery::Unreachable => {
                                last_err = Some(e);
                                break;
                            }
                            Recovery::Retry(min_wait) => {
                                last_err = Some(e);
                                if attempt + 1 == MAX_ATTEMPTS {
                                    break;
                                }
                                let backoff = self.cfg.retry_base * 2u32.pow(attempt);
                                let wait = min_wait.map_or(backoff, |w| w.max(backoff));
                                self.emit(Event::info(format!(
                                    "Model call failed ({message}); retrying in {:.1} s (attempt {}/{MAX_ATTEMPTS}).",
                                    wait.as_secs_f64(),
                                    attempt + 2
                                )));
                                tokio::select! {
                                    () = tokio::time::sleep(wait) => {}
                                    () = self.token.cancelled() => {
                                        return Err(StreamFailure::Cancelled(String::new()));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        Err(StreamFailure::Error(match last_err {
            Some(e) => SessionError::Provider(e),
            None => SessionError::NoModel,
        }))
    }

    /// One attempt; a stream that dies after it started is re-issued up to
    /// [`MAX_REISSUES`] times (half the retry base, doubling) before the failure
    /// counts against the retry ladder.
    async fn attempt_with_reissue(&mut self, b: &ModelBinding) -> Result<Turn, AttemptError> {
        let mut reissues = 0;
        loop {
            match self.attempt(b).await {
                Err(AttemptError::Provider(wit::ProviderError::Network(msg)))
                    if self.stream_started && reissues < MAX_REISSUES =>
                {
                    let wait = self.cfg.retry_base / 2 * 2u32.pow(reissues);
                    reissues += 1;
                    self.emit(Event::info(format!(
                        "The stream broke off ({msg}); re-issuing the request ({reissues}/{MAX_REISSUES})."
                    )));
                    tokio::select! {
                        () = tokio::time::sleep(wait) => {}
                        () = self.token.cancelled() => return Err(AttemptError::Cancelled(String::new())),
                    }
                }
                other => return other,
            }
        }
    }

    async fn attempt(&mut self, b: &ModelBinding) -> Result<Turn, AttemptError> {
        self.stream_started = false;
        let started = std::time::Instant::now();
        // Wire order of the original (contract §3.4): thinking_start, then
        // state_change thinking, per model request.
        self.emit(Event::ThinkingStart);
        self.state(SessionState::Thinking);
        let history = self.request_override.as_ref().unwrap_or(&self.turns);
        let mut messages = to_wit_messages(&repair_orphans(history), &b.provider, &NoAttachments)
            .map_err(|e| AttemptError::Session(e.into()))?;
        if !b.supports_vision().await {
            crate::lower::describe_images(&mut messages, &b.model);
        }
        // The memory index and the active skill lead every request (a
        // compaction summary request has neither).
        if self.request_override.is_none()
            && let Some(text) = self.system_text().await
        {
            messages.insert(0, system_message(text));
        }
        let native = self.request_override.is_none() && self.native_tool_search(b).await;
        let request = wit::CompletionRequest {
            provider: b.provider.clone(),
            base_url: b.base_url.clone(),
            model: b.model.clone(),
            messages,
            tools: if self.request_override.is_some() {
                Vec::new()
            } else {
                self.tool_definitions(native)
            },
            tool_search: native,
            temperature: b.temperature,
            max_tokens: b.max_tokens,
            reasoning_effort: b.reasoning_effort.clone(),
            replay_reasoning: b.replay_reasoning,
            capabilities: b.capabilities.clone(),
            extra: None,
        };
        let collector = Arc::new(Collector {
            events: self.events.clone(),
            acc: Mutex::new(Accum::default()),
            answering: Default::default(),
        });
        // Hold the alias's admission permit for the whole stream; it is released
        // when this attempt ends, before any retry backoff.
        let _permit = match &b.admission {
            Some(gate) => tokio::select! {
                p = gate.clone().acquire_owned() => p.ok(),
                () = self.token.cancelled() => return Err(AttemptError::Cancelled(String::new())),
            },
            None => None,
        };
        let outcome = b
            .plugin
            .provider_complete(
                &request,
                collector.clone(),
                b.secrets.clone(),
                Some(&self.token),
            )
            .await;
        // Every call that reached the provider is accounted, failed or not.
        if let Some(ledger) = self.ledger() {
            let purpose = if self.request_override.is_some() {
                super::usage::Purpose::Compaction
            } else if self.cfg.task.is_some() {
                super::usage::Purpose::Agent
            } else {
                super::usage::Purpose::Turn
            };
            let acc = collector.acc();
            ledger.record(b, acc.usage.as_ref(), acc.calls.len(), started, purpose);
        }
        // One thinking_stop before the answer (here if nothing was answered),
        // stream_end, then a second thinking_stop, as the original sends them.
        collector.answer_started();
        self.emit(Event::StreamEnd);
        self.emit(Event::ThinkingStop);
        {
            let acc = collector.acc();
            self.stream_started = !acc.text.is_empty()
                || !acc.reasoning.is_empty()
                || !acc.calls.is_empty()
                || acc.finish.is_some();
        }
        let cancelled = matches!(outcome, Err(CallError::Cancelled { .. }))
            || matches!(outcome, Ok(Err(wit::ProviderError::Cancelled)));
        if cancelled {
            return Err(AttemptError::Cancelled(std::mem::take(
                &mut collector.acc().text,
            )));
        }
        outcome
            .map_err(|e| AttemptError::Session(e.into()))?
            .map_err(AttemptError::Provider)?;
        let acc = std::mem::take(&mut *collector.acc());
        self.usage.model_calls += 1;
        if let Some(u) = &acc.usage {
            self.usage.tokens += u64::from(u.prompt_tokens) + u64::from(u.completion_tokens);
            if self.request_override.is_none() {
                self.last_prompt_tokens = Some(u.prompt_tokens.saturating_add(u.completion_tokens));
            }
            self.emit(Event::Status(self.status(u, b.context_window)));
            let pct = u64::from(self.cfg.auto_compact_pct);
            if pct > 0
                && self.request_override.is_none()
                && u64::from(u.prompt_tokens) * 100 >= u64::from(b.context_window) * pct
            {
                self.compact_due = true;
            }
        }
        let mut tool_calls: Vec<ToolCall> = Vec::new();
        match acc.finish {
            Some(wit::FinishReason::Length) => {
                if !acc.calls.is_empty() {
                    self.emit(Event::error(
                        "The response hit the output limit; its incomplete tool calls were discarded.",
                    ));
                } else {
                    self.emit(Event::error(
                        "The response was truncated at the output limit.",
                    ));
                }
            }
            Some(wit::FinishReason::ContentFilter) => {
                self.emit(Event::error(
                    "The response was blocked by the provider's content filter.",
                ));
            }
            _ => {
                for (_, (id, name, args)) in acc.calls {
                    let id = id.unwrap_or_else(|| {
                        let n = self.next_call;
                        self.next_call += 1;
                        format!("call_{n}")
                    });
                    tool_calls.push(ToolCall {
                        id,
                        name: name.unwrap_or_default(),
                        arguments: args,
                    });
                }
            }
        }
        let mut turn = Turn::text(Role::Assistant, acc.text);
        turn.tool_calls = tool_calls;
        turn.reasoning = (!acc.reasoning.is_empty()).then_some(acc.reasoning);
        turn.native = acc.native.and_then(|n| {
            serde_json::from_str(&n).ok().map(|blocks| ProviderNative {
                provider: b.provider.clone(),
                blocks,
            })
        });
        Ok(turn)
    }
}

/// A system message carrying `text`.
fn system_message(text: String) -> wit::Message {
    wit::Message {
        role: wit::Role::System,
        content: vec![wit::ContentPart::Text(text)],
        tool_calls: Vec::new(),
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        reasoning: None,
        provider_data: None,
        source: None,
    }
}
