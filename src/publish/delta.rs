//! `publish --target delta`: the audited staged files committed into a Delta
//! Lake table in one transaction that replaces exactly the run key's
//! partition, on a local file system or an object store (see the README,
//! "Delta Lake target"; [`super::store`] has the file operations).
//!
//! One commit holds, for the partition `ROOT/k1=v1[/k2=v2]`:
//!
//! - a `remove` for each file the partition has now, and an `add` for each
//!   staged file, copied beforehand into the partition directory under a
//!   version-unique name (`part-00000.1be0c3a9-5d2e91f0.parquet`), with its
//!   `partitionValues` and size;
//! - an application transaction `txn` with `appId = "dqgate:" + k1=v1[/...]`
//!   and `version` = the first 60 bits of the staged fingerprint. The Delta
//!   log keeps the latest `txn` per `appId`, so it names the fingerprint of
//!   the partition's current version: a retry of the same staged files finds
//!   its own version there and commits nothing ("already published"). (The
//!   version is an identity, not a counter: only dqgate reads this appId.)
//! - `commitInfo` carries the audit record (the verdict JSON with the
//!   `published` manifest) under `dqgateAudit`; the same record is written
//!   as `ROOT/k=v/_dqgate_audit.json` once the commit has landed.
//!
//! A first publish creates the table in the same commit (`protocol` 1/2 and
//! `metaData`: the staged files' schema plus the `partitioned by` columns as
//! strings).
//!
//! Concurrency: the commit is a put-if-absent of the next log entry, never
//! retried blindly. When another writer took that entry, the table is
//! reloaded: if the partition's `txn` changed since the audit the publish
//! exits 4 (the published partition changed); if only other partitions
//! changed, the actions are re-planned against the new snapshot and the put
//! is tried again. Copied files of a commit that did not land are removed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use deltalake_core::kernel::engine::arrow_conversion::TryIntoKernel as _;
use deltalake_core::kernel::transaction::{CommitBuilder, TransactionError};
use deltalake_core::kernel::{
    new_metadata, Action, Add, Protocol, Remove, StructType, Transaction,
};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::{DeltaTable, DeltaTableError};
use futures::{StreamExt as _, TryStreamExt as _};
use serde_json::Value as Json;

use super::error::PublishError;
use super::fsx;
use super::layout::RECORD;
use super::record::Record;
use super::store::{footer_rows, staged_files, Root};
use super::{PublishOutcome, VerifyReport};
use crate::exec::input::{fingerprint_footers, StagedInput};
use crate::runkey::RunKey;
use crate::verdict::json::{to_record_json, PublishedFile, PublishedManifest};
use crate::verdict::PassedVerdict;

/// How many staged files are copied into an object-store table at once.
const CONCURRENT_COPIES: usize = 16;

/// The checkpoint interval of tables dqgate creates (`delta.checkpointInterval`).
const CHECKPOINT_INTERVAL: u64 = 10;

/// How often a publish re-plans after losing the log entry to a commit on
/// other partitions before it gives up with exit 4.
const MAX_ATTEMPTS: usize = 20;

/// Whether `root` is a Delta table (holds `_delta_log/`).
pub fn is_delta(root: &Path) -> bool {
    root.join("_delta_log").is_dir()
}

/// Whether a `--table` argument names a Delta table: a local directory with
/// `_delta_log/`, or any object-store URL (a Hive table there could not be
/// swapped atomically, so the Delta target is the only one).
pub fn is_delta_arg(root: &Path) -> bool {
    root.to_str().is_some_and(crate::exec::remote::is_url) || is_delta(root)
}

/// The application id of a run key's partition in the table's log.
pub fn app_id(key: &RunKey) -> String {
    format!("dqgate:{}", key.rel_dir())
}

/// The `txn` version that stands for a fingerprint (`sha256:HEX`): its first
/// 15 hex digits, a non-negative i64.
pub fn txn_version(fingerprint: &str) -> i64 {
    let hex = fingerprint.strip_prefix("sha256:").unwrap_or(fingerprint);
    let head: String = hex.chars().take(15).collect();
    i64::from_str_radix(&head, 16).unwrap_or(0)
}

fn delta_err(root: &Root, e: impl std::fmt::Display) -> PublishError {
    PublishError::Delta {
        path: root.show(),
        reason: e.to_string(),
    }
}

/// An error about a loaded table, named by its location.
fn table_err(table: &DeltaTable, e: impl std::fmt::Display) -> PublishError {
    let url = table.table_url();
    PublishError::Delta {
        path: url
            .to_file_path()
            .map_or_else(|()| url.to_string(), |p| p.display().to_string()),
        reason: e.to_string(),
    }
}

