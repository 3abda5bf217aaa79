//! Skills: `GET /v1/api/skills` (the catalogue, for every signed-in user) and
//! `/v1/api/admin/skills` (create, update, delete, versions; approve scope
//! plus the `admin.skills` permission, audited). Skills from the operator's
//! skill directories are listed but changed on disk, not here.

use super::info_types::{SkillSummary, SkillsBody};
use super::{BadInput, Guarded, Missing, TooLarge, need, node};
use crate::http::{ApiError, AppState, Identity, bad_request, parse};
use crate::plugins::{Actor, PluginStore};
use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;
use turnstone_engine::skills::{SkillLibrary, SkillSource};
use utoipa::ToSchema;

pub(crate) fn library(state: &AppState) -> Result<Arc<SkillLibrary>, ApiError> {
    node(state)?
        .mgr
        .deps
        .skills
        .clone()
        .ok_or_else(|| ApiError::Unavailable("skills are not configured on this node".into()))
}

fn summary(s: &turnstone_engine::skills::SkillInfo, author: Option<&str>) -> SkillSummary {
    SkillSummary {
        name: s.name.clone(),
        category: s.category.clone().unwrap_or_default(),
        description: s.description.clone(),
        tags: s.tags.clone(),
        origin: match s.source {
            SkillSource::File(_) => "file".into(),
            SkillSource::Database => "manual".into(),
        },
        author: author.unwrap_or_default().to_string(),
        version: s.version.to_string(),
    }
}

#[utoipa::path(
    get,
    path = "/v1/api/skills",
    tag = "node",
    summary = "The skills catalogue",
    responses((status = 200, description = "Every skill, by name", body = SkillsBody), Guarded)
)]
pub(crate) async fn list(State(state): State<AppState>) -> Result<Json<SkillsBody>, ApiError> {
    let Ok(lib) = library(&state) else {
        return Ok(Json(SkillsBody { skills: Vec::new() }));
    };
    let cat = lib.catalog().await;
    let authors = match lib.db() {
        Some(db) => db.latest_skills().await?,
        None => Vec::new(),
    };
    let skills = cat
        .list()
        .map(|s| {
            let author = authors
                .iter()
                .find(|r| r.name == s.name && s.source == SkillSource::Database)
                .and_then(|r| r.created_by.as_deref());
            summary(s, author)
        })
        .collect();
    Ok(Json(SkillsBody { skills }))
}

/// A skill with everything an administrator sees.
#[derive(Serialize, ToSchema)]
pub(crate) struct SkillDetail {
    /// The listing.
    #[serde(flatten)]
    summary: SkillSummary,
    /// low, medium, high or critical.
    risk_level: String,
    /// Tools offered while it is active (empty: all).
    allowed_tools: Vec<String>,
    /// Tool calls run without asking while it is active.
    auto_approve: bool,
    /// Argument names (`?` marks optional ones).
    arguments: Vec<String>,
    /// The file it comes from (`null` for a database skill).
    #[schema(required = true)]
    path: Option<String>,
}

/// Every skill, and the documents left out of the catalogue.
#[derive(Serialize, ToSchema)]
pub(crate) struct AdminSkills {
    /// By name.
    skills: Vec<SkillDetail>,
    /// Documents that do not parse (file or version: reason).
    problems: Vec<String>,
}

fn detail(s: &turnstone_engine::skills::SkillInfo) -> SkillDetail {
    SkillDetail {
        summary: summary(s, None),
        risk_level: s.risk_level.as_str().into(),
        allowed_tools: s.allowed_tools.clone(),
        auto_approve: s.auto_approve,
        arguments: s
            .arguments
            .iter()
            .map(|a| {
                if a.required && a.default.is_none() {
                    a.name.clone()
                } else {
                    format!("{}?", a.name)
                }
            })
            .collect(),
        path: match &s.source {
            SkillSource::File(p) => Some(p.display().to_string()),
            SkillSource::Database => None,
        },
    }
}

#[utoipa::path(
    get,
    path = "/v1/api/admin/skills",
    tag = "admin",
    summary = "Skills with their details and the documents left out",
    responses((status = 200, description = "The catalogue", body = AdminSkills), Guarded)
)]
pub(crate) async fn admin_list(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
) -> Result<Json<AdminSkills>, ApiError> {
    need(&id, "admin.skills")?;
    let lib = library(&state)?;
    lib.invalidate().await;
    let cat = lib.catalog().await;
    Ok(Json(AdminSkills {
        skills: cat.list().map(detail).collect(),
        problems: cat.problems().to_vec(),
    }))
}

/// A `SKILL.md` document.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SkillDocument {
    /// YAML frontmatter (name, description, category, tags, risk_level,
    /// allowed_tools, auto_approve, arguments) between `---` lines, then
    /// the instructions with `{{argument}}` placeholders.
    #[schema(min_length = 1)]
    document: String,
}

fn actor(id: &Identity, addr: Option<Extension<ConnectInfo<SocketAddr>>>) -> Actor {
    Actor {
        user_id: Some(id.user_id.clone()),
        ip: addr.map(|Extension(ConnectInfo(a))| a.ip().to_string()),
        via: "api",
    }
}

