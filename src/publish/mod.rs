//! Publishing a passed verdict: the staged files become the table's
//! partition for the run key in one atomic step, or nothing changes.
//!
//! A publish target is one folder: [`hive`] (an atomic directory swap into
//! `ROOT/k=v`, `spec/publish.md`) and [`delta`] (one conditional Delta Lake
//! commit). What they share lives here: the audit record every published
//! partition carries (`record`), the read set a publish validates
//! (`readset`), what `history(N)` takes from the records (`history`), the
//! table root and its file operations (`root`), durable file operations
//! (`fsx`) and the errors (`error`).
//!
//! Exit codes: see [`PublishError::exit_code`].

pub mod delta;
mod error;
mod fsx;
mod history;
pub mod hive;
pub(crate) mod indexes;
pub mod open;
pub mod readset;
mod record;
pub mod root;
pub mod target;

use std::path::PathBuf;

pub use error::PublishError;
pub use hive::{HiveSnapshot, Table};
pub use open::choose;
pub use readset::{PartVersion, ReadSet};
pub use target::{
    Current, HistoryError, HistorySink, Kind, OpenError, PartSource, Read, Request, RolledBack,
    Snapshot, Target,
};

/// The version of a partition that readers see now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedVersion {
    /// `ROOT/k=v[/...]`: what `published.*` metrics are computed over.
    pub dir: PathBuf,
    /// `input.fingerprint` of its audit record.
    pub fingerprint: String,
    /// `published.version` of its audit record.
    pub version: String,
}

#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// How many displaced versions to keep for rollback (default 3).
    pub keep_versions: usize,
}

impl Default for PublishOptions {
    fn default() -> Self {
        PublishOptions { keep_versions: 3 }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishOutcome {
    /// The staged files are now the published partition.
    Published {
        version: String,
        displaced: Option<String>,
    },
    /// The published version already has these files' fingerprint.
    AlreadyPublished { version: String },
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    pub version: String,
    pub fingerprint: String,
    /// Files that are missing, extra or changed; empty when verified.
    pub differences: Vec<String>,
    /// What the verdict read of other partitions (its read set), in words;
    /// `None` when it read only its own partition.
    pub read: Option<String>,
}
