//! Structured memories over HTTP (list, save, search, get, delete). A `user`
//! scope always means the caller; nobody reads another user's memories.

use super::{BadInput, Guarded, Missing, StatusOk, TooLarge, owner};
use crate::http::{ApiError, AppState, Identity, bad_request, is_blank, parse};
use axum::extract::{Path, Query, State};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use turnstone_storage::StorageError;
use turnstone_storage::types::{Memory, NewMemory};
use utoipa::ToSchema;

// The patterns spell out whitespace as the handlers judge it (Python's
// `str.isspace`, see `http::is_blank`) instead of `\s`, whose meaning
// differs between regex engines; `\x00` is NUL, which storage refuses.

/// What a memory is about (storage's `MEMORY_TYPES`).
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MemoryType {
    /// About the user.
    User,
    /// General knowledge (the default for a new memory; `project` is read
    /// as this, the name older clients used).
    #[serde(alias = "project")]
    General,
    /// Feedback on how to work.
    Feedback,
    /// A pointer to something elsewhere.
    Reference,
}

impl MemoryType {
    fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::General => "general",
            Self::Feedback => "feedback",
            Self::Reference => "reference",
        }
    }
}

/// Where a memory lives (storage's `MEMORY_SCOPES`).
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum MemoryScope {
    /// Everyone's (the default); its `scope_id` is empty.
    Global,
    /// One workstream's; `scope_id` is the workstream id.
    Workstream,
    /// One user's; `scope_id` is the user id (always the caller's own).
    User,
}

impl MemoryScope {
    fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Workstream => "workstream",
            Self::User => "user",
        }
    }
}

/// The `workstream` scope (it needs a `scope_id`).
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum WorkstreamScope {
    /// A workstream's memory.
    Workstream,
}

/// The scopes that need no `scope_id` from the caller.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SharedScope {
    /// Everyone's.
    Global,
    /// The caller's own.
    User,
}

/// `scope` and `scope_id` of a saved memory: a workstream's (with its id), or
/// global (the default) or the caller's own.
#[derive(Deserialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum Placement {
    /// A workstream's memory.
    Workstream {
        /// `workstream`.
        scope: WorkstreamScope,
        /// The workstream id (required, not empty).
        #[schema(required = true, nullable = false, pattern = "^[^\\x00]+$")]
        scope_id: Option<String>,
    },
    /// A global memory, or the caller's own.
    Shared {
        /// `global` (the default) or `user`.
        scope: Option<SharedScope>,
        /// Ignored for `global`; for `user`, the caller's own id (a service
        /// caller names the user; anyone else may only name themselves, 403).
        scope_id: Option<String>,
    },
}

impl Placement {
    fn parts(self) -> (MemoryScope, Option<String>) {
        match self {
            Self::Workstream {
                scope: WorkstreamScope::Workstream,
                scope_id,
            } => (MemoryScope::Workstream, scope_id),
            Self::Shared { scope, scope_id } => match scope {
                Some(SharedScope::User) => (MemoryScope::User, scope_id),
                Some(SharedScope::Global) | None => (MemoryScope::Global, scope_id),
            },
        }
    }
}

/// A memory without its content.
#[derive(Serialize, ToSchema)]
pub(crate) struct MemorySummary {
    /// Id.
    memory_id: String,
    /// Short snake_case name (unique per scope and scope id).
    name: String,
    /// What the memory is relevant for.
    description: String,
    /// `user`, `project`, `feedback` or `reference`.
    #[serde(rename = "type")]
    memory_type: String,
    /// `global`, `workstream` or `user`.
    scope: String,
    /// Workstream or user id (empty for `global`).
    scope_id: String,
    /// When it was created.
    created: String,
    /// When it last changed.
    updated: String,
    /// When it was last read (`null`: never).
    #[schema(required = true)]
    last_accessed: Option<String>,
    /// How often it was read.
    access_count: i64,
}

impl From<&Memory> for MemorySummary {
    fn from(m: &Memory) -> Self {
        Self {
            memory_id: m.memory_id.clone(),
            name: m.name.clone(),
            description: m.description.clone(),
            memory_type: m.memory_type.clone(),
            scope: m.scope.clone(),
            scope_id: m.scope_id.clone(),
            created: m.created.clone(),
            updated: m.updated.clone(),
            last_accessed: m.last_accessed.clone(),
            access_count: m.access_count,
        }
    }
}

