//! Tool calls: prepare, one approval cycle per batch, parallel execution.

use super::{ChatSession, MAX_PARALLEL_TOOLS, NOT_STARTED};
use crate::events::EventSink;
use crate::repair::CANCELLED_UNKNOWN;
use crate::truncate::{CHARS_PER_TOKEN, default_limit, effective_limit, truncate_output};
use crate::turn::{ContentPart, EffectStatus, ToolCall, Turn};
use std::sync::Arc;
use turnstone_protocol::{Event, SessionState, ToolItem, ToolOutputChunk, ToolResult};
use turnstone_runtime::provider_types as wit;
use turnstone_runtime::{
    CallContext, CallError, LoadedPlugin, ModelAccess, SessionHost, ToolOutputSink, tool_error_text,
};

struct ChunkForwarder {
    events: EventSink,
    call_id: String,
    model: Arc<dyn ModelAccess>,
    session: Arc<dyn SessionHost>,
}

impl ToolOutputSink for ChunkForwarder {
    fn chunk(&self, text: &str) -> bool {
        // An empty chunk is the guest asking whether it was cancelled.
        if !text.is_empty() {
            self.events.emit(Event::ToolOutputChunk(ToolOutputChunk {
                call_id: self.call_id.clone(),
                chunk: text.to_string(),
            }));
        }
        true
    }

    fn model(&self) -> Option<Arc<dyn ModelAccess>> {
        Some(self.model.clone())
    }

    fn session(&self) -> Option<Arc<dyn SessionHost>> {
        Some(self.session.clone())
    }
}

/// What a call sees of the session while it is prepared (no output is
/// shown before the approval).
pub(super) struct Preparing {
    pub(super) session: Arc<dyn SessionHost>,
}

impl ToolOutputSink for Preparing {
    fn chunk(&self, _text: &str) -> bool {
        true
    }

    fn session(&self) -> Option<Arc<dyn SessionHost>> {
        Some(self.session.clone())
    }
}

/// A prepared call ready to execute.
pub(super) enum Runnable {
    /// A tool component with normalised arguments.
    Component(Arc<LoadedPlugin>, String),
    /// An MCP request.
    Mcp(super::mcp::McpRun),
    /// Already answered while preparing (`tool_search`).
    Done(String, bool),
}

/// Each result may use at least this many characters, however full the window.
const MIN_RESULT_BUDGET_CHARS: usize = 2_000;

impl ChatSession {
    fn always_has(&self, tool: &str) -> bool {
        self.always
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(tool)
    }

    /// The share of the context window still free after the last prompt, in
    /// characters per call of the batch (unknown before the first usage report).
    fn remaining_budget_chars(&self, calls: usize) -> Option<usize> {
        let used = self.last_prompt_tokens? as usize;
        let free = (self.binding.context_window as usize).saturating_sub(used) * CHARS_PER_TOKEN;
        Some((free / calls.max(1)).max(MIN_RESULT_BUDGET_CHARS))
    }

    /// Every tool the next request offers. With `native` search, deferred
    /// MCP tools are sent marked `defer_loading` for the provider to search;
    /// otherwise the client-side `tool_search` stands in for them.
    pub(super) fn tool_definitions(&self, native: bool) -> Vec<wit::ToolDefinition> {
        let mut defs = self.component_definitions();
        let extra = self.mcp_definitions(defs.len(), native);
        defs.extend(extra);
        // An active skill's `allowed_tools` is all the model is offered.
        if let Some(skill) = self.skill.get() {
            defs.retain(|d| skill.allows(&d.name));
        }
        defs
    }

    /// Component tools (never deferred).
    pub(super) fn component_tool_count(&self) -> usize {
        self.tools
            .snapshot()
            .tools()
            .filter(|t| self.offers(t))
            .count()
    }

    fn component_definitions(&self) -> Vec<wit::ToolDefinition> {
        self.tools
            .snapshot()
            .tools()
            .filter(|t| self.offers(t))
            .map(|t| {
                let mut def = t.definition();
                let notes = [&t.cwd_note, &t.workspace_note];
                if notes.iter().any(|n| n.is_some()) {
                    // The only text a session does not share with the others.
                    let ws = self.cfg.workspace.display().to_string();
                    let mut description = t.description.clone();
                    for note in notes.into_iter().flatten() {
                        description.push(' ');
                        description.push_str(
                            &note
                                .replace("{working_dir}", &ws)
                                .replace("{workspace_dir}", &ws),
                        );
                    }
                    def.description = description.into();
                }
                def
            })
            .collect()
    }

