//! A single text key whose values come in order in long stretches of each
//! run of the first pass, but in no one order across them: files each
//! sorted on their own, their ranges overlapping (Spark's
//! `sortWithinPartitions`, a hash-partitioned sorted write), or a run that
//! reads several such files one after another. [`super::adjacent`] counts
//! only one order across the runs; these files fell back to the
//! fingerprints and a verification of every repeated key.
//!
//! While a run's values come so, it keeps each key once, with its rows,
//! in the stretch it lies in, front-coded (a key keeps only the bytes after
//! those it shares with the key before) and without the suffix most of the
//! run's keys end with ([`Suffix`]), instead of tabling it or pushing its
//! fingerprint. A value below the one before starts a new stretch. At the
//! end the stretches of every run are merged in order of their bytes and
//! each key counted as it closes: exact, with no table, no fingerprint
//! counted and no verification.
//!
//! Stretches that fill the run's share of the budget are written to a
//! temporary file ([`disk`]), the stretch then filled cut in two there, and
//! the merge reads them back a window at a time: an external merge of runs
//! the writer already sorted.
//!
//! A run gives its stretches up ([`Stop`]) when its values stop coming in
//! order (its stretches average fewer than [`STRETCH`] keys: unsorted
//! values give them up at the third), or they outgrow its budget with no
//! disk to write them to. It then hands each key it kept, with its
//! fingerprint and rows, to its table or its fingerprints
//! ([`Stretches::into_each`]: hashed again, as the walk hashed them), and
//! goes on as if it had never kept them.

use std::cmp::Ordering;
use std::io::ErrorKind;
use std::sync::Arc;

use datafusion::common::hash_utils::RandomState;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::runtime_env::RuntimeEnv;

use super::affixes::{self, SAMPLE};
use super::disk;
use super::encode::{self, Kind};
use super::store::StoreError;
use super::varint::{put_varint, take_varint};
use crate::keyindex::shared_len;

mod merge;

pub(super) use merge::{mergeable, merged, suffix_said};

/// The fewest keys a run's stretches hold on average (past its first) for
/// the run to go on keeping them.
const STRETCH: usize = 1024;

/// The most stretches all runs together merge.
const MOST_STRETCHES: usize = 4096;

/// Every this many keys of a stretch, a key is kept whole (it shares no
/// bytes with the one before), so that a merge may start there.
const RESTART: usize = 128;

/// Why a run gives its stretches up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// Its values do not come in long enough stretches in order.
    Disorder,
    /// Its stretches outgrow its budget, and cannot be written to disk.
    Full,
}

/// A run's keys in stretches, each in order of its bytes.
pub(super) struct Stretches {
    /// Each key of a stretch: the length of the bytes it shares with the
    /// key before in the stretch, and the length of the rest twice over,
    /// plus 1 when the rest is stored without the run's suffix (varints),
    /// the rest so stored, and its rows (a varint).
    arena: Vec<u8>,
    /// Each closed stretch: where it starts in `arena` or on disk, its
    /// keys, and where its whole keys' offsets start in `restarts`.
    closed: Vec<Stretch>,
    /// Where each stretch's every [`RESTART`]th key (kept whole) starts in
    /// `arena`, or on disk for those before `in_memory`.
    restarts: Vec<u64>,
    in_memory: usize,
    /// How many of the closed stretches were cut in two by a write to disk
    /// (not by the order of their values).
    cut: usize,
    /// The stretches written to disk, once there are any, and how many
    /// bytes their cursors read at a time.
    disk: Option<disk::Disk>,
    window: usize,
    runtime: Arc<RuntimeEnv>,
    /// Where the stretch now filled starts, and its keys so far.
    start: usize,
    keys: usize,
    /// Keys in all stretches, and in the arena.
    total: usize,
    arena_keys: usize,
    /// The key now open (the last so far) and its rows (0: none).
    open: Vec<u8>,
    rows: u64,
    /// The suffix the run's keys are stored without, once chosen.
    suffix: Suffix,
    /// How the walk hashes the keys (for [`Self::into_each`]).
    kind: Kind,
    /// The last key written to the stretch now filled.
    last: Vec<u8>,
    nulls: u64,
    /// The most bytes, and keys, the stretches may take in memory.
    most: usize,
    most_keys: usize,
    reservation: MemoryReservation,
}

