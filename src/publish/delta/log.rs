//! The Delta table's log as the publish reads it: opening the table, the
//! run key's application transaction (`txn`) version, the partition's
//! current files, and the errors that name the table.

use std::collections::HashMap;
use std::path::Path;

use deltalake_core::{DeltaTable, DeltaTableError};
use futures::TryStreamExt as _;

use crate::publish::error::PublishError;
use crate::publish::root::Root;
use crate::runkey::RunKey;

/// How many staged files are copied into an object-store table at once.
pub(super) const CONCURRENT_COPIES: usize = 16;

/// The checkpoint interval of tables dqgate creates (`delta.checkpointInterval`).
pub(super) const CHECKPOINT_INTERVAL: u64 = 10;

/// How often a publish re-plans after losing the log entry to a commit on
/// other partitions before it gives up with exit 4.
pub(super) const MAX_ATTEMPTS: usize = 20;

/// Whether `root` is a Delta table (holds `_delta_log/`).
pub fn is_delta(root: &Path) -> bool {
    root.join("_delta_log").is_dir()
}

/// Whether a `--table` argument names a Delta table: a local directory with
/// `_delta_log/`, or any object-store URL (a Hive table there could not be
/// swapped atomically, so the Delta target is the only one).
pub fn is_delta_arg(root: &Path) -> bool {
    root.to_str().is_some_and(crate::staged::remote::is_url) || is_delta(root)
}

/// The application id of a run key's partition in the table's log.
pub fn app_id(key: &RunKey) -> String {
    format!("dqgate:{}", key.rel_dir())
}

/// The `txn` version that stands for a fingerprint (`sha256:HEX`): its first
/// 15 hex digits, a non-negative i64.
pub fn txn_version(fingerprint: &str) -> i64 {
    let hex = fingerprint.strip_prefix("sha256:").unwrap_or(fingerprint);
    let head: String = hex.chars().take(15).collect();
    i64::from_str_radix(&head, 16).unwrap_or(0)
}

pub(super) fn delta_err(root: &Root, e: impl std::fmt::Display) -> PublishError {
    PublishError::Delta {
        path: root.show(),
        reason: e.to_string(),
    }
}

/// An error about a loaded table, named by its location.
pub(super) fn table_err(table: &DeltaTable, e: impl std::fmt::Display) -> PublishError {
    let url = table.table_url();
    PublishError::Delta {
        path: url
            .to_file_path()
            .map_or_else(|()| url.to_string(), |p| p.display().to_string()),
        reason: e.to_string(),
    }
}

/// An unbuilt handle on the table at `root` (for its log store).
pub(super) fn handle(root: &Root) -> Result<DeltaTable, PublishError> {
    root.builder()?.build().map_err(|e| delta_err(root, e))
}

/// Opens the Delta table at `root`; `None` when there is no table yet.
pub(super) async fn load(root: &Root) -> Result<Option<DeltaTable>, PublishError> {
    if !root.has_log().await? {
        return Ok(None);
    }
    let mut table = handle(root)?;
    match table.load().await {
        Ok(()) => Ok(Some(table)),
        Err(DeltaTableError::NotATable(_)) => Ok(None),
        Err(e) => Err(delta_err(root, e)),
    }
}

/// The partition's current `txn` version: what a publish audits against.
pub async fn current_txn(root: &Root, key: &RunKey) -> Result<Option<i64>, PublishError> {
    match load(root).await? {
        None => Ok(None),
        Some(t) => txn_of(&t, key).await,
    }
}

pub(super) async fn txn_of(table: &DeltaTable, key: &RunKey) -> Result<Option<i64>, PublishError> {
    let state = table.snapshot().map_err(|e| table_err(table, e))?;
    state
        .transaction_version(table.log_store().as_ref(), app_id(key))
        .await
        .map_err(|e| table_err(table, e))
}

/// A file the partition has now, relative to ROOT.
pub(super) struct CurrentFile {
    pub path: String,
    pub size: i64,
    /// The `add` action's `stats` JSON, if any.
    pub stats: Option<String>,
}

pub(super) async fn partition_files(
    table: &DeltaTable,
    key: &RunKey,
) -> Result<Vec<CurrentFile>, PublishError> {
    let want = partition_values(key);
    let views: Vec<_> = table
        .get_active_add_actions_by_predicate(None)
        .try_collect()
        .await
        .map_err(|e| table_err(table, e))?;
    let mut out: Vec<CurrentFile> = views
        .iter()
        .filter(|v| v.partition_values_map() == want)
        .map(|v| CurrentFile {
            path: v.path().into_owned(),
            size: v.size(),
            stats: v.stats(),
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The `partitionValues` of the run key's partition.
pub(super) fn partition_values(key: &RunKey) -> HashMap<String, Option<String>> {
    key.pairs()
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect()
}
