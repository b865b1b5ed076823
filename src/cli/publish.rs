//! `dqgate publish`: the audit, then an atomic swap into a Hive table or one
//! commit into a Delta table; the outcome reported on stderr (and in JUnit).

use std::path::PathBuf;
use std::time::Instant;

use super::args::{AuditArgs, ColorWhen, Format};
use super::check::{current_version, hive_snapshot, past_runs, staged_location, timing};
use super::{delta_root, emit, engine_options, print_stdout, reach_engine};
use crate::audit::{self, Published, RuleSource};
use crate::error::Error;
use crate::publish::{PublishOptions, PublishOutcome, Table};
use crate::runkey::RunKey;
use crate::staged::remote::is_url;
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

pub(super) async fn publish(
    a: AuditArgs,
    root: PathBuf,
    keep: usize,
    reaudits: usize,
) -> Result<u8, Error> {
    let started = Instant::now();
    if let Some(url) = a.staged.to_str().filter(|s| is_url(s)) {
        return Err(refuse_remote_publish(url));
    }
    hive_publish_table(&root)?;
    let failed = super::failed_rows::options(&a, Some(&root))?;
    let table = Table::open(&root)?;
    // A publish of these staged files killed before its swap left them
    // under their versioned names: put them back before they are audited.
    for done in table.recover_staged(&a.staged)? {
        eprintln!("dqgate: {done}");
    }
    let mut prepared = prepare_publish(&a).await?;
    let opts = PublishOptions {
        keep_versions: keep,
    };
    let mut attempt = 0;
    loop {
        let snapshot = audit::PublishedTable::Hive(hive_snapshot(&table, &prepared)?);
        let output = (a.format, a.color);
        let audit = match audit_once(
            &mut prepared,
            (snapshot, failed.as_ref()),
            output,
            started,
            (attempt, reaudits),
        )
        .await?
        {
            Attempt::Again => {
                attempt += 1;
                continue;
            }
            Attempt::Failed => None,
            Attempt::Passed(audited) => Some(*audited),
        };
        let Some(Audited {
            passed,
            published,
            read,
        }) = audit
        else {
            return Ok(1);
        };
        let audited_against = match &published {
            Published::Version { fingerprint, .. } => Some(fingerprint.clone()),
            _ => None,
        };
        let outcome = table.publish_read(
            &prepared.run_key,
            &a.staged,
            &passed,
            audited_against.as_deref(),
            &read,
            &opts,
        );
        if !again(outcome.as_ref().err(), attempt, reaudits) {
            return finish_publish(outcome, &passed, (a.format, a.color), &prepared.run_key);
        }
        attempt += 1;
    }
}

/// A passed audit of a publish: its verdict, the run key's published
/// version it compared against, and what it read of other partitions.
struct Audited {
    passed: crate::verdict::PassedVerdict,
    published: Published,
    read: crate::publish::ReadSet,
}

/// How one audit of a publish ended.
enum Attempt {
    Passed(Box<Audited>),
    /// The verdict failed (it was printed: exit 1).
    Failed,
    /// A partition it read was replaced meanwhile: audit again.
    Again,
}

/// One audit of a publish against `snapshot` (the table as read for this
/// attempt); `(attempt, reaudits)` say whether a table that changed under
/// it may be audited again.
async fn audit_once(
    prepared: &mut audit::Prepared,
    read: (audit::PublishedTable, Option<&crate::failed::Options>),
    output: (Format, ColorWhen),
    started: Instant,
    (attempt, reaudits): (usize, usize),
) -> Result<Attempt, Error> {
    match audit_with(prepared, read, output, started, attempt).await {
        Err(Error::Publish(e)) if again(Some(&e), attempt, reaudits) => Ok(Attempt::Again),
        Err(e) => Err(e),
        Ok(None) => Ok(Attempt::Failed),
        Ok(Some(audited)) => Ok(Attempt::Passed(Box::new(audited))),
    }
}

