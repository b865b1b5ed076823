//! The exact values of a single text key and their rows, tabled by the
//! first pass itself, so that a key whose values repeat is read once.
//!
//! The fingerprint path reads a text key twice: its first pass counts cut
//! fingerprints, and its verification files the exact key of every row
//! whose fingerprint repeated ([`super::verify`]). When the values repeat
//! (150,000 e-mail addresses in 10M rows), every row is such a row, and
//! the verification is a table of every value with its rows built over a
//! second read. Here each run of the page walk builds that table as it
//! reads, and when every run kept its table the tables, counted together
//! where they lie ([`super::together`]), are the answer: every value, its
//! rows, and the null rows.
//!
//! A run gives its table up, and counts fingerprints from then on:
//! - when too few of its rows repeat: from [`CHECK_FROM`] values on, each
//!   time the table grows, it estimates the share of the input's rows
//!   whose value occurs more than once, as if the rows came in random
//!   order (`r` rows seen of `R`, `c` values seen twice: `2Rc / r²`, which
//!   is 1 for a key of which every value occurs twice, scattered, and far
//!   above 1 when values repeat often or in key order), and gives up below
//!   [`REPEATING`]. A key of mostly unique values (`unique(order_id)`) is
//!   the fingerprint path's own case: its verification files only the few
//!   candidates, where the table would hold every value. (The share of
//!   values seen twice, tried first, cannot tell such a key from one whose
//!   every value occurs twice, scattered: both look unique in their first
//!   100,000 rows.);
//! - when it would outgrow the caches by the end of its run (past
//!   [`CACHED`]) and its rows as entries of bins would take no more room:
//!   the run then bins its values instead ([`super::binned`]);
//! - when the values it would hold at the end of its run would pass its
//!   share of the budget (the verification's, over the runs): as many as
//!   new ones came since it last grew, at that rate, or as Chao's estimate
//!   of the input's values says if fewer (see [`Values::pays`]); or when it
//!   passes that share, or the memory pool refuses it; a run whose values
//!   repeat then bins them instead (under a small `--memory-limit`: the
//!   verification would file nearly every row).
//!
//! The values tabled so far then go to the run's store as the page walk
//! pushes a value's rows by value (at most two words), so the first pass
//! counts the same fingerprints whichever way its rows came.
//!
//! A value is found by its cut fingerprint and compared byte for byte, so
//! the table is exact whatever the hash: two values under one fingerprint
//! take two slots. Its memory is the slots (8 bytes, at most 3/4 full),
//! each value's entry (its rows and length, 8 bytes, then its bytes,
//! padded to a multiple of 4) and its fingerprint (8 bytes, kept apart: a
//! lookup never reads it).

use std::sync::Arc;

use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::execution::runtime_env::RuntimeEnv;

use super::affixes::{Affixes, Chosen, SAMPLE};
use super::filed::prefetch;
use super::key::Key as _;
use super::{binned::Binned, encode::Kind};

/// Values tabled before a run asks whether enough of them repeat.
pub(super) const CHECK_FROM: usize = 1 << 16;

/// The least estimated share of rows that repeat for which a run keeps
/// its table (see the module's doc).
pub(super) const REPEATING: f64 = 0.25;

/// Values of a chunk: the tables are counted together a chunk at a time
/// ([`super::together`]).
/// (Small in unit tests, which cross their ends.)
pub(super) const CHUNK: usize = if cfg!(test) { 1 << 6 } else { 1 << 14 };

/// The fewest values seen twice from which a run whose table outgrew its
/// budget judges whether they repeat ([`Values::bins_past_budget`]).
const FEW_REPEATED: usize = 16;

/// The bytes above which a run's table would no longer stay in cache by
/// its end, so that it may bin its values instead ([`super::binned`]).
const CACHED: f64 = (32 << 20) as f64;

/// Slots of a new table.
const FIRST_SLOTS: usize = 1 << 10;