/// A memory with its content.
#[derive(Serialize, ToSchema)]
pub(crate) struct MemoryWithContent {
    /// Everything but the content.
    #[serde(flatten)]
    summary: MemorySummary,
    /// The memory's text.
    content: String,
}

/// Memories the caller may see.
#[derive(Serialize, ToSchema)]
pub(crate) struct MemoryList {
    /// The memories, without content.
    memories: Vec<MemorySummary>,
    /// How many there are.
    total: usize,
}

impl MemoryList {
    fn of<'a>(rows: impl Iterator<Item = &'a Memory>) -> Json<Self> {
        let memories: Vec<MemorySummary> = rows.map(MemorySummary::from).collect();
        let total = memories.len();
        Json(Self { memories, total })
    }
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

/// The scope id a caller may use: their own id for `user`; for
/// `workstream`, one of their own workstreams (else `None`, which matches
/// nothing; a service caller names any); `None` without one.
async fn scope_id(
    state: &AppState,
    id: &Identity,
    scope: MemoryScope,
    given: Option<String>,
) -> Result<Option<String>, ApiError> {
    if let (MemoryScope::Workstream, Some(ws)) = (scope, &given)
        && !ws.is_empty()
        && !owns_workstream(state, id, ws).await?
    {
        return Ok(None);
    }
    Ok(match scope {
        MemoryScope::Global => Some(String::new()),
        MemoryScope::User => Some(match (owner(id), given) {
            (Some(me), Some(g)) if g != me => {
                return Err(ApiError::Forbidden(
                    "a user-scoped memory belongs to its user".into(),
                ));
            }
            (Some(me), _) => me.to_string(),
            (None, g) => g.unwrap_or_default(),
        }),
        MemoryScope::Workstream => given.filter(|g| !g.is_empty()),
    })
}

/// Whether workstream `ws` is the caller's (a service caller: any).
async fn owns_workstream(state: &AppState, id: &Identity, ws: &str) -> Result<bool, ApiError> {
    let Some(me) = owner(id) else {
        return Ok(true);
    };
    if ws.contains('\0') {
        return Ok(false);
    }
    Ok(state
        .db
        .get_workstream(ws)
        .await?
        .is_some_and(|w| w.user_id.as_deref() == Some(me)))
}

fn memory_not_found() -> ApiError {
    ApiError::NotFound("Memory not found".into())
}

/// Query of `GET /api/memories`. The filters take any value; one that no
/// memory has matches nothing.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// Only memories of this type (`user`, `general`, `feedback`, `reference`;
    /// `project` means `general`).
    #[serde(rename = "type")]
    memory_type: Option<String>,
    /// Only memories of this scope (`global`, `workstream`, `user`).
    scope: Option<String>,
    /// Only memories with this scope id.
    scope_id: Option<String>,
    /// Most memories to read (default 100; clamped to 1–1000).
    #[param(minimum = -9223372036854775808i64, maximum = 9223372036854775807i64)]
    limit: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/v1/api/memories",
    tag = "memories",
    summary = "List memories",
    params(ListQuery),
    responses(
        (status = 200, description = "The memories the caller may see", body = MemoryList),
        BadInput,
        Guarded,
    )
)]
pub(crate) async fn list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Query(q): Query<ListQuery>,
) -> Result<Json<MemoryList>, ApiError> {
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let filters = [q.memory_type.as_deref(), q.scope.as_deref()];
    if filters.iter().flatten().any(|f| f.contains('\0')) {
        // No memory has a NUL in its type or scope (and some databases
        // refuse to compare with one).
        return Ok(MemoryList::of(std::iter::empty()));
    }
    let memory_type = q.memory_type.as_deref().map(|t| match t {
        "project" => "general",
        other => other,
    });
    // Visibility is decided in the query, so `limit` counts visible rows.
    let rows = state
        .db
        .list_memories(owner(&id), memory_type, q.scope.as_deref(), limit)
        .await?;
    Ok(MemoryList::of(rows.iter().filter(|m| {
        q.scope_id.as_ref().is_none_or(|s| &m.scope_id == s)
    })))
}

