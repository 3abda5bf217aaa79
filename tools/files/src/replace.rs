//! The pure text side of `edit_file`: locate each `old_string`, resolve
//! ambiguity with `near_line`, reject overlaps, and apply bottom-up so earlier
//! offsets stay valid. Nothing is applied unless every edit is valid.

/// One replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Exact text to find.
    pub old: String,
    /// Replacement.
    pub new: String,
    /// Picks the occurrence nearest this 1-based line when there are several.
    pub near_line: Option<usize>,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// One edit.
    Single(Edit),
    /// Every occurrence of `old`.
    ReplaceAll {
        /// Exact text to find.
        old: String,
        /// Replacement.
        new: String,
    },
    /// Several edits, all or nothing.
    Batch(Vec<Edit>),
}

/// The outcome of a successful plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The new content.
    pub content: String,
    /// Replacements made.
    pub replacements: usize,
}

fn line_of(content: &str, offset: usize) -> usize {
    content[..offset].bytes().filter(|b| *b == b'\n').count() + 1
}

fn check_pair(old: &str, new: &str, label: &str) -> Result<(), String> {
    if old.is_empty() {
        return Err(format!("{label}old_string must not be empty"));
    }
    if old == new {
        return Err(format!(
            "{label}old_string and new_string are identical; the edit would change nothing"
        ));
    }
    Ok(())
}

/// Start offsets of every occurrence of `needle`, overlapping ones included
/// (`"aa"` occurs twice in `"aaa"`): a replacement must never pick one of two
/// overlapping matches silently.
fn occurrences(content: &str, needle: &str) -> Vec<usize> {
    let mut hits = Vec::new();
    let mut from = 0;
    while let Some(i) = content[from..].find(needle) {
        let at = from + i;
        hits.push(at);
        // Step one character, not one match, to see overlaps.
        from = at + content[at..].chars().next().map_or(1, char::len_utf8);
        if from > content.len() {
            break;
        }
    }
    hits
}

/// Finds the byte range `edit` replaces.
fn locate(content: &str, edit: &Edit, label: &str) -> Result<(usize, usize), String> {
    check_pair(&edit.old, &edit.new, label)?;
    let hits = occurrences(content, &edit.old);
    let start = match (hits.as_slice(), edit.near_line) {
        ([], _) => {
            return Err(format!(
                "{label}old_string was not found in the file. It must match exactly, including whitespace and indentation; read the file again to copy the current text."
            ));
        }
        ([only], _) => *only,
        (many, Some(near)) => *many
            .iter()
            .min_by_key(|i| line_of(content, **i).abs_diff(near))
            .unwrap_or(&many[0]),
        (many, None) => {
            let mut lines: Vec<usize> = many.iter().map(|i| line_of(content, *i)).collect();
            lines.dedup();
            let shown: Vec<String> = lines.iter().take(10).map(usize::to_string).collect();
            let where_ = if lines.len() == 1 {
                format!("all at line {}, overlapping or side by side", lines[0])
            } else {
                format!(
                    "lines {}{}",
                    shown.join(", "),
                    if lines.len() > 10 { ", …" } else { "" }
                )
            };
            return Err(format!(
                "{label}old_string matches {} locations ({where_}). Add surrounding context to make it unique, pass near_line to pick one, or set replace_all.",
                many.len(),
            ));
        }
    };
    Ok((start, start + edit.old.len()))
}

