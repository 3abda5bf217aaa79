//! The calling session as the agent interfaces of WIT 0.2.0 see it
//! ([`turnstone_runtime::SessionHost`]): who it is, the memories and
//! conversations of its user, and the skills it may load. Every scope is the
//! session's own: a plugin never names another user, workstream or project.

use super::skill::{ActiveSkill, SkillSlot};
use crate::skills::{SkillLibrary, SkillSource};
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use turnstone_mcp::search::ToolIndex;
use turnstone_runtime::SessionHost;
use turnstone_runtime::host::agent::{
    HistoryError, Hit, Memory, MemoryError, MemoryType, SaveRequest, Scope, Session, SessionKind,
    Skill, SkillArgument, SkillInfo, SkillsError,
};
use turnstone_storage::Storage;
use turnstone_storage::types::{MemoryView, NewMemory, NewSkill, SearchFilter};

/// The user id of a single-user local database (the terminal): its user
/// scope, and the owner of every workstream in it.
pub const LOCAL_USER: &str = "local";

/// Candidates a memory search ranks (the store filters, BM25 orders).
const SEARCH_CANDIDATES: i64 = 200;

/// What the agent interfaces of a session reach, set by the front end.
#[derive(Clone, Default)]
pub struct AgentContext {
    /// The skills catalogue (none: skills are unavailable).
    pub skills: Option<Arc<SkillLibrary>>,
    /// The alias answering in the session.
    pub model_alias: Option<String>,
    /// A single-user local database (the terminal): the history of every
    /// workstream in it is the user's, and the user scope is [`LOCAL_USER`].
    pub local: bool,
    /// What each sub-agent may spend (`[agents]`).
    pub task_budget: super::Budget,
    /// Wakes the node's watch scheduler when a watch is created (none:
    /// watches are not available).
    pub watch_wake: Option<Arc<tokio::sync::Notify>>,
    /// A turn that ran at least this long sends a completion notification
    /// (`[notify] complete_after_secs`; none: never).
    pub notify_after: Option<std::time::Duration>,
    /// Where previews are written as files (the terminal, which has no
    /// pane); none: they are served at their URL.
    pub preview_dir: Option<PathBuf>,
    /// Delivers notifications to chat channel targets (none: no channel
    /// adapters on this node).
    pub channels: Option<Arc<dyn ChannelDelivery>>,
}

/// Posts a notification into a chat channel through the node's channel
/// adapters (the server's channel hub).
pub trait ChannelDelivery: Send + Sync {
    /// Posts `text` to `channel_id` through the adapter `channel_type`
    /// names; returns how it went (the platform message id).
    fn deliver(
        &self,
        channel_type: String,
        channel_id: String,
        text: String,
    ) -> BoxFuture<'static, Result<String, String>>;
}

/// One tool batch's view of the session.
pub(super) struct SessionAgent {
    pub(super) db: Option<Storage>,
    pub(super) ws_id: Option<String>,
    pub(super) user_id: Option<String>,
    pub(super) project_id: Option<String>,
    pub(super) workspace: PathBuf,
    pub(super) ctx: AgentContext,
    pub(super) slot: SkillSlot,
    /// See [`super::ChatSession::context_id`].
    pub(super) context_id: String,
    /// Starts sub-agents for this batch's calls.
    pub(super) tasks: Arc<super::task::TaskSpawner>,
    /// The session's stream (watch changes are shown on it).
    pub(super) events: crate::events::EventSink,
}

fn mem_err(e: turnstone_storage::StorageError) -> MemoryError {
    match e {
        turnstone_storage::StorageError::InvalidInput(m) => MemoryError::Invalid(m),
        turnstone_storage::StorageError::TooLarge { .. } => MemoryError::Invalid(e.to_string()),
        other => MemoryError::Unavailable(other.to_string()),
    }
}

fn scope_str(s: Scope) -> &'static str {
    match s {
        Scope::Global => "global",
        Scope::Workstream => "workstream",
        Scope::User => "user",
        Scope::Project => "project",
    }
}

