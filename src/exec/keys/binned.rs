//! A single text key's exact values binned by fingerprint as the first
//! pass reads them, and tabled a bin at a time at its end.
//!
//! A run's table of exact values ([`super::values`]) looks each row up
//! among every value it has seen. When that table outgrows the caches
//! (every key twice, scattered: 3.75M values a run at 10M rows, 280 MB),
//! each row waits on memory for its slot and for its entry. A run whose
//! table would grow that large, and whose rows would take no more room as
//! entries of their own than its values would in the table (few rows a
//! value), bins them instead: each row's value is appended to one of the
//! bins, picked by its fingerprint, as it comes. At the end of the pass the
//! same bin of every run is tabled at once, in a table that stays in cache
//! (a few thousand values), the bins shared out over the threads. A value
//! falls in the same bin in every run, so a bin's table counts it whole,
//! and no value is looked up twice.
//!
//! An entry is the value's length and, past one, its rows (varints, see
//! [`Form`]), then its bytes (without the prefix and suffix most of the
//! key's values share, when there are such: [`super::affixes`]). A text
//! value's fingerprint is hashed again from its bytes should the bins be
//! given up to the store; a composite's entry (its bytes are Arrow's row
//! format, not what the fingerprint hashed) starts with the bytes its
//! run's cut may set (5 at 10M rows). A value is found in a bin's table by
//! a hash of its bytes (a composite's: its fingerprint) and compared byte
//! for byte, so the count is exact whatever the hash.
//!
//! A value that comes back to its bin with other values in between takes
//! an entry each time. When values of a few thousand rows each, or a few
//! very common ones sharing a bin, make one bin far larger than the rest,
//! that bin is tabled in place before it grows: its most common values
//! (those a small table meets first) become an entry each, with their
//! rows summed, so that one bin neither holds the run's budget nor, at the
//! end, a table and a read-back of its own the size of the input.
//!
//! The bins take at most the run's share of the budget, as its table
//! would. Past it, or when the memory pool refuses them, every bin is
//! appended to the run's temporary file (DataFusion's disk manager), one
//! segment a bin, and emptied, keeping its room: a hash aggregation of
//! Grace's kind, whose partitions the scan fills as it goes. A bin is then
//! tabled from its segments read back and what memory holds. With nowhere
//! to write, the run gives its bins up: each entry goes to the run's store
//! as the table's values would, and the verification answers.

use std::sync::Arc;

use datafusion::common::hash_utils::RandomState;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::runtime_env::RuntimeEnv;

use super::affixes::Affixes;
use super::count::share;
use super::encode::{self, Kind};
use super::entries::{Form, TAGS};
use super::filed::prefetch;
use super::found::Tallied;
use super::key::Key as _;
use super::pages::BATCH;
use super::segments::Segments;
use super::store::StoreError;

/// Rows of the input a bin holds at most, about (the bins of a run are a
/// power of two): a bin of every run then takes some hundreds of KiB, and
/// its table as much again, which a core's cache holds.
const ROWS_PER_BIN: u64 = 16384;

/// The least room a bin may have in the budget: a bin is written to disk
/// when one of them is full, and bins of a few entries each would be
/// written mostly empty.
const LEAST_ROOM: usize = 4 << 10;

/// A bin is tabled in place ([`Binned::compact`]) when it must grow past
/// this many times the other bins' mean room, and past twice what it held
/// after it was last tabled; before the bins are written to disk, from
/// half as many.
const OUTSIZED: usize = 8;

/// Slots of the table a bin is tabled in place with: the values it meets
/// first (up to three quarters of them) take one entry each, the rest
/// stay as they are.
const COMPACT_SLOTS: usize = 4096;

/// The fewest and the most bins.
const FEWEST_BINS: usize = 16;
const MOST_BINS: usize = 1 << 13;

/// Bytes of an entry before its value's, at most: its fingerprint, and its
/// length and rows as varints (at most 5 bytes each).
const HEAD_MOST: usize = 18;

