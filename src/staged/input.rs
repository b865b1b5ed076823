//! The staged partition as files: discovery, footers, schema and fingerprint.
//!
//! Discovery follows the contract: every file under the staged directory whose
//! name ends in `.parquet`, recursively, skipping files and directories whose
//! names start with `_` or `.` (Spark's `_temporary/`, `_SUCCESS`, editors'
//! dot files). Each file's footer is read once; it gives the schema, the row
//! count and the statistics, and it goes into the fingerprint that lets
//! `publish` and `verify` prove that the audited files are the published ones.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::datatypes::{FieldRef, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::file::metadata::ParquetMetaData;
use sha2::{Digest, Sha256};

use super::error::{corrupt, InputError};
use super::files::list_parquet_files;
use super::footer::read_footer;
use super::remote::Location;

/// One staged data file.
#[derive(Debug, Clone)]
pub struct StagedFile {
    /// Path relative to the staged directory, `/`-separated.
    pub path: String,
    pub bytes: u64,
    /// The decoded footer.
    pub metadata: Arc<ParquetMetaData>,
    /// The values of the input's Hive columns (`key=value` directories) for
    /// this file, in the order of [`StagedInput::hive`].
    pub hive: Vec<ScalarValue>,
}

impl StagedFile {
    pub fn row_count(&self) -> u64 {
        self.metadata.file_metadata().num_rows().max(0) as u64
    }
}

/// The staged partition: its files sorted by relative path, their common
/// schema and the fingerprint over them.
#[derive(Debug, Clone)]
pub struct StagedInput {
    /// Where the files are: a local directory or an object-store prefix.
    pub location: Location,
    pub files: Vec<StagedFile>,
    pub schema: SchemaRef,
    /// The columns that come from Hive-style `key=value` directories rather
    /// than from the files; they close `schema`. See [`super::hive`].
    pub hive: Vec<FieldRef>,
    /// `sha256:<hex>` over each file's relative path, size and footer bytes.
    /// Hive values are part of the relative paths, so it covers them too.
    pub fingerprint: String,
}

impl StagedInput {
    /// Discovers, reads the footers of and fingerprints the staged directory.
    pub fn open(dir: &Path) -> Result<StagedInput, InputError> {
        let shown = dir.display().to_string();
        let meta = fs::metadata(dir).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => InputError::MissingDir(shown.clone()),
            _ => InputError::Io {
                path: shown.clone(),
                source: e,
            },
        })?;
        if !meta.is_dir() {
            return Err(InputError::NotADir(shown));
        }
        let paths = list_parquet_files(dir)?;
        if paths.is_empty() {
            return Err(InputError::NoFiles(shown));
        }
        Ok(StagedInput::from_listed(dir, paths)?.with_hive_columns())
    }

    /// The same input with the keys of its Hive-style `key=value`
    /// directories as columns (after the files' own), typed as DuckDB and
    /// Spark infer them. Staged partitions have them; references group
    /// their files by these directories themselves.
    pub fn with_hive_columns(mut self) -> StagedInput {
        let rels: Vec<&str> = self.files.iter().map(|f| f.path.as_str()).collect();
        let (fields, values) =
            super::hive::columns(&rels, |k| self.schema.field_with_name(k).is_ok());
        if fields.is_empty() {
            return self;
        }
        for (file, values) in self.files.iter_mut().zip(values) {
            file.hive = values;
        }
        let hive: Vec<FieldRef> = fields.into_iter().map(Arc::new).collect();
        let all: Vec<FieldRef> = self.schema.fields().iter().chain(&hive).cloned().collect();
        self.schema = Arc::new(Schema::new(all));
        self.hive = hive;
        self
    }

    /// The schema of the files themselves: `schema` without the Hive
    /// columns.
    pub fn file_schema(&self) -> SchemaRef {
        if self.hive.is_empty() {
            return self.schema.clone();
        }
        let n = self.schema.fields().len() - self.hive.len();
        Arc::new(Schema::new(self.schema.fields()[..n].to_vec()))
    }

    /// Reads the footers of, and fingerprints, files already listed (as
    /// [`list_parquet_files`] lists them: sorted, paths relative to `dir`).
    pub fn from_listed(
        dir: &Path,
        paths: Vec<(String, PathBuf)>,
    ) -> Result<StagedInput, InputError> {
        let footers = paths
            .into_iter()
            .map(|(rel, abs)| {
                let (bytes, footer) = read_footer(&abs, &abs.display().to_string())?;
                Ok(RawFooter { rel, bytes, footer })
            })
            .collect::<Result<Vec<_>, InputError>>()?;
        StagedInput::assemble(Location::Local(dir.to_path_buf()), footers)
    }

    /// The part shared by every kind of location: decodes and checks each
    /// footer (given sorted by relative path), fingerprints, and derives the
    /// common schema.
    pub(crate) fn assemble(
        location: Location,
        footers: Vec<RawFooter>,
    ) -> Result<StagedInput, InputError> {
        let mut hasher = Sha256::new();
        let mut files = Vec::with_capacity(footers.len());
        for RawFooter { rel, bytes, footer } in footers {
            let shown = location.name_of(&rel);
            let metadata = super::footer::decode(&footer[..footer.len() - 8])
                .map_err(|e| corrupt(&shown, e))?;
            validate_footer(&metadata, bytes, footer.len() as u64)
                .map_err(|e| corrupt(&shown, e))?;
            fingerprint_entry(&mut hasher, &rel, bytes, &footer);
            files.push(StagedFile {
                path: rel,
                bytes,
                metadata: Arc::new(metadata),
                hive: Vec::new(),
            });
        }
        let schema = common_schema(&location, &files)?;
        Ok(StagedInput {
            location,
            files,
            schema,
            hive: Vec::new(),
            fingerprint: format!("sha256:{}", hex::encode(hasher.finalize())),
        })
    }

    pub fn row_count(&self) -> u64 {
        self.files.iter().map(StagedFile::row_count).sum()
    }
}

