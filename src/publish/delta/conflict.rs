//! Conflict detection for a Delta commit whose audit read other partitions:
//! the winning commits between the table version the audit read and the
//! version the commit is built on must not touch what it read.
//!
//! Every read a rule file makes of other partitions is table-wide (see
//! `readset`), so any `add` or `remove` in a partition other than the run
//! key's is a conflict: in a partition that was read, its data changed; in
//! one that was not, it is a partition published since (a phantom). The run
//! key's own partition is guarded by its `txn` (invariant 4). Commits
//! without file actions (metadata only) are compatible. Publishes whose
//! audit read only their own partition skip this check, so their blind
//! appends to other partitions stay compatible with each other.

use deltalake_core::DeltaTable;
use serde_json::Value as Json;

use crate::publish::error::PublishError;
use crate::publish::readset::ReadSet;
use crate::runkey::RunKey;

/// Checks the commits after the last version checked (or after the read
/// version) up to `table`'s version; on success, that version is the last
/// one checked.
pub(super) async fn check_winning_commits(
    table: Option<&DeltaTable>,
    key: &RunKey,
    partitioned_by: &[String],
    read: &ReadSet,
    checked: &mut Option<u64>,
) -> Result<(), PublishError> {
    if !read.reads_table() {
        return Ok(());
    }
    let Some(table) = table else {
        return Ok(()); // still no table: nothing was committed
    };
    let Some(now) = table.version() else {
        return Ok(());
    };
    let first = match checked.or(read.table_version) {
        Some(v) => v + 1,
        None => 0,
    };
    crate::publish::fsx::phase("validate");
    let own = key.rel_dir();
    let log = table.log_store();
    for version in first..=now {
        let entry = log
            .read_commit_entry(version)
            .await
            .map_err(|e| super::log::table_err(table, e))?;
        let Some(bytes) = entry else {
            return Err(conflict(
                read,
                format!(
                    "commit {version}, made since the audit read table version {}, is no longer in the log, \
                     so it cannot be shown not to touch what the audit read",
                    shown_version(read)
                ),
            ));
        };
        let text = String::from_utf8_lossy(&bytes);
        if let Some(rel) = touched_other(&text, partitioned_by, &own) {
            let how = if read.partitions.contains_key(&rel) {
                "changed the files of partition"
            } else {
                "published partition"
            };
            return Err(conflict(
                read,
                format!(
                    "commit {version} {how} `{rel}` after the audit read table version {}",
                    shown_version(read)
                ),
            ));
        }
    }
    *checked = Some(now);
    Ok(())
}

fn shown_version(read: &ReadSet) -> String {
    read.table_version
        .map_or_else(|| "(none: no table yet)".to_string(), |v| v.to_string())
}

fn conflict(read: &ReadSet, detail: String) -> PublishError {
    PublishError::ReadSetChanged {
        reads: read.reads.join("; "),
        detail,
    }
}

/// The first partition other than `own` that a commit's `add` or `remove`
/// actions touch (the commit's newline-delimited JSON actions).
fn touched_other(commit: &str, partitioned_by: &[String], own: &str) -> Option<String> {
    for line in commit.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(action) = serde_json::from_str::<Json>(line) else {
            continue;
        };
        let Some(file) = action.get("add").or_else(|| action.get("remove")) else {
            continue;
        };
        let values = file.get("partitionValues");
        let rel = partitioned_by
            .iter()
            .map(|k| {
                let v = values
                    .and_then(|m| m.get(k))
                    .and_then(Json::as_str)
                    .unwrap_or("__HIVE_DEFAULT_PARTITION__");
                format!("{k}={v}")
            })
            .collect::<Vec<_>>()
            .join("/");
        if rel != own {
            return Some(rel);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_file_actions_outside_the_own_partition_conflict() {
        let keys = ["d".to_string()];
        let own_only = r#"{"commitInfo":{}}
{"add":{"path":"d=1/a.parquet","partitionValues":{"d":"1"}}}
{"remove":{"path":"d=1/b.parquet","partitionValues":{"d":"1"}}}"#;
        assert_eq!(touched_other(own_only, &keys, "d=1"), None);
        let other = r#"{"txn":{"appId":"x","version":1}}
{"add":{"path":"d=2/a.parquet","partitionValues":{"d":"2"}}}"#;
        assert_eq!(touched_other(other, &keys, "d=1").as_deref(), Some("d=2"));
        assert_eq!(touched_other(r#"{"metaData":{}}"#, &keys, "d=1"), None);
    }
}
