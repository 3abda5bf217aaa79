//! Building a guest crate into a staged plugin directory, the way `cargo
//! xtask build-components` stages the built-ins.

use crate::KitError;
use std::path::{Path, PathBuf};
use std::process::Command;

const WASM_TARGET: &str = "wasm32-wasip2";

/// Builds the guest crate at `crate_dir` (`cargo build --release --target
/// wasm32-wasip2`, into its own target directory) and stages the component
/// with the crate's `plugin.toml` in a directory under that target
/// directory; returns the staged directory. Cargo's own output is shown
/// when the build fails.
pub fn build_component(crate_dir: &Path) -> Result<PathBuf, KitError> {
    build_component_in(crate_dir, None)
}

/// [`build_component`] into `target_dir` instead of the crate's own (share
/// one with your other wasm builds to compile the SDK once).
pub fn build_component_in(
    crate_dir: &Path,
    target_dir: Option<&Path>,
) -> Result<PathBuf, KitError> {
    let manifest_path = crate_dir.join("Cargo.toml");
    let meta = metadata(&manifest_path)?;
    let target_dir =
        match target_dir {
            Some(t) => t.to_path_buf(),
            None => PathBuf::from(meta["target_directory"].as_str().ok_or_else(|| {
                KitError::Build("cargo metadata names no target directory".into())
            })?),
        };
    let want = std::fs::canonicalize(&manifest_path)?;
    let package = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| {
            p["manifest_path"]
                .as_str()
                .and_then(|m| std::fs::canonicalize(m).ok())
                .is_some_and(|m| m == want)
        })
        .ok_or_else(|| KitError::Build(format!("{} is not a package", manifest_path.display())))?;
    // The artifact is named after the cdylib target (`[lib] name`), which
    // defaults to the package name.
    let crate_name = package["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "cdylib"))
        })
        .and_then(|t| t["name"].as_str())
        .or_else(|| package["name"].as_str())
        .ok_or_else(|| KitError::Build("the package has no cdylib target".into()))?
        .replace('-', "_");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "build",
            "--release",
            "--target",
            WASM_TARGET,
            "--manifest-path",
        ])
        .arg(&manifest_path)
        .arg("--target-dir")
        .arg(&target_dir)
        .output()?;
    if !out.status.success() {
        return Err(KitError::Build(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    let manifest_text = std::fs::read_to_string(crate_dir.join("plugin.toml"))?;
    let manifest: toml::Table =
        toml::from_str(&manifest_text).map_err(|e| KitError::Build(format!("plugin.toml: {e}")))?;
    let plugin = manifest.get("plugin").and_then(|p| p.as_table());
    let name = plugin
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .ok_or_else(|| KitError::Build("plugin.toml has no [plugin] name".into()))?;
    let component = plugin
        .and_then(|p| p.get("component"))
        .and_then(|c| c.as_str())
        .map_or_else(|| format!("{name}.wasm"), str::to_string);
    let built = target_dir
        .join(WASM_TARGET)
        .join("release")
        .join(format!("{crate_name}.wasm"));
    let stage = target_dir.join("plugin-test").join(name);
    std::fs::create_dir_all(&stage)?;
    // Tests running side by side load what another one is staging: each
    // file is replaced whole (written beside it, then renamed).
    replace(&built, &stage.join(component))?;
    let tmp = stage.join(format!(".plugin.toml.{}", unique()));
    std::fs::write(&tmp, manifest_text)?;
    std::fs::rename(&tmp, stage.join("plugin.toml"))?;
    Ok(stage)
}

/// A suffix no other stager (thread or process) uses at the same time.
fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{n}", std::process::id())
}

/// Copies `from` over `to` atomically.
fn replace(from: &Path, to: &Path) -> Result<(), KitError> {
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = to.with_file_name(format!(".{name}.{}", unique()));
    std::fs::copy(from, &tmp)?;
    std::fs::rename(&tmp, to)?;
    Ok(())
}

fn metadata(manifest_path: &Path) -> Result<serde_json::Value, KitError> {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--manifest-path",
        ])
        .arg(manifest_path)
        .output()?;
    if !out.status.success() {
        return Err(KitError::Build(
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| KitError::Build(format!("cargo metadata: {e}")))
}
