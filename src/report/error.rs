//! Why a report could not be made.

use std::path::Path;

/// Why a report could not be made. Exit code 3, like unreadable data.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A verdict file or an audit record that cannot be read or is not a
    /// `dqgate.verdict/v1` document.
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    /// The `--table`'s history cannot be read.
    #[error(transparent)]
    History(#[from] crate::publish::HistoryError),
}

impl ReportError {
    pub(crate) fn read(path: &Path, reason: &str) -> ReportError {
        ReportError::Read {
            path: path.display().to_string(),
            reason: reason.to_string(),
        }
    }
}
