//! Skills: `SKILL.md` documents ([`doc`]) in a catalogue of files and
//! database versions ([`catalog`]), activated in a session (the body joins
//! the system prompt; `allowed_tools` restricts what the model is offered).

pub mod catalog;
pub mod doc;
pub mod invoke;

pub use catalog::{Catalog, Skill, SkillInfo, SkillLibrary, SkillSource};
pub use doc::{Argument, Frontmatter, RiskLevel, SkillDoc, SkillError, parse};
pub use invoke::{SkillCommand, bind_arguments, parse_command};
