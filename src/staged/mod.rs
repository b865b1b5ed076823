//! The staged partition as files: discovery, footers, schema, fingerprint,
//! Hive directories, object stores and the `reference` tables.
//!
//! Discovery follows the contract: every file under the staged location whose
//! name ends in `.parquet`, recursively, skipping files and directories whose
//! names start with `_` or `.` (Spark's `_temporary/`, `_SUCCESS`, editors'
//! dot files). Each file's footer is read once; it gives the schema, the row
//! count and the statistics, and it goes into the fingerprint that lets
//! `publish` and `verify` prove that the audited files are the published ones.
//!
//! This module sits below both `exec`, which audits the staged input, and
//! `publish`, which fingerprints and publishes it. Inside it, files name only
//! the files below them: `error` ← `files`, `footer` ← `remote` ← `input` ←
//! `open`, `stats`, `reference`; `hive` names nothing.

mod error;
mod files;
pub mod footer;
pub mod hive;
mod input;
mod open;
pub mod reference;
pub mod remote;
pub mod stats;

pub use error::InputError;
pub use files::list_parquet_files;
pub(crate) use footer::read_footer;
pub(crate) use input::fingerprint_footers;
pub use input::{fingerprint_dir, fingerprint_of, StagedFile, StagedInput};
pub use remote::{is_url, Location, LocationError, Remote};
