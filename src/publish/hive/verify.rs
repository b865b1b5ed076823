//! `verify`: a downstream consumer's independent evidence that the published
//! files are the audited ones.
//!
//! The record's manifest lists each published file with its staged name and
//! size. `verify` fingerprints the files present under their staged names
//! (the fingerprint covers name, size and Parquet footer) and compares with
//! the record's `input.fingerprint`; it also lists missing files, size
//! changes, unreadable files and any `.parquet` file in the partition that
//! the manifest does not name (hidden ones included: a reader's glob would
//! see them).

use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

use super::kept;
use super::layout::Layout;
use crate::publish::error::PublishError;
use crate::publish::VerifyReport;
use crate::staged::fingerprint_of;

pub(crate) fn verify(layout: &Layout) -> Result<VerifyReport, PublishError> {
    let dir = layout.partition_dir();
    if !dir.exists() {
        return Err(PublishError::NotPublished {
            dir: dir.display().to_string(),
        });
    }
    let record = layout
        .current_record()?
        .ok_or_else(|| PublishError::MissingRecord {
            dir: dir.display().to_string(),
        })?;
    let mut differences = Vec::new();
    let mut present = Vec::new();
    for f in &record.files {
        let path = dir.join(&f.path);
        match fs::metadata(&path) {
            Err(_) => differences.push(format!("missing: {}", f.path)),
            Ok(m) if m.len() != f.bytes => differences.push(format!(
                "changed: {} is {} bytes, the record says {}",
                f.path,
                m.len(),
                f.bytes
            )),
            Ok(_) => {}
        }
        if path.exists() {
            present.push((f.staged_path.as_str(), path));
        }
    }
    let listed: BTreeSet<PathBuf> = record.files.iter().map(|f| dir.join(&f.path)).collect();
    for extra in kept::all_parquet_files(&dir)? {
        if !listed.contains(&extra) {
            let rel = extra.strip_prefix(&dir).unwrap_or(&extra);
            differences.push(format!("extra: {} is not in the record", rel.display()));
        }
    }
    differences.extend(crate::publish::indexes::differences(
        &dir,
        &record.key_indexes,
        true,
    ));
    if differences.is_empty() {
        differences.extend(fingerprint_difference(&mut present, &record.fingerprint));
    }
    Ok(VerifyReport {
        read: record.read_described(),
        version: record.version,
        fingerprint: record.fingerprint,
        differences,
    })
}

/// Re-fingerprints `present` (staged name, published path) as the audit did
/// and says how it differs from the record's `fingerprint`, if it does.
pub(crate) fn fingerprint_difference<N: AsRef<str> + Ord>(
    present: &mut [(N, PathBuf)],
    fingerprint: &str,
) -> Option<String> {
    present.sort_by(|a, b| a.0.cmp(&b.0));
    crate::publish::record::compare_fingerprint(
        fingerprint_of(present.iter().map(|(n, p)| (n.as_ref(), p.as_path()))),
        fingerprint,
    )
}
