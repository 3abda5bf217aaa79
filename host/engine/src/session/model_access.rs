//! Lends the session's model to tool calls (the `model` host interface): one
//! tool-less completion through the same provider component and binding the
//! session uses, e.g. for web_fetch to answer the user's question about a page.

use super::ModelBinding;
use super::stream::NoAttachments;
use crate::lower::to_wit_messages;
use crate::turn::{Role, Turn};
use std::sync::{Arc, Mutex};
use turnstone_runtime::ModelAccess;
use turnstone_runtime::plugin::ProviderEventSink;
use turnstone_runtime::provider_types as wit;

/// The session's primary binding (or the judge's), as a [`ModelAccess`].
pub(crate) struct SessionModel {
    pub(crate) binding: ModelBinding,
    pub(crate) cancel: tokio_util::sync::CancellationToken,
    /// Where the call's usage is recorded, and as what.
    pub(crate) usage: Option<(super::usage::UsageLedger, super::usage::Purpose)>,
}

#[derive(Default)]
struct TextOnly {
    text: Mutex<String>,
    usage: Mutex<Option<wit::Usage>>,
}

impl ProviderEventSink for TextOnly {
    fn event(&self, event: wit::StreamEvent) -> bool {
        match event {
            wit::StreamEvent::TextDelta(t) => self
                .text
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_str(&t),
            wit::StreamEvent::Usage(u) => {
                *self.usage.lock().unwrap_or_else(|p| p.into_inner()) = Some(u);
            }
            _ => {}
        }
        true
    }
}

impl ModelAccess for SessionModel {
    fn complete(
        &self,
        system: String,
        prompt: String,
        max_tokens: u32,
    ) -> futures::future::BoxFuture<'static, Result<String, String>> {
        let b = self.binding.clone();
        let cancel = self.cancel.clone();
        let ledger = self.usage.clone();
        Box::pin(async move {
            let started = std::time::Instant::now();
            let turns = [
                Turn::text(Role::System, system),
                Turn::text(Role::User, prompt),
            ];
            let messages =
                to_wit_messages(&turns, &b.provider, &NoAttachments).map_err(|e| e.to_string())?;
            let request = wit::CompletionRequest {
                provider: b.provider.clone(),
                base_url: b.base_url.clone(),
                model: b.model.clone(),
                messages,
                tools: Vec::new(),
                temperature: b.temperature,
                max_tokens: Some(max_tokens.max(1)),
                reasoning_effort: b.reasoning_effort.clone(),
                replay_reasoning: false,
                capabilities: b.capabilities.clone(),
                extra: None,
                tool_search: false,
            };
            let sink = Arc::new(TextOnly::default());
            let _permit = match &b.admission {
                Some(gate) => gate.clone().acquire_owned().await.ok(),
                None => None,
            };
            let outcome = b
                .plugin
                .provider_complete(&request, sink.clone(), b.secrets.clone(), Some(&cancel))
                .await;
            if let Some((ledger, purpose)) = &ledger {
                let usage = *sink.usage.lock().unwrap_or_else(|p| p.into_inner());
                ledger.record(&b, usage.as_ref(), 0, started, *purpose);
            }
            outcome
                .map_err(|e| e.to_string())?
                .map_err(|e| e.message())?;
            let text = std::mem::take(&mut *sink.text.lock().unwrap_or_else(|p| p.into_inner()));
            Ok(text)
        })
    }
}
