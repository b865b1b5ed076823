//! A Hive table root and what can be done to its partitions: read the
//! current version, publish (the swap), verify, roll back, recover and
//! clean.

use crate::keyindex::Built;
use std::path::{Path, PathBuf};

use super::layout::Layout;
use super::snapshot::HiveSnapshot;
use super::{recover, rollback, swap, verify};
use crate::publish::{
    PublishError, PublishOptions, PublishOutcome, PublishedVersion, ReadSet, VerifyReport,
};
use crate::runkey::RunKey;
use crate::verdict::history::PastRuns;
use crate::verdict::PassedVerdict;

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
            &[],
            opts,
        )
    }

    /// [`publish`](Self::publish) for an audit that read `read` of the rest
    /// of the table: the swap happens only if the table is still in that
    /// state, validated under the exclusive table lock (invariant 10);
    /// otherwise [`PublishError::ReadSetChanged`] (exit 4). `indexes` are
    /// written into the version beside its files.
    #[allow(clippy::too_many_arguments)]
    pub fn publish_read(
        &self,
        key: &RunKey,
        staged: &Path,
        passed: &PassedVerdict,
        audited_against: Option<&str>,
        read: &ReadSet,
        indexes: &[Built],
        opts: &PublishOptions,
    ) -> Result<PublishOutcome, PublishError> {
        let layout = self.layout(key)?;
        swap::publish(
            &layout,
            staged,
            passed,
            audited_against,
            (read, indexes),
            opts,
        )
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

    /// The partitions named by `keys` and their audit records, as one
    /// snapshot.
    pub fn snapshot(&self, keys: &[String]) -> Result<HiveSnapshot, PublishError> {
        HiveSnapshot::read(&self.root, keys)
    }

    /// What the audit records of the table's partitions say, for
    /// `history(N)`, in directory-name order.
    pub fn past_runs(&self, keys: &[String]) -> Result<PastRuns, PublishError> {
        Ok(HiveSnapshot::read(&self.root, keys)?.past_runs())
    }
}
