//! A table's published history as a report reads it: every published
//! partition's audit record (`ROOT/k=v/.../_dqgate_audit.json`, which carries
//! the verdict and so each metric's value), in run-key order, with a count of
//! the publishes and rollbacks its audit trail lists.
//!
//! Only published partitions have records, so failed or never-published runs
//! never appear. Directories whose names start with `_` or `.` are skipped
//! (`ROOT/_dqgate` holds locks, journals and trails), symbolic links are not
//! followed, and a directory without `=` in its name is not a partition.

use std::cmp::Ordering;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::error::ReportError;
use super::model::{self, Doc, VerdictDoc};
use crate::publish::hive::layout::{Layout, RECORD};

/// Deeper than any run key a rule file can declare in practice.
const MAX_DEPTH: usize = 16;

#[derive(Debug, Clone, PartialEq)]
pub struct History {
    /// Published partitions in run-key order.
    pub partitions: Vec<PublishedPartition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PublishedPartition {
    /// `k1=v1/k2=v2`, relative to ROOT.
    pub rel: String,
    /// The partition's audit record (a passed verdict plus `published`).
    pub record: VerdictDoc,
    /// Lines of the audit trail: how often a version was published into the
    /// partition and how often one was rolled back.
    pub publishes: usize,
    pub rollbacks: usize,
}

/// Reads every published partition under `root`.
pub fn read(root: &Path) -> Result<History, ReportError> {
    match fs::metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(ReportError::table(root, "is not a directory")),
        Err(e) => return Err(ReportError::table(root, &e.to_string())),
    }
    let mut partitions = Vec::new();
    walk(root, root, "", 0, &mut partitions)?;
    partitions.sort_by(|a, b| run_key_order(&a.record.partition, &b.record.partition));
    Ok(History { partitions })
}

fn walk(
    root: &Path,
    dir: &Path,
    rel: &str,
    depth: usize,
    out: &mut Vec<PublishedPartition>,
) -> Result<(), ReportError> {
    if depth > 0 && dir.join(RECORD).is_file() {
        out.push(partition(root, dir, rel)?);
        return Ok(());
    }
    if depth == MAX_DEPTH {
        return Ok(());
    }
    let entries = fs::read_dir(dir).map_err(|e| ReportError::table(dir, &e.to_string()))?;
    let mut children: Vec<(String, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ReportError::table(dir, &e.to_string()))?;
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
        walk(root, &path, &child_rel, depth + 1, out)?;
    }
    Ok(())
}

fn partition(root: &Path, dir: &Path, rel: &str) -> Result<PublishedPartition, ReportError> {
    let path = dir.join(RECORD);
    let text = fs::read_to_string(&path).map_err(|e| ReportError::read(&path, &e.to_string()))?;
    let record = parse_record(&text, &path)?;
    let (publishes, rollbacks) = trail_counts(&Layout::new(root, rel.to_string()).trail_path())?;
    Ok(PublishedPartition {
        rel: rel.to_string(),
        record,
        publishes,
        rollbacks,
    })
}

fn parse_record(text: &str, path: &Path) -> Result<VerdictDoc, ReportError> {
    match model::parse(text).map_err(|e| ReportError::read(path, &e.to_string()))? {
        Doc::Verdict(v) => Ok(v),
        Doc::Error { .. } => Err(ReportError::read(path, "an audit record is never an error")),
    }
}

/// The published history of a Delta table (on disk or on an object store):
/// the audit record of each partition its current snapshot has, and the
/// publishes and rollbacks its commits record.
pub async fn read_delta(root: crate::publish::root::Root) -> Result<History, ReportError> {
    let shown = root.show();
    let fail =
        |e: crate::publish::PublishError| ReportError::table(Path::new(&shown), &e.to_string());
    let snapshot = crate::publish::delta::Snapshot::load_own(root.clone())
        .await
        .map_err(fail)?;
    let counts = snapshot.trail_counts().await.map_err(fail)?;
    let mut partitions = Vec::new();
    for (rel, text) in snapshot.records().await.map_err(fail)? {
        let Some(text) = text else {
            continue; // committed, record not written yet: not shown
        };
        let path = PathBuf::from(root.name_of(&format!("{rel}/{RECORD}")));
        let (publishes, rollbacks) = counts.get(&rel).copied().unwrap_or_default();
        partitions.push(PublishedPartition {
            record: parse_record(&text, &path)?,
            rel,
            publishes,
            rollbacks,
        });
    }
    partitions.sort_by(|a, b| run_key_order(&a.record.partition, &b.record.partition));
    Ok(History { partitions })
}

/// Counts `publish` and `rollback` lines; a table without a trail (published
/// before trails existed) counts none.
fn trail_counts(path: &Path) -> Result<(usize, usize), ReportError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok((0, 0)),
        Err(e) => return Err(ReportError::read(path, &e.to_string())),
    };
    let mut counts = (0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let entry: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| ReportError::read(path, &format!("bad trail line: {e}")))?;
        match entry.get("action").and_then(|a| a.as_str()) {
            Some("publish") => counts.0 += 1,
            Some("rollback") => counts.1 += 1,
            _ => {}
        }
    }
    Ok(counts)
}

/// Run keys compare part by part, in `partitioned by` order: integers by
/// value (so `hour=9` comes before `hour=10`), everything else by bytes
/// (ISO dates sort as dates).
pub fn run_key_order(a: &[(String, String)], b: &[(String, String)]) -> Ordering {
    for ((ka, va), (kb, vb)) in a.iter().zip(b) {
        let o = ka.cmp(kb).then_with(|| value_order(va, vb));
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

fn value_order(a: &str, b: &str) -> Ordering {
    match (a.parse::<i128>(), b.parse::<i128>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.as_bytes().cmp(b.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn run_keys_order_numbers_by_value() {
        let nine = key(&[("day", "2025-03-05"), ("hour", "9")]);
        let ten = key(&[("day", "2025-03-05"), ("hour", "10")]);
        let next_day = key(&[("day", "2025-03-06"), ("hour", "1")]);
        assert_eq!(run_key_order(&nine, &ten), Ordering::Less);
        assert_eq!(run_key_order(&ten, &next_day), Ordering::Less);
        assert_eq!(run_key_order(&ten, &ten), Ordering::Equal);
    }
}