impl Stretches {
    /// Empty stretches of keys of `kind` taking at most `most` bytes of
    /// `runtime`'s memory pool (and writing to its disk beyond), or `None`
    /// when the test hook keeps none.
    pub(super) fn new(most: usize, runtime: &Arc<RuntimeEnv>, kind: Kind) -> Option<Stretches> {
        let most_keys = crate::hooks::sorted_keys().unwrap_or(usize::MAX);
        (most_keys > 0).then(|| Stretches {
            arena: Vec::new(),
            closed: Vec::new(),
            restarts: Vec::new(),
            in_memory: 0,
            cut: 0,
            disk: None,
            window: disk::WINDOW,
            runtime: runtime.clone(),
            start: 0,
            keys: 0,
            total: 0,
            arena_keys: 0,
            open: Vec::new(),
            rows: 0,
            suffix: Suffix::default(),
            kind,
            last: Vec::new(),
            nulls: 0,
            most,
            most_keys,
            reservation: MemoryConsumer::new("dqgate sorted keys").register(&runtime.memory_pool),
        })
    }

    /// `rows` rows of `value`, the next in the run. On an error the value
    /// is not kept, and what was kept is whole ([`Self::into_each`]).
    #[cfg(test)]
    pub(super) fn add(&mut self, value: &[u8], rows: u64) -> Result<(), Stop> {
        self.add_ordered(value, rows, self.order(value))
    }

    /// How `value` compares with the key now open (`None`: there is none).
    #[inline]
    pub(super) fn order(&self, value: &[u8]) -> Option<Ordering> {
        (self.rows > 0).then(|| value.cmp(&self.open))
    }

    /// [`Self::add`], given what [`Self::order`] says of `value`.
    #[inline]
    pub(super) fn add_ordered(
        &mut self,
        value: &[u8],
        rows: u64,
        order: Option<Ordering>,
    ) -> Result<(), Stop> {
        if rows == 0 {
            return Ok(());
        }
        match order {
            None => {}
            Some(Ordering::Equal) => {
                self.rows += rows;
                return Ok(());
            }
            Some(Ordering::Greater) => self.close()?,
            Some(Ordering::Less) => {
                self.close()?;
                self.next_stretch()?;
            }
        }
        self.open.clear();
        self.open.extend_from_slice(value);
        self.rows = rows;
        Ok(())
    }

    /// `n` null rows.
    pub(super) fn nulls(&mut self, n: u64) {
        self.nulls += n;
    }

    /// Writes the open key to its stretch; on an error nothing changes.
    fn close(&mut self) -> Result<(), Stop> {
        let need = 3 * 10 + self.open.len();
        let full = self.arena_keys >= self.most_keys;
        if full || self.arena.len() + need > self.arena.capacity() {
            self.grow(need, full)?;
        }
        self.write();
        Ok(())
    }

    /// Writes the open key to its stretch, whatever the budget.
    fn write(&mut self) {
        if self.keys.is_multiple_of(RESTART) {
            self.last.clear();
            self.restarts.push(self.arena.len() as u64);
        }
        let shared = shared_len(&self.last, &self.open);
        let (rest, without) = self.suffix.strip(&self.open[shared..]);
        put_varint(&mut self.arena, shared as u64);
        put_varint(
            &mut self.arena,
            (rest.len() as u64) << 1 | u64::from(without),
        );
        self.arena.extend_from_slice(rest);
        put_varint(&mut self.arena, self.rows);
        self.suffix.sample(&self.open);
        std::mem::swap(&mut self.last, &mut self.open);
        self.rows = 0;
        self.keys += 1;
        self.total += 1;
        self.arena_keys += 1;
    }

    /// Room for `need` more bytes: within the budget (unless `full`), or
    /// by writing the arena to disk.
    fn grow(&mut self, need: usize, full: bool) -> Result<(), Stop> {
        let want = (self.arena.capacity() * 3 / 2).max(self.arena.len() + need + (64 << 10));
        let want = want.min(self.most.max(self.arena.len() + need));
        if !full && want <= self.most && self.reservation.try_resize(want).is_ok() {
            self.arena.reserve_exact(want - self.arena.len());
            return Ok(());
        }
        match !self.arena.is_empty() && self.write_to_disk().is_ok() {
            true if need <= self.arena.capacity() => Ok(()),
            _ => Err(Stop::Full),
        }
    }

