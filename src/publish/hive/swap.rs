//! `publish`: plan the swap of an audited staged directory into the
//! partition, then execute it step by step under the partition lock.
//!
//! Execution, each step durable before the next:
//!
//! 1. `journal`: write the intent (versions, renames, kept destination).
//! 2. `rename`: give each staged data file its versioned name, in the staged
//!    directory (outside ROOT), and fsync the directories.
//! 3. `fsync`: fsync every data file.
//! 4. `index`: write the key indexes of the version (see `keyindex`), each
//!    durably, beside the renamed files.
//!    `record`: write `_dqgate_audit.json` (temp name, fsync, rename, fsync),
//!    which lists them.
//! 5. `recheck`: fingerprint the renamed files under their staged names; it
//!    must still be the audited fingerprint, and no other `.parquet` file may
//!    have appeared. Otherwise undo steps 2–4 and exit 4. Then remove the
//!    writers' by-products (`_SUCCESS`, `.crc` sidecars, see `byproducts`),
//!    so the partition holds only the data files and the record.
//! 6. `validate`: take the table lock (exclusive when the audit read other
//!    partitions, else shared; see `lock::TableLock`) and, for an audit that
//!    read other partitions, check that its read set is still the table's
//!    state (`readset`). Otherwise undo steps 2–4 and exit 4.
//!    `swap`: `RENAME_EXCHANGE` staged ↔ partition (`RENAME_NOREPLACE` for a
//!    first publish), then fsync both parents, and release the table lock.
//!    This is the commit point.
//! 7. `displace`: the old version, now at the staged path, is moved whole
//!    into the kept area beside ROOT (see `kept`).
//! 8. `prune`: keep `keep_versions` displaced versions.
//! 9. `commit`: remove the journal.
//!
//! A kill before 6 leaves the old version published and the staged directory
//! recoverable (the journal lists the renames to undo); a kill after 6 leaves
//! the new version published and recovery finishes 7–9. See `recover`.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::byproducts;
use super::journal::{Journal, Op};
use super::kept;
use super::layout::{generation, published_name, version_id, Layout};
use super::lock::{PartitionLock, TableLock, TableMode};
use super::recover;
use crate::keyindex::Built;
use crate::publish::error::{IoContext, PublishError};
use crate::publish::fsx::{self, phase};
use crate::publish::readset::ReadSet;
use crate::publish::record::{self, Record};
use crate::publish::{PublishOptions, PublishOutcome};
use crate::staged::{fingerprint_dir, fingerprint_of, list_parquet_files};
use crate::verdict::json::{PublishedFile, PublishedManifest};
use crate::verdict::PassedVerdict;

/// What a publish will do, computed before any side effect.
#[derive(Debug, Clone)]
pub(crate) struct PublishPlan {
    pub journal: Journal,
    pub manifest: PublishedManifest,
    /// Writers' by-products in the staged directory, removed before the swap.
    pub byproducts: Vec<PathBuf>,
}

/// Runs a publish: preflight, lock, recover leftovers, compare-and-swap
/// checks, plan, execute.
pub(crate) fn publish(
    layout: &Layout,
    staged: &Path,
    passed: &PassedVerdict,
    audited_against: Option<&str>,
    read: (&ReadSet, &[Built]),
    opts: &PublishOptions,
) -> Result<PublishOutcome, PublishError> {
    let staged = preflight(layout, staged)?;
    phase("lock");
    let _lock = PartitionLock::acquire(&layout.lock_path(), &layout.rel)?;
    recover::recover_partition(layout)?;
    let current = layout.current_record()?;
    let found = current.as_ref().map(|r| r.fingerprint.clone());
    if found.as_deref() != audited_against {
        return Err(PublishError::PublishedChanged {
            expected: audited_against.map(str::to_string),
            found,
        });
    }
    let audited = &passed.input.fingerprint;
    if let Some(cur) = current.as_ref().filter(|c| &c.fingerprint == audited) {
        return Ok(PublishOutcome::AlreadyPublished {
            version: cur.version.clone(),
        });
    }
    let now = fingerprint_dir(&staged)?;
    if &now != audited {
        return Err(PublishError::StagedChanged {
            audited: audited.clone(),
            now,
        });
    }
    let plan = plan(layout, &staged, current.as_ref(), audited)?;
    execute(layout, &plan, passed, read, current.is_some(), opts)
}

