//! `/skill` and `/memory`: the skills catalogue and the memories this
//! workstream can see, from the same stores the `skills` and `memory` tools
//! use; `/watches` and `/agents`: the work this workstream scheduled and
//! delegated.

use super::Repl;
use super::commands::MemoryCommand;
use turnstone_engine::runner::Ack;
use turnstone_engine::session::{LOCAL_USER, SKILL_KEY, SkillChoice};
use turnstone_engine::skills::{SkillCommand, bind_arguments, parse_command};
use turnstone_protocol::Op;
use turnstone_storage::types::{Memory, MemoryView};

/// How many memories `/memory` lists.
const LIST_LIMIT: i64 = 50;

impl Repl {
    /// `/watches [all]`.
    pub(super) async fn watches_command(&mut self, all: bool) {
        let ws_id = self.slots[self.fg].ws_id.clone();
        let rows = if all {
            self.app
                .storage
                .list_watches(&ws_id, false)
                .await
                .map_err(|e| e.to_string())
        } else {
            turnstone_engine::watch::list(&self.app.storage, &ws_id)
                .await
                .map_err(|e| e.to_string())
        };
        match rows {
            Ok(rows) if rows.is_empty() => self.info("No watches here."),
            Ok(rows) => {
                let lines: Vec<String> = rows
                    .iter()
                    .map(|w| {
                        format!(
                            "{} · {} · every {}s · {}/{} polls · {}",
                            w.name, w.state, w.interval_secs, w.poll_count, w.max_polls, w.command
                        )
                    })
                    .collect();
                self.console.print_lines(&lines);
            }
            Err(e) => self.error(&e),
        }
    }

    /// `/watches cancel NAME`.
    pub(super) async fn cancel_watch_command(&mut self, name: &str) {
        let ws_id = self.slots[self.fg].ws_id.clone();
        match turnstone_engine::watch::cancel(&self.app.storage, &ws_id, name).await {
            Ok(w) => self.info(&format!("cancelled watch {}", w.name)),
            Err(e) => self.error(&e.to_string()),
        }
    }

