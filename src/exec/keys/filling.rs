//! The end of a first pass: the runs' stores counted, and a key walked
//! page by page ([`super::pages`], [`super::rowpages`]) pushed into them,
//! or a single text key's exact values tabled instead ([`super::values`]).

use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::ArrayRef;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::prelude::SessionContext;

use super::adjacent::{self, Adjacent};
use super::affixes::Chosen;
use super::binned::{self, Binned};
use super::count;
use super::encode;
use super::hits;
use super::pages;
use super::passes::{count_stores_then, exact, on_disk, timed, Scanned};
use super::placed::{self, Places};
use super::rowbins::{self, RowBins};
use super::rowpages::{self, Paged};
use super::store::{self, LocalStore, Split};
use super::stretches::{self, Stop, Stretches};
use super::tasks::{blocking, threads};
use super::together;
use super::values::Values;
use crate::exec::ExecError as Error;
use crate::plan::keys::KeyJob;

mod visit;

/// [`partition_and_count`] of the fingerprints of a key walked page by
/// page ([`pages`], [`rowpages`]); cut by `bits`, at most `keep` repeated
/// ones kept ([`count::Counted`]). A single text key's runs table its
/// exact values as they go, and when every run kept its table they are
/// the answer ([`values`]). (Files in order are counted first by
/// [`super::in_order::partition_pages`].)
pub(super) async fn partition_all<R: Split<u64>>(
    ctx: &SessionContext,
    paged: &Paged,
    job: &KeyJob,
    label: &str,
    (partitions, split): (usize, R),
    (bits, keep): (u32, u64),
) -> Result<Scanned, Error> {
    let started = Instant::now();
    let runtime = ctx.runtime_env();
    let mask = encode::fingerprint_mask(Some(bits));
    let tabled = match paged {
        Paged::One(text) => {
            let runs = text.runs.len().max(1) as u64;
            let tabled = Values::fits(text.rows) && crate::hooks::exact_values() != Some(0);
            tabled.then(|| {
                (
                    (hits::budget(ctx) / runs) as usize,
                    text.rows,
                    runs as usize,
                )
            })
        }
        Paged::Rows(_) => None,
    };
    // Each run's visitor is made in run order (`walks::walk_runs`).
    let next_run = std::sync::atomic::AtomicUsize::new(0);
    let (watched, affixes) = (rowbins::Watched::default(), Chosen::default());
    let fill = || Filling {
        store: LocalStore::<R::Stored>::new(partitions, runtime.clone(), "dqgate key check"),
        words: Vec::with_capacity(FILL),
        split,
        mask,
        nulls_equal: job.nulls_equal,
        failed: None,
        values: tabled.and_then(|(most, rows, runs)| {
            Values::new(mask, most, &runtime.memory_pool).map(|v| v.for_input(rows, runs))
        }),
        binned: None,
        bins: tabled.map_or(0, |(most, rows, _)| binned::bins_for(rows, most / 2)),
        affixes: affixes.clone(),
        kind: match paged {
            Paged::One(text) => text.first_kind(),
            Paged::Rows(_) => encode::Kind::Text,
        },
        runtime: runtime.clone(),
        gave_up: None,
        gave_up_bins: false,
        adjacent: matches!(paged, Paged::One(_)).then(Adjacent::default),
        stretches: match paged {
            Paged::One(text) => {
                // A quarter of a run's share of the budget: the stretches
                // beyond it go to disk, and are read back once, in order.
                let runs = text.runs.len().max(1) as u64;
                let most = hits::budget(ctx) / runs / 4;
                Stretches::new(most as usize, &runtime, text.first_kind())
            }
            Paged::Rows(_) => None,
        },
        places: match paged {
            Paged::Rows(rows) if crate::hooks::places() != Some(0) => {
                let run = next_run.load(std::sync::atomic::Ordering::Relaxed);
                Places::new(partitions, rows.run_rows(run), &runtime.memory_pool)
            }
            _ => None,
        },
        rowbins: match paged {
            Paged::Rows(rows) => {
                let run = next_run.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let most = rowbins::most(ctx, rows.runs.len());
                let bins = (binned::bins_for(rows.rows, most), mask, most);
                let rows = (rows.rows, rows.run_rows(run));
                let watch = (job.nulls_equal, runtime.clone());
                Some(RowBins::new(watched.clone(), rows, bins, watch))
            }
            Paged::One(_) => None,
        },
    };
    let (mut filled, repeats) = match paged {
        Paged::One(text) => pages::walk(text, label, fill).await?,
        Paged::Rows(rows) => rowpages::walk(rows, label, &runtime.memory_pool, fill).await?,
    };
    let how = match pages::repeats(repeats) {
        r if r.is_empty() => "scan (page by page)".to_string(),
        r => format!("scan (page by page){r},"),
    };
    let scanned = started.elapsed();
    // A composite whose every run binned its keys: the bins answer.
    if let Paged::Rows(walks) = paged {
        let mut runs: Vec<_> = filled.iter_mut().map(|f| f.rowbins.take()).collect();
        let scan = Ok((how.as_str(), scanned));
        let walked = (walks, label);
        if let Some(found) = rowbins::answer(&mut runs, walked, job, threads(ctx), scan).await? {
            return Ok(Scanned::Exact(found));
        }
        for (f, r) in filled.iter_mut().zip(runs) {
            f.rowbins = r;
            f.give_up_rows();
        }
    }
    // Values that came in order in every run are counted without the
    // fingerprints, or the tables (which cost a count of their own).
    let adjacent: Option<Vec<Adjacent>> = filled.iter_mut().map(|f| f.adjacent.take()).collect();
    if let Some(counted) = adjacent.and_then(|a| adjacent::together(a, job.nulls_equal)) {
        let passes = vec![format!(
            "{how} on {} run(s), the values in order: counted side by side: {:.2} s",
            filled.len(),
            scanned.as_secs_f64()
        )];
        return exact(counted, job, passes, 0);
    }
    // Values in order in long stretches of every run (files each sorted
    // on their own) are merged, not counted by table or fingerprint.
    let kept: Vec<Option<Stretches>> = filled.iter_mut().map(|f| f.stretches.take()).collect();
    let count: usize = kept.iter().flatten().map(Stretches::stretches).sum();
    if kept.iter().all(Option::is_some) && stretches::mergeable(count) {
        let kept: Vec<Stretches> = kept.into_iter().flatten().collect();
        let counting = Instant::now();
        let bytes: usize = kept.iter().map(Stretches::bytes).sum();
        let (nulls_equal, threads) = (job.nulls_equal, threads(ctx));
        let written: u64 = kept.iter().map(Stretches::written).sum();
        let suffix = stretches::suffix_said(&kept);
        let counted = blocking(move || stretches::merged(kept, nulls_equal, threads)).await??;
        let passes = timed(
            format!(
                "{how} on {} run(s), the values in order in {count} stretch(es) kept ({} MB{}{suffix})",
                filled.len(),
                bytes >> 20,
                on_disk(written, " of them"),
            ),
            scanned,
            format!(
                "merge the stretches in order on {threads} thread(s) ({} keys)",
                counted.distinct,
            ),
            counting,
        );
        return exact(counted, job, passes, written);
    }
    // Else what any run kept goes to its table or its store.
    for (f, s) in filled.iter_mut().zip(kept) {
        if let Some(s) = s {
            f.replay(s, Stop::Disorder);
        }
    }
    // Stretches on disk that could not be read back leave a table short.
    if let Some(e) = filled.iter_mut().find_map(|f| f.failed.take()) {
        return Err(e.into());
    }
    // Runs that turned their tables to bins: the others' tables turn too
    // (if they fit), and the bins are the answer.
    if filled.iter().any(|f| f.binned.is_some()) && to_bins(&mut filled) {
        let runs: Vec<Binned> = filled.iter_mut().filter_map(|f| f.binned.take()).collect();
        let counting = Instant::now();
        let threads = threads(ctx);
        let bytes: usize = runs.iter().map(Binned::bytes).sum();
        let (bins, affixes) = runs.first().map_or((0, String::new()), Binned::shape);
        let written: u64 = runs.iter().map(Binned::written).sum();
        let in_place: u32 = runs.iter().map(Binned::tabled_in_place).sum();
        let found = blocking(move || binned::found(&runs, threads)).await??;
        let in_place = match in_place {
            0 => String::new(),
            n => format!(", a bin tabled in place {n} time(s)"),
        };
        let passes = timed(
            format!(
                "{how} binning the exact values on {} run(s) ({bins} bins, {} MB{affixes}{in_place}{})",
                filled.len(),
                bytes >> 20,
                on_disk(written, ""),
            ),
            scanned,
            format!(
                "table the bins on {threads} thread(s) ({} values)",
                found.distinct,
            ),
            counting,
        );
        return exact(found, job, passes, written);
    }
    let tables: Vec<Option<Values>> = filled.iter_mut().map(|f| f.values.take()).collect();
    let tables = match tabled.is_some() && tables.iter().all(Option::is_some) {
        true => {
            let tables: Vec<Values> = tables.into_iter().flatten().collect();
            let counting = Instant::now();
            let threads = threads(ctx);
            let bytes: usize = tables.iter().map(Values::bytes).sum();
            let together = blocking(move || together::found(&tables, threads)).await?;
            let passes = timed(
                format!("{how} tabling the exact values on {} run(s)", filled.len()),
                scanned,
                format!(
                    "count the runs' tables together on {threads} thread(s) ({} values, {} MB)",
                    together.distinct,
                    bytes >> 20,
                ),
                counting,
            );
            return exact(together, job, passes, 0);
        }
        false => tables,
    };
    // The tables given back go to the stores, as if each run had given its
    // own up at the end (any store will do: the stores are counted as one).
    for (f, t) in filled.iter_mut().zip(tables) {
        f.values = t;
        f.give_up();
        f.give_up_bins();
    }
    let mut stores = Vec::new();
    let mut gave_up = Vec::new();
    let mut bins = false;
    let mut places = Some(Vec::new());
    for mut f in filled {
        bins |= f.gave_up_bins;
        f.flush();
        if let Some(e) = f.failed {
            return Err(e.into());
        }
        gave_up.extend(f.gave_up);
        stores.push(f.store);
        match (f.places, &mut places) {
            (Some(p), Some(all)) => all.push(p),
            _ => places = None,
        }
    }
    let how = match gave_up.iter().max() {
        Some(most) => format!(
            "{how} {} run(s) giving up their table of exact values (at most {most} values{}),",
            gave_up.len(),
            if bins { ", then their bins" } else { "" }
        ),
        None => how,
    };
    let threads = threads(ctx);
    let place = move |counted: &count::Counted<u64>, stores: &[LocalStore<R::Stored>]| {
        placed::after_count(
            &counted.repeated,
            stores,
            places?,
            |w| split.split(w),
            threads,
        )
    };
    let counting = (place, count::Keep::Most(keep));
    let split = (partitions, split);
    let (counted, spilled, mut passes, placed) =
        count_stores_then(ctx, stores, split, &how, started, counting).await?;
    let placed = match placed {
        Some((placed, took)) => {
            let placed = placed?;
            passes.push(placed::line(placed.as_ref(), took));
            placed
        }
        None => None,
    };
    let kept = Vec::new();
    Ok(Scanned::Counted(counted, spilled, passes, kept, placed))
}

