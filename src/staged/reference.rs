//! A `reference` table as files: a published table root, a directory of
//! Parquet files, or one Parquet file.
//!
//! A directory is read like a Hive-partitioned table: every `.parquet` file
//! under it, recursively, skipping names that start with `_` or `.` (so a
//! dqgate table's `_dqgate/` state and audit records are never read; its
//! displaced versions live outside the root). Directory names of the form
//! `key=value` give text columns named `key`, when every file lies under the
//! same sequence of keys (the longest sequence all files share); files are
//! grouped by those values into parts, and each part's files must agree on
//! their schema, as staged files must. Only footers are read here.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::error::InputError;
use super::files::list_parquet_files;
use super::hive;
use super::input::StagedInput;
use super::remote::{LocationError, Remote};

/// Why a `reference` table cannot be read. It does not name the table's
/// path: the caller does.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("no such file or directory")]
    Missing,
    #[error("{0}")]
    Io(std::io::Error),
    #[error("not a file name")]
    NotAFileName,
    #[error("no Parquet files in it (names starting with `_` or `.` are ignored)")]
    NoFiles,
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Location(#[from] LocationError),
}

/// `key=value` pairs of a file's directories.
type Hive = Vec<(String, String)>;
/// Listed files (path relative to the root, and where each is) that share
/// their Hive values.
type Group<T> = (Hive, Vec<(String, T)>);

/// Files that share the same Hive-style `key=value` directory values.
#[derive(Debug, Clone)]
pub struct Part {
    /// The `key=value` pairs of the part's directories, in path order.
    pub hive: Vec<(String, String)>,
    pub input: StagedInput,
}

/// An opened reference table.
#[derive(Debug, Clone)]
pub struct Dataset {
    /// Sorted by their Hive values.
    pub parts: Vec<Part>,
    /// The first part's columns, then the Hive columns (text) that are not
    /// also file columns.
    pub schema: SchemaRef,
}

impl Dataset {
    /// Lists the files under `path` and reads their footers. The error says
    /// what is wrong, without naming `path` (the caller does).
    pub fn open(path: &Path) -> Result<Dataset, ReferenceError> {
        let meta = fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => ReferenceError::Missing,
            _ => ReferenceError::Io(e),
        })?;
        let (root, files) = if meta.is_file() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .ok_or(ReferenceError::NotAFileName)?;
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            (parent, vec![(name, path.to_path_buf())])
        } else {
            let files = list_parquet_files(path)?;
            (path.to_path_buf(), files)
        };
        let mut parts = Vec::new();
        for (hive, files) in group(files)? {
            let input = StagedInput::from_listed(&root, files)?;
            parts.push(Part { hive, input });
        }
        Ok(Dataset::of_parts(parts))
    }

    /// [`Dataset::open`] for an object-store URL: a prefix (listed like
    /// staged files) or one `.parquet` object. The store is configured from
    /// the environment, as for `--staged`.
    pub async fn open_remote(url: &str) -> Result<Dataset, ReferenceError> {
        let (prefix, single) = match url.rsplit_once('/') {
            Some((dir, name)) if name.ends_with(".parquet") => (format!("{dir}/"), Some(name)),
            _ => (url.to_string(), None),
        };
        let remote = Remote::open(&prefix, &[])?;
        let files = match single {
            Some(name) => vec![(name.to_string(), ())],
            None => remote
                .list_files()
                .await?
                .into_iter()
                .map(|(rel, _)| (rel, ()))
                .collect(),
        };
        let mut parts = Vec::new();
        for (hive, files) in group(files)? {
            let rels: Vec<String> = files.into_iter().map(|(rel, ())| rel).collect();
            let input = StagedInput::open_files(&remote, &rels).await?;
            parts.push(Part { hive, input });
        }
        Ok(Dataset::of_parts(parts))
    }

    /// The dataset of its parts (at least one): the first part's columns,
    /// then the Hive columns that are not also file columns.
    fn of_parts(parts: Vec<Part>) -> Dataset {
        let first = &parts[0];
        let mut fields: Vec<Field> = first
            .input
            .schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for (k, _) in &first.hive {
            if !fields.iter().any(|f| f.name() == k) {
                fields.push(Field::new(k, DataType::Utf8, false));
            }
        }
        Dataset {
            parts,
            schema: Arc::new(Schema::new(fields)),
        }
    }

    /// Data files over all parts.
    pub fn file_count(&self) -> usize {
        self.parts.iter().map(|p| p.input.files.len()).sum()
    }
}

/// The listed files (path relative to the root, sorted, and where each is)
/// grouped by the Hive values of the keys they all share, sorted by them.
fn group<T>(files: Vec<(String, T)>) -> Result<Vec<Group<T>>, ReferenceError> {
    if files.is_empty() {
        return Err(ReferenceError::NoFiles);
    }
    let keys = hive::common_keys(&files);
    let mut groups: Vec<Group<T>> = Vec::new();
    for (rel, at) in files {
        let pairs: Vec<_> = hive::pairs(&rel).into_iter().take(keys).collect();
        match groups.iter_mut().find(|(h, _)| *h == pairs) {
            Some((_, list)) => list.push((rel, at)),
            None => groups.push((pairs, vec![(rel, at)])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(groups)
}