/// An unbuilt handle on the table at `root` (for its log store).
fn handle(root: &Root) -> Result<DeltaTable, PublishError> {
    root.builder()?.build().map_err(|e| delta_err(root, e))
}

/// Opens the Delta table at `root`; `None` when there is no table yet.
async fn load(root: &Root) -> Result<Option<DeltaTable>, PublishError> {
    if !root.has_log().await? {
        return Ok(None);
    }
    let mut table = handle(root)?;
    match table.load().await {
        Ok(()) => Ok(Some(table)),
        Err(DeltaTableError::NotATable(_)) => Ok(None),
        Err(e) => Err(delta_err(root, e)),
    }
}

/// The partition's current `txn` version: what a publish audits against.
pub async fn current_txn(root: &Root, key: &RunKey) -> Result<Option<i64>, PublishError> {
    match load(root).await? {
        None => Ok(None),
        Some(t) => txn_of(&t, key).await,
    }
}

async fn txn_of(table: &DeltaTable, key: &RunKey) -> Result<Option<i64>, PublishError> {
    let state = table.snapshot().map_err(|e| table_err(table, e))?;
    state
        .transaction_version(table.log_store().as_ref(), app_id(key))
        .await
        .map_err(|e| table_err(table, e))
}

/// A file the partition has now, relative to ROOT.
struct CurrentFile {
    path: String,
    size: i64,
    /// The `add` action's `stats` JSON, if any.
    stats: Option<String>,
}

