//! `dqgate check`: audit the staged files and print the verdict; and what
//! `check` shares with `publish`: the staged location, the published table,
//! its current version and past runs, the timing line (and, with `-v`, a
//! line per key pass).

use std::path::PathBuf;
use std::time::Instant;

use super::args::AuditArgs;
use super::{delta_root, emit, engine_options, location, reach_engine};
use crate::audit::{self, Published, RuleSource};
use crate::error::Error;
use crate::publish::Table;
use crate::runkey::RunKey;
use crate::staged::remote::{is_url, Location};
use crate::verdict::human::count_of;

pub(super) async fn check(a: AuditArgs, table: Option<PathBuf>) -> Result<u8, Error> {
    let started = Instant::now();
    let failed = super::failed_rows::options(&a, table.as_deref())?;
    let mut prepared = audit::prepare_at(
        RuleSource::read(&a.rules)?,
        &staged_location(&a.staged, table.as_deref(), &a.storage_option)?,
        &a.partition,
        false,
        &engine_options(&a)?,
    )
    .await?;
    reach_engine(&a)?;
    if let Some(root) = &table {
        prepared.table = Some(published_table(root, &a.storage_option, &prepared).await?);
    }
    let published = match &prepared.table {
        None => Published::NotGiven,
        Some(t) => current_version(t, &prepared.run_key).await?,
    };
    let past = past_runs(&prepared).await?;
    let mut verdict = prepared.run_with(&published, past.as_ref()).await?;
    super::failed_rows::write(&prepared, &mut verdict, failed.as_ref()).await;
    emit(&verdict, a.format, a.color);
    timing(&prepared, started);
    Ok(if verdict.passed() { 0 } else { 1 })
}

/// `--staged` as a location. The `--storage-option`s belong to whichever
/// of `--staged` and `--table` is on an object store (both, when both are).
pub(super) fn staged_location(
    staged: &std::path::Path,
    table: Option<&std::path::Path>,
    options: &[String],
) -> Result<Location, Error> {
    let remote_table = table.and_then(|t| t.to_str()).is_some_and(is_url);
    let staged_remote = staged.to_str().is_some_and(is_url);
    location(
        staged,
        if remote_table && !staged_remote {
            &[]
        } else {
            options
        },
    )
}

/// `--table` as the audit reads it: a Hive table root, or a Delta table (a
/// directory with `_delta_log/`, or any object-store URL) read through its
/// current snapshot.
pub(super) async fn published_table(
    root: &std::path::Path,
    options: &[String],
    p: &audit::Prepared,
) -> Result<audit::PublishedTable, Error> {
    use crate::publish::delta;
    let keys = &p.checked.partitioned_by;
    if delta::is_delta_arg(root) {
        let root = delta_root(root, options)?;
        Ok(audit::PublishedTable::Delta(
            delta::Snapshot::load(root, keys).await?,
        ))
    } else {
        Ok(audit::PublishedTable::Hive(hive_snapshot(
            &Table::open(root)?,
            p,
        )?))
    }
}

/// A Hive table's partitions and records, read whole only when the rule
/// file may read other partitions (else only the root is known).
pub(super) fn hive_snapshot(
    table: &Table,
    p: &audit::Prepared,
) -> Result<crate::publish::HiveSnapshot, Error> {
    let keys: &[String] = if p.may_read_table() {
        &p.checked.partitioned_by
    } else {
        &[]
    };
    Ok(table.snapshot(keys)?)
}

/// The run key's published version in the table.
pub(super) async fn current_version(
    table: &audit::PublishedTable,
    key: &RunKey,
) -> Result<Published, Error> {
    Ok(match table {
        audit::PublishedTable::Hive(snapshot) => match Table::open(&snapshot.root)?.current(key)? {
            None => Published::Absent,
            Some(v) => Published::Version {
                source: audit::PartSource::Dir(v.dir),
                fingerprint: v.fingerprint,
            },
        },
        audit::PublishedTable::Delta(snapshot) => match snapshot.current(key).await? {
            None => Published::Absent,
            Some((files, fingerprint)) => Published::Version {
                source: audit::PartSource::Files {
                    root: snapshot.root.clone(),
                    files,
                },
                fingerprint,
            },
        },
    })
}

/// The table's published partitions, read only when a rule uses `history(N)`.
pub(super) async fn past_runs(
    p: &audit::Prepared,
) -> Result<Option<crate::verdict::history::PastRuns>, Error> {
    if !p.checked.uses_history() {
        return Ok(None);
    }
    Ok(match &p.table {
        None => None,
        Some(audit::PublishedTable::Hive(snapshot)) => Some(snapshot.past_runs()),
        Some(audit::PublishedTable::Delta(snapshot)) => Some(snapshot.past_runs().await),
    })
}

pub(super) fn timing(p: &audit::Prepared, started: Instant) {
    let spilled = p.spilled_bytes.load(std::sync::atomic::Ordering::Relaxed);
    let spill = if spilled > 0 {
        format!(
            ", spilled {:.1} MiB to disk",
            spilled as f64 / (1024.0 * 1024.0)
        )
    } else {
        String::new()
    };
    let remote = match &p.input.location {
        Location::Remote(r) => {
            let (gets, bytes) = r.store.reads();
            format!(
                " from {}, {gets} GET/HEAD request(s), {:.1} MiB read",
                r.url,
                bytes as f64 / (1024.0 * 1024.0)
            )
        }
        Location::Local(_) => String::new(),
    };
    eprintln!(
        "dqgate: audited {}, {}{remote} in {:.2} s ({}{spill})",
        count_of(p.input.files.len() as u64, "file", "files"),
        count_of(p.input.row_count(), "row", "rows"),
        started.elapsed().as_secs_f64(),
        count_of(p.plan.scans() as u64, "pass", "passes")
    );
    if !super::verbose() {
        return;
    }
    if let Ok(passes) = p.key_passes.lock() {
        for pass in passes.iter() {
            eprintln!("dqgate:   keys {pass}");
        }
    }
}
