//! The system text a session puts in front of every model request: the
//! memory index (what the session's user may recall, most relevant first,
//! capped by a budget) and the active skill's instructions. The index is
//! built once per session (and again after a compaction), so the request
//! prefix stays stable for prompt caching.

use super::ChatSession;
use super::agent::{LOCAL_USER, SessionAgent, rank};
use crate::turn::Role;
use std::sync::Arc;
use turnstone_storage::types::{COMPACTION_SOURCE, Memory, MemoryView};

/// Characters the memory index may take.
pub const MEMORY_INDEX_BUDGET: usize = 2_000;
/// Memories considered for the index.
const INDEX_CANDIDATES: i64 = 200;

/// Earlier types first when nothing ranks them: how the user wants to work
/// matters more than references.
fn type_rank(m: &Memory) -> u8 {
    match m.memory_type.as_str() {
        "user" => 0,
        "feedback" => 1,
        "general" => 2,
        _ => 3,
    }
}

/// The index text for `memories`, ranked against `query` (the latest user
/// message) where it matches, by type and recency otherwise; `None` when
/// there is nothing to list.
pub fn memory_index(memories: Vec<Memory>, query: &str, budget: usize) -> Option<String> {
    if memories.is_empty() {
        return None;
    }
    let total = memories.len();
    let ranked = if query.trim().is_empty() {
        Vec::new()
    } else {
        rank(memories.clone(), query, total)
    };
    let mut rest: Vec<Memory> = memories
        .into_iter()
        .filter(|m| !ranked.iter().any(|r| r.memory_id == m.memory_id))
        .collect();
    // Stable: within a type the store's order (newest first) stays.
    rest.sort_by_key(type_rank);
    let mut out = String::from(
        "## Memories\nSaved memories that may be relevant (read one in full with the memory tool):\n",
    );
    let header = out.len();
    let mut listed = 0;
    for m in ranked.iter().chain(rest.iter()) {
        let what = if m.description.is_empty() {
            m.content
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(100)
                .collect()
        } else {
            m.description.clone()
        };
        let line = format!("- {} ({}, {}): {}\n", m.name, m.memory_type, m.scope, what);
        if out.len() + line.len() > budget {
            break;
        }
        out.push_str(&line);
        listed += 1;
    }
    if listed == 0 {
        out.truncate(header);
        return None;
    }
    if listed < total {
        out.push_str(&format!(
            "({} more: search them with the memory tool)\n",
            total - listed
        ));
    }
    Some(out)
}

impl ChatSession {
    /// The user whose memories and history this session reaches.
    fn agent_user(&self) -> Option<String> {
        self.cfg
            .acting_user_id
            .clone()
            .or_else(|| self.agent.local.then(|| LOCAL_USER.to_string()))
    }

    /// The workstream's project, looked up once.
    async fn project_id(&mut self) -> Option<String> {
        if let Some(p) = &self.project {
            return p.clone();
        }
        let p = match &self.store {
            Some((db, ws)) => db
                .get_workstream(ws)
                .await
                .ok()
                .flatten()
                .and_then(|w| w.project_id),
            None => None,
        };
        self.project = Some(p.clone());
        p
    }

    /// The session as this tool batch's agent interfaces see it.
    pub(super) async fn session_agent(&mut self) -> Arc<SessionAgent> {
        let project_id = self.project_id().await;
        Arc::new(SessionAgent {
            db: self.store.as_ref().map(|(db, _)| db.clone()),
            ws_id: self.store.as_ref().map(|(_, ws)| ws.clone()),
            user_id: self.agent_user(),
            project_id,
            workspace: self.cfg.workspace.clone(),
            ctx: self.agent.clone(),
            slot: self.skill.clone(),
            context_id: self.context_id(),
            tasks: self.task_spawner(),
            events: self.events.clone(),
        })
    }

    /// What the model has in its context: the session id, and after a
    /// compaction which summary the context starts from (the summary's row,
    /// stable across a resume; a count without storage).
    pub(super) fn context_id(&self) -> String {
        let base = &self.cfg.session_id;
        match self.turns.first() {
            Some(t) if t.meta.source.as_deref() == Some(COMPACTION_SOURCE) => {
                match self.row_ids.first().copied().filter(|id| *id > 0) {
                    Some(row) => format!("{base}@{row}"),
                    None => format!("{base}@c{}", self.compactions),
                }
            }
            _ => base.clone(),
        }
    }

    /// The memory index, built once (again after a compaction).
    async fn memory_index(&mut self) -> Option<String> {
        if let Some(cached) = &self.memory_index {
            return cached.clone();
        }
        let index = match self.store.clone() {
            Some((db, ws)) => {
                let view = MemoryView {
                    user_id: self.agent_user(),
                    ws_id: Some(ws),
                    project_id: self.project_id().await,
                };
                let query = self
                    .turns
                    .iter()
                    .rev()
                    .find(|t| t.role == Role::User)
                    .map(|t| t.text_content())
                    .unwrap_or_default();
                match db
                    .list_visible_memories(&view, None, None, INDEX_CANDIDATES)
                    .await
                {
                    Ok(rows) => memory_index(rows, &query, MEMORY_INDEX_BUDGET),
                    Err(e) => {
                        tracing::warn!("memory index unavailable: {e}");
                        None
                    }
                }
            }
            None => None,
        };
        self.memory_index = Some(index.clone());
        index
    }

    /// The system text for the next request: the memory index and the
    /// active skill (`None`: nothing to add).
    pub(super) async fn system_text(&mut self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some(brief) = &self.cfg.instructions {
            parts.push(brief.clone());
        }
        // Memories are the workstream's; a sub-agent works from its brief.
        if self.depth() == 0
            && let Some(index) = self.memory_index().await
        {
            parts.push(index);
        }
        if let Some(skill) = self.skill.get() {
            parts.push(skill.system_text());
        }
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(name: &str, ty: &str, desc: &str) -> Memory {
        Memory {
            memory_id: name.into(),
            name: name.into(),
            description: desc.into(),
            memory_type: ty.into(),
            scope: "global".into(),
            scope_id: String::new(),
            content: format!("{name} content"),
            created: String::new(),
            updated: String::new(),
            last_accessed: None,
            access_count: 0,
        }
    }

    #[test]
    fn relevant_memories_come_first_then_by_type_within_the_budget() {
        let rows = vec![
            mem("ref_a", "reference", "API docs location"),
            mem("deploy_steps", "general", "how to deploy to production"),
            mem("tone", "user", "prefers terse answers"),
            mem("style", "feedback", "no emojis in commits"),
        ];
        let text = memory_index(rows.clone(), "deploy the service", 2_000).unwrap();
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("- "))
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        assert_eq!(names, ["deploy_steps", "tone", "style", "ref_a"]);
        let small = memory_index(rows, "", 200).unwrap();
        assert!(small.len() <= 200 + 60, "{small}");
        assert!(small.contains("more: search them"), "{small}");
        assert!(small.contains("- tone (user, global)"), "{small}");
        assert_eq!(memory_index(Vec::new(), "x", 2_000), None);
        assert_eq!(memory_index(vec![mem("a", "user", "d")], "", 10), None);
    }
}
