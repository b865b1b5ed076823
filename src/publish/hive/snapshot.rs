//! A Hive table's published partitions as one audit reads them: each
//! partition's audit record, read once, so that everything the audit reads
//! of other partitions (`across published`, `history(N)`, the table's
//! schema) comes from one listing, and the read set it records
//! ([`crate::publish::readset`]) is exactly what it read.
//!
//! Walks `ROOT/k1=v1/.../kn=vn` for the rule file's `partitioned by` keys,
//! depth by depth, never following a symlink and skipping `_` and `.`
//! entries (`_dqgate/`, temp names). A published partition is a directory
//! with an audit record; a directory without one (not written by dqgate) is
//! kept as unrecorded, never read as data.
//!
//! A partition's data is read through its record's manifest (`published.files`),
//! not by listing its directory: file names are unique per version, so the
//! files read are those of the version recorded, or they are gone (the
//! partition was swapped meanwhile) and the read fails, never mixing two
//! versions.

use std::collections::BTreeMap;
use std::fs;
use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::layout::RECORD;
use crate::publish::error::{IoContext, PublishError};
use crate::publish::readset::PartVersion;
use crate::publish::record::Record;
use crate::verdict::history::PastRuns;
use serde_json::Value as Json;

/// One partition directory found by the walk.
#[derive(Debug, Clone)]
struct Part {
    pairs: Vec<(String, String)>,
    dir: PathBuf,
    /// What `history(N)` reads of the record (see
    /// [`crate::publish::record::ListedRecord`]):
    /// `Ok(None)` when there is none, `Err` when it could not be read.
    run: Result<Option<Json>, Unreadable>,
    /// The record, or why there is none: `Ok(None)` missing, `Err` the reason
    /// it could not be read or parsed.
    record: Result<Option<Record>, Unreadable>,
}

/// Why a partition's audit record could not be used: it could not be read,
/// or it is not a record (the reason `PublishError::BadRecord` gives).
#[derive(Debug, Clone, thiserror::Error)]
enum Unreadable {
    #[error("{0}")]
    Io(Arc<std::io::Error>),
    #[error("{0}")]
    Bad(String),
}

/// The published partitions of a Hive table, with their audit records.
#[derive(Debug, Clone)]
pub struct HiveSnapshot {
    pub root: PathBuf,
    parts: BTreeMap<String, Part>,
}

impl HiveSnapshot {
    /// Reads every partition directory named by `keys` (the rule file's
    /// `partitioned by`) and its audit record. A root that does not exist
    /// has no partitions.
    pub fn read(root: &Path, keys: &[String]) -> Result<HiveSnapshot, PublishError> {
        let mut found = Vec::new();
        if !keys.is_empty() {
            walk(root, keys, &mut Vec::new(), &mut found)?;
        }
        let parts = open_parts(found).into_iter().collect();
        Ok(HiveSnapshot {
            root: root.to_path_buf(),
            parts,
        })
    }
}