/// Applies `plan` to `content`.
pub fn apply(content: &str, plan: &Plan) -> Result<Applied, String> {
    match plan {
        Plan::ReplaceAll { old, new } => {
            check_pair(old, new, "")?;
            let n = content.matches(old.as_str()).count();
            if n == 0 {
                return Err("old_string was not found in the file.".into());
            }
            Ok(Applied {
                content: content.replace(old.as_str(), new),
                replacements: n,
            })
        }
        Plan::Single(edit) => {
            let (s, e) = locate(content, edit, "")?;
            Ok(Applied {
                content: format!("{}{}{}", &content[..s], edit.new, &content[e..]),
                replacements: 1,
            })
        }
        Plan::Batch(edits) => {
            if edits.is_empty() {
                return Err("edits must not be empty".into());
            }
            let mut ranges = Vec::with_capacity(edits.len());
            for (i, edit) in edits.iter().enumerate() {
                let (s, e) = locate(content, edit, &format!("edits[{i}]: "))?;
                ranges.push((s, e, i));
            }
            ranges.sort();
            for pair in ranges.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                if b.0 < a.1 {
                    return Err(format!(
                        "edits[{}] and edits[{}] overlap (around line {}); merge them into one edit",
                        a.2.min(b.2),
                        a.2.max(b.2),
                        line_of(content, b.0)
                    ));
                }
            }
            let mut out = content.to_string();
            for (s, e, i) in ranges.iter().rev() {
                out.replace_range(*s..*e, &edits[*i].new);
            }
            Ok(Applied {
                content: out,
                replacements: edits.len(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(old: &str, new: &str, near: Option<usize>) -> Edit {
        Edit {
            old: old.into(),
            new: new.into(),
            near_line: near,
        }
    }

    #[test]
    fn single_edit_replaces_the_unique_match() {
        let r = apply("a\nb\nc\n", &Plan::Single(edit("b", "B", None))).unwrap();
        assert_eq!(r.content, "a\nB\nc\n");
    }

    #[test]
    fn ambiguity_is_refused_unless_near_line_picks_one() {
        let text = "x = 1\ny = 2\nx = 1\n";
        let err = apply(text, &Plan::Single(edit("x = 1", "x = 3", None))).unwrap_err();
        assert!(err.contains("matches 2 locations (lines 1, 3)"), "{err}");
        let r = apply(text, &Plan::Single(edit("x = 1", "x = 3", Some(3)))).unwrap();
        assert_eq!(r.content, "x = 1\ny = 2\nx = 3\n");
    }

    #[test]
    fn missing_and_identical_strings_are_refused() {
        assert!(
            apply("abc", &Plan::Single(edit("zzz", "y", None)))
                .unwrap_err()
                .contains("not found")
        );
        assert!(
            apply("abc", &Plan::Single(edit("a", "a", None)))
                .unwrap_err()
                .contains("identical")
        );
        assert!(
            apply("abc", &Plan::Single(edit("", "a", None)))
                .unwrap_err()
                .contains("empty")
        );
    }

    #[test]
    fn overlapping_occurrences_are_ambiguous() {
        let err = apply("aaa", &Plan::Single(edit("aa", "X", None))).unwrap_err();
        assert!(err.contains("matches 2 locations (all at line 1"), "{err}");
        let err = apply("x\nabab ab\n", &Plan::Single(edit("ab", "Z", None))).unwrap_err();
        assert!(err.contains("matches 3 locations (all at line 2"), "{err}");
        let err = apply("aaaa\nb\naa\n", &Plan::Single(edit("aa", "X", None))).unwrap_err();
        assert!(err.contains("matches 4 locations (lines 1, 3)"), "{err}");
        // near_line and replace_all are the ways out.
        let r = apply("b\naaa", &Plan::Single(edit("aa", "X", Some(2)))).unwrap();
        assert_eq!(r.content, "b\nXa");
        let r = apply(
            "aaa",
            &Plan::ReplaceAll {
                old: "aa".into(),
                new: "X".into(),
            },
        )
        .unwrap();
        assert_eq!((r.content.as_str(), r.replacements), ("Xa", 1));
        // Multi-byte text steps by characters.
        let err = apply("ééé", &Plan::Single(edit("éé", "e", None))).unwrap_err();
        assert!(err.contains("matches 2 locations"), "{err}");
        // A batch entry is checked the same way.
        let err = apply(
            "aaa\nz\n",
            &Plan::Batch(vec![edit("z", "y", None), edit("aa", "X", None)]),
        )
        .unwrap_err();
        assert!(err.starts_with("edits[1]: old_string matches 2"), "{err}");
    }

    #[test]
    fn replace_all_counts_occurrences() {
        let r = apply(
            "foo foo bar foo",
            &Plan::ReplaceAll {
                old: "foo".into(),
                new: "baz".into(),
            },
        )
        .unwrap();
        assert_eq!((r.content.as_str(), r.replacements), ("baz baz bar baz", 3));
    }

    #[test]
    fn batches_apply_bottom_up_and_all_or_nothing() {
        let text = "one\ntwo\nthree\n";
        let r = apply(
            text,
            &Plan::Batch(vec![edit("three", "3", None), edit("one", "1111", None)]),
        )
        .unwrap();
        assert_eq!(r.content, "1111\ntwo\n3\n");
        let err = apply(
            text,
            &Plan::Batch(vec![edit("one", "1", None), edit("nope", "x", None)]),
        )
        .unwrap_err();
        assert!(err.starts_with("edits[1]: "), "{err}");
        let err = apply(
            text,
            &Plan::Batch(vec![
                edit("one\ntwo", "x", None),
                edit("two\nthree", "y", None),
            ]),
        )
        .unwrap_err();
        assert!(err.contains("overlap"), "{err}");
    }
}
