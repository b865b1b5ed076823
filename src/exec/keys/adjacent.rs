//! A single text key whose values come in order within each run of the
//! first pass (files sorted by the key, as a sorted DuckDB or Spark write
//! leaves them): equal values are side by side, so each run counts its
//! keys as they close, keeping none but its first and its last.
//!
//! Each run checks its own order: a value below the one before ends its
//! count (the run drops it), and the first pass's tables or fingerprints
//! answer instead (they are filled all along). At the end the runs, taken by their first values,
//! must follow one another: each run's first value at least the last value
//! of the run before; a key at a run's end and the next run's start is
//! one key, its rows summed. The keys between a run's first and last lie
//! in no other run, so they are counted once.
//!
//! Files whose footers say the values come in order are first counted
//! so alone ([`super::in_order`]).
//!
//! The order is that of the values' bytes. Rows that come by value (a
//! dictionary page's rows tallied, [`super::pages::Visit::by_value`]) come
//! in the dictionary's order; the count is exact whenever what arrives is
//! in order, since every row of a value then arrives side by side.

use std::cmp::Ordering;

use super::found::Tallied;

/// A key's bytes and its rows.
pub(super) type Key = (Vec<u8>, u64);

/// A run's count of keys in order.
#[derive(Default)]
pub(super) struct Adjacent {
    /// The run's first key, once a later key closed it.
    first: Option<Key>,
    /// The key now open (the last so far) and its rows (0: none yet).
    open: Vec<u8>,
    rows: u64,
    /// The closed keys after the first.
    tallied: Tallied,
    /// Null rows.
    nulls: u64,
}

impl Adjacent {
    /// `rows` rows of `value`, the next in the run; `false` if it comes
    /// out of order, when the count is no longer of use.
    #[inline]
    #[must_use]
    pub(super) fn add(&mut self, value: &[u8], rows: u64) -> bool {
        self.add_ordered(value, rows, self.order(value))
    }

    /// How `value` compares with the key now open (`None`: there is none).
    #[inline]
    pub(super) fn order(&self, value: &[u8]) -> Option<Ordering> {
        (self.rows > 0).then(|| value.cmp(&self.open))
    }

    /// [`Self::add`], given how `value` compares with the key now open
    /// (`None`: there is none), as another count of the same values (the
    /// run's [`super::stretches`]) found it.
    #[inline]
    #[must_use]
    pub(super) fn add_ordered(&mut self, value: &[u8], rows: u64, order: Option<Ordering>) -> bool {
        debug_assert_eq!(order, self.order(value));
        if rows == 0 {
            return true;
        }
        let Some(order) = order else {
            self.open.extend_from_slice(value);
            self.rows = rows;
            return true;
        };
        match order {
            Ordering::Equal => self.rows += rows,
            Ordering::Greater => {
                match self.first {
                    None => self.first = Some((self.open.clone(), self.rows)),
                    Some(_) => self.tallied.key_ascending(1, &self.open, self.rows),
                }
                self.open.clear();
                self.open.extend_from_slice(value);
                self.rows = rows;
            }
            Ordering::Less => return false,
        }
        true
    }

    /// The count of keys that came in no order but lie in a range no other
    /// run's keys enter (a row group's, tabled): its least key and its
    /// greatest (`None`: the same) at its ends, the others in `between`.
    pub(super) fn of_range(least: Key, greatest: Option<Key>, between: Tallied) -> Adjacent {
        let (first, (open, rows)) = match greatest {
            None => (None, least),
            Some(g) => (Some(least), g),
        };
        Adjacent {
            first,
            open,
            rows,
            tallied: between,
            nulls: 0,
        }
    }

    /// `n` null rows.
    pub(super) fn nulls(&mut self, n: u64) {
        self.nulls += n;
    }

    /// The run's keys at its ends, first to last (none for a run of no
    /// values, one for a run of one key).
    fn ends(&mut self) -> Vec<Key> {
        let last = (self.rows > 0).then(|| (std::mem::take(&mut self.open), self.rows));
        self.first.take().into_iter().chain(last).collect()
    }
}

/// The keys of `runs` (each in order) counted together, null rows as one
/// key when `nulls_equal`; `None` if the runs' ranges overlap.
pub(super) fn together(runs: Vec<Adjacent>, nulls_equal: bool) -> Option<Tallied> {
    // Every run's null rows, those of runs of nulls alone included.
    let nulls: u64 = runs.iter().map(|r| r.nulls).sum();
    let mut runs: Vec<(Vec<Key>, Adjacent)> = runs.into_iter().map(|mut r| (r.ends(), r)).collect();
    runs.retain(|(ends, _)| !ends.is_empty());
    runs.sort_by(|a, b| a.0[0].0.cmp(&b.0[0].0));
    let mut total = Tallied::default();
    let mut open: Option<Key> = None;
    for (ends, run) in runs {
        for (key, rows) in ends {
            open = match open {
                None => Some((key, rows)),
                Some((k, n)) => match k.cmp(&key) {
                    Ordering::Equal => Some((k, n + rows)),
                    Ordering::Less => {
                        total.key(1, &k, n);
                        Some((key, rows))
                    }
                    Ordering::Greater => return None,
                },
            };
        }
        total.absorb(run.tallied);
    }
    if let Some((k, n)) = open {
        total.key(1, &k, n);
    }
    if nulls_equal && nulls > 0 {
        total.key(0, &[], nulls);
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(values: &[(&str, u64)]) -> Adjacent {
        let mut a = Adjacent::default();
        for (v, n) in values {
            assert!(a.add(v.as_bytes(), *n), "{v} in order");
        }
        a
    }

    #[test]
    fn runs_that_touch_count_their_shared_key_once() {
        // b ends the first run and starts the second; d fills a run alone
        // and ends the second too.
        let runs = vec![
            run(&[("d", 1)]),
            run(&[("a", 1), ("a", 1), ("b", 1)]),
            run(&[("b", 2), ("c", 1), ("d", 1)]),
            run(&[]),
        ];
        let t = together(runs, false).expect("in order");
        assert_eq!((t.distinct, t.repeated), (4, 3));
        let samples: Vec<(u8, &[u8], u64)> = t.samples();
        assert_eq!(
            samples,
            vec![(1, &b"b"[..], 3), (1, &b"a"[..], 2), (1, &b"d"[..], 2)]
        );
    }

    #[test]
    fn a_value_out_of_order_or_runs_that_overlap_give_no_answer() {
        assert!(!run(&[("b", 1)]).add(b"a", 1));
        // The second run's c lies inside the first's range.
        let overlapping = vec![run(&[("a", 1), ("b", 1), ("d", 1)]), run(&[("c", 1)])];
        assert!(together(overlapping, false).is_none());
    }

    #[test]
    fn null_rows_are_one_key_only_when_nulls_are_equal() {
        let mut a = run(&[("x", 1)]);
        a.nulls(3);
        assert_eq!(together(vec![a], true).map(|t| t.distinct), Some(2));
        let mut a = run(&[("x", 1)]);
        a.nulls(3);
        assert_eq!(together(vec![a], false).map(|t| t.distinct), Some(1));
    }

    /// A run that met only null rows (a row group of nulls read on its
    /// own) still counts them: they were dropped with its empty ends.
    #[test]
    fn a_run_of_null_rows_alone_counts_them() {
        let mut nulls = Adjacent::default();
        nulls.nulls(4);
        let t = together(vec![nulls, run(&[("x", 1), ("y", 1)])], true).expect("in order");
        assert_eq!((t.distinct, t.repeated), (3, 1));
    }
}