/// Body of `POST /api/memories`: an upsert by name, scope and scope id.
#[derive(Deserialize, ToSchema)]
pub(crate) struct SaveBody {
    /// The name, normalised to lower-case snake_case (runs of characters
    /// other than letters and digits become `_`): it needs a letter or digit,
    /// and at most 128 bytes once normalised.
    #[schema(
        required = true,
        nullable = false,
        max_length = 128,
        pattern = "[^\\W_]"
    )]
    name: Option<String>,
    /// The text (not blank, no NUL).
    #[schema(
        required = true,
        nullable = false,
        pattern = "^[^\\x00]*[^\\x00\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\
                   \\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000][^\\x00]*$"
    )]
    content: Option<String>,
    /// When the memory is relevant (not blank, no NUL); whitespace runs become
    /// one space and it is cut to 512 characters.
    #[schema(
        required = true,
        nullable = false,
        pattern = "^[^\\x00]*[^\\x00\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\
                   \\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000][^\\x00]*$"
    )]
    description: Option<String>,
    /// The type (default `general` for a new memory; an update keeps it).
    #[serde(rename = "type")]
    memory_type: Option<MemoryType>,
    /// `scope` and `scope_id`.
    #[serde(flatten)]
    placement: Placement,
}

/// Whitespace runs as one space, cut to 512 characters.
fn one_line(text: Option<String>) -> String {
    let joined = text
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    joined.chars().take(512).collect()
}

/// Storage's refusal as its own words (400); the rest as `crate::error` maps it.
fn save_error(e: StorageError) -> ApiError {
    match e {
        StorageError::InvalidInput(m) => bad_request(m),
        other => other.into(),
    }
}

#[utoipa::path(
    post,
    path = "/v1/api/memories",
    tag = "memories",
    summary = "Save (upsert) a memory",
    request_body = SaveBody,
    responses(
        (status = 200, description = "The memory as saved", body = MemorySummary),
        BadInput,
        Missing,
        TooLarge,
        Guarded,
    )
)]
pub(crate) async fn save(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    body: axum::body::Bytes,
) -> Result<Json<MemorySummary>, ApiError> {
    let b: SaveBody = parse(&body)?;
    let name = normalise_name(b.name.as_deref().unwrap_or_default());
    if name.is_empty() {
        return Err(bad_request("name is required"));
    }
    let content = b
        .content
        .filter(|c| !is_blank(c))
        .ok_or_else(|| bad_request("content is required"))?;
    if b.description.as_deref().is_none_or(is_blank) {
        return Err(bad_request("description is required"));
    }
    let description = one_line(b.description);
    let (scope, given) = b.placement.parts();
    let scope_id = match (scope, &given) {
        (MemoryScope::Workstream, Some(g)) if !g.is_empty() => scope_id(&state, &id, scope, given)
            .await?
            .ok_or_else(ApiError::workstream_not_found)?,
        _ => scope_id(&state, &id, scope, given)
            .await?
            .ok_or_else(|| bad_request("scope_id is required for workstream scope"))?,
    };
    let m = state
        .db
        .save_memory(&NewMemory {
            name,
            description,
            memory_type: b.memory_type.map(|t| t.as_str().to_string()),
            scope: Some(scope.as_str().to_string()),
            scope_id,
            content,
        })
        .await
        .map_err(save_error)?;
    Ok(Json(MemorySummary::from(&m)))
}

/// Body of `POST /api/memories/search`.
#[derive(Deserialize, ToSchema)]
pub(crate) struct SearchBody {
    /// Words to look for in name, description and content (not blank).
    #[schema(
        required = true,
        nullable = false,
        pattern = "[^\\t\\n\\x0b\\x0c\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\
                   \\u2028\\u2029\\u202f\\u205f\\u3000]"
    )]
    query: Option<String>,
    /// Most results (default 20; clamped to 1–200).
    #[serde(default, deserialize_with = "super::integral")]
    #[schema(minimum = -9223372036854775808i64, maximum = 9223372036854775807i64)]
    limit: Option<i64>,
}

#[utoipa::path(
    post,
    path = "/v1/api/memories/search",
    tag = "memories",
    summary = "Search memories",
    request_body = SearchBody,
    responses(
        (status = 200, description = "Matching memories the caller may see", body = MemoryList),
        BadInput,
        TooLarge,
        Guarded,
    )
)]
pub(crate) async fn search(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    body: axum::body::Bytes,
) -> Result<Json<MemoryList>, ApiError> {
    let b: SearchBody = parse(&body)?;
    let query = b
        .query
        .filter(|q| !is_blank(q))
        .ok_or_else(|| bad_request("query is required"))?;
    let rows = state
        .db
        .search_memories(owner(&id), &query, b.limit.unwrap_or(20).clamp(1, 200))
        .await?;
    Ok(MemoryList::of(rows.iter()))
}

