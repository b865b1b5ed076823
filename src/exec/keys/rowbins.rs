//! A composite key's exact keys binned ([`super::binned`]) when most of
//! its rows belong to a key of more than one row.
//!
//! The fingerprint scan of a composite ([`super::rowpages`]) counts cut
//! fingerprints, and its verification reads the key columns again and
//! files the rows of every candidate. When most keys repeat (a batch
//! loaded twice), every row is a candidate: 10M rows of a UUID and an
//! integer were written to disk in 39 rounds of candidates, and the check
//! took 1.8 to 3 times DuckDB's `GROUP BY`.
//!
//! **In the first pass.** The runs watch the rows whose fingerprint's top
//! six bits are 0 (one in 64, chosen by key, so both rows of a key or
//! neither, wherever they lie) together. Once they watched 4,096, a run
//! estimates, as a single text key's table does ([`super::values`]), how
//! many of the input's rows belong to a key of more than one row. Below a
//! quarter, the runs watch on and the run estimates again each time they
//! have watched twice as many, up to 65,536 (about 4M rows): a key's rows
//! show as repeats only once every run holding one has read it, and a run
//! that starts late or falls behind (a loaded machine) hides them from
//! the first estimate. Past a quarter, the run's next row groups come
//! decoded through the Arrow reader, and each counted row's key
//! ([`super::tuples`]: its bytes
//! order as `ORDER BY key`, as the samples need) is appended to the run's
//! bins, which go to disk past the run's share of the budget. The row
//! groups before went to the run's store as fingerprints, and its places
//! ([`super::placed`]) are given up. At the end, when every run binned,
//! each run reads those row groups again into its bins, and the bins,
//! tabled a bin at a time, are the answer: exact, since a bin's table
//! compares every key's bytes.
//!
//! **After the count.** A watch sees repeats only once both rows of a key
//! have been read: twins a few million rows apart in one run, or every
//! key read twice by one run, go unseen. So when the count finds that
//! most counted rows are a candidate's, every row is read again into
//! bins ([`every_row`]), rather than written to disk by round. The
//! count's candidates are dropped while the bins fill; should the bins
//! not fit (full with nowhere to write), the count runs again and its
//! candidates are verified by round.
//!
//! When some run did not bin, or bins fill with nowhere to write, the bins
//! go to their run's store as fingerprints (a row binned after its
//! fingerprint was stored counts twice there, which only makes its key a
//! candidate, which the verification counts exactly), and the count and
//! the verification answer as before.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::SessionContext;

use super::binned::{self, Binned};
use super::encode;
use super::found::{values_of, Found, Tallied};
use super::hits;
use super::pages::BATCH;
use super::passes::{on_disk, timed};
use super::rowpages::{self, RowPages, Rows};
use super::store::StoreError;
use super::tasks::blocking;
use super::tuples;
use super::values::REPEATING;
use crate::exec::Duplicates;
use crate::exec::ExecError as Error;
use crate::plan::keys::KeyJob;

/// The rows the runs watch: those whose fingerprint's top bits are 0, one
/// in 64, so that both rows of a key are watched or neither, wherever
/// they lie.
const WATCH_SHIFT: u32 = 58;

/// Rows the runs watch together before a run first decides: a quarter of
/// the input's rows repeating shows as about 30 of them coming again.
const WATCHED: u64 = 1 << 12;

/// Rows the runs watch together at most: a run that found too few of them
/// coming again decides again each time the runs watched twice as many,
/// up to this many, then decides not to bin.
const WATCHED_MOST: u64 = 1 << 16;

/// The rows every run watched, and how many came again.
#[derive(Default)]
pub(super) struct Watch {
    seen: HashSet<u64>,
    watched: u64,
    again: u64,
}

/// The runs' watch, shared.
pub(super) type Watched = Arc<Mutex<Watch>>;

/// Bytes of a key a run expects, about, before it has seen one: its bins
/// start with room for as many.
const ROW_BYTES: usize = 40;

