//! Built-in `memory`: structured memories that persist across sessions,
//! typed (user, general, feedback, reference) and scoped (global, the
//! caller's workstream, user or project). The host decides what the caller
//! may see; this component only speaks the tool's surface.

use turnstone_plugin_sdk::agent::memory::{self, Memory, MemoryType, SaveRequest, Scope};
use turnstone_plugin_sdk::prelude::*;

/// Most results of `search` and `list`.
const MAX_LIMIT: u32 = 100;
/// Default results of `search` and `list`.
const DEFAULT_LIMIT: u32 = 20;

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Create or update a memory (`name`, `content`, `description`).
    Save,
    /// Read one memory by `name`.
    Get,
    /// Find memories matching `query`.
    Search,
    /// List memories, newest first.
    List,
    /// Delete a memory by `name`.
    Delete,
}

/// What a memory is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// About the user: preferences, role, habits.
    User,
    /// Knowledge about the work (`project` is accepted too).
    #[serde(alias = "project")]
    General,
    /// Feedback on how to work.
    Feedback,
    /// A pointer to something elsewhere.
    Reference,
}

/// Whose memory it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Where {
    /// Everyone's.
    Global,
    /// This workstream's only.
    Workstream,
    /// Follows the user into every workstream.
    User,
    /// This workstream's project.
    Project,
}

/// Arguments of `memory`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemoryArgs {
    /// `save`, `get`, `search`, `list` or `delete`.
    pub action: Action,
    /// Short snake_case identifier (save, get, delete).
    #[serde(default)]
    pub name: Option<String>,
    /// Memory content to store (save).
    #[serde(default)]
    pub content: Option<String>,
    /// One line saying when the memory is relevant (recommended for save).
    #[serde(default)]
    pub description: Option<String>,
    /// `user`, `general`, `feedback` or `reference` (save: default `general`
    /// for a new memory; list: only this type).
    #[serde(default, rename = "type")]
    pub kind: Option<Kind>,
    /// `user` (default for save and delete), `workstream`, `project` or
    /// `global` (shared with every user: saving or deleting there asks
    /// first). get without a scope looks in user, workstream, project, then
    /// global; search and list: only this scope.
    #[serde(default)]
    pub scope: Option<Where>,
    /// Search words (search).
    #[serde(default)]
    pub query: Option<String>,
    /// Most results for search or list (default 20, at most 100).
    #[serde(default)]
    pub limit: Option<u32>,
}

fn scope(w: Where) -> Scope {
    match w {
        Where::Global => Scope::Global,
        Where::Workstream => Scope::Workstream,
        Where::User => Scope::User,
        Where::Project => Scope::Project,
    }
}

fn kind(k: Kind) -> MemoryType {
    match k {
        Kind::User => MemoryType::User,
        Kind::General => MemoryType::General,
        Kind::Feedback => MemoryType::Feedback,
        Kind::Reference => MemoryType::Reference,
    }
}

fn kind_name(k: MemoryType) -> &'static str {
    match k {
        MemoryType::User => "user",
        MemoryType::General => "general",
        MemoryType::Feedback => "feedback",
        MemoryType::Reference => "reference",
    }
}

fn scope_name(s: Scope) -> &'static str {
    match s {
        Scope::Global => "global",
        Scope::Workstream => "workstream",
        Scope::User => "user",
        Scope::Project => "project",
    }
}

/// `Mixed Case-name!` → `mixed_case_name`.
pub fn normalise(name: &str) -> String {
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

fn required<'a>(v: &'a Option<String>, what: &str, action: &str) -> Result<&'a str, ToolError> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ToolError::new(format!("`{what}` is required for {action}")))
}

fn name_of(args: &MemoryArgs, action: &str) -> Result<String, ToolError> {
    let name = normalise(required(&args.name, "name", action)?);
    if name.is_empty() || name.len() > 128 {
        return Err(ToolError::new(
            "`name` needs a letter or digit and at most 128 characters",
        ));
    }
    Ok(name)
}

fn limit(args: &MemoryArgs) -> u32 {
    args.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT)
}

fn line(m: &Memory) -> String {
    let desc = if m.description.is_empty() {
        m.content.chars().take(80).collect::<String>()
    } else {
        m.description.clone()
    };
    format!(
        "- {} [{}, {}]: {}",
        m.name,
        kind_name(m.kind),
        scope_name(m.scope),
        desc.replace('\n', " ")
    )
}

fn agent(e: turnstone_plugin_sdk::agent::AgentError) -> ToolError {
    ToolError::new(e.to_string())
}

/// `name` in the first scope that has it: user, workstream, project, global
/// (a scope this session has not is skipped).
fn find_anywhere(name: &str) -> Result<(Option<memory::Memory>, Scope), ToolError> {
    for s in [
        Scope::User,
        Scope::Workstream,
        Scope::Project,
        Scope::Global,
    ] {
        match memory::get(name, s) {
            Ok(Some(m)) => return Ok((Some(m), s)),
            Ok(None) | Err(turnstone_plugin_sdk::agent::AgentError::Invalid(_)) => {}
            Err(e) => return Err(agent(e)),
        }
    }
    Ok((None, Scope::User))
}

/// `memory`.
pub struct MemoryTool;

