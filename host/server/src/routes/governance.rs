//! `/v1/api/admin/policies`, `/v1/api/admin/usage`, `/v1/api/admin/audit`:
//! tool policies (create, replace, delete — audited; every node applies a
//! change within two seconds), model usage grouped by user, model and day,
//! and the audit log, filtered and paged. Approve scope (checked by the
//! middleware) plus `admin.policies`, `admin.usage` or `admin.audit`.

use super::governance_types::*;
use super::{BadInput, Guarded, Missing, need};
use crate::http::{ApiError, AppState, Identity, client_ip, parse};
use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde_json::json;
use turnstone_storage::StorageError;
use turnstone_storage::prelude::*;

/// The body of a policy request, and who sent it from where.
async fn policy_request(req: Request) -> Result<(PolicyBody, Option<std::net::IpAddr>), ApiError> {
    let ip = client_ip(&req);
    let body = axum::body::to_bytes(req.into_body(), 64 * 1024)
        .await
        .map_err(|e| ApiError::BadRequest(format!("cannot read the body: {e}")))?;
    Ok((parse(&body)?, ip))
}

fn new_policy(b: PolicyBody, by: &Identity) -> NewToolPolicy {
    NewToolPolicy {
        name: b.name,
        tool_pattern: b.tool_pattern,
        action: b.action.into(),
        role: b.role.map(|r| r.as_str().to_string()),
        priority: b.priority.unwrap_or(100),
        enabled: b.enabled.unwrap_or(true),
        description: b.description.unwrap_or_default(),
        created_by: Some(by.user_id.clone()),
    }
}

fn policy_error(e: StorageError) -> ApiError {
    match e {
        StorageError::PolicyExists(_) => ApiError::Conflict(e.to_string()),
        StorageError::InvalidInput(m) => ApiError::BadRequest(m),
        other => other.into(),
    }
}

/// Every node re-reads policies within two seconds; this one at once.
fn changed(state: &AppState) {
    if let Some(node) = &state.node {
        node.mgr.deps.safety.policies.invalidate();
    }
}

#[utoipa::path(
    get,
    path = "/v1/api/admin/policies",
    tag = "admin",
    summary = "Tool policies in the order they are checked (first match wins)",
    responses((status = 200, description = "The policies", body = PolicyList), Guarded)
)]
pub(crate) async fn list_policies(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<PolicyList>, ApiError> {
    need(&id, "admin.policies")?;
    let policies = state.db.list_policies().await?;
    Ok(Json(PolicyList {
        policies: policies.into_iter().map(PolicyView::from).collect(),
    }))
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/policies",
    tag = "admin",
    summary = "Create a tool policy (audited)",
    request_body = PolicyBody,
    responses(
        (status = 201, description = "Created", body = PolicyView),
        BadInput,
        (status = 409, description = "A policy of that name exists", body = crate::routes::ErrorBody),
        Guarded,
    )
)]
pub(crate) async fn create_policy(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    req: Request,
) -> Result<(StatusCode, Json<PolicyView>), ApiError> {
    need(&id, "admin.policies")?;
    let (body, ip) = policy_request(req).await?;
    let p = state
        .db
        .create_policy(&new_policy(body, &id))
        .await
        .map_err(policy_error)?;
    changed(&state);
    let view = PolicyView::from(p);
    crate::audit::record(
        &state.db,
        Some(&id.user_id),
        ip,
        "policy.create",
        Some(&view.name),
        json!({ "policy": view }),
    )
    .await;
    Ok((StatusCode::CREATED, Json(view)))
}