    /// Appends the arena to the disk file, the stretch now filled cut in
    /// two there (the keys after start a stretch of their own), and empties
    /// it.
    fn write_to_disk(&mut self) -> Result<(), StoreError> {
        if self.keys > 0 {
            self.close_stretch();
            self.cut += 1;
        }
        let disk = match &mut self.disk {
            Some(d) => d,
            None => self
                .disk
                .insert(disk::Disk::create(&self.runtime, "dqgate sorted keys")?),
        };
        let base = disk.append(&self.arena)?;
        for s in self.closed.iter_mut().filter(|s| !s.on_disk) {
            (s.at, s.on_disk) = (s.at + base, true);
        }
        self.restarts[self.in_memory..]
            .iter_mut()
            .for_each(|r| *r += base);
        self.in_memory = self.restarts.len();
        self.arena.clear();
        (self.start, self.arena_keys) = (0, 0);
        Ok(())
    }

    /// The bytes written to disk.
    pub(super) fn written(&self) -> u64 {
        self.disk.as_ref().map_or(0, disk::Disk::len)
    }

    /// Closes the stretch now filled and starts the next; an error when
    /// the stretches are too many for their keys.
    fn next_stretch(&mut self) -> Result<(), Stop> {
        self.close_stretch();
        let stretches = self.closed.len() - self.cut;
        match stretches * STRETCH > self.total + STRETCH || self.closed.len() >= MOST_STRETCHES {
            true => Err(Stop::Disorder),
            false => Ok(()),
        }
    }

    /// Closes the open key and the last stretch.
    fn finish(&mut self) {
        if self.rows > 0 {
            // The last key is written whatever the budget (into the room
            // the arena has, as a rule).
            self.arena.reserve_exact(3 * 10 + self.open.len());
            self.write();
        }
        if self.keys > 0 {
            self.close_stretch();
        }
    }

    fn close_stretch(&mut self) {
        let restarts = self.keys.div_ceil(RESTART);
        self.closed.push(Stretch {
            at: self.start as u64,
            on_disk: false,
            keys: self.keys,
            restarts: self.restarts.len() - restarts,
            last: self.last.as_slice().into(),
        });
        (self.start, self.keys) = (self.arena.len(), 0);
        self.last.clear();
    }

    /// The stretches' keys, each with its fingerprint (as the walk hashes
    /// it) and rows; the null rows are not among them.
    pub(super) fn into_each(
        mut self,
        mut f: impl FnMut(u64, &[u8], u64),
    ) -> Result<(), StoreError> {
        self.finish();
        let state = RandomState::with_seed(encode::SEED);
        for stretch in &self.closed {
            let mut cursor = self.cursor(stretch, 0);
            while cursor.next() {
                let fingerprint = encode::first(self.kind, &state, &cursor.key);
                f(fingerprint, &cursor.key, cursor.rows);
            }
            cursor.failed()?;
        }
        Ok(())
    }