fn type_str(t: MemoryType) -> &'static str {
    match t {
        MemoryType::User => "user",
        MemoryType::General => "general",
        MemoryType::Feedback => "feedback",
        MemoryType::Reference => "reference",
    }
}

/// A stored memory as the interface returns it.
pub(super) fn to_wit(m: &turnstone_storage::types::Memory) -> Memory {
    Memory {
        name: m.name.clone(),
        description: m.description.clone(),
        kind: match m.memory_type.as_str() {
            "user" => MemoryType::User,
            "feedback" => MemoryType::Feedback,
            "reference" => MemoryType::Reference,
            _ => MemoryType::General,
        },
        scope: match m.scope.as_str() {
            "workstream" => Scope::Workstream,
            "user" => Scope::User,
            "project" => Scope::Project,
            _ => Scope::Global,
        },
        content: m.content.clone(),
        created: m.created.clone(),
        updated: m.updated.clone(),
        access_count: u64::try_from(m.access_count).unwrap_or(0),
    }
}

/// The best `limit` of `found` for `query` (BM25 over name, description and
/// content); those without any scoring word keep their order after.
pub(super) fn rank(
    found: Vec<turnstone_storage::types::Memory>,
    query: &str,
    limit: usize,
) -> Vec<turnstone_storage::types::Memory> {
    let texts: Vec<(String, String)> = found
        .iter()
        .map(|m| {
            (
                m.memory_id.clone(),
                format!("{} {} {}", m.name, m.description, m.content),
            )
        })
        .collect();
    let index = ToolIndex::new(texts.iter().map(|(a, b)| (a.as_str(), b.as_str())));
    let order: Vec<String> = index
        .search(query, found.len())
        .into_iter()
        .map(|h| h.name)
        .collect();
    let mut by_id: BTreeMap<String, turnstone_storage::types::Memory> = found
        .into_iter()
        .map(|m| (m.memory_id.clone(), m))
        .collect();
    order
        .iter()
        .filter_map(|id| by_id.remove(id))
        .take(limit)
        .collect()
}

/// A catalogue skill as the interface lists it.
pub(super) fn skill_to_wit(s: &crate::skills::SkillInfo) -> SkillInfo {
    SkillInfo {
        name: s.name.clone(),
        description: s.description.clone(),
        category: s.category.clone(),
        tags: s.tags.clone(),
        risk_level: s.risk_level.as_str().to_string(),
        version: s.version,
        source: s.source.as_str().to_string(),
        allowed_tools: s.allowed_tools.clone(),
        auto_approve: s.auto_approve,
        arguments: s
            .arguments
            .iter()
            .map(|a| SkillArgument {
                name: a.name.clone(),
                description: a.description.clone(),
                required: a.required,
                default: a.default.clone(),
            })
            .collect(),
    }
}

impl SessionAgent {
    /// The memories this session may see.
    fn view(&self) -> MemoryView {
        MemoryView {
            user_id: self.user_id.clone(),
            ws_id: self.ws_id.clone(),
            project_id: self.project_id.clone(),
        }
    }

    /// The scope id of `scope` for this session, or why it has none.
    fn scope_id(&self, scope: Scope) -> Result<String, MemoryError> {
        let missing = |what: &str| {
            MemoryError::Invalid(format!(
                "this session has no {what}, so it has no {} memories",
                scope_str(scope)
            ))
        };
        match scope {
            Scope::Global => Ok(String::new()),
            Scope::Workstream => self.ws_id.clone().ok_or_else(|| missing("workstream")),
            Scope::User => self.user_id.clone().ok_or_else(|| missing("user")),
            Scope::Project => self.project_id.clone().ok_or_else(|| missing("project")),
        }
    }

    fn db(&self) -> Result<Storage, String> {
        self.db
            .clone()
            .ok_or_else(|| "this session keeps nothing (it has no database)".to_string())
    }

    fn library(&self) -> Result<Arc<SkillLibrary>, SkillsError> {
        self.ctx
            .skills
            .clone()
            .ok_or_else(|| SkillsError::Unavailable("no skills are configured here".into()))
    }
}