async fn save(
    state: &AppState,
    id: &Identity,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    document: &str,
    expect_name: Option<&str>,
) -> Result<SkillDetail, ApiError> {
    need(id, "admin.skills")?;
    let lib = library(state)?;
    let db = lib
        .db()
        .cloned()
        .ok_or_else(|| ApiError::Unavailable("skills are not stored here".into()))?;
    let doc = turnstone_engine::skills::parse(document).map_err(|e| bad_request(e.to_string()))?;
    if let Some(name) = expect_name
        && doc.meta.name != name
    {
        return Err(bad_request(format!(
            "the document names skill {:?}, not {name:?}",
            doc.meta.name
        )));
    }
    let creating = expect_name.is_none();
    if creating && db.get_skill(&doc.meta.name, None).await?.is_some() {
        return Err(ApiError::Conflict(format!(
            "skill {} exists; PUT /v1/api/admin/skills/{} saves a new version",
            doc.meta.name, doc.meta.name
        )));
    }
    if !creating && db.get_skill(&doc.meta.name, None).await?.is_none() {
        return Err(ApiError::NotFound(format!(
            "no stored skill named {}",
            doc.meta.name
        )));
    }
    let info = turnstone_engine::session::save_skill(&lib, &db, document, Some(id.user_id.clone()))
        .await
        .map_err(|e| match e {
            turnstone_runtime::host::agent::SkillsError::Invalid(m) => bad_request(m),
            other => ApiError::Internal(format!("{other:?}")),
        })?;
    PluginStore::new(&db)
        .audit(
            &actor(id, addr),
            if creating {
                "skill.create"
            } else {
                "skill.update"
            },
            &info.name,
            json!({ "version": info.version }),
        )
        .await;
    Ok(detail(&info))
}

#[utoipa::path(
    post,
    path = "/v1/api/admin/skills",
    tag = "admin",
    summary = "Create a skill from a SKILL.md document",
    request_body = SkillDocument,
    responses(
        (status = 201, description = "Saved as version 1", body = SkillDetail),
        BadInput,
        (status = 409, description = "A skill of that name is stored already", body = crate::routes::ErrorBody),
        TooLarge,
        Guarded,
    )
)]
pub(crate) async fn create(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<SkillDetail>), ApiError> {
    let b: SkillDocument = parse(&body)?;
    Ok((
        StatusCode::CREATED,
        Json(save(&state, &id, addr, &b.document, None).await?),
    ))
}

#[utoipa::path(
    put,
    path = "/v1/api/admin/skills/{name}",
    tag = "admin",
    summary = "Save a new version of a stored skill",
    params(("name" = String, Path, description = "Skill name")),
    request_body = SkillDocument,
    responses(
        (status = 200, description = "The new version", body = SkillDetail),
        BadInput,
        Missing,
        TooLarge,
        Guarded,
    )
)]
pub(crate) async fn update(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<SkillDetail>, ApiError> {
    let b: SkillDocument = parse(&body)?;
    Ok(Json(
        save(&state, &id, addr, &b.document, Some(&name)).await?,
    ))
}

/// What a delete removed.
#[derive(Serialize, ToSchema)]
pub(crate) struct SkillDeleted {
    /// Skill name.
    name: String,
    /// Versions removed.
    versions: u64,
}

#[utoipa::path(
    delete,
    path = "/v1/api/admin/skills/{name}",
    tag = "admin",
    summary = "Delete a stored skill and all its versions",
    params(("name" = String, Path, description = "Skill name")),
    responses(
        (status = 200, description = "Deleted", body = SkillDeleted),
        Missing,
        Guarded,
    )
)]
pub(crate) async fn delete(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    addr: Option<Extension<ConnectInfo<SocketAddr>>>,
    Path(name): Path<String>,
) -> Result<Json<SkillDeleted>, ApiError> {
    need(&id, "admin.skills")?;
    let lib = library(&state)?;
    let db = lib
        .db()
        .cloned()
        .ok_or_else(|| ApiError::Unavailable("skills are not stored here".into()))?;
    let versions = db.delete_skill(&name).await?;
    if versions == 0 {
        return Err(ApiError::NotFound(format!("no stored skill named {name}")));
    }
    lib.invalidate().await;
    PluginStore::new(&db)
        .audit(
            &actor(&id, addr),
            "skill.delete",
            &name,
            json!({ "versions": versions }),
        )
        .await;
    Ok(Json(SkillDeleted { name, versions }))
}

/// One stored version.
#[derive(Serialize, ToSchema)]
pub(crate) struct SkillVersion {
    /// 1, 2, …
    version: i64,
    /// One-line description.
    description: String,
    /// When it was saved.
    created: String,
    /// Who saved it.
    #[schema(required = true)]
    created_by: Option<String>,
    /// The `SKILL.md` document.
    document: String,
}

/// Every version of a skill, newest first.
#[derive(Serialize, ToSchema)]
pub(crate) struct SkillVersions {
    /// Skill name.
    name: String,
    /// Newest first.
    versions: Vec<SkillVersion>,
}

#[utoipa::path(
    get,
    path = "/v1/api/admin/skills/{name}/versions",
    tag = "admin",
    summary = "Every stored version of a skill",
    params(("name" = String, Path, description = "Skill name")),
    responses(
        (status = 200, description = "Newest first", body = SkillVersions),
        Missing,
        Guarded,
    )
)]
pub(crate) async fn versions(
    State(state): State<AppState>,
    Extension(id): Extension<Identity>,
    Path(name): Path<String>,
) -> Result<Json<SkillVersions>, ApiError> {
    need(&id, "admin.skills")?;
    let lib = library(&state)?;
    let db = lib
        .db()
        .cloned()
        .ok_or_else(|| ApiError::Unavailable("skills are not stored here".into()))?;
    let rows = db.skill_versions(&name).await?;
    if rows.is_empty() {
        return Err(ApiError::NotFound(format!("no stored skill named {name}")));
    }
    Ok(Json(SkillVersions {
        name,
        versions: rows
            .into_iter()
            .map(|r| SkillVersion {
                version: r.version,
                description: r.description,
                created: r.created,
                created_by: r.created_by,
                document: r.content,
            })
            .collect(),
    }))
}
