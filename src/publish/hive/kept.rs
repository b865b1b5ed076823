//! The kept-versions area: displaced versions, kept for rollback and for
//! readers still holding them, outside what readers glob.
//!
//! A displaced version's directory is moved whole (one rename, file names
//! unchanged) from where the swap left it to
//! `ROOT/../.ROOTNAME.dqgate/versions/<rel_dir>/<seq>.<version>`, `seq`
//! counting displacements, so the newest kept version has the highest `seq`.
//! Pruning renames a version into the trash first, so a kept directory is
//! complete or absent, never half-deleted.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::layout::{self, parse_kept_name, Layout};
use crate::publish::error::{IoContext, PublishError};
use crate::publish::fsx;

/// One kept version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kept {
    pub seq: u64,
    pub version: String,
    pub dir: PathBuf,
}

/// The kept versions of a partition, oldest displacement first.
pub(crate) fn list(layout: &Layout) -> Result<Vec<Kept>, PublishError> {
    let root = layout.kept_root();
    let entries = match fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(PublishError::io("cannot list", &root, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.ctx("cannot list", &root)?;
        let name = entry.file_name();
        if let Some((seq, version)) = name.to_str().and_then(parse_kept_name) {
            out.push(Kept {
                seq,
                version,
                dir: entry.path(),
            });
        }
    }
    out.sort_by_key(|k| k.seq);
    Ok(out)
}

/// Every file under `dir` whose name ends in `.parquet`, hidden or not:
/// what a `**/*.parquet` glob would match.
pub(crate) fn all_parquet_files(dir: &Path) -> Result<Vec<PathBuf>, PublishError> {
    fsx::find_files(dir, &|_| true, &|name| name.ends_with(".parquet"))
}

/// Moves the displaced version at `from` (outside ROOT) to `to` in the kept
/// area: one rename, durable.
pub(crate) fn stow(from: &Path, to: &Path) -> Result<(), PublishError> {
    if let Some(parent) = to.parent() {
        fsx::create_dirs(parent)?;
    }
    fsx::rename_noreplace(from, to)?;
    fsx::sync_parent(to)?;
    fsx::sync_parent(from)
}

/// Removes all but the newest `keep` kept versions; returns their names.
pub(crate) fn prune(layout: &Layout, keep: usize) -> Result<Vec<String>, PublishError> {
    let kept = list(layout)?;
    let excess = kept.len().saturating_sub(keep);
    let mut removed = Vec::new();
    for k in &kept[..excess] {
        let name = k.dir.file_name().unwrap_or_default().to_os_string();
        let trash = layout::trash_dir(&layout.root)
            .join(&layout.rel)
            .join(&name);
        if let Some(parent) = trash.parent() {
            fsx::create_dirs(parent)?;
        }
        fs::rename(&k.dir, &trash).ctx("cannot move to the trash", &k.dir)?;
        match fs::remove_dir_all(&trash) {
            Err(e) if e.kind() != ErrorKind::NotFound => {
                return Err(PublishError::io("cannot remove", &trash, e))
            }
            _ => {}
        }
        removed.push(format!("{}/{}", layout.rel, k.version));
    }
    if !removed.is_empty() {
        fsx::sync_dir(&layout.kept_root())?;
    }
    Ok(removed)
}

/// Removes whatever is in the trash (versions whose pruning was
/// interrupted); returns what it removed.
pub(crate) fn empty_trash(root: &Path) -> Result<Vec<String>, PublishError> {
    let trash = layout::trash_dir(root);
    let entries = match fs::read_dir(&trash) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(PublishError::io("cannot list", &trash, e)),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let path = entry.ctx("cannot list", &trash)?.path();
        match fs::remove_dir_all(&path) {
            Ok(()) => removed.push(format!("trash {}", path.display())),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(PublishError::io("cannot remove", &path, e)),
        }
    }
    Ok(removed)
}
