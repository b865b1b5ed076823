//! `dqgate publish`: the audit, then an atomic swap into a Hive table or one
//! commit into a Delta table (`audit::publish::run`); what happens printed
//! as it happens, the outcome on stderr (and in JUnit).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::args::{AuditArgs, ColorWhen, Format};
use super::check::timing;
use super::options::{engine_options, reach_engine};
use super::output::{emit, print_stdout};
use crate::audit::publish::{Observer, Options, Outcome};
use crate::audit::{self, Prepared, RuleSource, Telemetry};
use crate::error::Error;
use crate::publish::{PublishOptions, PublishOutcome};
use crate::runkey::RunKey;
use crate::verdict::{junit, Verdict};

/// `publish`: into the target `--target` names, else the one the table is
/// (a Delta table: a directory with `_delta_log/`, or any object-store URL;
/// else a Hive table root).
pub(super) async fn publish(
    a: AuditArgs,
    root: PathBuf,
    keep: usize,
    target: Option<String>,
    reaudits: usize,
) -> Result<u8, Error> {
    let started = Instant::now();
    let kind = crate::publish::choose(target.as_deref(), &root);
    kind.refuse_publish(&root, &a.staged)?;
    let failed = super::failed_rows::options(&a, Some(&root))?;
    let opts = PublishOptions {
        keep_versions: keep,
    };
    let target = kind.open(&root, &a.storage_option, Some(&opts)).await?;
    // A publish of these staged files killed before its swap may have left
    // them under their versioned names: put them back before they are audited.
    for done in target.recover_staged(&a.staged)? {
        eprintln!("dqgate: {done}");
    }
    let mut prepared = audit::prepare_at(
        RuleSource::read(&a.rules)?,
        &kind.staged_location(&a.staged, &root, &a.storage_option)?,
        &a.partition,
        true,
        &engine_options(&a)?,
    )
    .await?;
    reach_engine(&a)?;
    let mut shown = Shown {
        output: (a.format, a.color),
        started,
    };
    let options = Options {
        reaudits,
        failed_rows: failed.as_ref(),
    };
    match audit::publish::run(&mut prepared, target.as_ref(), options, &mut shown).await? {
        Outcome::Failed => Ok(1),
        Outcome::Passed { passed, outcome } => {
            finish_publish(outcome, &passed, (a.format, a.color), &prepared.run_key)
        }
    }
}

/// What a publish prints while it runs: the failed rows written, a failed
/// verdict (a passed one is printed with the publish outcome, once, after
/// the last audit), the timing line of each audit, and the table changing
/// under the audit.
struct Shown {
    output: (Format, ColorWhen),
    started: Instant,
}

impl Observer for Shown {
    fn failed_rows(
        &mut self,
        opts: &crate::failed::Options,
        written: &crate::failed::Written,
        took: Duration,
    ) {
        super::failed_rows::report(opts, written, took);
    }

    fn audited(&mut self, prepared: &Prepared, verdict: &Verdict, telemetry: &Telemetry) {
        let (format, color) = self.output;
        if !verdict.passed() {
            emit(verdict, format, color);
        }
        timing(prepared, telemetry, self.started);
        if !verdict.passed() {
            eprintln!("dqgate: verdict failed; nothing was published");
        }
    }

    fn changed(&mut self, note: &str) {
        eprintln!("dqgate: {note}");
    }
}

/// Reports a publish outcome (on stderr; in the JUnit document too).
fn finish_publish(
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
