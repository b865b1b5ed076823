//! The publish commit: the plan of `remove`/`add`/`txn` actions against a
//! snapshot, the put-if-absent of the next log entry, re-planning after a
//! lost race, and the checkpoint that may follow.

use std::collections::HashMap;
use std::sync::Arc;

use deltalake_core::kernel::transaction::{CommitBuilder, TransactionError};
use deltalake_core::kernel::{
    new_metadata, Action, Add, Protocol, Remove, StructType, Transaction,
};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use deltalake_core::{DeltaTable, DeltaTableError};
use serde_json::Value as Json;

use super::conflict::check_winning_commits;
use super::copy::{copy_in, staged_name, token_of};
use super::log::{
    app_id, delta_err, handle, load, partition_files, partition_values, txn_of, txn_version,
    CurrentFile, CHECKPOINT_INTERVAL, MAX_ATTEMPTS,
};
use super::schema::{check_compatible, protocol_for, table_schema};
use crate::keyindex::Built;
use crate::publish::error::PublishError;
use crate::publish::readset::ReadSet;
use crate::publish::record::RECORD;
use crate::publish::root::{footer_rows, Root};
use crate::publish::PublishOutcome;
use crate::publish::{fsx, indexes};
use crate::runkey::RunKey;
use crate::staged::StagedInput;
use crate::verdict::json::{to_record_json, PublishedFile, PublishedManifest};
use crate::verdict::PassedVerdict;

/// Publishes the audited staged files as the run key's partition.
/// `audited_against` is the partition's `txn` version read before the audit;
/// `read` what the audit read of other partitions (then no commit since the
/// version it read may touch them: see `conflict`).
pub async fn publish(
    root: &Root,
    key: &RunKey,
    partitioned_by: &[String],
    staged: &StagedInput,
    passed: &PassedVerdict,
    audited_against: Option<i64>,
    (read, indexes): (&ReadSet, &[Built]),
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

    // Fail early, before any copy, when a commit since the audit already
    // touched what it read; the commit loop checks again before each put.
    let mut checked = None;
    check_winning_commits(table.as_ref(), key, partitioned_by, read, &mut checked).await?;
    let schema = table_schema(&staged.schema, key)?;
    if let Some(t) = &table {
        check_compatible(t, partitioned_by, &schema)?;
    }
    crate::hooks::delta_pause();
    // A first publish makes `_delta_log/` durably before its first copy, so
    // that one killed (or cut off by a power loss) before its commit leaves
    // a table in the making, which the retry continues and `gc` cleans, not
    // a directory that is neither empty nor a Delta table (exit 2 forever).
    if let (None, Root::Local(dir)) = (&table, root) {
        fsx::create_dirs(&dir.join("_delta_log"))?;
    }
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
    let published: Vec<PublishedFile> = files.iter().map(|(f, _)| f.clone()).collect();
    // The key indexes go beside the copies before the commit. Until it
    // lands they are not the index of the partition's files (their
    // fingerprint says so), and no audit trusts them; if it never lands
    // they stay so. A local table only: an object store's get none.
    let key_indexes = match root {
        Root::Local(dir) if !indexes.is_empty() => {
            fsx::phase("key indexes");
            match indexes::write(&dir.join(&rel_dir), &rel_dir, &published, indexes) {
                Ok(written) => written,
                Err(e) => {
                    copies.remove(root, &rel_dir).await;
                    return Err(e);
                }
            }
        }
        _ => Vec::new(),
    };
    let manifest = PublishedManifest {
        version: copies.token.clone(),
        files: published,
        key_indexes,
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
                    |s| crate::publish::delta::stats::file_stats(staged, s, partitioned_by),
                );
            (f.path.clone(), text)
        })
        .collect();
    let record = to_record_json(passed.verdict(), &manifest, read.to_json().as_ref());
    let result = commit_loop(
        root,
        table,
        key,
        partitioned_by,
        Planned {
            manifest: &manifest,
            stats: &stats,
            record: &record,
            schema: &schema,
        },
        mine,
        audited_against,
        (read, checked),
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
            // A commit that lost (a conflict, exit 4) or was refused did not
            // land: its copies go. After any other error, an I/O error while
            // the log entry was synced say, the entry may be in the log and
            // name them: they stay, and `gc` removes them if no commit does.
            if !matches!(e, PublishError::Delta { .. } | PublishError::Io { .. }) {
                copies.remove(root, &rel_dir).await;
                // Its indexes go too; the winner's have names of their own.
                if let Root::Local(dir) = root {
                    indexes::remove_listed(&dir.join(&rel_dir), &manifest.key_indexes)?;
                }
            }
            Err(e)
        }
    }
}

/// A retry of the published fingerprint: nothing is committed; the record
/// beside the files is rewritten if a killed publish left it behind.
pub(super) async fn already_published(
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
            key_indexes: Vec::new(),
        };
        // The rebuilt record lists no key index. An index the killed
        // publish wrote stays: its head ties it to these files, so audits
        // still use it, and `gc` removes it as it removes every index no
        // record lists. Nothing else is removed here: a publisher racing
        // this retry may have written its own index before its commit.
        root.write(
            &record_at,
            to_record_json(passed.verdict(), &manifest, None).as_bytes(),
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

/// What a commit adds: the copies' manifest, their statistics, the audit
/// record and the table schema.
pub(super) struct Planned<'a> {
    pub manifest: &'a PublishedManifest,
    pub stats: &'a HashMap<String, String>,
    pub record: &'a str,
    pub schema: &'a StructType,
}

/// Puts the next log entry; after a lost race, reloads, re-checks the
/// partition's `txn` and the commits that won against the read set, and
/// tries again. `read.1` is the last table version already checked.
#[allow(clippy::too_many_arguments)]
pub(super) async fn commit_loop(
    root: &Root,
    mut table: Option<DeltaTable>,
    key: &RunKey,
    partitioned_by: &[String],
    planned: Planned<'_>,
    mine: i64,
    audited_against: Option<i64>,
    read: (&ReadSet, Option<u64>),
) -> Result<(u64, u64), PublishError> {
    let Planned {
        manifest,
        stats,
        record,
        schema,
    } = planned;
    let (read, mut checked) = read;
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
        check_winning_commits(table.as_ref(), key, partitioned_by, read, &mut checked).await?;
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

pub(super) fn remove_action(
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

pub(super) fn add_action(
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
pub(super) fn row_stats(rows: i64) -> String {
    serde_json::json!({ "numRecords": rows }).to_string()
}

/// The table's `delta.checkpointInterval` as the commit left it.
pub(super) fn checkpoint_interval(
    done: &deltalake_core::kernel::transaction::FinalizedCommit,
) -> u64 {
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
pub(super) async fn checkpoint_if_due(root: &Root, version: u64, interval: u64) {
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

pub(super) fn lost_race(e: &DeltaTableError) -> bool {
    matches!(
        e,
        DeltaTableError::VersionAlreadyExists(_)
            | DeltaTableError::Transaction {
                source: TransactionError::MaxCommitAttempts(_)
                    | TransactionError::VersionAlreadyExists(_)
            }
    )
}
