//! Which files of a directory (or an object-store listing) are staged data
//! files: every file whose name ends in `.parquet`, recursively, skipping
//! files and directories whose names start with `_` or `.`.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::{corrupt, InputError};

/// Names discovery skips, with everything below them: Spark's
/// `_temporary/` and `_SUCCESS`, editors' dot files.
pub(crate) fn is_hidden(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('.')
}

/// Names discovery takes as data files.
pub(crate) fn is_data_file(name: &str) -> bool {
    name.ends_with(".parquet")
}

/// All candidate data files under `dir`, sorted by relative path.
pub fn list_parquet_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, InputError> {
    let mut out = Vec::new();
    walk(dir, "", &mut out)?;
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) -> Result<(), InputError> {
    let io = |path: &Path, e| InputError::Io {
        path: path.display().to_string(),
        source: e,
    };
    for entry in fs::read_dir(dir).map_err(|e| io(dir, e))? {
        let entry = entry.map_err(|e| io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue; // not UTF-8: cannot be a name we publish; ignored like hidden files
        };
        if is_hidden(name) {
            continue;
        }
        let rel = format!("{prefix}{name}");
        let path = entry.path();
        let ft = entry.file_type().map_err(|e| io(&path, e))?;
        if ft.is_symlink() {
            if is_data_file(name) || path.is_dir() {
                return Err(InputError::Symlink { path: rel });
            }
            continue;
        }
        if ft.is_dir() {
            walk(&path, &format!("{rel}/"), out)?;
        } else if is_data_file(name) {
            if !ft.is_file() {
                return Err(corrupt(&rel, "not a regular file"));
            }
            out.push((rel, path));
        }
    }
    Ok(())
}
