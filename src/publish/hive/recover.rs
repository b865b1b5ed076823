//! Recognising and finishing or undoing what a killed publish or rollback
//! left behind; `gc` over the whole table.
//!
//! Recovery runs under the partition lock, first thing in every publish and
//! rollback, and in `gc`. It reads the partition's journal (if any) and asks
//! one question: is the version the journal swaps in the published one?
//!
//! - Yes: the swap (the commit point) happened. The displaced version, if it
//!   is still at the swap directory (recognised by its record's version), is
//!   stowed into the kept area.
//! - No: the swap never happened. A publish's staged directory gets its
//!   files' staged names back and loses the new record (so it is again
//!   exactly what was audited, and a leftover is never published); a
//!   rollback has nothing to undo (the kept version is still in place).
//!
//! Then the journal is removed. Every step is idempotent, so a recovery
//! killed half-way is simply run again.

use std::collections::BTreeSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::journal::{Journal, Op};
use super::kept;
use super::layout::{self, Layout, RECORD};
use super::lock::PartitionLock;
use crate::publish::error::{IoContext, PublishError};
use crate::publish::fsx;
use crate::publish::record::Record;

/// Finishes or undoes the partition's interrupted operation, if any.
/// Must be called with the partition lock held. Returns what it did.
pub(crate) fn recover_partition(layout: &Layout) -> Result<Vec<String>, PublishError> {
    let path = layout.journal_path();
    let Some(j) = Journal::read(&path)? else {
        return Ok(Vec::new());
    };
    let current = layout.current_record()?.map(|r| r.version);
    let swapped = current.as_deref() == Some(j.version.as_str());
    let done = if swapped {
        finish_swap(&j)?;
        "finished"
    } else {
        match j.op {
            Op::Publish => undo_staging(&j)?,
            Op::Rollback => {}
        }
        "undid"
    };
    Journal::remove(&path)?;
    let op = match j.op {
        Op::Publish => "publish",
        Op::Rollback => "rollback",
    };
    Ok(vec![format!(
        "{done} the interrupted {op} of {} to {}",
        j.partition, j.version
    )])
}

/// After the swap: stows the displaced version from the swap directory into
/// the kept area (if it is still there).
pub(crate) fn finish_swap(j: &Journal) -> Result<(), PublishError> {
    if let (Some(prev), Some(to)) = (&j.previous, &j.displaced_to) {
        if record_version(&j.swap_dir).as_deref() == Some(prev.as_str()) {
            kept::stow(&j.swap_dir, to)?;
        }
    }
    Ok(())
}

/// Before the swap of a publish: restores the staged directory to what was
/// audited (staged names back, new record removed).
pub(crate) fn undo_staging(j: &Journal) -> Result<(), PublishError> {
    let dir = &j.swap_dir;
    if !dir.is_dir() {
        return Ok(());
    }
    let record = dir.join(RECORD);
    fsx::remove_file_if_exists(&fsx::tmp_path(&record))?;
    if record_version(dir).as_deref() == Some(j.version.as_str()) {
        fsx::remove_file_if_exists(&record)?;
    }
    crate::publish::indexes::remove(dir)?;
    let mut dirs = BTreeSet::new();
    for (staged, published) in &j.renames {
        let (from, to) = (dir.join(published), dir.join(staged));
        if from.exists() && !to.exists() {
            fs::rename(&from, &to).ctx("cannot rename back", &from)?;
        }
        dirs.insert(to.parent().unwrap_or(dir).to_path_buf());
    }
    dirs.insert(dir.clone());
    for d in &dirs {
        if d.is_dir() {
            fsx::sync_dir(d)?;
        }
    }
    Ok(())
}

/// The version in `dir`'s record, if it has a readable one.
fn record_version(dir: &Path) -> Option<String> {
    Record::read(dir).ok().flatten().map(|r| r.version)
}

/// `gc`: recovers every partition with a journal, empties the trash and
/// removes lock files of idle partitions. Partitions locked by a running
/// publish are skipped.
pub(crate) fn gc(root: &Path) -> Result<Vec<String>, PublishError> {
    let engine = layout::engine_dir(root);
    let mut rels = BTreeSet::new();
    for (dir, suffix) in [("tx", ".json"), ("tx", ".json.tmp"), ("locks", ".lock")] {
        let base = engine.join(dir);
        for file in files_under(&base)? {
            let rel = file
                .strip_prefix(&base)
                .unwrap_or(&file)
                .to_string_lossy()
                .to_string();
            if let Some(rel) = rel.strip_suffix(suffix) {
                rels.insert(rel.to_string());
            }
        }
    }
    let mut done = Vec::new();
    for rel in rels {
        let layout = Layout::new(root, rel);
        let lock = match PartitionLock::acquire(&layout.lock_path(), &layout.rel) {
            Ok(l) => l,
            Err(PublishError::Busy { .. }) => {
                done.push(format!("skipped {}: busy", layout.rel));
                continue;
            }
            Err(e) => return Err(e),
        };
        done.extend(recover_partition(&layout)?);
        lock.remove_file()?;
    }
    done.extend(kept::empty_trash(root)?);
    Ok(done)
}

/// See [`crate::publish::Table::recover_staged`].
pub(crate) fn recover_staged(root: &Path, staged: &Path) -> Result<Vec<String>, PublishError> {
    let Ok(staged) = staged.canonicalize() else {
        return Ok(Vec::new());
    };
    let base = layout::journal_root(root);
    let mut done = Vec::new();
    for file in files_under(&base)? {
        let rel = file.strip_prefix(&base).unwrap_or(&file).to_string_lossy();
        let Some(rel) = rel.strip_suffix(".json") else {
            continue;
        };
        let layout = Layout::new(root, rel.to_string());
        let _lock = match PartitionLock::acquire(&layout.lock_path(), &layout.rel) {
            Ok(l) => l,
            Err(PublishError::Busy { .. }) => continue,
            Err(e) => return Err(e),
        };
        let ours = Journal::read(&layout.journal_path())?.is_some_and(|j| {
            j.op == Op::Publish && j.swap_dir.canonicalize().is_ok_and(|d| d == staged)
        });
        if ours {
            done.extend(recover_partition(&layout)?);
        }
    }
    Ok(done)
}

fn files_under(dir: &Path) -> Result<Vec<PathBuf>, PublishError> {
    let mut out = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(PublishError::io("cannot list", dir, e)),
    };
    for entry in entries {
        let entry = entry.ctx("cannot list", dir)?;
        let path = entry.path();
        if entry.file_type().ctx("cannot stat", &path)?.is_dir() {
            out.extend(files_under(&path)?);
        } else {
            out.push(path);
        }
    }
    Ok(out)
}
