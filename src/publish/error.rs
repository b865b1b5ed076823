//! Why `publish`, `verify`, `rollback` or `gc` stopped, as data.
//!
//! Each variant maps to one exit code of the contract (`cli-and-verdict.md`):
//! 2 refused (usage, other file system, no atomic swap, nothing to roll back),
//! 3 unreadable or missing state, 4 conflict (staged files or the published
//! version changed since the audit, or another publish holds the partition).

use std::path::Path;

use crate::staged::InputError;

/// Why `publish`, `verify`, `rollback` or `gc` stopped.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// A refusal with its reason (exit 2).
    #[error("{0}")]
    Refused(String),
    /// The staged directory and the table root are on different file systems
    /// (exit 2); dqgate never falls back to a copy.
    #[error("`{staged}` and the table root `{root}` are on different file systems; publish needs an atomic rename and never copies")]
    OtherFileSystem { staged: String, root: String },
    /// The file system cannot swap directories atomically (exit 2).
    #[error("the file system of `{path}` cannot swap directories atomically (renameat2 {flag}: {source}); refusing to publish non-atomically")]
    NoAtomicSwap {
        path: String,
        flag: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// Staged files that would be published without having been audited
    /// (hidden `.parquet` files, or name clashes with versioned names) (exit 2).
    #[error("the staged directory `{staged}` cannot be published as is: {detail}")]
    UnpublishableStaged { staged: String, detail: String },
    /// `rollback` found no kept version, or nothing published (exit 2).
    #[error("nothing to roll back for partition `{partition}`: {detail}")]
    NothingToRollBack { partition: String, detail: String },
    /// A partition directory without a readable audit record: someone wrote
    /// there without dqgate (exit 3).
    #[error("`{dir}` has no audit record `_dqgate_audit.json`; it was not published by dqgate (or was tampered with)")]
    MissingRecord { dir: String },
    /// Nothing is published for the run key (`verify`: exit 3).
    #[error("nothing is published at `{dir}`")]
    NotPublished { dir: String },
    /// The audit record exists but cannot be read or parsed (exit 3).
    #[error("the audit record `{path}` is unreadable: {reason}")]
    BadRecord { path: String, reason: String },
    /// The Delta table's log could not be read or written (exit 3).
    #[error("Delta table `{path}`: {reason}")]
    Delta { path: String, reason: String },
    /// The staged files could not be read (exit 3).
    #[error("cannot read the staged files: {0}")]
    Input(#[from] InputError),
    /// A file-system operation failed (exit 3).
    #[error("{action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the partition's lock (exit 4).
    #[error("another publish or rollback of partition `{partition}` is in progress")]
    Busy { partition: String },
    /// Other swaps held the table lock for longer than a swap waits (exit 4).
    #[error(
        "the table lock `{lock}` was held by other publishes for {secs} s; nothing was published"
    )]
    TableBusy { lock: String, secs: u64 },
    /// The audit read other partitions of the table, and the table is no
    /// longer in the state it read (exit 4): its verdict may not hold.
    #[error("the table changed since the audit, which read other partitions ({reads}): {detail}; nothing was published")]
    ReadSetChanged { reads: String, detail: String },
    /// The staged files changed after they were audited (exit 4).
    #[error("the staged files changed after the audit (audited {audited}, now {now}); nothing was published")]
    StagedChanged { audited: String, now: String },
    /// The published version is not the one the audit compared against
    /// (exit 4): another publish won the race.
    #[error("the published partition changed since the audit (audited against {}, now {}); nothing was published", show(.expected), show(.found))]
    PublishedChanged {
        expected: Option<String>,
        found: Option<String>,
    },
}

fn show(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("nothing published")
}

impl PublishError {
    /// The exit code of the contract: 2 refused (usage, other file system,
    /// no atomic swap), 3 unreadable or missing state, 4 conflict.
    pub fn exit_code(&self) -> u8 {
        use PublishError::*;
        match self {
            Refused(_)
            | OtherFileSystem { .. }
            | NoAtomicSwap { .. }
            | UnpublishableStaged { .. }
            | NothingToRollBack { .. } => 2,
            MissingRecord { .. }
            | NotPublished { .. }
            | BadRecord { .. }
            | Delta { .. }
            | Input(_)
            | Io { .. } => 3,
            Busy { .. }
            | TableBusy { .. }
            | ReadSetChanged { .. }
            | StagedChanged { .. }
            | PublishedChanged { .. } => 4,
        }
    }

    /// An I/O error with what was being done and where.
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        PublishError::Io {
            action,
            path: path.display().to_string(),
            source,
        }
    }
}

/// Attaches an action and a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, action: &'static str, path: &Path) -> Result<T, PublishError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, action: &'static str, path: &Path) -> Result<T, PublishError> {
        self.map_err(|e| PublishError::io(action, path, e))
    }
}
