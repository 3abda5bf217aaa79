//! Files in the capability audit. WASI p2's filesystem is wasmtime-wasi's
//! own implementation; the path-taking methods of `wasi:filesystem/types`
//! are shadowed here by wrappers that call that same implementation and
//! record what was opened (read or write), created, renamed or removed —
//! including what the sandbox refused. Everything else of the interface
//! stays wasmtime-wasi's.

use crate::state::HostState;
use std::path::PathBuf;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::OpenMode;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};

/// The filesystem interface as wasmtime-wasi registers it. A guest built
/// against any 0.2.x reaches this instance (semver-compatible lookup), so
/// the wrappers cover them all; a test checks an open is recorded.
const FS_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// The host path behind an open descriptor (Linux: its `/proc/self/fd` link).
fn host_path(d: &Descriptor) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    let fd = match d {
        Descriptor::Dir(d) => d.dir.as_raw_fd(),
        Descriptor::File(f) => f.file.as_raw_fd(),
    };
    let p = std::fs::read_link(format!("/proc/self/fd/{fd}")).ok()?;
    Some(
        match p.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
            Some(s) => PathBuf::from(s),
            None => p,
        },
    )
}

/// `parent`'s host path joined with `path` (what the guest named).
fn joined(state: &mut HostState, parent: &Resource<Descriptor>, path: &str) -> String {
    let base = state
        .filesystem()
        .table
        .get(parent)
        .ok()
        .and_then(host_path);
    match base {
        Some(b) => b.join(path).display().to_string(),
        None => path.to_string(),
    }
}

/// The refusal as people read it, e.g. `not permitted (read-only grant)`.
fn refused(e: &ErrorCode) -> String {
    match e {
        ErrorCode::NotPermitted | ErrorCode::ReadOnly | ErrorCode::Access => {
            format!(
                "{}: the plugin's filesystem grant does not allow it",
                e.name()
            )
        }
        _ => e.name().to_string(),
    }
}

/// Converts wasmtime-wasi's result to the guest's, recording the operation
/// (refused or not) under `path`. A trap stays a trap.
fn record(
    state: &mut HostState,
    res: wasmtime_wasi::p2::FsResult<()>,
    path: String,
    access: &'static str,
) -> wasmtime::Result<Result<(), ErrorCode>> {
    let ret = match res {
        Ok(()) => Ok(()),
        Err(e) => Err(e.downcast()?),
    };
    let denied = ret.as_ref().err().map(refused);
    state.audit.file(path, access, denied);
    Ok(ret)
}

/// Replaces the path-taking methods of `wasi:filesystem/types` in `linker`
/// with recording wrappers.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut inst = linker.instance(FS_TYPES)?;
    inst.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, HostState>,
         (fd, pf, path, of, df): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                let wants_write = of.intersects(OpenFlags::CREATE | OpenFlags::TRUNCATE)
                    || df.contains(DescriptorFlags::WRITE);
                // The parent is looked up only when the open fails (the new
                // descriptor names the file otherwise).
                let parent = Resource::<Descriptor>::new_borrow(fd.rep());
                let named = path.clone();
                let mut view = store.data_mut().filesystem();
                let res = HostDescriptor::open_at(&mut view, fd, pf, path, of, df).await;
                let (ret, recorded, write, denied) = match res {
                    Ok(new) => {
                        let d = view.table.get(&new)?;
                        let mode = match d {
                            Descriptor::File(f) => f.open_mode,
                            Descriptor::Dir(d) => d.open_mode,
                        };
                        let p = host_path(d).map(|p| p.display().to_string());
                        (Ok(new), p, mode.contains(OpenMode::WRITE), None)
                    }
                    Err(e) => {
                        let code = e.downcast()?;
                        let why = refused(&code);
                        (Err(code), None, wants_write, Some(why))
                    }
                };
                // A directory opened to list it is a read like any other.
                let access = if write { "write" } else { "read" };
                let path = match recorded {
                    Some(p) => p,
                    None => joined(store.data_mut(), &parent, &named),
                };
                store.data_mut().audit.file(path, access, denied);
                Ok((ret,))
            })
        },
    )?;
    macro_rules! path_op {
        ($name:literal, $method:ident, $access:literal) => {
            inst.func_wrap_async(
                $name,
                |mut store: StoreContextMut<'_, HostState>,
                 (fd, path): (Resource<Descriptor>, String)| {
                    Box::new(async move {
                        let target = joined(store.data_mut(), &fd, &path);
                        let mut view = store.data_mut().filesystem();
                        let res = HostDescriptor::$method(&mut view, fd, path).await;
                        let ret = record(store.data_mut(), res, target, $access)?;
                        Ok((ret,))
                    })
                },
            )?;
        };
    }
    path_op!(
        "[method]descriptor.create-directory-at",
        create_directory_at,
        "mkdir"
    );
    path_op!(
        "[method]descriptor.unlink-file-at",
        unlink_file_at,
        "remove"
    );
    path_op!(
        "[method]descriptor.remove-directory-at",
        remove_directory_at,
        "remove"
    );
    inst.func_wrap_async(
        "[method]descriptor.rename-at",
        |mut store: StoreContextMut<'_, HostState>,
         (fd, old, new_fd, new): (Resource<Descriptor>, String, Resource<Descriptor>, String)| {
            Box::new(async move {
                let from = joined(store.data_mut(), &fd, &old);
                let to = joined(store.data_mut(), &new_fd, &new);
                let mut view = store.data_mut().filesystem();
                let res = HostDescriptor::rename_at(&mut view, fd, old, new_fd, new).await;
                let ret = record(store.data_mut(), res, format!("{from} -> {to}"), "rename")?;
                Ok((ret,))
            })
        },
    )?;
    inst.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store: StoreContextMut<'_, HostState>,
         (fd, src, dest): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                let at = joined(store.data_mut(), &fd, &dest);
                let mut view = store.data_mut().filesystem();
                let res = HostDescriptor::symlink_at(&mut view, fd, src.clone(), dest).await;
                let ret = record(store.data_mut(), res, format!("{at} -> {src}"), "symlink")?;
                Ok((ret,))
            })
        },
    )?;
    inst.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store: StoreContextMut<'_, HostState>,
         (fd, pf, old, new_fd, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let from = joined(store.data_mut(), &fd, &old);
                let to = joined(store.data_mut(), &new_fd, &new);
                let mut view = store.data_mut().filesystem();
                let res = HostDescriptor::link_at(&mut view, fd, pf, old, new_fd, new).await;
                let ret = record(store.data_mut(), res, format!("{to} -> {from}"), "link")?;
                Ok((ret,))
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
