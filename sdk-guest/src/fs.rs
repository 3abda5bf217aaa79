//! Filesystem helpers. Plugins use `std::fs` directly; the host only preopens
//! directories granted to the plugin, so anything else fails. These helpers
//! turn such failures into messages that say why.

use std::path::{Path, PathBuf};

/// Directories the host granted to this plugin (guest paths, which equal host paths).
pub fn granted_dirs() -> Vec<PathBuf> {
    wasip2::filesystem::preopens::get_directories()
        .into_iter()
        .map(|(_, path)| PathBuf::from(path))
        .collect()
}

/// Whether `path` (absolute) lies inside a granted directory.
pub fn is_granted(path: &Path) -> bool {
    granted_dirs().iter().any(|d| path.starts_with(d))
}

/// Explains an I/O error on `path`, naming a missing grant when that is the cause.
pub fn explain(path: &Path, err: &std::io::Error) -> String {
    if !is_granted(path) {
        let dirs = granted_dirs();
        let granted = if dirs.is_empty() {
            "none".to_string()
        } else {
            dirs.iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return format!(
            "no access to {}: it is outside the directories granted to this plugin (granted: {granted})",
            path.display()
        );
    }
    match err.kind() {
        std::io::ErrorKind::NotFound => format!("file not found: {}", path.display()),
        std::io::ErrorKind::PermissionDenied => format!(
            "permission denied: {} (the grant may be read-only)",
            path.display()
        ),
        _ => format!("{}: {err}", path.display()),
    }
}
