//! `/skill NAME [ARGS]` as front ends take it (the REPL, the server's
//! `/v1/api/command`, `--skill`): arguments are shell-quoted words, either
//! `key=value` or positional, positional ones filling the skill's declared
//! arguments in order.

use super::catalog::Catalog;
use std::collections::BTreeMap;

/// What `/skill` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillCommand {
    /// `/skill` alone: list the catalogue.
    List,
    /// `/skill off`: drop the active skill.
    Off,
    /// `/skill NAME [ARGS]`.
    Use {
        /// Skill name.
        name: String,
        /// Positional words, in order.
        positional: Vec<String>,
        /// `key=value` words.
        named: BTreeMap<String, String>,
    },
}

/// Parses what follows `/skill`. Text with an unbalanced quote (`don't`)
/// is split at whitespace, taking quotes literally.
pub fn parse_command(arg: &str) -> Result<SkillCommand, String> {
    let words = shlex::split(arg.trim())
        .unwrap_or_else(|| arg.split_whitespace().map(str::to_string).collect());
    let mut words = words.into_iter();
    let Some(name) = words.next() else {
        return Ok(SkillCommand::List);
    };
    if name == "off" || name == "none" {
        return match words.next() {
            None => Ok(SkillCommand::Off),
            Some(w) => Err(format!("/skill {name} takes nothing, not {w:?}")),
        };
    }
    let mut positional = Vec::new();
    let mut named = BTreeMap::new();
    for w in words {
        match w.split_once('=') {
            Some((k, v))
                if !k.is_empty()
                    && k.chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-') =>
            {
                named.insert(k.to_string(), v.to_string());
            }
            _ => positional.push(w),
        }
    }
    Ok(SkillCommand::Use {
        name,
        positional,
        named,
    })
}

/// The arguments by name for skill `name`: positional words take the
/// declared arguments not given by name, in order. Unknown skills and
/// surplus words are errors here; missing required ones are reported when
/// the skill renders.
pub fn bind_arguments(
    catalog: &Catalog,
    name: &str,
    positional: Vec<String>,
    mut named: BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    if positional.is_empty() {
        return Ok(named);
    }
    let skill = catalog
        .get(name)
        .ok_or_else(|| format!("no skill named {name:?}"))?;
    let open: Vec<String> = skill
        .info
        .arguments
        .iter()
        .filter(|a| !named.contains_key(&a.name))
        .map(|a| a.name.clone())
        .collect();
    let mut open = open.into_iter();
    let count = positional.len();
    for word in positional {
        let slot = open.next().ok_or_else(|| {
            format!(
                "skill {name:?} takes {} argument(s); {count} positional word(s) given",
                skill.info.arguments.len()
            )
        })?;
        named.insert(slot, word);
    }
    Ok(named)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::parse;

    #[test]
    fn words_split_into_names_and_positions() {
        assert_eq!(parse_command("  ").unwrap(), SkillCommand::List);
        assert_eq!(parse_command("off").unwrap(), SkillCommand::Off);
        assert!(parse_command("off now").is_err());
        assert_eq!(
            parse_command("review don't").unwrap(),
            SkillCommand::Use {
                name: "review".into(),
                positional: vec!["don't".into()],
                named: BTreeMap::new(),
            }
        );
        let SkillCommand::Use {
            name,
            positional,
            named,
        } = parse_command("review 42 depth=\"very deep\" a=b=c =x").unwrap()
        else {
            panic!("not a use")
        };
        assert_eq!(name, "review");
        assert_eq!(positional, ["42", "=x"]);
        assert_eq!(named["depth"], "very deep");
        assert_eq!(named["a"], "b=c");
    }

    #[test]
    fn positional_words_fill_open_arguments_in_order() {
        let doc = parse("---\nname: review\ndescription: d\narguments:\n  - name: pr\n  - name: depth\n---\nx\n").unwrap();
        let catalog = Catalog::from_parts(vec![("review.md".into(), Ok(doc))], &[]);
        let named = BTreeMap::from([("pr".to_string(), "7".to_string())]);
        let got = bind_arguments(&catalog, "review", vec!["deep".into()], named).unwrap();
        assert_eq!(got["pr"], "7");
        assert_eq!(got["depth"], "deep");
        let e = bind_arguments(
            &catalog,
            "review",
            vec!["1".into(), "2".into(), "3".into()],
            BTreeMap::new(),
        )
        .unwrap_err();
        assert!(e.contains("takes 2 argument"), "{e}");
        assert!(bind_arguments(&catalog, "nope", vec!["1".into()], BTreeMap::new()).is_err());
    }
}
