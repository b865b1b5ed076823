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

use super::input::{list_parquet_files, StagedInput};

/// `key=value` pairs of a file's directories.
type Hive = Vec<(String, String)>;
/// A listed file: path relative to the root, and where it is.
type Listed = (String, PathBuf);

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
    pub fn open(path: &Path) -> Result<Dataset, String> {
        let meta = fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
            _ => e.to_string(),
        })?;
        let (root, files) = if meta.is_file() {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .ok_or("not a file name")?;
            let parent = match path.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            };
            (parent, vec![(name, path.to_path_buf())])
        } else {
            let files = list_parquet_files(path).map_err(|e| e.to_string())?;
            (path.to_path_buf(), files)
        };
        if files.is_empty() {
            return Err(
                "no Parquet files in it (names starting with `_` or `.` are ignored)".into(),
            );
        }
        let keys = common_hive_keys(&files);
        let mut groups: Vec<(Hive, Vec<Listed>)> = Vec::new();
        for (rel, abs) in files {
            let hive: Vec<_> = hive_pairs(&rel).into_iter().take(keys).collect();
            match groups.iter_mut().find(|(h, _)| *h == hive) {
                Some((_, list)) => list.push((rel, abs)),
                None => groups.push((hive, vec![(rel, abs)])),
            }
        }
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        let parts = groups
            .into_iter()
            .map(|(hive, files)| {
                let input = StagedInput::from_listed(&root, files).map_err(|e| e.to_string())?;
                Ok(Part { hive, input })
            })
            .collect::<Result<Vec<_>, String>>()?;
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
        Ok(Dataset {
            parts,
            schema: Arc::new(Schema::new(fields)),
        })
    }

    /// Data files over all parts.
    pub fn file_count(&self) -> usize {
        self.parts.iter().map(|p| p.input.files.len()).sum()
    }
}

/// The `key=value` directory components of a relative file path.
fn hive_pairs(rel: &str) -> Vec<(String, String)> {
    let mut dirs: Vec<&str> = rel.split('/').collect();
    dirs.pop();
    dirs.iter()
        .filter_map(|d| d.split_once('='))
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// How many leading Hive keys every file has, with the same names.
fn common_hive_keys(files: &[(String, PathBuf)]) -> usize {
    let names: Vec<Vec<String>> = files
        .iter()
        .map(|(rel, _)| hive_pairs(rel).into_iter().map(|(k, _)| k).collect())
        .collect();
    let first = &names[0];
    (0..first.len())
        .take_while(|&i| names.iter().all(|n| n.get(i) == Some(&first[i])))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hive_keys() {
        assert_eq!(
            hive_pairs("region=EU/day=1/batch/part.parquet"),
            vec![("region".into(), "EU".into()), ("day".into(), "1".into())]
        );
        let files = |names: &[&str]| -> Vec<(String, PathBuf)> {
            names
                .iter()
                .map(|n| (n.to_string(), PathBuf::from(n)))
                .collect()
        };
        assert_eq!(
            common_hive_keys(&files(&["a=1/x.parquet", "a=2/b=3/y.parquet"])),
            1
        );
        assert_eq!(
            common_hive_keys(&files(&["x.parquet", "batch=2/y.parquet"])),
            0
        );
        assert_eq!(
            common_hive_keys(&files(&["a=1/x.parquet", "b=2/y.parquet"])),
            0
        );
    }
}