async fn audit_with(
    prepared: &mut audit::Prepared,
    (snapshot, failed): (audit::PublishedTable, Option<&crate::failed::Options>),
    output: (Format, ColorWhen),
    started: Instant,
    attempt: usize,
) -> Result<Option<Audited>, Error> {
    let published = current_version(&snapshot, &prepared.run_key).await?;
    prepared.table = Some(snapshot);
    let past = past_runs(prepared).await?;
    let mut verdict = prepared.run_with(&published, past.as_ref()).await?;
    super::failed_rows::write(prepared, &mut verdict, failed).await;
    let read = prepared.read_set(&published);
    let Some(passed) = gate(verdict, output, prepared, started) else {
        return Ok(None);
    };
    if attempt == 0 {
        crate::hooks::barrier();
    }
    Ok(Some(Audited {
        passed,
        published,
        read,
    }))
}

/// Whether a publish whose table changed under its audit audits again: a
/// conflict on the read set (found at the swap or commit, or while the audit
/// read a partition that was replaced meanwhile), with re-audits left (says
/// so on stderr).
fn again(error: Option<&crate::publish::PublishError>, attempt: usize, reaudits: usize) -> bool {
    let Some(crate::publish::PublishError::ReadSetChanged { detail, .. }) = error else {
        return false;
    };
    if attempt >= reaudits {
        eprintln!(
            "dqgate: the table kept changing under the audit; giving up after {} audit(s) (--reaudits {reaudits})",
            attempt + 1
        );
        return false;
    }
    eprintln!(
        "dqgate: the table changed since the audit ({detail}); auditing again against the new state ({}/{reaudits})",
        attempt + 1
    );
    true
}

/// Prints a failed verdict (a passed one is printed with the publish
/// outcome, once, after the last audit) and the timings; the passed verdict,
/// or `None` when it failed (exit 1).
pub(super) fn gate(
    verdict: Verdict,
    (format, color): (Format, ColorWhen),
    prepared: &audit::Prepared,
    started: Instant,
) -> Option<crate::verdict::PassedVerdict> {
    if !verdict.passed() {
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
    (format, color): (Format, ColorWhen),
    key: &RunKey,
) -> Result<u8, Error> {
    let junit = format == Format::Junit;
    if junit {
        // JUnit is one XML document: a publish error after a passing
        // verdict becomes an <error> testcase inside it.
        let error = outcome.as_ref().err().map(|e| e.to_string());
        print_stdout(&junit::render_with_error(passed, error.as_deref()));
    } else {
        emit(passed.verdict(), format, color);
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
pub(super) async fn publish_delta(
    a: AuditArgs,
    table_arg: PathBuf,
    reaudits: usize,
) -> Result<u8, Error> {
    use crate::publish::delta;
    let started = Instant::now();
    let failed = super::failed_rows::options(&a, Some(&table_arg))?;
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
    let mut attempt = 0;
    loop {
        // The partition's txn before anything is read: the commit must find
        // it unchanged (the snapshot read next is at least as new).
        let audited_against = delta::current_txn(&root, &prepared.run_key).await?;
        let snapshot = audit::PublishedTable::Delta(
            delta::Snapshot::load(root.clone(), &prepared.checked.partitioned_by).await?,
        );
        let output = (a.format, a.color);
        let audit = match audit_once(
            &mut prepared,
            (snapshot, failed.as_ref()),
            output,
            started,
            (attempt, reaudits),
        )
        .await?
        {
            Attempt::Again => {
                attempt += 1;
                continue;
            }
            Attempt::Failed => None,
            Attempt::Passed(audited) => Some(*audited),
        };
        let Some(Audited { passed, read, .. }) = audit else {
            return Ok(1);
        };
        let outcome = delta::publish(
            &root,
            &prepared.run_key,
            &prepared.checked.partitioned_by,
            &prepared.input,
            &passed,
            audited_against,
            &read,
        )
        .await;
        if !again(outcome.as_ref().err(), attempt, reaudits) {
            return finish_publish(outcome, &passed, (a.format, a.color), &prepared.run_key);
        }
        attempt += 1;
    }
}
