//! Read-only views: health, metrics, models, dashboard, saved workstreams,
//! history and export.

use super::info_types::*;
use super::{BadInput, Guarded, Missing};
use super::{loaded, node, owner, visible_row};
use crate::http::{ApiError, AppState, Identity};
use axum::extract::{Path, Query, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::Value;
use std::collections::BTreeMap;
use turnstone_engine::SessionState;
use turnstone_protocol::{BackendHealth, DefaultModel, Health};
use turnstone_storage::prelude::*;
use turnstone_storage::types::{LoadMode, StoredTurn};

const STATES: [&str; 7] = [
    "idle",
    "thinking",
    "running",
    "attention",
    "evaluation",
    "error",
    "total",
];

fn counts(state: &AppState) -> BTreeMap<&'static str, usize> {
    let mut m: BTreeMap<&'static str, usize> = STATES.iter().map(|s| (*s, 0)).collect();
    if let Some(n) = &state.node {
        for w in n.mgr.all() {
            *m.entry(w.core.status().state.as_str()).or_default() += 1;
            *m.entry("total").or_default() += 1;
        }
    }
    m
}

/// The `/health` body.
pub fn health_fields(state: &AppState) -> Health {
    let up = state.node.as_ref().is_none_or(|n| n.metrics.backend_up());
    let mut h = Health {
        status: if up { "ok" } else { "degraded" }.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        node_id: state.node_id.clone(),
        uptime_seconds: state.started.elapsed().as_secs_f64(),
        backend: BackendHealth {
            status: if up { "up" } else { "down" }.into(),
        },
        mcp: None,
        model: None,
        max_ws: None,
        workstreams: None,
        default_model: None,
        process_sandbox: None,
    };
    let sandbox = turnstone_runtime::sandboxing::host_sandbox();
    h.process_sandbox = Some(turnstone_protocol::ProcessSandboxHealth {
        available: sandbox.support().complete(),
        detail: sandbox.support().summary(),
    });
    if let Some(n) = &state.node {
        h.mcp = n
            .mgr
            .deps
            .mcp
            .as_ref()
            .filter(|hub| !hub.servers().is_empty())
            .and_then(|hub| serde_json::to_value(hub.summary()).ok());
        let reg = n.mgr.deps.models.snapshot();
        h.model = Some(
            reg.alias(&reg.default)
                .map(|a| a.config.model.clone())
                .unwrap_or_default(),
        );
        h.max_ws = Some(n.mgr.limits.max_workstreams);
        h.workstreams = Some(
            counts(state)
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        );
        h.default_model = Some(DefaultModel {
            alias: reg.default.clone(),
            loaded: true,
        });
    }
    h
}

#[utoipa::path(get, path = "/health", tag = "node", summary = "Liveness, version, workstream counts", security(()), responses((status = 200, description = "The node's health", body = Health)))]
pub(crate) async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(health_fields(&state))
}

#[utoipa::path(get, path = "/metrics", tag = "node", summary = "Prometheus metrics", security(()), responses((status = 200, description = "Prometheus text exposition format 0.0.4", body = String, content_type = "text/plain")))]
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics_text(&state),
    )
        .into_response()
}

/// The `/metrics` body.
pub fn metrics_text(state: &AppState) -> String {
    let Some(n) = &state.node else {
        return String::new();
    };
    let reg = n.mgr.deps.models.snapshot();
    let model = reg
        .alias(&reg.default)
        .map(|a| a.config.model.clone())
        .unwrap_or_default();
    let mut ws = counts(state);
    ws.remove("total");
    let registry = n.mgr.deps.registry.snapshot();
    let plugin_states = registry
        .entries()
        .iter()
        .map(|e| {
            let state = match (&e.status, &e.update_error) {
                (turnstone_runtime::PluginStatus::Loaded(_), Some(_)) => "update_failed",
                (turnstone_runtime::PluginStatus::Loaded(_), None) => "loaded",
                (turnstone_runtime::PluginStatus::Disabled, _) => "disabled",
                (turnstone_runtime::PluginStatus::Failed(_), _) => "failed",
            };
            (e.name(), state)
        })
        .collect();
    let instance_slots = registry.loaded().next().map(|p| {
        let s = p.instance_slots();
        (s.capacity(), s.in_use(), s.waiting())
    });
    let plugins = registry
        .loaded()
        .map(|p| {
            let c = &p.ctx.counters;
            (
                p.name().to_string(),
                c.calls(),
                c.failures(),
                c.denials(),
                c.memory_peak_bytes(),
            )
        })
        .collect();
    n.metrics.render(&crate::metrics::Snapshot {
        workstreams: ws,
        uptime: state.started.elapsed().as_secs_f64(),
        model: &model,
        plugins,
        plugin_states,
        plugin_generation: n.mgr.deps.registry.generation(),
        instance_slots,
        mcp: n
            .mgr
            .deps
            .mcp
            .iter()
            .flat_map(|hub| hub.servers())
            .map(|s| {
                let c = &s.counters;
                (
                    s.name.clone(),
                    s.state().label(),
                    c.calls.load(std::sync::atomic::Ordering::Relaxed),
                    c.failures.load(std::sync::atomic::Ordering::Relaxed),
                    s.breaker_openings(),
                )
            })
            .collect(),
    })
}