async fn partition_files(
    table: &DeltaTable,
    key: &RunKey,
) -> Result<Vec<CurrentFile>, PublishError> {
    let want = partition_values(key);
    let views: Vec<_> = table
        .get_active_add_actions_by_predicate(None)
        .try_collect()
        .await
        .map_err(|e| table_err(table, e))?;
    let mut out: Vec<CurrentFile> = views
        .iter()
        .filter(|v| v.partition_values_map() == want)
        .map(|v| CurrentFile {
            path: v.path().into_owned(),
            size: v.size(),
            stats: v.stats(),
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The staged files copied into the partition directory, not yet committed.
struct Copies {
    files: Vec<Copy>,
    token: String,
}

/// One copied file.
struct Copy {
    /// Relative to the staged location.
    staged: String,
    /// Relative to the partition directory.
    published: String,
    bytes: u64,
    /// Its footer, read back from the copy.
    footer: Vec<u8>,
}

impl Copies {
    async fn remove(&self, root: &Root, rel_dir: &str) {
        for f in &self.files {
            root.remove(&format!("{rel_dir}/{}", f.published)).await;
        }
    }
}

/// Copies the staged files into the partition directory `rel_dir` under
/// version-unique names, durably, and checks by their footers, read back
/// from the copies, that they are the audited files.
async fn copy_in(
    staged: &crate::exec::remote::Location,
    root: &Root,
    rel_dir: &str,
    audited: &str,
) -> Result<Copies, PublishError> {
    let listed = staged_files(staged).await?;
    let hex = audited.strip_prefix("sha256:").unwrap_or(audited);
    let token = format!(
        "{}-{}",
        &hex[..8.min(hex.len())],
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    // Every name is recorded before any copy starts, so that a failed
    // publish removes whatever was copied.
    let mut copies = Copies {
        files: listed
            .iter()
            .map(|rel| Copy {
                staged: rel.clone(),
                published: match rel.strip_suffix(".parquet") {
                    Some(stem) => format!("{stem}.{token}.parquet"),
                    None => format!("{rel}.{token}"),
                },
                bytes: 0,
                footer: Vec::new(),
            })
            .collect(),
        token,
    };
    let result = async {
        // Object-store copies overlap (a server-side copy of a large object
        // takes seconds); local copies are sequential blocking I/O anyway.
        let done: Vec<(u64, Vec<u8>)> = futures::stream::iter(&copies.files)
            .map(|c| async move {
                let dest = format!("{rel_dir}/{}", c.published);
                root.copy_from(staged, &c.staged, &dest).await?;
                root.footer(&dest).await
            })
            .buffered(CONCURRENT_COPIES)
            .try_collect()
            .await?;
        for (copy, (bytes, footer)) in copies.files.iter_mut().zip(done) {
            copy.bytes = bytes;
            copy.footer = footer;
        }
        let now = fingerprint_footers(
            copies
                .files
                .iter()
                .map(|f| (f.staged.as_str(), f.bytes, f.footer.as_slice())),
        );
        if now != audited {
            return Err(PublishError::StagedChanged {
                audited: audited.to_string(),
                now,
            });
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => Ok(copies),
        Err(e) => {
            copies.remove(root, rel_dir).await;
            Err(e)
        }
    }
}

/// The table's schema for a first publish: the staged files' columns and
/// the partition columns as strings.
fn table_schema(
    staged: &datafusion::arrow::datatypes::Schema,
    key: &RunKey,
) -> Result<StructType, PublishError> {
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let mut fields: Vec<Field> = staged.fields().iter().map(|f| f.as_ref().clone()).collect();
    for (col, value) in key.pairs() {
        check_partition_value(col, value)?;
        // Staged files that carry the partition column give it its type
        // (readers take the value from the log's partitionValues; the audit
        // has checked that the run key value is of that type); else it is a
        // string column.
        match staged.field_with_name(col).map(|f| f.data_type()) {
            Err(_) => fields.push(Field::new(col, DataType::Utf8, true)),
            Ok(
                DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Date32
                | DataType::Date64
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::Boolean,
            ) => {}
            Ok(other) => {
                return Err(PublishError::Refused(format!(
                    "the partition column `{col}` is {other} in the staged files; the Delta target \
                     supports string, date, integer and boolean partition columns"
                )))
            }
        }
    }
    let schema = Schema::new(fields);
    (&schema).try_into_kernel().map_err(|e| {
        PublishError::Refused(format!("the staged schema cannot be a Delta schema: {e}"))
    })
}

/// Run-key values become directory names and relative URIs in the Delta
/// log (`add.path`); characters that Hive/Spark would escape or that a URI
/// would need to encode are refused rather than escaped differently from
/// Spark.
fn check_partition_value(col: &str, value: &str) -> Result<(), PublishError> {
    let ok = |c: char| c.is_ascii_alphanumeric() || "-_.+".contains(c);
    match value.chars().find(|&c| !ok(c)) {
        None => Ok(()),
        Some(c) => Err(PublishError::Refused(format!(
            "the run key value `{col}={value}` contains `{c}`: the Delta target accepts ASCII letters, \
             digits and - _ . + in partition values (no escaping yet)"
        ))),
    }
}

/// The oldest protocol that can hold `schema`: reader 1 / writer 2, or
/// reader 3 / writer 7 with the `timestampNtz` feature when a column is a
/// timestamp without time zone.
fn protocol_for(schema: &StructType) -> Json {
    let ntz = serde_json::to_string(schema)
        .map(|s| s.contains("\"timestamp_ntz\""))
        .unwrap_or(false);
    if ntz {
        serde_json::json!({
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["timestampNtz"],
            "writerFeatures": ["timestampNtz"],
        })
    } else {
        serde_json::json!({"minReaderVersion": 1, "minWriterVersion": 2})
    }
}

/// Publishes the audited staged files as the run key's partition.
/// `audited_against` is the partition's `txn` version read before the audit.
pub async fn publish(
    root: &Root,
    key: &RunKey,
    partitioned_by: &[String],
    staged: &StagedInput,
    passed: &PassedVerdict,
    audited_against: Option<i64>,
) -> Result<PublishOutcome, PublishError> {
    if key.is_empty() {
        return Err(PublishError::Refused(
            "publishing needs a run key (--partition KEY=VALUE): the rule file has no `partitioned by`".into(),
        ));
    }
    if let Root::Local(dir) = root {
        fsx::create_dirs(dir)?;
    }
    if root.overlaps(&staged.location) {
        return Err(PublishError::Refused(format!(
            "the staged location `{}` overlaps the table root `{}`: stage outside the table",
            staged.location.display(),
            root.show()
        )));
    }
    let audited = passed.input.fingerprint.clone();
    let mine = txn_version(&audited);
    let rel_dir = key.rel_dir();

    let table = load(root).await?;
    if let Some(t) = &table {
        let now = txn_of(t, key).await?;
        if now == Some(mine) {
            return already_published(root, t, passed, key).await;
        }
        if now != audited_against {
            return Err(PublishError::PublishedChanged {
                expected: audited_against.map(|v| format!("txn {v}")),
                found: now.map(|v| format!("txn {v}")),
            });
        }
    } else if audited_against.is_some() {
        return Err(PublishError::PublishedChanged {
            expected: audited_against.map(|v| format!("txn {v}")),
            found: None,
        });
    }

    let schema = table_schema(&staged.schema, key)?;
    if let Some(t) = &table {
        check_compatible(t, partitioned_by, &schema)?;
    }
    test_pause();
    fsx::phase("copy");
    let copies = copy_in(&staged.location, root, &rel_dir, &audited).await?;
    let mut files = Vec::with_capacity(copies.files.len());
    for f in &copies.files {
        let rows = footer_rows(
            &root.name_of(&format!("{rel_dir}/{}", f.published)),
            &f.footer,
        );
        match rows {
            Ok(rows) => files.push((
                PublishedFile {
                    path: f.published.clone(),
                    staged_path: f.staged.clone(),
                    bytes: f.bytes,
                },
                rows,
            )),
            Err(e) => {
                copies.remove(root, &rel_dir).await;
                return Err(e);
            }
        }
    }
    files.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    let manifest = PublishedManifest {
        version: copies.token.clone(),
        files: files.iter().map(|(f, _)| f.clone()).collect(),
    };
    // Statistics from the audited footers (the copies' footers are the
    // same bytes: the fingerprint above compared them).
    let stats: HashMap<String, String> = files
        .iter()
        .map(|(f, rows)| {
            let text = staged
                .files
                .iter()
                .find(|s| s.path == f.staged_path)
                .map_or_else(
                    || row_stats(*rows),
                    |s| super::delta_stats::file_stats(staged, s, partitioned_by),
                );
            (f.path.clone(), text)
        })
        .collect();
    let record = to_record_json(passed.verdict(), &manifest);
    let result = commit_loop(
        root,
        table,
        key,
        partitioned_by,
        &manifest,
        &stats,
        &record,
        &schema,
        mine,
        audited_against,
    )
    .await;
    match result {
        Ok((version, interval)) => {
            fsx::phase("record");
            root.write(&format!("{rel_dir}/{RECORD}"), record.as_bytes())
                .await?;
            checkpoint_if_due(root, version, interval).await;
            Ok(PublishOutcome::Published {
                version: format!("{} (Delta table version {version})", copies.token),
                displaced: None,
            })
        }
        Err(e) => {
            copies.remove(root, &rel_dir).await;
            Err(e)
        }
    }
}

/// A retry of the published fingerprint: nothing is committed; the record
/// beside the files is rewritten if a killed publish left it behind.
async fn already_published(
    root: &Root,
    table: &DeltaTable,
    passed: &PassedVerdict,
    key: &RunKey,
) -> Result<PublishOutcome, PublishError> {
    let version = table.version().unwrap_or_default();
    let rel_dir = key.rel_dir();
    let record_at = format!("{rel_dir}/{RECORD}");
    let current = root.read_record(&rel_dir).await.ok().flatten();
    if current.as_ref().map(|r| r.fingerprint.as_str()) != Some(passed.input.fingerprint.as_str()) {
        // The commit landed but its record was not written: rebuild it from
        // the files the partition has now (they carry the token).
        let files = partition_files(table, key).await?;
        let prefix = format!("{rel_dir}/");
        let mut published = Vec::new();
        for f in &files {
            let rel = f.path.strip_prefix(&prefix).unwrap_or(&f.path).to_string();
            published.push(PublishedFile {
                staged_path: staged_name(&rel),
                path: rel,
                bytes: f.size.max(0) as u64,
            });
        }
        let token = files
            .first()
            .and_then(|f| token_of(&f.path))
            .unwrap_or_default();
        let manifest = PublishedManifest {
            version: token,
            files: published,
        };
        root.write(
            &record_at,
            to_record_json(passed.verdict(), &manifest).as_bytes(),
        )
        .await?;
    }
    let token = root
        .read_record(&rel_dir)
        .await?
        .map(|r| r.version)
        .unwrap_or_default();
    Ok(PublishOutcome::AlreadyPublished {
        version: format!("{token} (Delta table version {version})"),
    })
}

/// `a/part-0.TOKEN.parquet` → `a/part-0.parquet`.
fn staged_name(published: &str) -> String {
    match published
        .strip_suffix(".parquet")
        .and_then(|s| s.rsplit_once('.'))
    {
        Some((stem, _)) => format!("{stem}.parquet"),
        None => published.to_string(),
    }
}

fn token_of(published: &str) -> Option<String> {
    published
        .strip_suffix(".parquet")
        .and_then(|s| s.rsplit_once('.'))
        .map(|(_, t)| t.to_string())
}

#[allow(clippy::too_many_arguments)]
async fn commit_loop(
    root: &Root,
    mut table: Option<DeltaTable>,
    key: &RunKey,
    partitioned_by: &[String],
    manifest: &PublishedManifest,
    stats: &HashMap<String, String>,
    record: &str,
    schema: &StructType,
    mine: i64,
    audited_against: Option<i64>,
) -> Result<(u64, u64), PublishError> {
    let rel_dir = key.rel_dir();
    let partition_values = partition_values(key);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let audit: Json = serde_json::from_str(record).map_err(|e| delta_err(root, e))?;
    let predicate = key
        .pairs()
        .iter()
        .map(|(k, v)| format!("{k} = '{}'", v.replace('\'', "''")))
        .collect::<Vec<_>>()
        .join(" AND ");
    for _ in 0..MAX_ATTEMPTS {
        let mut actions = Vec::new();
        match &table {
            None => {
                // Spark's checkpoint interval, so that every writer and
                // reader of the table finds a checkpoint every 10 commits.
                let properties = [(
                    "delta.checkpointInterval".to_string(),
                    CHECKPOINT_INTERVAL.to_string(),
                )];
                let metadata = new_metadata(schema, partitioned_by, properties)
                    .map_err(|e| delta_err(root, e))?;
                let protocol: Protocol =
                    serde_json::from_value(protocol_for(schema)).map_err(|e| delta_err(root, e))?;
                actions.push(Action::Protocol(protocol));
                actions.push(Action::Metadata(metadata));
            }
            Some(t) => {
                check_compatible(t, partitioned_by, schema)?;
                for f in partition_files(t, key).await? {
                    actions.push(remove_action(f, &partition_values, now_ms));
                }
            }
        }
        for f in &manifest.files {
            actions.push(add_action(
                CurrentFile {
                    path: format!("{rel_dir}/{}", f.path),
                    size: f.bytes as i64,
                    stats: stats.get(&f.path).cloned(),
                },
                &partition_values,
                now_ms,
            ));
        }
        actions.push(Action::Txn(Transaction::new_with_last_update(
            app_id(key),
            mine,
            Some(now_ms),
        )));
        let operation = DeltaOperation::Write {
            mode: SaveMode::Overwrite,
            partition_by: Some(partitioned_by.to_vec()),
            predicate: Some(predicate.clone()),
        };
        let log_store = match &table {
            Some(t) => t.log_store(),
            None => handle(root)?.log_store(),
        };
        let state = match &table {
            Some(t) => Some(t.snapshot().map_err(|e| delta_err(root, e))?),
            None => None,
        };
        fsx::phase("commit");
        let committed = CommitBuilder::default()
            .with_actions(actions)
            .with_app_metadata(HashMap::from([
                ("dqgateAudit".to_string(), audit.clone()),
                // The commit is made without automatic retries, so it lands
                // at exactly this version + 1 (rollback reads it back).
                (
                    "dqgateReadVersion".to_string(),
                    serde_json::json!(table
                        .as_ref()
                        .and_then(|t| t.version())
                        .map_or(-1, |v| v as i64)),
                ),
            ]))
            .with_max_retries(0)
            .build(
                state.map(|s| s as &dyn deltalake_core::kernel::transaction::TableReference),
                Arc::clone(&log_store),
                operation,
            )
            .await;
        match committed {
            Ok(done) => return Ok((done.version(), checkpoint_interval(&done))),
            Err(e) if lost_race(&e) => {
                // Someone else took the log entry: reload and look at our partition.
                table = load(root).await?;
                let now = match &table {
                    Some(t) => txn_of(t, key).await?,
                    None => None,
                };
                if now != audited_against {
                    return Err(PublishError::PublishedChanged {
                        expected: audited_against.map(|v| format!("txn {v}")),
                        found: now.map(|v| format!("txn {v}")),
                    });
                }
            }
            Err(e) => return Err(delta_err(root, e)),
        }
    }
    Err(PublishError::Busy {
        partition: format!("{rel_dir} (the Delta log kept moving for {MAX_ATTEMPTS} attempts)"),
    })
}

fn remove_action(
    f: CurrentFile,
    partition_values: &HashMap<String, Option<String>>,
    now_ms: i64,
) -> Action {
    Action::Remove(Remove {
        path: f.path,
        data_change: true,
        deletion_timestamp: Some(now_ms),
        extended_file_metadata: Some(true),
        partition_values: Some(partition_values.clone()),
        size: Some(f.size),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
    })
}

fn add_action(
    f: CurrentFile,
    partition_values: &HashMap<String, Option<String>>,
    now_ms: i64,
) -> Action {
    Action::Add(Add {
        path: f.path,
        partition_values: partition_values.clone(),
        size: f.size,
        modification_time: now_ms,
        data_change: true,
        stats: f.stats,
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    })
}

/// `{"numRecords": N}`: the statistics of a copy that is not among the
/// audited files' footers (never expected: the fingerprints matched).
fn row_stats(rows: i64) -> String {
    serde_json::json!({ "numRecords": rows }).to_string()
}

fn partition_values(key: &RunKey) -> HashMap<String, Option<String>> {
    key.pairs()
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect()
}

/// `rollback` on a Delta table: a new commit that restores the partition's
/// files as they were before the last commit that changed it (its `remove`s
/// are the current files, its `add`s the earlier version's, which Delta
/// keeps until a vacuum), with that version's `txn` and audit record. The
/// history is not rewritten; a second rollback undoes the first. Returns the
/// restored version's id.
pub async fn rollback(root: &Root, key: &RunKey) -> Result<String, PublishError> {
    let rel_dir = key.rel_dir();
    let nothing = |detail: &str| PublishError::NothingToRollBack {
        partition: rel_dir.clone(),
        detail: detail.to_string(),
    };
    let table = load(root)
        .await?
        .ok_or_else(|| nothing("there is no Delta table"))?;
    let latest = table.version().unwrap_or_default();
    let infos: Vec<_> = table
        .history(None)
        .try_collect()
        .await
        .map_err(|e| delta_err(root, e))?;
    let want: serde_json::Map<String, Json> = key
        .pairs()
        .iter()
        .map(|(k, v)| (k.clone(), Json::String(v.clone())))
        .collect();
    // Newest first: (table version, audit record) of the commits that
    // changed this partition.
    let touching: Vec<(u64, Json)> = infos
        .iter()
        .enumerate()
        .filter_map(|(i, info)| {
            let audit = info.info.get("dqgateAudit")?;
            // The version: recorded by dqgate (read version + 1), else the
            // position in the newest-first history.
            let version = match info.info.get("dqgateReadVersion").and_then(Json::as_i64) {
                Some(read) => (read + 1) as u64,
                None => latest.saturating_sub(i as u64),
            };
            (audit.get("partition")?.as_object()? == &want).then(|| (version, audit.clone()))
        })
        .collect();
    let [(last, _), (_, record), ..] = touching.as_slice() else {
        return Err(nothing("fewer than two versions were published"));
    };
    let mut before = handle(root)?;
    before
        .load_version(last - 1)
        .await
        .map_err(|e| delta_err(root, e))?;
    let restored = partition_files(&before, key).await?;
    let restored_txn = txn_of(&before, key).await?;
    for f in &restored {
        if !root.exists(&f.path).await? {
            return Err(nothing(&format!(
                "`{}` of the earlier version is gone (vacuumed?)",
                root.name_of(&f.path)
            )));
        }
    }
    let pv = partition_values(key);
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut actions: Vec<Action> = partition_files(&table, key)
        .await?
        .into_iter()
        .map(|f| remove_action(f, &pv, now_ms))
        .collect();
    actions.extend(restored.into_iter().map(|f| add_action(f, &pv, now_ms)));
    if let Some(v) = restored_txn {
        actions.push(Action::Txn(Transaction::new_with_last_update(
            app_id(key),
            v,
            Some(now_ms),
        )));
    }
    let state = table.snapshot().map_err(|e| delta_err(root, e))?;
    let committed = CommitBuilder::default()
        .with_actions(actions)
        .with_app_metadata(HashMap::from([
            ("dqgateAudit".to_string(), record.clone()),
            (
                "dqgateRollback".to_string(),
                serde_json::json!({"restored": last - 1, "undone": last}),
            ),
            ("dqgateReadVersion".to_string(), serde_json::json!(latest)),
        ]))
        .with_max_retries(0)
        .build(
            Some(state as &dyn deltalake_core::kernel::transaction::TableReference),
            table.log_store(),
            DeltaOperation::Write {
                mode: SaveMode::Overwrite,
                partition_by: None,
                predicate: None,
            },
        )
        .await;
    match committed {
        Ok(done) => checkpoint_if_due(root, done.version(), checkpoint_interval(&done)).await,
        Err(e) if lost_race(&e) => {
            return Err(PublishError::Busy {
                partition: format!("{rel_dir} (another commit landed during the rollback)"),
            })
        }
        Err(e) => return Err(delta_err(root, e)),
    }
    let text = serde_json::to_string_pretty(record).map_err(|e| delta_err(root, e))?;
    root.write(
        &format!("{rel_dir}/{RECORD}"),
        format!("{text}\n").as_bytes(),
    )
    .await?;
    Ok(record
        .pointer("/published/version")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .to_string())
}

/// The table's `delta.checkpointInterval` as the commit left it.
fn checkpoint_interval(done: &deltalake_core::kernel::transaction::FinalizedCommit) -> u64 {
    use deltalake_core::table::config::TablePropertiesExt as _;
    done.snapshot.table_config().checkpoint_interval().get()
}

/// Writes a checkpoint of table version `version` when the table's
/// `delta.checkpointInterval` (100 unless set; 10 in tables dqgate creates)
/// says so, as Delta writers do after a commit, so that readers (and the
/// next publish) do not replay every JSON commit. The publish has already
/// succeeded: a checkpoint that cannot be written is a warning (readers then
/// replay more commits), never a failed publish. Log entries are never
/// cleaned up here (rollback reads the history).
async fn checkpoint_if_due(root: &Root, version: u64, interval: u64) {
    if !(version + 1).is_multiple_of(interval.max(1)) {
        return;
    }
    let result = async {
        let mut table = handle(root)?;
        table
            .load_version(version)
            .await
            .map_err(|e| delta_err(root, e))?;
        fsx::phase("checkpoint");
        deltalake_core::protocol::checkpoints::create_checkpoint(&table, None)
            .await
            .map_err(|e| delta_err(root, e))?;
        Ok::<_, PublishError>(())
    }
    .await;
    match result {
        Ok(()) => eprintln!("dqgate: wrote the Delta checkpoint of table version {version}"),
        Err(e) => eprintln!(
            "dqgate: warning: the checkpoint of table version {version} was not written ({e}); \
             the publish itself succeeded"
        ),
    }
}

/// `gc` on a Delta table: removes the data files below the root that no
/// commit of the log has ever named (in an `add` or a `remove`) and that are
/// older than `min_age`: copies left by publishes killed before their commit
/// (or that lost a race and could not clean up). Files a commit removed are
/// kept: rollback restores them (a Delta `VACUUM` is what removes those).
/// `min_age` protects the copies of a publish in flight, which are
/// unnamed until its commit lands. Refused when the log does not go back to
/// version 0 (another writer cleaned it up: a file named only in the
/// removed commits would look unnamed). Returns the removed files.
pub async fn gc(root: &Root, min_age: std::time::Duration) -> Result<Vec<String>, PublishError> {
    let Some(table) = load(root).await? else {
        return Ok(Vec::new());
    };
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
    let mut named = std::collections::HashSet::new();
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
                    named.insert(percent_decode(path));
                }
            }
        }
    }
    let now = std::time::SystemTime::now();
    let mut removed = Vec::new();
    for (rel, modified) in root.data_files().await? {
        let old_enough = now.duration_since(modified).is_ok_and(|age| age >= min_age);
        if !named.contains(&rel) && old_enough {
            root.remove(&rel).await;
            removed.push(root.name_of(&rel));
        }
    }
    Ok(removed)
}

/// A log path (a relative URI) as a path: `%XX` escapes decoded.
fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// For race tests: sleeps `DQGATE_TEST_DELTA_PAUSE_MS` milliseconds after
/// the table was read and before the files are copied and committed, so that
/// two publishes audit against the same table version. Never set outside tests.
fn test_pause() {
    if let Some(ms) = std::env::var("DQGATE_TEST_DELTA_PAUSE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
}

fn lost_race(e: &DeltaTableError) -> bool {
    matches!(
        e,
        DeltaTableError::VersionAlreadyExists(_)
            | DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_)
                    | TransactionError::VersionAlreadyExists(_)
            }
    )
}