    /// A cursor of `stretch` from its `r`th whole key.
    fn cursor(&self, stretch: &Stretch, r: usize) -> Cursor<'_> {
        let at = match r {
            0 => stretch.at,
            r => self.restarts[stretch.restarts + r],
        };
        let source = match (stretch.on_disk, &self.disk) {
            (true, Some(disk)) => Source::Disk(disk.reader(at, self.window)),
            _ => Source::Memory(&self.arena[at as usize..]),
        };
        Cursor {
            source,
            failed: None,
            left: stretch.keys - r * RESTART,
            key: Vec::with_capacity(KEY_ROOM),
            suffix: self.suffix.chosen(),
            rows: 0,
            skip: 0,
            prefix: 0,
            done: false,
        }
    }

    /// The cursor of `stretch` at its first key not below `from` (`None`:
    /// its first), or `None` when it has no such key. It starts at the
    /// last whole key below `from`, found by halving.
    fn cursor_from(
        &self,
        stretch: &Stretch,
        from: Option<&[u8]>,
    ) -> Result<Option<Cursor<'_>>, StoreError> {
        let Some(from) = from else {
            let mut c = self.cursor(stretch, 0);
            return match c.next() {
                true => Ok(Some(c)),
                false => c.failed().map(|_| None),
            };
        };
        // The whole keys below `from` come first: `below` of them. (A key
        // that cannot be read counts as not below: the cursor then starts
        // earlier, and meets the failure itself.)
        let (mut below, mut above) = (0, stretch.keys.div_ceil(RESTART));
        while below < above {
            let mid = (below + above) / 2;
            let mut c = self.cursor(stretch, mid);
            match c.next() && c.key.as_slice() < from {
                true => below = mid + 1,
                false => above = mid,
            }
        }
        let mut c = self.cursor(stretch, below.saturating_sub(1));
        while c.next() {
            if c.key.as_slice() >= from {
                return Ok(Some(c));
            }
        }
        c.failed().map(|_| None)
    }

    /// How many stretches the run has kept, the one now filled included.
    pub(super) fn stretches(&self) -> usize {
        self.closed.len() + usize::from(self.keys > 0 || self.rows > 0)
    }

    /// The bytes the stretches take.
    pub(super) fn bytes(&self) -> usize {
        self.reservation.size()
    }
}

/// A closed stretch.
struct Stretch {
    /// Where it starts in the arena, or on disk.
    at: u64,
    on_disk: bool,
    keys: usize,
    /// Where its whole keys' offsets start in the restarts.
    restarts: usize,
    /// Its last key.
    last: Box<[u8]>,
}

/// Room a key buffer of a merge starts with, so that the first line of
/// one thread's buffer is not another's.
const KEY_ROOM: usize = 256;

/// A stretch read key by key; aligned to whole cache lines, so that
/// threads merging side by side write none of the same lines.
#[repr(align(128))]
struct Cursor<'a> {
    source: Source<'a>,
    /// Why a stretch on disk could not be read to its end.
    failed: Option<StoreError>,
    left: usize,
    key: Vec<u8>,
    /// The suffix of the keys stored without it.
    suffix: &'a [u8],
    rows: u64,
    /// The bytes every key of the merge shares, and the 8 bytes of the
    /// key after them ([`prefix`]).
    skip: usize,
    prefix: u64,
    /// Past the last key (a merge's).
    done: bool,
}

/// The 8 bytes of `key` after its first `skip`, as a big-endian number
/// (missing bytes 0): keys whose numbers differ are in their order, and
/// only keys of equal numbers need their bytes compared.
#[inline]
fn prefix(key: &[u8], skip: usize) -> u64 {
    (crate::exec::published::window(key, skip) >> 64) as u64
}

/// Where a cursor reads its stretch.
enum Source<'a> {
    Memory(&'a [u8]),
    Disk(disk::Reader<'a>),
}

/// A key's two lengths take at most this many bytes, and its rows.
const VARINTS: usize = 20;

/// How far ahead of its key a cursor asks the cache for its stretch.
const AHEAD: usize = 128;

impl Cursor<'_> {
    /// Steps to the next key; `false` past the last, or when a stretch
    /// on disk cannot be read ([`Self::failed`]).
    #[inline]
    fn next(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        let decoded = match &mut self.source {
            Source::Memory(buf) => {
                // The line two ahead is asked for: the cursors of a merge
                // of many stretches read as many places at once, too many
                // for the hardware to see each one's stream.
                super::filed::prefetch(buf.as_ptr().wrapping_add(AHEAD));
                decode(buf, &mut self.key, self.suffix).inspect(|d| *buf = &buf[d.1..])
            }
            Source::Disk(reader) => match ahead(reader) {
                Ok(buf) => {
                    super::filed::prefetch(buf.as_ptr().wrapping_add(AHEAD));
                    decode(buf, &mut self.key, self.suffix).inspect(|d| reader.take(d.1))
                }
                Err(e) => {
                    (self.left, self.failed) = (0, Some(e));
                    return false;
                }
            },
        };
        let Some((rows, _)) = decoded else {
            let cut = std::io::Error::new(ErrorKind::UnexpectedEof, "a sorted key ends early");
            (self.left, self.failed) = (0, Some(StoreError::Read(cut)));
            return false;
        };
        self.rows = rows;
        self.prefix = prefix(&self.key, self.skip);
        true
    }

    /// Whether the stretch was read to its end.
    fn failed(&mut self) -> Result<(), StoreError> {
        self.failed.take().map_or(Ok(()), Err)
    }
}