#[utoipa::path(get, path = "/v1/api/models", tag = "node", summary = "Configured model aliases", responses((status = 200, description = "The aliases", body = ModelsBody), Guarded))]
pub(crate) async fn models(State(state): State<AppState>) -> Result<Json<ModelsBody>, ApiError> {
    let n = node(&state)?;
    let reg = n.mgr.deps.models.snapshot();
    let models = reg
        .aliases()
        .map(|a| ModelInfo {
            alias: a.name.clone(),
            model: a.config.model.clone(),
            provider: a.provider.clone(),
            // The configured window, else what the server said once asked.
            context_window: a
                .config
                .context_window
                .or_else(|| a.served.get().copied().flatten()),
            capabilities: a.config.capabilities.clone(),
        })
        .collect();
    Ok(Json(ModelsBody {
        models,
        default_alias: reg.default.clone(),
        channel_default_alias: None,
        judge_default_alias: None,
        stt_default_alias: None,
        tts_default_alias: None,
    }))
}

#[utoipa::path(get, path = "/v1/api/dashboard", tag = "node", summary = "Loaded workstreams with activity and aggregate counters", responses((status = 200, description = "The dashboard", body = DashboardBody), Guarded))]
pub(crate) async fn dashboard(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<DashboardBody>, ApiError> {
    let n = node(&state)?;
    let mine = owner(&id);
    let workstreams = n
        .mgr
        .all()
        .iter()
        .filter(|w| mine.is_none() || w.core.user_id.as_deref() == mine)
        .map(|w| {
            let s = w.core.status();
            DashboardEntry {
                ws_id: w.core.ws_id.clone(),
                name: w.core.name(),
                state: s.state,
                title: w.core.name(),
                tokens: s.total_tokens,
                context_ratio: if s.context_window == 0 {
                    0.0
                } else {
                    f64::from(s.prompt_tokens) / f64::from(s.context_window)
                },
                activity: s.activity.clone(),
                activity_state: s.activity_state.to_string(),
                tool_calls: s.tool_calls_this_turn,
                model: w.core.model.1.clone(),
                model_alias: w.core.model.0.clone(),
                user_id: w.core.user_id.clone(),
                kind: w.core.kind.clone(),
                node: state.node_id.clone(),
            }
        })
        .collect();
    let (total_tokens, total_tool_calls) = n.metrics.totals();
    let active_count = n
        .mgr
        .all()
        .iter()
        .filter(|w| w.core.status().state != SessionState::Idle)
        .count();
    Ok(Json(DashboardBody {
        workstreams,
        aggregate: DashboardAggregate {
            total_tokens,
            total_tool_calls,
            active_count,
            total_count: n.mgr.len(),
            uptime_seconds: state.started.elapsed().as_secs_f64(),
            node: state.node_id.clone(),
        },
    }))
}

#[utoipa::path(get, path = "/v1/api/workstreams/saved", tag = "workstreams", summary = "Saved (not loaded) workstreams, paged", params(SavedQuery), responses((status = 200, description = "One page", body = SavedBody), BadInput, Guarded))]
pub(crate) async fn saved(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Query(q): Query<SavedQuery>,
) -> Result<Json<SavedBody>, ApiError> {
    let n = node(&state)?;
    if q.q
        .as_ref()
        .is_some_and(|s| s.chars().count() > MAX_SAVED_QUERY)
    {
        return Err(crate::http::bad_request(format!(
            "q must be at most {MAX_SAVED_QUERY} characters"
        )));
    }
    let limit = q.limit.unwrap_or(50);
    let offset = q.offset.unwrap_or(0);
    if !(0..=MAX_QUERY_INT).contains(&limit) || !(0..=MAX_QUERY_INT).contains(&offset) {
        return Err(crate::http::bad_request(format!(
            "limit and offset must be integers from 0 to {MAX_QUERY_INT}"
        )));
    }
    let limit = limit.min(MAX_SAVED_PAGE);
    // Filtering and sorting happen after the query, so read a bounded window.
    let rows = state
        .db
        .list_workstreams_with_history(owner(&id), 5000, 0)
        .await?;
    let needle =
        q.q.as_deref()
            .map(str::to_lowercase)
            .filter(|s| !s.is_empty());
    let mut rows: Vec<_> = rows
        .into_iter()
        .filter(|r| n.mgr.get(&r.workstream.ws_id).is_none())
        .filter(|r| {
            needle.as_ref().is_none_or(|k| {
                let w = &r.workstream;
                w.name.to_lowercase().contains(k)
                    || w.title
                        .as_deref()
                        .is_some_and(|t| t.to_lowercase().contains(k))
                    || w.alias
                        .as_deref()
                        .is_some_and(|t| t.to_lowercase().contains(k))
                    || w.ws_id.starts_with(k.as_str())
            })
        })
        .collect();
    let sort = q.sort.unwrap_or_default();
    rows.sort_by(|a, b| {
        let (x, y) = (&a.workstream, &b.workstream);
        let by = match sort {
            SavedSort::Updated => a.last_activity.cmp(&b.last_activity),
            SavedSort::Created => x.created.cmp(&y.created),
            SavedSort::Name => x.name.cmp(&y.name),
            SavedSort::MessageCount => a.message_count.cmp(&b.message_count),
            SavedSort::Kind => x.kind.cmp(&y.kind),
            SavedSort::Persona => x.persona.cmp(&y.persona),
            SavedSort::Project => x.project_id.cmp(&y.project_id),
            SavedSort::WsId
            | SavedSort::Model
            | SavedSort::ChildCount
            | SavedSort::ContextRatio => std::cmp::Ordering::Equal,
        };
        by.then_with(|| x.ws_id.cmp(&y.ws_id))
    });
    if q.order.unwrap_or_default() == SortOrder::Desc {
        rows.reverse();
    }
    let total = rows.len();
    let workstreams = rows
        .into_iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(0))
        .map(|r| {
            let w = r.workstream;
            SavedEntry {
                state: w.state.as_str().to_string(),
                ws_id: w.ws_id,
                alias: w.alias,
                title: w.title,
                name: w.name,
                created: w.created,
                updated: r.last_activity,
                message_count: r.message_count,
                kind: w.kind,
                node_id: w.node_id,
                model_alias: None,
                launch_skill: w.skill_id,
                child_count: 0,
                context_tokens: None,
                context_ratio: None,
                project_id: w.project_id,
                persona: w.persona,
            }
        })
        .collect();
    Ok(Json(SavedBody {
        workstreams,
        total,
        limit,
        offset,
    }))
}

