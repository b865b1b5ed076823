//! `gc` on a Delta table: files under the table root that no commit names,
//! at least `min_age` old.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::log::{delta_err, load};
use crate::keyindex::PREFIX;
use crate::publish::error::{IoContext, PublishError};
use crate::publish::fsx;
use crate::publish::record::Record;
use crate::publish::root::Root;

/// `gc` on a Delta table: removes the data files below the root that no
/// commit of the log has ever named (in an `add` or a `remove`) and that are
/// older than `min_age`: copies left by publishes killed before their commit
/// (or that lost a race and could not clean up). Files a commit removed are
/// kept: rollback restores them (a Delta `VACUUM` is what removes those).
/// `min_age` protects the copies of a publish in flight, which are
/// unnamed until its commit lands. Refused when the log does not go back to
/// version 0 (another writer cleaned it up: a file named only in the
/// removed commits would look unnamed). A `_delta_log/` without a commit
/// (a first publish stopped before it committed) names nothing, so all its
/// copies old enough are removed. Returns the removed files.
pub async fn gc(root: &Root, min_age: std::time::Duration) -> Result<Vec<String>, PublishError> {
    if !root.has_log().await? {
        return Ok(Vec::new());
    }
    let named = match load(root).await? {
        Some(table) => named_files(root, &table).await?,
        // `_delta_log/` without a commit: a first publish stopped before it
        // committed, and every data file is one of its copies.
        None => Named::default(),
    };
    let now = std::time::SystemTime::now();
    let old_enough = |modified: std::time::SystemTime| {
        now.duration_since(modified).is_ok_and(|age| age >= min_age)
    };
    let mut removed = Vec::new();
    for (rel, modified) in root.data_files().await? {
        if !named.files.contains(&rel) && old_enough(modified) {
            root.remove(&rel).await;
            removed.push(root.name_of(&rel));
        }
    }
    if let Root::Local(dir) = root {
        for index in unlisted_indexes(dir, &named.versions)? {
            let modified = std::fs::metadata(&index).and_then(|m| m.modified());
            if modified.is_ok_and(old_enough) {
                fsx::remove_file_if_exists(&index)?;
                removed.push(index.display().to_string());
            }
        }
    }
    Ok(removed)
}

/// The key index files (and their temporary files) below a local table's
/// `dir` that neither the record beside them lists nor a committed version
/// whose files are all still there (one `rollback` can restore, which then
/// reads it again): those of publishes that never committed, and of
/// versions whose files a Delta `VACUUM` removed. Each version's index has
/// a name of its own, so the current version's is never among them once
/// its record is written; `min_age` protects a publish in flight, whose
/// record comes after its commit.
fn unlisted_indexes(dir: &Path, versions: &[Version]) -> Result<Vec<PathBuf>, PublishError> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        let entries = std::fs::read_dir(&d).ctx("cannot list", &d)?;
        let mut here = Vec::new();
        for entry in entries {
            let entry = entry.ctx("cannot list", &d)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().ctx("cannot stat", &entry.path())?;
            if kind.is_dir() && name != "_delta_log" {
                dirs.push(entry.path());
            } else if kind.is_file() && name.starts_with(PREFIX) {
                here.push(name);
            }
        }
        if here.is_empty() {
            continue;
        }
        // An unreadable record lists nothing that can be trusted, but its
        // indexes are left alone: `verify` reports the record.
        let Ok(record) = Record::read(&d) else {
            continue;
        };
        let listed = record.map(|r| r.key_indexes).unwrap_or_default();
        let restorable = |n: &String| {
            versions
                .iter()
                .any(|v| v.indexes.contains(n) && v.files.iter().all(|f| d.join(f).is_file()))
        };
        out.extend(
            here.into_iter()
                .filter(|n| !listed.iter().any(|l| &l.path == n) && !restorable(n))
                .map(|n| d.join(n)),
        );
    }
    out.sort();
    Ok(out)
}

/// What the log names.
#[derive(Default)]
struct Named {
    /// The data files any commit names, in an `add` or a `remove`.
    files: std::collections::HashSet<String>,
    /// The versions dqgate committed, from their audit records.
    versions: Vec<Version>,
}

/// A version a commit's audit record (`dqgateAudit`) describes, by names
/// relative to its partition's directory.
struct Version {
    files: Vec<String>,
    indexes: Vec<String>,
}

/// What the log names; refused when it no longer goes back to version 0.
async fn named_files(
    root: &Root,
    table: &deltalake_core::DeltaTable,
) -> Result<Named, PublishError> {
    let latest = table.version().unwrap_or_default();
    let commits: Vec<String> = root
        .file_names("_delta_log")
        .await?
        .into_iter()
        .filter(|n| {
            n.len() == 25 && n.ends_with(".json") && n[..20].bytes().all(|b| b.is_ascii_digit())
        })
        .collect();
    let complete = commits.len() as u64 == latest + 1
        && commits
            .iter()
            .enumerate()
            .all(|(i, n)| n[..20].parse::<u64>().ok() == Some(i as u64));
    if !complete {
        return Err(PublishError::Refused(format!(
            "the Delta log of `{}` does not hold every commit since version 0 (another writer cleaned it up), \
             so files only the removed commits named cannot be told from leftovers; use Delta's VACUUM",
            root.show()
        )));
    }
    let mut named = Named::default();
    for name in &commits {
        let rel = format!("_delta_log/{name}");
        let text = root.read_text(&rel).await?.unwrap_or_default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let action: Json =
                serde_json::from_str(line).map_err(|e| delta_err(root, format!("{rel}: {e}")))?;
            for kind in ["add", "remove"] {
                if let Some(path) = action
                    .pointer(&format!("/{kind}/path"))
                    .and_then(Json::as_str)
                {
                    named.files.insert(percent_decode(path));
                }
            }
            if let Some(audit) = action.pointer("/commitInfo/dqgateAudit") {
                let indexes: Vec<String> = crate::publish::record::key_indexes_of(audit)
                    .into_iter()
                    .map(|i| i.path)
                    .collect();
                let files = crate::publish::record::files_of(audit);
                if let (false, Some(files)) = (indexes.is_empty(), files) {
                    let files = files.into_iter().map(|f| f.path).collect();
                    named.versions.push(Version { files, indexes });
                }
            }
        }
    }
    Ok(named)
}

/// A log path (a relative URI) as a path: `%XX` escapes decoded, anything
/// else (a lone `%`, bytes that are not UTF-8 once decoded) kept or replaced
/// as [`String::from_utf8_lossy`] does.
pub(super) fn percent_decode(path: &str) -> String {
    percent_encoding::percent_decode_str(path)
        .decode_utf8_lossy()
        .into_owned()
}