/// The key at the start of `buf` into `key` (which holds the one before;
/// `suffix` the keys stored without it end with): its rows and the bytes
/// it took; `None` when `buf` ends inside it (a file cut short under the
/// run).
#[inline]
fn decode(buf: &[u8], key: &mut Vec<u8>, suffix: &[u8]) -> Option<(u64, usize)> {
    let (shared, after) = take_varint(buf);
    let (stored, after) = take_varint(after);
    let rest = after.get(..usize::try_from(stored >> 1).ok()?)?;
    let (rows, end) = take_varint(&after[rest.len()..]);
    if usize::try_from(shared).ok()? > key.len() || end.len() == after.len() - rest.len() {
        return None;
    }
    key.truncate(shared as usize);
    key.extend_from_slice(rest);
    if stored & 1 == 1 {
        key.extend_from_slice(suffix);
    }
    Some((rows, buf.len() - end.len()))
}

/// The bytes ahead of `reader`, a whole key at least.
fn ahead<'r>(reader: &'r mut disk::Reader<'_>) -> Result<&'r [u8], StoreError> {
    let head = reader.ahead(VARINTS)?;
    let (_, after) = take_varint(head);
    let (stored, after) = take_varint(after);
    let whole = head.len() - after.len() + (stored >> 1) as usize + VARINTS;
    reader.ahead(whole)
}

/// The suffix a run's keys are stored without: chosen from its first
/// [`SAMPLE`] keys (stored whole) much as the bins choose theirs
/// ([`affixes::suffix`]), then fixed. A key is stored without it when
/// the bytes it keeps after those it shares with the key before end with
/// it, and says so (the low bit of its length), so that nothing depends
/// on the sample but the room the keys take.
#[derive(Default)]
struct Suffix {
    /// The keys sampled, until the suffix is chosen.
    sample: Vec<Box<[u8]>>,
    /// Chosen: the suffix (empty: none worth keeping).
    chosen: Option<Box<[u8]>>,
}

impl Suffix {
    /// Samples `key`, a key just stored, until the suffix is chosen.
    #[inline]
    fn sample(&mut self, key: &[u8]) {
        if self.chosen.is_some() {
            return;
        }
        self.sample.push(key.into());
        if self.sample.len() == SAMPLE {
            let sample: Vec<&[u8]> = self.sample.iter().map(|k| &k[..]).collect();
            self.chosen = Some(affixes::suffix(&sample).into());
            self.sample = Vec::new();
        }
    }

