//! A Hive table's published history: every partition directory holding an
//! audit record (`ROOT/k=v/.../_dqgate_audit.json`), in path order, each
//! followed by the counts of its audit trail.
//!
//! Only published partitions have records, so failed or never-published runs
//! never appear. Directories whose names start with `_` or `.` are skipped
//! (`ROOT/_dqgate` holds locks, journals and trails), symbolic links are not
//! followed, and a directory without `=` in its name is not a partition.
//! The walk does not need the rule file's `partitioned by`: a record ends
//! it, wherever it is.

use std::fs;
use std::path::{Path, PathBuf};

use super::layout::{Layout, RECORD};
use super::trail;
use crate::publish::target::{HistoryError, HistorySink};

/// Deeper than any run key a rule file can declare in practice.
const MAX_DEPTH: usize = 16;

/// Reads the history of the table at `root` (as the command named it).
pub(super) fn read(root: &Path, sink: &mut dyn HistorySink) -> Result<(), HistoryError> {
    match fs::metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(HistoryError::table(root, "is not a directory")),
        Err(e) => return Err(HistoryError::table(root, &e.to_string())),
    }
    walk(root, root, "", 0, sink)
}

fn walk(
    root: &Path,
    dir: &Path,
    rel: &str,
    depth: usize,
    sink: &mut dyn HistorySink,
) -> Result<(), HistoryError> {
    if depth > 0 && dir.join(RECORD).is_file() {
        let path = dir.join(RECORD);
        let text =
            fs::read_to_string(&path).map_err(|e| HistoryError::read(&path, &e.to_string()))?;
        sink.record(rel, &path, &text)?;
        let (publishes, rollbacks) = trail::counts(&Layout::new(root, rel.to_string()))?;
        sink.trail(publishes, rollbacks);
        return Ok(());
    }
    if depth == MAX_DEPTH {
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|e| HistoryError::table(dir, &e.to_string()))?;
    let mut children: Vec<(String, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| HistoryError::table(dir, &e.to_string()))?;
        let name = entry.file_name().to_string_lossy().to_string();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && !name.starts_with(['_', '.']) && name.contains('=') {
            children.push((name, entry.path()));
        }
    }
    children.sort();
    for (name, path) in children {
        let child_rel = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        walk(root, &path, &child_rel, depth + 1, sink)?;
    }
    Ok(())
}
