//! The staged side of the in-place table when it is a single text key of
//! local files: walked page by page ([`crate::exec::keys::pages`]), each
//! run's keys in a set of its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use datafusion::execution::memory_pool::{MemoryPool, UnboundedMemoryPool};

use super::keyset::{room, KeySet, TOUCHED};
use crate::exec::keys::encode;
use crate::exec::keys::pages::{walk, TextPages, Visit};
use crate::exec::keys::values::Values;
use crate::exec::keys::GaveUp;
use crate::exec::ExecError as Error;

/// The staged keys of a single text key walked page by page (`pages`),
/// each run's in a set of its own, as `fingerprinted::streamed_sets` files
/// batches.
/// `most` keys at most a run (see `Fingerprinted`), each expected to take
/// `key_bytes`, fingerprinted with `bits`.
pub(super) async fn sets(
    pages: &TextPages,
    (most, key_bytes, bits): (Option<usize>, usize, Option<u32>),
    label: &str,
) -> Result<Vec<KeySet>, Error> {
    let share = room(pages.rows, pages.runs.len(), most);
    let over = Arc::new(AtomicBool::new(false));
    let pool: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
    let mask = encode::fingerprint_mask(bits);
    let (built, _) = walk(pages, label, || Building {
        set: KeySet::with_capacity(share, share * key_bytes),
        pending: Pending::default(),
        values: most.and_then(|most| Some(Values::new(mask, usize::MAX, &pool)?.for_lookup(most))),
        mask,
        most,
        full: false,
        over: over.clone(),
    })
    .await?;
    let mut sets = Vec::with_capacity(built.len());
    for mut b in built {
        b.flush();
        if let Some(why) = b.stop() {
            return Err(why);
        }
        sets.push(b.set);
    }
    Ok(sets)
}

/// A run's set of the staged keys walked page by page: values wait in
/// `pending` until [`TOUCHED`] of them are added together, their slots
/// touched first. A dictionary page's rows come by value, each value once
/// a chunk with its rows. Past `most` keys the run stops adding, and so do
/// the others (`over`), each at its next row group.
struct Building {
    set: KeySet,
    pending: Pending,
    /// A lookup's table of exact values, looked up a batch at a time with
    /// the cache asked ahead (see [`Values::batch`]), and filed into `set`
    /// at the end: the keys of a lookup are few, and 50M rows of 150,000
    /// e-mail addresses added to `set` one at a time took 4 s.
    values: Option<Values>,
    mask: u64,
    most: Option<usize>,
    full: bool,
    over: Arc<AtomicBool>,
}

/// Values waiting to be added: fingerprints, bytes, where each ends, and
/// rows.
#[derive(Default)]
struct Pending {
    hashes: Vec<u64>,
    keys: Vec<u8>,
    ends: Vec<usize>,
    rows: Vec<u32>,
}

impl Building {
    fn flush(&mut self) {
        // Past `most` keys the sets are not used: the lookup is spread.
        let over = self.over.load(Ordering::Relaxed);
        if let Some(values) = self.values.take().filter(|_| !over) {
            values.each(|w, value, rows| {
                let rows = u32::try_from(rows).unwrap_or(u32::MAX);
                self.set.add(w, value, rows);
            });
        }
        let Pending {
            hashes,
            keys,
            ends,
            rows,
        } = &mut self.pending;
        self.set.touch(hashes);
        let mut start = 0;
        for ((h, &end), &n) in hashes.iter().zip(ends.iter()).zip(rows.iter()) {
            self.set.add(*h, &keys[start..end], n);
            start = end;
        }
        hashes.clear();
        keys.clear();
        ends.clear();
        rows.clear();
        if self.most.is_some_and(|most| self.set.entries.len() > most) {
            self.over.store(true, Ordering::Relaxed);
        }
        self.full = self.over.load(Ordering::Relaxed);
    }
}

impl Visit for Building {
    fn value(&mut self, fingerprint: u64, value: &[u8]) {
        self.rows(fingerprint, value, 1);
    }

    /// Nulls are not kept, and a value's rows add up: order is free.
    fn by_value(&self) -> bool {
        true
    }

    fn batch(&mut self, values: &[(u64, &[u8])]) {
        match &mut self.values {
            Some(t) if !self.full => {
                if t.batch(values) < values.len() {
                    self.stop_adding();
                }
            }
            Some(_) => {}
            None => values.iter().for_each(|(h, v)| self.rows(*h, v, 1)),
        }
    }

    fn rows(&mut self, fingerprint: u64, value: &[u8], rows: u64) {
        if self.full {
            return;
        }
        if let Some(t) = &mut self.values {
            if !t.add(fingerprint, value, rows) {
                self.stop_adding();
            }
            return;
        }
        let p = &mut self.pending;
        p.hashes.push(fingerprint & self.mask);
        p.keys.extend_from_slice(value);
        p.ends.push(p.keys.len());
        // A tally's rows are a chunk's, which the walk keeps below 2^32.
        p.rows.push(u32::try_from(rows).unwrap_or(u32::MAX));
        if p.hashes.len() == TOUCHED {
            self.flush();
        }
    }

    fn nulls(&mut self, _: u64) {}

    fn stop(&mut self) -> Option<Error> {
        let most = self.most.filter(|_| self.over.load(Ordering::Relaxed))?;
        Some(GaveUp::TooManyKeys(most).into())
    }
}

impl Building {
    /// Past `most` keys (a lookup's table gives up there): this run stops
    /// adding, and so do the others at their next row group.
    fn stop_adding(&mut self) {
        self.over.store(true, Ordering::Relaxed);
        self.full = true;
    }
}
