//! A single text key whose footers say its values come in order: files
//! sorted by the key, as a sorted DuckDB, Spark or Polars write leaves
//! them. Each run's row groups' ranges follow one another and the runs'
//! do too, or the row groups' ranges do once taken in their order (sorted
//! files listed out of it: [`in_order`]).
//!
//! Such files are first counted in order and in no other way
//! ([`Ordered`], on [`Adjacent`]): no fingerprint is computed and nothing
//! is kept. The footers are only a hint: every value is still compared
//! with the one before, and the first out of order ends the count (its
//! run skips the rest of its pages); then, or when the runs' ranges
//! overlap, the whole first pass reads them again ([`partition_all`]). On
//! 10M keys each twice, in one sorted file, that took the pass from 0.28 s
//! and 195 MB to 0.10 s and 65 MB, the time to read the column.

use std::time::Instant;

use datafusion::prelude::SessionContext;

use super::adjacent::{together, Adjacent};
use super::filling::{exact, partition_all, Scanned};
use super::found::Tallied;
use super::pages::{self, TextPages, Visit};
use super::rowpages::Paged;
use super::store::Split;
use crate::exec::ExecError as Error;
use crate::plan::keys::KeyJob;

/// The first pass of `paged` ([`partition_all`]), files in order counted
/// first as this module says.
pub(super) async fn partition_pages<R: Split<u64>>(
    ctx: &SessionContext,
    paged: &Paged,
    job: &KeyJob,
    label: &str,
    (partitions, split): (usize, R),
    bits: u32,
) -> Result<Scanned, Error> {
    let started = Instant::now();
    let text = match paged {
        Paged::One(text) if crate::hooks::footer_order() != Some(0) => in_order(text),
        _ => None,
    };
    let Some(text) = text else {
        return partition_all(ctx, paged, job, label, (partitions, split), bits).await;
    };
    let (runs, repeats) = pages::walk(&text, label, Ordered::default).await?;
    let how = format!(
        "scan (page by page{}) on {} run(s)",
        pages::repeats(repeats),
        runs.len()
    );
    if let Some(counted) = Ordered::together(runs, job.nulls_equal) {
        let passes = vec![format!(
            "{how}, the values in order: counted side by side, as the footers' ranges said (nothing else kept): {:.2} s",
            started.elapsed().as_secs_f64()
        )];
        return exact(counted, job, passes, 0);
    }
    let first = format!(
        "{how}, counting the values in order as the footers' ranges said, until one came out of order: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let mut scanned = partition_all(ctx, paged, job, label, (partitions, split), bits).await?;
    match &mut scanned {
        Scanned::Counted(_, _, passes, _) => passes.insert(0, first),
        Scanned::Exact(found) => found.passes.insert(0, first),
    }
    Ok(scanned)
}

/// A run's values counted in order and nothing else (no fingerprint, no
/// table, no stretches): the first pass over files whose footers say they
/// are in order ([`in_order`]). At the first value out of order it
/// is done, and the walk skips the rest of its run.
#[derive(Default)]
pub(super) struct Ordered {
    adjacent: Adjacent,
    broken: bool,
}

impl Ordered {
    /// The runs' count in order, or `None` when a value came out of order
    /// or the runs' ranges overlap.
    pub(super) fn together(runs: Vec<Ordered>, nulls_equal: bool) -> Option<Tallied> {
        let runs: Option<Vec<Adjacent>> = (runs.into_iter())
            .map(|r| (!r.broken).then_some(r.adjacent))
            .collect();
        together(runs?, nulls_equal)
    }
}

impl Visit for Ordered {
    #[inline]
    fn value(&mut self, _: u64, value: &[u8]) {
        self.rows(0, value, 1);
    }

    fn nulls(&mut self, n: u64) {
        self.adjacent.nulls(n);
    }

    fn by_value(&self) -> bool {
        true
    }

    #[inline]
    fn rows(&mut self, _: u64, value: &[u8], rows: u64) {
        if !self.broken && !self.adjacent.add(value, rows) {
            self.broken = true;
        }
    }

    fn hashed(&self) -> bool {
        false
    }

    fn done(&self) -> bool {
        self.broken
    }
}

/// The range of a single text key's values in row group `group` of file
/// `file` of `walks`, as its footer gives it, and its rows: `Some(None)`
/// for a row group of nulls alone, `None` when the footer gives no range.
fn range_of(walks: &TextPages, (file, group): (usize, usize)) -> Option<(Option<Range<'_>>, u64)> {
    let file = &walks.files[file];
    let &(leaf, _) = file.parts.first()?;
    let group = file.arrow.metadata.metadata().row_group(group);
    let rows = group.num_rows().max(0) as u64;
    let chunk = group.column(leaf);
    let stats = chunk.statistics()?;
    if stats.null_count_opt() == Some(chunk.num_values().max(0) as u64) {
        return Some((None, rows));
    }
    Some((Some((stats.min_bytes_opt()?, stats.max_bytes_opt()?)), rows))
}

/// The least and the greatest value of a row group.
type Range<'a> = (&'a [u8], &'a [u8]);

/// Whether ranges in this order follow one another: none begins below the
/// greatest value of the one before (they may share it).
fn follow(ranges: &[Range]) -> bool {
    ranges.windows(2).all(|w| w[0].1 <= w[1].0)
}

/// The walks of `walks` (a single text key) in which the footers say each
/// run's values come in order and the runs' ranges do not overlap; `None`
/// when they say no order does. Only a hint (the values are still
/// compared one by one): files sorted by the key, as a sorted DuckDB,
/// Spark or Polars write leaves them.
///
/// The runs as planned, when in each every row group with a value has a
/// least and a greatest value, none below the one before's greatest, and
/// the runs' ranges, taken by their least, follow one another. Else, when
/// the row groups' ranges follow one another once taken by their least
/// (sorted files listed out of their order: `data_10` before `data_2`),
/// the row groups in that order, cut into as many runs of about as many
/// rows; row groups of nulls alone go first.
pub(super) fn in_order(walks: &TextPages) -> Option<TextPages> {
    let mut ranges = Vec::with_capacity(walks.runs.len());
    let mut planned = true;
    for run in &walks.runs {
        let mut groups = Vec::with_capacity(run.len());
        for &at in run {
            groups.extend(range_of(walks, at)?.0);
        }
        planned &= follow(&groups);
        if let (Some(first), Some(last)) = (groups.first(), groups.last()) {
            ranges.push((first.0, last.1));
        }
    }
    ranges.sort_unstable();
    if planned && follow(&ranges) {
        return Some(TextPages {
            files: walks.files.clone(),
            runs: walks.runs.clone(),
            rows: walks.rows,
        });
    }
    let mut groups = Vec::new();
    for &at in walks.runs.iter().flatten() {
        let (range, rows) = range_of(walks, at)?;
        groups.push((range, at, rows));
    }
    // Nulls alone (`None`) first, then by range.
    groups.sort_unstable();
    let ranges: Vec<Range> = groups.iter().filter_map(|g| g.0).collect();
    if !follow(&ranges) {
        return None;
    }
    let n = walks.runs.len().max(1) as u64;
    let per = walks.rows.div_ceil(n).max(1);
    let mut runs: Vec<Vec<(usize, usize)>> = vec![Vec::new()];
    let mut filled = 0;
    for (_, at, rows) in groups {
        if filled >= per && (runs.len() as u64) < n {
            runs.push(Vec::new());
            filled = 0;
        }
        runs.last_mut().expect("a run").push(at);
        filled += rows;
    }
    Some(TextPages {
        files: walks.files.clone(),
        runs,
        rows: walks.rows,
    })
}
