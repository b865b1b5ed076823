//! The advisory locks: the per-partition lock (one publish, rollback or
//! recovery of a partition at a time) and the table lock around swaps.
//!
//! The lock is `flock(LOCK_EX | LOCK_NB)` on
//! `ROOT/_dqgate/locks/<k1=v1>/<k2=v2>.lock`. The kernel releases it when the
//! holder dies, so a lock file left by a killed process is never stale as a
//! lock; `gc` still removes lock files of idle partitions. Because a lock file
//! may be unlinked by `gc`, a locker checks after `flock` that the path still
//! names the inode it locked, and retries otherwise.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{flock, FlockOperation};
use rustix::io::Errno;

use crate::publish::error::{IoContext, PublishError};
use crate::publish::fsx;

/// An exclusive `flock` on a partition's lock file, released on drop.
#[derive(Debug)]
pub(crate) struct PartitionLock {
    file: File,
    path: PathBuf,
}

impl PartitionLock {
    /// Takes the lock at `path` without waiting; `Busy` when another process
    /// holds it.
    pub(crate) fn acquire(path: &Path, partition: &str) -> Result<PartitionLock, PublishError> {
        if let Some(dir) = path.parent() {
            fsx::create_dirs(dir)?;
        }
        loop {
            let file = open_lock_file(path)?;
            match flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(e) if e == Errno::WOULDBLOCK || e == Errno::INTR => {
                    return Err(PublishError::Busy {
                        partition: partition.to_string(),
                    })
                }
                Err(e) => return Err(PublishError::io("cannot lock", path, e.into())),
            }
            let held = file.metadata().ctx("cannot stat", path)?;
            match fs::metadata(path) {
                Ok(now) if now.ino() == held.ino() && now.dev() == held.dev() => {
                    return Ok(PartitionLock {
                        file,
                        path: path.to_path_buf(),
                    })
                }
                _ => continue, // unlinked by gc between open and flock: retry
            }
        }
    }

    /// Removes the lock file while still holding the lock (used by `gc`).
    pub(crate) fn remove_file(self) -> Result<(), PublishError> {
        fsx::remove_file_if_exists(&self.path)?;
        Ok(())
    }
}

impl Drop for PartitionLock {
    /// Unlocks explicitly rather than by closing: a child process forked
    /// meanwhile (by a program embedding dqgate, or a test harness) shares the
    /// open file description until it execs, and closing our descriptor alone
    /// would leave the lock held by it.
    fn drop(&mut self) {
        let _ = flock(&self.file, FlockOperation::Unlock);
    }
}

/// Opens (creating it if need be) the lock file at `path`.
fn open_lock_file(path: &Path) -> Result<File, PublishError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .ctx("cannot open the lock file", path)
}

/// How long a swap waits for the table lock before it gives up (exit 4).
/// The lock is held only to validate a read set and swap (never across an
/// audit), so a wait this long means a stuck holder.
const TABLE_LOCK_WAIT: Duration = Duration::from_secs(60);

/// How the table lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableMode {
    /// A swap whose audit read only its own partition: any number at once.
    Shared,
    /// A swap whose audit read other partitions: alone, so that the table
    /// state it validates is still the state at its swap.
    Exclusive,
}

/// A held `flock` on `ROOT/_dqgate/table.lock`, released on drop.
///
/// Every swap that changes which version a partition shows (publish,
/// rollback) holds it from just before its swap until just after: shared
/// when its audit read only its own partition, exclusive when it validates a
/// read set. So a read set validated under the exclusive lock is still the
/// table's state at the swap, while publishes of single partitions still
/// swap concurrently. The lock file is never removed (`gc` leaves it), and
/// the kernel releases the lock of a killed holder.
#[derive(Debug)]
pub(crate) struct TableLock {
    file: File,
}

impl TableLock {
    /// Takes the table lock at `path` in `mode`, waiting (at most
    /// [`TABLE_LOCK_WAIT`]) while another swap holds it incompatibly.
    pub(crate) fn acquire(path: &Path, mode: TableMode) -> Result<TableLock, PublishError> {
        if let Some(dir) = path.parent() {
            fsx::create_dirs(dir)?;
        }
        let file = open_lock_file(path)?;
        let op = match mode {
            TableMode::Shared => FlockOperation::NonBlockingLockShared,
            TableMode::Exclusive => FlockOperation::NonBlockingLockExclusive,
        };
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match flock(&file, op) {
                Ok(()) => return Ok(TableLock { file }),
                Err(e) if e == Errno::WOULDBLOCK || e == Errno::INTR => {}
                Err(e) => return Err(PublishError::io("cannot lock", path, e.into())),
            }
            if started.elapsed() >= TABLE_LOCK_WAIT {
                return Err(PublishError::TableBusy {
                    lock: path.display().to_string(),
                    secs: TABLE_LOCK_WAIT.as_secs(),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

impl Drop for TableLock {
    /// Unlocks explicitly (see [`PartitionLock`]'s `Drop`).
    fn drop(&mut self) {
        let _ = flock(&self.file, FlockOperation::Unlock);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn shared_table_locks_coexist_and_an_exclusive_one_waits_for_them() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("_dqgate/table.lock");
        let a = TableLock::acquire(&path, TableMode::Shared).unwrap();
        let b = TableLock::acquire(&path, TableMode::Shared).unwrap();
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let path = path.clone();
            std::thread::spawn(move || {
                let lock = TableLock::acquire(&path, TableMode::Exclusive);
                tx.send(()).unwrap();
                lock.map(drop)
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(rx.try_recv().is_err(), "the exclusive lock waits");
        drop((a, b));
        waiter.join().unwrap().unwrap();
        assert!(rx.try_recv().is_ok());
    }
}