    pub(super) async fn run_tools(&mut self, calls: &[ToolCall]) -> Vec<Turn> {
        let ws = self.cfg.workspace.display().to_string();
        // Tools return images only to a model that can see them (read_file
        // describes an image in text otherwise).
        let supports_vision = self.binding.supports_vision().await;
        let ctx = CallContext {
            call_id: String::new(),
            session_id: self.cfg.session_id.clone(),
            workspace_dir: Some(ws.clone()),
            working_dir: ws,
            supports_vision,
        };
        // The original announces the batch in `running` (contract §3.4).
        self.state(SessionState::Running);
        // One snapshot for the batch: a reload mid-batch applies to the next one.
        let registry = self.tools.snapshot();
        let skill = self.skill.get();
        // Only the operator's own skill files may switch approvals off: a
        // skill saved through the API or a tool could be anyone's.
        let skill_approves = skill.as_ref().is_some_and(|s| {
            s.info.auto_approve && matches!(s.info.source, crate::skills::SkillSource::File(_))
        });
        // What the calls may reach of the session (memory, skills, which
        // context the model has), while preparing and executing.
        let agent: Arc<dyn SessionHost> = self.session_agent().await;
        let preparing: Arc<dyn ToolOutputSink> = Arc::new(Preparing {
            session: agent.clone(),
        });
        // The administrator's policies come first: a denied call's own
        // preparation (guest code) never runs.
        let policies = self.decide_policies(calls).await;
        // Prepare every call: parse arguments, validate, build previews.
        let mut prepared: Vec<(ToolItem, Option<Runnable>)> = Vec::new();
        for call in calls {
            let mut item = ToolItem {
                agent: self.cfg.task.clone(),
                ..ToolItem::new(call.id.clone(), call.name.clone())
            };
            if let Some(p) = policies
                .get(&call.id)
                .filter(|p| p.action == turnstone_storage::prelude::PolicyAction::Deny)
            {
                self.policy_denial(&mut item, p).await;
                prepared.push((item, None));
                continue;
            }
            if let Some(s) = skill.as_ref().filter(|s| !s.allows(&call.name)) {
                item.error = Some(format!(
                    "Error: tool {:?} is not available while skill {} is active (it allows: {})",
                    call.name,
                    s.info.name,
                    s.info.allowed_tools.join(", ")
                ));
                prepared.push((item, None));
                continue;
            }
            if call.name == super::mcp::TOOL_SEARCH && self.mcp.is_some() {
                let (out, is_error) = self.run_tool_search(&call.arguments);
                prepared.push((item, Some(Runnable::Done(out, is_error))));
                continue;
            }
            if registry.tool(&call.name).is_none() && self.is_mcp_call(&call.name) {
                let p = self.prepare_mcp(&call.name, &call.arguments);
                item.header = p.header;
                item.preview = p.preview;
                match p.run {
                    Ok(run) => {
                        item.needs_approval = p.needs_approval
                            && !self.cfg.skip_permissions
                            && !skill_approves
                            && !self.always_has(&call.name);
                        prepared.push((item, Some(Runnable::Mcp(run))));
                    }
                    Err(e) => {
                        item.error = Some(e);
                        prepared.push((item, None));
                    }
                }
                continue;
            }
            if let Some((_, spec)) = registry.tool(&call.name)
                && !self.offers(spec)
            {
                item.error = Some(format!(
                    "Error: tool {:?} is not available to sub-agents{}",
                    call.name,
                    if call.name == "task_agent" {
                        format!(
                            " at depth {} (they nest at most {} deep)",
                            self.depth(),
                            super::MAX_DEPTH
                        )
                    } else {
                        String::new()
                    }
                ));
                prepared.push((item, None));
                continue;
            }
            let Some((plugin, spec)) = registry.tool(&call.name) else {
                item.error = Some(match registry.retired_tool(&call.name) {
                    Some(plugin) => format!(
                        "Error: tool {:?} is no longer available (plugin {plugin} was disabled, removed or updated without it)",
                        call.name
                    ),
                    None => format!("Error: unknown tool {:?}", call.name),
                });
                prepared.push((item, None));
                continue;
            };
            let args = match spec.coerce_arguments(&call.arguments) {
                Ok(a) => a,
                Err(e) => {
                    item.error = Some(tool_error_text(&e));
                    prepared.push((item, None));
                    continue;
                }
            };
            let call_ctx = CallContext {
                call_id: call.id.clone(),
                ..ctx.clone()
            };
            match plugin
                .prepare_in(&call.name, &args, &call_ctx, preparing.clone())
                .await
            {
                Ok(Ok(p)) => {
                    item.header = p.header;
                    item.preview = p.body;
                    item.grants = plugin.ctx.caps.summary();
                    item.needs_approval = p.needs_approval
                        && !self.cfg.skip_permissions
                        && !skill_approves
                        && !self.always_has(&call.name);
                    prepared.push((item, Some(Runnable::Component(plugin.clone(), args))));
                }
                Ok(Err(refusal)) => {
                    item.error = Some(tool_error_text(&refusal));
                    prepared.push((item, None));
                }
                Err(e) => {
                    item.error = Some(tool_error_text(&e.to_string()));
                    prepared.push((item, None));
                }
            }
        }
        // Allow and ask policies, then the approval step.
        let mut items: Vec<ToolItem> = prepared.iter().map(|(p, _)| p.clone()).collect();
        let forced_ask = self.apply_policies(&mut items, &policies);
        self.usage.tool_calls_this_turn += items.len() as u32;
        self.usage.tool_calls += items.len() as u32;
        let batch = self
            .approve_batch(&mut items, calls, &registry, &forced_ask)
            .await;
        let approval = batch.decision;
        let denied_by_judge = batch.by == super::approve::DecidedBy::Judge;
        // The items as decided (errors from policies, verdicts for the record).
        for ((p, run), item) in prepared.iter_mut().zip(&items) {
            if item.error.is_some() {
                *run = None;
            }
            *p = item.clone();
        }
        // Output guards for the batch (one snapshot, like the tools).
        let settings = self.safety.settings.clone();
        let output_guards = Arc::new(if settings.enabled && settings.output_guard {
            crate::safety::output::output_guards(&registry)
        } else {
            Vec::new()
        });
        let limit = effective_limit(
            self.cfg
                .tool_truncation
                .unwrap_or_else(|| default_limit(self.binding.context_window as usize)),
            self.remaining_budget_chars(calls.len()),
        );
        let gate = Arc::new(tokio::sync::Semaphore::new(MAX_PARALLEL_TOOLS));
        let feedback = approval.feedback.clone();
        let model: Arc<dyn ModelAccess> = Arc::new(super::model_access::SessionModel {
            binding: self.binding.clone(),
            cancel: self.token.clone(),
            usage: self.ledger().map(|l| (l, super::usage::Purpose::Tool)),
        });
        let jobs = prepared
            .into_iter()
            .zip(calls)
            .map(|((item, runnable), call)| {
                let gate = gate.clone();
                let events = self.events.clone();
                let ctx = CallContext {
                    call_id: call.id.clone(),
                    ..ctx.clone()
                };
                let denied = item.needs_approval && !approval.approved;
                let verdict = crate::safety::judge::effective(
                    item.heuristic_verdict.as_ref(),
                    item.judge_verdict.as_ref(),
                )
                .cloned();
                let feedback = feedback.clone();
                let output_guards = output_guards.clone();
                let settings = settings.clone();
                let token = self.token.clone();
                let model = model.clone();
                let agent = agent.clone();
                async move {
                    let mut effect = None;
                    let mut images = Vec::new();
                    let mut touched = None;
                    let mut output_flags = Vec::new();
                    // Cut to the budget after the output guard saw it whole
                    // (a secret cut in half would no longer match).
                    let mut cut = false;
                    let runnable_ran = item.error.is_none()
                        && matches!(
                            runnable,
                            Some(Runnable::Component(..) | Runnable::Mcp(_) | Runnable::Done(..))
                        );
                    let (mut output, is_error) = if let Some(err) = item.error {
                        (err, true)
                    } else if token.is_cancelled() {
                        effect = Some(EffectStatus::None);
                        (NOT_STARTED.to_string(), true)
                    } else if denied {
                        (
                            if denied_by_judge {
                                "Smart Approvals denied this tool call on the intent judge's verdict; it did not run."
                            } else {
                                "The user denied this tool call; it did not run."
                            }
                            .to_string(),
                            true,
                        )
                    } else if let Some(Runnable::Done(out, is_error)) = runnable {
                        (out, is_error)
                    } else if let Some(Runnable::Mcp(run)) = runnable {
                        let permit = tokio::select! {
                            p = gate.acquire() => p.ok(),
                            () = token.cancelled() => None,
                        };
                        if permit.is_none() || token.is_cancelled() {
                            effect = Some(EffectStatus::None);
                            (NOT_STARTED.to_string(), true)
                        } else {
                            let events = events.clone();
                            let call_id = call.id.clone();
                            let progress = move |m: String| {
                                events.emit(Event::ToolOutputChunk(ToolOutputChunk {
                                    call_id: call_id.clone(),
                                    chunk: format!("{m}\n"),
                                }));
                            };
                            let o = super::mcp::run_mcp(run, &token, &progress).await;
                            if o.cancelled {
                                effect = Some(EffectStatus::Unknown);
                                (CANCELLED_UNKNOWN.to_string(), true)
                            } else {
                                cut = true;
                                (o.output, o.is_error)
                            }
                        }
                    } else if let Some(Runnable::Component(plugin, args)) = runnable {
                        let permit = tokio::select! {
                            p = gate.acquire() => p.ok(),
                            () = token.cancelled() => None,
                        };
                        if permit.is_none() || token.is_cancelled() {
                            effect = Some(EffectStatus::None);
                            (NOT_STARTED.to_string(), true)
                        } else {
                            let sink = Arc::new(ChunkForwarder {
                                events: events.clone(),
                                call_id: call.id.clone(),
                                model,
                                session: agent,
                            });
                            let (result, t) = plugin
                                .execute_audited(&call.name, &args, &ctx, sink, Some(&token))
                                .await;
                            // Kept whatever the outcome: a call that trapped or
                            // ran out of time still touched what it touched.
                            touched = Some(crate::safety::capability_audit(t));
                            match result {
                                Ok(r) => {
                                    if supports_vision {
                                        images = r.images;
                                    }
                                    cut = true;
                                    (r.output, r.is_error)
                                }
                                Err(CallError::Cancelled { .. }) => {
                                    effect = Some(EffectStatus::Unknown);
                                    (CANCELLED_UNKNOWN.to_string(), true)
                                }
                                Err(e) => (tool_error_text(&e.to_string()), true),
                            }
                        }
                    } else {
                        ("Error: the call could not be prepared".to_string(), true)
                    };
                    // What ran is reviewed before the model sees it (or it
                    // is stored); a refusal written by the host is not. Its
                    // streamed chunks have reached the user's screen already.
                    let ran = effect.is_none() && !denied && runnable_ran;
                    if ran && !output_guards.is_empty() {
                        let reviewed = crate::safety::output::review(
                            &output_guards,
                            &settings,
                            &call.id,
                            &call.name,
                            output,
                        )
                        .await;
                        output = reviewed.output;
                        if let Some(w) = reviewed.warning {
                            output_flags = w.flags.clone();
                            events.emit(Event::OutputWarning(Box::new(w)));
                        }
                    }
                    if cut {
                        output = truncate_output(&output, limit).into_owned();
                    }
                    if let Some(f) = feedback.filter(|f| !f.trim().is_empty()) {
                        let who = if denied_by_judge { "Intent judge" } else { "User" };
                        output.push_str(&format!("\n\n{who} feedback: {f}"));
                    }
                    events.emit(Event::ToolResult(ToolResult {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        output: output.clone(),
                        is_error,
                        accepted: None,
                        effect_status: None,
                        event_id: None,
                        capabilities: touched.clone().map(Box::new),
                    }));
                    let mut turn = Turn::tool_result(call, output, is_error);
                    turn.content
                        .extend(images.into_iter().map(|i| ContentPart::Image {
                            attachment_id: None,
                            url: Some(format!("data:{};base64,{}", i.media_type, i.data_base64)),
                        }));
                    turn.meta.effect = effect;
                    turn.meta.capabilities = touched;
                    turn.meta.verdict = verdict.map(Box::new);
                    turn.meta.output_flags = output_flags;
                    turn
                }
            });
        futures::future::join_all(jobs).await
    }
}
