//! `SKILL.md`: YAML frontmatter between `---` lines, then the body, with
//! `{{argument}}` placeholders. Parsed with `serde-saphyr` (a maintained,
//! pure-Rust YAML parser with typed deserialisation).

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// Largest document accepted (frontmatter + body).
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// Why a skill document was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// No `---` frontmatter block at the top.
    #[error("a SKILL.md starts with a `---` line, YAML frontmatter, and a closing `---` line")]
    NoFrontmatter,
    /// The frontmatter is not valid YAML for a skill.
    #[error("frontmatter: {0}")]
    Frontmatter(String),
    /// A field value is not allowed.
    #[error("{0}")]
    Invalid(String),
    /// The document is too large.
    #[error("the document is {0} bytes; a skill is at most {MAX_DOCUMENT_BYTES} bytes")]
    TooLarge(usize),
    /// An argument the skill requires was not given.
    #[error("skill {skill} needs the argument `{argument}`")]
    MissingArgument {
        /// The skill.
        skill: String,
        /// The argument.
        argument: String,
    },
    /// An argument the skill does not declare was given.
    #[error("skill {skill} has no argument `{argument}` (it takes: {known})")]
    UnknownArgument {
        /// The skill.
        skill: String,
        /// The argument.
        argument: String,
        /// The ones it takes.
        known: String,
    },
}

/// How risky activating a skill is (shown to the user; `high` and `critical`
/// warn on load).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    /// Read-only guidance.
    #[default]
    Low,
    /// Changes files or runs commands.
    Medium,
    /// Broad changes.
    High,
    /// Destructive or security-sensitive.
    Critical,
}

impl RiskLevel {
    /// `low`, `medium`, `high`, `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }
}

/// One argument of a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Argument {
    /// Name, used as `{{name}}` in the body.
    pub name: String,
    /// What to pass.
    #[serde(default)]
    pub description: String,
    /// Must be given (unless it has a default).
    #[serde(default)]
    pub required: bool,
    /// Used when not given.
    #[serde(default)]
    pub default: Option<String>,
}

/// The frontmatter fields Turnstone reads (others are kept out of the way,
/// so documents written for other agents load too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frontmatter {
    /// Skill name: letters, digits, `-` and `_`.
    pub name: String,
    /// What it is for (matched by search).
    pub description: String,
    /// A grouping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Search words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// How risky loading it is.
    #[serde(default)]
    pub risk_level: RiskLevel,
    /// The only tools offered while it is active (empty: all); a list, or a
    /// comma- or space-separated string as other agents write it.
    #[serde(
        default,
        alias = "allowed-tools",
        deserialize_with = "tool_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub allowed_tools: Vec<String>,
    /// Tool calls run without asking while it is active.
    #[serde(default, alias = "auto-approve")]
    pub auto_approve: bool,
    /// Arguments substituted into the body.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<Argument>,
}