/// A run's watch of the fingerprints (with the other runs'), then its
/// bins.
pub(super) struct RowBins {
    /// The runs' watch, while this run decides; the rows it watched
    /// since it last told the watch, and its counted rows.
    watch: Option<Watched>,
    mine: Vec<u64>,
    counted: u64,
    /// The rows watched in all at which the run next decides.
    next: u64,
    /// The input's rows, and this run's.
    input_rows: u64,
    run_rows: u64,
    /// Row groups begun, and the first one binned.
    groups: usize,
    from: Option<usize>,
    binned: Option<Binned>,
    /// The key columns' types, as the batches have them, and a batch's
    /// keys' bytes ([`tuples`]) and where each ends.
    types: Option<Vec<DataType>>,
    keys: Vec<u8>,
    ends: Vec<usize>,
    bins: usize,
    mask: u64,
    most: usize,
    nulls_equal: bool,
    runtime: Arc<RuntimeEnv>,
}

impl RowBins {
    /// A run's watch (`watch`, with the other runs'): `rows` of the
    /// input's, `run_rows` of them the run's, its bins (`bins` of them,
    /// keeping `mask` of a fingerprint) taking at most `most` bytes of
    /// `runtime`'s pool.
    pub(super) fn new(
        watch: Watched,
        (input_rows, run_rows): (u64, u64),
        (bins, mask, most): (usize, u64, usize),
        (nulls_equal, runtime): (bool, Arc<RuntimeEnv>),
    ) -> RowBins {
        RowBins {
            watch: Some(watch),
            mine: Vec::new(),
            counted: 0,
            next: WATCHED,
            input_rows,
            run_rows,
            groups: 0,
            from: None,
            binned: None,
            types: None,
            keys: Vec::new(),
            ends: Vec::new(),
            bins,
            mask,
            most,
            nulls_equal,
            runtime,
        }
    }

    /// Watches the counted rows of `hashes` (`nulls`: a part is null).
    pub(super) fn watch(&mut self, hashes: &[u64], nulls: &[bool]) {
        if self.watch.is_none() {
            return;
        }
        for (&h, &null) in hashes.iter().zip(nulls) {
            if self.nulls_equal || !null {
                self.counted += 1;
                if h >> WATCH_SHIFT == 0 {
                    self.mine.push(h);
                }
            }
        }
    }

    /// Whether the run decides now, and to bin: once the runs watched
    /// enough rows, when as many of them came again as when a quarter of
    /// the input's rows belong to keys of more than one row (the birthday
    /// estimate of [`super::values`], over the watched rows, which are a
    /// sample of the keys). Too few came again: the run watches on, and
    /// decides again at twice as many watched, not to bin only past
    /// [`WATCHED_MOST`].
    fn decide(&mut self) -> Option<bool> {
        let watch = self.watch.as_ref()?;
        let (watched, again) = {
            let mut w = watch.lock().unwrap_or_else(|e| e.into_inner());
            for h in self.mine.drain(..) {
                w.watched += 1;
                w.again += u64::from(!w.seen.insert(h));
            }
            (w.watched, w.again)
        };
        let bins = match crate::hooks::bin_rows() {
            Some(n) if self.counted + 1 < n as u64 => return None,
            Some(n) => n > 0,
            None if watched < self.next => return None,
            None => {
                let seen = watched as f64;
                let input = ((self.input_rows >> (64 - WATCH_SHIFT)) as f64).max(seen);
                let bins = 2.0 * input * again as f64 / (seen * seen) >= REPEATING;
                if !bins && watched < WATCHED_MOST {
                    self.next = 2 * watched;
                    return None;
                }
                bins
            }
        };
        self.watch = None;
        Some(bins)
    }

