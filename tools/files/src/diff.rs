//! `diff_file`: a unified diff of two files, or of a file against a string.
//! Also renders the diffs shown in `edit_file` and `write_file` previews.

use std::path::Path;
use turnstone_plugin_sdk::fs::explain;
use turnstone_plugin_sdk::prelude::*;

/// Most context lines a diff may ask for.
pub const MAX_CONTEXT: usize = 20;

/// A unified diff of `old` → `new` (empty when they are equal).
pub fn unified(old: &str, new: &str, from: &str, to: &str, context: usize) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(context)
        .header(from, to)
        .to_string()
}

/// Reads a text file for diffing; binary files are refused.
pub fn read_text(path: &Path) -> Result<String, ToolError> {
    let bytes = std::fs::read(path).map_err(|e| ToolError::new(explain(path, &e)))?;
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err(ToolError::new(format!(
            "{} is a binary file; diff_file compares text only",
            path.display()
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| ToolError::new(format!("{} is not valid UTF-8 text", path.display())))
}

/// Arguments of `diff_file`.
#[derive(Deserialize, JsonSchema)]
pub struct DiffFileArgs {
    /// The file to compare.
    pub path: String,
    /// A second file to compare against.
    #[serde(default)]
    pub path2: Option<String>,
    /// Text to compare the file against (instead of path2).
    #[serde(default)]
    pub content: Option<String>,
    /// Context lines around each change (0-20, default 3).
    #[serde(default)]
    pub context_lines: Option<usize>,
}

/// `diff_file`.
pub struct DiffFile;

impl DiffFile {
    fn validate(args: &DiffFileArgs) -> Result<usize, ToolError> {
        if args.path2.is_some() == args.content.is_some() {
            return Err(ToolError::new(
                "Error: give exactly one of path2 (a second file) or content (a string).",
            ));
        }
        let context = args.context_lines.unwrap_or(3);
        if context > MAX_CONTEXT {
            return Err(ToolError::new(format!(
                "Error: context_lines must be between 0 and {MAX_CONTEXT} (got {context})."
            )));
        }
        Ok(context)
    }
}

impl Tool for DiffFile {
    type Args = DiffFileArgs;
    const NAME: &'static str = "diff_file";
    const DESCRIPTION: &'static str = "Show a unified diff between two files, or between a file and a provided string. Binary files are refused. Counts as reading the file(s) for edit_file.";

    fn meta() -> ToolMeta {
        ToolMeta {
            task_agent: true,
            auto_approve: true,
            primary_key: Some("path"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &DiffFileArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        Self::validate(args)?;
        Ok(Preview::auto(format!("diff_file: {}", args.path)))
    }

    fn execute(args: DiffFileArgs, ctx: &Context) -> Result<Output, ToolError> {
        let context = Self::validate(&args)?;
        let a = ctx.resolve(&args.path);
        let old = read_text(&a)?;
        let (new, label) = match (&args.path2, &args.content) {
            (Some(p2), _) => {
                let b = ctx.resolve(p2);
                let text = read_text(&b)?;
                crate::ledger::record_read(ctx, &b);
                (text, b.display().to_string())
            }
            // `validate` guarantees content is set when path2 is not.
            (None, content) => (content.clone().unwrap_or_default(), "(content)".to_string()),
        };
        crate::ledger::record_read(ctx, &a);
        let diff = unified(&old, &new, &a.display().to_string(), &label, context);
        Ok(if diff.is_empty() {
            "No differences.".into()
        } else {
            diff.into()
        })
    }
}
