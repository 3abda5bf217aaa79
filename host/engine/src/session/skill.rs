//! The skill active in a session: its rendered instructions join the
//! session's system text, its `allowed_tools` restrict what the model is
//! offered (and may call), and `auto_approve` runs its tool calls without
//! asking. Activated by the `skills` tool, `/skill`, `--skill` or a
//! workstream created with `skill`; kept in the workstream's config so a
//! resumed workstream continues with it.

use crate::skills::{SkillInfo, SkillLibrary};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use turnstone_storage::Storage;

/// Workstream config key holding the active skill (`{"name", "version", "arguments"}`).
pub const SKILL_KEY: &str = "skill";

/// The stored form of an activation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillChoice {
    /// Skill name.
    pub name: String,
    /// Version activated.
    pub version: u32,
    /// Arguments given.
    #[serde(default)]
    pub arguments: BTreeMap<String, String>,
}

/// An activated skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveSkill {
    /// What the catalogue lists.
    pub info: SkillInfo,
    /// Its body with the arguments filled in.
    pub body: String,
    /// The arguments it was activated with.
    pub arguments: BTreeMap<String, String>,
}

/// Why a skill could not be activated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillRenderError {
    /// No skill has that name (the message lists the ones there are).
    #[error("{0}")]
    Unknown(String),
    /// An argument is missing or unknown.
    #[error("{0}")]
    Arguments(String),
}

impl From<SkillRenderError> for String {
    fn from(e: SkillRenderError) -> Self {
        e.to_string()
    }
}

impl ActiveSkill {
    /// Skill `name` from `lib`, rendered with `args` and `vars`; the error
    /// says what is wrong (unknown skill, missing or unknown argument).
    pub async fn render(
        lib: &SkillLibrary,
        name: &str,
        args: &BTreeMap<String, String>,
        vars: &BTreeMap<&'static str, String>,
    ) -> Result<Self, SkillRenderError> {
        let catalog = lib.catalog().await;
        let skill = catalog.get(name).ok_or_else(|| {
            let known: Vec<String> = catalog.list().map(|s| s.name.clone()).collect();
            SkillRenderError::Unknown(if known.is_empty() {
                format!("no skill named {name:?} (no skills are available)")
            } else {
                format!("no skill named {name:?} (available: {})", known.join(", "))
            })
        })?;
        let body = skill
            .doc
            .render(args, vars)
            .map_err(|e| SkillRenderError::Arguments(e.to_string()))?;
        Ok(Self {
            info: skill.info.clone(),
            body,
            arguments: args.clone(),
        })
    }

    /// Records the activation in workstream `ws`'s config (a failure is
    /// logged: the skill stays active for this session).
    pub async fn persist(&self, db: &Storage, ws: &str) {
        let choice = SkillChoice {
            name: self.info.name.clone(),
            version: self.info.version,
            arguments: self.arguments.clone(),
        };
        let text = serde_json::to_string(&choice).unwrap_or_default();
        if let Err(e) = db.set_config(ws, SKILL_KEY, Some(&text)).await {
            tracing::warn!(workstream = ws, "cannot record the active skill: {e}");
        }
    }

    /// Whether `tool` may be offered and called while the skill is active.
    pub fn allows(&self, tool: &str) -> bool {
        self.info.allowed_tools.is_empty() || self.info.allowed_tools.iter().any(|t| t == tool)
    }

    /// The skill's part of the system text.
    pub fn system_text(&self) -> String {
        format!(
            "## Active skill: {}\n{}\n\n{}",
            self.info.name,
            self.info.description,
            self.body.trim_end()
        )
    }
}

/// The active skill of one session, shared with its tool calls (the skills
/// tool activates one from inside a call).
#[derive(Clone, Default)]
pub struct SkillSlot(Arc<Mutex<Option<ActiveSkill>>>);

impl SkillSlot {
    /// The skill active now.
    pub fn get(&self) -> Option<ActiveSkill> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces it (`None`: no skill).
    pub fn set(&self, skill: Option<ActiveSkill>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = skill;
    }
}
