//! What a first pass hands on: what it found ([`Scanned`]), and the
//! timing lines it reports (`-v`, `explain`).

use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::DataType;

use super::count;
use super::found::{Found, Tallied};
use super::placed::Placed;
use super::retain;
use crate::exec::ExecError as Error;
use crate::plan::keys::KeyJob;

/// What a first pass found: the fingerprints counted (how many bytes
/// spilled, what each step cost, what the scan tasks kept), or a single
/// text key's exact values ([`super::values`]).
pub(super) enum Scanned {
    /// The count, bytes spilled, the passes, what the scan tasks kept, and
    /// where a composite's candidate rows lie ([`super::placed`]).
    Counted(
        count::Counted<u64>,
        u64,
        Vec<String>,
        Vec<retain::Retainer>,
        Option<Placed>,
    ),
    Exact(Found),
}

/// The exact keys of a single text key `counted` in the first pass, as
/// the answer.
pub(super) fn exact(
    counted: Tallied,
    job: &KeyJob,
    passes: Vec<String>,
    spilled_bytes: u64,
) -> Result<Scanned, Error> {
    Ok(Scanned::Exact(Found {
        distinct: counted.distinct,
        duplicates: counted.duplicates(&job.keys, &[DataType::Utf8View])?,
        spilled_bytes,
        passes,
    }))
}

/// What a timing line says of `written` bytes written to disk (`of`: of
/// what it counted): nothing when none were.
pub(super) fn on_disk(written: u64, of: &str) -> String {
    match written {
        0 => String::new(),
        w => format!(", {} MB{of} written to disk", w >> 20),
    }
}

/// The timing lines of a first pass that took `scanned` and of the count
/// at its end, started at `counting`.
pub(super) fn timed(
    scan: String,
    scanned: Duration,
    count: String,
    counting: Instant,
) -> Vec<String> {
    vec![
        format!("{scan}: {:.2} s", scanned.as_secs_f64()),
        format!("{count}: {:.2} s", counting.elapsed().as_secs_f64()),
    ]
}
