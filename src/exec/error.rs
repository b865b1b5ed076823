//! The execution stage's error: what stopped the plans from running over the
//! staged files. The library's error type wraps it whole (`Error::Exec`), so
//! messages and exit codes are those of the stage that failed.

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;

use super::keys::{GaveUp, PackError, StoreError};
use crate::staged::InputError;

/// Why execution stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// A bad execution setting (exit 2), e.g. a Ballista address.
    #[error("{0}")]
    Usage(String),
    /// The staged data could not be read (exit 3).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The engine failed (exit 3), with what it was doing.
    #[error("{context}: {source}")]
    Engine {
        context: String,
        #[source]
        source: DataFusionError,
    },
    /// The key engine could not spill its words or read them back (exit 3).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Arrow failed on batches or rows (exit 3).
    #[error(transparent)]
    Arrow(#[from] ArrowError),
    /// Key columns could not be packed as planned (exit 3).
    #[error(transparent)]
    Pack(#[from] PackError),
    /// Key columns could not be hashed into fingerprints (exit 3).
    #[error(transparent)]
    Fingerprint(DataFusionError),
    /// A key strategy gave up on the input: its caller runs the fallback,
    /// so this is never shown (exit 3 if it were).
    #[error(transparent)]
    GaveUp(#[from] GaveUp),
    /// Something else stopped execution (exit 3).
    #[error("{0}")]
    Audit(String),
}

impl ExecError {
    /// The exit code of the contract: 2 for a bad setting, else 3.
    pub fn exit_code(&self) -> u8 {
        match self {
            ExecError::Usage(_) => 2,
            ExecError::Input(_)
            | ExecError::Engine { .. }
            | ExecError::Arrow(_)
            | ExecError::Store(_)
            | ExecError::Pack(_)
            | ExecError::Fingerprint(_)
            | ExecError::GaveUp(_)
            | ExecError::Audit(_) => 3,
        }
    }

    /// An engine failure while doing `context` ("planning the scan").
    pub fn engine(context: impl Into<String>, source: DataFusionError) -> Self {
        ExecError::Engine {
            context: context.into(),
            source,
        }
    }
}
