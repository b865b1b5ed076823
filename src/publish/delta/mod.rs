//! `publish --target delta`: the audited staged files committed into a Delta
//! Lake table in one transaction that replaces exactly the run key's
//! partition, on a local file system or an object store (see the README,
//! "Delta Lake target"; [`super::store`] has the file operations).
//!
//! One commit holds, for the partition `ROOT/k1=v1[/k2=v2]`:
//!
//! - a `remove` for each file the partition has now, and an `add` for each
//!   staged file, copied beforehand into the partition directory under a
//!   version-unique name (`part-00000.1be0c3a9-5d2e91f0.parquet`), with its
//!   `partitionValues` and size;
//! - an application transaction `txn` with `appId = "dqgate:" + k1=v1[/...]`
//!   and `version` = the first 60 bits of the staged fingerprint. The Delta
//!   log keeps the latest `txn` per `appId`, so it names the fingerprint of
//!   the partition's current version: a retry of the same staged files finds
//!   its own version there and commits nothing ("already published"). (The
//!   version is an identity, not a counter: only dqgate reads this appId.)
//! - `commitInfo` carries the audit record (the verdict JSON with the
//!   `published` manifest) under `dqgateAudit`; the same record is written
//!   as `ROOT/k=v/_dqgate_audit.json` once the commit has landed.
//!
//! A first publish creates the table in the same commit (`protocol` 1/2 and
//! `metaData`: the staged files' schema plus the `partitioned by` columns as
//! strings).
//!
//! Concurrency: the commit is a put-if-absent of the next log entry, never
//! retried blindly. When another writer took that entry, the table is
//! reloaded: if the partition's `txn` changed since the audit the publish
//! exits 4 (the published partition changed); if only other partitions
//! changed, the actions are re-planned against the new snapshot and the put
//! is tried again. Copied files of a commit that did not land are removed.
//!
//! An audit that read other partitions (`across published`, `history(N)`,
//! the table's schema) carries the table version it read. Before each put,
//! the commits that won since that version are read from the log
//! (`conflict`): an `add` or `remove` in any other partition means the
//! verdict may no longer hold, and the publish stops with
//! `ReadSetChanged` (the command line audits again, a bounded number of
//! times). The commit records the read set in its audit record.

use std::path::Path;

use deltalake_core::{DeltaTable, DeltaTableError};
use futures::TryStreamExt as _;

use super::error::PublishError;
use crate::publish::root::Root;
use crate::runkey::RunKey;

mod commit;
mod conflict;
mod copy;
pub(crate) mod durable;
mod gc;
mod rollback;
mod schema;
mod snapshot;
mod stats;
mod store;
mod target;
mod verify;

use commit::partition_values;
pub use commit::publish;
pub use gc::gc;
pub use rollback::rollback;
pub use snapshot::Snapshot;
pub use target::{Delta, Kind};
pub use verify::verify;

/// How many staged files are copied into an object-store table at once.
const CONCURRENT_COPIES: usize = 16;

/// The checkpoint interval of tables dqgate creates (`delta.checkpointInterval`).
const CHECKPOINT_INTERVAL: u64 = 10;

/// How often a publish re-plans after losing the log entry to a commit on
/// other partitions before it gives up with exit 4.
const MAX_ATTEMPTS: usize = 20;

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

fn delta_err(root: &Root, e: impl std::fmt::Display) -> PublishError {
    PublishError::Delta {
        path: root.show(),
        reason: e.to_string(),
    }
}

/// An error about a loaded table, named by its location.
fn table_err(table: &DeltaTable, e: impl std::fmt::Display) -> PublishError {
    let url = table.table_url();
    PublishError::Delta {
        path: url
            .to_file_path()
            .map_or_else(|()| url.to_string(), |p| p.display().to_string()),
        reason: e.to_string(),
    }
}

/// An unbuilt handle on the table at `root` (for its log store).
fn handle(root: &Root) -> Result<DeltaTable, PublishError> {
    root.builder()?.build().map_err(|e| delta_err(root, e))
}

/// Opens the Delta table at `root`; `None` when there is no table yet.
async fn load(root: &Root) -> Result<Option<DeltaTable>, PublishError> {
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

async fn txn_of(table: &DeltaTable, key: &RunKey) -> Result<Option<i64>, PublishError> {
    let state = table.snapshot().map_err(|e| table_err(table, e))?;
    state
        .transaction_version(table.log_store().as_ref(), app_id(key))
        .await
        .map_err(|e| table_err(table, e))
}

/// A file the partition has now, relative to ROOT.
struct CurrentFile {
    path: String,
    size: i64,
    /// The `add` action's `stats` JSON, if any.
    stats: Option<String>,
}

async fn partition_files(
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

#[cfg(test)]
mod tests {
    use super::copy::{staged_name, token_of};
    use super::gc::percent_decode;
    use super::*;

    #[test]
    fn txn_versions_are_fingerprint_prefixes() {
        assert_eq!(txn_version("sha256:000000000000001ff"), 1);
        assert_eq!(
            txn_version("sha256:fffffffffffffffff"),
            0x0fff_ffff_ffff_ffff
        );
        assert!(txn_version("sha256:1be0c3a9") > 0);
    }

    #[test]
    fn log_paths_are_percent_decoded() {
        assert_eq!(
            percent_decode("d=a%20b/part-0.parquet"),
            "d=a b/part-0.parquet"
        );
        assert_eq!(percent_decode("d=%C3%A9/x%2"), "d=é/x%2");
    }

    #[test]
    fn published_names_map_back() {
        assert_eq!(
            staged_name("a/part-0.1be0c3a9-5d2e91f0.parquet"),
            "a/part-0.parquet"
        );
        assert_eq!(
            token_of("part-0.1be0c3a9-5d2e91f0.parquet").as_deref(),
            Some("1be0c3a9-5d2e91f0")
        );
    }
}
