//! The journal of a swap in progress: written durably before the first side
//! effect, removed after the last one, so that a process killed at any
//! instant leaves enough on disk for the next publish, rollback or `gc` to
//! finish or undo its work.
//!
//! One journal per partition at most, at `ROOT/_dqgate/tx/<rel_dir>.json`;
//! only the holder of the partition lock reads or writes it, so a journal
//! found while holding the lock is always a leftover of a dead process.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::publish::error::PublishError;
use crate::publish::fsx;

/// What the interrupted operation was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Op {
    Publish,
    Rollback,
}

/// The intent of one swap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Journal {
    pub op: Op,
    pub partition: String,
    /// The directory exchanged with the partition: the staged directory for
    /// a publish, the workspace outside ROOT for a rollback.
    pub swap_dir: PathBuf,
    /// The version being swapped in.
    pub version: String,
    /// The version being swapped out (`None`: first publish).
    pub previous: Option<String>,
    /// Publish: data files renamed inside `swap_dir`, `(staged, published)`.
    pub renames: Vec<(String, String)>,
    /// Rollback: the kept directory the restored version comes from.
    pub kept_from: Option<PathBuf>,
    /// Where the displaced version goes in the kept area.
    pub displaced_to: Option<PathBuf>,
}

impl Journal {
    /// Reads the journal at `path`; `Ok(None)` when there is none. A
    /// half-written `.tmp` beside it is a journal never committed: removed.
    pub fn read(path: &Path) -> Result<Option<Journal>, PublishError> {
        fsx::remove_file_if_exists(&fsx::tmp_path(path))?;
        let text = match fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(PublishError::io("cannot read the journal", path, e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| PublishError::BadRecord {
                path: path.display().to_string(),
                reason: format!("journal: {e}"),
            })
    }

    /// Writes the journal durably (temp name, fsync, rename, fsync).
    pub fn write(&self, path: &Path) -> Result<(), PublishError> {
        if let Some(dir) = path.parent() {
            fsx::create_dirs(dir)?;
        }
        let text = serde_json::to_string_pretty(self).expect("journal serializes");
        fsx::write_atomic(path, text.as_bytes())
    }

    /// Removes the journal durably: the operation is complete.
    pub fn remove(path: &Path) -> Result<(), PublishError> {
        if fsx::remove_file_if_exists(path)? {
            fsx::sync_parent(path)?;
        }
        Ok(())
    }
}