    /// Begins a row group: whether it is binned (it then comes through
    /// [`Self::batch`]). Decides, once the run has watched enough rows.
    pub(super) fn group(&mut self) -> bool {
        let group = self.groups;
        self.groups += 1;
        if self.from.is_some() {
            return self.binned.is_some();
        }
        if self.decide() != Some(true) {
            return false;
        }
        let expected = (self.run_rows as usize).saturating_mul(binned::HEAD + ROW_BYTES);
        self.binned = Binned::new(
            (self.bins, None, None),
            self.mask,
            (expected, self.most),
            &self.runtime,
        );
        self.from = Some(group);
        self.binned.is_some()
    }

    /// Whether the run binned (so far) from some row group on.
    pub(super) fn binning(&self) -> bool {
        self.binned.is_some()
    }

    /// Bins the counted rows of a batch of the key `columns`, fingerprinted
    /// `hashes`: false when the bins filled with nowhere to write, or the
    /// columns would not convert (the batch then binned in part, and to
    /// be counted by fingerprint whole).
    pub(super) fn batch(&mut self, columns: &[ArrayRef], hashes: &[u64]) -> bool {
        self.binned_batch(columns, hashes).unwrap_or(false)
    }

    fn binned_batch(&mut self, columns: &[ArrayRef], hashes: &[u64]) -> Result<bool, Error> {
        let Some(binned) = &mut self.binned else {
            return Ok(false);
        };
        let (columns, types) = plain(columns)?;
        // Every batch of a walk has the plan's types: a change would make
        // keys of one value differ in bytes.
        match &self.types {
            Some(t) if *t != types => return Ok(false),
            Some(_) => {}
            None if tuples::fits(&values_of(&types)) => self.types = Some(types),
            None => return Ok(false),
        }
        let (keys, ends) = (&mut self.keys, &mut self.ends);
        tuples::encode(&columns, keys, ends)?;
        let counted = encode::counted_rows(&columns, self.nulls_equal);
        let mut each = (0..hashes.len().min(ends.len()))
            .filter(|&i| counted.as_ref().is_none_or(|c| c.is_valid(i)))
            .map(|i| {
                let start = if i == 0 { 0 } else { ends[i - 1] };
                (hashes[i], &keys[start..ends[i]])
            });
        let mut batch = Vec::with_capacity(BATCH);
        loop {
            batch.clear();
            batch.extend(each.by_ref().take(BATCH));
            if batch.is_empty() {
                return Ok(true);
            }
            if binned.batch(&batch) < batch.len() {
                return Ok(false);
            }
        }
    }

    /// Gives the bins up: each entry's fingerprint and rows to `push`.
    pub(super) fn give_up(&mut self, push: impl FnMut(u64, &[u8], u64)) -> Result<(), StoreError> {
        match self.binned.take() {
            Some(b) => b.each(push).map(|_| ()),
            None => Ok(()),
        }
    }
}

/// Each column's values as its bytes take them ([`tuples`]),
/// dictionaries as their values; and the columns' types as read.
fn plain(columns: &[ArrayRef]) -> Result<(Vec<ArrayRef>, Vec<DataType>), Error> {
    let types = columns.iter().map(|c| c.data_type().clone()).collect();
    let columns = (columns.iter())
        .map(|c| match c.data_type() {
            DataType::Dictionary(_, v) => cast(c, v).map_err(Error::from),
            _ => Ok(c.clone()),
        })
        .collect::<Result<_, _>>()?;
    Ok((columns, types))
}

/// Empty bins for [`every_row`], one a run of `walks` (`mask` the
/// fingerprints' cut), each with `most` bytes of `runtime`'s pool; `None`
/// when the pool refuses their room.
pub(super) fn every_row_bins(
    walks: &RowPages,
    job: &KeyJob,
    (mask, most): (u64, usize),
    runtime: &Arc<RuntimeEnv>,
) -> Option<Vec<Option<RowBins>>> {
    let bins = binned::bins_for(walks.rows, most);
    let mut runs = Vec::new();
    for (i, groups) in walks.runs.iter().enumerate() {
        let expected = (walks.run_rows(i) as usize).saturating_mul(binned::HEAD + ROW_BYTES);
        let binned = Binned::new((bins, None, None), mask, (expected, most), runtime)?;
        let mut run = RowBins::new(
            Watched::default(),
            (walks.rows, walks.run_rows(i)),
            (bins, mask, most),
            (job.nulls_equal, runtime.clone()),
        );
        run.watch = None;
        run.from = Some(groups.len());
        run.binned = Some(binned);
        runs.push(Some(run));
    }
    Some(runs)
}

