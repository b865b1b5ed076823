//! The Hive target: a passed verdict and a staged directory swapped
//! atomically into `ROOT/k=v`; `verify`, `rollback` and `gc` of what was
//! published.
//!
//! This is the "publish" of write-audit-publish (`spec/publish.md`). The
//! published partition `ROOT/k1=v1[/k2=v2]` is a real directory holding one
//! complete version: its data files, named uniquely per version
//! (`part-00000.parquet` is published as `part-00000.v3-1be0c3a9.parquet`,
//! see `layout`), and `_dqgate_audit.json`, the verdict plus a manifest of
//! those files; writers' by-products such as Spark's `_SUCCESS` and `.crc`
//! sidecars are left out (`byproducts`). A publish, under an exclusive per-partition `flock`
//! (`lock`), renames the staged files to their versioned names and writes
//! the record *in the staged directory*, fsyncs everything, re-checks the
//! fingerprint, and swaps the staged directory with the partition in one
//! `renameat2(RENAME_EXCHANGE)` (or `RENAME_NOREPLACE` for a first publish)
//! (`swap`), holding the table lock around the swap: shared, or exclusive
//! when the audit read other partitions, whose read set (`readset`) is then
//! validated under it, so that the verdict still holds at the swap. The displaced version, which the exchange leaves at the staged
//! path, is moved whole into a kept-versions area beside ROOT,
//! `ROOT/../.ROOTNAME.dqgate/versions/` (`kept`; `layout` says why not
//! under ROOT), so that no glob of `ROOT/**/*.parquet` ever matches anything
//! but published files. Locks and journals live under `ROOT/_dqgate/`.
//!
//! What readers see:
//!
//! - A reader that resolves the partition once (opens the directory, or reads
//!   the record's file list and then those files) sees one version, always:
//!   the directory it resolved is renamed whole, never edited in place.
//! - A reader that lists `ROOT/**/*.parquet` and then opens files by path may
//!   find a file gone (its version was swapped out: retry), but never rows of
//!   two versions, since no new file name equals an old one.
//! - Displaced versions are outside every glob of ROOT and keep their file
//!   names, so a reader holding the directory open can finish reading, and
//!   `rollback` can swap one back.
//!
//! Every swap is journalled (`journal`) before its first side effect, and
//! every publish, rollback and `gc` first finishes or undoes a journalled
//! swap left by a killed process (`recover`): the partition is the old or
//! the new version, complete, at every instant, and a leftover is never
//! published.
//!
//! Exit codes: see [`crate::publish::PublishError::exit_code`]. A partition directory without
//! a readable record was not written by dqgate: `current`, `publish`,
//! `verify` and `rollback` refuse it with exit 3.

mod byproducts;
mod history;
mod journal;
mod kept;
pub mod layout;
mod lock;
mod recover;
mod rollback;
mod snapshot;
mod swap;
mod table;
mod target;
mod trail;
mod verify;

pub use snapshot::HiveSnapshot;
pub use table::Table;
pub use target::{Hive, Kind};