/// Which memory of that name: its scope and scope id.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct OneQuery {
    /// The scope (default `global`).
    #[param(inline)]
    scope: Option<MemoryScope>,
    /// The workstream id for `workstream` (without one nothing matches); for
    /// `user`, the caller's own id (a service caller names the user).
    scope_id: Option<String>,
}

/// The scope and scope id a lookup names; `None` when it can match nothing
/// (another user's workstream included).
async fn lookup(
    state: &AppState,
    id: &Identity,
    q: OneQuery,
) -> Result<Option<(MemoryScope, String)>, ApiError> {
    let scope = q.scope.unwrap_or(MemoryScope::Global);
    let sid = scope_id(state, id, scope, q.scope_id).await?;
    // Saved memories never have a NUL in their scope id.
    Ok(sid.filter(|s| !s.contains('\0')).map(|s| (scope, s)))
}

#[utoipa::path(
    get,
    path = "/v1/api/memories/{name}",
    tag = "memories",
    summary = "One memory with content",
    params(
        ("name" = String, Path, description = "Memory name (normalised like on save)"),
        OneQuery,
    ),
    responses(
        (status = 200, description = "The memory (read count + 1)", body = MemoryWithContent),
        BadInput,
        Missing,
        Guarded,
    )
)]
pub(crate) async fn get_one(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(name): Path<String>,
    Query(q): Query<OneQuery>,
) -> Result<Json<MemoryWithContent>, ApiError> {
    let Some((scope, sid)) = lookup(&state, &id, q).await? else {
        return Err(memory_not_found());
    };
    let m = state
        .db
        .get_memory(&normalise_name(&name), scope.as_str(), &sid)
        .await?
        .ok_or_else(memory_not_found)?;
    Ok(Json(MemoryWithContent {
        summary: MemorySummary::from(&m),
        content: m.content,
    }))
}

#[utoipa::path(
    delete,
    path = "/v1/api/memories/{name}",
    tag = "memories",
    summary = "Delete a memory",
    params(
        ("name" = String, Path, description = "Memory name (normalised like on save)"),
        OneQuery,
    ),
    responses(
        (status = 200, description = "Deleted", body = StatusOk),
        BadInput,
        Missing,
        Guarded,
    )
)]
pub(crate) async fn remove(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(name): Path<String>,
    Query(q): Query<OneQuery>,
) -> Result<Json<StatusOk>, ApiError> {
    let Some((scope, sid)) = lookup(&state, &id, q).await? else {
        return Err(memory_not_found());
    };
    if !state
        .db
        .delete_memory(&normalise_name(&name), scope.as_str(), &sid)
        .await?
    {
        return Err(memory_not_found());
    }
    Ok(StatusOk::ok())
}

/// `GET /api/memories/search`: the memory named `search` (the static search
/// route would otherwise answer 405 for it).
#[utoipa::path(
    get,
    path = "/v1/api/memories/search",
    tag = "memories",
    summary = "The memory named `search` (as GET /v1/api/memories/{name})",
    params(OneQuery),
    responses(
        (status = 200, description = "The memory (read count + 1)", body = MemoryWithContent),
        BadInput,
        Missing,
        Guarded,
    )
)]
pub(crate) async fn get_named_search(
    state: State<AppState>,
    id: Extension<Identity>,
    q: Query<OneQuery>,
) -> Result<Json<MemoryWithContent>, ApiError> {
    get_one(state, id, Path("search".into()), q).await
}

/// `DELETE /api/memories/search`: deletes the memory named `search`.
#[utoipa::path(
    delete,
    path = "/v1/api/memories/search",
    tag = "memories",
    summary = "Delete the memory named `search` (as DELETE /v1/api/memories/{name})",
    params(OneQuery),
    responses(
        (status = 200, description = "Deleted", body = StatusOk),
        BadInput,
        Missing,
        Guarded,
    )
)]
pub(crate) async fn remove_named_search(
    state: State<AppState>,
    id: Extension<Identity>,
    q: Query<OneQuery>,
) -> Result<Json<StatusOk>, ApiError> {
    remove(state, id, Path("search".into()), q).await
}