/// An existing table must be partitioned like the rule file and have the
/// staged files' columns.
fn check_compatible(
    table: &DeltaTable,
    partitioned_by: &[String],
    staged: &StructType,
) -> Result<(), PublishError> {
    check_partitioning(table, partitioned_by)?;
    let state = table.snapshot().map_err(|e| table_err(table, e))?;
    let have = state.schema();
    let names = |s: &StructType| -> Vec<(String, String)> {
        s.fields()
            .map(|f| (f.name().to_string(), format!("{:?}", f.data_type())))
            .collect()
    };
    if names(staged) != names(have.as_ref()) {
        return Err(PublishError::Refused(format!(
            "the staged files' columns differ from the Delta table's at `{}` (schema evolution is not supported)",
            table.table_url()
        )));
    }
    Ok(())
}

/// The table's partition columns, from its metadata.
fn partition_columns(table: &DeltaTable) -> Result<Vec<String>, PublishError> {
    let state = table.snapshot().map_err(|e| table_err(table, e))?;
    Ok(serde_json::to_value(state.metadata())
        .ok()
        .and_then(|m| serde_json::from_value(m.get("partitionColumns")?.clone()).ok())
        .unwrap_or_default())
}

/// The table's partition columns must be the rule file's `partitioned by`.
fn check_partitioning(table: &DeltaTable, partitioned_by: &[String]) -> Result<(), PublishError> {
    let cols = partition_columns(table)?;
    if cols.as_slice() != partitioned_by {
        return Err(PublishError::Refused(format!(
            "the Delta table at `{}` is partitioned by [{}], the rule file by [{}]",
            table.table_url(),
            cols.join(", "),
            partitioned_by.join(", ")
        )));
    }
    Ok(())
}