/// Whether every run of `filled` holds bins, the tables of those that do
/// not turned to bins: false (their tables kept) when a run holds neither,
/// or a table's bins do not fit.
fn to_bins<R: Split<u64>>(filled: &mut [Filling<R>]) -> bool {
    for f in filled.iter_mut() {
        if f.binned.is_some() {
            continue;
        }
        let Some(values) = &f.values else {
            return false;
        };
        let bins = (f.bins, &f.affixes, f.kind);
        let Some(b) = values.to_binned(bins, values.as_bins(), &f.runtime) else {
            return false;
        };
        f.binned = Some(b);
        f.values = None;
    }
    true
}

/// Words a [`Filling`] gathers before it pushes them.
const FILL: usize = 4096;

/// A run's store, filled with the fingerprints of its counted rows, or
/// its table of a single text key's exact values until it gives that up
/// ([`values`]).
struct Filling<R: Split<u64>> {
    store: LocalStore<R::Stored>,
    words: Vec<u64>,
    split: R,
    mask: u64,
    nulls_equal: bool,
    failed: Option<store::StoreError>,
    values: Option<Values>,
    /// The values binned instead of tabled ([`binned`]), once the table
    /// turned to bins: how many bins, the affixes every run's bins store
    /// their values without, and where they take memory and disk.
    binned: Option<Binned>,
    bins: usize,
    affixes: Chosen,
    /// How the key's text is hashed (the bins hash it again).
    kind: encode::Kind,
    runtime: Arc<RuntimeEnv>,
    /// How many values the table held when the run gave it up, and
    /// whether it gave up bins.
    gave_up: Option<usize>,
    gave_up_bins: bool,
    /// A single text key's values counted in order ([`adjacent`]), while
    /// they come so.
    adjacent: Option<Adjacent>,
    /// A single text key's values kept in stretches in order
    /// ([`stretches`]), while they come so: neither tabled nor pushed.
    stretches: Option<Stretches>,
    /// A composite's partition of each row ([`placed`]), while the pool
    /// holds them.
    places: Option<Places>,
    /// A composite's watch of its first fingerprints, then its bins
    /// ([`rowbins`]).
    rowbins: Option<RowBins>,
}