/// Bytes of an entry's head, about, as a table's value becomes (a byte
/// or two more than most runs' heads: a fingerprint of 5 or 6 bytes, and
/// a byte for a value of less than 64 bytes in one row).
pub(super) const HEAD: usize = 10;

/// Bytes of a text value's entry before its value's, about (it keeps no
/// fingerprint).
pub(super) const TEXT_HEAD: usize = 2;

/// The bins of an input of `rows` rows, each run's taking at most `most`
/// bytes in memory (a text key's run: half its table's share, see
/// [`super::values::Values::to_bins`]), the same in every run: fewer
/// under a small budget, so that each keeps [`LEAST_ROOM`] (each bin of
/// the input then holds more values, tabled from its segments on disk).
pub(super) fn bins_for(rows: u64, most: usize) -> usize {
    let bins = (rows / ROWS_PER_BIN).max(1) as usize;
    let room = (most / LEAST_ROOM).max(1);
    let room = 1 << room.ilog2();
    bins.next_power_of_two()
        .min(room)
        .clamp(FEWEST_BINS, MOST_BINS)
}

/// A run's values, binned.
pub(super) struct Binned {
    bins: Vec<Vec<u8>>,
    /// Entries in each bin, where the last one starts in it, and its cut
    /// fingerprint (compared before its entry is read).
    counts: Vec<u32>,
    last: Vec<u32>,
    last_w: Vec<u64>,
    /// The bytes each bin must reach before it is tabled in place again,
    /// and the table it is tabled with.
    compact_at: Vec<usize>,
    compact_slots: Vec<Slot>,
    /// How many times a bin was, and from how many times the others'
    /// mean room ([`OUTSIZED`]).
    tabled_in_place: u32,
    outsized: usize,
    /// A value's bin is its fingerprint's mix shifted down by this.
    shift: u32,
    /// What the run keeps of a fingerprint, and how its entries are
    /// written.
    mask: u64,
    form: Form,
    /// Null rows.
    nulls: u64,
    /// The most bytes the bins may take, and those they take.
    most: usize,
    held: usize,
    reservation: MemoryReservation,
    /// The bins written to the run's temporary file each time they filled
    /// the budget.
    segments: Segments,
    /// The affixes every run's values are stored without, if any, and a
    /// value as stored ([`super::affixes`]).
    affixes: Option<Arc<Affixes>>,
    stored: Vec<u8>,
    /// How a text value's fingerprint is hashed again from its bytes
    /// (`None`: a composite's, kept in its entry).
    kind: Option<Kind>,
}

impl Binned {
    /// `bins` (a power of two) empty bins keeping `mask` of a fingerprint
    /// (hashed again as `kind` hashes text, or kept in the entries when
    /// `None`), with room for `expected` bytes of entries in all (or as
    /// many as `most`), taking at most `most` bytes of `runtime`'s pool,
    /// the rest written to its disk, their values stored without
    /// `affixes` (the same in every run); `None` when that room is refused.
    pub(super) fn new(
        (bins, affixes, kind): (usize, Option<Arc<Affixes>>, Option<Kind>),
        mask: u64,
        (expected, most): (usize, usize),
        runtime: &Arc<RuntimeEnv>,
    ) -> Option<Binned> {
        let most = most.min(crate::hooks::bin_bytes().unwrap_or(usize::MAX));
        if most / bins < LEAST_ROOM {
            return None;
        }
        // A sixteenth more than the mean, for the bins above it.
        let mean = expected.min(most) / bins;
        let each = (mean + mean / 16).next_multiple_of(64).min(most / bins);
        let held = each * bins;
        let reservation = MemoryConsumer::new("dqgate key bins").register(&runtime.memory_pool);
        if reservation.try_grow(held).is_err() {
            return None;
        }
        Some(Binned {
            bins: (0..bins).map(|_| Vec::with_capacity(each)).collect(),
            counts: vec![0; bins],
            last: vec![u32::MAX; bins],
            last_w: vec![0; bins],
            compact_at: vec![0; bins],
            compact_slots: Vec::new(),
            tabled_in_place: 0,
            outsized: crate::hooks::outsized_bin().unwrap_or(OUTSIZED).max(1),
            shift: 64 - bins.trailing_zeros(),
            mask,
            form: Form::of(kind.is_none().then_some(mask)),
            nulls: 0,
            most,
            held,
            reservation,
            segments: Segments::new(runtime, "dqgate key bins"),
            affixes,
            stored: Vec::new(),
            kind,
        })
    }