/// A Delta table's published partitions as its current snapshot names
/// them: the published side of an audit (`published.*`, `history(N)`,
/// `schema matches published`, `across published`) on a Delta table.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub root: Root,
    /// `k1=v1/k2=v2` → the partition's files, relative to the root, sorted.
    parts: std::collections::BTreeMap<String, Vec<String>>,
}

impl Snapshot {
    /// Reads the table's current snapshot (nothing when there is no table
    /// yet); its partition columns must be `keys`, the rule file's.
    pub async fn load(root: Root, keys: &[String]) -> Result<Snapshot, PublishError> {
        let mut parts = std::collections::BTreeMap::<String, Vec<String>>::new();
        if let Some(table) = load(&root).await? {
            check_partitioning(&table, keys)?;
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
        Ok(Snapshot { root, parts })
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
        let record =
            self.root
                .read_record(&rel)
                .await?
                .ok_or_else(|| PublishError::MissingRecord {
                    dir: format!(
                        "{} (a publish killed after its commit leaves it to the retry)",
                        self.root.name_of(&rel)
                    ),
                })?;
        Ok(Some((files.clone(), record.fingerprint)))
    }

    /// Every published partition but `own`: (`k=v` path, files).
    pub fn others<'a>(&'a self, own: &'a str) -> impl Iterator<Item = (&'a str, &'a [String])> {
        self.parts
            .iter()
            .filter(move |(rel, _)| rel.as_str() != own)
            .map(|(rel, files)| (rel.as_str(), files.as_slice()))
    }