/// The exact keys of a composite whose count found that most rows are a
/// candidate's: every row of `walks` read again into the bins `runs`
/// ([`every_row_bins`]) and tabled on `threads` threads (see [`answer`]).
/// `None` when the bins filled with nowhere to write.
pub(super) async fn every_row(
    mut runs: Vec<Option<RowBins>>,
    (walks, label): (&RowPages, &str),
    (job, why): (&KeyJob, &str),
    threads: usize,
) -> Result<Option<Found>, Error> {
    answer(&mut runs, (walks, label), job, threads, Err(why)).await
}

/// A run read again into its bins: every row group comes decoded, and
/// `fits` says whether each batch was binned whole.
struct Again {
    run: Option<RowBins>,
    fits: bool,
}

impl Rows for Again {
    /// Never called: every row group comes decoded. A row group that did
    /// not would not be binned.
    fn rows(&mut self, _: &[u64], _: &[bool]) {
        self.fits = false;
    }

    fn decoded(&mut self) -> bool {
        true
    }

    fn columns(&mut self, columns: &[ArrayRef], hashes: &[u64], _: &[bool]) {
        self.fits = self.fits && self.run.as_mut().is_some_and(|r| r.batch(columns, hashes));
    }
}

/// The most bytes the bins of each of `runs` runs may hold: half its
/// share of the budget, as a single text key's.
pub(super) fn most(ctx: &SessionContext, runs: usize) -> usize {
    (hits::budget(ctx) / runs.max(1) as u64 / 2) as usize
}

