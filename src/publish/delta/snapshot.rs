//! Reading a table: its current snapshot, a partition's files and
//! fingerprint, its past runs for `history(N)`.

use std::collections::{BTreeMap, HashMap};

use sha2::{Digest, Sha256};

use futures::TryStreamExt as _;
use serde_json::Value as Json;

use super::log::{load, table_err};
use super::schema::{check_partitioning, partition_columns};
use crate::publish::error::PublishError;
use crate::publish::readset::PartVersion;
use crate::publish::record::Record;
use crate::publish::record::RECORD;
use crate::publish::root::Root;
use crate::runkey::RunKey;

/// A Delta table's published partitions as its current snapshot names
/// them: the published side of an audit (`published.*`, `history(N)`,
/// `schema matches published`, `across published`) on a Delta table.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub root: Root,
    /// `k1=v1/k2=v2` → the partition's files, relative to the root, sorted.
    pub(super) parts: std::collections::BTreeMap<String, Vec<String>>,
    /// The table version read; `None` when there was no table yet.
    pub version: Option<u64>,
}

impl Snapshot {
    /// Reads the table's current snapshot (nothing when there is no table
    /// yet); its partition columns must be `keys`, the rule file's.
    pub async fn load(root: Root, keys: &[String]) -> Result<Snapshot, PublishError> {
        let mut parts = std::collections::BTreeMap::<String, Vec<String>>::new();
        let mut version = None;
        if let Some(table) = load(&root).await? {
            check_partitioning(&table, keys)?;
            version = table.version();
            let views: Vec<_> = table
                .get_active_add_actions_by_predicate(None)
                .try_collect()
                .await
                .map_err(|e| table_err(&table, e))?;
            for v in &views {
                let values = v.partition_values_map();
                let rel = keys
                    .iter()
                    .map(|k| {
                        let value = values.get(k).cloned().flatten();
                        format!(
                            "{k}={}",
                            value.as_deref().unwrap_or("__HIVE_DEFAULT_PARTITION__")
                        )
                    })
                    .collect::<Vec<_>>()
                    .join("/");
                parts.entry(rel).or_default().push(v.path().into_owned());
            }
            for files in parts.values_mut() {
                files.sort();
            }
        }
        Ok(Snapshot {
            root,
            parts,
            version,
        })
    }

    /// The partitions of the table as its own metadata names them (no rule
    /// file at hand: `report --table`).
    pub async fn load_own(root: Root) -> Result<Snapshot, PublishError> {
        let keys = match load(&root).await? {
            None => Vec::new(),
            Some(table) => partition_columns(&table)?,
        };
        Snapshot::load(root, &keys).await
    }

    /// The published partitions: (`k=v` path, its audit record's text, if
    /// any), in path order.
    pub async fn records(&self) -> Result<Vec<(String, Option<String>)>, PublishError> {
        let mut out = Vec::new();
        for rel in self.parts.keys() {
            let text = self.root.read_text(&format!("{rel}/{RECORD}")).await?;
            out.push((rel.clone(), text));
        }
        Ok(out)
    }

    /// How many commits published a version into each partition, and how
    /// many rolled one back, from the `commitInfo` dqgate writes.
    pub async fn trail_counts(&self) -> Result<HashMap<String, (usize, usize)>, PublishError> {
        let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
        let Some(table) = load(&self.root).await? else {
            return Ok(counts);
        };
        let infos: Vec<_> = table
            .history(None)
            .try_collect()
            .await
            .map_err(|e| table_err(&table, e))?;
        for info in &infos {
            let Some(audit) = info.info.get("dqgateAudit") else {
                continue;
            };
            let Some(partition) = audit.get("partition").and_then(Json::as_object) else {
                continue;
            };
            let rel = partition
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("/");
            let entry = counts.entry(rel).or_default();
            if info.info.contains_key("dqgateRollback") {
                entry.1 += 1;
            } else {
                entry.0 += 1;
            }
        }
        Ok(counts)
    }

    /// The run key's partition: its files and the fingerprint its audit
    /// record names; `None` when nothing is published for it.
    pub async fn current(
        &self,
        key: &RunKey,
    ) -> Result<Option<(Vec<String>, String)>, PublishError> {
        let rel = key.rel_dir();
        let Some(files) = self.parts.get(&rel) else {
            return Ok(None);
        };
        let text = self.record_of(&rel, files, &mut None).await?;
        let record = match text {
            Some(t) => Record::parse(&t, &self.root.name_of(&format!("{rel}/{RECORD}")))?,
            None => {
                return Err(PublishError::MissingRecord {
                    dir: self.root.name_of(&rel),
                })
            }
        };
        Ok(Some((files.clone(), record.fingerprint)))
    }

