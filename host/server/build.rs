//! Prepares what the server embeds, in the build directory:
//! - the committed `docs/openapi.json` (kept indented for readers), minified
//!   and gzipped: 31 KB in the binary instead of the 211 KB minified text;
//! - the browser UI of `web/`, text files gzipped (served as they are to
//!   clients that take gzip, which every browser does), and a table of them
//!   (`web_assets.rs`) for `web.rs` to include.

use flate2::Compression;
use flate2::write::GzEncoder;
use std::error::Error;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// File types worth compressing; fonts (woff2) and images already are.
const COMPRESSIBLE: &[&str] = &["html", "js", "css", "svg", "json", "txt", "map"];

fn main() -> Result<(), Box<dyn Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    openapi(&out)?;
    web(Path::new("../../web"), &out)?;
    Ok(())
}

/// `bytes` gzipped at the best level; the header carries no time or name,
/// so the output depends on the input alone.
fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    encoder.write_all(bytes)?;
    encoder.finish()
}

fn openapi(out: &Path) -> Result<(), Box<dyn Error>> {
    let source = "../../docs/openapi.json";
    println!("cargo:rerun-if-changed={source}");
    // A missing or broken file (a merge conflict, say) must not stop the
    // build: the test that rewrites it has to compile. It embeds nothing,
    // `/openapi.json` answers 500 and that test fails until it is regenerated.
    let parsed = std::fs::read_to_string(source)
        .map_err(|e| e.to_string())
        .and_then(|text| {
            serde_json::from_str::<serde_json::Value>(&text).map_err(|e| e.to_string())
        });
    let minified = match parsed {
        Ok(doc) => serde_json::to_string(&doc)?,
        Err(e) => {
            println!(
                "cargo:warning={source} is missing or not JSON ({e}): regenerate it with \
                 `TURNSTONE_BLESS_OPENAPI=1 cargo test -p turnstone-server --lib openapi`"
            );
            String::new()
        }
    };
    std::fs::write(out.join("openapi.min.json.gz"), gzip(minified.as_bytes())?)?;
    Ok(())
}

fn web(root: &Path, out: &Path) -> Result<(), Box<dyn Error>> {
    // A directory makes cargo rerun this script when anything under it changes.
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(root, root, &mut files)?;
    files.sort();
    let dir = out.join("web");
    let mut table = String::from("&[\n");
    for (i, rel) in files.iter().enumerate() {
        let bytes = std::fs::read(root.join(rel))?;
        let ext = rel.rsplit('.').next().unwrap_or("");
        let gzipped = COMPRESSIBLE.contains(&ext);
        let body = if gzipped { gzip(&bytes)? } else { bytes };
        let path = dir.join(i.to_string());
        std::fs::create_dir_all(&dir)?;
        std::fs::write(&path, body)?;
        writeln!(
            table,
            "    Asset {{ path: {rel:?}, body: include_bytes!({:?}), gzipped: {gzipped} }},",
            path.display().to_string()
        )?;
    }
    table.push(']');
    std::fs::write(out.join("web_assets.rs"), table)?;
    Ok(())
}

/// Every file under `dir`, as a `/`-separated path relative to `root`.
fn collect(root: &Path, dir: &Path, files: &mut Vec<String>) -> Result<(), Box<dyn Error>> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(root, &path, files)?;
        } else {
            let rel = path.strip_prefix(root)?;
            let parts: Vec<&str> = rel
                .components()
                .map(|c| {
                    c.as_os_str()
                        .to_str()
                        .ok_or("a file name that is not UTF-8")
                })
                .collect::<Result<_, _>>()?;
            files.push(parts.join("/"));
        }
    }
    Ok(())
}
