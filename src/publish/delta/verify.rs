//! `verify` on a Delta table: the partition's files re-fingerprinted and
//! compared with the audit record in its commit.

use std::collections::HashMap;

use super::log::{app_id, load, partition_files, txn_of, txn_version};
use crate::publish::error::PublishError;
use crate::publish::record::Record;
use crate::publish::root::Root;
use crate::publish::VerifyReport;
use crate::runkey::RunKey;
use crate::staged::fingerprint_footers;

/// `verify` on a Delta table: the partition's current files (from the log)
/// must be the files of the audit record beside them, with their sizes, and
/// their fingerprint under their staged names must be the record's.
pub async fn verify(root: &Root, key: &RunKey) -> Result<VerifyReport, PublishError> {
    let rel_dir = key.rel_dir();
    let not_published = || PublishError::NotPublished {
        dir: root.name_of(&rel_dir),
    };
    let table = load(root).await?.ok_or_else(not_published)?;
    let files = partition_files(&table, key).await?;
    if files.is_empty() {
        return Err(not_published());
    }
    let record = root
        .read_record(&rel_dir)
        .await?
        .ok_or_else(|| PublishError::MissingRecord {
            dir: root.name_of(&rel_dir),
        })?;
    let mut differences = Vec::new();
    if txn_of(&table, key).await? != Some(txn_version(&record.fingerprint)) {
        differences.push(format!(
            "the log's txn for {} is not the record's fingerprint {}",
            app_id(key),
            record.fingerprint
        ));
    }
    let prefix = format!("{rel_dir}/");
    let in_log: HashMap<String, i64> = files
        .iter()
        .map(|f| {
            (
                f.path.strip_prefix(&prefix).unwrap_or(&f.path).to_string(),
                f.size,
            )
        })
        .collect();
    for f in &record.files {
        match in_log.get(&f.path) {
            None => differences.push(format!("missing: {} is not in the Delta log", f.path)),
            Some(&size) if size as u64 != f.bytes => differences.push(format!(
                "changed: the log says {} is {size} bytes, the record says {}",
                f.path, f.bytes
            )),
            Some(_) => {}
        }
    }
    for path in in_log.keys() {
        if !record.files.iter().any(|f| &f.path == path) {
            differences.push(format!(
                "extra: {path} is in the Delta log, not in the record"
            ));
        }
    }
    if let Root::Local(dir) = root {
        let listed = &record.key_indexes;
        differences.extend(crate::publish::indexes::differences(
            &dir.join(&rel_dir),
            listed,
            false,
        ));
    }
    if differences.is_empty() {
        differences.extend(refingerprint(root, &rel_dir, &record).await);
    }
    Ok(VerifyReport {
        version: format!(
            "{} (Delta table version {})",
            record.version,
            table.version().unwrap_or_default()
        ),
        read: record.read_described(),
        fingerprint: record.fingerprint,
        differences,
    })
}

/// Re-fingerprints the record's files where they are, under their staged
/// names, as the audit did; the difference from the record, if any.
pub(super) async fn refingerprint(root: &Root, rel_dir: &str, record: &Record) -> Option<String> {
    let mut files: Vec<_> = record.files.iter().collect();
    files.sort_by(|a, b| a.staged_path.cmp(&b.staged_path));
    let mut footers = Vec::with_capacity(files.len());
    for f in files {
        match root.footer(&format!("{rel_dir}/{}", f.path)).await {
            Ok((bytes, footer)) => footers.push((f.staged_path.as_str(), bytes, footer)),
            Err(PublishError::Input(e)) => {
                return crate::publish::record::compare_fingerprint(Err(e), &record.fingerprint)
            }
            Err(e) => return Some(format!("changed: {e}")),
        }
    }
    let now = fingerprint_footers(footers.iter().map(|(n, b, f)| (*n, *b, f.as_slice())));
    crate::publish::record::compare_fingerprint(Ok(now), &record.fingerprint)
}
