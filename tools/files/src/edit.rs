//! `edit_file`: exact-string replacement with a read guard, ambiguity
//! handling, atomic batches and a diff preview. The file is re-checked at
//! execution: if it changed after the preview was shown, nothing is written.

use crate::diff::unified;
use crate::replace::{Edit, Plan, apply};
use std::path::Path;
use turnstone_plugin_sdk::fs::explain;
use turnstone_plugin_sdk::prelude::*;

/// One entry of a batch.
#[derive(Deserialize, JsonSchema)]
pub struct EditEntry {
    /// The exact text to find.
    pub old_string: String,
    /// The replacement text (omitted: the text is deleted).
    #[serde(default)]
    pub new_string: String,
    /// Pick the occurrence nearest this line when old_string matches several.
    #[serde(default)]
    pub near_line: Option<usize>,
}

/// Arguments of `edit_file`.
#[derive(Deserialize, JsonSchema)]
pub struct EditFileArgs {
    /// Absolute or relative file path.
    pub path: String,
    /// The exact text to find and replace.
    #[serde(default)]
    pub old_string: Option<String>,
    /// The replacement text (omitted: old_string is deleted).
    #[serde(default)]
    pub new_string: Option<String>,
    /// Disambiguate when old_string matches multiple locations: the nearest occurrence to this line is replaced.
    #[serde(default)]
    pub near_line: Option<usize>,
    /// Multiple replacements applied atomically: all are validated before any is applied; overlapping edits are rejected.
    #[serde(default)]
    pub edits: Option<Vec<EditEntry>>,
    /// Replace ALL occurrences of old_string. Cannot be combined with near_line or edits.
    #[serde(default)]
    pub replace_all: bool,
}

fn plan(args: &EditFileArgs) -> Result<Plan, ToolError> {
    let single = args.old_string.is_some() || args.new_string.is_some();
    match (&args.edits, single) {
        (Some(_), true) => Err(ToolError::new(
            "Error: give either old_string/new_string or edits, not both.",
        )),
        (Some(_), false) if args.replace_all => Err(ToolError::new(
            "Error: replace_all cannot be combined with edits.",
        )),
        (Some(edits), false) => Ok(Plan::Batch(
            edits
                .iter()
                .map(|e| Edit {
                    old: e.old_string.clone(),
                    new: e.new_string.clone(),
                    near_line: e.near_line,
                })
                .collect(),
        )),
        (None, false) => Err(ToolError::new(
            "Error: give old_string and new_string (or an edits array).",
        )),
        (None, true) => {
            let Some(old) = &args.old_string else {
                return Err(ToolError::new(
                    "Error: new_string needs the old_string it replaces.",
                ));
            };
            // A missing new_string deletes old_string (as in the reference).
            let empty = String::new();
            let new = args.new_string.as_ref().unwrap_or(&empty);
            if args.replace_all {
                if args.near_line.is_some() {
                    return Err(ToolError::new(
                        "Error: replace_all cannot be combined with near_line.",
                    ));
                }
                return Ok(Plan::ReplaceAll {
                    old: old.clone(),
                    new: new.clone(),
                });
            }
            Ok(Plan::Single(Edit {
                old: old.clone(),
                new: new.clone(),
                near_line: args.near_line,
            }))
        }
    }
}

fn load(path: &Path, ctx: &Context) -> Result<String, ToolError> {
    if !crate::ledger::was_read(ctx, path) {
        return Err(ToolError::new(format!(
            "Error: read {} with read_file (or diff_file) before editing it, so the edit is based on its current content.",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(|e| ToolError::new(explain(path, &e)))?;
    String::from_utf8(bytes)
        .map_err(|_| ToolError::new(format!("Error: {} is not UTF-8 text", path.display())))
}

/// `edit_file`.
pub struct EditFile;

impl Tool for EditFile {
    type Args = EditFileArgs;
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Replace exact strings in a file, or apply multiple replacements atomically (edits). Fails if old_string is not found or matches several places (unless near_line or replace_all). Requires a prior read_file or diff_file of the same path.";

    fn meta() -> ToolMeta {
        ToolMeta {
            task_agent: true,
            primary_key: Some("path"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &EditFileArgs, ctx: &Context) -> Result<Preview, ToolError> {
        let plan = plan(args)?;
        let path = ctx.resolve(&args.path);
        let old = load(&path, ctx)?;
        let applied = apply(&old, &plan).map_err(|e| ToolError::new(format!("Error: {e}")))?;
        crate::ledger::record_prepared(ctx, &path, old.as_bytes());
        let name = path.display().to_string();
        let header = match plan {
            Plan::ReplaceAll { .. } => format!(
                "edit_file: {} ({} occurrences)",
                args.path, applied.replacements
            ),
            Plan::Batch(_) => format!(
                "edit_file: {} ({} edit{})",
                args.path,
                applied.replacements,
                if applied.replacements == 1 { "" } else { "s" }
            ),
            Plan::Single(_) => format!("edit_file: {}", args.path),
        };
        Ok(Preview::ask(header).with_body(unified(&old, &applied.content, &name, &name, 3)))
    }

    fn execute(args: EditFileArgs, ctx: &Context) -> Result<Output, ToolError> {
        let plan = plan(&args)?;
        let path = ctx.resolve(&args.path);
        let old = load(&path, ctx)?;
        if crate::ledger::changed_since_prepare(ctx, &path, old.as_bytes()) {
            return Err(ToolError::new(format!(
                "Error: {} changed after this edit was previewed; nothing was written. Read it again and redo the edit.",
                path.display()
            )));
        }
        let applied = apply(&old, &plan).map_err(|e| ToolError::new(format!("Error: {e}")))?;
        write_atomically(&path, applied.content.as_bytes())?;
        crate::ledger::record_read(ctx, &path);
        let name = path.display().to_string();
        let diff = unified(&old, &applied.content, &name, &name, 2);
        Ok(Output {
            text: format!(
                "Edited {}: {} replacement{}.",
                path.display(),
                applied.replacements,
                if applied.replacements == 1 { "" } else { "s" }
            ),
            preview: Some(diff),
            images: Vec::new(),
        })
    }
}

/// Writes via a temporary file and a rename, so a crash never leaves half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.turnstone-edit"));
    let perms = std::fs::metadata(path).map(|m| m.permissions()).ok();
    std::fs::write(&tmp, bytes).map_err(|e| ToolError::new(explain(&tmp, &e)))?;
    if let Some(p) = perms {
        let _ = std::fs::set_permissions(&tmp, p);
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        ToolError::new(explain(path, &e))
    })
}
