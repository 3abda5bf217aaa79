//! The approval step of a tool batch: the administrator's policies first
//! (deny refuses before any card, allow runs without one, ask forces one),
//! then the intent judge's verdicts on the calls that wait for a person —
//! the heuristic tier on the card at once, the LLM tier arriving as
//! `intent_verdict` while the card waits — and Smart Approvals, which may
//! decide on confident verdicts. Every decision is audited with the
//! verdicts it was made on.

use super::ChatSession;
use super::model_access::SessionModel;
use super::usage::Purpose;
use crate::safety::judge::{self, CallFacts, LlmOutcome};
use crate::safety::{SmartDecision, smart_decision};
use crate::turn::{Role, ToolCall};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::mpsc;
use turnstone_protocol::{ApproveRequest, Decision, Event, Items, SessionState, ToolItem, Verdict};
use turnstone_runtime::guard::GuardContext;
use turnstone_runtime::registry::PluginRegistry;
use turnstone_runtime::{GuardTier, ModelAccess};
use turnstone_storage::prelude::{PolicyAction, ToolPolicy};

/// Conversation entries a guard is shown, newest last.
const GUARD_CONVERSATION: usize = 4;
/// Characters of each entry.
const GUARD_ENTRY_CHARS: usize = 1_500;

/// Who answered a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DecidedBy {
    /// Nothing needed an answer.
    Nobody,
    /// A person, through a front end.
    User,
    /// Smart Approvals, on the judge's verdicts.
    Judge,
    /// Nobody: the turn was cancelled while the card waited.
    Cancelled,
}

/// The answer to a batch.
pub(super) struct BatchDecision {
    pub(super) decision: Decision,
    pub(super) by: DecidedBy,
}

