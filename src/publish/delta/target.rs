//! The Delta table as a [`Target`]: one conditional commit per publish.

use std::path::Path;

use async_trait::async_trait;

use super::snapshot::Snapshot as DeltaSnapshot;
use crate::publish::record::RECORD;
use crate::publish::root::Root;
use crate::publish::target::{Current, PartSource, Read, Request, RolledBack, Snapshot, Target};
use crate::publish::target::{HistoryError, HistorySink, OpenError};
use crate::publish::{PublishError, PublishOptions, PublishOutcome, ReadSet, VerifyReport};
use crate::runkey::RunKey;
use crate::staged::{Location, LocationError};
use crate::verdict::history::PastRuns;

/// A Delta table's root: a directory or an object-store prefix.
pub struct Delta {
    pub root: Root,
}

#[async_trait]
impl Target for Delta {
    async fn snapshot(&self, read: Read<'_>) -> Result<Box<dyn Snapshot>, PublishError> {
        // The partition's txn before anything is read: the commit must find
        // it unchanged (the snapshot read next is at least as new).
        let txn = if read.to_publish {
            super::log::current_txn(&self.root, read.key).await?
        } else {
            None
        };
        let snapshot = DeltaSnapshot::load(self.root.clone(), read.partitioned_by).await?;
        Ok(Box::new(DeltaRead { snapshot, txn }))
    }

    async fn verify(&self, key: &RunKey) -> Result<VerifyReport, PublishError> {
        super::verify::verify(&self.root, key).await
    }

    async fn rollback(&self, key: &RunKey) -> Result<RolledBack, PublishError> {
        Ok(RolledBack {
            version: super::rollback::rollback(&self.root, key).await?,
            how: Some("a new Delta commit"),
        })
    }

    async fn gc(&self, min_age: std::time::Duration) -> Result<Vec<String>, PublishError> {
        super::gc::gc(&self.root, min_age).await
    }

    /// The audit record of each partition the current snapshot has, and
    /// the publishes and rollbacks its commits record.
    async fn history(&self, sink: &mut dyn HistorySink) -> Result<(), HistoryError> {
        let shown = self.root.show();
        let fail = |e: PublishError| HistoryError::table(Path::new(&shown), &e.to_string());
        let snapshot = DeltaSnapshot::load_own(self.root.clone())
            .await
            .map_err(fail)?;
        let counts = snapshot.trail_counts().await.map_err(fail)?;
        for (rel, text) in snapshot.records().await.map_err(fail)? {
            let Some(text) = text else {
                continue; // committed, record not written yet: not shown
            };
            let path = self.root.name_of(&format!("{rel}/{RECORD}"));
            sink.record(&rel, Path::new(&path), &text)?;
            let (publishes, rollbacks) = counts.get(&rel).copied().unwrap_or_default();
            sink.trail(publishes, rollbacks);
        }
        Ok(())
    }
}

/// A Delta table as one audit read it, with the run key's `txn` version
/// read before it when a publish follows.
#[derive(Debug)]
struct DeltaRead {
    snapshot: DeltaSnapshot,
    txn: Option<i64>,
}

#[async_trait]
impl Snapshot for DeltaRead {
    async fn current(&self, key: &RunKey) -> Result<Option<Current>, PublishError> {
        Ok(self
            .snapshot
            .current(key)
            .await?
            .map(|(files, fingerprint)| Current {
                source: PartSource::Files {
                    root: self.snapshot.root.clone(),
                    files,
                },
                fingerprint,
            }))
    }

    fn others(&self, own: &str) -> Result<Vec<(String, PartSource)>, PublishError> {
        Ok(self
            .snapshot
            .others(own)
            .map(|(rel, files)| {
                (
                    rel.to_string(),
                    PartSource::Files {
                        root: self.snapshot.root.clone(),
                        files: files.to_vec(),
                    },
                )
            })
            .collect())
    }

    fn other_keys(&self, own: &str) -> Vec<(String, Vec<(String, String)>)> {
        self.snapshot
            .others(own)
            .map(|(rel, _)| (rel.to_string(), crate::runkey::pairs_of_rel(rel)))
            .collect()
    }

    fn source_of(&self, rel: &str) -> Result<PartSource, PublishError> {
        Ok(PartSource::Files {
            root: self.snapshot.root.clone(),
            files: self.snapshot.files_of(rel).to_vec(),
        })
    }

    fn read_set(&self, own: &str, reads: Vec<String>) -> ReadSet {
        ReadSet {
            reads,
            partitions: self.snapshot.versions(own),
            table_version: self.snapshot.version,
        }
    }

    async fn past_runs(&self) -> PastRuns {
        self.snapshot.past_runs().await
    }

    async fn publish(&self, r: Request<'_>) -> Result<PublishOutcome, PublishError> {
        super::commit::publish(
            &self.snapshot.root,
            r.key,
            r.partitioned_by,
            r.staged,
            r.passed,
            self.txn,
            (r.read, r.indexes),
        )
        .await
    }

    fn keeps_key_indexes(&self) -> bool {
        matches!(self.snapshot.root, Root::Local(_))
    }
}

/// The Delta kind of target: a local directory with `_delta_log/`, or any
/// object-store URL.
pub struct Kind;

#[async_trait]
impl crate::publish::target::Kind for Kind {
    fn name(&self) -> &'static str {
        "delta"
    }

    fn about(&self) -> &'static str {
        "A Delta Lake table: one transaction per publish"
    }

    fn claims(&self, table: &Path) -> bool {
        super::log::is_delta_arg(table)
    }

    /// The `--storage-option`s belong to whichever of the staged files and
    /// the table is on an object store (both, when both are).
    fn staged_location(
        &self,
        staged: &Path,
        table: &Path,
        options: &[String],
    ) -> Result<Location, LocationError> {
        Location::parse_beside_table(staged, Some(table), options)
    }

    async fn open(
        &self,
        table: &Path,
        options: &[String],
        publish: Option<&PublishOptions>,
    ) -> Result<Box<dyn Target>, OpenError> {
        let root = Root::parse(table, options)?;
        if publish.is_some() && root.occupied().await? && !root.has_log().await? {
            return Err(OpenError::Usage(format!(
                "`{}` is neither empty nor a Delta table (no `_delta_log/`): a Delta table is created in a new or empty location, \
                 never over a Hive table's partitions",
                root.show()
            )));
        }
        Ok(Box::new(Delta { root }))
    }
}