/// A run's table of a text key's values.
pub(super) struct Values {
    slots: Vec<Slot>,
    /// Each value's entry, at a multiple of 4 bytes: its rows and length
    /// (`u32`s, little-endian), and bytes.
    arena: Vec<u8>,
    /// Each value's cut fingerprint, in the entries' order: read only when
    /// the tables are counted together or given up.
    fingerprints: Vec<u64>,
    /// Where each [`CHUNK`]-th value's entry starts.
    marks: Vec<u32>,
    len: usize,
    /// Values with more than one row, and with exactly two.
    repeated: usize,
    twice: usize,
    /// Null rows.
    nulls: u64,
    /// What the table keeps of a fingerprint.
    mask: u64,
    /// The most bytes the table may take.
    most: usize,
    /// The most values it may hold (a test hook's, or a lookup's), and
    /// whether it keeps them whether or not they repeat (a lookup's).
    most_values: usize,
    keep: bool,
    /// Rows added (null rows aside).
    rows: u64,
    /// The input's rows, and a run's share of them.
    input_rows: u64,
    run_rows: u64,
    /// The values and rows when the slots last grew.
    grown: (usize, u64),
    /// The values from which the run bins them instead (a test hook's),
    /// and whether it gave the table up to do so ([`super::binned`]).
    bin_from: Option<usize>,
    to_bins: bool,
    reservation: MemoryReservation,
}

/// A value's tag (the high half of its fingerprint's mix, whose low bits
/// are its first slot) and where its entry starts ([`FREE`]: a free slot).
/// Eight bytes: a run's 150,000 e-mail addresses take 2 MiB of slots, which
/// a core's cache nearly holds, where 16-byte slots at most half full took
/// 8 MiB and a row waited on its slot 16% of the time. The entry holds the
/// rest, and a row that finds its value there compares its bytes there
/// anyway.
#[derive(Clone, Copy)]
struct Slot {
    tag: u32,
    start: u32,
}

const FREE: u32 = u32::MAX;

/// Bytes a slot takes.
const SLOT: usize = std::mem::size_of::<Slot>();

/// Bytes of an entry before its value's.
const HEAD: usize = 8;

/// Slots of a probe that a batch looks at ahead for a value's tag.
const PROBE_AHEAD: usize = 4;

/// The tag of cut fingerprint `w`.
#[inline]
fn tag_of(w: u64) -> u32 {
    (w.mix() >> 32) as u32
}

impl Values {
    /// Whether a walk of `rows` rows may table its values: its rows, and
    /// so any value's, fit an entry's `u32`.
    pub(super) fn fits(rows: u64) -> bool {
        rows <= u64::from(u32::MAX)
    }

    /// An empty table keeping `mask` of a fingerprint, taking at most
    /// `most` bytes of `pool`; `None` when even the first slots do not fit.
    pub(super) fn new(mask: u64, most: usize, pool: &Arc<dyn MemoryPool>) -> Option<Values> {
        let mut v = Values {
            slots: Vec::new(),
            arena: Vec::new(),
            fingerprints: Vec::new(),
            marks: Vec::new(),
            len: 0,
            repeated: 0,
            twice: 0,
            nulls: 0,
            mask,
            most,
            most_values: crate::hooks::exact_values().unwrap_or(usize::MAX),
            keep: false,
            rows: 0,
            input_rows: 0,
            run_rows: 0,
            grown: (0, 0),
            bin_from: crate::hooks::bin_values(),
            to_bins: false,
            reservation: MemoryConsumer::new("dqgate key values").register(pool),
        };
        v.resize(FIRST_SLOTS, 0).then_some(v)
    }

    /// The table of a lookup's staged keys: at most `most` values, kept
    /// whether or not they repeat.
    pub(super) fn for_lookup(mut self, most: usize) -> Values {
        self.most_values = most;
        self.keep = true;
        self
    }

    /// Whether the run gave the table up to bin its values instead, and
    /// the bytes and the most bytes its bins would take by its end
    /// ([`super::binned`]): half the table's budget, since past it they go
    /// to disk, and are read back once.
    /// (Turned to bins by the test hook, they start with room for the
    /// table's values only, so that they grow, and may fill, as they go.)
    pub(super) fn to_bins(&self) -> Option<(usize, usize)> {
        if !self.to_bins {
            return None;
        }
        Some(match self.bin_from.is_some_and(|n| n > 0) {
            true => self.as_bins(),
            false => (self.bins_end(), self.most / 2),
        })
    }

    /// The bytes the table's values take as entries of bins, and the most
    /// the bins may take in memory ([`super::binned`], [`Self::to_bins`]).
    pub(super) fn as_bins(&self) -> (usize, usize) {
        let entries = self.arena.len() + self.len * (super::binned::HEAD - HEAD);
        (entries, self.most / 2)
    }

