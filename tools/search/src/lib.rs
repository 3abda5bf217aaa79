//! Built-in `search`: a recursive regular-expression search over the granted
//! workspace, implemented in the component (no shelling out). Honours
//! `.gitignore`/`.ignore` files, skips hidden and binary files, and caps what
//! it returns so one broad pattern cannot flood the context.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use turnstone_plugin_sdk::fs::explain;
use turnstone_plugin_sdk::prelude::*;

/// Most matching lines returned.
pub const MAX_MATCHES: usize = 200;
/// Most characters of one matching line shown.
pub const MAX_LINE_CHARS: usize = 300;
/// Files larger than this are skipped.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Arguments of `search`.
#[derive(Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// Regular expression (Rust/extended regex syntax).
    pub query: String,
    /// File or directory to search in (default: the working directory).
    #[serde(default)]
    pub path: Option<String>,
}

/// `search`.
pub struct Search;

fn compile(query: &str) -> Result<regex::Regex, ToolError> {
    if query.is_empty() {
        return Err(ToolError::new("Error: query must not be empty."));
    }
    regex::RegexBuilder::new(query)
        .size_limit(1 << 22)
        .build()
        .map_err(|e| ToolError::new(format!("Error: invalid regular expression: {e}")))
}

fn is_binary(path: &Path) -> bool {
    let mut head = [0u8; 8192];
    match std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) {
        Ok(n) => head[..n].contains(&0),
        Err(_) => true,
    }
}

fn display(path: &Path, base: &Path) -> String {
    path.strip_prefix(base)
        .unwrap_or(path)
        .display()
        .to_string()
}

impl Tool for Search {
    type Args = SearchArgs;
    const NAME: &'static str = "search";
    const DESCRIPTION: &'static str = "Search file contents recursively for a regular expression. Returns matching lines as path:line: text. Respects .gitignore; skips hidden and binary files.";

    fn meta() -> ToolMeta {
        ToolMeta {
            task_agent: true,
            auto_approve: true,
            primary_key: Some("query"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &SearchArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        compile(&args.query)?;
        Ok(Preview::auto(format!("search: {}", args.query)))
    }

    fn execute(args: SearchArgs, ctx: &Context) -> Result<Output, ToolError> {
        let re = compile(&args.query)?;
        let root = ctx.resolve(args.path.as_deref().unwrap_or("."));
        std::fs::metadata(&root).map_err(|e| ToolError::new(explain(&root, &e)))?;
        let base = ctx.working_dir.clone();
        let mut out = String::new();
        let mut matches = 0usize;
        let mut files_with_hits = 0usize;
        let mut truncated = false;
        let walker = ignore::WalkBuilder::new(&root)
            .hidden(true)
            .git_ignore(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .build();
        'files: for entry in walker.flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = entry.path();
            if entry.metadata().map_or(true, |m| m.len() > MAX_FILE_BYTES) || is_binary(path) {
                continue;
            }
            let Ok(file) = std::fs::File::open(path) else {
                continue;
            };
            let mut hit = false;
            let mut buf = Vec::new();
            let mut reader = BufReader::new(file);
            let mut line_no = 0usize;
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                line_no += 1;
                let line = String::from_utf8_lossy(&buf);
                let line = line.trim_end_matches(['\n', '\r']);
                if !re.is_match(line) {
                    continue;
                }
                if matches == MAX_MATCHES {
                    truncated = true;
                    break 'files;
                }
                matches += 1;
                hit = true;
                let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
                let more = if shown.len() < line.len() { " …" } else { "" };
                out.push_str(&format!(
                    "{}:{line_no}: {shown}{more}\n",
                    display(path, &base)
                ));
            }
            if hit {
                files_with_hits += 1;
            }
        }
        if matches == 0 {
            return Ok(format!("No matches for /{}/.", args.query).into());
        }
        if truncated {
            out.push_str(&format!(
                "\n[stopped after {MAX_MATCHES} matches; narrow the pattern or the path]\n"
            ));
        } else {
            out.push_str(&format!(
                "\n[{matches} match{} in {files_with_hits} file{}]\n",
                if matches == 1 { "" } else { "es" },
                if files_with_hits == 1 { "" } else { "s" }
            ));
        }
        Ok(out.into())
    }
}

register_tools!(Search);
