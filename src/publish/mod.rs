//! Passed verdict + staged directory → atomic swap into the table.
//!
//! (Interface fixed; the implementation lands with the publish issue.)

use std::path::{Path, PathBuf};

use crate::runkey::RunKey;
use crate::verdict::PassedVerdict;

/// Why `publish`, `verify`, `rollback` or `gc` stopped.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error("{0}")]
    Refused(String),
}

impl PublishError {
    /// The exit code of the contract: 2 refused (usage, other file system,
    /// no atomic swap), 3 unreadable or missing state, 4 conflict.
    pub fn exit_code(&self) -> u8 {
        match self {
            PublishError::Refused(_) => 2,
        }
    }
}

/// A published table root.
#[derive(Debug, Clone)]
pub struct Table {
    pub root: PathBuf,
}

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
}

impl Table {
    pub fn open(root: &Path) -> Result<Table, PublishError> {
        Ok(Table {
            root: root.to_path_buf(),
        })
    }

    /// The published version of `key`, if any.
    pub fn current(&self, key: &RunKey) -> Result<Option<PublishedVersion>, PublishError> {
        let _ = key;
        Ok(None)
    }

    /// Swaps the audited staged directory in, if the published version is
    /// still `audited_against` (compare-and-swap).
    pub fn publish(
        &self,
        key: &RunKey,
        staged: &Path,
        passed: &PassedVerdict,
        audited_against: Option<&str>,
        opts: &PublishOptions,
    ) -> Result<PublishOutcome, PublishError> {
        let _ = (key, staged, passed, audited_against, opts);
        Err(PublishError::Refused(
            "publish is not implemented yet".into(),
        ))
    }

    pub fn verify(&self, key: &RunKey) -> Result<VerifyReport, PublishError> {
        let _ = key;
        Err(PublishError::Refused(
            "verify is not implemented yet".into(),
        ))
    }

    /// Swaps the last displaced version back; returns the restored version.
    pub fn rollback(&self, key: &RunKey) -> Result<String, PublishError> {
        let _ = key;
        Err(PublishError::Refused(
            "rollback is not implemented yet".into(),
        ))
    }

    /// Cleans leftovers of interrupted publishes; returns what it removed.
    pub fn gc(&self) -> Result<Vec<String>, PublishError> {
        Err(PublishError::Refused("gc is not implemented yet".into()))
    }
}