    /// The bytes of the run's rows as entries of bins by its end: those
    /// left as rows, those seen as values, each of the values' mean length.
    fn bins_end(&self) -> usize {
        let left = self.run_rows.saturating_sub(self.rows) as usize;
        (self.len + left).saturating_mul(super::binned::HEAD + self.mean())
    }

    /// The values' mean length, about.
    fn mean(&self) -> usize {
        (self.arena.len() / self.len.max(1)).saturating_sub(HEAD)
    }

    /// The table's values (and null rows) as `bins` bins storing them
    /// without `affixes` (of this table's first values, if it is the first
    /// to bin), hashed as `kind` hashes text, with `room` (the bytes they
    /// would take by the run's end, and the most) in `runtime`'s pool.
    pub(super) fn to_binned(
        &self,
        (bins, affixes, kind): (usize, &Chosen, Kind),
        room: (usize, usize),
        runtime: &Arc<RuntimeEnv>,
    ) -> Option<Binned> {
        let affixes = affixes.get_or_init(|| {
            let mut sample = Vec::with_capacity(SAMPLE);
            if self.len > 0 {
                self.each_of(0, |_, v, _| sample.push(v));
            }
            Affixes::of(&sample[..sample.len().min(SAMPLE)]).map(Arc::new)
        });
        // Entries as long as the values stored without their affixes.
        let entry = super::binned::TEXT_HEAD + self.mean();
        let saved = affixes.as_ref().map_or(0, |a| a.saved()).min(entry);
        let room = (room.0 / entry.max(1) * (entry - saved), room.1);
        let shape = (bins, affixes.clone(), Some(kind));
        let mut binned = Binned::new(shape, self.mask, room, runtime)?;
        let mut fits = true;
        self.each(|w, value, rows| fits = fits && binned.add(w, value, rows));
        binned.nulls(self.null_rows());
        fits.then_some(binned)
    }

    /// How many values are tabled.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// How many values have more than one row.
    pub(super) fn repeated(&self) -> usize {
        self.repeated
    }

    /// The bytes the table takes.
    pub(super) fn bytes(&self) -> usize {
        self.reservation.size()
    }

    /// The table of a run of `runs` over an input of `rows` rows (unknown:
    /// as many as the table has seen).
    pub(super) fn for_input(mut self, rows: u64, runs: usize) -> Values {
        self.input_rows = rows;
        self.run_rows = rows / runs.max(1) as u64;
        self
    }

    /// Whether the table still pays and will fit (see the module's doc);
    /// false too when the run should bin its values instead
    /// ([`Self::to_bins`]).
    fn pays(&mut self) -> bool {
        let seen = self.rows.max(1) as f64;
        if self.repeating() < REPEATING {
            return false;
        }
        // The values at the run's end: at the rate new ones came since the
        // table last grew, or, when the values seen so far say that there
        // are fewer in all, as many as that (Chao's estimate of the values
        // of the whole input: those seen, and f1²/2f2 for f1 seen once and
        // f2 twice). Each overshoots one way: the rate of a key with fewer
        // values than rows falls as they are all seen (150,000 addresses
        // in 50M rows), and Chao's estimate of a key each of whose values
        // occurs twice is far too high in its first rows.
        let (len, rows) = self.grown;
        let rate = (self.len - len) as f64 / (self.rows - rows).max(1) as f64;
        let left = (self.run_rows as f64 - seen).max(0.0);
        let once = (self.len - self.repeated) as f64;
        let all = self.len as f64 + once * once / (2 * self.twice.max(1)) as f64;
        let end = (self.len as f64 + rate * left).min(all);
        let per_value = self.bytes() as f64 / self.len.max(1) as f64;
        let table_end = end * per_value;
        // A table beyond the caches, whose rows would take no more room
        // as entries of bins, is given up for them (which, past the
        // budget, go to disk).
        if self.bin_from != Some(0) && table_end > CACHED {
            let bins = self.bins_end() as f64;
            if bins <= table_end {
                self.to_bins = true;
                return false;
            }
        }
        table_end <= self.most as f64
    }

    /// The estimated share of the input's rows that repeat (module doc).
    fn repeating(&self) -> f64 {
        let seen = self.rows.max(1) as f64;
        let input = (self.input_rows as f64).max(seen);
        2.0 * input * self.repeated as f64 / (seen * seen)
    }

