//! The per-partition advisory lock: one publish, rollback or recovery of a
//! partition at a time.
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

use rustix::fs::{flock, FlockOperation};
use rustix::io::Errno;

use super::error::{IoContext, PublishError};
use super::fsx;

/// A held partition lock; released on drop.
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
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .ctx("cannot open the lock file", path)?;
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
