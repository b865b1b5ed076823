//! `publish --target delta`: the audited staged files committed into a Delta
//! Lake table in one transaction that replaces exactly the run key's
//! partition, on a local file system or an object store (see the README,
//! "Delta Lake target"; [`super::root`] has the file operations; `log` opens the table and reads its `txn` versions).
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

mod commit;
mod conflict;
mod copy;
pub(crate) mod durable;
mod gc;
mod log;
mod rollback;
mod schema;
mod snapshot;
mod stats;
mod store;
mod target;
mod verify;

pub use commit::publish;
pub use gc::gc;
pub use log::{app_id, current_txn, is_delta, is_delta_arg, txn_version};
pub use rollback::rollback;
pub use snapshot::Snapshot;
pub use target::{Delta, Kind};
pub use verify::verify;

#[cfg(test)]
mod tests {
    use super::copy::{staged_name, token_of};
    use super::gc::percent_decode;
    use super::log::*;

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
