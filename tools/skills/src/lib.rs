//! Built-in `skills`: list and search the skills catalogue, load a skill into
//! this session (its instructions join the system prompt and its
//! `allowed_tools` restrict what is offered), or create a new skill version
//! from a `SKILL.md` document. Loading and creating ask for approval.

use std::collections::BTreeMap;
use turnstone_plugin_sdk::agent::skills::{self, SkillInfo};
use turnstone_plugin_sdk::prelude::*;

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Every skill with its description.
    List,
    /// Skills matching `query`.
    Search,
    /// Activate skill `name` in this session (with `arguments`).
    Load,
    /// Save `document` (a SKILL.md) as a new skill version.
    Create,
}

/// Arguments of `skills`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SkillsArgs {
    /// `list`, `search`, `load` or `create`.
    pub action: Action,
    /// Skill name (load).
    #[serde(default)]
    pub name: Option<String>,
    /// Search words (search).
    #[serde(default)]
    pub query: Option<String>,
    /// Values for the skill's arguments (load), e.g. {"pr": "42"}.
    #[serde(default)]
    pub arguments: Option<BTreeMap<String, String>>,
    /// A SKILL.md document: YAML frontmatter (name, description, category,
    /// tags, risk_level, allowed_tools, auto_approve, arguments) between `---`
    /// lines, then the instructions (create).
    #[serde(default)]
    pub document: Option<String>,
}

fn line(s: &SkillInfo) -> String {
    let mut l = format!(
        "- {} (v{}, risk {}): {}",
        s.name, s.version, s.risk_level, s.description
    );
    if let Some(c) = &s.category {
        l.push_str(&format!(" [{c}]"));
    }
    if !s.arguments.is_empty() {
        let args: Vec<String> = s
            .arguments
            .iter()
            .map(|a| {
                if a.required {
                    a.name.clone()
                } else {
                    format!("{}?", a.name)
                }
            })
            .collect();
        l.push_str(&format!(" args: {}", args.join(", ")));
    }
    l
}

fn need<'a>(v: &'a Option<String>, what: &str, action: &str) -> Result<&'a str, ToolError> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ToolError::new(format!("`{what}` is required for {action}")))
}

fn agent(e: turnstone_plugin_sdk::agent::AgentError) -> ToolError {
    ToolError::new(e.to_string())
}

/// `skills`.
pub struct Skills;

impl Tool for Skills {
    type Args = SkillsArgs;
    const NAME: &'static str = "skills";
    const DESCRIPTION: &'static str = "Discover and use skills: reusable instructions for a kind of task. `list` or `search` the catalogue; `load` a skill by name (with its arguments) to follow its instructions for the rest of the session; `create` saves a new SKILL.md document as a skill.";

    fn meta() -> ToolMeta {
        ToolMeta {
            primary_key: Some("name"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &SkillsArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        Ok(match args.action {
            Action::List => Preview::auto("skills list"),
            Action::Search => Preview::auto(format!(
                "skills search: {}",
                need(&args.query, "query", "search")?
            )),
            // Loading changes how the session behaves: the user decides.
            Action::Load => {
                let name = need(&args.name, "name", "load")?;
                let mut p = Preview::ask(format!("skills load: {name}"));
                if let Some(a) = args.arguments.as_ref().filter(|a| !a.is_empty()) {
                    let shown: Vec<String> = a.iter().map(|(k, v)| format!("{k} = {v}")).collect();
                    p = p.with_body(shown.join("\n"));
                }
                p
            }
            Action::Create => {
                let doc = need(&args.document, "document", "create")?;
                Preview::ask("skills create").with_body(doc.to_string())
            }
        })
    }

    fn execute(args: SkillsArgs, _ctx: &Context) -> Result<Output, ToolError> {
        match args.action {
            Action::List => {
                let all = skills::list().map_err(agent)?;
                if all.is_empty() {
                    return Ok("No skills are available.".to_string().into());
                }
                let lines: Vec<String> = all.iter().map(line).collect();
                Ok(format!("{} skills:\n{}", all.len(), lines.join("\n")).into())
            }
            Action::Search => {
                let q = need(&args.query, "query", "search")?;
                let found = skills::search(q, 10).map_err(agent)?;
                if found.is_empty() {
                    return Ok(format!("No skill matches {q:?}.").into());
                }
                let lines: Vec<String> = found.iter().map(line).collect();
                Ok(format!("Skills matching {q:?}:\n{}", lines.join("\n")).into())
            }
            Action::Load => {
                let name = need(&args.name, "name", "load")?;
                let arguments: Vec<(String, String)> =
                    args.arguments.unwrap_or_default().into_iter().collect();
                let s = skills::activate(name, &arguments).map_err(agent)?;
                let mut out = format!(
                    "Loaded skill {} (v{}): {}. Its instructions are now part of this session.",
                    s.name, s.version, s.description
                );
                if !s.allowed_tools.is_empty() {
                    out.push_str(&format!(" Tools offered: {}.", s.allowed_tools.join(", ")));
                }
                if matches!(s.risk_level.as_str(), "high" | "critical") {
                    out.push_str(&format!(
                        " Warning: this skill's risk level is {}; take care.",
                        s.risk_level
                    ));
                }
                Ok(out.into())
            }
            Action::Create => {
                let doc = need(&args.document, "document", "create")?;
                let s = skills::save(doc).map_err(agent)?;
                Ok(format!("Saved skill {} as version {}.", s.name, s.version).into())
            }
        }
    }
}

register_tools!(Skills);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_and_unknown_actions_are_refused() {
        let a: SkillsArgs = turnstone_plugin_sdk::serde_json::from_str(
            r#"{"action": "load", "name": "deploy", "arguments": {"env": "prod"}}"#,
        )
        .unwrap();
        assert_eq!(a.action, Action::Load);
        assert_eq!(a.arguments.unwrap()["env"], "prod");
        assert!(
            turnstone_plugin_sdk::serde_json::from_str::<SkillsArgs>(r#"{"action": "run"}"#)
                .is_err()
        );
    }
}