impl Tool for MemoryTool {
    type Args = MemoryArgs;
    const NAME: &'static str = "memory";
    const DESCRIPTION: &'static str = "Structured persistent memory across sessions. Save what is worth remembering (user preferences, project knowledge, feedback on how to work, pointers to references) with a short snake_case name and a one-line description of when it is relevant; search, list, get or delete memories. Scope `user` (the default) follows the user everywhere, `workstream` stays in this workstream, `project` belongs to this workstream's project, `global` is shared with every user (saving or deleting there asks the user first).";

    fn meta() -> ToolMeta {
        ToolMeta {
            auto_approve: true,
            primary_key: Some("name"),
            coordinator: true,
            interactive: true,
            kind_variants: Some(turnstone_plugin_sdk::serde_json::json!({
                "coordinator": {
                    "description": "Shared persistent memory for coordinating workstreams: save, search, list, get or delete memories in the global, user or project scope (workstream memories belong to the workstreams themselves)."
                }
            })),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &MemoryArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        // Global memories reach every user (and their memory index): the
        // user approves writing or deleting one.
        let shared = matches!(args.scope, Some(Where::Global));
        let header = match args.action {
            Action::Save => {
                let name = name_of(args, "save")?;
                required(&args.content, "content", "save")?;
                if shared {
                    return Ok(Preview::ask(format!(
                        "memory save (global, shared with every user): {name}"
                    )));
                }
                format!("memory save: {name}")
            }
            Action::Get => format!("memory get: {}", name_of(args, "get")?),
            Action::Delete => {
                let name = name_of(args, "delete")?;
                if shared {
                    return Ok(Preview::ask(format!(
                        "memory delete (global, shared with every user): {name}"
                    )));
                }
                format!("memory delete: {name}")
            }
            Action::Search => format!(
                "memory search: {}",
                required(&args.query, "query", "search")?
            ),
            Action::List => "memory list".to_string(),
        };
        Ok(Preview::auto(header))
    }

    fn execute(args: MemoryArgs, _ctx: &Context) -> Result<Output, ToolError> {
        let where_ = args.scope.map(scope);
        match args.action {
            Action::Save => {
                let name = name_of(&args, "save")?;
                let content = required(&args.content, "content", "save")?.to_string();
                let description = args
                    .description
                    .as_deref()
                    .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
                    .unwrap_or_default();
                let m = memory::save(&SaveRequest {
                    name,
                    content,
                    description,
                    kind: args.kind.map(kind),
                    scope: where_.unwrap_or(Scope::User),
                })
                .map_err(agent)?;
                Ok(format!(
                    "Saved memory `{}` ({}, {}).",
                    m.name,
                    kind_name(m.kind),
                    scope_name(m.scope)
                )
                .into())
            }
            Action::Get => {
                let name = name_of(&args, "get")?;
                let (found, s) = match where_ {
                    Some(s) => (memory::get(&name, s).map_err(agent)?, s),
                    None => find_anywhere(&name)?,
                };
                match found {
                    Some(m) => Ok(format!(
                        "{} [{}, {}] — {}\n\n{}",
                        m.name,
                        kind_name(m.kind),
                        scope_name(m.scope),
                        m.description,
                        m.content
                    )
                    .into()),
                    None => Err(ToolError::new(format!(
                        "no memory named `{name}` in the {} scope",
                        scope_name(s)
                    ))),
                }
            }
            Action::Delete => {
                let name = name_of(&args, "delete")?;
                let s = where_.unwrap_or(Scope::User);
                if memory::delete(&name, s).map_err(agent)? {
                    Ok(format!("Deleted memory `{name}` ({}).", scope_name(s)).into())
                } else {
                    Err(ToolError::new(format!(
                        "no memory named `{name}` in the {} scope",
                        scope_name(s)
                    )))
                }
            }
            Action::Search => {
                let query = required(&args.query, "query", "search")?;
                let found = memory::search(query, where_, limit(&args)).map_err(agent)?;
                if found.is_empty() {
                    return Ok(format!("No memories match {query:?}.").into());
                }
                let mut out = format!("{} memories match {query:?}:\n", found.len());
                for m in &found {
                    out.push_str(&line(m));
                    out.push('\n');
                    let excerpt: String = m.content.chars().take(300).collect();
                    out.push_str(&format!("  {}\n", excerpt.replace('\n', "\n  ")));
                }
                Ok(out.into())
            }
            Action::List => {
                let found =
                    memory::list(where_, args.kind.map(kind), limit(&args)).map_err(agent)?;
                if found.is_empty() {
                    return Ok("No memories yet.".to_string().into());
                }
                let lines: Vec<String> = found.iter().map(line).collect();
                Ok(format!("{} memories:\n{}", found.len(), lines.join("\n")).into())
            }
        }
    }
}

register_tools!(MemoryTool);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_snake_case() {
        assert_eq!(normalise("Build Command!"), "build_command");
        assert_eq!(normalise("  --a--b--  "), "a_b");
        assert_eq!(normalise("!!!"), "");
    }

    #[test]
    fn arguments_parse_with_the_old_type_name() {
        let a: MemoryArgs = turnstone_plugin_sdk::serde_json::from_str(
            r#"{"action": "save", "name": "x", "content": "y", "type": "project", "scope": "user"}"#,
        )
        .unwrap();
        assert_eq!(
            (a.action, a.kind, a.scope),
            (Action::Save, Some(Kind::General), Some(Where::User))
        );
        assert!(
            turnstone_plugin_sdk::serde_json::from_str::<MemoryArgs>(r#"{"action": "forget"}"#)
                .is_err()
        );
    }
}
