//! `write_file`: overwrite or append, creating parent directories. The
//! approval preview shows a diff against the current content.

use crate::diff::unified;
use turnstone_plugin_sdk::fs::explain;
use turnstone_plugin_sdk::prelude::*;

/// Arguments of `write_file`.
#[derive(Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// Absolute or relative file path.
    pub path: String,
    /// The full file content to write.
    pub content: String,
    /// "overwrite" (default) replaces the file; "append" adds content to the end.
    #[serde(default)]
    pub mode: Option<String>,
}

fn appending(args: &WriteFileArgs) -> Result<bool, ToolError> {
    match args.mode.as_deref().unwrap_or("overwrite") {
        "overwrite" => Ok(false),
        "append" => Ok(true),
        other => Err(ToolError::new(format!(
            "Error: mode must be \"overwrite\" or \"append\" (got {other:?})."
        ))),
    }
}

/// `write_file`.
pub struct WriteFile;

impl Tool for WriteFile {
    type Args = WriteFileArgs;
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str = "Write content to a file, creating it (and its parent directories) if needed. mode \"overwrite\" (default) replaces the file; \"append\" adds to the end.";

    fn meta() -> ToolMeta {
        ToolMeta {
            task_agent: true,
            primary_key: Some("path"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &WriteFileArgs, ctx: &Context) -> Result<Preview, ToolError> {
        let append = appending(args)?;
        if args.path.trim().is_empty() {
            return Err(ToolError::new("Error: path must not be empty."));
        }
        let path = ctx.resolve(&args.path);
        let existing = std::fs::read_to_string(&path).ok();
        let verb = match (&existing, append) {
            (None, _) => "create",
            (Some(_), true) => "append to",
            (Some(_), false) => "overwrite",
        };
        let header = format!(
            "write_file: {verb} {} ({} bytes)",
            args.path,
            args.content.len()
        );
        let old = existing.unwrap_or_default();
        let new = if append {
            format!("{old}{}", args.content)
        } else {
            args.content.clone()
        };
        let name = path.display().to_string();
        Ok(Preview::ask(header).with_body(unified(&old, &new, &name, &name, 3)))
    }

    fn execute(args: WriteFileArgs, ctx: &Context) -> Result<Output, ToolError> {
        let append = appending(&args)?;
        let path = ctx.resolve(&args.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| ToolError::new(explain(parent, &e)))?;
        }
        let result = if append {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| f.write_all(args.content.as_bytes()))
        } else {
            std::fs::write(&path, &args.content)
        };
        result.map_err(|e| ToolError::new(explain(&path, &e)))?;
        // The model knows what it just wrote: later edits need no re-read.
        crate::ledger::record_read(ctx, &path);
        Ok(format!(
            "{} {} bytes to {}",
            if append { "Appended" } else { "Wrote" },
            args.content.len(),
            path.display()
        )
        .into())
    }
}