    /// The bin of cut fingerprint `w`.
    #[inline]
    fn bin(&self, w: u64) -> usize {
        (w.mix() >> self.shift) as usize
    }

    /// Adds `rows` rows of `value` (of fingerprint `fingerprint`); false,
    /// adding nothing, when the bins are full and cannot be written to
    /// disk (see the module's doc).
    #[inline]
    pub(super) fn add(&mut self, fingerprint: u64, value: &[u8], rows: u64) -> bool {
        let Some(affixes) = &self.affixes else {
            return self.put(fingerprint, value, rows);
        };
        let mut stored = std::mem::take(&mut self.stored);
        affixes.store(value, &mut stored);
        let added = self.put(fingerprint, &stored, rows);
        self.stored = stored;
        added
    }

    /// [`Self::add`] of a value as stored.
    #[inline]
    fn put(&mut self, fingerprint: u64, value: &[u8], rows: u64) -> bool {
        let w = fingerprint & self.mask;
        if rows == 0 {
            return true;
        }
        let (Ok(rows), Ok(_)) = (u32::try_from(rows), u32::try_from(value.len())) else {
            return false;
        };
        let b = self.bin(w);
        // A value that is its bin's last entry again (a value more common
        // than the bin's others) adds its rows to that entry: its rows and
        // bytes written again, in room it has (its rows take a byte more
        // at most).
        let last = self.last[b] as usize;
        let (form, bin) = (self.form, &mut self.bins[b]);
        if last < bin.len() && self.last_w[b] == w && bin.capacity() - bin.len() >= 5 {
            let (_, bytes, n, _) = form.entry(bin, last);
            if bytes == value {
                if let Ok(rows) = u32::try_from(n + u64::from(rows)) {
                    bin.truncate(last);
                    form.put(bin, w, value, u64::from(rows));
                    return true;
                }
            }
        }
        let need = HEAD_MOST + value.len();
        if self.bins[b].capacity() - self.bins[b].len() < need
            && !self.compact(b, need)
            && !self.grow(b, need)
            && !(self.spill() && (self.bins[b].capacity() >= need || self.grow(b, need)))
        {
            return false;
        }
        let bin = &mut self.bins[b];
        self.last[b] = u32::try_from(bin.len()).unwrap_or(u32::MAX);
        self.last_w[b] = w;
        self.form.put(bin, w, value, u64::from(rows));
        self.counts[b] += 1;
        true
    }

    /// Adds a row of each of `values`, the ends of their bins asked of the
    /// cache first, so that the rows' misses overlap (each row starts a
    /// cache line of its bin, more often than not). Returns how many were
    /// added: all, or those before the one at which the bins were full.
    pub(super) fn batch(&mut self, values: &[(u64, &[u8])]) -> usize {
        let mut bins = [0u32; BATCH];
        for ((w, value), b) in values.iter().zip(&mut bins) {
            *b = self.bin(w & self.mask) as u32;
            let bin = &self.bins[*b as usize];
            let end = bin.as_ptr().wrapping_add(bin.len());
            prefetch(end);
            prefetch(end.wrapping_add(HEAD + value.len() - 1));
            // The bin's last entry, which the row is compared with first
            // when their fingerprints are equal.
            if self.last_w[*b as usize] == w & self.mask {
                let last = (self.last[*b as usize] as usize).min(bin.len());
                prefetch(bin.as_ptr().wrapping_add(last));
            }
        }
        for (k, (w, value)) in values.iter().enumerate() {
            if !self.add(*w, value, 1) {
                return k;
            }
        }
        values.len()
    }