/// Each found partition with its record read, on a few threads when there
/// are many (a year of partitions is a year of records).
fn open_parts(found: Vec<(Vec<(String, String)>, PathBuf)>) -> Vec<(String, Part)> {
    // Each thread reads its records into one buffer: only what is parsed
    // out of a record is kept.
    let open_all = |c: Vec<_>| {
        let mut text = String::new();
        c.into_iter()
            .map(|f| open_part(f, &mut text))
            .collect::<Vec<_>>()
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    if found.len() < 64 || threads < 2 {
        return open_all(found);
    }
    let per = found.len().div_ceil(threads);
    let mut chunks: Vec<Vec<_>> = Vec::new();
    let mut rest = found.into_iter();
    loop {
        let chunk: Vec<_> = rest.by_ref().take(per).collect();
        if chunk.is_empty() {
            break;
        }
        chunks.push(chunk);
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|c| s.spawn(|| open_all(c)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// A found partition (its `k=v` pairs and directory) with its record read
/// (into `text`, a buffer reused from record to record).
fn open_part((pairs, dir): (Vec<(String, String)>, PathBuf), text: &mut String) -> (String, Part) {
    let rel = rel_of(&pairs);
    text.clear();
    let read = fs::File::open(dir.join(RECORD)).and_then(|mut f| f.read_to_string(text));
    let listed = match read {
        Ok(_) => Record::parse_listed(text)
            .map(Some)
            .map_err(Unreadable::Bad),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Unreadable::Io(Arc::new(e))),
    };
    let (record, run) = match listed {
        Ok(Some(l)) => (l.record.map(Some).map_err(Unreadable::Bad), Ok(Some(l.run))),
        Ok(None) => (Ok(None), Ok(None)),
        Err(e) => (Err(e.clone()), Err(e)),
    };
    let part = Part {
        pairs,
        dir,
        run,
        record,
    };
    (rel, part)
}

fn rel_of(pairs: &[(String, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("/")
}

impl HiveSnapshot {
    /// Every partition but `own` whose data an audit can read: (`k=v`
    /// path, its files relative to the root). A partition directory without
    /// a readable record is an error (exit 3): it was not published by dqgate.
    pub fn others(&self, own: &str) -> Result<Vec<(String, Vec<String>)>, PublishError> {
        let mut out = Vec::new();
        for (rel, part) in self.parts.iter().filter(|(rel, _)| rel.as_str() != own) {
            let record = self.required(part)?;
            let files = record
                .files
                .iter()
                .map(|f| format!("{rel}/{}", f.path))
                .collect();
            out.push((rel.clone(), files));
        }
        Ok(out)
    }

    /// The run keys of the partitions with a record, but `own`: (`k=v` path,
    /// the run key's pairs).
    pub fn recorded_keys<'a>(
        &'a self,
        own: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a [(String, String)])> {
        self.parts
            .iter()
            .filter(move |(rel, p)| rel.as_str() != own && matches!(p.record, Ok(Some(_))))
            .map(|(rel, p)| (rel.as_str(), p.pairs.as_slice()))
    }

    /// The files of partition `rel` relative to the root, as its record
    /// lists them.
    pub fn files_of(&self, rel: &str) -> Result<Vec<String>, PublishError> {
        let part = self
            .parts
            .get(rel)
            .ok_or_else(|| PublishError::NotPublished {
                dir: self.root.join(rel).display().to_string(),
            })?;
        Ok(self
            .required(part)?
            .files
            .iter()
            .map(|f| format!("{rel}/{}", f.path))
            .collect())
    }

    fn required<'a>(&self, part: &'a Part) -> Result<&'a Record, PublishError> {
        match &part.record {
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(PublishError::MissingRecord {
                dir: part.dir.display().to_string(),
            }),
            Err(reason) => Err(PublishError::BadRecord {
                path: part.dir.join(RECORD).display().to_string(),
                reason: reason.to_string(),
            }),
        }
    }

    /// The version of every partition but `own`, as a read set names it.
    /// A directory without a readable record stands as such, so that one
    /// appearing or being repaired changes the state too.
    pub fn versions(&self, own: &str) -> BTreeMap<String, PartVersion> {
        self.parts
            .iter()
            .filter(|(rel, _)| rel.as_str() != own)
            .map(|(rel, p)| {
                let v = match &p.record {
                    Ok(Some(r)) => PartVersion {
                        version: r.version.clone(),
                        fingerprint: r.fingerprint.clone(),
                    },
                    Ok(None) => PartVersion {
                        version: "(no audit record)".into(),
                        fingerprint: String::new(),
                    },
                    Err(_) => PartVersion {
                        version: "(unreadable audit record)".into(),
                        fingerprint: String::new(),
                    },
                };
                (rel.clone(), v)
            })
            .collect()
    }

    /// How partition `rel` differs now from this snapshot (replaced,
    /// removed), or `None` when its record still names the version read.
    pub fn changed_since(&self, rel: &str) -> Option<String> {
        let read = self.parts.get(rel)?.record.as_ref().ok()?.as_ref()?;
        match Record::read(&self.root.join(rel)) {
            Ok(Some(now)) if now.version == read.version => None,
            Ok(Some(now)) => Some(format!(
                "partition `{rel}` was replaced by version {} while the audit read version {}",
                now.version, read.version
            )),
            Ok(None) => Some(format!(
                "partition `{rel}` was removed while the audit read it"
            )),
            Err(_) => None,
        }
    }

    /// What the audit records say, for `history(N)`, in path order.
    pub fn past_runs(&self) -> PastRuns {
        let mut out = PastRuns::default();
        for part in self.parts.values() {
            crate::publish::history::add_listed(
                part.run.as_ref().map(Option::as_ref),
                &part.pairs,
                &mut out,
            );
        }
        out
    }
}

fn walk(
    dir: &Path,
    keys: &[String],
    pairs: &mut Vec<(String, String)>,
    out: &mut Vec<(Vec<(String, String)>, PathBuf)>,
) -> Result<(), PublishError> {
    let Some(key) = keys.get(pairs.len()) else {
        out.push((pairs.clone(), dir.to_path_buf()));
        return Ok(());
    };
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(PublishError::io("cannot list", dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.ctx("cannot list", dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && !name.starts_with(['_', '.']) {
            names.push(name);
        }
    }
    names.sort();
    for name in names {
        let Some((k, v)) = name.split_once('=') else {
            continue;
        };
        if k != key || v.is_empty() {
            continue;
        }
        pairs.push((k.to_string(), v.to_string()));
        walk(&dir.join(&name), keys, pairs, out)?;
        pairs.pop();
    }
    Ok(())
}