impl SessionHost for SessionAgent {
    fn info(&self) -> Session {
        Session {
            workstream_id: self.ws_id.clone(),
            user_id: self.user_id.clone(),
            model_alias: self.ctx.model_alias.clone(),
            workspace: Some(self.workspace.display().to_string()),
            project_id: self.project_id.clone(),
            kind: SessionKind::Interactive,
            context_id: self.context_id.clone(),
        }
    }

    fn memory_save(&self, req: SaveRequest) -> BoxFuture<'static, Result<Memory, MemoryError>> {
        let target = self.scope_id(req.scope).map(|id| (id, self.db()));
        Box::pin(async move {
            let (scope_id, db) = target?;
            let db = db.map_err(MemoryError::Unavailable)?;
            let m = db
                .save_memory(&NewMemory {
                    name: req.name,
                    description: req.description,
                    memory_type: req.kind.map(|k| type_str(k).to_string()),
                    scope: Some(scope_str(req.scope).to_string()),
                    scope_id,
                    content: req.content,
                })
                .await
                .map_err(mem_err)?;
            Ok(to_wit(&m))
        })
    }

    fn memory_get(
        &self,
        name: String,
        scope: Scope,
    ) -> BoxFuture<'static, Result<Option<Memory>, MemoryError>> {
        let target = self.scope_id(scope).map(|id| (id, self.db()));
        Box::pin(async move {
            let (scope_id, db) = target?;
            let db = db.map_err(MemoryError::Unavailable)?;
            Ok(db
                .get_memory(&name, scope_str(scope), &scope_id)
                .await
                .map_err(mem_err)?
                .as_ref()
                .map(to_wit))
        })
    }

    fn memory_search(
        &self,
        query: String,
        scope: Option<Scope>,
        limit: u32,
    ) -> BoxFuture<'static, Result<Vec<Memory>, MemoryError>> {
        let (db, view) = (self.db(), self.view());
        Box::pin(async move {
            let db = db.map_err(MemoryError::Unavailable)?;
            let found = db
                .search_visible_memories(&query, &view, scope.map(scope_str), SEARCH_CANDIDATES)
                .await
                .map_err(mem_err)?;
            Ok(rank(found, &query, limit.clamp(1, 1000) as usize)
                .iter()
                .map(to_wit)
                .collect())
        })
    }

    fn memory_list(
        &self,
        scope: Option<Scope>,
        kind: Option<MemoryType>,
        limit: u32,
    ) -> BoxFuture<'static, Result<Vec<Memory>, MemoryError>> {
        let (db, view) = (self.db(), self.view());
        Box::pin(async move {
            let db = db.map_err(MemoryError::Unavailable)?;
            let found = db
                .list_visible_memories(
                    &view,
                    scope.map(scope_str),
                    kind.map(type_str),
                    i64::from(limit.clamp(1, 1000)),
                )
                .await
                .map_err(mem_err)?;
            Ok(found.iter().map(to_wit).collect())
        })
    }

    fn memory_delete(
        &self,
        name: String,
        scope: Scope,
    ) -> BoxFuture<'static, Result<bool, MemoryError>> {
        let target = self.scope_id(scope).map(|id| (id, self.db()));
        Box::pin(async move {
            let (scope_id, db) = target?;
            let db = db.map_err(MemoryError::Unavailable)?;
            db.delete_memory(&name, scope_str(scope), &scope_id)
                .await
                .map_err(mem_err)
        })
    }

    fn history_search(
        &self,
        query: String,
        limit: u32,
        offset: u32,
    ) -> BoxFuture<'static, Result<Vec<Hit>, HistoryError>> {
        // Only the caller's own conversations: a server session always has a
        // user; the terminal's local database is one user's.
        let owner = match (&self.user_id, self.ctx.local) {
            (_, true) => Ok(None),
            (Some(u), false) => Ok(Some(u.clone())),
            (None, false) => Err(HistoryError::Unavailable(
                "this session acts for no user, so it has no history".into(),
            )),
        };
        let db = self.db();
        Box::pin(async move {
            let owner = owner?;
            let db = db.map_err(HistoryError::Unavailable)?;
            if query.trim().is_empty() {
                return Err(HistoryError::Invalid("the query is empty".into()));
            }
            let hits = db
                .search_history(
                    &query,
                    &SearchFilter {
                        ws_id: None,
                        user_id: owner,
                        limit: Some(i64::from(limit.clamp(1, 1000))),
                        offset: Some(i64::from(offset)),
                    },
                )
                .await
                .map_err(|e| match e {
                    turnstone_storage::StorageError::InvalidInput(m) => HistoryError::Invalid(m),
                    other => HistoryError::Unavailable(other.to_string()),
                })?;
            Ok(hits
                .into_iter()
                .map(|h| Hit {
                    workstream_id: h.ws_id,
                    workstream_name: h.ws_name,
                    role: h.role.as_str().to_string(),
                    tool_name: h.tool_name,
                    snippet: h.message,
                    timestamp: h.timestamp,
                })
                .collect())
        })
    }

    fn skills_list(&self) -> BoxFuture<'static, Result<Vec<SkillInfo>, SkillsError>> {
        let lib = self.library();
        Box::pin(async move {
            let cat = lib?.catalog().await;
            Ok(cat.list().map(skill_to_wit).collect())
        })
    }

    fn skills_search(
        &self,
        query: String,
        limit: u32,
    ) -> BoxFuture<'static, Result<Vec<SkillInfo>, SkillsError>> {
        let lib = self.library();
        Box::pin(async move {
            let cat = lib?.catalog().await;
            Ok(cat
                .search(&query, limit.clamp(1, 50) as usize)
                .into_iter()
                .map(skill_to_wit)
                .collect())
        })
    }

    fn skills_get(&self, name: String) -> BoxFuture<'static, Result<Option<Skill>, SkillsError>> {
        let lib = self.library();
        Box::pin(async move {
            let cat = lib?.catalog().await;
            Ok(cat.get(&name).map(|s| Skill {
                info: skill_to_wit(&s.info),
                content: s.doc.body.clone(),
            }))
        })
    }

    fn skills_activate(
        &self,
        name: String,
        arguments: Vec<(String, String)>,
    ) -> BoxFuture<'static, Result<SkillInfo, SkillsError>> {
        let lib = self.library();
        let slot = self.slot.clone();
        let vars = self.vars();
        let persist = self.db.clone().zip(self.ws_id.clone());
        Box::pin(async move {
            let lib = lib?;
            let args: BTreeMap<String, String> = arguments.into_iter().collect();
            let active = ActiveSkill::render(&lib, &name, &args, &vars)
                .await
                .map_err(|e| SkillsError::Invalid(e.to_string()))?;
            let info = skill_to_wit(&active.info);
            if let Some((db, ws)) = persist {
                active.persist(&db, &ws).await;
            }
            slot.set(Some(active));
            Ok(info)
        })
    }

    fn skills_save(&self, document: String) -> BoxFuture<'static, Result<SkillInfo, SkillsError>> {
        let lib = self.library();
        let db = self.db();
        let by = self.user_id.clone();
        Box::pin(async move {
            let lib = lib?;
            let db = db.map_err(SkillsError::Unavailable)?;
            check_tool_save(&lib, &db, &document, by.as_deref()).await?;
            let info = save_skill(&lib, &db, &document, by).await?;
            Ok(skill_to_wit(&info))
        })
    }

    fn run_task(
        &self,
        call_id: String,
        request: turnstone_runtime::host::work::TaskRequest,
    ) -> BoxFuture<
        'static,
        Result<
            turnstone_runtime::host::work::TaskResult,
            turnstone_runtime::host::work::AgentError,
        >,
    > {
        Box::pin(self.tasks.clone().run(call_id, request))
    }

    fn watch_create(
        &self,
        plugin: String,
        spec: turnstone_runtime::host::work::WatchSpec,
    ) -> BoxFuture<'static, Result<WitWatch, WatchError>> {
        let target = self.watch_target();
        let events = self.events.clone();
        Box::pin(async move {
            let (db, ws, wake) = target?;
            let w = crate::watch::create(&db, &ws, &plugin, spec).await?;
            events.emit(turnstone_protocol::Event::WatchChanged(
                turnstone_protocol::WatchChanged {
                    watch: crate::watch::info(&w),
                },
            ));
            wake.notify_one();
            Ok(crate::watch::to_wit(&w))
        })
    }

    fn notify_targets(
        &self,
    ) -> BoxFuture<'static, Result<Vec<turnstone_runtime::host::work::Target>, NotifyError>> {
        self.notify_list()
    }

    fn notify_deliver(
        &self,
        target: String,
        notification: turnstone_runtime::host::work::Notification,
    ) -> BoxFuture<'static, Result<String, NotifyError>> {
        let list = self.notify_list();
        let channels = self.ctx.channels.clone();
        Box::pin(async move {
            let Some(channels) = channels else {
                return Err(NotifyError::Unavailable(format!(
                    "target {target:?} is a chat channel, and no channel adapter runs on this node"
                )));
            };
            let t = list
                .await?
                .into_iter()
                .find(|t| t.name == target)
                .ok_or_else(|| {
                    NotifyError::Unavailable(format!("no notification target named {target:?}"))
                })?;
            let (Some(kind), Some(id)) = (t.channel_type, t.channel_id) else {
                return Err(NotifyError::Unavailable(format!(
                    "target {target:?} has no channel_type and channel_id"
                )));
            };
            let text = match &notification.title {
                Some(title) => format!("**{title}**\n{}", notification.message),
                None => notification.message.clone(),
            };
            channels
                .deliver(kind.clone(), id, text)
                .await
                .map(|mid| format!("posted to {kind} as message {mid}"))
                .map_err(NotifyError::Unavailable)
        })
    }

    fn preview_attachment(
        &self,
        id: String,
    ) -> BoxFuture<
        'static,
        Result<
            turnstone_runtime::host::work::AttachmentData,
            turnstone_runtime::host::work::PreviewError,
        >,
    > {
        self.attachment_for_preview(id)
    }

    fn preview_open(
        &self,
        call_id: String,
        content: turnstone_runtime::host::work::Content,
    ) -> BoxFuture<
        'static,
        Result<turnstone_runtime::host::work::Opened, turnstone_runtime::host::work::PreviewError>,
    > {
        self.open_preview(call_id, content)
    }

    fn watch_list(&self) -> BoxFuture<'static, Result<Vec<WitWatch>, WatchError>> {
        let target = self.watch_target();
        Box::pin(async move {
            let (db, ws, _) = target?;
            Ok(crate::watch::list(&db, &ws)
                .await?
                .iter()
                .map(crate::watch::to_wit)
                .collect())
        })
    }

    fn watch_cancel(&self, name_or_id: String) -> BoxFuture<'static, Result<WitWatch, WatchError>> {
        let target = self.watch_target();
        let events = self.events.clone();
        Box::pin(async move {
            let (db, ws, _) = target?;
            let w = crate::watch::cancel(&db, &ws, &name_or_id).await?;
            events.emit(turnstone_protocol::Event::WatchChanged(
                turnstone_protocol::WatchChanged {
                    watch: crate::watch::info(&w),
                },
            ));
            Ok(crate::watch::to_wit(&w))
        })
    }
}

