//! `dqgate check`: audit the staged files and print the verdict; and what
//! `check` shares with `publish` and `explain`: the staged location, the
//! published table read into the audit, the timing line (and, with `-v`, a
//! line per key pass).

use std::path::PathBuf;
use std::time::Instant;

use super::args::AuditArgs;
use super::options::{engine_options, reach_engine};
use super::output::emit;
use crate::audit::{self, RuleSource};
use crate::error::Error;
use crate::staged::remote::Location;
use crate::verdict::human::count_of;

pub(super) async fn check(a: AuditArgs, table: Option<PathBuf>) -> Result<u8, Error> {
    let started = Instant::now();
    let failed = super::failed_rows::options(&a, table.as_deref())?;
    let mut prepared = audit::prepare_at(
        RuleSource::read(&a.rules)?,
        &Location::parse_beside_table(&a.staged, table.as_deref(), &a.storage_option)?,
        &a.partition,
        false,
        &engine_options(&a)?,
    )
    .await?;
    reach_engine(&a)?;
    if let Some(root) = &table {
        compare_with(&mut prepared, root, &a.storage_option).await?;
    }
    let published = prepared.published().await?;
    let past = prepared.past_runs().await?;
    let (mut verdict, telemetry) = prepared.run_with(&published, past.as_ref()).await?;
    super::failed_rows::write(&prepared, &mut verdict, failed.as_ref()).await;
    emit(&verdict, a.format, a.color);
    timing(&prepared, &telemetry, started);
    Ok(if verdict.passed() { 0 } else { 1 })
}

/// Reads `--table` into the audit, as one snapshot of whichever target it
/// is (a Hive table root, or a Delta table: a directory with `_delta_log/`,
/// or any object-store URL).
pub(super) async fn compare_with(
    prepared: &mut audit::Prepared,
    root: &std::path::Path,
    options: &[String],
) -> Result<(), Error> {
    let target = crate::publish::choose(None, root)
        .open(root, options, None)
        .await?;
    prepared.compare_with(target.as_ref()).await
}

pub(super) fn timing(p: &audit::Prepared, telemetry: &audit::Telemetry, started: Instant) {
    let spilled = telemetry.spilled_bytes;
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
    if !super::output::verbose() {
        return;
    }
    for pass in &telemetry.key_passes {
        eprintln!("dqgate:   keys {pass}");
    }
}
