//! What a publish target provides, as two traits: [`Target`], a table that
//! can be read, published into, verified, rolled back and cleaned, and
//! [`Snapshot`], the table as one audit read it, which a passed verdict is
//! published against (a compare-and-swap: nothing is published when the
//! table changed in what the audit read).
//!
//! The Hive target (`hive/`) and the Delta target (`delta/`) implement both;
//! the command line, `audit` and the publish loop hold a `dyn Target` and
//! never ask which one. A new target is a new folder with these two
//! implementations and a [`Kind`] (how a command names and opens it), and
//! one line in [`super::open::KINDS`].

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::error::PublishError;
use super::readset::ReadSet;
use super::root::Root;
use super::{PublishOptions, PublishOutcome, VerifyReport};
use crate::runkey::RunKey;
use crate::staged::{InputError, StagedInput};
use crate::staged::{Location, LocationError};
use crate::verdict::history::PastRuns;
use crate::verdict::PassedVerdict;

/// A published table.
#[async_trait]
pub trait Target: Send + Sync {
    /// The table as one snapshot, for an audit of `read.key`: everything the
    /// audit reads of the table comes from it.
    async fn snapshot(&self, read: Read<'_>) -> Result<Box<dyn Snapshot>, PublishError>;

    /// Before the audit of a publish: puts staged files that a killed
    /// publish left renamed back under their staged names; what it did, in
    /// words. Most targets never rename staged files.
    fn recover_staged(&self, _staged: &std::path::Path) -> Result<Vec<String>, PublishError> {
        Ok(Vec::new())
    }

    /// Recomputes the published partition's fingerprint and compares it with
    /// its audit record.
    async fn verify(&self, key: &RunKey) -> Result<VerifyReport, PublishError>;

    /// Brings the previous version of the partition back.
    async fn rollback(&self, key: &RunKey) -> Result<RolledBack, PublishError>;

    /// Removes what interrupted publishes left behind (older than `min_age`
    /// where the target cannot tell a live publish from a dead one);
    /// returns what it removed.
    async fn gc(&self, min_age: std::time::Duration) -> Result<Vec<String>, PublishError>;

    /// Reads the table's history into `sink`: every published partition's
    /// audit record, each followed by how many times its trail says a
    /// version was published into it and rolled back. Paths in errors and
    /// in [`HistorySink::record`] are as the command named the table.
    async fn history(&self, sink: &mut dyn HistorySink) -> Result<(), HistoryError>;
}

/// What a table's history is read into, a published partition at a time.
pub trait HistorySink: Send {
    /// Partition `rel`'s (`k=v` path) audit record, read from `path`: the
    /// sink's error (an unreadable record) stops the reading.
    fn record(&mut self, rel: &str, path: &Path, text: &str) -> Result<(), HistoryError>;

    /// How often a version was published into the partition whose record
    /// came last, and how often one was rolled back.
    fn trail(&mut self, publishes: usize, rollbacks: usize);
}

/// Why a table's history could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// An audit record or a trail that cannot be read.
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    /// The table cannot be listed.
    #[error("cannot read the table {path}: {reason}")]
    Table { path: String, reason: String },
}

impl HistoryError {
    pub fn read(path: &Path, reason: &str) -> HistoryError {
        HistoryError::Read {
            path: path.display().to_string(),
            reason: reason.to_string(),
        }
    }

    pub fn table(path: &Path, reason: &str) -> HistoryError {
        HistoryError::Table {
            path: path.display().to_string(),
            reason: reason.to_string(),
        }
    }
}

/// What a snapshot is read for.
#[derive(Debug, Clone, Copy)]
pub struct Read<'a> {
    /// The run key audited (empty when there is none).
    pub key: &'a RunKey,
    /// The rule file's `partitioned by`.
    pub partitioned_by: &'a [String],
    /// Whether the audit may read other partitions (else only the run
    /// key's is needed).
    pub whole: bool,
    /// Whether a publish follows: the snapshot then also holds the state a
    /// publish must still find (a Delta partition's transaction version).
    pub to_publish: bool,
}

/// The table as one audit read it.
#[async_trait]
pub trait Snapshot: Send + Sync + std::fmt::Debug {
    /// The run key's published version; `None` when nothing is published
    /// for it.
    async fn current(&self, key: &RunKey) -> Result<Option<Current>, PublishError>;

    /// Every published partition but `own` (`k=v` path): where its files are.
    fn others(&self, own: &str) -> Result<Vec<(String, PartSource)>, PublishError>;