    /// Whether a run whose table outgrew its budget bins its values rather
    /// than give them up as fingerprints: when they repeat, as estimated
    /// from [`FEW_REPEATED`] values seen twice at least.
    fn bins_past_budget(&self) -> bool {
        !self.keep
            && self.bin_from != Some(0)
            && self.repeated >= FEW_REPEATED
            && self.repeating() >= REPEATING
    }

    /// Takes `slots` slots (rehashing every value) and room for `arena`
    /// bytes of entries, if the budget and the pool allow it.
    fn resize(&mut self, slots: usize, arena: usize) -> bool {
        let arena = arena.max(self.arena.len());
        // The slots, and a fingerprint for each value they may hold.
        let bytes = (slots.saturating_mul(SLOT + 6)).saturating_add(arena);
        if bytes > self.most || arena >= FREE as usize {
            return false;
        }
        if self.reservation.try_resize(bytes).is_err() {
            return false;
        }
        if slots != self.slots.len() {
            let free = Slot {
                tag: 0,
                start: FREE,
            };
            let old = std::mem::replace(&mut self.slots, vec![free; slots]);
            for s in old.into_iter().filter(|s| s.start != FREE) {
                let i = self.free(s.tag);
                self.slots[i] = s;
            }
        }
        self.arena.reserve_exact(arena - self.arena.len());
        let values = slots / 4 * 3;
        self.fingerprints
            .reserve_exact(values.saturating_sub(self.fingerprints.len()));
        true
    }

    /// Room for a new value of `bytes` bytes: false when the table gives
    /// up (see the module's doc). The slots are at most 3/4 full.
    fn room(&mut self, bytes: usize) -> bool {
        if self.len >= self.most_values {
            return false;
        }
        let mut slots = self.slots.len();
        if (self.len + 1) * 4 > slots * 3 {
            if !self.keep && self.bin_from.is_some_and(|n| n > 0 && self.len >= n) {
                self.to_bins = true;
                return false;
            }
            if !self.keep && self.len >= CHECK_FROM && !self.pays() {
                return false;
            }
            self.grown = (self.len, self.rows);
            slots *= 2;
        }
        let need = self.arena.len() + entry_bytes(bytes);
        let arena = match need > self.arena.capacity() {
            true => need.max(self.arena.capacity() * 2).max(1 << 12),
            false => self.arena.capacity(),
        };
        let fits = (slots == self.slots.len() && arena == self.arena.capacity())
            || self.resize(slots, arena);
        if !fits && self.bins_past_budget() {
            self.to_bins = true;
        }
        fits
    }

    /// The first slot of a value of tag `tag`.
    #[inline]
    fn home(&self, tag: u32) -> usize {
        tag as usize & (self.slots.len() - 1)
    }

    /// The first free slot of tag `tag`'s probe.
    fn free(&self, tag: u32) -> usize {
        let mut i = self.home(tag);
        while self.slots[i].start != FREE {
            i = (i + 1) & (self.slots.len() - 1);
        }
        i
    }