/// Step 6's gate: the table lock, and the read set validated under it. The
/// lock is released when the returned guard drops, after the swap.
fn validate(layout: &Layout, read: &ReadSet) -> Result<TableLock, PublishError> {
    let mode = if read.reads_table() {
        TableMode::Exclusive
    } else {
        TableMode::Shared
    };
    let lock = TableLock::acquire(&layout.table_lock_path(), mode)?;
    if read.reads_table() {
        phase("validate");
        let keys: Vec<String> = layout
            .rel
            .split('/')
            .map(|p| p.split_once('=').map_or(p, |(k, _)| k).to_string())
            .collect();
        let now = super::snapshot::HiveSnapshot::read(&layout.root, &keys)?.versions(&layout.rel);
        phase("compare");
        if let Some(detail) = read.changed(&now) {
            return Err(PublishError::ReadSetChanged {
                reads: read.reads.join("; "),
                detail,
            });
        }
    }
    Ok(lock)
}

/// Checks that need no lock: the staged directory exists, is not inside the
/// table's published or engine paths, and is on ROOT's file system, as is
/// the kept-versions area beside ROOT.
fn preflight(layout: &Layout, staged: &Path) -> Result<PathBuf, PublishError> {
    let staged = staged
        .canonicalize()
        .map_err(|_| crate::staged::InputError::MissingDir(staged.display().to_string()))?;
    if !staged.is_dir() {
        return Err(crate::staged::InputError::NotADir(staged.display().to_string()).into());
    }
    fsx::create_dirs(&layout.root)?;
    let root = layout
        .root
        .canonicalize()
        .ctx("cannot resolve", &layout.root)?;
    // Staged files never live under ROOT (readers globbing ROOT would see
    // them, and another partition's files would be taken away from it), nor
    // in the kept-versions area, and the staged directory must not hold ROOT.
    let state = super::layout::state_dir(&root);
    if staged.starts_with(&root)
        || root.starts_with(&staged)
        || staged.starts_with(&state)
        || state.starts_with(&staged)
    {
        return Err(PublishError::Refused(format!(
            "the staged directory `{}` overlaps the table root `{}` or its kept versions `{}`: stage outside the table",
            staged.display(),
            root.display(),
            state.display()
        )));
    }
    let dev = fsx::device(&root)?;
    if fsx::device(&staged)? != dev {
        return Err(PublishError::OtherFileSystem {
            staged: staged.display().to_string(),
            root: root.display().to_string(),
        });
    }
    fsx::create_dirs(&state)?;
    if fsx::device(&state)? != dev {
        return Err(PublishError::OtherFileSystem {
            staged: state.display().to_string(),
            root: root.display().to_string(),
        });
    }
    Ok(staged)
}

/// Computes the new version, the renames and the manifest. No side effects.
pub(crate) fn plan(
    layout: &Layout,
    staged: &Path,
    current: Option<&Record>,
    fingerprint: &str,
) -> Result<PublishPlan, PublishError> {
    let files = list_parquet_files(staged)?;
    let unpublishable = |detail: String| PublishError::UnpublishableStaged {
        staged: staged.display().to_string(),
        detail,
    };
    let listed: BTreeSet<PathBuf> = files.iter().map(|(_, p)| p.clone()).collect();
    if let Some(hidden) = kept::all_parquet_files(staged)?
        .into_iter()
        .find(|p| !listed.contains(p))
    {
        return Err(unpublishable(format!(
            "`{}` ends in `.parquet` but is hidden (`_` or `.`), so it was not audited yet would be published",
            hidden.display()
        )));
    }
    let kept = kept::list(layout)?;
    let generation = current
        .and_then(|c| generation(&c.version))
        .into_iter()
        .chain(kept.iter().filter_map(|k| generation(&k.version)))
        .max()
        .unwrap_or(0)
        + 1;
    let version = version_id(generation, fingerprint);
    let mut renames = Vec::new();
    let mut published = Vec::new();
    for (rel, abs) in &files {
        let name = published_name(rel, &version);
        if staged.join(&name).exists() {
            return Err(unpublishable(format!(
                "`{name}` already exists; it is the name `{rel}` would be published under"
            )));
        }
        let bytes = fs::metadata(abs).ctx("cannot stat", abs)?.len();
        published.push(PublishedFile {
            path: name.clone(),
            staged_path: rel.clone(),
            bytes,
        });
        renames.push((rel.clone(), name));
    }
    published.sort_by(|a, b| a.path.cmp(&b.path));
    let seq = kept.last().map_or(1, |k| k.seq + 1);
    let journal = Journal {
        op: Op::Publish,
        partition: layout.rel.clone(),
        swap_dir: staged.to_path_buf(),
        version: version.clone(),
        previous: current.map(|c| c.version.clone()),
        renames,
        kept_from: None,
        displaced_to: current.map(|c| layout.kept_dir(seq, &c.version)),
    };
    Ok(PublishPlan {
        journal,
        manifest: PublishedManifest {
            version,
            files: published,
            key_indexes: Vec::new(),
        },
        byproducts: byproducts::list(staged)?,
    })
}

