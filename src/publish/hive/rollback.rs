//! `rollback`: swap the newest kept version back in, atomically.
//!
//! The kept version's directory (beside ROOT, files under their published
//! names) is exchanged with the partition by `RENAME_EXCHANGE`; the displaced
//! current version, which the exchange leaves at the kept path, is then moved
//! to its own kept name as the newest kept version. So a second rollback
//! undoes the first, and the number of kept versions does not change.
//!
//! The operation is journalled like a publish (`Op::Rollback`), so a kill at
//! any instant is finished or undone by the next publish, rollback or `gc`.

use super::journal::{Journal, Op};
use super::kept;
use super::layout::Layout;
use super::lock::{PartitionLock, TableLock, TableMode};
use super::recover;
use crate::publish::error::PublishError;
use crate::publish::fsx::{self, phase};
use crate::publish::record::Record;

/// Restores the newest kept version; returns its version id.
pub(crate) fn rollback(layout: &Layout) -> Result<String, PublishError> {
    let _lock = PartitionLock::acquire(&layout.lock_path(), &layout.rel)?;
    recover::recover_partition(layout)?;
    let nothing = |detail: &str| PublishError::NothingToRollBack {
        partition: layout.rel.clone(),
        detail: detail.to_string(),
    };
    let current = layout
        .current_record()?
        .ok_or_else(|| nothing("nothing is published"))?;
    let kept = kept::list(layout)?;
    let target = kept
        .last()
        .ok_or_else(|| nothing("no displaced version is kept"))?;
    let restore = Record::read_required(&target.dir)?;
    let j = Journal {
        op: Op::Rollback,
        partition: layout.rel.clone(),
        swap_dir: target.dir.clone(),
        version: restore.version.clone(),
        previous: Some(current.version.clone()),
        renames: Vec::new(),
        kept_from: Some(target.dir.clone()),
        displaced_to: Some(layout.kept_dir(target.seq + 1, &current.version)),
    };
    let journal_path = layout.journal_path();
    phase("journal");
    j.write(&journal_path)?;
    // A rollback changes the version readers see, like a publish: it swaps
    // under the shared table lock, never while a read set is validated.
    let table_lock = match TableLock::acquire(&layout.table_lock_path(), TableMode::Shared) {
        Ok(lock) => lock,
        Err(e) => {
            Journal::remove(&journal_path)?;
            return Err(e);
        }
    };
    phase("swap");
    if let Err(e) = fsx::exchange(&target.dir, &layout.partition_dir()) {
        Journal::remove(&journal_path)?;
        return Err(e);
    }
    fsx::sync_parent(&layout.partition_dir())?;
    fsx::sync_parent(&target.dir)?;
    drop(table_lock);
    phase("displace");
    recover::finish_swap(&j)?;
    super::trail::append(
        layout,
        &super::trail::Entry {
            action: "rollback",
            version: &restore.version,
            displaced: Some(&current.version),
        },
    )?;
    phase("commit");
    Journal::remove(&journal_path)?;
    phase("done");
    Ok(restore.version)
}
