//! `read_file`: numbered lines with offset/limit, images as image data for
//! vision models, clear errors for everything else. A successful text read is
//! recorded in the session's ledger so `edit_file` may follow.

use base64::Engine as _;
use std::io::{BufRead, BufReader};
use std::path::Path;
use turnstone_plugin_sdk::prelude::*;

/// Largest image returned to a model.
const MAX_IMAGE_BYTES: u64 = 4 * 1024 * 1024;
/// Longest line returned; longer lines are cut with a marker.
const MAX_LINE_CHARS: usize = 2000;

/// Read a file.
#[derive(Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// Absolute or relative file path.
    pub path: String,
    /// Line number to start from (1-based, default: 1). Text files only.
    pub offset: Option<u64>,
    /// Maximum number of lines to read. Omit for the full file. Text files only.
    pub limit: Option<u64>,
}

/// The tool.
pub struct ReadFile;

fn image_type(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "tif" | "tiff" => "image/tiff",
        "ico" => "image/x-icon",
        _ => return None,
    })
}

fn open_error(path: &Path, e: std::io::Error, _ctx: &Context) -> ToolError {
    ToolError::new(turnstone_plugin_sdk::fs::explain(path, &e))
}

fn read_image(
    path: &Path,
    media_type: &str,
    size: u64,
    ctx: &Context,
) -> Result<Output, ToolError> {
    if size > MAX_IMAGE_BYTES {
        return Err(ToolError::new(format!(
            "image {} is {size} bytes; images over {MAX_IMAGE_BYTES} bytes (4 MB) are refused",
            path.display()
        )));
    }
    if !ctx.supports_vision {
        return Ok(format!(
            "{} is an image ({media_type}, {size} bytes). The current model cannot view images.",
            path.display()
        )
        .into());
    }
    let bytes = std::fs::read(path).map_err(|e| open_error(path, e, ctx))?;
    Ok(Output {
        text: format!("Image {} ({media_type}, {size} bytes)", path.display()),
        preview: None,
        images: vec![Image {
            media_type: media_type.to_string(),
            data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
        }],
    })
}

fn read_text(path: &Path, args: &ReadFileArgs, ctx: &Context) -> Result<Output, ToolError> {
    let file = std::fs::File::open(path).map_err(|e| open_error(path, e, ctx))?;
    let mut reader = BufReader::new(file);
    // A NUL byte in the first 8 KiB marks a binary file.
    let head = reader.fill_buf().map_err(|e| open_error(path, e, ctx))?;
    if head[..head.len().min(8192)].contains(&0) {
        return Err(ToolError::new(format!(
            "{} is a binary file; read_file shows text and images only",
            path.display()
        )));
    }
    let offset = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(u64::MAX);
    if limit == 0 {
        return Err(ToolError::new("limit must be at least 1"));
    }
    let mut out = String::new();
    let mut total = 0u64;
    let mut shown = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| open_error(path, e, ctx))?;
        if n == 0 {
            break;
        }
        total += 1;
        if total < offset || shown >= limit {
            continue;
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        let cut = line.char_indices().nth(MAX_LINE_CHARS).map(|(i, _)| i);
        match cut {
            Some(i) => out.push_str(&format!("{total:>6}\t{}… [line truncated]\n", &line[..i])),
            None => out.push_str(&format!("{total:>6}\t{line}\n")),
        }
        shown += 1;
    }
    if total == 0 {
        return Ok(format!("{} is empty", path.display()).into());
    }
    if offset > total {
        return Err(ToolError::new(format!(
            "offset {offset} is past the end of {} ({total} lines)",
            path.display()
        )));
    }
    if shown < total {
        let last = offset + shown - 1;
        out.push_str(&format!(
            "\n[showing lines {offset}-{last} of {total}; use offset/limit for more]\n"
        ));
    }
    Ok(out.into())
}

impl Tool for ReadFile {
    type Args = ReadFileArgs;
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a file and return its contents with line numbers. \
        Use offset and limit to read part of a large file. Image files (PNG, JPEG, GIF, WebP, \
        BMP, TIFF, ICO) are returned as images when the model supports vision; SVG is read as text.";

    fn meta() -> ToolMeta {
        ToolMeta {
            task_agent: true,
            auto_approve: true,
            primary_key: Some("path"),
            ..ToolMeta::default()
        }
    }

    fn prepare(args: &ReadFileArgs, _ctx: &Context) -> Result<Preview, ToolError> {
        if args.path.trim().is_empty() {
            return Err(ToolError::new("path must not be empty"));
        }
        Ok(Preview::auto(format!("read_file: {}", args.path)))
    }

    fn execute(args: ReadFileArgs, ctx: &Context) -> Result<Output, ToolError> {
        let path = ctx.resolve(&args.path);
        let meta = std::fs::metadata(&path).map_err(|e| open_error(&path, e, ctx))?;
        if meta.is_dir() {
            return Err(ToolError::new(format!(
                "{} is a directory, not a file",
                path.display()
            )));
        }
        match image_type(&path) {
            Some(media) => read_image(&path, media, meta.len(), ctx),
            None => {
                let out = read_text(&path, &args, ctx)?;
                crate::ledger::record_read(ctx, &path);
                Ok(out)
            }
        }
    }
}
