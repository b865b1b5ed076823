//! What the runs' tables of a single text key's exact values
//! ([`super::values`]) found together, counted where they lie.
//!
//! Each value is counted once, by the first table that holds it, with its
//! rows in every table: a chunk of one table's values is looked up in each
//! other table, a batch at a time with the lookups asked of the cache
//! ahead ([`Values::ask`]), and the chunks are shared out over the
//! threads. The biggest table's own values are not looked up (see
//! [`found`]). Nothing is copied or rehashed, so this takes no memory beyond
//! the tables. (Merging them into one table first, on one thread, took
//! 0.5 s and 130 MB for two runs' tables of 5M e-mail addresses.)

use super::count::share;
use super::found::Tallied;
use super::pages::BATCH;
use super::values::Values;

/// What `tables` (of a key's runs) found, counted on `threads` threads:
/// every value and the null rows (counted only when nulls are equal) a
/// distinct key, those of more than one row repeated, and the top samples,
/// ranked as the verification ranks its exact keys (a tag byte, 0 for
/// null, before the value's bytes). Only the best few are kept on the way
/// ([`Tallied`]): 5M repeated values, each copied out to be ranked, took
/// 0.4 s.
///
/// The biggest table is not looked up value by value: its values that the
/// others hold are counted as those are looked up in it, the rest of its
/// distinct and repeated values follow from its own counts, and only a
/// value that would enter the samples is looked up in the others.
pub(super) fn found(tables: &[Values], threads: usize) -> Tallied {
    let mut order: Vec<&Values> = tables.iter().collect();
    order.sort_by_key(|t| t.len());
    let mut all = Tallied::default();
    if let Some((&last, _)) = order.split_last() {
        let work: Vec<(usize, usize)> = (order.iter().enumerate())
            .flat_map(|(j, t)| (0..t.chunks()).map(move |c| (j, c)))
            .collect();
        let tallies = share(work.len(), threads, Tally::default, |tally, i| {
            let (j, c) = work[i];
            tally.chunk(&order, j, c);
        });
        all.distinct = last.len() as u64;
        all.repeated = last.repeated() as u64;
        for t in tallies {
            all.distinct -= t.in_last;
            all.repeated -= t.in_last_repeated;
            all.absorb(t.counted);
        }
    }
    let nulls: u64 = tables.iter().map(Values::null_rows).sum();
    if nulls > 0 {
        all.key(0, &[], nulls);
    }
    all
}

/// What a thread of [`found`] counted.
#[derive(Default)]
struct Tally {
    /// Values counted by a table before the last (the first that holds
    /// them).
    counted: Tallied,
    /// Of those, the values the last table holds, and those it holds more
    /// than one row of.
    in_last: u64,
    in_last_repeated: u64,
}

impl Tally {
    /// Counts chunk `c` of table `j` of `tables` (the biggest last).
    fn chunk(&mut self, tables: &[&Values], j: usize, c: usize) {
        let last = tables.len() - 1;
        let mut batch = Vec::with_capacity(BATCH);
        tables[j].each_of(c, |w, value, rows| {
            if j == last {
                // Only a value that would be a sample is looked up.
                if self.counted.sample(1, value, rows)
                    && tables[..last].iter().all(|t| t.rows_of(w, value).is_none())
                {
                    self.counted.offer(1, value, rows);
                }
                return;
            }
            batch.push((w, value, rows));
            if batch.len() == BATCH {
                self.look_up(tables, j, &batch);
                batch.clear();
            }
        });
        self.look_up(tables, j, &batch);
    }

    /// Counts each value of `batch` (of table `j`, not the last) that no
    /// table before `j` holds, with its rows in `j` and every table after.
    fn look_up(&mut self, tables: &[&Values], j: usize, batch: &[(u64, &[u8], u64)]) {
        let last = tables.len() - 1;
        let mut asked = [(0, &[][..]); BATCH];
        for (a, (w, value, _)) in asked.iter_mut().zip(batch) {
            *a = (*w, *value);
        }
        for t in tables[j + 1..].iter() {
            t.ask(&asked[..batch.len()]);
        }
        'values: for (w, value, rows) in batch {
            if tables[..j].iter().any(|t| t.rows_of(*w, value).is_some()) {
                continue 'values;
            }
            let mut all = *rows;
            for (i, t) in tables.iter().enumerate().skip(j + 1) {
                if let Some(n) = t.rows_of(*w, value) {
                    all += n;
                    if i == last {
                        self.in_last += 1;
                        self.in_last_repeated += u64::from(n > 1);
                    }
                }
            }
            self.counted.key(1, value, all);
        }
    }
}