#[utoipa::path(
    put,
    path = "/v1/api/admin/policies/{policy_id}",
    tag = "admin",
    summary = "Replace a tool policy (audited with the old and new rule)",
    params(("policy_id" = String, Path, description = "Policy id")),
    request_body = PolicyBody,
    responses(
        (status = 200, description = "The policy after the change", body = PolicyView),
        BadInput,
        Missing,
        (status = 409, description = "Another policy has that name", body = crate::routes::ErrorBody),
        Guarded,
    )
)]
pub(crate) async fn update_policy(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(policy_id): Path<String>,
    req: Request,
) -> Result<Json<PolicyView>, ApiError> {
    need(&id, "admin.policies")?;
    let (body, ip) = policy_request(req).await?;
    let before = state
        .db
        .get_policy(&policy_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no policy {policy_id:?}")))?;
    let mut new = new_policy(body, &id);
    new.created_by = before.created_by.clone();
    let p = state
        .db
        .update_policy(&policy_id, &new)
        .await
        .map_err(policy_error)?
        .ok_or_else(|| ApiError::NotFound(format!("no policy {policy_id:?}")))?;
    changed(&state);
    let view = PolicyView::from(p);
    crate::audit::record(
        &state.db,
        Some(&id.user_id),
        ip,
        "policy.update",
        Some(&view.name),
        json!({ "before": PolicyView::from(before), "after": view }),
    )
    .await;
    Ok(Json(view))
}

#[utoipa::path(
    delete,
    path = "/v1/api/admin/policies/{policy_id}",
    tag = "admin",
    summary = "Delete a tool policy (audited)",
    params(("policy_id" = String, Path, description = "Policy id")),
    responses(
        (status = 200, description = "Deleted", body = crate::routes::StatusOk),
        Missing,
        Guarded,
    )
)]
pub(crate) async fn delete_policy(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(policy_id): Path<String>,
    req: Request,
) -> Result<Json<crate::routes::StatusOk>, ApiError> {
    need(&id, "admin.policies")?;
    let ip = client_ip(&req);
    let before = state
        .db
        .get_policy(&policy_id)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no policy {policy_id:?}")))?;
    if !state.db.delete_policy(&policy_id).await? {
        return Err(ApiError::NotFound(format!("no policy {policy_id:?}")));
    }
    changed(&state);
    let name = before.name.clone();
    crate::audit::record(
        &state.db,
        Some(&id.user_id),
        ip,
        "policy.delete",
        Some(&name),
        json!({ "policy": PolicyView::from(before) }),
    )
    .await;
    Ok(crate::routes::StatusOk::ok())
}

/// 400 unless `v` has at most `max` characters.
fn max_len(name: &str, v: &Option<String>, max: usize) -> Result<(), ApiError> {
    match v {
        Some(s) if s.chars().count() > max => Err(ApiError::BadRequest(format!(
            "{name} is at most {max} characters"
        ))),
        _ => Ok(()),
    }
}

/// 400 unless `v` is a UTC date or time: `YYYY-MM-DD`, optionally with
/// `THH`, `:MM`, `:SS`, `.fraction` (1-9 digits) and `Z` (a space may stand
/// for the `T`) — the `pattern` the parameters document.
fn time_bound(name: &str, v: &Option<String>) -> Result<(), ApiError> {
    let Some(s) = v else { return Ok(()) };
    let bad = || {
        ApiError::BadRequest(format!(
            "{name} {s:?} is not a date or time such as 2026-12-03 or 2026-12-03T10:00:00Z"
        ))
    };
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    if b.len() < 10
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
    {
        return Err(bad());
    }
    let mut i = 10;
    if i == b.len() {
        return Ok(());
    }
    if b[i] == b'T' || b[i] == b' ' {
        if !digits(i + 1..i + 3) {
            return Err(bad());
        }
        i += 3;
        for _ in 0..2 {
            if b.get(i) == Some(&b':') {
                if !digits(i + 1..i + 3) {
                    return Err(bad());
                }
                i += 3;
            }
        }
        if b.get(i) == Some(&b'.') {
            let n = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if !(1..=9).contains(&n) {
                return Err(bad());
            }
            i += 1 + n;
        }
    }
    if b.get(i) == Some(&b'Z') {
        i += 1;
    }
    if i == b.len() { Ok(()) } else { Err(bad()) }
}

