//! What a first pass hands on: what it found ([`Scanned`]), its
//! partitions counted ([`count_stores`]), and the timing lines it reports
//! (`-v`, `explain`).

use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::DataType;

use datafusion::prelude::SessionContext;

use super::count::{self, count, Counted, Keep};
use super::found::{Found, Tallied};
use super::key::Key;
use super::placed::Placed;
use super::retain;
use super::store::{LocalStore, Split};
use super::tasks::{blocking, threads};
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

/// Counts the partitions of `stores` (filled by `scan` since `started`),
/// and says what each step cost.
pub(super) async fn count_stores<K: Key, R: Split<K>>(
    ctx: &SessionContext,
    stores: Vec<LocalStore<R::Stored>>,
    split: (usize, R),
    scan: &str,
    (started, keep): (Instant, Keep),
) -> Result<(Counted<K>, u64, Vec<String>), Error> {
    let none = |_: &Counted<K>, _: &[LocalStore<R::Stored>]| None::<()>;
    let (counted, spilled, passes, _) =
        count_stores_then(ctx, stores, split, scan, started, (none, keep)).await?;
    Ok((counted, spilled, passes))
}

/// [`count_stores`], then `then` of
/// what was counted and the stores before they are let go (in the same
/// blocking task).
pub(super) async fn count_stores_then<K: Key, R: Split<K>, T: Send + 'static>(
    ctx: &SessionContext,
    stores: Vec<LocalStore<R::Stored>>,
    (partitions, split): (usize, R),
    scan: &str,
    started: Instant,
    (then, keep): (
        impl FnOnce(&Counted<K>, &[LocalStore<R::Stored>]) -> Option<T> + Send + 'static,
        Keep,
    ),
) -> Result<(Counted<K>, u64, Vec<String>, Option<T>), Error> {
    let scanned = started.elapsed();
    let words: u64 = stores.iter().map(|s| s.words).sum();
    let spilled: u64 = stores.iter().map(LocalStore::spilled_bytes).sum();
    let counting = Instant::now();
    let threads = threads(ctx);
    let (counted, took, then) = blocking(move || {
        let counted = count(&stores, (threads, keep), |p, w| split.join(p, w));
        let took = counting.elapsed();
        let then = counted.as_ref().ok().and_then(|c| then(c, &stores));
        (counted, took, then)
    })
    .await?;
    let counted = counted?;
    let mut passes = vec![format!(
        "{scan} and radix-partition {words} key words into {partitions} partitions ({} bytes a word): {:.2} s{}",
        R::BYTES,
        scanned.as_secs_f64(),
        if spilled > 0 {
            format!(", {spilled} bytes spilled")
        } else {
            String::new()
        }
    )];
    passes.push(format!(
        "count the partitions on {threads} thread(s): {:.2} s",
        took.as_secs_f64()
    ));
    Ok((counted, spilled, passes, then))
}