    /// Room for `need` more bytes in bin `b`, if the budget and the pool
    /// allow it.
    fn grow(&mut self, b: usize, need: usize) -> bool {
        let bin = &mut self.bins[b];
        let had = bin.capacity();
        let want = (had + had / 4).max(bin.len() + need).max(256);
        let more = want - had;
        if self.held + more > self.most || self.reservation.try_grow(more).is_err() {
            return false;
        }
        bin.reserve_exact(want - bin.len());
        self.held += more;
        true
    }

    /// Tables bin `b` in place if it is far larger than the other bins
    /// (see [`OUTSIZED`]) and the pool lends the room of a second copy for
    /// the while: true if it then has room for `need` more bytes.
    fn compact(&mut self, b: usize, need: usize) -> bool {
        self.outsized(b, 1)
            && self.bins[b].len() >= self.compact_at[b]
            && self.table_in_place(b)
            && self.bins[b].capacity() - self.bins[b].len() >= need
    }

    /// Whether bin `b` holds at least [`LEAST_ROOM`], and `1 / part` of
    /// [`OUTSIZED`] times the other bins' mean room.
    fn outsized(&self, b: usize, part: usize) -> bool {
        let others =
            self.held.saturating_sub(self.bins[b].capacity()) / (self.bins.len() - 1).max(1);
        let len = self.bins[b].len();
        len >= LEAST_ROOM && part * len >= self.outsized.saturating_mul(others)
    }

    /// Tables bin `b` in place, if the pool lends the room of a second
    /// copy for the while: its values that the table of
    /// [`COMPACT_SLOTS`] meets first become an entry each.
    fn table_in_place(&mut self, b: usize) -> bool {
        let bin = &self.bins[b];
        self.compact_at[b] = 2 * bin.len();
        let room = bin.capacity();
        if self.reservation.try_grow(room).is_err() {
            return false;
        }
        let (form, slots) = (self.form, &mut self.compact_slots);
        slots.clear();
        slots.resize(COMPACT_SLOTS, FREE_SLOT);
        let mut out = Vec::with_capacity(room);
        let (mut tabled, mut had, mut entries) = (0, 0, 0);
        let state = RandomState::with_seed(TAGS);
        for (at, w, value, rows) in form.entries(bin) {
            had += 1;
            let tag = form.tag(w, value, &state);
            let found = lookup(slots, tag, value, |s| form.entry(bin, s.at as usize).1);
            match found {
                Ok(i) => slots[i].rows += rows,
                Err(i) if tabled < COMPACT_SLOTS / 4 * 3 => {
                    slots[i] = Slot {
                        tag,
                        run: 0,
                        at: at as u64,
                        rows,
                    };
                    tabled += 1;
                }
                Err(_) => {
                    form.put(&mut out, w, value, rows);
                    entries += 1;
                }
            }
        }
        for s in slots.iter().filter(|s| s.run != FREE) {
            let (w, value, ..) = form.entry(bin, s.at as usize);
            form.put(&mut out, w, value, s.rows);
            entries += 1;
        }
        self.bins[b] = out;
        self.reservation.shrink(room);
        self.counts[b] = self.counts[b] - had + entries;
        self.last[b] = u32::MAX;
        self.compact_at[b] = self.compact_at[b].min(2 * self.bins[b].len());
        self.tabled_in_place += 1;
        true
    }

    /// Appends every bin to the run's temporary file, and empties it
    /// (keeping its room); false when there is none to write to, or a
    /// write failed: the bins not yet written then keep their entries
    /// (an empty segment each), so that giving them up loses none.
    fn spill(&mut self) -> bool {
        if self.segments.open().is_err() {
            return false;
        }
        // A bin far above the others is tabled first, so that what it
        // writes, read back at the end, stays near the others' size.
        for b in 0..self.bins.len() {
            if self.outsized(b, 2) {
                self.table_in_place(b);
            }
        }
        let written = self.segments.write(&mut self.bins).is_ok();
        for (bin, last) in self.bins.iter().zip(&mut self.last) {
            if bin.is_empty() {
                *last = u32::MAX;
            }
        }
        written
    }