impl<R: Split<u64>> Filling<R> {
    fn flush(&mut self) {
        let split = self.split;
        if self.failed.is_none() {
            let pushed = self
                .store
                .extend_split(self.words.iter().map(|w| split.split(*w)));
            self.failed = pushed.err();
        }
        self.words.clear();
    }

    #[inline]
    fn push(&mut self, fingerprint: u64) {
        self.words.push(fingerprint & self.mask);
        if self.words.len() == FILL {
            self.flush();
        }
    }

    /// `rows` rows of `fingerprint`: a fingerprint counted twice is a
    /// candidate however often it was counted (the verification counts its
    /// rows), so they are at most two words.
    #[inline]
    fn push_rows(&mut self, fingerprint: u64, rows: u64) {
        for _ in 0..rows.min(2) {
            self.push(fingerprint);
        }
    }

    /// `rows` rows of `value` to the count in order (which the run drops
    /// at the first value out of order) and to the stretches, if the run
    /// keeps them: `false` when it does not, or gives them up at this
    /// value, which is then for the table or the store. Both hold the
    /// value before (they are given the same values): it is compared once.
    #[inline]
    fn in_order(&mut self, value: &[u8], rows: u64) -> bool {
        let order = match (&self.stretches, &self.adjacent) {
            (Some(s), _) => s.order(value),
            (None, Some(a)) => a.order(value),
            (None, None) => return false,
        };
        if let Some(a) = &mut self.adjacent {
            if !a.add_ordered(value, rows, order) {
                self.adjacent = None;
            }
        }
        let Some(s) = &mut self.stretches else {
            return false;
        };
        let Err(stop) = s.add_ordered(value, rows, order) else {
            return true;
        };
        if let Some(s) = self.stretches.take() {
            self.replay(s, stop);
        }
        false
    }