/// The exact keys, when every run of `walks` binned (`runs`, in run
/// order): each run's row groups before its first binned one read again
/// into its bins, then the bins tabled on `threads` threads; with the
/// timing lines: the scan's (`how`, in `scanned`) and the tabling's, or
/// (`Err(why)`: every row read again, for that reason) the one of reading
/// and tabling. `None` (the runs' bins left as they are) when some run did
/// not bin, or the bins of what was read again did not fit.
pub(super) async fn answer(
    runs: &mut [Option<RowBins>],
    (walks, label): (&RowPages, &str),
    job: &KeyJob,
    threads: usize,
    scan: Result<(&str, Duration), &str>,
) -> Result<Option<Found>, Error> {
    if runs.is_empty()
        || !runs
            .iter()
            .all(|r| r.as_ref().is_some_and(RowBins::binning))
    {
        return Ok(None);
    }
    let counting = Instant::now();
    // Each run's row groups before its first binned one, read again
    // through the Arrow reader as the walk reads binned row groups.
    let taken: Vec<RowBins> = runs.iter_mut().filter_map(Option::take).collect();
    let mut again = RowPages {
        files: walks.files.clone(),
        runs: (taken.iter().zip(&walks.runs))
            .map(|(r, groups)| groups[..r.from.unwrap_or(0).min(groups.len())].to_vec())
            .collect(),
        rows: 0,
    };
    again.rows = (0..again.runs.len()).map(|i| again.run_rows(i)).sum();
    let pool = taken.first().map(|r| r.runtime.memory_pool.clone());
    let queue = Mutex::new(taken.into_iter());
    let next = || Again {
        run: queue.lock().unwrap_or_else(|e| e.into_inner()).next(),
        fits: true,
    };
    let read = match pool {
        Some(pool) => rowpages::walk(&again, label, &pool, next).await?.0,
        None => Vec::new(),
    };
    let fits = read.iter().all(|a| a.fits && a.run.is_some());
    let mut back: Vec<RowBins> = read.into_iter().filter_map(|a| a.run).collect();
    if !fits {
        for (slot, run) in runs.iter_mut().zip(back) {
            *slot = Some(run);
        }
        return Ok(None);
    }
    let types = back.iter().find_map(|r| r.types.clone());
    let from = back.iter().filter_map(|r| r.from).max().unwrap_or(0);
    let bins: Vec<Binned> = back.iter_mut().filter_map(|r| r.binned.take()).collect();
    let bytes: usize = bins.iter().map(Binned::bytes).sum();
    let written: u64 = bins.iter().map(Binned::written).sum();
    let count = bins.first().map_or(0, Binned::bins);
    let tallied: Tallied = blocking(move || binned::found(&bins, threads)).await??;
    let binned = format!("({count} bins, {} MB{})", bytes >> 20, on_disk(written, ""));
    let passes = match scan {
        Ok((how, scanned)) => timed(
            format!(
                "{how} on {} run(s), binning the exact keys from row group {} of a run on {binned}",
                runs.len(),
                from + 1,
            ),
            scanned,
            format!(
                "read each run's row groups before it again into its bins, and table the bins on {threads} thread(s) ({} keys)",
                tallied.distinct
            ),
            counting,
        ),
        Err(why) => vec![format!(
            "{why}: read every row again, binning the exact keys {binned}, and table the bins on {threads} thread(s) ({} keys): {:.2} s",
            tallied.distinct,
            counting.elapsed().as_secs_f64()
        )],
    };
    let distinct = tallied.distinct;
    let duplicates = match types {
        Some(types) => {
            let plain = values_of(&types);
            let decode = |keys: &[&[u8]]| tuples::decode(keys, &plain);
            tallied.duplicates_decoded(&job.keys, &types, decode)?
        }
        None => Duplicates::default(),
    };
    Ok(Some(Found {
        distinct,
        duplicates,
        spilled_bytes: written,
        passes,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of a 10M-row input sharing `watch`, binning nothing.
    fn run(watch: &Watched) -> RowBins {
        let runtime = Arc::new(RuntimeEnv::default());
        RowBins::new(
            watch.clone(),
            (10_000_000, 5_000_000),
            (1024, u64::MAX, 0),
            (true, runtime),
        )
    }

    /// `n` watched fingerprints (top bits 0), from `from` on.
    fn watched(from: u64, n: u64) -> Vec<u64> {
        (from..from + n).collect()
    }

    /// A batch loaded twice, read by two runs of which the second starts
    /// late: its repeats are not there at the first estimate, and the
    /// run decides to bin when they come. Keys that never repeat are
    /// watched up to the most, then not binned.
    #[test]
    fn a_run_that_starts_late_still_shows_the_repeats() {
        let watch = Watched::default();
        let (mut first, mut late) = (run(&watch), run(&watch));
        let keys = watched(0, 3 * WATCHED);
        first.watch(&keys, &vec![false; keys.len()]);
        assert_eq!(first.decide(), None, "nothing repeats yet: watch on");
        assert_eq!(first.next, 2 * 3 * WATCHED);
        late.watch(&keys, &vec![false; keys.len()]);
        assert_eq!(late.decide(), Some(true));
        assert_eq!(first.decide(), Some(true));
        assert!(first.watch.is_none() && late.watch.is_none());

        let watch = Watched::default();
        let mut alone = run(&watch);
        let mut decided = None;
        for chunk in watched(0, 2 * WATCHED_MOST).chunks(WATCHED as usize) {
            alone.watch(chunk, &vec![false; chunk.len()]);
            decided = decided.or(alone.decide());
        }
        assert_eq!(decided, Some(false));
        let w = watch.lock().unwrap();
        assert!((WATCHED_MOST..WATCHED_MOST + WATCHED).contains(&w.watched));
    }
}