impl SessionAgent {
    fn notify_list(
        &self,
    ) -> BoxFuture<'static, Result<Vec<turnstone_runtime::host::work::Target>, NotifyError>> {
        use turnstone_runtime::host::work::{Target, TargetKind};
        let db = self.db.clone();
        let (user, ws) = (self.user_id.clone(), self.ws_id.clone());
        Box::pin(async move {
            let db = db.ok_or_else(|| {
                NotifyError::Unavailable("this session keeps no notification targets".into())
            })?;
            let rows = db
                .list_notify_targets(user.as_deref(), ws.as_deref())
                .await
                .map_err(|e| NotifyError::Unavailable(e.to_string()))?;
            Ok(rows
                .into_iter()
                .map(|t| Target {
                    scope: if t.ws_id.is_some() {
                        "workstream"
                    } else {
                        "user"
                    }
                    .into(),
                    kind: if t.kind == "channel" {
                        TargetKind::Channel
                    } else {
                        TargetKind::Webhook
                    },
                    name: t.name,
                    url: t.url,
                    secret: t.secret,
                    channel_type: t.channel_type,
                    channel_id: t.channel_id,
                })
                .collect())
        })
    }
}

use turnstone_runtime::host::work::NotifyError;

type WitWatch = turnstone_runtime::host::work::Watch;
/// Where a session's watches live: the store, the workstream, the scheduler to wake.
type WatchTarget = (Storage, String, Arc<tokio::sync::Notify>);
use turnstone_runtime::host::work::WatchError;