    /// Hands what the stretches kept on: to the table or the store as the
    /// walk would have, or (`Full`: they outgrew the budget, so the table
    /// would too) with the table given up, straight to the store.
    fn replay(&mut self, kept: Stretches, stop: Stop) {
        if stop == Stop::Full {
            self.give_up();
        }
        let read = kept.into_each(|fingerprint, value, rows| self.count(fingerprint, value, rows));
        if let Err(e) = read {
            self.failed.get_or_insert(e);
        }
    }

    /// `rows` rows of `value` to the table, or the store once the table is
    /// given up.
    #[inline]
    fn count(&mut self, fingerprint: u64, value: &[u8], rows: u64) {
        if let Some(t) = &mut self.values {
            if t.add(fingerprint, value, rows) {
                return;
            }
            self.give_up();
        }
        self.untabled(fingerprint, value, rows);
    }

    /// `rows` rows of `value` to the bins, or the store once they are
    /// given up (or there are none).
    #[inline]
    fn untabled(&mut self, fingerprint: u64, value: &[u8], rows: u64) {
        if let Some(b) = &mut self.binned {
            if b.add(fingerprint, value, rows) {
                return;
            }
            self.give_up_bins();
        }
        self.push_rows(fingerprint, rows);
    }

    /// Gives the table up, if there is one: to bins when it turned to them
    /// and they fit, else its values go to the store as the walk pushes
    /// them by value, a null row's fingerprint being 0.
    fn give_up(&mut self) {
        let Some(values) = self.values.take() else {
            return;
        };
        self.gave_up = Some(values.len());
        let room = values.to_bins();
        let bins = (self.bins, &self.affixes, self.kind);
        if let Some(b) = room.and_then(|room| values.to_binned(bins, room, &self.runtime)) {
            self.binned = Some(b);
            return;
        }
        values.each(|w, _, rows| self.push_rows(w, rows));
        self.push_rows(0, values.null_rows());
    }

