//! The publish loop of write-audit-publish: audit the staged files against
//! a snapshot of the target, publish against that snapshot if the verdict
//! passed, and audit again when the table changed in what the audit read.
//!
//! [`run`] is the one call a command line or an embedder makes to publish;
//! what happens along the way (failed rows written, a verdict, the table
//! changing under the audit) is told to an [`Observer`] as it happens.

use std::time::{Duration, Instant};

use super::prepare::{Prepared, Published};
use super::run::Telemetry;
use crate::error::Error;
use crate::failed;
use crate::keyindex::Built;
use crate::plan::join::JoinPass;
use crate::publish::{PublishError, PublishOutcome, ReadSet, Request, Target};
use crate::verdict::{PassedVerdict, Verdict};

/// How a publish runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// How many times to audit again when the table changed under the
    /// audit (`--reaudits`).
    pub reaudits: usize,
    /// Where to write the rows of checks that did not hold (`--failed-rows`).
    pub failed_rows: Option<&'a failed::Options>,
}

/// What a publish tells its caller while it runs.
pub trait Observer {
    /// The failed rows of an audit were written (those that could be), in
    /// `took`.
    fn failed_rows(&mut self, opts: &failed::Options, written: &failed::Written, took: Duration);

    /// An audit ended with `verdict`, at the cost `telemetry` says, before
    /// anything was published.
    fn audited(&mut self, prepared: &Prepared, verdict: &Verdict, telemetry: &Telemetry);

    /// The table changed under the audit: `note` says whether it is audited
    /// again or the publish gives up.
    fn changed(&mut self, note: &str);
}

/// How a publish ended.
#[derive(Debug)]
pub enum Outcome {
    /// The verdict failed: nothing was published.
    Failed,
    /// The verdict passed, and the publish did what it says (or failed, and
    /// nothing was published).
    Passed {
        passed: Box<PassedVerdict>,
        outcome: Result<PublishOutcome, PublishError>,
    },
}

/// Audits `prepared` against the target and publishes it if it passes.
pub async fn run(
    prepared: &mut Prepared,
    target: &dyn Target,
    opts: Options<'_>,
    observer: &mut dyn Observer,
) -> Result<Outcome, Error> {
    let mut attempt = 0;
    loop {
        let snapshot = target.snapshot(prepared.read(true)).await?;
        prepared.table = Some(snapshot);
        let audited = match audit(prepared, opts, observer, attempt).await {
            Err(Error::Publish(e)) if again(Some(&e), attempt, opts.reaudits, observer) => {
                attempt += 1;
                continue;
            }
            Err(e) => return Err(e),
            Ok(None) => return Ok(Outcome::Failed),
            Ok(Some(audited)) => audited,
        };
        let (passed, published, read) = audited;
        let compared = match &published {
            Published::Version(current) => Some(current),
            _ => None,
        };
        let table = prepared.table.as_ref().expect("the snapshot just read");
        let indexes = match table.keeps_key_indexes() {
            true => key_indexes(prepared).await,
            false => Vec::new(),
        };
        let outcome = table
            .publish(Request {
                key: &prepared.run_key,
                partitioned_by: &prepared.checked.partitioned_by,
                staged: &prepared.input,
                passed: &passed,
                compared,
                read: &read,
                indexes: &indexes,
            })
            .await;
        if !again(outcome.as_ref().err(), attempt, opts.reaudits, observer) {
            return Ok(Outcome::Passed {
                passed: Box::new(passed),
                outcome,
            });
        }
        attempt += 1;
    }
}

/// One audit of a publish against the snapshot in `prepared.table`: the
/// passed verdict, the run key's version it compared with, and what it
/// read of other partitions; `None` when the verdict failed.
async fn audit(
    prepared: &mut Prepared,
    opts: Options<'_>,
    observer: &mut dyn Observer,
    attempt: usize,
) -> Result<Option<(PassedVerdict, Published, ReadSet)>, Error> {
    let published = prepared.published().await?;
    let past = prepared.past_runs().await?;
    let (mut verdict, telemetry) = prepared.run_with(&published, past.as_ref()).await?;
    if let Some(failed) = opts.failed_rows {
        let started = Instant::now();
        let written = prepared.write_failed_rows(&mut verdict, failed).await;
        observer.failed_rows(failed, &written, started.elapsed());
    }
    let read = prepared.read_set(&published);
    observer.audited(prepared, &verdict, &telemetry);
    let Ok(passed) = verdict.into_passed() else {
        return Ok(None);
    };
    if attempt == 0 {
        crate::hooks::barrier();
    }
    Ok(Some((passed, published, read)))
}

/// The key indexes of the version about to be published: one for the
/// columns of each `across published` check of the rule file, so that the
/// next audits read it instead of this partition's key columns. A key of a
/// type no index holds, or one the memory pool refuses, gets none (nor does
/// one whose staged files cannot be read now: the publish then fails on
/// its own check that they did not change).
async fn key_indexes(p: &Prepared) -> Vec<Built> {
    let mut out = Vec::new();
    for pass in &p.plan.joins {
        if let JoinPass::AcrossPublished(keys) = pass {
            if let Ok(Some(index)) =
                crate::exec::join::key_index(&p.ctx, &p.input, keys, p.plan.join_test_bits).await
            {
                out.push(index);
            }
        }
    }
    out
}

/// Whether a publish whose table changed under its audit audits again: a
/// conflict on the read set (found at the swap or commit, or while the audit
/// read a partition that was replaced meanwhile), with re-audits left.
fn again(
    error: Option<&PublishError>,
    attempt: usize,
    reaudits: usize,
    observer: &mut dyn Observer,
) -> bool {
    let Some(PublishError::ReadSetChanged { detail, .. }) = error else {
        return false;
    };
    if attempt >= reaudits {
        observer.changed(&format!(
            "the table kept changing under the audit; giving up after {} audit(s) (--reaudits {reaudits})",
            attempt + 1
        ));
        return false;
    }
    observer.changed(&format!(
        "the table changed since the audit ({detail}); auditing again against the new state ({}/{reaudits})",
        attempt + 1
    ));
    true
}
