//! Read-only views: health, metrics, models, dashboard, saved workstreams,
//! history and export.

use super::{loaded, node, owner, visible_row};
use crate::http::{ApiError, AppState, Identity};
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use turnstone_engine::SessionState;
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
pub fn health_fields(state: &AppState) -> Value {
    let up = state.node.as_ref().is_none_or(|n| n.metrics.backend_up());
    let mut v = json!({
        "status": if up { "ok" } else { "degraded" },
        "version": env!("CARGO_PKG_VERSION"),
        "node_id": state.node_id,
        "uptime_seconds": state.started.elapsed().as_secs_f64(),
        "backend": {"status": if up { "up" } else { "down" }},
        "mcp": null,
    });
    if let Some(n) = &state.node {
        let reg = n.mgr.deps.models.snapshot();
        let model = reg
            .alias(&reg.default)
            .map(|a| a.config.model.clone())
            .unwrap_or_default();
        v["model"] = model.into();
        v["max_ws"] = n.mgr.limits.max_workstreams.into();
        v["workstreams"] = json!(counts(state));
        v["default_model"] = json!({"alias": reg.default, "loaded": true});
    }
    v
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
    let plugins = registry
        .loaded()
        .map(|p| {
            let c = &p.ctx.counters;
            (p.name().to_string(), c.calls(), c.failures(), c.denials())
        })
        .collect();
    n.metrics.render(&crate::metrics::Snapshot {
        workstreams: ws,
        uptime: state.started.elapsed().as_secs_f64(),
        model: &model,
        plugins,
        plugin_states,
        plugin_generation: n.mgr.deps.registry.generation(),
    })
}

#[utoipa::path(get, path = "/v1/api/models", tag = "node", summary = "Configured model aliases", responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn models(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let n = node(&state)?;
    let reg = n.mgr.deps.models.snapshot();
    let models: Vec<Value> = reg
        .aliases()
        .map(|a| {
            json!({
                "alias": a.name,
                "model": a.config.model,
                "provider": a.provider,
                "context_window": a.config.context_window,
                "capabilities": a.config.capabilities,
            })
        })
        .collect();
    Ok(Json(json!({
        "models": models,
        "default_alias": reg.default,
        "channel_default_alias": null,
        "judge_default_alias": null,
        "stt_default_alias": null,
        "tts_default_alias": null,
    })))
}

#[utoipa::path(get, path = "/v1/api/skills", tag = "node", summary = "Skills (none yet)", responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn skills() -> Json<Value> {
    // Skills arrive with the agent tools milestone; the list is honestly empty.
    Json(json!({"skills": []}))
}

#[utoipa::path(get, path = "/v1/api/dashboard", tag = "node", summary = "Loaded workstreams with activity and aggregate counters", responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn dashboard(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<Value>, ApiError> {
    let n = node(&state)?;
    let mine = owner(&id);
    let list: Vec<Value> = n
        .mgr
        .all()
        .iter()
        .filter(|w| mine.is_none() || w.core.user_id.as_deref() == mine)
        .map(|w| {
            let s = w.core.status();
            json!({
                "ws_id": w.core.ws_id, "name": w.core.name(), "state": s.state.as_str(),
                "title": w.core.name(), "tokens": s.total_tokens,
                "context_ratio": if s.context_window == 0 { 0.0 } else {
                    f64::from(s.prompt_tokens) / f64::from(s.context_window) },
                "activity": s.activity, "activity_state": s.activity_state,
                "tool_calls": s.tool_calls_this_turn, "model": w.core.model.1,
                "model_alias": w.core.model.0, "user_id": w.core.user_id,
                "kind": w.core.kind, "node": state.node_id,
            })
        })
        .collect();
    let (tokens, tools) = n.metrics.totals();
    let active = n
        .mgr
        .all()
        .iter()
        .filter(|w| w.core.status().state != SessionState::Idle)
        .count();
    Ok(Json(json!({
        "workstreams": list,
        "aggregate": {
            "total_tokens": tokens, "total_tool_calls": tools, "active_count": active,
            "total_count": n.mgr.len(), "uptime_seconds": state.started.elapsed().as_secs_f64(),
            "node": state.node_id,
        },
    })))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct SavedQuery {
    limit: Option<i64>,
    offset: Option<i64>,
    q: Option<String>,
    sort: Option<String>,
    order: Option<String>,
}

