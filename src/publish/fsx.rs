//! The few file-system primitives publishing is built from: fsync of files
//! and directories, atomic renames (`renameat2` with `RENAME_EXCHANGE` or
//! `RENAME_NOREPLACE`), the same-file-system check and phase markers for
//! crash tests.
//!
//! Nothing here ever copies data: every move is a rename on one file system.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustix::fs::{renameat_with, RenameFlags, CWD};
use rustix::io::Errno;

use super::error::{IoContext, PublishError};

/// fsyncs a file's data and metadata.
pub(crate) fn sync_file(path: &Path) -> Result<(), PublishError> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .ctx("cannot fsync", path)
}

/// fsyncs a directory, making renames and creations inside it durable.
pub(crate) fn sync_dir(path: &Path) -> Result<(), PublishError> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .ctx("cannot fsync directory", path)
}

/// fsyncs `path`'s parent directory.
pub(crate) fn sync_parent(path: &Path) -> Result<(), PublishError> {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => sync_dir(p),
        _ => sync_dir(Path::new(".")),
    }
}

/// Creates `dir` and its missing ancestors, fsyncing each new directory's
/// parent so that the chain survives a crash.
pub(crate) fn create_dirs(dir: &Path) -> Result<(), PublishError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => sync_parent(dir),
        Err(e) if e.kind() == ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(PublishError::io("cannot create directory", dir, e)),
    }
}

/// Atomically exchanges two directories (`RENAME_EXCHANGE`).
pub(crate) fn exchange(a: &Path, b: &Path) -> Result<(), PublishError> {
    renameat2(a, b, RenameFlags::EXCHANGE, "RENAME_EXCHANGE")
}

/// Atomically renames `from` to `to`, failing if `to` exists
/// (`RENAME_NOREPLACE`).
pub(crate) fn rename_noreplace(from: &Path, to: &Path) -> Result<(), PublishError> {
    renameat2(from, to, RenameFlags::NOREPLACE, "RENAME_NOREPLACE")
}

fn renameat2(
    a: &Path,
    b: &Path,
    flags: RenameFlags,
    flag: &'static str,
) -> Result<(), PublishError> {
    match renameat_with(CWD, a, CWD, b, flags) {
        Ok(()) => Ok(()),
        Err(e) if e == Errno::INVAL || e == Errno::NOSYS || e == Errno::OPNOTSUPP => {
            Err(PublishError::NoAtomicSwap {
                path: b.display().to_string(),
                flag,
                source: e.into(),
            })
        }
        Err(e) => Err(PublishError::io("cannot swap in", a, e.into())),
    }
}

/// The device id of a path (`st_dev`).
pub(crate) fn device(path: &Path) -> Result<u64, PublishError> {
    fs::metadata(path).map(|m| m.dev()).ctx("cannot stat", path)
}

/// Removes a file if it exists.
pub(crate) fn remove_file_if_exists(path: &Path) -> Result<bool, PublishError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(PublishError::io("cannot remove", path, e)),
    }
}

/// Writes `bytes` to `path` atomically: a `.tmp` sibling, fsync, rename,
/// fsync of the directory.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PublishError> {
    let tmp = tmp_path(path);
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .ctx("cannot create", &tmp)?;
    f.write_all(bytes).ctx("cannot write", &tmp)?;
    f.sync_all().ctx("cannot fsync", &tmp)?;
    drop(f);
    fs::rename(&tmp, path).ctx("cannot rename", &tmp)?;
    sync_parent(path)
}

/// The temporary name [`write_atomic`] uses for `path`.
pub(crate) fn tmp_path(path: &Path) -> std::path::PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    path.with_file_name(name)
}

/// Marks the start of a step of a swap, for crash tests (see
/// [`crate::hooks::phase`]; nothing in a build without test hooks).
pub(crate) fn phase(name: &str) {
    crate::hooks::phase(name)
}

/// The files under `dir` whose names `wanted` accepts, descending into the
/// directories whose names `descend` accepts; sorted.
pub(crate) fn find_files(
    dir: &Path,
    descend: &dyn Fn(&str) -> bool,
    wanted: &dyn Fn(&str) -> bool,
) -> Result<Vec<PathBuf>, PublishError> {
    let mut out = Vec::new();
    find_into(dir, descend, wanted, &mut out)?;
    out.sort();
    Ok(out)
}

fn find_into(
    dir: &Path,
    descend: &dyn Fn(&str) -> bool,
    wanted: &dyn Fn(&str) -> bool,
    out: &mut Vec<PathBuf>,
) -> Result<(), PublishError> {
    for entry in fs::read_dir(dir).ctx("cannot list", dir)? {
        let entry = entry.ctx("cannot list", dir)?;
        let path = entry.path();
        let ft = entry.file_type().ctx("cannot stat", &path)?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if ft.is_dir() {
            if descend(&name) {
                find_into(&path, descend, wanted, out)?;
            }
        } else if wanted(&name) {
            out.push(path);
        }
    }
    Ok(())
}
