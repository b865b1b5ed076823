//! `rollback` on a Delta table: a new commit that restores the files the
//! partition's last publish removed.

use std::collections::HashMap;

use deltalake_core::kernel::transaction::CommitBuilder;
use deltalake_core::kernel::{Action, Transaction};
use deltalake_core::protocol::{DeltaOperation, SaveMode};
use futures::TryStreamExt as _;
use serde_json::Value as Json;

use super::commit::{add_action, checkpoint_if_due, checkpoint_interval, lost_race, remove_action};
use super::log::{app_id, delta_err, handle, load, partition_files, partition_values, txn_of};
use crate::publish::error::PublishError;
use crate::publish::record::RECORD;
use crate::publish::root::Root;
use crate::runkey::RunKey;

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
    let [(last, undone), (_, record), ..] = touching.as_slice() else {
        return Err(nothing("fewer than two versions were published"));
    };
    // Each version's key indexes have names of their own. The restored
    // record lists those of its indexes still there as it wrote them (`gc`
    // keeps them while the version's files are all there); the undone
    // version's go once the rollback commits.
    let mut record = record.clone();
    let intact: Vec<String> = match root {
        Root::Local(dir) => crate::publish::record::key_indexes_of(&record)
            .into_iter()
            .filter(|i| crate::publish::indexes::intact(&dir.join(&rel_dir), i))
            .map(|i| i.path)
            .collect(),
        Root::Remote(_) => Vec::new(),
    };
    if let Some(Json::Array(listed)) = record.pointer_mut("/published/key_indexes") {
        listed.retain(|i| {
            let path = i.get("path").and_then(Json::as_str);
            path.is_some_and(|p| intact.iter().any(|k| k == p))
        });
    }
    let undone_indexes = crate::publish::record::key_indexes_of(undone);
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
    if let Root::Local(dir) = root {
        crate::publish::indexes::remove_listed(&dir.join(&rel_dir), &undone_indexes)?;
    }
    let text = serde_json::to_string_pretty(&record).map_err(|e| delta_err(root, e))?;
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
