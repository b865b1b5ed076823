//! The published partitions of a table: every `ROOT/k1=v1[/k2=v2...]`
//! directory whose keys are the rule file's `partitioned by` keys, in order.
//!
//! Names starting with `_` or `.` (dqgate's own state) and directories that
//! are not `KEY=value` for the expected key are not partitions of the table
//! and are passed over. A partition directory without an audit record was not
//! published by dqgate: an error (exit 3), as for `current`.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::error::PublishError;
use super::layout::RECORD;
use super::Table;

/// A published partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedPartition {
    /// `k1=v1/k2=v2`, as a run key's `rel_dir` names it.
    pub rel: String,
    pub dir: PathBuf,
}

impl Table {
    /// Every published partition of the table, sorted by `rel`. A missing
    /// root has none.
    pub fn partitions(&self, keys: &[String]) -> Result<Vec<PublishedPartition>, PublishError> {
        let mut out = Vec::new();
        if !keys.is_empty() {
            walk(&self.root, "", keys, &mut out)?;
        }
        out.sort_by(|a, b| a.rel.cmp(&b.rel));
        Ok(out)
    }
}

fn walk(
    dir: &Path,
    prefix: &str,
    keys: &[String],
    out: &mut Vec<PublishedPartition>,
) -> Result<(), PublishError> {
    let entries = match fs::read_dir(dir) {
        Err(e) if e.kind() == ErrorKind::NotFound && prefix.is_empty() => return Ok(()),
        Err(e) => return Err(PublishError::io("cannot list", dir, e)),
        Ok(entries) => entries,
    };
    for entry in entries {
        let entry = entry.map_err(|e| PublishError::io("cannot list", dir, e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let is_partition = name
            .split_once('=')
            .is_some_and(|(k, v)| k == keys[0] && !v.is_empty());
        let path = entry.path();
        let ft = entry
            .file_type()
            .map_err(|e| PublishError::io("cannot stat", &path, e))?;
        if !is_partition || !ft.is_dir() {
            continue;
        }
        let rel = format!("{prefix}{name}");
        if keys.len() > 1 {
            walk(&path, &format!("{rel}/"), &keys[1..], out)?;
            continue;
        }
        if !path.join(RECORD).is_file() {
            return Err(PublishError::MissingRecord {
                dir: path.display().to_string(),
            });
        }
        out.push(PublishedPartition { rel, dir: path });
    }
    Ok(())
}
