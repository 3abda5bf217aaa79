//! Structured memories over HTTP (list, save, search, get, delete). A `user`
//! scope always means the caller; nobody reads another user's memories.

use super::owner;
use crate::http::{ApiError, AppState, Identity, bad_request, parse};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{Value, json};
use turnstone_storage::types::{Memory, NewMemory};

fn summary(m: &Memory, with_content: bool) -> Value {
    let mut v = json!({
        "memory_id": m.memory_id, "name": m.name, "description": m.description,
        "type": m.memory_type, "scope": m.scope, "scope_id": m.scope_id,
        "created": m.created, "updated": m.updated, "last_accessed": m.last_accessed,
        "access_count": m.access_count,
    });
    if with_content {
        v["content"] = m.content.clone().into();
    }
    v
}

/// `e2e-note` → `e2e_note`: lower-case snake_case, like the original.
fn normalise_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.trim().chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

/// The scope id a caller may use: their own id for `user`.
fn scope_id(id: &Identity, scope: &str, given: Option<String>) -> Result<String, ApiError> {
    match scope {
        "global" => Ok(String::new()),
        "user" => match (owner(id), given) {
            (Some(me), Some(g)) if g != me => Err(ApiError(
                StatusCode::FORBIDDEN,
                "a user-scoped memory belongs to its user".into(),
            )),
            (Some(me), _) => Ok(me.to_string()),
            (None, g) => Ok(g.unwrap_or_default()),
        },
        "workstream" => given
            .filter(|g| !g.is_empty())
            .ok_or_else(|| bad_request("scope_id is required for workstream scope")),
        other => Err(bad_request(format!(
            "scope must be global, workstream or user (got {other:?})"
        ))),
    }
}

fn visible(id: &Identity, m: &Memory) -> bool {
    m.scope != "user" || owner(id).is_none_or(|me| m.scope_id == me)
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    #[serde(rename = "type")]
    memory_type: Option<String>,
    scope: Option<String>,
    scope_id: Option<String>,
    limit: Option<i64>,
}

#[utoipa::path(get, path = "/v1/api/memories", tag = "memories", summary = "List memories", params(ListQuery), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let rows = state
        .db
        .list_memories(q.memory_type.as_deref(), q.scope.as_deref(), limit)
        .await?;
    let list: Vec<Value> = rows
        .iter()
        .filter(|m| visible(&id, m))
        .filter(|m| q.scope_id.as_ref().is_none_or(|s| &m.scope_id == s))
        .map(|m| summary(m, false))
        .collect();
    let total = list.len();
    Ok(Json(json!({"memories": list, "total": total})))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct SaveBody {
    name: Option<String>,
    content: Option<String>,
    description: Option<String>,
    #[serde(rename = "type")]
    memory_type: Option<String>,
    scope: Option<String>,
    scope_id: Option<String>,
}

#[utoipa::path(post, path = "/v1/api/memories", tag = "memories", summary = "Save (upsert) a memory", request_body = SaveBody, responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn save(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: SaveBody = parse(&body)?;
    let name = normalise_name(b.name.as_deref().unwrap_or_default());
    if name.is_empty() {
        return Err(bad_request("name is required"));
    }
    let content = b
        .content
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| bad_request("content is required"))?;
    let description: String = b
        .description
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if description.is_empty() {
        return Err(bad_request("description is required"));
    }
    let description: String = description.chars().take(512).collect();
    let scope = b.scope.unwrap_or_else(|| "global".into());
    let scope_id = scope_id(&id, &scope, b.scope_id)?;
    let m = state
        .db
        .save_memory(&NewMemory {
            name,
            description,
            memory_type: b.memory_type,
            scope: Some(scope),
            scope_id,
            content,
        })
        .await
        .map_err(|e| match e {
            turnstone_storage::StorageError::InvalidInput(m) => bad_request(m),
            other => other.into(),
        })?;
    Ok(Json(summary(&m, false)))
}

#[derive(Deserialize, utoipa::ToSchema)]
pub(crate) struct SearchBody {
    query: Option<String>,
    limit: Option<i64>,
}

#[utoipa::path(post, path = "/v1/api/memories/search", tag = "memories", summary = "Search memories", request_body = SearchBody, responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn search(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let b: SearchBody = parse(&body)?;
    let query = b
        .query
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| bad_request("query is required"))?;
    let rows = state
        .db
        .search_memories(&query, b.limit.unwrap_or(20).clamp(1, 200))
        .await?;
    let list: Vec<Value> = rows
        .iter()
        .filter(|m| visible(&id, m))
        .map(|m| summary(m, false))
        .collect();
    let total = list.len();
    Ok(Json(json!({"memories": list, "total": total})))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct OneQuery {
    scope: Option<String>,
    scope_id: Option<String>,
}

#[utoipa::path(get, path = "/v1/api/memories/{name}", tag = "memories", summary = "One memory with content", params(("name" = String, Path, description = "Memory name"), OneQuery), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn get_one(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(name): Path<String>,
    Query(q): Query<OneQuery>,
) -> Result<Json<Value>, ApiError> {
    let scope = q.scope.unwrap_or_else(|| "global".into());
    let sid = scope_id(&id, &scope, q.scope_id)?;
    let m = state
        .db
        .get_memory(&normalise_name(&name), &scope, &sid)
        .await?
        .ok_or_else(|| ApiError(StatusCode::NOT_FOUND, "Memory not found".into()))?;
    Ok(Json(summary(&m, true)))
}

#[utoipa::path(delete, path = "/v1/api/memories/{name}", tag = "memories", summary = "Delete a memory", params(("name" = String, Path, description = "Memory name"), OneQuery), responses((status = 200, description = "Success", body = Object), (status = 400, description = "Bad request", body = crate::routes::ErrorBody), (status = 401, description = "Unauthorized", body = crate::routes::ErrorBody), (status = 403, description = "Scope or permission missing", body = crate::routes::ErrorBody), (status = 404, description = "Not found", body = crate::routes::ErrorBody)))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(name): Path<String>,
    Query(q): Query<OneQuery>,
) -> Result<Json<Value>, ApiError> {
    let scope = q.scope.unwrap_or_else(|| "global".into());
    let sid = scope_id(&id, &scope, q.scope_id)?;
    if !state
        .db
        .delete_memory(&normalise_name(&name), &scope, &sid)
        .await?
    {
        return Err(ApiError(StatusCode::NOT_FOUND, "Memory not found".into()));
    }
    Ok(Json(json!({"status": "ok"})))
}
