//! How the walk's values reach a run's [`Filling`]: in order to the
//! count in order and the stretches, then to the table, the bins or the
//! store.

use super::Filling;
use crate::exec::keys::pages;
use crate::exec::keys::store::Split;

impl<R: Split<u64>> pages::Visit for Filling<R> {
    #[inline]
    fn value(&mut self, fingerprint: u64, value: &[u8]) {
        self.rows(fingerprint, value, 1);
    }

    /// Rows come by value (see [`Self::push_rows`]).
    fn by_value(&self) -> bool {
        true
    }

    fn batch(&mut self, values: &[(u64, &[u8])]) {
        let values = match values.iter().position(|(_, v)| !self.in_order(v, 1)) {
            None => return,
            Some(i) => {
                // Past the value the stretches refused, the count in order
                // goes on alone.
                for (_, v) in &values[i + 1..] {
                    self.in_order(v, 1);
                }
                &values[i..]
            }
        };
        let tabled = match &mut self.values {
            Some(t) => t.batch(values),
            None => 0,
        };
        if tabled < values.len() {
            self.give_up();
            let values = &values[tabled..];
            let binned = match &mut self.binned {
                Some(b) => b.batch(values),
                None => 0,
            };
            if binned < values.len() {
                self.give_up_bins();
                values[binned..].iter().for_each(|(f, _)| self.push(*f));
            }
        }
    }

    #[inline]
    fn rows(&mut self, fingerprint: u64, value: &[u8], rows: u64) {
        if !self.in_order(value, rows) {
            self.count(fingerprint, value, rows);
        }
    }

    /// A null row's fingerprint is 0, as `encode::fingerprints` leaves it.
    fn nulls(&mut self, n: u64) {
        if let Some(a) = &mut self.adjacent {
            a.nulls(n);
        }
        if let Some(s) = &mut self.stretches {
            s.nulls(n);
        }
        if !self.nulls_equal {
            return;
        }
        match (&mut self.values, &mut self.binned) {
            (Some(t), _) => t.nulls(n),
            (None, Some(b)) => b.nulls(n),
            (None, None) => self.push_rows(0, n),
        }
    }
}