    /// `rest` without the suffix, and whether it ended with it.
    #[inline]
    fn strip<'a>(&self, rest: &'a [u8]) -> (&'a [u8], bool) {
        match &self.chosen {
            Some(s) if !s.is_empty() && rest.ends_with(s) => (&rest[..rest.len() - s.len()], true),
            _ => (rest, false),
        }
    }

    /// The suffix chosen (empty: none yet, or none).
    fn chosen(&self) -> &[u8] {
        self.chosen.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
    use datafusion::execution::memory_pool::GreedyMemoryPool;
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;

    fn runtime() -> Arc<RuntimeEnv> {
        Arc::new(RuntimeEnv::default())
    }

    /// A runtime of a 1 MiB memory pool, writing to disk if `disk`.
    fn small(disk: bool) -> Arc<RuntimeEnv> {
        let mode = match disk {
            true => DiskManagerMode::OsTmpDirectory,
            false => DiskManagerMode::Disabled,
        };
        (RuntimeEnvBuilder::new())
            .with_memory_pool(Arc::new(GreedyMemoryPool::new(1 << 20)))
            .with_disk_manager_builder(DiskManagerBuilder::default().with_mode(mode))
            .build_arc()
            .unwrap()
    }

    fn run(values: &[&str]) -> Stretches {
        let mut s = Stretches::new(usize::MAX, &runtime(), Kind::Text).unwrap();
        for v in values {
            s.add(v.as_bytes(), 1).unwrap();
        }
        s
    }

    #[test]
    fn overlapping_stretches_merge_to_the_exact_count() {
        // Two runs: the first two stretches (a file each), the second one;
        // `b` lies in all three, `c` in two, `e` across a stretch's end.
        let mut first = run(&["a", "b", "b", "c", "e"]);
        for v in ["b", "c", "d", "e"] {
            first.add(v.as_bytes(), 1).unwrap();
        }
        assert_eq!(first.stretches(), 2);
        let second = run(&["b", "f"]);
        let t = merged(vec![first, second], false, 1).unwrap();
        assert_eq!((t.distinct, t.repeated), (6, 3));
        let samples: Vec<(u8, &[u8], u64)> = t.samples();
        assert_eq!(
            samples,
            vec![(1, &b"b"[..], 4), (1, &b"c"[..], 2), (1, &b"e"[..], 2)]
        );
    }

    /// Three runs of three stretches each, of keys drawn from 20,000, and
    /// each key's rows.
    fn drawn() -> (Vec<Stretches>, std::collections::HashMap<String, u64>) {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || super::super::testing::next(&mut rng);
        let mut want = std::collections::HashMap::new();
        let mut runs = Vec::new();
        for _ in 0..3 {
            let mut s = Stretches::new(usize::MAX, &runtime(), Kind::Text).unwrap();
            for _ in 0..3 {
                let mut keys: Vec<String> = (0..5_000)
                    .map(|_| format!("k{:05}", next() % 20_000))
                    .collect();
                keys.sort();
                for k in keys {
                    s.add(k.as_bytes(), 1).unwrap();
                    *want.entry(k).or_insert(0u64) += 1;
                }
            }
            runs.push(s);
        }
        (runs, want)
    }

    /// Merged on several threads, each a range of the keys, the count is
    /// the one thread's and a HashMap's, samples included.
    #[test]
    fn a_merge_cut_into_ranges_counts_as_one() {
        let (runs, want) = drawn();
        let one = merged(runs, false, 1).unwrap();
        let repeated = want.values().filter(|&&n| n > 1).count() as u64;
        assert_eq!((one.distinct, one.repeated), (want.len() as u64, repeated));
        for threads in [2, 4, 7] {
            let got = merged(drawn().0, false, threads).unwrap();
            assert_eq!((got.distinct, got.repeated), (one.distinct, one.repeated));
            assert_eq!(got.samples(), one.samples());
        }
    }

    /// Keys that differ past their first 8 bytes, end in zero bytes, or
    /// are the start of others (the empty key too) merge to a HashMap's
    /// count on any number of threads.
    #[test]
    fn keys_alike_in_their_prefixes_are_told_apart_by_their_bytes() {
        let mut next = crate::test_rng::below(7);
        let keys: Vec<Vec<u8>> = (0..4_000)
            .map(|_| {
                let head = [b"shared-prefix-".as_slice(), b""][next(2) as usize];
                let tail = (0..next(14)).map(|_| [0u8, 1, b'a', 255][next(4) as usize]);
                head.iter().copied().chain(tail).collect()
            })
            .collect();
        let runs_of = |seed: u64| {
            let mut want = std::collections::HashMap::new();
            let mut runs = Vec::new();
            for r in 0..2 {
                let mut s = Stretches::new(usize::MAX, &runtime(), Kind::Text).unwrap();
                for t in 0..3u64 {
                    let mut part: Vec<&Vec<u8>> = (keys.iter().enumerate())
                        .filter(|(i, _)| (*i as u64 * 7 + seed + r * 3 + t) % 5 < 2)
                        .map(|(_, k)| k)
                        .collect();
                    part.sort();
                    for k in part {
                        s.add(k, 1).unwrap();
                        *want.entry(k.clone()).or_insert(0u64) += 1;
                    }
                }
                runs.push(s);
            }
            (runs, want)
        };
        let (runs, want) = runs_of(0);
        let one = merged(runs, false, 1).unwrap();
        let repeated = want.values().filter(|&&n| n > 1).count() as u64;
        assert_eq!((one.distinct, one.repeated), (want.len() as u64, repeated));
        let mut best: Vec<(&Vec<u8>, u64)> = want.iter().map(|(k, n)| (k, *n)).collect();
        best.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let samples: Vec<(&[u8], u64)> = one.samples().iter().map(|(_, k, n)| (*k, *n)).collect();
        let top: Vec<(&[u8], u64)> = best[..samples.len()]
            .iter()
            .map(|(k, n)| (k.as_slice(), *n))
            .collect();
        assert_eq!(samples, top);
        for threads in [2, 3] {
            let got = merged(runs_of(0).0, false, threads).unwrap();
            assert_eq!((got.distinct, got.repeated), (one.distinct, one.repeated));
            assert_eq!(got.samples(), one.samples());
        }
    }

    /// Keys nine in ten of which end alike (stored without it), others
    /// not, some the start of others and some ending in part of the
    /// suffix: merged from memory and from disk to a HashMap's count, and
    /// handed back whole and in order.
    #[test]
    fn keys_stored_without_their_suffix_come_back_whole() {
        let mut next = crate::test_rng::below(11);
        let keys: Vec<Vec<u8>> = (0..30_000)
            .map(|_| {
                let len = next(8);
                let mid: Vec<u8> = (0..len).map(|_| b"01@xmail"[next(8) as usize]).collect();
                let tail: &[u8] = match next(40) {
                    0 => b"@other.org",
                    1 => b"",
                    2 => b"mail.com",
                    _ => b"@example-mail.com",
                };
                [&b"user-"[..], &mid, tail].concat()
            })
            .collect();
        // Each run's keys as they come: three sorted parts.
        let parts = |r: u64| -> Vec<Vec<u8>> {
            (0..3u64)
                .flat_map(|t| {
                    let mut part: Vec<Vec<u8>> = (keys.iter().enumerate())
                        .filter(|(i, _)| (*i as u64 * 7 + r * 3 + t) % 5 < 2)
                        .map(|(_, k)| k.clone())
                        .collect();
                    part.sort();
                    part
                })
                .collect()
        };
        let runs_on = |rt: &Arc<RuntimeEnv>| -> Vec<Stretches> {
            (0..2)
                .map(|r| {
                    let mut s = Stretches::new(1 << 20, rt, Kind::Text).unwrap();
                    parts(r).iter().for_each(|k| s.add(k, 1).unwrap());
                    let suffix = s.suffix.chosen();
                    assert!(suffix.len() >= 4 && b"@example-mail.com".ends_with(suffix));
                    s
                })
                .collect()
        };
        let mut want = std::collections::HashMap::new();
        for k in parts(0).into_iter().chain(parts(1)) {
            *want.entry(k).or_insert(0u64) += 1;
        }
        let repeated = want.values().filter(|&&n| n > 1).count() as u64;
        for (rt, threads) in [(runtime(), 1), (runtime(), 3), (small(true), 2)] {
            let t = merged(runs_on(&rt), false, threads).unwrap();
            assert_eq!((t.distinct, t.repeated), (want.len() as u64, repeated));
        }
        // Each run's keys back whole, in the order they came.
        for (r, s) in runs_on(&small(true)).into_iter().enumerate() {
            let mut back: Vec<(Vec<u8>, u64)> = Vec::new();
            s.into_each(|_, k, n| back.push((k.to_vec(), n))).unwrap();
            let mut came: Vec<(Vec<u8>, u64)> = Vec::new();
            for k in parts(r as u64) {
                match came.last_mut() {
                    Some((last, n)) if *last == k => *n += 1,
                    _ => came.push((k, 1)),
                }
            }
            assert_eq!(back, came);
        }
    }

    /// A key cut anywhere short (a spill file cut under the run) is no
    /// key, never a panic or a key of other bytes.
    #[test]
    fn a_key_cut_short_is_none() {
        let mut s = run(&["customer-0001@x", "customer-0002@x"]);
        s.finish();
        let mut key = Vec::new();
        let (_, first) = decode(&s.arena, &mut key, b"").unwrap();
        let whole = &s.arena[first..];
        let mut key = b"customer-0001@x".to_vec();
        assert_eq!(decode(whole, &mut key, b"").map(|d| d.1), Some(whole.len()));
        assert_eq!(key, b"customer-0002@x");
        for cut in 0..whole.len() {
            let mut key = b"customer-0001@x".to_vec();
            assert_eq!(decode(&whole[..cut], &mut key, b""), None, "cut at {cut}");
        }
        // Sharing more bytes than the key before holds.
        assert_eq!(decode(whole, &mut Vec::new(), b""), None);
    }

    #[test]
    fn keys_come_back_whole_with_their_fingerprints_and_rows() {
        let values = ["customer-0001@x", "customer-0002@x", "customer-0100@y", "d"];
        let mut s = run(&values);
        s.add(b"d", 4).unwrap();
        let mut back = Vec::new();
        s.into_each(|f, k, n| back.push((f, String::from_utf8(k.to_vec()).unwrap(), n)))
            .unwrap();
        let state = RandomState::with_seed(encode::SEED);
        let want: Vec<(u64, String, u64)> = (values.iter())
            .map(|v| {
                let f = encode::first(Kind::Text, &state, v.as_bytes());
                (f, v.to_string(), if *v == "d" { 5 } else { 1 })
            })
            .collect();
        assert_eq!(back, want);
    }

    #[test]
    fn values_out_of_order_give_the_stretches_up() {
        let mut s = Stretches::new(usize::MAX, &runtime(), Kind::Text).unwrap();
        let got: Vec<Result<(), Stop>> = (["m", "c", "x", "a"].iter())
            .map(|v| s.add(v.as_bytes(), 1))
            .collect();
        assert_eq!(got, vec![Ok(()), Ok(()), Ok(()), Err(Stop::Disorder)]);
        // What was kept before is whole: m, c and x (a was refused).
        let mut back = Vec::new();
        s.into_each(|_, k, _| back.push(k.to_vec())).unwrap();
        assert_eq!(back, vec![b"m".to_vec(), b"c".to_vec(), b"x".to_vec()]);
    }

    /// Sorted keys of `n` (`key-000000000000` on), in two stretches: the
    /// even numbers, then the odd ones.
    fn two_stretches(s: &mut Stretches, n: u64) -> Result<(), Stop> {
        for i in (0..n).step_by(2).chain((1..n).step_by(2)) {
            s.add(format!("key-{i:012}").as_bytes(), 1)?;
        }
        Ok(())
    }

    #[test]
    fn stretches_beyond_their_budget_go_to_disk_and_come_back_whole() {
        let n = 500_000;
        let mut s = Stretches::new(1 << 20, &small(true), Kind::Text).unwrap();
        two_stretches(&mut s, n).unwrap();
        assert!(s.bytes() <= 1 << 20);
        assert!(s.written() > 1 << 20, "{}", s.written());
        assert!(s.stretches() > 2);
        let mut back = Vec::new();
        s.into_each(|f, k, rows| back.push((f, k.to_vec(), rows)))
            .unwrap();
        let state = RandomState::with_seed(encode::SEED);
        let want: Vec<(u64, Vec<u8>, u64)> = (0..n)
            .step_by(2)
            .chain((1..n).step_by(2))
            .map(|i| format!("key-{i:012}").into_bytes())
            .map(|k| (encode::first(Kind::Text, &state, &k), k, 1))
            .collect();
        assert_eq!(back, want);
        // Merged from disk, on one thread and on three.
        for threads in [1, 3] {
            let mut s = Stretches::new(1 << 20, &small(true), Kind::Text).unwrap();
            two_stretches(&mut s, n).unwrap();
            for i in 0..10 {
                s.add(format!("key-{i:012}").as_bytes(), 1).unwrap();
            }
            let t = merged(vec![s], false, threads).unwrap();
            assert_eq!((t.distinct, t.repeated), (n, 10));
        }
    }

    #[test]
    fn stretches_beyond_their_budget_with_no_disk_stop_full() {
        let mut s = Stretches::new(1 << 20, &small(false), Kind::Text).unwrap();
        assert_eq!(two_stretches(&mut s, 1_000_000), Err(Stop::Full));
        assert!(s.bytes() <= 1 << 20);
        let mut kept = 0;
        s.into_each(|_, _, _| kept += 1).unwrap();
        assert!(kept > 1000, "{kept}");
    }
}