impl SessionAgent {
    /// The store, workstream and scheduler a watch of this session uses.
    fn watch_target(&self) -> Result<WatchTarget, WatchError> {
        let wake = self.ctx.watch_wake.clone().ok_or_else(|| {
            WatchError::Unavailable(
                "watches are not available here (no watch scheduler runs)".into(),
            )
        })?;
        let db = self.db.clone().ok_or_else(|| {
            WatchError::Unavailable("this session keeps no history to watch from".into())
        })?;
        let ws = self
            .ws_id
            .clone()
            .ok_or_else(|| WatchError::Unavailable("this session has no workstream".into()))?;
        Ok((db, ws, wake))
    }
}

impl SessionAgent {
    /// Placeholders every skill body may use.
    fn vars(&self) -> BTreeMap<&'static str, String> {
        let mut v = BTreeMap::new();
        if let Some(m) = &self.ctx.model_alias {
            v.insert("model", m.clone());
        }
        if let Some(w) = &self.ws_id {
            v.insert("ws_id", w.clone());
        }
        v.insert("workspace", self.workspace.display().to_string());
        v
    }
}

/// Saves `document` as the next version of its skill (parsed first, so a
/// broken document never reaches the catalogue); returns it as listed.
/// What a tool may save: a new skill, or a new version of one the same
/// user saved. The operator's skill files and other people's skills are
/// changed by administrators (the admin API), not by a model.
async fn check_tool_save(
    lib: &SkillLibrary,
    db: &Storage,
    document: &str,
    by: Option<&str>,
) -> Result<(), SkillsError> {
    let doc = crate::skills::parse(document).map_err(|e| SkillsError::Invalid(e.to_string()))?;
    let name = &doc.meta.name;
    if let Some(existing) = lib.catalog().await.get(name)
        && matches!(existing.info.source, SkillSource::File(_))
    {
        return Err(SkillsError::Invalid(format!(
            "skill {name} comes from the operator's skill files; a tool cannot replace it"
        )));
    }
    let stored = db
        .get_skill(name, None)
        .await
        .map_err(|e| SkillsError::Unavailable(e.to_string()))?;
    if let Some(rec) = stored
        && rec.created_by.as_deref() != by
    {
        return Err(SkillsError::Invalid(format!(
            "skill {name} was saved by someone else; an administrator can update it (PUT /v1/api/admin/skills/{name})"
        )));
    }
    Ok(())
}

pub async fn save_skill(
    lib: &SkillLibrary,
    db: &Storage,
    document: &str,
    created_by: Option<String>,
) -> Result<crate::skills::SkillInfo, SkillsError> {
    let doc = crate::skills::parse(document).map_err(|e| SkillsError::Invalid(e.to_string()))?;
    let rec = db
        .save_skill(&NewSkill {
            name: doc.meta.name.clone(),
            description: doc.meta.description.clone(),
            content: document.to_string(),
            created_by,
        })
        .await
        .map_err(|e| match e {
            turnstone_storage::StorageError::InvalidInput(m) => SkillsError::Invalid(m),
            other => SkillsError::Unavailable(other.to_string()),
        })?;
    lib.invalidate().await;
    let mut info = crate::skills::Skill::from_doc(doc, 1, SkillSource::Database).info;
    info.version = u32::try_from(rec.version).unwrap_or(u32::MAX);
    Ok(info)
}