impl ChatSession {
    /// The acting user's role, re-read at most every
    /// [`crate::safety::policy::POLICY_TTL`] (a demotion applies to running
    /// sessions too); a failed lookup is not kept.
    async fn role(&mut self) -> Option<String> {
        let fresh = self
            .role
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < crate::safety::policy::POLICY_TTL);
        if !fresh {
            match self
                .safety
                .role_of(self.cfg.acting_user_id.as_deref())
                .await
            {
                Ok(role) => self.role = Some((std::time::Instant::now(), role)),
                Err(()) => return self.role.as_ref().and_then(|(_, r)| r.clone()),
            }
        }
        self.role.as_ref().and_then(|(_, r)| r.clone())
    }

    /// The names a call answers to in policies: its tool, and for an MCP
    /// resource or prompt also the serving server's `mcp__<server>__…` (so
    /// `mcp__github__*` covers everything of that server).
    fn policy_names(&self, call: &ToolCall) -> Vec<String> {
        let mut names = vec![call.name.clone()];
        let args: serde_json::Value = serde_json::from_str(&call.arguments).unwrap_or_default();
        if call.name == super::mcp::READ_RESOURCE
            && let (Some(hub), Some(uri)) = (&self.mcp, args.get("uri").and_then(|u| u.as_str()))
            && let Some(server) = hub.resource_owner(uri)
        {
            names.push(format!("mcp__{}__read_resource", server.name));
        }
        if call.name == super::mcp::USE_PROMPT
            && let Some(prompt) = args.get("name").and_then(|n| n.as_str())
        {
            names.push(prompt.to_string());
        }
        names
    }

    /// The policy deciding each call of a batch, by call id — looked up
    /// before anything of a call runs, so a denied tool's own preparation
    /// never runs either.
    pub(super) async fn decide_policies(
        &mut self,
        calls: &[ToolCall],
    ) -> HashMap<String, ToolPolicy> {
        let mut out = HashMap::new();
        if self.safety.db.is_none() || calls.is_empty() {
            return out;
        }
        let role = self.role().await;
        for call in calls {
            let names = self.policy_names(call);
            if let Some(p) = self.safety.policy_for_any(&names, role.as_deref()).await {
                out.insert(call.id.clone(), p);
            }
        }
        out
    }

    /// The refusal of a call a `deny` policy stopped (audited).
    pub(super) async fn policy_denial(&self, item: &mut ToolItem, p: &ToolPolicy) {
        item.policy = Some(p.name.clone());
        item.needs_approval = false;
        item.error = Some(format!(
            "Error: tool {:?} is denied by the administrator's policy {:?}{}; it did not run.",
            item.func_name,
            p.name,
            if p.description.is_empty() {
                String::new()
            } else {
                format!(" ({})", p.description)
            }
        ));
        let role = self.role.as_ref().and_then(|(_, r)| r.clone());
        self.safety
            .audit(
                self.cfg.acting_user_id.as_deref(),
                "tool.policy_deny",
                self.ws_id(),
                json!({
                    "call_id": item.call_id,
                    "tool": item.func_name,
                    "policy": p.name,
                    "role": role,
                }),
            )
            .await;
    }

    /// Applies `allow` and `ask` policies to a prepared batch (`deny` ones
    /// stopped their calls before preparation). Returns the calls a policy
    /// forces to ask: Smart Approvals never approve those.
    pub(super) fn apply_policies(
        &self,
        items: &mut [ToolItem],
        policies: &HashMap<String, ToolPolicy>,
    ) -> HashSet<String> {
        let mut forced = HashSet::new();
        for item in items.iter_mut().filter(|i| i.error.is_none()) {
            let Some(p) = policies.get(&item.call_id) else {
                continue;
            };
            item.policy = Some(p.name.clone());
            match p.action {
                PolicyAction::Allow => item.needs_approval = false,
                PolicyAction::Ask => {
                    item.needs_approval = true;
                    forced.insert(item.call_id.clone());
                }
                PolicyAction::Deny => {}
            }
        }
        forced
    }

    /// The last few messages, for a guard.
    fn guard_conversation(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .turns
            .iter()
            .rev()
            .filter(|t| matches!(t.role, Role::User | Role::Assistant))
            .filter_map(|t| {
                let text = t.text_content();
                let text = text.trim();
                (!text.is_empty()).then(|| {
                    let who = if t.role == Role::User {
                        "user"
                    } else {
                        "assistant"
                    };
                    let cut: String = text.chars().take(GUARD_ENTRY_CHARS).collect();
                    format!("{who}: {cut}")
                })
            })
            .take(GUARD_CONVERSATION)
            .collect();
        out.reverse();
        out
    }

    /// What the guards are told about `call`.
    fn facts(
        &self,
        call: &ToolCall,
        item: &ToolItem,
        plugin: &str,
        description: &str,
    ) -> CallFacts {
        CallFacts {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            context: GuardContext {
                call_id: call.id.clone(),
                plugin: plugin.to_string(),
                tool_description: description.chars().take(600).collect(),
                conversation: self.guard_conversation(),
                workspace: Some(self.cfg.workspace.display().to_string()),
                grants: item.grants.clone(),
            },
        }
    }

    /// The guards' facts for every asked call of the batch (by index).
    fn asked_facts(
        &self,
        items: &[ToolItem],
        calls: &[ToolCall],
        registry: &PluginRegistry,
    ) -> Vec<(usize, CallFacts)> {
        items
            .iter()
            .zip(calls)
            .enumerate()
            .filter(|(_, (item, _))| item.needs_approval && item.error.is_none())
            .map(|(i, (item, call))| {
                let (plugin, description) = match registry.tool(&call.name) {
                    Some((p, spec)) => (p.name().to_string(), spec.description.clone()),
                    None => (
                        call.name
                            .strip_prefix("mcp__")
                            .and_then(|r| r.split("__").next())
                            .map(|s| format!("mcp:{s}"))
                            .unwrap_or_default(),
                        String::new(),
                    ),
                };
                (i, self.facts(call, item, &plugin, &description))
            })
            .collect()
    }

    /// The approval step for a prepared batch: heuristic verdicts, then
    /// Smart Approvals or a card (with the LLM judge working while it
    /// waits), then the audit row. Emits `tool_pending` and either
    /// `tool_info` or `approve_request`.
    pub(super) async fn approve_batch(
        &mut self,
        items: &mut [ToolItem],
        calls: &[ToolCall],
        registry: &PluginRegistry,
        forced_ask: &HashSet<String>,
    ) -> BatchDecision {
        let settings = self.safety.settings.clone();
        let asked = self.asked_facts(items, calls, registry);
        if settings.enabled && !asked.is_empty() {
            let guards = judge::call_guards(registry, GuardTier::Heuristic);
            if !guards.is_empty() {
                for (i, facts) in &asked {
                    items[*i].heuristic_verdict = judge::heuristic_verdict(&guards, facts).await;
                }
            }
        }
        self.emit(Event::ToolPending(Items {
            items: items.to_vec(),
        }));
        if !items.iter().any(|i| i.needs_approval) {
            self.emit(Event::ToolInfo(Items {
                items: items.to_vec(),
            }));
            return BatchDecision {
                decision: Decision {
                    approved: true,
                    ..Decision::default()
                },
                by: DecidedBy::Nobody,
            };
        }
        // Smart Approvals on the heuristic verdicts decide without a card
        // (never approving a call a policy says must ask).
        let may_approve = !items
            .iter()
            .any(|i| i.needs_approval && forced_ask.contains(&i.call_id));
        let heuristic: Vec<Vec<&Verdict>> = asked
            .iter()
            .map(|(i, _)| items[*i].heuristic_verdict.iter().collect())
            .collect();
        if let Some(d) = smart_decision(&settings, &heuristic, may_approve) {
            let decision = self.smart(d, items).await;
            self.audit_decision(items, &decision, DecidedBy::Judge, None)
                .await;
            return BatchDecision {
                decision,
                by: DecidedBy::Judge,
            };
        }

        // The card, with the LLM judge reviewing while it waits.
        let llm_guard = settings
            .enabled
            .then(|| {
                judge::call_guards(registry, GuardTier::Llm)
                    .into_iter()
                    .next()
            })
            .flatten()
            .filter(|_| settings.llm);
        self.state(SessionState::Attention);
        let request = ApproveRequest {
            cycle_id: crate::random_hex(),
            items: items.to_vec(),
            judge_pending: llm_guard.is_some(),
        };
        let cycle_id = request.cycle_id.clone();
        // Registered before it is announced: an answer cannot outrun it.
        let mut answer = self.events.approvals().register(request.clone());
        self.emit(Event::ApproveRequest(request));
        let judge_token = self.token.child_token();
        let (tx, mut rx) = mpsc::unbounded_channel::<(usize, LlmOutcome)>();
        if let Some(guard) = llm_guard {
            let binding = self
                .safety
                .judge_binding
                .clone()
                .unwrap_or_else(|| self.binding.clone());
            let model_name = binding
                .alias
                .clone()
                .unwrap_or_else(|| binding.model.clone());
            let model: Arc<dyn ModelAccess> = Arc::new(SessionModel {
                binding,
                cancel: judge_token.clone(),
                usage: self.ledger().map(|l| (l, Purpose::Judge)),
            });
            for (i, facts) in asked.iter().cloned() {
                let (tx, guard, model, model_name, settings, token) = (
                    tx.clone(),
                    guard.clone(),
                    model.clone(),
                    model_name.clone(),
                    settings.clone(),
                    judge_token.clone(),
                );
                // A sub-agent's judge runs inside its parent tool's call:
                // it must not wait for the slot that call holds.
                tokio::spawn(turnstone_runtime::admission::InstanceSlots::inherit(
                    async move {
                        let out = tokio::select! {
                            o = judge::llm_verdict(guard, facts, model, model_name, &settings, token.clone()) => o,
                            () = token.cancelled() => return,
                        };
                        let _ = tx.send((i, out));
                    },
                ));
            }
        }
        drop(tx);
        let mut judge_open = true;
        let mut llm: Vec<Option<Verdict>> = vec![None; items.len()];
        let mut by = DecidedBy::User;
        let decision = loop {
            tokio::select! {
                a = &mut answer => break a.unwrap_or_else(|_| Decision::deny()),
                () = self.token.cancelled() => {
                    self.events.approvals().forget(&cycle_id);
                    by = DecidedBy::Cancelled;
                    break Decision::deny();
                }
                msg = rx.recv(), if judge_open => match msg {
                    Some((i, LlmOutcome::Verdict(v))) => {
                        self.events.approvals().set_judge_verdict(&cycle_id, &v);
                        items[i].judge_verdict = Some((*v).clone());
                        self.emit(Event::IntentVerdict(v.clone()));
                        llm[i] = Some(*v);
                        // Every tier's verdict counts: the judge may add a
                        // denial, never lift a riskier heuristic one.
                        let verdicts: Vec<Vec<&Verdict>> = asked
                            .iter()
                            .map(|(i, _)| items[*i].heuristic_verdict.iter().chain(llm[*i].iter()).collect())
                            .collect();
                        if let Some(d) = smart_decision(&settings, &verdicts, may_approve) {
                            let decision = match d {
                                SmartDecision::Approve { .. } => Decision { approved: true, ..Decision::default() },
                                SmartDecision::Deny { feedback } => Decision { approved: false, always: false, feedback: Some(feedback) },
                            };
                            // A person may have answered in the same instant;
                            // then theirs stands.
                            if self.events.resolve(Some(&cycle_id), None, decision).is_ok() {
                                by = DecidedBy::Judge;
                            }
                        }
                    }
                    Some((i, LlmOutcome::Failed(reason))) => {
                        tracing::info!(call = %items[i].call_id, "{reason}");
                        self.emit(Event::info(format!(
                            "{reason} for {}; the heuristic verdict stands.",
                            items[i].func_name
                        )));
                    }
                    None => {
                        judge_open = false;
                        self.events.approvals().set_judge_pending(&cycle_id, false);
                    }
                },
            }
        };
        judge_token.cancel();
        if decision.approved && decision.always && by == DecidedBy::User {
            let mut always = self.always.lock().unwrap_or_else(|p| p.into_inner());
            for item in items.iter().filter(|i| i.needs_approval) {
                always.insert(item.func_name.clone());
            }
        }
        self.audit_decision(items, &decision, by, Some(&cycle_id))
            .await;
        self.state(SessionState::Running);
        BatchDecision { decision, by }
    }

    /// Applies a Smart Approvals decision made before any card.
    async fn smart(&mut self, d: SmartDecision, items: &[ToolItem]) -> Decision {
        match d {
            SmartDecision::Approve { reason } => {
                self.emit(Event::info(format!("Smart Approvals approved: {reason}")));
                self.emit(Event::ToolInfo(Items {
                    items: items.to_vec(),
                }));
                Decision {
                    approved: true,
                    ..Decision::default()
                }
            }
            SmartDecision::Deny { feedback } => {
                self.emit(Event::info(format!("Smart Approvals denied: {feedback}")));
                Decision {
                    approved: false,
                    always: false,
                    feedback: Some(feedback),
                }
            }
        }
    }

    /// The audit row of a batch's approval decision.
    async fn audit_decision(
        &self,
        items: &[ToolItem],
        decision: &Decision,
        by: DecidedBy,
        cycle_id: Option<&str>,
    ) {
        let calls: Vec<serde_json::Value> = items
            .iter()
            .filter(|i| i.needs_approval)
            .map(|i| {
                let v = judge::effective(i.heuristic_verdict.as_ref(), i.judge_verdict.as_ref());
                json!({
                    "call_id": i.call_id,
                    "tool": i.func_name,
                    "header": i.header,
                    "verdict": v.map(|v| json!({
                        "risk_level": v.risk_level,
                        "recommendation": v.recommendation,
                        "confidence": v.confidence,
                        "tier": v.tier,
                        "intent_summary": v.intent_summary,
                        "reasoning": v.reasoning,
                        "judge_model": v.judge_model,
                    })),
                })
            })
            .collect();
        let action = if decision.approved {
            "tool.approve"
        } else {
            "tool.deny"
        };
        let source = match by {
            DecidedBy::Judge => "smart_approval",
            DecidedBy::User => "user",
            DecidedBy::Nobody => "none",
            DecidedBy::Cancelled => "cancelled",
        };
        self.safety
            .audit(
                self.cfg.acting_user_id.as_deref(),
                action,
                self.ws_id(),
                json!({
                    "cycle_id": cycle_id,
                    "source": source,
                    "always": decision.always,
                    "feedback": decision.feedback,
                    "calls": calls,
                }),
            )
            .await;
    }
}
