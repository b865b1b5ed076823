//! The Hive target: a passed verdict and a staged directory swapped
//! atomically into `ROOT/k=v`; `verify`, `rollback` and `gc` of what was
//! published.
//!
//! This is the "publish" of write-audit-publish (`spec/publish.md`). The
//! published partition `ROOT/k1=v1[/k2=v2]` is a real directory holding one
//! complete version: its data files, named uniquely per version
//! (`part-00000.parquet` is published as `part-00000.v3-1be0c3a9.parquet`,
//! see `layout`), and `_dqgate_audit.json`, the verdict plus a manifest of
//! those files; writers' by-products such as Spark's `_SUCCESS` and `.crc`
//! sidecars are left out (`byproducts`). A publish, under an exclusive per-partition `flock`
//! (`lock`), renames the staged files to their versioned names and writes
//! the record *in the staged directory*, fsyncs everything, re-checks the
//! fingerprint, and swaps the staged directory with the partition in one
//! `renameat2(RENAME_EXCHANGE)` (or `RENAME_NOREPLACE` for a first publish)
//! (`swap`), holding the table lock around the swap: shared, or exclusive
//! when the audit read other partitions, whose read set (`readset`) is then
//! validated under it, so that the verdict still holds at the swap. The displaced version, which the exchange leaves at the staged
//! path, is moved whole into a kept-versions area beside ROOT,
//! `ROOT/../.ROOTNAME.dqgate/versions/` (`kept`; `layout` says why not
//! under ROOT), so that no glob of `ROOT/**/*.parquet` ever matches anything
//! but published files. Locks and journals live under `ROOT/_dqgate/`.
//!
//! What readers see:
//!
//! - A reader that resolves the partition once (opens the directory, or reads
//!   the record's file list and then those files) sees one version, always:
//!   the directory it resolved is renamed whole, never edited in place.
//! - A reader that lists `ROOT/**/*.parquet` and then opens files by path may
//!   find a file gone (its version was swapped out: retry), but never rows of
//!   two versions, since no new file name equals an old one.
//! - Displaced versions are outside every glob of ROOT and keep their file
//!   names, so a reader holding the directory open can finish reading, and
//!   `rollback` can swap one back.
//!
//! Every swap is journalled (`journal`) before its first side effect, and
//! every publish, rollback and `gc` first finishes or undoes a journalled
//! swap left by a killed process (`recover`): the partition is the old or
//! the new version, complete, at every instant, and a leftover is never
//! published.
//!
//! Exit codes: see [`PublishError::exit_code`]. A partition directory without
//! a readable record was not written by dqgate: `current`, `publish`,
//! `verify` and `rollback` refuse it with exit 3.

mod byproducts;
mod journal;
mod kept;
pub mod layout;
mod lock;
mod recover;
mod rollback;
mod snapshot;
mod swap;
mod target;
mod trail;
mod verify;

use std::path::{Path, PathBuf};

pub use snapshot::HiveSnapshot;
pub use target::{Hive, Kind};

use crate::publish::{
    PublishError, PublishOptions, PublishOutcome, PublishedVersion, ReadSet, VerifyReport,
};
use crate::runkey::RunKey;
use crate::verdict::PassedVerdict;
use layout::Layout;

/// A published table root.
#[derive(Debug, Clone)]
pub struct Table {
    pub root: PathBuf,
}

impl Table {
    /// Opens the table at `root` (made absolute; it need not exist yet).
    pub fn open(root: &Path) -> Result<Table, PublishError> {
        let root =
            std::path::absolute(root).map_err(|e| PublishError::io("cannot resolve", root, e))?;
        Ok(Table { root })
    }

    fn layout(&self, key: &RunKey) -> Result<Layout, PublishError> {
        if key.is_empty() {
            return Err(PublishError::Refused(
                "publishing needs a run key (--partition KEY=VALUE): the rule file has no `partitioned by`".into(),
            ));
        }
        Ok(Layout::new(&self.root, key.rel_dir()))
    }

    /// The published version of `key`, if any. A partition directory without
    /// a readable audit record is an error (exit 3): it was not published by
    /// dqgate.
    pub fn current(&self, key: &RunKey) -> Result<Option<PublishedVersion>, PublishError> {
        let layout = self.layout(key)?;
        Ok(layout.current_record()?.map(|r| PublishedVersion {
            dir: layout.partition_dir(),
            fingerprint: r.fingerprint,
            version: r.version,
        }))
    }

    /// Swaps the audited staged directory in, if the published version is
    /// still `audited_against` (compare-and-swap), for an audit that read
    /// only its own partition.
    pub fn publish(
        &self,
        key: &RunKey,
        staged: &Path,
        passed: &PassedVerdict,
        audited_against: Option<&str>,
        opts: &PublishOptions,
    ) -> Result<PublishOutcome, PublishError> {
        self.publish_read(
            key,
            staged,
            passed,
            audited_against,
            &ReadSet::default(),
            opts,
        )
    }

    /// [`publish`](Self::publish) for an audit that read `read` of the rest
    /// of the table: the swap happens only if the table is still in that
    /// state, validated under the exclusive table lock (invariant 10);
    /// otherwise [`PublishError::ReadSetChanged`] (exit 4).
    pub fn publish_read(
        &self,
        key: &RunKey,
        staged: &Path,
        passed: &PassedVerdict,
        audited_against: Option<&str>,
        read: &ReadSet,
        opts: &PublishOptions,
    ) -> Result<PublishOutcome, PublishError> {
        let layout = self.layout(key)?;
        swap::publish(&layout, staged, passed, audited_against, read, opts)
    }

    /// Recomputes the published partition's fingerprint and compares it with
    /// its audit record.
    pub fn verify(&self, key: &RunKey) -> Result<VerifyReport, PublishError> {
        verify::verify(&self.layout(key)?)
    }

    /// Swaps the last displaced version back; returns the restored version.
    pub fn rollback(&self, key: &RunKey) -> Result<String, PublishError> {
        rollback::rollback(&self.layout(key)?)
    }

    /// Undoes the interrupted publishes whose staged directory is `staged`
    /// (as the next publish of their partition would, under its lock), so
    /// that files a killed publish left under their versioned names are back
    /// under their staged names before they are audited again. Partitions
    /// another process holds are left alone (their journals are live).
    pub fn recover_staged(&self, staged: &Path) -> Result<Vec<String>, PublishError> {
        recover::recover_staged(&self.root, staged)
    }

    /// Cleans leftovers of interrupted publishes; returns what it removed.
    pub fn gc(&self) -> Result<Vec<String>, PublishError> {
        recover::gc(&self.root)
    }
}
