//! Writer by-products: files that the tools which write staged partitions
//! leave beside the data, and that a published partition must not carry.
//!
//! A published partition holds the audited data files under their versioned
//! names and `_dqgate_audit.json`, nothing else that a writer left. Spark
//! (through Hadoop's local file system) writes a `_SUCCESS` marker and a
//! checksum sidecar `.NAME.crc` beside every file it writes; Databricks
//! writes `_started_*` and `_committed_*` markers. None of them is audited
//! (hidden names, no data), and after the versioned rename a `.crc` names a
//! file that no longer exists, so `publish` removes them from the staged
//! directory once the recheck has passed, just before the swap. The audit
//! record is the partition's commit marker and its manifest.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use crate::publish::error::PublishError;
use crate::publish::fsx;

/// Whether a file name is a writer by-product that is never published.
pub(crate) fn is_byproduct(name: &str) -> bool {
    name == "_SUCCESS"
        || name.starts_with("_started_")
        || name.starts_with("_committed_")
        || (name.starts_with('.') && name.ends_with(".crc"))
}

/// Every by-product file under `dir`, sorted. Hidden directories (such as
/// Spark's `_temporary/`) are left as they are: only files whose own name
/// marks them are by-products.
pub(crate) fn list(dir: &Path) -> Result<Vec<PathBuf>, PublishError> {
    fsx::find_files(dir, &|name| !name.starts_with(['_', '.']), &is_byproduct)
}

/// Removes the by-products `files` (a file already gone is fine), durably:
/// their directories are fsynced, so none reappears after the swap.
pub(crate) fn remove(files: &[PathBuf]) -> Result<(), PublishError> {
    let mut dirs = BTreeSet::new();
    for f in files {
        match fs::remove_file(f) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(PublishError::io("cannot remove", f, e))
            }
            _ => {}
        }
        dirs.extend(f.parent().map(Path::to_path_buf));
    }
    dirs.iter().try_for_each(|d| fsx::sync_dir(d))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for name in [
            "_SUCCESS",
            "._SUCCESS.crc",
            ".part-00000-1f.snappy.parquet.crc",
            "_started_5583",
            "_committed_5583",
        ] {
            assert!(is_byproduct(name), "{name}");
        }
        for name in [
            "part-00000.parquet",
            "_dqgate_audit.json",
            "part.crc",
            "_SUCCESS.txt",
            ".hidden",
        ] {
            assert!(!is_byproduct(name), "{name}");
        }
    }

    #[test]
    fn lists_nested_files_but_not_inside_hidden_directories() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::create_dir_all(d.join("store_id=3")).unwrap();
        fs::create_dir_all(d.join("_temporary/0")).unwrap();
        for f in [
            "_SUCCESS",
            "part-0.parquet",
            ".part-0.parquet.crc",
            "store_id=3/.part-1.parquet.crc",
            "store_id=3/part-1.parquet",
            "_temporary/0/_SUCCESS",
        ] {
            fs::write(d.join(f), b"x").unwrap();
        }
        let found = list(d).unwrap();
        let rel: Vec<_> = found
            .iter()
            .map(|p| p.strip_prefix(d).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            rel,
            [
                ".part-0.parquet.crc",
                "_SUCCESS",
                "store_id=3/.part-1.parquet.crc"
            ]
        );
        remove(&found).unwrap();
        remove(&found).unwrap();
        assert!(list(d).unwrap().is_empty());
        assert!(d.join("part-0.parquet").is_file());
    }
}
