//! The audit record `_dqgate_audit.json`: written into the staged directory
//! before the swap, read back as the partition's manifest.
//!
//! Only three things are read back: `input.fingerprint`, `published.version`
//! and `published.files`; the rest is the verdict, for people and auditors.

use std::fs;
use std::io::ErrorKind;
use std::path::Path;

use serde_json::Value as Json;

use super::error::PublishError;
use super::fsx;
use crate::verdict::json::{to_record_json, KeyIndexFile, PublishedFile, PublishedManifest};
use crate::verdict::Verdict;

/// The record's file name inside a version directory (Hive) or a
/// partition's directory (Delta).
pub const RECORD: &str = "_dqgate_audit.json";

/// What dqgate reads back from an audit record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub fingerprint: String,
    pub version: String,
    /// Sorted by published path.
    pub files: Vec<PublishedFile>,
    /// What the audit read of other partitions (`read`), as its JSON text,
    /// when it read any: the table state the verdict holds for (see
    /// [`Record::read_described`]).
    pub read: Option<String>,
    /// The key indexes beside the files (`published.key_indexes`).
    pub key_indexes: Vec<KeyIndexFile>,
}

impl Record {
    /// Reads `dir/_dqgate_audit.json`; `Ok(None)` if it does not exist.
    pub fn read(dir: &Path) -> Result<Option<Record>, PublishError> {
        let path = dir.join(RECORD);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(PublishError::BadRecord {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            }
        };
        Record::parse(&text, &path.display().to_string()).map(Some)
    }

    /// A record's text, read from `shown` (for messages).
    pub fn parse(text: &str, shown: &str) -> Result<Record, PublishError> {
        let head: Head<'_> = serde_json::from_str(text).map_err(|e| bad(shown, e.to_string()))?;
        let read = head.read.map(|r| r.get().to_string());
        Record::of_head(head)
            .map(|r| Record { read, ..r })
            .map_err(|reason| bad(shown, reason))
    }

    /// A record's text as a snapshot of the table reads it:
    /// the record without its `read` (only `verify` shows it, and it lists
    /// every other partition, so it is most of a record's text), and what
    /// `history(N)` reads of it (see [`ListedRecord`]). `Err` (why) when
    /// the text is not a record's JSON at all.
    pub fn parse_listed(text: &str) -> Result<ListedRecord, String> {
        let mut head: Head<'_> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut run = serde_json::Map::new();
        for (k, v) in [
            ("verdict", head.verdict.take()),
            ("checks", head.checks.take()),
            ("input", head.input.clone()),
        ] {
            if let Some(v) = v {
                run.insert(k.to_string(), v);
            }
        }
        Ok(ListedRecord {
            record: Record::of_head(head),
            run: Json::Object(run),
        })
    }

    /// The record a parsed head holds, without its `read`, or why it is
    /// not one.
    fn of_head(head: Head<'_>) -> Result<Record, String> {
        let mut json = serde_json::Map::new();
        for (k, v) in [("input", head.input), ("published", head.published)] {
            if let Some(v) = v {
                json.insert(k.to_string(), v);
            }
        }
        let json = Json::Object(json);
        let text_at = |ptr: &str| {
            json.pointer(ptr)
                .and_then(Json::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("`{ptr}` is missing or not text"))
        };
        let fingerprint = text_at("/input/fingerprint")?;
        let version = text_at("/published/version")?;
        Ok(Record {
            fingerprint,
            version,
            files: listed_files(&json)?,
            read: None,
            key_indexes: listed_indexes(&json)?,
        })
    }

    /// What the audit read of other partitions (`read`), in words.
    pub fn read_described(&self) -> Option<String> {
        let read: Json = serde_json::from_str(self.read.as_deref()?).ok()?;
        Some(describe_read(&read))
    }

    /// Reads a record that must exist.
    pub fn read_required(dir: &Path) -> Result<Record, PublishError> {
        Record::read(dir)?.ok_or_else(|| PublishError::MissingRecord {
            dir: dir.display().to_string(),
        })
    }
}

/// The parts of a record that are read back. Only these become values; the
/// rest is skipped, and `read` kept as text. A record of an audit that read
/// other partitions lists each of them in `read`, so that part grows with
/// the table, and a snapshot opens every partition's record.
#[derive(serde::Deserialize)]
struct Head<'a> {
    input: Option<Json>,
    published: Option<Json>,
    /// What `history(N)` reads besides `input`.
    verdict: Option<Json>,
    checks: Option<Json>,
    #[serde(borrow)]
    read: Option<&'a serde_json::value::RawValue>,
}

/// A record as a snapshot of the table reads it.
#[derive(Debug, Clone)]
pub(crate) struct ListedRecord {
    /// The record without its `read`, or why it is not one.
    pub record: Result<Record, String>,
    /// Its `verdict`, `input` and `checks` (those it has), as one object:
    /// what `history(N)` reads.
    pub run: Json,
}

fn bad(shown: &str, reason: String) -> PublishError {
    PublishError::BadRecord {
        path: shown.to_string(),
        reason,
    }
}

/// A record's `read` object in one line: which statements read the table,
/// and which partitions at which versions (at which Delta table version).
fn describe_read(read: &Json) -> String {
    let reads: Vec<&str> = read
        .get("reads")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .collect();
    let parts: Vec<String> = read
        .get("partitions")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            let field = |k: &str| p.get(k).and_then(Json::as_str).unwrap_or("?");
            format!("{} {}", field("partition"), field("version"))
        })
        .collect();
    let at = read
        .get("table_version")
        .and_then(Json::as_u64)
        .map_or(String::new(), |v| format!(" at Delta table version {v}"));
    format!(
        "its verdict holds for the table state it read{at} ({}): {} other partition(s){}{}",
        reads.join("; "),
        parts.len(),
        if parts.is_empty() { "" } else { ": " },
        parts.join(", ")
    )
}