fn execute(
    layout: &Layout,
    plan: &PublishPlan,
    passed: &PassedVerdict,
    (read, indexes): (&ReadSet, &[Built]),
    replace: bool,
    opts: &PublishOptions,
) -> Result<PublishOutcome, PublishError> {
    let j = &plan.journal;
    let journal_path = layout.journal_path();
    phase("journal");
    j.write(&journal_path)?;
    let gate = prepare(plan, passed, read, indexes).and_then(|()| validate(layout, read));
    let table_lock = match gate {
        Ok(lock) => lock,
        Err(e) => {
            recover::undo_staging(j)?;
            Journal::remove(&journal_path)?;
            return Err(e);
        }
    };
    phase("swap");
    let partition = layout.partition_dir();
    if let Some(parent) = partition.parent() {
        fsx::create_dirs(parent)?;
    }
    let swapped = if replace {
        fsx::exchange(&j.swap_dir, &partition)
    } else {
        fsx::rename_noreplace(&j.swap_dir, &partition)
    };
    if let Err(e) = swapped {
        recover::undo_staging(j)?;
        Journal::remove(&journal_path)?;
        return Err(match e {
            PublishError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                PublishError::PublishedChanged {
                    expected: None,
                    found: Some("a directory created outside dqgate".into()),
                }
            }
            e => e,
        });
    }
    fsx::sync_parent(&partition)?;
    fsx::sync_parent(&j.swap_dir)?;
    drop(table_lock);
    phase("displace");
    recover::finish_swap(j)?;
    super::trail::append(
        layout,
        &super::trail::Entry {
            action: "publish",
            version: &j.version,
            displaced: j.previous.as_deref(),
        },
    )?;
    phase("prune");
    kept::prune(layout, opts.keep_versions)?;
    phase("commit");
    Journal::remove(&journal_path)?;
    phase("done");
    Ok(PublishOutcome::Published {
        version: j.version.clone(),
        displaced: j.previous.clone(),
    })
}

/// Steps 2–5: renames, fsyncs, record, recheck, by-products (all inside the staged
/// directory, invisible to readers of ROOT).
fn prepare(
    plan: &PublishPlan,
    passed: &PassedVerdict,
    read: &ReadSet,
    indexes: &[Built],
) -> Result<(), PublishError> {
    let j = &plan.journal;
    let dir = &j.swap_dir;
    phase("rename");
    let mut dirs = BTreeSet::new();
    for (from, to) in &j.renames {
        let from = dir.join(from);
        fs::rename(&from, dir.join(to)).ctx("cannot rename", &from)?;
        dirs.insert(from.parent().unwrap_or(dir).to_path_buf());
    }
    for d in &dirs {
        fsx::sync_dir(d)?;
    }
    phase("fsync");
    for (_, to) in &j.renames {
        fsx::sync_file(&dir.join(to))?;
    }
    phase("index");
    // The version's directory is its own: indexes an interrupted publish
    // left in it go first.
    crate::publish::indexes::remove(dir)?;
    let manifest = PublishedManifest {
        key_indexes: crate::publish::indexes::write(
            dir,
            &j.partition,
            &plan.manifest.files,
            indexes,
        )?,
        ..plan.manifest.clone()
    };
    phase("record");
    record::write(dir, passed.verdict(), &manifest, read.to_json().as_ref())?;
    phase("recheck");
    recheck(plan, passed)?;
    byproducts::remove(&plan.byproducts)
}

/// The files about to be swapped in are exactly the audited ones.
fn recheck(plan: &PublishPlan, passed: &PassedVerdict) -> Result<(), PublishError> {
    let dir = &plan.journal.swap_dir;
    let mut by_staged: Vec<(&str, PathBuf)> = plan
        .manifest
        .files
        .iter()
        .map(|f| (f.staged_path.as_str(), dir.join(&f.path)))
        .collect();
    by_staged.sort_by(|a, b| a.0.cmp(b.0));
    let now = fingerprint_of(by_staged.iter().map(|(n, p)| (*n, p.as_path())))?;
    let expected: BTreeSet<PathBuf> = by_staged.iter().map(|(_, p)| p.clone()).collect();
    let present: BTreeSet<PathBuf> = kept::all_parquet_files(dir)?.into_iter().collect();
    if now != passed.input.fingerprint || present != expected {
        return Err(PublishError::StagedChanged {
            audited: passed.input.fingerprint.clone(),
            now: if present != expected {
                format!("{now} with files added or removed")
            } else {
                now
            },
        });
    }
    Ok(())
}