/// Recomputes only the fingerprint of a directory (for `publish`'s re-check
/// just before the swap).
pub fn fingerprint_dir(dir: &Path) -> Result<String, InputError> {
    let files = list_parquet_files(dir)?;
    fingerprint_of(files.iter().map(|(rel, abs)| (rel.as_str(), abs.as_path())))
}

/// The fingerprint of files given as `(name, path)`: `name` is what enters the
/// hash (the staged relative path), `path` where the file is now. `verify` uses
/// it to fingerprint published files under their staged names. The entries
/// must be sorted by name, as [`list_parquet_files`] returns them.
pub fn fingerprint_of<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a Path)>,
) -> Result<String, InputError> {
    let footers = files
        .into_iter()
        .map(|(rel, abs)| read_footer(abs, rel).map(|(bytes, footer)| (rel, bytes, footer)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(fingerprint_footers(
        footers
            .iter()
            .map(|(rel, bytes, f)| (*rel, *bytes, f.as_slice())),
    ))
}

/// The fingerprint of files given as `(name, size, footer)` wherever they
/// were read, sorted by name.
pub(crate) fn fingerprint_footers<'a>(
    files: impl IntoIterator<Item = (&'a str, u64, &'a [u8])>,
) -> String {
    let mut hasher = Sha256::new();
    for (rel, bytes, footer) in files {
        fingerprint_entry(&mut hasher, rel, bytes, footer);
    }
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

/// A file's footer as read from wherever it lives, before decoding.
pub(crate) struct RawFooter {
    /// Path relative to the staged location, `/`-separated.
    pub rel: String,
    /// The file's size.
    pub bytes: u64,
    /// The Thrift metadata plus the 8-byte trailer.
    pub footer: Vec<u8>,
}

fn fingerprint_entry(hasher: &mut Sha256, rel: &str, bytes: u64, footer: &[u8]) {
    hasher.update(rel.as_bytes());
    hasher.update([0]);
    hasher.update(bytes.to_le_bytes());
    hasher.update((footer.len() as u64).to_le_bytes());
    hasher.update(footer);
}

/// Why a footer is not trusted (`InputError::Corrupt` shows it as the reason).
#[derive(Debug, thiserror::Error)]
pub enum FooterFault {
    #[error("the footer declares {0} rows")]
    NegativeRows(i64),
    #[error("row group {group} declares {rows} rows")]
    NegativeGroupRows { group: usize, rows: i64 },
    #[error(
        "column chunk {chunk} of row group {group} lies outside the file's data (offset {start}, length {len}, data ends at {data_end})"
    )]
    ChunkOutside {
        chunk: usize,
        group: usize,
        start: i64,
        len: i64,
        data_end: u64,
    },
    #[error("column chunk {chunk} of row group {group} declares {values} values")]
    NegativeValues {
        chunk: usize,
        group: usize,
        values: i64,
    },
    #[error(
        "row group {group} declares {rows} rows but its column `{column}` holds {values} values"
    )]
    ValuesNotRows {
        group: usize,
        rows: i64,
        column: String,
        values: i64,
    },
    #[error("the footer declares {declared} rows but its row groups hold {total}")]
    RowsDisagree { declared: i64, total: i64 },
}