fn row_view(r: UsageRow, names: &std::collections::HashMap<String, String>) -> UsageRowView {
    UsageRowView {
        username: r.user_id.as_ref().and_then(|u| names.get(u).cloned()),
        user_id: r.user_id,
        model: r.model,
        day: r.day,
        calls: r.calls,
        prompt_tokens: r.prompt_tokens,
        completion_tokens: r.completion_tokens,
        cached_tokens: r.cached_tokens,
        cache_creation_tokens: r.cache_creation_tokens,
        reasoning_tokens: r.reasoning_tokens,
        tool_calls: r.tool_calls,
        avg_latency_ms: r.avg_latency_ms,
    }
}

#[utoipa::path(
    get,
    path = "/v1/api/admin/usage",
    tag = "admin",
    summary = "Model usage (tokens, calls, latency) grouped by user, model and day",
    params(UsageParams),
    responses((status = 200, description = "Usage per group and in total", body = UsageResponse), BadInput, Guarded)
)]
pub(crate) async fn usage(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Query(q): Query<UsageParams>,
) -> Result<Json<UsageResponse>, ApiError> {
    need(&id, "admin.usage")?;
    time_bound("since", &q.since)?;
    time_bound("until", &q.until)?;
    max_len("user_id", &q.user_id, 64)?;
    max_len("model", &q.model, 128)?;
    let mut group_by = Vec::new();
    for g in q.group_by.as_deref().unwrap_or("user,model,day").split(',') {
        let g = match g {
            "user" => UsageGroup::User,
            "model" => UsageGroup::Model,
            "day" => UsageGroup::Day,
            other => {
                return Err(ApiError::BadRequest(format!(
                    "group_by {other:?}: use user, model or day"
                )));
            }
        };
        if !group_by.contains(&g) {
            group_by.push(g);
        }
    }
    let mut query = UsageQuery {
        since: q.since,
        until: q.until,
        user_id: q.user_id,
        model_alias: q.model,
        group_by: group_by.clone(),
    };
    let rows = state.db.usage_summary(&query).await?;
    query.group_by.clear();
    let total = state
        .db
        .usage_summary(&query)
        .await?
        .pop()
        .unwrap_or_default();
    let names: std::collections::HashMap<String, String> = state
        .db
        .list_users()
        .await?
        .into_iter()
        .map(|u| (u.user_id, u.username))
        .collect();
    Ok(Json(UsageResponse {
        group_by: group_by
            .iter()
            .map(|g| match g {
                UsageGroup::User => "user",
                UsageGroup::Model => "model",
                UsageGroup::Day => "day",
            })
            .map(String::from)
            .collect(),
        rows: rows.into_iter().map(|r| row_view(r, &names)).collect(),
        total: row_view(total, &names),
    }))
}

#[utoipa::path(
    get,
    path = "/v1/api/admin/audit",
    tag = "admin",
    summary = "The audit log, newest first: filter by action (or prefix), user, target and time; page with `before`",
    params(AuditParams),
    responses((status = 200, description = "A page of entries", body = AuditPage), BadInput, Guarded)
)]
pub(crate) async fn audit(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Query(q): Query<AuditParams>,
) -> Result<Json<AuditPage>, ApiError> {
    need(&id, "admin.audit")?;
    time_bound("since", &q.since)?;
    time_bound("until", &q.until)?;
    max_len("action", &q.action, 100)?;
    max_len("user_id", &q.user_id, 64)?;
    max_len("target", &q.target, 256)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::BadRequest("limit is 1 to 1000".into()));
    }
    if q.before
        .is_some_and(|b| !(1..=9_007_199_254_740_991).contains(&b))
    {
        return Err(ApiError::BadRequest(
            "before is an entry id (1 or more)".into(),
        ));
    }
    let entries = state
        .db
        .query_audit(&AuditQuery {
            limit,
            before_id: q.before,
            action: q.action,
            user_id: q.user_id,
            target: q.target,
            since: q.since,
            until: q.until,
        })
        .await?;
    let next_before = (entries.len() as i64 == limit)
        .then(|| entries.last().map(|e| e.id))
        .flatten();
    Ok(Json(AuditPage {
        entries: entries.into_iter().map(AuditView::from).collect(),
        next_before,
    }))
}