    /// The audit record of partition `rel` as it is in this snapshot (its
    /// `files`): the record beside the files when it describes them, else
    /// the `dqgateAudit` of the commit that added them. The record beside
    /// the files is written just after the commit lands, so a publish
    /// stopped in between (killed, or cut off by a power loss) leaves it
    /// missing or the previous version's until the retry rewrites it.
    /// `logged` caches the log's audits across calls.
    async fn record_of(
        &self,
        rel: &str,
        files: &[String],
        logged: &mut Option<Vec<Json>>,
    ) -> Result<Option<String>, PublishError> {
        let text = self.root.read_text(&format!("{rel}/{RECORD}")).await;
        let describes = |t: &str| {
            Record::parse(t, rel).is_ok_and(|r| {
                let mut named: Vec<String> = r
                    .files
                    .iter()
                    .map(|f| format!("{rel}/{}", f.path))
                    .collect();
                named.sort();
                named == files
            })
        };
        if matches!(&text, Ok(Some(t)) if describes(t)) {
            return text;
        }
        if logged.is_none() {
            *logged = Some(self.logged_audits().await);
        }
        let from_log = logged
            .iter()
            .flatten()
            .map(Json::to_string)
            .find(|t| describes(t));
        match from_log {
            Some(t) => Ok(Some(t)),
            None => text,
        }
    }

    /// Every published partition but `own`: (`k=v` path, files).
    pub fn others<'a>(&'a self, own: &'a str) -> impl Iterator<Item = (&'a str, &'a [String])> {
        self.parts
            .iter()
            .filter(move |(rel, _)| rel.as_str() != own)
            .map(|(rel, files)| (rel.as_str(), files.as_slice()))
    }

    /// The files of partition `rel` (none when it is not published).
    pub fn files_of(&self, rel: &str) -> &[String] {
        self.parts.get(rel).map_or(&[], Vec::as_slice)
    }

    /// Every partition but `own` as a read set names it: the version token
    /// of its files, and a digest of their paths (Delta files are never
    /// rewritten in place, so the paths name the data).
    pub fn versions(&self, own: &str) -> BTreeMap<String, PartVersion> {
        self.others(own)
            .map(|(rel, files)| {
                let mut h = Sha256::new();
                for f in files {
                    h.update(f.as_bytes());
                    h.update([0]);
                }
                let version = files
                    .first()
                    .and_then(|f| super::copy::token_of(f))
                    .unwrap_or_else(|| format!("{} file(s)", files.len()));
                (
                    rel.to_string(),
                    PartVersion {
                        version,
                        fingerprint: format!("sha256:{}", hex::encode(h.finalize())),
                    },
                )
            })
            .collect()
    }

    /// What the audit records of the published partitions say, for
    /// `history(N)`, in partition-path order.
    ///
    /// The record beside a partition's files is written just after its
    /// commit lands, so it may still be the previous version's (or missing,
    /// when the publish was killed in between). A record whose manifest is
    /// not the snapshot's files of the partition is therefore not used: the
    /// record of the commit that added those files (its `commitInfo`'s
    /// `dqgateAudit`) is, so the baseline is the snapshot's, never a newer
    /// or older record's.
    pub async fn past_runs(&self) -> crate::verdict::history::PastRuns {
        let mut out = crate::verdict::history::PastRuns::default();
        let mut logged: Option<Vec<Json>> = None;
        for (rel, files) in &self.parts {
            let pairs = crate::runkey::pairs_of_rel(rel);
            let text = self.record_of(rel, files, &mut logged).await;
            crate::publish::history::add_run(text, &pairs, &mut out);
        }
        out
    }

    /// The audit records (`dqgateAudit`) of the table's commits; none when
    /// the log cannot be read.
    async fn logged_audits(&self) -> Vec<Json> {
        let Ok(Some(table)) = load(&self.root).await else {
            return Vec::new();
        };
        let infos: Vec<_> = match table.history(None).try_collect().await {
            Ok(i) => i,
            Err(_) => return Vec::new(),
        };
        infos
            .into_iter()
            .filter_map(|i| i.info.get("dqgateAudit").cloned())
            .collect()
    }
}