/// A manifest path must stay inside its directory.
fn safe_rel(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && p.split('/').all(|c| !c.is_empty() && c != ".." && c != ".")
}

/// Writes the record of `verdict` published as `manifest` into `dir`
/// atomically and durably (temp name, fsync, rename, fsync of `dir`);
/// `read` is the read set's `read` object, when the audit read other
/// partitions.
pub(crate) fn write(
    dir: &Path,
    verdict: &Verdict,
    manifest: &PublishedManifest,
    read: Option<&Json>,
) -> Result<(), PublishError> {
    fsx::write_atomic(
        &dir.join(RECORD),
        to_record_json(verdict, manifest, read).as_bytes(),
    )
}

/// How a re-computed fingerprint (or the error computing it) differs from
/// the record's, if it does.
pub(crate) fn compare_fingerprint(
    now: Result<String, crate::staged::InputError>,
    fingerprint: &str,
) -> Option<String> {
    match now {
        Ok(now) if now == fingerprint => None,
        Ok(now) => Some(format!(
            "changed: the files' fingerprint is {now}, the record says {fingerprint}"
        )),
        Err(e) => Some(format!("changed: {e}")),
    }
}

/// The data files a record (as JSON) lists, or what is wrong with them.
fn listed_files(json: &Json) -> Result<Vec<PublishedFile>, String> {
    let list = json
        .pointer("/published/files")
        .and_then(Json::as_array)
        .ok_or_else(|| "`/published/files` is missing".to_string())?;
    let mut files = Vec::with_capacity(list.len());
    for f in list {
        let field = |k: &str| f.get(k).and_then(Json::as_str).map(str::to_string);
        match (
            field("path"),
            field("staged_path"),
            f.get("bytes").and_then(Json::as_u64),
        ) {
            (Some(path), Some(staged_path), Some(bytes)) if safe_rel(&path) => {
                files.push(PublishedFile {
                    path,
                    staged_path,
                    bytes,
                })
            }
            _ => return Err(format!("bad entry in `published.files`: {f}")),
        }
    }
    Ok(files)
}

/// The data files a record (as JSON, from a Delta commit) lists; `None`
/// when the list is missing or an entry is malformed.
pub(crate) fn files_of(json: &Json) -> Option<Vec<PublishedFile>> {
    listed_files(json).ok()
}

/// The key indexes a record (as JSON) lists, or what is wrong with an
/// entry.
fn listed_indexes(json: &Json) -> Result<Vec<KeyIndexFile>, String> {
    let mut key_indexes = Vec::new();
    let listed = json.pointer("/published/key_indexes");
    for f in listed.and_then(Json::as_array).into_iter().flatten() {
        let text = |k: &str| f.get(k).and_then(Json::as_str).map(str::to_string);
        let columns: Option<Vec<String>> = f
            .get("columns")
            .and_then(Json::as_array)
            .and_then(|c| c.iter().map(|v| v.as_str().map(str::to_string)).collect());
        match (
            text("path"),
            columns,
            f.get("bytes").and_then(Json::as_u64),
            text("checksum"),
        ) {
            (Some(path), Some(columns), Some(bytes), Some(checksum)) if safe_rel(&path) => {
                key_indexes.push(KeyIndexFile {
                    path,
                    columns,
                    bytes,
                    checksum,
                })
            }
            _ => return Err(format!("bad entry in `published.key_indexes`: {f}")),
        }
    }
    Ok(key_indexes)
}

/// The key indexes a record (as JSON, from a Delta commit) lists; none
/// when an entry is malformed (nothing is then removed by their names).
pub(crate) fn key_indexes_of(json: &Json) -> Vec<KeyIndexFile> {
    listed_indexes(json).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"{"format": "dqgate.verdict/1", "verdict": "fail",
        "input": {"fingerprint": "sha256:ab", "row_count": 7},
        "checks": [{"metric": "row_count", "value": 7}],
        "published": {"version": "v1-ab", "files": [{"path": "p.parquet", "staged_path": "p.parquet", "bytes": 9}],
                      "key_indexes": [{"path": "_dqgate_keys_1.idx", "columns": ["k"], "bytes": 3, "checksum": "xxh3:1"}]},
        "read": {"reads": ["line 4: unique(k) across published"], "partitions": [{"partition": "d=1", "version": "v1-cd", "fingerprint": "sha256:cd"}]}}"#;

    #[test]
    fn a_listed_record_is_the_record_without_its_read_and_what_history_reads() {
        let whole = Record::parse(TEXT, "r").unwrap();
        assert!(whole
            .read_described()
            .unwrap()
            .contains("1 other partition(s): d=1 v1-cd"));
        let listed = Record::parse_listed(TEXT).unwrap();
        assert_eq!(
            listed.record,
            Ok(Record {
                read: None,
                ..whole
            })
        );
        let run: Json = serde_json::from_str(TEXT).unwrap();
        for k in ["verdict", "input", "checks"] {
            assert_eq!(listed.run.get(k), run.get(k), "{k}");
        }
        assert_eq!(listed.run.as_object().unwrap().len(), 3);
        // Not JSON: not listed; JSON that is no record: its run still is.
        assert!(Record::parse_listed("{\"input\": ").is_err());
        let other = Record::parse_listed(r#"{"verdict": "pass", "extra": [1]}"#).unwrap();
        assert!(other.record.unwrap_err().contains("/input/fingerprint"));
        assert_eq!(other.run, serde_json::json!({"verdict": "pass"}));
    }
}
