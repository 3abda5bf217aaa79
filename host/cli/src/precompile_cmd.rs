//! `turnstone plugins precompile`: compile every built-in component ahead of
//! time and store the result beside it, so the first start of a fresh install
//! (or a container with an empty cache) loads them without compiling.

use crate::app::PluginFlags;
use crate::config;
use anyhow::{Context, Result, bail};
use futures::StreamExt;
use std::io::Write;
use std::time::Instant;
use turnstone_runtime::registry::{default_builtin_dir, discover};
use turnstone_runtime::{Runtime, RuntimeOptions};

/// Precompiles the built-in directory's components; fails if any did not.
pub async fn run(flags: &PluginFlags, out: &mut impl Write) -> Result<()> {
    let (cfg, _) = config::load(flags.config.as_deref())?;
    let root = flags
        .builtin_dir
        .clone()
        .or(cfg.plugins.builtin_dir.clone())
        .or_else(default_builtin_dir)
        .context("no built-in component directory found; pass --builtin-dir")?;
    // The same engine settings as a start: the entry's name pins them.
    let runtime = Runtime::new(RuntimeOptions::default())?;
    let dirs = discover(&root);
    let started = Instant::now();
    // Two at a time: Cranelift already spreads one component over the cores.
    let results: Vec<_> = futures::stream::iter(dirs.iter())
        .map(|dir| {
            let runtime = &runtime;
            async move {
                let t = Instant::now();
                (dir, runtime.precompile_builtin(dir).await, t.elapsed())
            }
        })
        .buffer_unordered(2)
        .collect()
        .await;
    let mut failed = 0;
    for (dir, result, took) in results {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        match result {
            Ok(path) => writeln!(out, "{name}: {} ({} ms)", path.display(), took.as_millis())?,
            Err(e) => {
                failed += 1;
                writeln!(out, "{name}: FAILED: {e}")?;
            }
        }
    }
    writeln!(
        out,
        "precompiled {} of {} built-in components in {} ms",
        dirs.len() - failed,
        dirs.len(),
        started.elapsed().as_millis()
    )?;
    if failed > 0 {
        bail!("{failed} built-in components did not compile");
    }
    Ok(())
}