    /// `/agents`: the sub-agents of this workstream.
    pub(super) async fn agents_command(&mut self) {
        let ws_id = self.slots[self.fg].ws_id.clone();
        match self.app.storage.list_children(&ws_id).await {
            Ok(rows) if rows.is_empty() => self.info("No sub-agents ran here."),
            Ok(rows) => {
                let lines: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        format!(
                            "{} · {} · {} · {}",
                            &r.ws_id[..8.min(r.ws_id.len())],
                            r.state.as_str(),
                            r.updated,
                            r.name
                        )
                    })
                    .collect();
                self.console.print_lines(&lines);
                self.info("/resume <id> opens a transcript");
            }
            Err(e) => self.error(&e.to_string()),
        }
    }

    /// `/skill …`: list, activate or drop.
    pub(super) async fn skill_command(&mut self, arg: &str) {
        match parse_command(arg) {
            Ok(SkillCommand::List) => self.list_skills().await,
            Ok(_) => {
                if let Err(e) = self.use_skill(arg).await {
                    self.error(&e);
                }
            }
            Err(e) => self.error(&e),
        }
    }

    /// Activates (or with `off` drops) a skill in the foreground workstream.
    pub(super) async fn use_skill(&mut self, arg: &str) -> Result<(), String> {
        if self.slots[self.fg].busy() {
            return Err("/skill needs this workstream to be idle".into());
        }
        let op = match parse_command(arg)? {
            SkillCommand::List => return Err("name a skill (see /skill)".into()),
            SkillCommand::Off => Op::UseSkill {
                name: None,
                arguments: Default::default(),
            },
            SkillCommand::Use {
                name,
                positional,
                named,
            } => {
                let catalog = self.app.skills.catalog().await;
                let arguments = bind_arguments(&catalog, &name, positional, named)?;
                Op::UseSkill {
                    name: Some(name),
                    arguments,
                }
            }
        };
        match self.slots[self.fg].submit(op).await {
            Ok(Ack::SkillSet { skill: Some(info) }) => {
                let tools = if info.allowed_tools.is_empty() {
                    "all tools".to_string()
                } else {
                    format!("tools: {}", info.allowed_tools.join(", "))
                };
                self.info(&format!(
                    "skill {} v{} is active ({tools}{})",
                    info.name,
                    info.version,
                    if info.auto_approve {
                        "; its tool calls run without asking"
                    } else {
                        ""
                    }
                ));
                Ok(())
            }
            Ok(Ack::SkillSet { skill: None }) => {
                self.info("no skill is active now");
                Ok(())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    async fn list_skills(&self) {
        let catalog = self.app.skills.catalog().await;
        // The activation recorded with the workstream is the session's own.
        let active = self
            .app
            .storage
            .get_config(&self.slots[self.fg].ws_id, SKILL_KEY)
            .await
            .ok()
            .flatten()
            .and_then(|s| serde_json::from_str::<SkillChoice>(&s).ok())
            .map(|c| c.name);
        let mut lines = Vec::new();
        for s in catalog.list() {
            let mark = if active.as_deref() == Some(s.name.as_str()) {
                "*"
            } else {
                " "
            };
            let args: Vec<String> = s
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        a.name.clone()
                    } else {
                        format!("[{}]", a.name)
                    }
                })
                .collect();
            lines.push(format!(
                " {mark} {:<20} v{:<3} {:<8} {}{}",
                s.name,
                s.version,
                s.source.as_str(),
                s.description,
                if args.is_empty() {
                    String::new()
                } else {
                    format!("  (args: {})", args.join(" "))
                }
            ));
        }
        if lines.is_empty() {
            lines.push(
                "No skills. Add SKILL.md files to a [skills] dirs directory, or let the model \
                 create one with the skills tool."
                    .into(),
            );
        } else {
            lines.insert(
                0,
                "Skills (* = active; /skill NAME [ARGS] activates):".into(),
            );
        }
        for p in catalog.problems() {
            lines.push(format!("   skipped: {p}"));
        }
        self.console.print_lines(&lines);
    }

    /// What the foreground workstream's tools may see.
    async fn memory_view(&self) -> MemoryView {
        let ws_id = self.slots[self.fg].ws_id.clone();
        let project_id = self
            .app
            .storage
            .get_workstream(&ws_id)
            .await
            .ok()
            .flatten()
            .and_then(|w| w.project_id);
        MemoryView {
            user_id: Some(LOCAL_USER.to_string()),
            ws_id: Some(ws_id),
            project_id,
        }
    }

    /// `/memory …`.
    pub(super) async fn memory_command(&mut self, cmd: MemoryCommand) {
        let view = self.memory_view().await;
        let db = &self.app.storage;
        let result: Result<Vec<String>, String> = match cmd {
            MemoryCommand::List => db
                .list_visible_memories(&view, None, None, LIST_LIMIT)
                .await
                .map(|m| memory_lines(&m, "No memories yet."))
                .map_err(|e| e.to_string()),
            MemoryCommand::Search(q) => db
                .search_visible_memories(&q, &view, None, LIST_LIMIT)
                .await
                .map(|m| memory_lines(&m, "No memory matches."))
                .map_err(|e| e.to_string()),
            MemoryCommand::Show(name) => match self.find_memory(&view, &name, None).await {
                Ok(m) => {
                    let mut lines = vec![format!(
                        "{} · {} · {} · updated {}",
                        m.name, m.scope, m.memory_type, m.updated
                    )];
                    if !m.description.is_empty() {
                        lines.push(m.description.clone());
                    }
                    lines.push(String::new());
                    lines.extend(m.content.lines().map(String::from));
                    Ok(lines)
                }
                Err(e) => Err(e),
            },
            MemoryCommand::Forget(name, scope) => {
                match self.find_memory(&view, &name, scope.as_deref()).await {
                    Ok(m) => db
                        .delete_memory(&m.name, &m.scope, &m.scope_id)
                        .await
                        .map(|_| vec![format!("forgot {} ({} memory)", m.name, m.scope)])
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e),
                }
            }
        };
        match result {
            Ok(lines) => self.console.print_lines(&lines),
            Err(e) => self.error(&e),
        }
    }

    /// The one visible memory called `name` (in `scope` when given); the
    /// error says when there is none or several.
    async fn find_memory(
        &self,
        view: &MemoryView,
        name: &str,
        scope: Option<&str>,
    ) -> Result<Memory, String> {
        let places = [
            ("user", view.user_id.clone()),
            ("workstream", view.ws_id.clone()),
            ("project", view.project_id.clone()),
            ("global", Some(String::new())),
        ];
        if let Some(s) = scope
            && !places.iter().any(|(p, _)| *p == s)
        {
            return Err(format!(
                "{s:?} is not a scope (user, workstream, project or global)"
            ));
        }
        let mut same = Vec::new();
        for (place, id) in places {
            let Some(id) = id else { continue };
            if scope.is_some_and(|s| s != place) {
                continue;
            }
            if let Some(m) = self
                .app
                .storage
                .get_memory(name, place, &id)
                .await
                .map_err(|e| e.to_string())?
            {
                same.push(m);
            }
        }
        match same.len() {
            0 => Err(format!("no memory named {name:?} here (see /memory)")),
            1 => Ok(same.remove(0)),
            _ => Err(format!(
                "several memories are named {name:?} (scopes: {}); add the scope",
                same.iter()
                    .map(|m| m.scope.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

fn memory_lines(list: &[Memory], empty: &str) -> Vec<String> {
    if list.is_empty() {
        return vec![empty.to_string()];
    }
    list.iter()
        .map(|m| {
            format!(
                "  {:<24} {:<10} {:<9} {}",
                m.name,
                m.scope,
                m.memory_type,
                if m.description.is_empty() {
                    m.content.lines().next().unwrap_or_default()
                } else {
                    m.description.as_str()
                }
            )
        })
        .collect()
}
