//! Where everything of a partition lives under the table root, and how
//! versions and published file names are formed.
//!
//! ```text
//! ROOT/k1=v1/k2=v2/                      the published partition (a real directory)
//!   part-00000.v3-1be0c3a9.parquet       data, named uniquely per version
//!   _dqgate_audit.json                   the audit record and manifest
//! ROOT/_dqgate/locks/k1=v1/k2=v2.lock    the partition's flock
//! ROOT/_dqgate/table.lock                the table's flock, held around swaps
//! ROOT/_dqgate/tx/k1=v1/k2=v2.json       the journal of an unfinished swap
//! ROOT/_dqgate/trail/k1=v1/k2=v2.jsonl   the audit trail: publishes and rollbacks
//! ROOT/../.ROOTNAME.dqgate/              kept versions, beside ROOT (not under it)
//!   versions/k1=v1/k2=v2/000004.v2-77aa0b1c/   a displaced version, intact
//!   trash/                               pruned versions being deleted
//! ```
//!
//! Why displaced versions live beside ROOT rather than under `ROOT/_dqgate`:
//! DuckDB, Polars and DataFusion globs `ROOT/**/*.parquet` descend into `_`
//! directories (only Spark's and Hive's discovery skip them), so a kept
//! version under ROOT would have to have its files renamed (say to
//! `.parquet.kept`). But a reader that resolved the partition once (holds
//! the directory open, reads the record and opens the files relative to it)
//! must be able to finish after the swap, and a rollback must swap a version
//! in that carries its `.parquet` names. Moving the displaced directory whole
//! to a sibling of ROOT keeps every file name, so both hold, and nothing under
//! ROOT but published partitions ever holds a `.parquet` file. The sibling
//! must be on ROOT's file system (checked; otherwise publish refuses, exit 2).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::publish::record::Record;
use crate::publish::PublishError;

pub use crate::publish::record::RECORD;

/// Paths of one partition of one table.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub root: PathBuf,
    /// `k1=v1/k2=v2`.
    pub rel: String,
}

impl Layout {
    pub fn new(root: &Path, rel: String) -> Layout {
        Layout {
            root: root.to_path_buf(),
            rel,
        }
    }

    pub fn partition_dir(&self) -> PathBuf {
        self.root.join(&self.rel)
    }

    pub fn lock_path(&self) -> PathBuf {
        engine_dir(&self.root)
            .join("locks")
            .join(format!("{}.lock", self.rel))
    }

    /// The table-level lock (see `lock::TableLock`).
    pub fn table_lock_path(&self) -> PathBuf {
        engine_dir(&self.root).join("table.lock")
    }

    pub fn trail_path(&self) -> PathBuf {
        engine_dir(&self.root)
            .join("trail")
            .join(format!("{}.jsonl", self.rel))
    }

    pub fn journal_path(&self) -> PathBuf {
        journal_root(&self.root).join(format!("{}.json", self.rel))
    }

    pub fn kept_root(&self) -> PathBuf {
        state_dir(&self.root).join("versions").join(&self.rel)
    }

    pub fn kept_dir(&self, seq: u64, version: &str) -> PathBuf {
        self.kept_root().join(format!("{seq:06}.{version}"))
    }
}

pub(crate) fn engine_dir(root: &Path) -> PathBuf {
    root.join("_dqgate")
}

pub(crate) fn journal_root(root: &Path) -> PathBuf {
    engine_dir(root).join("tx")
}

/// `ROOT/../.ROOTNAME.dqgate`: where kept versions live. For a root
/// without a parent or a name (`/`), `ROOT/../.dqgate` is used.
pub(crate) fn state_dir(root: &Path) -> PathBuf {
    let parent = root.parent().unwrap_or(root);
    match root.file_name() {
        Some(name) => parent.join(format!(".{}.dqgate", name.to_string_lossy())),
        None => parent.join(".dqgate"),
    }
}

pub(crate) fn trash_dir(root: &Path) -> PathBuf {
    state_dir(root).join("trash")
}

/// A version id: `v<generation>-<first 8 hex digits of the fingerprint>`.
/// The generation is one more than any generation of the partition that is
/// published or kept, so a version never shares its name, nor its files'
/// names, with the version it replaces or any kept one.
pub(crate) fn version_id(generation: u64, fingerprint: &str) -> String {
    let hex = fingerprint.strip_prefix("sha256:").unwrap_or(fingerprint);
    let short: String = hex
        .chars()
        .filter(|c| c.is_ascii_hexdigit())
        .take(8)
        .collect();
    format!("v{generation}-{short}")
}

/// The generation of a version id made by [`version_id`].
pub(crate) fn generation(version: &str) -> Option<u64> {
    version.strip_prefix('v')?.split('-').next()?.parse().ok()
}

/// `dir/part-00000.parquet` → `dir/part-00000.<version>.parquet`.
pub(crate) fn published_name(staged: &str, version: &str) -> String {
    let stem = staged.strip_suffix(".parquet").unwrap_or(staged);
    format!("{stem}.{version}.parquet")
}

/// Parses a kept directory's name `<seq>.<version>`.
pub(crate) fn parse_kept_name(name: &str) -> Option<(u64, String)> {
    let (seq, version) = name.split_once('.')?;
    if version.ends_with(".tmp") || version.is_empty() {
        return None;
    }
    Some((seq.parse().ok()?, version.to_string()))
}

impl Layout {
    /// The record of the published partition: `Ok(None)` when the partition
    /// does not exist; `MissingRecord` when a directory (or anything else)
    /// is there without one.
    pub fn current_record(&self) -> Result<Option<Record>, PublishError> {
        let dir = self.partition_dir();
        match fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(PublishError::io("cannot stat", &dir, e)),
            Ok(m) if m.is_dir() => Record::read_required(&dir).map(Some),
            Ok(_) => Err(PublishError::MissingRecord {
                dir: dir.display().to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let v = version_id(3, "sha256:1be0c3a9ffff");
        assert_eq!(v, "v3-1be0c3a9");
        assert_eq!(generation(&v), Some(3));
        assert_eq!(
            published_name("a/part-0.parquet", &v),
            "a/part-0.v3-1be0c3a9.parquet"
        );
        assert_eq!(parse_kept_name("000012.v3-1be0c3a9"), Some((12, v)));
        assert_eq!(parse_kept_name("junk"), None);
    }

    #[test]
    fn paths() {
        let l = Layout::new(Path::new("/t/sales"), "a=1/b=2".into());
        assert_eq!(l.partition_dir(), Path::new("/t/sales/a=1/b=2"));
        assert_eq!(
            l.lock_path(),
            Path::new("/t/sales/_dqgate/locks/a=1/b=2.lock")
        );
        assert_eq!(
            l.kept_dir(4, "v2-77aa0b1c"),
            Path::new("/t/.sales.dqgate/versions/a=1/b=2/000004.v2-77aa0b1c")
        );
    }
}