    /// The bytes written to disk.
    pub(super) fn written(&self) -> u64 {
        self.segments.len()
    }

    /// Bin `b`'s segments on disk, read into `buf`, and what memory holds
    /// of it: the entries of bin `b`, in parts.
    fn parts<'a>(&'a self, b: usize, buf: &'a mut Vec<u8>) -> Result<Vec<&'a [u8]>, StoreError> {
        self.segments.read(b, buf)?;
        Ok(vec![&buf[..], &self.bins[b]])
    }

    /// Adds `n` null rows.
    pub(super) fn nulls(&mut self, n: u64) {
        self.nulls += n;
    }

    /// How many bins.
    pub(super) fn bins(&self) -> usize {
        self.bins.len()
    }

    /// How many bins, and what their values are stored without.
    pub(super) fn shape(&self) -> (usize, String) {
        let affixes = (self.affixes.as_ref()).map_or(String::new(), |a| format!(", {a}"));
        (self.bins.len(), affixes)
    }

    /// The bytes the bins take.
    pub(super) fn bytes(&self) -> usize {
        self.held
    }

    /// How many times a bin was tabled in place.
    pub(super) fn tabled_in_place(&self) -> u32 {
        self.tabled_in_place
    }

    /// Every entry, with its cut fingerprint (hashed again, for text) and
    /// rows, bin by bin (those on disk read back); then the null rows.
    pub(super) fn each(&self, mut f: impl FnMut(u64, &[u8], u64)) -> Result<u64, StoreError> {
        let (mut buf, mut value) = (Vec::new(), Vec::new());
        let state = RandomState::with_seed(encode::SEED);
        for b in 0..self.bins.len() {
            for part in self.parts(b, &mut buf)? {
                for (_, w, stored, rows) in self.form.entries(part) {
                    let value = self.value(stored, &mut value);
                    let w = match self.kind {
                        Some(kind) => encode::first(kind, &state, value) & self.mask,
                        None => w,
                    };
                    f(w, value, rows);
                }
            }
        }
        Ok(self.nulls)
    }

    /// The value stored as `stored` (rebuilt in `out`, if need be).
    #[inline]
    fn value<'a>(&self, stored: &'a [u8], out: &'a mut Vec<u8>) -> &'a [u8] {
        match &self.affixes {
            Some(a) => a.value(stored, out),
            None => stored,
        }
    }
}

/// A slot of a bin's table: the low half of the value's mix, the run and
/// place of its first entry, and its rows in every run.
#[derive(Clone, Copy)]
struct Slot {
    tag: u32,
    run: u32,
    at: u64,
    rows: u64,
}

const FREE: u32 = u32::MAX;

const FREE_SLOT: Slot = Slot {
    tag: 0,
    run: FREE,
    at: 0,
    rows: 0,
};

/// Where `value`, whose mix's low half is `tag`, is in `slots` (a power of
/// two of them, some free), each slot's value read by `value_of`: `Ok`
/// its slot, or `Err` the free slot it would take.
#[inline]
fn lookup<'v>(
    slots: &[Slot],
    tag: u32,
    value: &[u8],
    value_of: impl Fn(&Slot) -> &'v [u8],
) -> Result<usize, usize> {
    let mask = slots.len() - 1;
    let mut i = tag as usize & mask;
    loop {
        let s = &slots[i];
        if s.run == FREE {
            return Err(i);
        }
        if s.tag == tag && value_of(s) == value {
            return Ok(i);
        }
        i = (i + 1) & mask;
    }
}

