//! Views of the work a workstream delegates: its sub-agents' transcripts
//! (`/children`). The routes are the owner's, like the workstream's history.

use super::{Guarded, Missing, visible_row};
use crate::http::{ApiError, AppState, Identity};
use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::ToSchema;

/// One sub-agent of a workstream.
#[derive(Serialize, ToSchema)]
pub(crate) struct ChildEntry {
    /// Its workstream (read its transcript at `/workstreams/{ws_id}/history`).
    pub ws_id: String,
    /// `task: <first line of its task>`.
    pub name: String,
    /// `task_agent`.
    pub kind: String,
    /// Stored state.
    pub state: String,
    /// When it started.
    pub created: String,
    /// Its last activity.
    pub updated: String,
    /// How many sub-agents it started itself.
    pub children: usize,
    /// The parent's `task_agent` call it ran for.
    pub parent_call_id: Option<String>,
}

/// `GET /api/workstreams/{ws_id}/children`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ChildrenBody {
    /// The workstream asked about.
    pub ws_id: String,
    /// Its sub-agents, oldest first.
    pub children: Vec<ChildEntry>,
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/children", tag = "workstreams", summary = "The sub-agents a workstream started (their transcripts are workstreams of kind task_agent)", params(("ws_id" = String, Path, description = "Workstream id (32 hex)")), responses((status = 200, description = "Its sub-agents", body = ChildrenBody), Guarded, Missing))]
pub(crate) async fn children(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
) -> Result<Json<ChildrenBody>, ApiError> {
    visible_row(&state, &id, &ws_id).await?;
    let rows = state.db.list_children(&ws_id).await?;
    let mut children = Vec::with_capacity(rows.len());
    for r in rows {
        let grandchildren = state.db.list_children(&r.ws_id).await?.len();
        let parent_call_id = state
            .db
            .get_config(&r.ws_id, turnstone_engine::session::PARENT_CALL_KEY)
            .await?;
        children.push(ChildEntry {
            ws_id: r.ws_id,
            name: r.name,
            kind: r.kind,
            state: r.state.as_str().to_string(),
            created: r.created,
            updated: r.updated,
            children: grandchildren,
            parent_call_id,
        });
    }
    Ok(Json(ChildrenBody { ws_id, children }))
}

/// `GET /api/workstreams/{ws_id}/watches`.
#[derive(Serialize, ToSchema)]
pub(crate) struct WatchesBody {
    /// The workstream.
    pub ws_id: String,
    /// Its watches (active ones unless `all`), oldest first.
    pub watches: Vec<turnstone_protocol::WatchInfo>,
}

/// `?all=true` lists ended watches too.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct WatchesQuery {
    /// Also the fired, expired and cancelled ones.
    #[serde(default)]
    pub all: bool,
}

#[utoipa::path(get, path = "/v1/api/workstreams/{ws_id}/watches", tag = "workstreams", summary = "The workstream's watches", params(("ws_id" = String, Path, description = "Workstream id (32 hex)"), WatchesQuery), responses((status = 200, description = "Its watches", body = WatchesBody), super::BadInput, Guarded, Missing))]
pub(crate) async fn watches(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(ws_id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<WatchesQuery>,
) -> Result<Json<WatchesBody>, ApiError> {
    visible_row(&state, &id, &ws_id).await?;
    let rows = state.db.list_watches(&ws_id, !q.all).await?;
    Ok(Json(WatchesBody {
        ws_id,
        watches: rows.iter().map(turnstone_engine::watch::info).collect(),
    }))
}

#[utoipa::path(post, path = "/v1/api/workstreams/{ws_id}/watches/{watch_id}/cancel", tag = "workstreams", summary = "Cancel an active watch (by id, id prefix or name)", params(("ws_id" = String, Path, description = "Workstream id (32 hex)"), ("watch_id" = String, Path, description = "Watch id, an id prefix, or its name")), responses((status = 200, description = "The cancelled watch", body = turnstone_protocol::WatchInfo), super::BadInput, Guarded, Missing))]
pub(crate) async fn cancel_watch(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path((ws_id, watch)): Path<(String, String)>,
) -> Result<Json<turnstone_protocol::WatchInfo>, ApiError> {
    visible_row(&state, &id, &ws_id).await?;
    let w = state
        .db
        .cancel_watch(&ws_id, &watch)
        .await?
        .ok_or_else(|| ApiError::NotFound("no active watch of that id or name".into()))?;
    let info = turnstone_engine::watch::info(&w);
    if let Ok(n) = super::node(&state)
        && let Some(ws) = n.mgr.get(&ws_id)
    {
        ws.core.emit(turnstone_protocol::Event::WatchChanged(
            turnstone_protocol::WatchChanged {
                watch: info.clone(),
            },
        ));
    }
    Ok(Json(info))
}