#[utoipa::path(get, path = "/v1/api/workstreams/saved", tag = "workstreams", summary = "Saved (not loaded) workstreams, paged", params(SavedQuery), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn saved(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Query(q): Query<SavedQuery>,
) -> Result<Json<Value>, ApiError> {
    let n = node(&state)?;
    let limit = q.limit.unwrap_or(50).clamp(1, 500);
    let offset = q.offset.unwrap_or(0).max(0);
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
    match q.sort.as_deref().unwrap_or("updated") {
        "created" => rows.sort_by(|a, b| a.workstream.created.cmp(&b.workstream.created)),
        "name" => rows.sort_by(|a, b| a.workstream.name.cmp(&b.workstream.name)),
        "messages" | "message_count" => rows.sort_by_key(|r| r.message_count),
        _ => rows.sort_by(|a, b| a.last_activity.cmp(&b.last_activity)),
    }
    if q.order.as_deref() != Some("asc") {
        rows.reverse();
    }
    let total = rows.len();
    let page: Vec<Value> = rows
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .map(|r| {
            let w = r.workstream;
            json!({
                "ws_id": w.ws_id, "alias": w.alias, "title": w.title, "name": w.name,
                "created": w.created, "updated": r.last_activity,
                "message_count": r.message_count, "state": w.state.as_str(), "kind": w.kind,
                "node_id": w.node_id, "model_alias": null, "launch_skill": w.skill_id,
                "child_count": 0, "context_tokens": null, "context_ratio": null,
                "project_id": w.project_id, "persona": w.persona,
            })
        })
        .collect();
    Ok(Json(
        json!({"workstreams": page, "total": total, "limit": limit, "offset": offset}),
    ))
}

/// A stored turn as a `/history` message.
fn message(t: &StoredTurn, sender: Option<&str>) -> Value {
    let mut m = json!({
        "role": t.role.as_str(),
        "content": t.content,
        "event_id": t.id,
    });
    if t.role == Role::User {
        m["sender"] = sender.into();
    }
    if let Some(calls) = &t.tool_calls
        && let Ok(v) = serde_json::from_str::<Value>(calls)
    {
        m["tool_calls"] = v;
    }
    if let Some(id) = &t.tool_call_id {
        m["tool_call_id"] = id.clone().into();
        m["name"] = t.tool_name.clone().into();
        m["is_error"] = t.is_error.into();
    }
    if let Some(meta) = &t.meta
        && let Ok(v) = serde_json::from_str::<Value>(meta)
        && let Some(r) = v.get("reasoning").filter(|r| !r.is_null())
    {
        m["reasoning"] = r.clone();
    }
    if let Some(s) = &t.source {
        m["source"] = s.clone().into();
    }
    // Image parts are kept inline with the turn; list them by id only.
    if let Some(a) = &t.attachments
        && let Ok(parts) = serde_json::from_str::<Vec<Value>>(a)
    {
        m["attachments"] = parts
            .iter()
            .map(|p| json!({"attachment_id": p["attachment_id"], "kind": "image"}))
            .collect::<Vec<_>>()
            .into();
    }
    m
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct HistoryQuery {
    limit: Option<usize>,
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/history", tag = "workstreams", summary = "Conversation history with a one-shot SSE hand-off token", params(("ws_id" = String, Path, description = "Workstream id (32 hex)"), HistoryQuery), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn history(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> Result<Json<Value>, ApiError> {
    let row = visible_row(&state, &id, &ws_id).await?;
    // The hand-off cursor is taken before reading, so nothing saved meanwhile
    // is missed by the stream that resumes from it.
    let live = loaded(&state, &id, &ws_id).ok();
    let token = live.as_ref().map(|w| w.core.handoff());
    let cursor = live
        .as_ref()
        .map(|w| w.core.hub.next_id().saturating_sub(1));
    let turns = state.db.load_turns(&ws_id, LoadMode::Transcript).await?;
    let limit = q.limit.unwrap_or(100).clamp(1, 10_000);
    let skip = turns.len().saturating_sub(limit);
    let messages: Vec<Value> = turns[skip..]
        .iter()
        .map(|t| message(t, row.user_id.as_deref()))
        .collect();
    Ok(Json(json!({
        "ws_id": ws_id,
        "messages": messages,
        "cursor": cursor,
        "handoff_token": token,
    })))
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/export", tag = "workstreams", summary = "The conversation as OpenAI-style messages", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn export(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    visible_row(&state, &id, &ws_id).await?;
    let turns = state.db.load_turns(&ws_id, LoadMode::Transcript).await?;
    let messages: Vec<Value> = turns
        .iter()
        .map(|t| {
            let mut m = json!({"role": t.role.as_str(), "content": t.content});
            if let Some(calls) = &t.tool_calls
                && let Ok(v) = serde_json::from_str::<Vec<Value>>(calls)
            {
                m["tool_calls"] = v
                    .iter()
                    .map(|c| {
                        json!({"id": c["id"], "type": "function",
                               "function": {"name": c["name"], "arguments": c["arguments"]}})
                    })
                    .collect::<Vec<_>>()
                    .into();
            }
            if let Some(id) = &t.tool_call_id {
                m["tool_call_id"] = id.clone().into();
            }
            m
        })
        .collect();
    Ok(Json(json!({"ws_id": ws_id, "messages": messages})))
}