    /// The `u32` at `at` in the arena.
    #[inline]
    fn u32_at(&self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.arena[at..at + 4]);
        u32::from_le_bytes(b)
    }

    /// The entry at `start`: its rows and bytes.
    #[inline]
    fn entry(&self, start: usize) -> (u32, &[u8]) {
        let len = self.u32_at(start + 4) as usize;
        (
            self.u32_at(start),
            &self.arena[start + HEAD..start + HEAD + len],
        )
    }

    /// The slot of `value` (of tag `tag`): `Ok` where it is, `Err` the
    /// free slot where it would go.
    #[inline]
    fn find(&self, tag: u32, value: &[u8]) -> Result<usize, usize> {
        let mut i = self.home(tag);
        loop {
            let s = self.slots[i];
            if s.start == FREE {
                return Err(i);
            }
            if s.tag == tag && self.entry(s.start as usize).1 == value {
                return Ok(i);
            }
            i = (i + 1) & (self.slots.len() - 1);
        }
    }

    /// Adds `rows` rows of `value` (of fingerprint `fingerprint`); false,
    /// adding nothing, when the table gives up.
    #[inline]
    pub(super) fn add(&mut self, fingerprint: u64, value: &[u8], rows: u64) -> bool {
        let w = fingerprint & self.mask;
        let tag = tag_of(w);
        // A run's rows fit a u32 (`fits`), and so do a value's.
        let rows = u32::try_from(rows).unwrap_or(u32::MAX);
        if rows == 0 {
            return true;
        }
        let i = match self.find(tag, value) {
            Ok(i) => {
                let at = self.slots[i].start as usize;
                let had = self.u32_at(at);
                let now = had.saturating_add(rows);
                self.repeated += usize::from(had == 1);
                self.twice = self.twice + usize::from(now == 2) - usize::from(had == 2);
                self.arena[at..at + 4].copy_from_slice(&now.to_le_bytes());
                self.rows += u64::from(rows);
                return true;
            }
            Err(i) => i,
        };
        let slots = self.slots.len();
        if !self.room(value.len()) {
            return false;
        }
        let i = match self.slots.len() == slots {
            true => i,
            false => self.free(tag),
        };
        let start = self.arena.len();
        self.slots[i] = Slot {
            tag,
            start: start as u32,
        };
        self.arena.extend_from_slice(&rows.to_le_bytes());
        self.arena
            .extend_from_slice(&(value.len() as u32).to_le_bytes());
        self.arena.extend_from_slice(value);
        self.arena.resize(start + entry_bytes(value.len()), 0);
        self.fingerprints.push(w);
        if self.len.is_multiple_of(CHUNK) {
            self.marks.push(start as u32);
        }
        self.len += 1;
        self.rows += u64::from(rows);
        self.repeated += usize::from(rows > 1);
        self.twice += usize::from(rows == 2);
        true
    }

    /// Asks the cache for the slots of `values`, then for the entries of
    /// those found at the first slot of their probe that holds their tag
    /// (a value moved on by another's is in the same cache line or the
    /// next; an entry may cross a line), so that one value's misses
    /// overlap the others'.
    pub(super) fn ask(&self, values: &[(u64, &[u8])]) {
        for (w, _) in values {
            prefetch(&self.slots[self.home(tag_of(w & self.mask))]);
        }
        for (w, value) in values {
            let t = tag_of(w & self.mask);
            let mut i = self.home(t);
            for _ in 0..PROBE_AHEAD {
                let s = self.slots[i];
                if s.start == FREE {
                    break;
                }
                if s.tag == t {
                    let at = self.arena.as_ptr().wrapping_add(s.start as usize);
                    prefetch(at);
                    prefetch(at.wrapping_add(HEAD + value.len().max(1) - 1));
                    break;
                }
                i = (i + 1) & (self.slots.len() - 1);
            }
        }
    }

    /// Adds a row of each of `values`, looked up side by side
    /// ([`Self::ask`]). Returns how many were added: all, or those before
    /// the one at which the table gave up.
    pub(super) fn batch(&mut self, values: &[(u64, &[u8])]) -> usize {
        self.ask(values);
        for (k, (w, value)) in values.iter().enumerate() {
            if !self.add(*w, value, 1) {
                return k;
            }
        }
        values.len()
    }

    /// The rows of `value` (of cut fingerprint `w`), if it is tabled.
    #[inline]
    pub(super) fn rows_of(&self, w: u64, value: &[u8]) -> Option<u64> {
        let i = self.find(tag_of(w & self.mask), value).ok()?;
        Some(u64::from(self.u32_at(self.slots[i].start as usize)))
    }

    /// Empties the table, keeping its room (and its reservation).
    pub(super) fn clear(&mut self) {
        let free = Slot {
            tag: 0,
            start: FREE,
        };
        self.slots.fill(free);
        self.arena.clear();
        self.fingerprints.clear();
        self.marks.clear();
        (self.len, self.repeated, self.twice) = (0, 0, 0);
        (self.rows, self.nulls, self.grown) = (0, 0, (0, 0));
    }

    /// Adds `n` null rows.
    pub(super) fn nulls(&mut self, n: u64) {
        self.nulls += n;
    }

    /// The null rows.
    pub(super) fn null_rows(&self) -> u64 {
        self.nulls
    }

    /// Every value, with its cut fingerprint and rows, in the order they
    /// were first tabled.
    pub(super) fn each<'a>(&'a self, mut f: impl FnMut(u64, &'a [u8], u64)) {
        for c in 0..self.chunks() {
            self.each_of(c, &mut f);
        }
    }

    /// How many chunks of [`CHUNK`] values ([`Self::each_of`]) the table
    /// holds.
    pub(super) fn chunks(&self) -> usize {
        self.marks.len()
    }

    /// The values of chunk `c`, as [`Self::each`] gives them.
    pub(super) fn each_of<'a>(&'a self, c: usize, mut f: impl FnMut(u64, &'a [u8], u64)) {
        let mut at = self.marks[c] as usize;
        let ends = self.len.min((c + 1) * CHUNK);
        for w in &self.fingerprints[c * CHUNK..ends] {
            let (rows, value) = self.entry(at);
            f(*w, value, u64::from(rows));
            at += entry_bytes(value.len());
        }
    }
}