fn tool_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Tools {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Option::<Tools>::deserialize(d)? {
        None => Vec::new(),
        Some(Tools::List(v)) => v,
        Some(Tools::Text(s)) => s
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDoc {
    /// Its frontmatter.
    pub meta: Frontmatter,
    /// Its body (Markdown with `{{argument}}` placeholders).
    pub body: String,
}

/// Whether `name` is a valid skill name.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Parses a `SKILL.md` document.
pub fn parse(text: &str) -> Result<SkillDoc, SkillError> {
    if text.len() > MAX_DOCUMENT_BYTES {
        return Err(SkillError::TooLarge(text.len()));
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or(SkillError::NoFrontmatter)?;
    let (yaml, body) = split_closing(rest).ok_or(SkillError::NoFrontmatter)?;
    let meta: Frontmatter =
        serde_saphyr::from_str(yaml).map_err(|e| SkillError::Frontmatter(e.to_string()))?;
    if !valid_name(&meta.name) {
        return Err(SkillError::Invalid(format!(
            "skill name {:?} must be 1-64 letters, digits, `-` or `_`",
            meta.name
        )));
    }
    if meta.description.trim().is_empty() {
        return Err(SkillError::Invalid(format!(
            "skill {} needs a description (search finds skills by it)",
            meta.name
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for a in &meta.arguments {
        if !valid_name(&a.name) {
            return Err(SkillError::Invalid(format!(
                "skill {}: argument name {:?} must be letters, digits, `-` or `_`",
                meta.name, a.name
            )));
        }
        if !seen.insert(a.name.as_str()) {
            return Err(SkillError::Invalid(format!(
                "skill {}: argument `{}` is declared twice",
                meta.name, a.name
            )));
        }
    }
    Ok(SkillDoc {
        meta,
        body: body.trim_start_matches(['\r', '\n']).to_string(),
    })
}

/// Splits `yaml\n---\nbody` at the first line that is exactly `---`.
fn split_closing(rest: &str) -> Option<(&str, &str)> {
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']) == "---" {
            return Some((&rest[..offset], &rest[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

impl SkillDoc {
    /// The body with `{{argument}}` placeholders filled from `args` (or the
    /// argument's default) and `{{var}}` from `vars` (`model`, `ws_id`, …).
    /// A placeholder naming nothing known stays as written.
    pub fn render(
        &self,
        args: &BTreeMap<String, String>,
        vars: &BTreeMap<&str, String>,
    ) -> Result<String, SkillError> {
        let name = &self.meta.name;
        if let Some(unknown) = args
            .keys()
            .find(|k| !self.meta.arguments.iter().any(|a| &a.name == *k))
        {
            return Err(SkillError::UnknownArgument {
                skill: name.clone(),
                argument: unknown.clone(),
                known: self
                    .meta
                    .arguments
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let mut values: BTreeMap<&str, &str> = BTreeMap::new();
        for a in &self.meta.arguments {
            match args.get(&a.name).or(a.default.as_ref()) {
                Some(v) => {
                    values.insert(&a.name, v);
                }
                None if a.required => {
                    return Err(SkillError::MissingArgument {
                        skill: name.clone(),
                        argument: a.name.clone(),
                    });
                }
                None => {
                    values.insert(&a.name, "");
                }
            }
        }
        let mut out = String::with_capacity(self.body.len());
        let mut rest = self.body.as_str();
        while let Some(open) = rest.find("{{") {
            out.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            match after.find("}}") {
                Some(close) => {
                    let key = after[..close].trim();
                    match values
                        .get(key)
                        .copied()
                        .or_else(|| vars.get(key).map(String::as_str))
                    {
                        Some(v) => out.push_str(v),
                        None => out.push_str(&rest[open..open + 2 + close + 2]),
                    }
                    rest = &after[close + 2..];
                }
                None => {
                    out.push_str(&rest[open..]);
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "---\nname: review-pr\ndescription: Review a pull request carefully\ncategory: code\ntags: [git, review]\nrisk_level: medium\nallowed-tools: read_file, search bash\nauto_approve: false\narguments:\n  - name: pr\n    description: PR number\n    required: true\n  - name: depth\n    default: thorough\nlicense: MIT\n---\n\nReview PR {{pr}} ({{ depth }}) with {{model}}; keep {{unknown}}.\n";

    #[test]
    fn frontmatter_and_body_parse_and_render() {
        let d = parse(DOC).unwrap();
        assert_eq!(d.meta.name, "review-pr");
        assert_eq!(d.meta.category.as_deref(), Some("code"));
        assert_eq!(d.meta.tags, ["git", "review"]);
        assert_eq!(d.meta.risk_level, RiskLevel::Medium);
        assert_eq!(d.meta.allowed_tools, ["read_file", "search", "bash"]);
        assert_eq!(d.meta.arguments.len(), 2);
        let args = BTreeMap::from([("pr".to_string(), "42".to_string())]);
        let vars = BTreeMap::from([("model", "qwen".to_string())]);
        assert_eq!(
            d.render(&args, &vars).unwrap(),
            "Review PR 42 (thorough) with qwen; keep {{unknown}}.\n"
        );
        assert_eq!(
            d.render(&BTreeMap::new(), &vars).unwrap_err(),
            SkillError::MissingArgument {
                skill: "review-pr".into(),
                argument: "pr".into()
            }
        );
        let bad = BTreeMap::from([("nope".to_string(), "1".to_string())]);
        let e = d.render(&bad, &vars).unwrap_err();
        assert!(e.to_string().contains("takes: pr, depth"), "{e}");
    }

    #[test]
    fn bad_documents_are_refused_with_the_reason() {
        assert_eq!(
            parse("no frontmatter").unwrap_err(),
            SkillError::NoFrontmatter
        );
        assert_eq!(
            parse("---\nname: a\n").unwrap_err(),
            SkillError::NoFrontmatter,
            "unclosed"
        );
        let e = parse("---\nname: [oops\n---\nbody").unwrap_err();
        assert!(matches!(e, SkillError::Frontmatter(_)), "{e}");
        let e = parse("---\nname: a b\ndescription: d\n---\n").unwrap_err();
        assert!(e.to_string().contains("1-64 letters"), "{e}");
        let e = parse("---\nname: a\ndescription: ''\n---\n").unwrap_err();
        assert!(e.to_string().contains("needs a description"), "{e}");
        let e = parse("---\nname: a\ndescription: d\nrisk_level: extreme\n---\n").unwrap_err();
        assert!(matches!(e, SkillError::Frontmatter(_)), "{e}");
        let e = parse("---\nname: a\ndescription: d\narguments:\n  - name: x\n  - name: x\n---\n")
            .unwrap_err();
        assert!(e.to_string().contains("declared twice"), "{e}");
        let big = format!(
            "---\nname: a\ndescription: d\n---\n{}",
            "x".repeat(MAX_DOCUMENT_BYTES)
        );
        assert!(matches!(parse(&big), Err(SkillError::TooLarge(_))));
        // CRLF and a BOM are fine.
        let d = parse("\u{feff}---\r\nname: a\r\ndescription: d\r\n---\r\nbody\r\n").unwrap();
        assert_eq!(d.body, "body\r\n");
    }
}