/// What `runs` (every run's bins, alike) found together, counted on
/// `threads` threads: every value and the null rows (counted only when
/// nulls are equal, as the runs took them) a distinct key, those of more
/// than one row repeated, and the top samples, as
/// [`super::together::found`] counts the runs' tables.
/// A bin on disk that cannot be read back is an error, never a short
/// count.
pub(super) fn found(runs: &[Binned], threads: usize) -> Result<Tallied, StoreError> {
    let bins = runs.first().map_or(0, |r| r.bins.len());
    let init = || (Tallied::default(), Vec::new(), Vec::new(), None);
    let tallies = share(bins, threads, init, |(tally, slots, bufs, failed), b| {
        if failed.is_none() {
            *failed = table(runs, b, (slots, bufs), tally).err();
        }
    });
    let mut all = Tallied::default();
    for (t, _, _, failed) in tallies {
        if let Some(e) = failed {
            return Err(e);
        }
        all.absorb(t);
    }
    let nulls: u64 = runs.iter().map(|r| r.nulls).sum();
    if nulls > 0 {
        all.key(0, &[], nulls);
    }
    Ok(all)
}

/// Tables bin `b` of every run of `runs` in `slots` (what runs wrote to
/// disk read back into `bufs`) and counts its values into `tally`.
fn table(
    runs: &[Binned],
    b: usize,
    (slots, bufs): (&mut Vec<Slot>, &mut Vec<Vec<u8>>),
    tally: &mut Tallied,
) -> Result<(), StoreError> {
    bufs.resize_with(runs.len(), Vec::new);
    let mut parts = Vec::with_capacity(2 * runs.len());
    for (run, buf) in runs.iter().zip(bufs.iter_mut()) {
        parts.extend(run.parts(b, buf)?);
    }
    let count: usize = runs.iter().map(|r| r.counts[b] as usize).sum();
    let size = (count + count / 3 + 1).next_power_of_two().max(16);
    slots.clear();
    slots.resize(size, FREE_SLOT);
    let form = runs.first().map_or(Form::of(None), |r| r.form);
    let state = RandomState::with_seed(TAGS);
    for (r, bin) in parts.iter().enumerate() {
        for (at, w, value, rows) in form.entries(bin) {
            let tag = form.tag(w, value, &state);
            match lookup(slots, tag, value, |s| {
                form.entry(parts[s.run as usize], s.at as usize).1
            }) {
                Ok(i) => slots[i].rows += rows,
                Err(i) => {
                    slots[i] = Slot {
                        tag,
                        run: r as u32,
                        at: at as u64,
                        rows,
                    }
                }
            }
        }
    }
    // A value of one row is counted by its stored bytes: only a repeated
    // one's bytes are read, and rebuilt.
    let (first, mut value) = (&runs[0], Vec::new());
    for s in slots.iter().filter(|s| s.run != FREE) {
        let (_, stored, ..) = form.entry(parts[s.run as usize], s.at as usize);
        match s.rows {
            1 => tally.key(1, stored, 1),
            rows => tally.key(1, first.value(stored, &mut value), rows),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
    use datafusion::execution::memory_pool::GreedyMemoryPool;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;

    use super::super::testing::{next, ranked};
    use super::*;
    use crate::exec::SAMPLES;

    /// A runtime of a `pool` bytes memory pool, writing to disk if `disk`.
    fn runtime(pool: usize, disk: bool) -> Arc<RuntimeEnv> {
        let mode = match disk {
            true => DiskManagerMode::OsTmpDirectory,
            false => DiskManagerMode::Disabled,
        };
        (RuntimeEnvBuilder::new())
            .with_memory_pool(Arc::new(GreedyMemoryPool::new(pool)))
            .with_disk_manager_builder(DiskManagerBuilder::default().with_mode(mode))
            .build_arc()
            .unwrap()
    }

    /// Binned against a map of every value, over several runs, rows one
    /// at a time, in batches and several at once: whatever the
    /// fingerprints' collisions (cut to 4 bits here), the empty value and
    /// values that are prefixes of others included, on 1 to 3 threads;
    /// in memory, and written to disk past a budget of a few bins' room;
    /// and stored without affixes (`value ` and `2`: some values have
    /// both, others one or none, and are stored whole); the fingerprints
    /// kept in the entries (a composite's) or not (text's).
    #[test]
    fn binned_values_match_a_map() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let affixes = Affixes::of(&[&b"value 12"[..], &b"value 2"[..]]).map(Arc::new);
        assert!(affixes.is_some());
        let shapes = [
            (16, usize::MAX, false),
            (64, usize::MAX, false),
            (16, 64 << 10, false),
            (16, usize::MAX, true),
            (16, 64 << 10, true),
        ];
        let kinds = [None, Some(Kind::Text)];
        for ((bins, most, affixed), kind) in shapes.into_iter().flat_map(|s| kinds.map(|k| (s, k)))
        {
            let affixes = affixes.clone().filter(|_| affixed);
            let runtime = runtime(usize::MAX, true);
            let mut want: HashMap<Vec<u8>, u64> = HashMap::new();
            let mut nulls = 0;
            let mut runs = Vec::new();
            for _ in 0..3 {
                let shape = (bins, affixes.clone(), kind);
                let mut binned = Binned::new(shape, 0xF, (1000, most), &runtime).unwrap();
                for i in 0..8000 {
                    let v = next(&mut state) % 2700;
                    // A hot value: a fifth of the rows.
                    let v = if i % 5 == 0 { 7 } else { v };
                    let value = match v % 11 {
                        0 => Vec::new(),
                        1 => format!("value {}", v / 100).into_bytes(),
                        _ => format!("value {v}").into_bytes(),
                    };
                    let h = (value.iter()).fold(7u64, |h, b| h.wrapping_mul(31) ^ u64::from(*b));
                    // Rows one at a time, in batches, and several at once
                    // (a table's values turned to bins).
                    let rows = match i % 3 {
                        0 => 1 + next(&mut state) % 3,
                        1 => {
                            assert_eq!(binned.batch(&[(h, &value[..]), (h, &value[..])]), 2);
                            2
                        }
                        _ => 1,
                    };
                    if i % 3 != 1 {
                        assert!(binned.add(h, &value, rows));
                    }
                    *want.entry(value).or_default() += rows;
                    if i % 97 == 0 {
                        binned.nulls(3);
                        nulls += 3;
                    }
                }
                assert_eq!(
                    binned.written() > 0,
                    most < usize::MAX,
                    "{}",
                    binned.written()
                );
                assert!(binned.bytes() <= most);
                runs.push(binned);
            }
            // Every repeated key (a null one as tag 0), ranked.
            let ranked = ranked(&want, nulls);
            for threads in [1, 2, 3] {
                let got = found(&runs, threads).unwrap();
                assert_eq!(got.distinct, (want.len() + usize::from(nulls > 0)) as u64);
                assert_eq!(got.repeated, ranked.len() as u64);
                assert_eq!(got.samples(), ranked[..ranked.len().min(SAMPLES)]);
            }
            // Given up, every entry comes back, from memory and disk; the
            // hot value's rows mostly added to the entry before.
            let (mut rows, mut hot) = (0, 0);
            let null_rows: u64 = (runs.iter())
                .map(|r| {
                    let each = r.each(|_, v, n| {
                        rows += n;
                        hot += u64::from(v == b"value 7");
                    });
                    each.unwrap()
                })
                .sum();
            assert_eq!(null_rows, nulls);
            assert_eq!(rows, want.values().sum::<u64>());
            assert!(hot * 4 < want[&b"value 7".to_vec()], "{hot}");
        }
    }

    /// Two common values in one bin, each coming back with the other in
    /// between (four rows in five), among 3,000 others: their bin is
    /// tabled in place as it outgrows the rest, so that the bins hold no
    /// more than a few entries for them, and, with a budget of a few bins'
    /// room, write nothing to disk that the others would not. The count
    /// is a map's, on 1 and 2 threads.
    #[test]
    fn an_outsized_bin_is_tabled_in_place() {
        for (most, disk) in [(1 << 20, false), (64 << 10, true)] {
            let runtime = runtime(usize::MAX, disk);
            let mut want: HashMap<Vec<u8>, u64> = HashMap::new();
            let mut runs = Vec::new();
            let mut state = 0x9E37_79B9_7F4A_7C15u64;
            for _ in 0..2 {
                let shape = (16, None, None);
                let mut binned = Binned::new(shape, u64::MAX, (1000, most), &runtime).unwrap();
                // Two fingerprints of one bin.
                let hot: Vec<u64> = (1u64..).filter(|w| binned.bin(*w) == 3).take(2).collect();
                for i in 0..100_000u64 {
                    let (w, value) = match i % 5 {
                        0 | 2 => (hot[0], b"common-one".to_vec()),
                        1 | 3 => (hot[1], b"common-two".to_vec()),
                        _ => {
                            let v = next(&mut state) % 3000;
                            (v.mix(), format!("value-{v}").into_bytes())
                        }
                    };
                    assert!(binned.add(w, &value, 1));
                    *want.entry(value).or_default() += 1;
                }
                // Without tabling in place: 80,000 entries of 20 bytes,
                // in memory or written.
                assert!(binned.counts[3] < 20_000, "{}", binned.counts[3]);
                assert!(binned.written() < 1 << 20, "{}", binned.written());
                assert_eq!(binned.written() > 0, disk);
                assert!(binned.bytes() <= most);
                runs.push(binned);
            }
            let ranked = ranked(&want, 0);
            for threads in [1, 2] {
                let got = found(&runs, threads).unwrap();
                assert_eq!(got.distinct, want.len() as u64);
                assert_eq!(got.repeated, ranked.len() as u64);
                assert_eq!(got.samples(), ranked[..ranked.len().min(SAMPLES)]);
            }
        }
    }

    /// Bins past their budget with nowhere to write, or refused by the
    /// pool, add nothing more, and give back every entry they took, with
    /// its fingerprint (kept, or text's hashed again); a budget of less
    /// than [`LEAST_ROOM`] a bin takes no bins.
    #[test]
    fn full_bins_refuse_and_give_back_every_entry() {
        let hashed = RandomState::with_seed(encode::SEED);
        for (most, runtime, kind) in [
            (80 << 10, runtime(usize::MAX, false), None),
            (usize::MAX, runtime(90_000, false), None),
            (80 << 10, runtime(usize::MAX, false), Some(Kind::Text)),
            (usize::MAX, runtime(90_000, false), Some(Kind::Text)),
        ] {
            let mut b = Binned::new((16, None, kind), u64::MAX, (0, most), &runtime).unwrap();
            let added = (0u64..).take_while(|i| b.add(i.mix(), &i.to_le_bytes(), 1 + i % 2));
            let n = added.count() as u64;
            assert!((1000..10_000).contains(&n), "{n}");
            let (mut entries, mut rows) = (0, 0);
            let nulls = b.each(|w, v, r| {
                let i = u64::from_le_bytes(v.try_into().unwrap());
                match kind {
                    None => assert_eq!(w, i.mix()),
                    Some(k) => assert_eq!(w, encode::first(k, &hashed, v)),
                }
                entries += 1;
                rows += r;
            });
            assert_eq!(nulls.unwrap(), 0);
            assert_eq!(entries, n);
            assert_eq!(rows, (0..n).map(|i| 1 + i % 2).sum::<u64>());
            assert!(b.bytes() <= most.min(90_000));
        }
        let runtime = runtime(usize::MAX, true);
        assert!(Binned::new(
            (16, None, None),
            u64::MAX,
            (1 << 20, 16 * LEAST_ROOM - 1),
            &runtime
        )
        .is_none());
        assert_eq!(bins_for(10_000_000, usize::MAX), 1024);
        assert_eq!(bins_for(0, usize::MAX), FEWEST_BINS);
        assert_eq!(bins_for(u64::MAX, usize::MAX), MOST_BINS);
        // Under a small budget, as many as keep their least room each.
        assert_eq!(bins_for(10_000_000, 2 << 20), 512);
        assert_eq!(bins_for(10_000_000, 3 << 20), 512);
        assert_eq!(bins_for(10_000_000, 1 << 10), FEWEST_BINS);
    }
}