/// The side metadata of a stored turn (JSON object, or null).
fn meta_of(t: &StoredTurn) -> Value {
    t.turn
        .meta
        .as_deref()
        .and_then(|m| serde_json::from_str::<Value>(m).ok())
        .unwrap_or(Value::Null)
}

/// The verdict each tool call was decided on, by call id (kept with the
/// tool's result row; `/history` shows it on the assistant's call, where
/// the contract has it).
fn verdicts(turns: &[StoredTurn]) -> std::collections::HashMap<String, Value> {
    turns
        .iter()
        .filter_map(|t| {
            let id = t.turn.tool_call_id.clone()?;
            let v = meta_of(t).get("verdict").filter(|v| !v.is_null())?.clone();
            Some((
                id,
                serde_json::json!({
                    "risk_level": v["risk_level"],
                    "recommendation": v["recommendation"],
                    "confidence": v["confidence"],
                    "intent_summary": v["intent_summary"],
                    "tier": v["tier"],
                    "reasoning": v["reasoning"],
                }),
            ))
        })
        .collect()
}

/// A stored turn as a `/history` message.
fn message(
    t: &StoredTurn,
    sender: Option<&str>,
    verdicts: &std::collections::HashMap<String, Value>,
) -> HistoryMessage {
    let t_ = &t.turn;
    let tool_result = t_.tool_call_id.is_some();
    let meta = meta_of(t);
    HistoryMessage {
        role: t_.role.as_str().to_string(),
        content: t_.content.clone(),
        event_id: t.id,
        sender: (t_.role == Role::User).then(|| sender.map(String::from)),
        tool_calls: t_
            .tool_calls
            .as_deref()
            .and_then(|c| serde_json::from_str::<Value>(c).ok())
            .map(|mut calls| {
                if let Some(list) = calls.as_array_mut() {
                    for c in list {
                        let v = c["id"].as_str().and_then(|id| verdicts.get(id));
                        if let (Some(v), Some(o)) = (v, c.as_object_mut()) {
                            o.insert("verdict".into(), v.clone());
                        }
                    }
                }
                calls
            }),
        tool_call_id: t_.tool_call_id.clone(),
        capabilities: tool_result
            .then(|| meta.get("capabilities").filter(|c| !c.is_null()).cloned())
            .flatten(),
        output_flags: tool_result
            .then(|| meta.get("output_flags").filter(|c| !c.is_null()).cloned())
            .flatten(),
        name: tool_result.then(|| t_.tool_name.clone()),
        is_error: tool_result.then_some(t_.is_error),
        reasoning: t_
            .meta
            .as_deref()
            .and_then(|m| serde_json::from_str::<Value>(m).ok())
            .and_then(|v| v.get("reasoning").filter(|r| !r.is_null()).cloned()),
        source: t_.source.clone(),
        // Image parts are kept inline with the turn; list them by id only.
        attachments: t_
            .attachments
            .as_deref()
            .and_then(|a| serde_json::from_str::<Vec<Value>>(a).ok())
            .map(|parts| {
                parts
                    .iter()
                    .map(|p| HistoryAttachment {
                        attachment_id: p["attachment_id"].clone(),
                        kind: "image",
                    })
                    .collect()
            }),
    }
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/history", tag = "workstreams", summary = "Conversation history with a one-shot SSE hand-off token", params(("ws_id" = String, Path, description = "Workstream id (32 hex)"), HistoryQuery), responses((status = 200, description = "The newest messages", body = HistoryBody), BadInput, Guarded, Missing))]
pub(crate) async fn history(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> Result<Json<HistoryBody>, ApiError> {
    let row = visible_row(&state, &id, &ws_id).await?;
    // The hand-off cursor is taken before reading, so nothing saved meanwhile
    // is missed by the stream that resumes from it.
    let live = loaded(&state, &id, &ws_id).ok();
    let handoff_token = live.as_ref().map(|w| w.core.handoff());
    let cursor = live
        .as_ref()
        .map(|w| w.core.hub.next_id().saturating_sub(1));
    let turns = state.db.load_turns(&ws_id, LoadMode::Transcript).await?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_HISTORY).contains(&limit) {
        return Err(crate::http::bad_request(format!(
            "limit must be an integer from 1 to {MAX_HISTORY}"
        )));
    }
    let skip = turns.len().saturating_sub(limit);
    let verdicts = verdicts(&turns[skip..]);
    let messages = turns[skip..]
        .iter()
        .map(|t| message(t, row.user_id.as_deref(), &verdicts))
        .collect();
    Ok(Json(HistoryBody {
        ws_id,
        messages,
        cursor,
        handoff_token,
    }))
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/export", tag = "workstreams", summary = "The conversation as OpenAI-style messages", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "The conversation", body = ExportBody), Guarded, Missing))]
pub(crate) async fn export(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<ExportBody>, ApiError> {
    visible_row(&state, &id, &ws_id).await?;
    let turns = state.db.load_turns(&ws_id, LoadMode::Transcript).await?;
    let messages = turns
        .iter()
        .map(|t| ExportMessage {
            role: t.turn.role.as_str().to_string(),
            content: t.turn.content.clone(),
            tool_calls: t
                .turn
                .tool_calls
                .as_deref()
                .and_then(|c| serde_json::from_str::<Vec<Value>>(c).ok())
                .map(|calls| {
                    calls
                        .iter()
                        .map(|c| ExportToolCall {
                            id: c["id"].clone(),
                            kind: "function",
                            function: ExportFunction {
                                name: c["name"].clone(),
                                arguments: c["arguments"].clone(),
                            },
                        })
                        .collect()
                }),
            tool_call_id: t.turn.tool_call_id.clone(),
        })
        .collect();
    Ok(Json(ExportBody { ws_id, messages }))
}