    /// What the audit records of the published partitions say, for
    /// `history(N)`, in partition-path order.
    pub async fn past_runs(&self) -> crate::verdict::history::PastRuns {
        let mut out = crate::verdict::history::PastRuns::default();
        for rel in self.parts.keys() {
            let pairs: Vec<(String, String)> = rel
                .split('/')
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let text = self.root.read_text(&format!("{rel}/{RECORD}")).await;
            super::history::add_run(text, &pairs, &mut out);
        }
        out
    }
}

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
    if differences.is_empty() {
        differences.extend(refingerprint(root, &rel_dir, &record).await);
    }
    Ok(VerifyReport {
        version: format!(
            "{} (Delta table version {})",
            record.version,
            table.version().unwrap_or_default()
        ),
        fingerprint: record.fingerprint,
        differences,
    })
}

/// Re-fingerprints the record's files where they are, under their staged
/// names, as the audit did; the difference from the record, if any.
async fn refingerprint(root: &Root, rel_dir: &str, record: &Record) -> Option<String> {
    let mut files: Vec<_> = record.files.iter().collect();
    files.sort_by(|a, b| a.staged_path.cmp(&b.staged_path));
    let mut footers = Vec::with_capacity(files.len());
    for f in files {
        match root.footer(&format!("{rel_dir}/{}", f.path)).await {
            Ok((bytes, footer)) => footers.push((f.staged_path.as_str(), bytes, footer)),
            Err(PublishError::Input(e)) => {
                return super::verify::compare_fingerprint(Err(e), &record.fingerprint)
            }
            Err(e) => return Some(format!("changed: {e}")),
        }
    }
    let now = fingerprint_footers(footers.iter().map(|(n, b, f)| (*n, *b, f.as_slice())));
    super::verify::compare_fingerprint(Ok(now), &record.fingerprint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txn_versions_are_fingerprint_prefixes() {
        assert_eq!(txn_version("sha256:000000000000001ff"), 1);
        assert_eq!(
            txn_version("sha256:fffffffffffffffff"),
            0x0fff_ffff_ffff_ffff
        );
        assert!(txn_version("sha256:1be0c3a9") > 0);
    }

    #[test]
    fn log_paths_are_percent_decoded() {
        assert_eq!(
            percent_decode("d=a%20b/part-0.parquet"),
            "d=a b/part-0.parquet"
        );
        assert_eq!(percent_decode("d=%C3%A9/x%2"), "d=é/x%2");
    }

    #[test]
    fn published_names_map_back() {
        assert_eq!(
            staged_name("a/part-0.1be0c3a9-5d2e91f0.parquet"),
            "a/part-0.parquet"
        );
        assert_eq!(
            token_of("part-0.1be0c3a9-5d2e91f0.parquet").as_deref(),
            Some("1be0c3a9-5d2e91f0")
        );
    }
}
