//! Why staged files could not be audited.

/// Why staged files could not be audited (exit code 3).
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("staged directory `{0}` does not exist")]
    MissingDir(String),
    #[error("`{0}` is not a directory")]
    NotADir(String),
    #[error("no Parquet files under `{0}` (names starting with `_` or `.` are ignored)")]
    NoFiles(String),
    #[error("cannot read `{path}`: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{path}` is a symbolic link; staged files must be regular files inside the staged directory")]
    Symlink { path: String },
    #[error("cannot read `{url}`: {reason}")]
    Remote { url: String, reason: String },
    #[error("`{path}` is not a valid Parquet file: {reason}")]
    Corrupt { path: String, reason: String },
    #[error("the schema of `{path}` disagrees with `{first}`: {detail}")]
    SchemaMismatch {
        path: String,
        first: String,
        detail: String,
    },
}

/// A file that is not valid Parquet: `rel` as messages show it, and why.
pub(crate) fn corrupt(rel: &str, e: impl std::fmt::Display) -> InputError {
    InputError::Corrupt {
        path: rel.to_string(),
        reason: e.to_string(),
    }
}
