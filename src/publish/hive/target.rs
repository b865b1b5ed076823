//! The Hive table as a [`Target`]: a directory swap per partition.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{HiveSnapshot, Table};
use crate::publish::root::Root;
use crate::publish::target::{no_options, HistoryError, HistorySink, OpenError};
use crate::publish::target::{Current, PartSource, Read, Request, RolledBack, Snapshot, Target};
use crate::publish::{PublishError, PublishOptions, PublishOutcome, ReadSet, VerifyReport};
use crate::runkey::RunKey;
use crate::staged::{is_url, Location, LocationError};
use crate::verdict::history::PastRuns;

/// A Hive table root, and how its publishes keep displaced versions.
pub struct Hive {
    pub table: Table,
    pub opts: PublishOptions,
    /// The root as the command named it (`table.root` is absolute), for
    /// the paths a history shows.
    pub named: PathBuf,
}

#[async_trait]
impl Target for Hive {
    async fn snapshot(&self, read: Read<'_>) -> Result<Box<dyn Snapshot>, PublishError> {
        // The partitions and records are read whole only when the rule file
        // may read other partitions (else only the root is known).
        let keys: &[String] = if read.whole { read.partitioned_by } else { &[] };
        Ok(Box::new(HiveRead {
            snapshot: self.table.snapshot(keys)?,
            table: self.table.clone(),
            opts: self.opts.clone(),
        }))
    }

    fn recover_staged(&self, staged: &Path) -> Result<Vec<String>, PublishError> {
        self.table.recover_staged(staged)
    }

    async fn verify(&self, key: &RunKey) -> Result<VerifyReport, PublishError> {
        self.table.verify(key)
    }

    async fn rollback(&self, key: &RunKey) -> Result<RolledBack, PublishError> {
        Ok(RolledBack {
            version: self.table.rollback(key)?,
            how: None,
        })
    }

    async fn gc(&self, _min_age: std::time::Duration) -> Result<Vec<String>, PublishError> {
        // Journals tell live publishes (their locks held) from dead ones.
        self.table.gc()
    }

    async fn history(&self, sink: &mut dyn HistorySink) -> Result<(), HistoryError> {
        super::history::read(&self.named, sink)
    }
}

/// A Hive table as one audit read it.
#[derive(Debug)]
struct HiveRead {
    snapshot: HiveSnapshot,
    table: Table,
    opts: PublishOptions,
}

impl HiveRead {
    fn root(&self) -> Root {
        Root::Local(self.snapshot.root.clone())
    }
}

#[async_trait]
impl Snapshot for HiveRead {
    async fn current(&self, key: &RunKey) -> Result<Option<Current>, PublishError> {
        Ok(self.table.current(key)?.map(|v| Current {
            source: PartSource::Dir(v.dir),
            fingerprint: v.fingerprint,
        }))
    }

    fn others(&self, own: &str) -> Result<Vec<(String, PartSource)>, PublishError> {
        Ok(self
            .snapshot
            .others(own)?
            .into_iter()
            .map(|(rel, files)| {
                let root = self.root();
                (rel, PartSource::Files { root, files })
            })
            .collect())
    }

    fn other_keys(&self, own: &str) -> Vec<(String, Vec<(String, String)>)> {
        self.snapshot
            .recorded_keys(own)
            .map(|(rel, pairs)| (rel.to_string(), pairs.to_vec()))
            .collect()
    }

    fn source_of(&self, rel: &str) -> Result<PartSource, PublishError> {
        Ok(PartSource::Files {
            root: self.root(),
            files: self.snapshot.files_of(rel)?,
        })
    }

    fn changed_since(&self, rel: &str) -> Option<String> {
        self.snapshot.changed_since(rel)
    }

    fn read_set(&self, own: &str, reads: Vec<String>) -> ReadSet {
        ReadSet {
            reads,
            partitions: self.snapshot.versions(own),
            table_version: None,
        }
    }

    async fn past_runs(&self) -> PastRuns {
        self.snapshot.past_runs()
    }

    fn keeps_key_indexes(&self) -> bool {
        true
    }

    async fn publish(&self, r: Request<'_>) -> Result<PublishOutcome, PublishError> {
        let Location::Local(staged) = &r.staged.location else {
            return Err(PublishError::Refused(
                "a Hive table is published from staged files on a local file system".into(),
            ));
        };
        self.table.publish_read(
            r.key,
            staged,
            r.passed,
            r.compared.map(|c| c.fingerprint.as_str()),
            r.read,
            r.indexes,
            &self.opts,
        )
    }
}

/// The Hive kind of target: every `--table` that no other kind claims.
pub struct Kind;

#[async_trait]
impl crate::publish::target::Kind for Kind {
    fn name(&self) -> &'static str {
        "hive"
    }

    fn about(&self) -> &'static str {
        "`ROOT/k=v/` directories swapped atomically by rename"
    }

    fn claims(&self, _table: &Path) -> bool {
        true
    }

    fn refuse_options(&self, options: &[String]) -> Result<(), OpenError> {
        no_options(options)
    }

    fn refuse_publish(&self, table: &Path, staged: &Path) -> Result<(), OpenError> {
        if let Some(url) = staged.to_str().filter(|s| is_url(s)) {
            return Err(refuse_remote_publish(url));
        }
        // Never a Delta table (a Hive swap of its directories would break
        // it), never an object store (no rename there).
        match table.to_str().filter(|s| is_url(s)) {
            None if crate::publish::delta::is_delta(table) => Err(OpenError::Usage(format!(
                "`{}` is a Delta table: publish to it with --target delta (or without --target), never as a Hive table",
                table.display()
            ))),
            None => Ok(()),
            Some(url) => Err(refuse_remote_publish(url)),
        }
    }

    fn staged_location(
        &self,
        staged: &Path,
        _table: &Path,
        _options: &[String],
    ) -> Result<Location, LocationError> {
        Ok(Location::Local(staged.to_path_buf()))
    }

    async fn open(
        &self,
        table: &Path,
        _options: &[String],
        publish: Option<&PublishOptions>,
    ) -> Result<Box<dyn Target>, OpenError> {
        Ok(Box::new(Hive {
            table: Table::open(table)?,
            opts: publish.cloned().unwrap_or_default(),
            named: table.to_path_buf(),
        }))
    }
}

fn refuse_remote_publish(url: &str) -> OpenError {
    OpenError::Usage(format!(
        "cannot publish with `{url}`: a plain directory on an object store cannot be swapped atomically \
         (there is no rename), and dqgate never degrades to copy-and-delete; publish into a Delta Lake table \
         instead (`--target delta`: one atomic, conditional commit), or stage and publish on a local file system"
    ))
}