    /// Gives a composite's bins up, if it has them: every entry goes to
    /// the store (see [`rowbins`]).
    fn give_up_rows(&mut self) {
        if let Some(mut r) = self.rowbins.take() {
            self.gave_up_bins |= r.binning();
            if let Err(e) = r.give_up(|w, _, rows| self.push_rows(w, rows)) {
                self.failed.get_or_insert(e);
            }
        }
    }

    /// Gives the bins up, if there are: every entry goes to the store, as
    /// the table's values would.
    fn give_up_bins(&mut self) {
        if let Some(b) = self.binned.take() {
            self.gave_up_bins = true;
            match b.each(|w, _, rows| self.push_rows(w, rows)) {
                Ok(nulls) => self.push_rows(0, nulls),
                Err(e) => {
                    self.failed.get_or_insert(e);
                }
            }
        }
    }
}

impl<R: Split<u64>> rowpages::Rows for Filling<R> {
    fn decoded(&mut self) -> bool {
        let binned = self.rowbins.as_mut().is_some_and(RowBins::group);
        if binned {
            self.places = None;
        }
        binned
    }

    fn columns(&mut self, columns: &[ArrayRef], hashes: &[u64], nulls: &[bool]) {
        match self.rowbins.as_mut().filter(|r| r.binning()) {
            Some(r) => {
                if !r.batch(columns, hashes) {
                    self.give_up_rows();
                    self.rows(hashes, nulls);
                }
            }
            None => self.rows(hashes, nulls),
        }
    }

    fn rows(&mut self, hashes: &[u64], nulls: &[bool]) {
        if let Some(r) = &mut self.rowbins {
            r.watch(hashes, nulls);
        }
        let (split, mask, last) = (self.split, self.mask, self.store.partitions() - 1);
        let partition = |h: u64| split.split(h & mask).0 & last;
        if let Some(p) = &mut self.places {
            if !p.note(hashes, nulls, self.nulls_equal, partition) {
                self.places = None;
            }
        }
        for (&h, &null) in hashes.iter().zip(nulls) {
            if self.nulls_equal || !null {
                self.push(h);
            }
        }
    }
}
