//! `dqgate publish`: the audit, then an atomic swap into a Hive table or one
//! commit into a Delta table; the outcome reported on stderr (and in JUnit).

use std::path::PathBuf;
use std::time::Instant;

use super::args::{AuditArgs, ColorWhen, Format};
use super::check::{current_version, past_runs, staged_location, timing};
use super::{delta_root, emit, engine_options, print_stdout, reach_engine};
use crate::audit::{self, Published, RuleSource};
use crate::error::Error;
use crate::exec::remote::is_url;
use crate::publish::{PublishOptions, PublishOutcome, Table};
use crate::runkey::RunKey;
use crate::verdict::{junit, Verdict};

/// Prepares the audit of a `publish`, which always needs a run key.
pub(super) async fn prepare_publish(a: &AuditArgs) -> Result<audit::Prepared, Error> {
    audit::prepare(
        RuleSource::read(&a.rules)?,
        &a.staged,
        &a.partition,
        true,
        &engine_options(a)?,
    )
    .await
    .and_then(|prepared| reach_engine(a).map(|()| prepared))
}

/// A Hive publish's `--table`: never a Delta table (a Hive swap of its
/// directories would break it), never an object store (no rename there).
pub(super) fn hive_publish_table(root: &std::path::Path) -> Result<(), Error> {
    match root.to_str().filter(|s| is_url(s)) {
        None if crate::publish::delta::is_delta(root) => Err(Error::Usage(format!(
            "`{}` is a Delta table: publish to it with --target delta (or without --target), never as a Hive table",
            root.display()
        ))),
        None => Ok(()),
        Some(url) => Err(refuse_remote_publish(url)),
    }
}

pub(super) fn refuse_remote_publish(url: &str) -> Error {
    Error::Usage(format!(
        "cannot publish with `{url}`: a plain directory on an object store cannot be swapped atomically \
         (there is no rename), and dqgate never degrades to copy-and-delete; publish into a Delta Lake table \
         instead (`--target delta`: one atomic, conditional commit), or stage and publish on a local file system"
    ))
}

pub(super) async fn publish(a: AuditArgs, root: PathBuf, keep: usize) -> Result<u8, Error> {
    let started = Instant::now();
    if let Some(url) = a.staged.to_str().filter(|s| is_url(s)) {
        return Err(refuse_remote_publish(url));
    }
    hive_publish_table(&root)?;
    let table = Table::open(&root)?;
    let mut prepared = prepare_publish(&a).await?;
    prepared.table = Some(audit::PublishedTable::Hive(root.clone()));
    let published = current_version(
        prepared.table.as_ref().expect("just set"),
        &prepared.run_key,
    )
    .await?;
    let audited_against = match &published {
        Published::Version { fingerprint, .. } => Some(fingerprint.clone()),
        _ => None,
    };
    let past = past_runs(&prepared).await?;
    let verdict = prepared.run_with(&published, past.as_ref()).await?;
    let Some(passed) = gate(verdict, (a.format, a.color), &prepared, started) else {
        return Ok(1);
    };
    let opts = PublishOptions {
        keep_versions: keep,
    };
    let outcome = table.publish(
        &prepared.run_key,
        &a.staged,
        &passed,
        audited_against.as_deref(),
        &opts,
    );
    finish_publish(outcome, &passed, a.format, &prepared.run_key)
}

/// Prints the verdict (JUnit waits for the publish outcome) and timings;
/// the passed verdict, or `None` when it failed (exit 1).
pub(super) fn gate(
    verdict: Verdict,
    (format, color): (Format, ColorWhen),
    prepared: &audit::Prepared,
    started: Instant,
) -> Option<crate::verdict::PassedVerdict> {
    // JUnit is one XML document: a publish error after a passing verdict
    // becomes an <error> testcase inside it, so it is printed afterwards.
    if format != Format::Junit || !verdict.passed() {
        emit(&verdict, format, color);
    }
    timing(prepared, started);
    match verdict.into_passed() {
        Ok(p) => Some(p),
        Err(_) => {
            eprintln!("dqgate: verdict failed; nothing was published");
            None
        }
    }
}

/// Reports a publish outcome (on stderr; in the JUnit document too).
pub(super) fn finish_publish(
    outcome: Result<PublishOutcome, crate::publish::PublishError>,
    passed: &crate::verdict::PassedVerdict,
    format: Format,
    key: &RunKey,
) -> Result<u8, Error> {
    let junit = format == Format::Junit;
    if junit {
        let error = outcome.as_ref().err().map(|e| e.to_string());
        print_stdout(&junit::render_with_error(passed, error.as_deref()));
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) if junit => {
            eprintln!("dqgate: error: {e}");
            return Ok(e.exit_code());
        }
        Err(e) => return Err(e.into()),
    };
    match outcome {
        PublishOutcome::Published { version, displaced } => {
            let shown = displaced.map_or(String::new(), |d| format!(", displacing {d}"));
            eprintln!(
                "dqgate: published {} as version {version}{shown}",
                key.rel_dir()
            );
        }
        PublishOutcome::AlreadyPublished { version } => {
            eprintln!(
                "dqgate: already published: {} is version {version} with the same files; nothing changed",
                key.rel_dir()
            );
        }
    }
    Ok(0)
}

/// `publish --target delta`: the audit, then one Delta commit (see
/// `publish::delta`), on a local file system or an object store; the staged
/// files may be on either. The published side of the rules (`published.*`,
/// `history(N)`, `schema matches published`, `across published`) is read
/// from the table's current snapshot.
pub(super) async fn publish_delta(a: AuditArgs, table_arg: PathBuf) -> Result<u8, Error> {
    use crate::publish::delta;
    let started = Instant::now();
    let root = delta_root(&table_arg, &a.storage_option)?;
    if root.occupied().await? && !root.has_log().await? {
        return Err(Error::Usage(format!(
            "`{}` is neither empty nor a Delta table (no `_delta_log/`): a Delta table is created in a new or empty location, \
             never over a Hive table's partitions",
            root.show()
        )));
    }
    let mut prepared = audit::prepare_at(
        RuleSource::read(&a.rules)?,
        &staged_location(&a.staged, Some(table_arg.as_path()), &a.storage_option)?,
        &a.partition,
        true,
        &engine_options(&a)?,
    )
    .await?;
    reach_engine(&a)?;
    // The partition's txn before anything is read: the commit must find it
    // unchanged (the snapshot read next is at least as new).
    let audited_against = delta::current_txn(&root, &prepared.run_key).await?;
    let snapshot = delta::Snapshot::load(root.clone(), &prepared.checked.partitioned_by).await?;
    prepared.table = Some(audit::PublishedTable::Delta(snapshot));
    let published = current_version(
        prepared.table.as_ref().expect("just set"),
        &prepared.run_key,
    )
    .await?;
    let past = past_runs(&prepared).await?;
    let verdict = prepared.run_with(&published, past.as_ref()).await?;
    let Some(passed) = gate(verdict, (a.format, a.color), &prepared, started) else {
        return Ok(1);
    };
    let outcome = delta::publish(
        &root,
        &prepared.run_key,
        &prepared.checked.partitioned_by,
        &prepared.input,
        &passed,
        audited_against,
    )
    .await;
    finish_publish(outcome, &passed, a.format, &prepared.run_key)
}
