//! `--failed-rows DIR` on `check` and `publish`: the directory validated
//! before anything is read, and the files written after the verdict, with
//! what could not be written reported on stderr.
//!
//! Decision: a DIR that cannot be written (read-only, full, not a
//! directory) does not change the verdict or the exit code. The verdict is
//! printed (naming only the files that were written, each complete), and
//! stderr says what failed. The audit's answer is the verdict; the rows are
//! a diagnosis of it.

use std::path::Path;

use super::args::AuditArgs;
use crate::audit::Prepared;
use crate::engine::Engine;
use crate::error::Error;
use crate::failed::{Options, Written};
use crate::verdict::human::count_of;
use crate::verdict::Verdict;

/// The `--failed-rows` options, refused (exit 2, nothing scanned) when DIR
/// is inside the table root or the staged directory, or with a Ballista
/// engine.
pub(super) fn options(a: &AuditArgs, table: Option<&Path>) -> Result<Option<Options>, Error> {
    let Some(dir) = &a.failed_rows else {
        return Ok(None);
    };
    if let Engine::Ballista(_) = &a.engine {
        return Err(Error::Usage(
            "--failed-rows runs on the local engine only: the rows are written by this process"
                .into(),
        ));
    }
    let opts = Options {
        dir: dir.clone(),
        limit: a.failed_rows_limit,
    };
    if let Some(root) = table {
        opts.refuse_inside(root, "table root")?;
    }
    opts.refuse_inside(&a.staged, "staged directory")?;
    Ok(Some(opts))
}

/// Writes the failed rows of `verdict` when asked, naming each file in its
/// check, and says what was written on stderr ([`report`]).
pub(super) async fn write(p: &Prepared, verdict: &mut Verdict, opts: Option<&Options>) {
    let Some(opts) = opts else {
        return;
    };
    let started = std::time::Instant::now();
    let written = p.write_failed_rows(verdict, opts).await;
    report(opts, &written, started.elapsed());
}

/// Says on stderr what was written (one line, when some was) and what
/// could not be.
pub(super) fn report(opts: &Options, written: &Written, took: std::time::Duration) {
    if written.passes > 0 {
        let rows: u64 = written.files.iter().map(|(_, f)| f.rows).sum();
        eprintln!(
            "dqgate: wrote {} of failed rows ({}) to {} in {:.2} s ({})",
            count_of(written.files.len() as u64, "file", "files"),
            count_of(rows, "row", "rows"),
            opts.dir.display(),
            took.as_secs_f64(),
            count_of(written.passes as u64, "pass", "passes")
        );
    }
    for e in &written.errors {
        eprintln!("dqgate: error: {e} (the verdict and the exit code are unchanged)");
    }
}
