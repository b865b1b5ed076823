//! The library's error type and its mapping to the contract's exit codes.

use crate::diagnostic::{self, Diagnostic};
use crate::exec::ExecError;
use crate::report::ReportError;
use crate::runkey::RunKeyError;
use crate::staged::InputError;

/// Everything that can stop a command, grouped by the exit code it maps to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad command-line use (exit 2).
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    RunKey(#[from] RunKeyError),
    /// The rule file does not parse or check (exit 2). Rendered with carets.
    #[error("{}", diagnostic::render(.file, .source_text, .diagnostics))]
    Rules {
        file: String,
        source_text: String,
        diagnostics: Vec<Diagnostic>,
    },
    /// The staged data could not be audited (exit 3).
    #[error(transparent)]
    Input(#[from] InputError),
    /// The engine failed while auditing (exit 3), with what it was doing.
    #[error("{context}: {source}")]
    Engine {
        context: String,
        #[source]
        source: datafusion::error::DataFusionError,
    },
    /// Something else stopped the audit (exit 3).
    #[error("{0}")]
    Audit(String),
    /// Publish refused or failed; carries its own exit code.
    #[error(transparent)]
    Publish(#[from] crate::publish::PublishError),
    /// The execution stage stopped; carries its own exit code.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// `--failed-rows` refused (exit 2).
    #[error(transparent)]
    FailedRows(#[from] crate::failed::OptionError),
    /// A report could not be made (exit 3, like unreadable data).
    #[error(transparent)]
    Report(#[from] ReportError),
}

impl Error {
    /// The exit code of the contract (`cli-and-verdict.md`).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) | Error::RunKey(_) | Error::Rules { .. } | Error::FailedRows(_) => 2,
            Error::Input(_) | Error::Engine { .. } | Error::Audit(_) => 3,
            Error::Publish(e) => e.exit_code(),
            Error::Exec(e) => e.exit_code(),
            Error::Report(_) => 3,
        }
    }

    pub fn engine(context: impl Into<String>, source: datafusion::error::DataFusionError) -> Self {
        Error::Engine {
            context: context.into(),
            source,
        }
    }
}

/// A location that cannot be used: its store's configuration (credentials
/// files, account names) is unusable, so the data cannot be read (exit 3,
/// like wrong credentials); anything else is bad command-line use (exit 2).
impl From<crate::staged::LocationError> for Error {
    fn from(e: crate::staged::LocationError) -> Self {
        match e {
            crate::staged::LocationError::Build { .. } => Error::Audit(e.to_string()),
            _ => Error::Usage(e.to_string()),
        }
    }
}

/// A publish target that cannot be opened.
impl From<crate::publish::OpenError> for Error {
    fn from(e: crate::publish::OpenError) -> Self {
        match e {
            crate::publish::OpenError::Usage(m) => Error::Usage(m),
            crate::publish::OpenError::Location(e) => e.into(),
            crate::publish::OpenError::Publish(e) => Error::Publish(e),
        }
    }
}
