//! Why a report could not be made.

use std::path::Path;

/// Why a report could not be made. Exit code 3, like unreadable data.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A verdict file or an audit record that cannot be read or is not a
    /// `dqgate.verdict/v1` document.
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    /// The `--table` root cannot be listed.
    #[error("cannot read the table {path}: {reason}")]
    Table { path: String, reason: String },
}

impl ReportError {
    pub(crate) fn read(path: &Path, reason: &str) -> ReportError {
        ReportError::Read {
            path: path.display().to_string(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn table(path: &Path, reason: &str) -> ReportError {
        ReportError::Table {
            path: path.display().to_string(),
            reason: reason.to_string(),
        }
    }
}
