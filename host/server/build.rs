//! Minifies the committed `docs/openapi.json` (kept indented for readers)
//! into the build directory: the server embeds the ~200 KB compact copy
//! instead of the ~400 KB readable one.

use std::error::Error;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn Error>> {
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
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("openapi.min.json");
    std::fs::write(&out, minified)?;
    Ok(())
}