    /// The run keys of the published partitions but `own`: (`k=v` path,
    /// pairs).
    fn other_keys(&self, own: &str) -> Vec<(String, Vec<(String, String)>)>;

    /// Where the files of partition `rel` are.
    fn source_of(&self, rel: &str) -> Result<PartSource, PublishError>;

    /// When partition `rel` was replaced or removed since the snapshot was
    /// taken, how; a target whose snapshots stay readable says `None`.
    fn changed_since(&self, _rel: &str) -> Option<String> {
        None
    }

    /// The read set of an audit that read this snapshot for `reads` (the
    /// statements that read other partitions; none: an empty read set).
    fn read_set(&self, own: &str, reads: Vec<String>) -> ReadSet;

    /// What the audit records of the published partitions say, for
    /// `history(N)`.
    async fn past_runs(&self) -> PastRuns;

    /// Publishes a passed audit of `request.staged` for `request.key`, if
    /// the table is still as this snapshot read it where the audit looked.
    async fn publish(&self, request: Request<'_>) -> Result<PublishOutcome, PublishError>;

    /// Whether a publish writes [`Request::indexes`] beside the version's
    /// files (else they need not be built).
    fn keeps_key_indexes(&self) -> bool {
        false
    }
}

/// A passed audit, to be published.
pub struct Request<'a> {
    pub key: &'a RunKey,
    pub partitioned_by: &'a [String],
    pub staged: &'a StagedInput,
    pub passed: &'a PassedVerdict,
    /// The run key's published version the audit compared with.
    pub compared: Option<&'a Current>,
    /// What the audit read of other partitions.
    pub read: &'a ReadSet,
    /// The key indexes to write beside the version's files (targets that
    /// keep none ignore them).
    pub indexes: &'a [crate::keyindex::Built],
}

/// The version of a partition that readers see now.
#[derive(Debug, Clone)]
pub struct Current {
    pub source: PartSource,
    /// `input.fingerprint` of its audit record.
    pub fingerprint: String,
}

/// What a rollback restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolledBack {
    pub version: String,
    /// How, when it is more than a swap (a Delta rollback is a new commit).
    pub how: Option<&'static str>,
}

/// Where a published partition's files are.
#[derive(Debug, Clone)]
pub enum PartSource {
    /// A partition directory: every data file under it.
    Dir(PathBuf),
    /// Files relative to the table's root.
    Files { root: Root, files: Vec<String> },
}

impl PartSource {
    /// The partition's files as an input (footers read, not the pages).
    pub async fn open(&self) -> Result<StagedInput, InputError> {
        match self {
            PartSource::Dir(dir) => StagedInput::open(dir),
            PartSource::Files { root, files } => root.input_of(files).await,
        }
    }
}

/// A kind of publish target.
#[async_trait]
pub trait Kind: Sync {
    /// Its name for `--target`.
    fn name(&self) -> &'static str;

    /// What it is, in a line (`--help` shows it beside the name).
    fn about(&self) -> &'static str;

    /// Whether a `--table` given without `--target` is a table of this kind.
    fn claims(&self, table: &Path) -> bool;

    /// Refuses `--storage-option`s where this kind reads no object store
    /// (`verify`, `rollback`, `gc`, `report`).
    fn refuse_options(&self, _options: &[String]) -> Result<(), OpenError> {
        Ok(())
    }

    /// Refuses, before anything is read, a publish this kind cannot make
    /// atomic (Hive: staged files or a table on an object store, or a table
    /// of another kind).
    fn refuse_publish(&self, _table: &Path, _staged: &Path) -> Result<(), OpenError> {
        Ok(())
    }

    /// Where a publish into `table` reads the staged files from.
    fn staged_location(
        &self,
        staged: &Path,
        table: &Path,
        options: &[String],
    ) -> Result<Location, LocationError>;

    /// Opens the table; with `publish`, to publish into it (a kind may
    /// refuse a location it would not create a table in).
    async fn open(
        &self,
        table: &Path,
        options: &[String],
        publish: Option<&PublishOptions>,
    ) -> Result<Box<dyn Target>, OpenError>;
}

/// Why a target could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The command asks for something the target cannot do (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The table's location is not usable.
    #[error(transparent)]
    Location(#[from] LocationError),
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// `--storage-option` given where no object store is.
pub(crate) fn no_options(options: &[String]) -> Result<(), OpenError> {
    match options {
        [] => Ok(()),
        _ => Err(OpenError::Usage(
            LocationError::OptionsWithoutStore.to_string(),
        )),
    }
}