/// The bytes of an entry of a value of `bytes` bytes: a multiple of 4.
fn entry_bytes(bytes: usize) -> usize {
    (HEAD + bytes).next_multiple_of(4)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use datafusion::execution::memory_pool::{GreedyMemoryPool, UnboundedMemoryPool};

    use super::super::testing::{next, ranked};
    use super::super::together;
    use super::*;
    use crate::exec::SAMPLES;

    /// Tabled against a map of every value: whatever the fingerprints'
    /// collisions (cut to 4 bits here), the empty value included, in
    /// batches and by value, over several tables counted together.
    #[test]
    fn tabled_values_match_a_map() {
        let pool: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut tables: Vec<Values> = (0..3)
            .map(|_| Values::new(0xF, usize::MAX, &pool).unwrap())
            .collect();
        let mut want: HashMap<Vec<u8>, u64> = HashMap::new();
        let mut nulls = 0;
        for _ in 0..400 {
            let t = &mut tables[(next(&mut state) % 3) as usize];
            let values: Vec<Vec<u8>> = (0..1 + next(&mut state) % 32)
                .map(|_| {
                    let v = next(&mut state) % 3000;
                    match v % 7 {
                        0 => Vec::new(),
                        _ => format!("v{v}").into_bytes(),
                    }
                })
                .collect();
            let hashed: Vec<(u64, &[u8])> = (values.iter())
                .map(|v| {
                    let h = (v.iter()).fold(7u64, |h, b| h.wrapping_mul(31) ^ u64::from(*b));
                    (h, &v[..])
                })
                .collect();
            let rows = match next(&mut state) % 3 {
                0 => {
                    assert_eq!(t.batch(&hashed), hashed.len());
                    1
                }
                1 => {
                    for (h, v) in &hashed {
                        assert!(t.add(*h, v, 3));
                    }
                    3
                }
                _ => {
                    t.nulls(2);
                    nulls += 2;
                    continue;
                }
            };
            for v in values {
                *want.entry(v).or_default() += rows;
            }
        }
        for t in &tables {
            let mut each = 0;
            t.each(|_, _, _| each += 1);
            assert_eq!(each, t.len());
        }
        // Every repeated key (a null one as tag 0), ranked.
        let ranked = ranked(&want, nulls);
        for threads in [1, 2, 3] {
            let got = together::found(&tables, threads);
            assert_eq!(got.distinct, (want.len() + usize::from(nulls > 0)) as u64);
            assert_eq!(got.repeated, ranked.len() as u64);
            assert_eq!(got.samples(), ranked[..ranked.len().min(SAMPLES)]);
        }
        let null_rows: u64 = tables.iter().map(Values::null_rows).sum();
        assert_eq!(null_rows, nulls);
    }

    /// A table of unique values gives up when it grows past [`CHECK_FROM`]
    /// of them, one that repeats does not, nor one of values each twice in
    /// random order, nor one of a few values of a large input whose first
    /// rows bring new ones fast; a budget or a pool too small for the next
    /// growth gives up too, adding nothing.
    #[test]
    fn a_table_gives_up_when_it_does_not_pay_or_fit() {
        let pool: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
        let mut unique = Values::new(u64::MAX, usize::MAX, &pool).unwrap();
        let added = (0u64..).take_while(|i| unique.add(i.mix(), &i.to_le_bytes(), 1));
        let n = added.count();
        assert!((CHECK_FROM..2 * CHECK_FROM).contains(&n), "{n}");
        let mut repeating = Values::new(u64::MAX, usize::MAX, &pool).unwrap();
        for i in 0..(4 * CHECK_FROM) as u64 {
            let rows = 1 + u64::from(i % 4 == 0);
            assert!(repeating.add(i.mix(), &i.to_le_bytes(), rows));
        }
        // Every value twice, scattered: its first rows look unique, but
        // for the input's size too many of them repeat already.
        let n = 3 * CHECK_FROM as u64;
        let mut pairs = Values::new(u64::MAX, usize::MAX, &pool)
            .unwrap()
            .for_input(2 * n, 1);
        let mut rows: Vec<u64> = (0..2 * n).map(|i| i / 2).collect();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for i in (1..rows.len()).rev() {
            rows.swap(i, (next(&mut state) % (i as u64 + 1)) as usize);
        }
        for v in rows {
            assert!(pairs.add(v.mix(), &v.to_le_bytes(), 1), "{}", pairs.len());
        }
        assert_eq!(pairs.len() as u64, n);
        // 150,000 values drawn at random, as if from 50M rows: when the
        // table first asks, new values still come at about one row in
        // two, which 50M rows would make 24M values, but the values seen
        // say there are about 150,000 in all, which fit.
        let mut drawn = Values::new(u64::MAX, 64 << 20, &pool)
            .unwrap()
            .for_input(50_000_000, 1);
        let mut want = std::collections::HashSet::new();
        for _ in 0..600_000 {
            let v = next(&mut state) % 150_000;
            want.insert(v);
            assert!(drawn.add(v.mix(), &v.to_le_bytes(), 1), "{}", drawn.len());
        }
        assert_eq!(drawn.len(), want.len());
        // Every value twice, scattered, over 10M rows: the table would
        // outgrow the caches, and the rows as bins' entries take less
        // room, so it turns to bins (whatever its budget: past it they
        // go to disk) as soon as it first asks.
        let mut scattered = Values::new(u64::MAX, 1 << 28, &pool)
            .unwrap()
            .for_input(10_000_000, 2);
        let mut draws = 0x9E37_79B9_7F4A_7C15u64;
        let mut n = 0;
        loop {
            let v = next(&mut draws) % 5_000_000;
            if !scattered.add(v.mix(), &v.to_le_bytes(), 1) {
                break;
            }
            n += 1;
        }
        let n = n as usize;
        assert!((CHECK_FROM..2 * CHECK_FROM).contains(&n), "{n}");
        let (end, most) = scattered.to_bins().unwrap();
        assert_eq!(most, 1 << 27);
        assert!((4_900_000 * 18..5_000_000 * 18).contains(&end), "{end}");
        assert!(unique.to_bins().is_none() && repeating.to_bins().is_none());
        // A budget or a pool too small: values that repeat turn to bins
        // (which go to disk past their share), unique ones do not.
        let mut small = Values::new(u64::MAX, 1 << 15, &pool).unwrap();
        let added = (0u64..).take_while(|i| small.add(i.mix(), &i.to_le_bytes(), 2));
        assert!(added.count() < 1000 && small.to_bins().is_some());
        let mut small = Values::new(u64::MAX, 1 << 15, &pool).unwrap();
        let added = (0u64..).take_while(|i| small.add(i.mix(), &i.to_le_bytes(), 1));
        assert!(added.count() < 1000 && small.to_bins().is_none());
        let tight: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(40_000));
        let mut refused = Values::new(u64::MAX, usize::MAX, &tight).unwrap();
        let added = (0u64..).take_while(|i| refused.add(i.mix(), &i.to_le_bytes(), 2));
        let n = added.count();
        assert!(
            n < 2000 && n == refused.len() && refused.to_bins().is_some(),
            "{n}"
        );
        // Every value twice, scattered, over 10M rows, under 1 MiB: the
        // table fills long before it would first ask, with enough values
        // seen twice to tell that they repeat; fewer than
        // [`FEW_REPEATED`] (a smaller budget) are not enough to tell.
        for (most, bins) in [(1 << 20, true), (1 << 16, false)] {
            let mut pairs = Values::new(u64::MAX, most, &pool)
                .unwrap()
                .for_input(10_000_000, 2);
            let mut draws = 0x2545_F491_4F6C_DD1Du64;
            let drawn = std::iter::from_fn(|| Some(next(&mut draws) % 5_000_000));
            let n = drawn
                .take_while(|v| pairs.add(v.mix(), &v.to_le_bytes(), 1))
                .count();
            assert!(n < CHECK_FROM, "{n}");
            assert_eq!(pairs.to_bins().is_some(), bins, "{n} {}", pairs.repeated());
        }
        assert!(Values::new(u64::MAX, 100, &pool).is_none());
    }
}