/// Consistency checks a footer must pass before any reader trusts it: row
/// counts that add up, and column chunks that lie inside the data region of
/// the file. A footer that fails them was corrupted or forged.
fn validate_footer(
    md: &ParquetMetaData,
    file_size: u64,
    footer_len: u64,
) -> Result<(), FooterFault> {
    let data_end = file_size.saturating_sub(footer_len);
    let declared = md.file_metadata().num_rows();
    if declared < 0 {
        return Err(FooterFault::NegativeRows(declared));
    }
    let mut total: i64 = 0;
    for (g, rg) in md.row_groups().iter().enumerate() {
        let rows = rg.num_rows();
        if rows < 0 {
            return Err(FooterFault::NegativeGroupRows { group: g, rows });
        }
        total = total.saturating_add(rows);
        for (c, col) in rg.columns().iter().enumerate() {
            let start = col
                .dictionary_page_offset()
                .unwrap_or_else(|| col.data_page_offset());
            let len = col.compressed_size();
            // A chunk of no values and no bytes has nothing to read, so its
            // offset means nothing: pyarrow writes 0 for a zero-row file's
            // boolean chunk, which has no dictionary page to point at.
            let empty = len == 0 && col.num_values() == 0;
            let inside =
                start >= 4 && len >= 0 && (start as u64).saturating_add(len as u64) <= data_end;
            if !inside && !empty {
                return Err(FooterFault::ChunkOutside {
                    chunk: c,
                    group: g,
                    start,
                    len,
                    data_end,
                });
            }
            if col.num_values() < 0 {
                return Err(FooterFault::NegativeValues {
                    chunk: c,
                    group: g,
                    values: col.num_values(),
                });
            }
            // A column that is not repeated holds one value (or null) per
            // row: a row count that disagrees with it is forged or corrupt,
            // and would make footer-answered metrics wrong.
            if col.column_descr().max_rep_level() == 0 && col.num_values() != rows {
                return Err(FooterFault::ValuesNotRows {
                    group: g,
                    rows,
                    column: col.column_descr().path().string(),
                    values: col.num_values(),
                });
            }
        }
    }
    if total != declared {
        return Err(FooterFault::RowsDisagree { declared, total });
    }
    Ok(())
}

/// The Arrow schema all files share. Field names and types must agree;
/// nullability and metadata may differ (writers disagree on them harmlessly),
/// and the result is nullable wherever any file is.
fn common_schema(location: &Location, files: &[StagedFile]) -> Result<SchemaRef, InputError> {
    let mut first: Option<(String, Schema)> = None;
    for f in files {
        let md = f.metadata.file_metadata();
        let schema = parquet_to_arrow_schema(md.schema_descr(), md.key_value_metadata())
            .map_err(|e| corrupt(&location.name_of(&f.path), e))?;
        match &mut first {
            None => first = Some((f.path.clone(), schema)),
            Some((first_path, base)) => {
                if let Some(detail) = schema_difference(base, &schema) {
                    return Err(InputError::SchemaMismatch {
                        path: f.path.clone(),
                        first: first_path.clone(),
                        detail,
                    });
                }
                if schema
                    .fields()
                    .iter()
                    .zip(base.fields().iter())
                    .any(|(a, b)| a.is_nullable() && !b.is_nullable())
                {
                    let fields: Vec<_> = base
                        .fields()
                        .iter()
                        .zip(schema.fields().iter())
                        .map(|(b, a)| {
                            b.as_ref()
                                .clone()
                                .with_nullable(a.is_nullable() || b.is_nullable())
                        })
                        .collect();
                    *base = Schema::new(fields);
                }
            }
        }
    }
    let (_, schema) = first.expect("at least one file");
    Ok(Arc::new(Schema::new(schema.fields().clone())))
}

fn schema_difference(a: &Schema, b: &Schema) -> Option<String> {
    let names = |s: &Schema| {
        s.fields()
            .iter()
            .map(|f| f.name().clone())
            .collect::<Vec<_>>()
    };
    if names(a) != names(b) {
        return Some(format!(
            "columns [{}] versus [{}]",
            names(b).join(", "),
            names(a).join(", ")
        ));
    }
    for (fa, fb) in a.fields().iter().zip(b.fields().iter()) {
        if fa.data_type() != fb.data_type() {
            return Some(format!(
                "column `{}` is {} here but {} there",
                fa.name(),
                fb.data_type(),
                fa.data_type()
            ));
        }
    }
    None
}
