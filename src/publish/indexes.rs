//! Key indexes in a version's directory (see `keyindex`): written durably
//! beside the renamed data files before the audit record, which lists
//! them; removed again when a publish is undone; checked by `verify`.

use std::fs;
use std::path::{Path, PathBuf};

use twox_hash::XxHash3_64;

use super::error::{IoContext, PublishError};
use super::fsx;
use crate::keyindex::{Built, PREFIX};
use crate::staged::fingerprint_of;
use crate::verdict::json::{KeyIndexFile, PublishedFile};

/// Writes `indexes` into `dir`, whose data `files` have their published
/// names already, for the partition `rel` (`k=v` path); what the record
/// lists of them. Each is named for its version (see
/// [`crate::keyindex::file_name`]): no other version's index is replaced
/// or removed.
///
/// Each index carries the fingerprint of the files as an audit reading the
/// partition from the table computes it: their paths from the table's root
/// (`rel/name`), sizes and footers.
pub(crate) fn write(
    dir: &Path,
    rel: &str,
    files: &[PublishedFile],
    indexes: &[Built],
) -> Result<Vec<KeyIndexFile>, PublishError> {
    if indexes.is_empty() {
        return Ok(Vec::new());
    }
    let named: Vec<(String, PathBuf)> = files
        .iter()
        .map(|f| (format!("{rel}/{}", f.path), dir.join(&f.path)))
        .collect();
    let fingerprint = fingerprint_of(named.iter().map(|(n, p)| (n.as_str(), p.as_path())))?;
    let mut written: Vec<KeyIndexFile> = Vec::new();
    for index in indexes {
        let path = index.file_name(&fingerprint);
        if written.iter().any(|w| w.path == path) {
            continue;
        }
        let published = |staged: &str| {
            let f = files.iter().find(|f| f.staged_path == staged)?;
            Some(format!("{rel}/{}", f.path))
        };
        let Some(bytes) = index.bytes(&fingerprint, published) else {
            continue;
        };
        fsx::write_atomic(&dir.join(&path), &bytes)?;
        written.push(KeyIndexFile {
            path,
            columns: index.columns.clone(),
            bytes: bytes.len() as u64,
            checksum: checksum(&bytes),
        });
    }
    written.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(written)
}

/// How the record names an index's bytes.
pub(crate) fn checksum(bytes: &[u8]) -> String {
    format!("xxh3:{:016x}", XxHash3_64::oneshot(bytes))
}

/// Removes every key index (and its temporary file) from `dir`.
pub(crate) fn remove(dir: &Path) -> Result<(), PublishError> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    let mut removed = false;
    for entry in entries {
        let entry = entry.ctx("cannot list", dir)?;
        if entry.file_name().to_string_lossy().starts_with(PREFIX) {
            removed |= fsx::remove_file_if_exists(&entry.path())?;
        }
    }
    if removed {
        fsx::sync_dir(dir)?;
    }
    Ok(())
}

/// Whether the index `listed` is in `dir` with the bytes the record says.
pub(crate) fn intact(dir: &Path, listed: &KeyIndexFile) -> bool {
    fs::read(dir.join(&listed.path))
        .is_ok_and(|b| b.len() as u64 == listed.bytes && checksum(&b) == listed.checksum)
}

/// Removes the indexes `listed` from `dir` (a version's own, when its
/// publish or the version is undone), and no other.
pub(crate) fn remove_listed(dir: &Path, listed: &[KeyIndexFile]) -> Result<(), PublishError> {
    let mut removed = false;
    for index in listed.iter().filter(|i| i.path.starts_with(PREFIX)) {
        removed |= fsx::remove_file_if_exists(&dir.join(&index.path))?;
    }
    if removed {
        fsx::sync_dir(dir)?;
    }
    Ok(())
}

/// How the indexes the record lists differ from the files in `dir`, and
/// (with `extras`: a directory that holds one version) which index files
/// it does not list. A Delta partition's directory holds every version's
/// files, and its other versions' indexes with them, until `gc`.
pub(crate) fn differences(dir: &Path, listed: &[KeyIndexFile], extras: bool) -> Vec<String> {
    let mut out = Vec::new();
    for index in listed {
        let path = dir.join(&index.path);
        match fs::read(&path) {
            Err(_) => out.push(format!("missing: key index {}", index.path)),
            Ok(bytes) if bytes.len() as u64 != index.bytes || checksum(&bytes) != index.checksum => {
                out.push(format!(
                    "changed: key index {} is {} bytes with checksum {}, the record says {} bytes with {}",
                    index.path,
                    bytes.len(),
                    checksum(&bytes),
                    index.bytes,
                    index.checksum
                ))
            }
            Ok(_) => {}
        }
    }
    if let Some(entries) = fs::read_dir(dir).ok().filter(|_| extras) {
        let mut extra: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(PREFIX) && !listed.iter().any(|l| &l.path == n))
            .collect();
        extra.sort();
        out.extend(
            extra
                .into_iter()
                .map(|n| format!("extra: key index {n} is not in the record")),
        );
    }
    out
}
