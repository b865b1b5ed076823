//! A single text key whose values come in order in long stretches of each
//! run of the first pass, but in no one order across them: files each
//! sorted on their own, their ranges overlapping (Spark's
//! `sortWithinPartitions`, a hash-partitioned sorted write), or a run that
//! reads several such files one after another. [`super::adjacent`] counts
//! only one order across the runs; these files fell back to the
//! fingerprints and a verification of every repeated key.
//!
//! While a run's values come so, it keeps each key once, with its rows and
//! its fingerprint, in the stretch it lies in, front-coded (a key keeps
//! only the bytes after those it shares with the key before), instead of
//! tabling it or pushing its fingerprint. A value below the one before
//! starts a new stretch. At the end the stretches of every run are merged
//! in order of their bytes and each key counted as it closes: exact, with
//! no table, no fingerprint counted and no verification.
//!
//! A run gives its stretches up ([`Stop`]) when its values stop coming in
//! order (its stretches average fewer than [`STRETCH`] keys: unsorted
//! values give them up at the third) or they outgrow the run's share of
//! the memory pool. It then hands each key it kept, with its fingerprint
//! and rows, to its table or its fingerprints ([`Stretches::into_each`]),
//! and goes on as if it had never kept them.

use std::cmp::Ordering;
use std::sync::Arc;

use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};

mod merge;

pub(super) use merge::{mergeable, merged};

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
    /// Its stretches outgrow its budget.
    Full,
}

/// A run's keys in stretches, each in order of its bytes.
pub(super) struct Stretches {
    /// Each key of a stretch: the length of the bytes it shares with the
    /// key before in the stretch and of the rest (varints), the rest, its
    /// fingerprint (8 bytes) and its rows (a varint).
    arena: Vec<u8>,
    /// Each closed stretch: where it starts in `arena`, its keys, and
    /// where its whole keys' offsets start in `restarts`.
    closed: Vec<Stretch>,
    /// Where each stretch's every [`RESTART`]th key (kept whole) starts in
    /// `arena`.
    restarts: Vec<usize>,
    /// Where the stretch now filled starts, and its keys so far.
    start: usize,
    keys: usize,
    /// Keys in all stretches.
    total: usize,
    /// The key now open (the last so far), its fingerprint and its rows
    /// (0: none).
    open: Vec<u8>,
    fingerprint: u64,
    rows: u64,
    /// The last key written to the stretch now filled.
    last: Vec<u8>,
    nulls: u64,
    /// The most bytes, and keys, the stretches may take.
    most: usize,
    most_keys: usize,
    /// Rows seen, of the run's `run_rows` (0: unknown).
    seen: u64,
    run_rows: u64,
    reservation: MemoryReservation,
}

impl Stretches {
    /// Empty stretches taking at most `most` bytes of `pool`, or `None`
    /// when the test hook keeps none.
    pub(super) fn new(most: usize, pool: &Arc<dyn MemoryPool>) -> Option<Stretches> {
        let most_keys = crate::hooks::sorted_keys().unwrap_or(usize::MAX);
        (most_keys > 0).then(|| Stretches {
            arena: Vec::new(),
            closed: Vec::new(),
            restarts: Vec::new(),
            start: 0,
            keys: 0,
            total: 0,
            open: Vec::new(),
            fingerprint: 0,
            rows: 0,
            last: Vec::new(),
            nulls: 0,
            most,
            most_keys,
            seen: 0,
            run_rows: 0,
            reservation: MemoryConsumer::new("dqgate sorted keys").register(pool),
        })
    }

    /// The stretches of a run of `rows` rows, which give up as soon as
    /// they would not fit at their rate so far (see [`Self::grow`]).
    pub(super) fn for_rows(mut self, rows: u64) -> Stretches {
        self.run_rows = rows;
        self
    }

    /// `rows` rows of `value` (whose fingerprint is `fingerprint`), the
    /// next in the run. On an error the value is not kept, and what was
    /// kept is whole ([`Self::into_each`]).
    #[inline]
    pub(super) fn add(&mut self, fingerprint: u64, value: &[u8], rows: u64) -> Result<(), Stop> {
        if rows == 0 {
            return Ok(());
        }
        self.seen += rows;
        if self.rows > 0 {
            match value.cmp(&self.open) {
                Ordering::Equal => {
                    self.rows += rows;
                    return Ok(());
                }
                Ordering::Greater => self.close()?,
                Ordering::Less => {
                    self.close()?;
                    self.next_stretch()?;
                }
            }
        }
        self.open.clear();
        self.open.extend_from_slice(value);
        self.fingerprint = fingerprint;
        self.rows = rows;
        Ok(())
    }

    /// `n` null rows.
    pub(super) fn nulls(&mut self, n: u64) {
        self.nulls += n;
    }

    /// Writes the open key to its stretch; on an error nothing changes.
    fn close(&mut self) -> Result<(), Stop> {
        let need = 3 * 10 + self.open.len() + 8;
        if self.arena.len() + need > self.arena.capacity() {
            self.grow(need)?;
        }
        if self.total >= self.most_keys {
            return Err(Stop::Full);
        }
        self.write();
        Ok(())
    }

    /// Writes the open key to its stretch, whatever the budget.
    fn write(&mut self) {
        if self.keys.is_multiple_of(RESTART) {
            self.last.clear();
            self.restarts.push(self.arena.len());
        }
        let shared = (self.last.iter().zip(&self.open))
            .take_while(|(a, b)| a == b)
            .count();
        let rest = &self.open[shared..];
        put_varint(&mut self.arena, shared as u64);
        put_varint(&mut self.arena, rest.len() as u64);
        self.arena.extend_from_slice(rest);
        self.arena
            .extend_from_slice(&self.fingerprint.to_le_bytes());
        put_varint(&mut self.arena, self.rows);
        std::mem::swap(&mut self.last, &mut self.open);
        self.rows = 0;
        self.keys += 1;
        self.total += 1;
    }

    /// Room for `need` more bytes, within the budget. Once a sixteenth
    /// of the run's rows are seen, stretches that would outgrow the budget
    /// at the rate their bytes grew so far give up then, not when full:
    /// the bytes kept until then are written again as fingerprints.
    fn grow(&mut self, need: usize) -> Result<(), Stop> {
        let (seen, rows) = (self.seen as f64, self.run_rows as f64);
        if seen >= rows / 16.0 && self.arena.len() as f64 * rows / seen.max(1.0) > self.most as f64
        {
            return Err(Stop::Full);
        }
        let want = (self.arena.capacity() * 3 / 2).max(self.arena.len() + need + (64 << 10));
        let want = want.min(self.most.max(self.arena.len() + need));
        if want > self.most || self.reservation.try_resize(want).is_err() {
            return Err(Stop::Full);
        }
        self.arena.reserve_exact(want - self.arena.len());
        Ok(())
    }

    /// Closes the stretch now filled and starts the next; an error when
    /// the stretches are too many for their keys.
    fn next_stretch(&mut self) -> Result<(), Stop> {
        self.close_stretch();
        match self.closed.len() * STRETCH > self.total + STRETCH
            || self.closed.len() >= MOST_STRETCHES
        {
            true => Err(Stop::Disorder),
            false => Ok(()),
        }
    }

    /// Closes the open key and the last stretch.
    fn finish(&mut self) {
        if self.rows > 0 {
            // The last key is written whatever the budget (into the room
            // the arena has, as a rule).
            self.arena.reserve_exact(3 * 10 + self.open.len() + 8);
            self.write();
        }
        if self.keys > 0 {
            self.close_stretch();
        }
    }

    fn close_stretch(&mut self) {
        let restarts = self.keys.div_ceil(RESTART);
        self.closed.push(Stretch {
            at: self.start,
            keys: self.keys,
            restarts: self.restarts.len() - restarts,
            last: self.last.as_slice().into(),
        });
        (self.start, self.keys) = (self.arena.len(), 0);
        self.last.clear();
    }

    /// The stretches' keys, each with its fingerprint and rows; the null
    /// rows are not among them.
    pub(super) fn into_each(mut self, mut f: impl FnMut(u64, &[u8], u64)) {
        self.finish();
        for stretch in &self.closed {
            let mut cursor = self.cursor(stretch, 0);
            while cursor.next() {
                f(cursor.fingerprint, &cursor.key, cursor.rows);
            }
        }
    }

    /// A cursor of `stretch` from its `r`th whole key.
    fn cursor(&self, stretch: &Stretch, r: usize) -> Cursor<'_> {
        let at = match r {
            0 => stretch.at,
            r => self.restarts[stretch.restarts + r],
        };
        Cursor {
            buf: &self.arena[at..],
            left: stretch.keys - r * RESTART,
            key: Vec::with_capacity(KEY_ROOM),
            fingerprint: 0,
            rows: 0,
            skip: 0,
            prefix: 0,
            done: false,
        }
    }

    /// The cursor of `stretch` at its first key not below `from` (`None`:
    /// its first), or `None` when it has no such key. It starts at the
    /// last whole key below `from`, found by halving.
    fn cursor_from(&self, stretch: &Stretch, from: Option<&[u8]>) -> Option<Cursor<'_>> {
        let Some(from) = from else {
            let mut c = self.cursor(stretch, 0);
            return c.next().then_some(c);
        };
        // The whole keys below `from` come first: `below` of them.
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
                return Some(c);
            }
        }
        None
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

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at the start of `buf`, and the bytes after it. The arena is
/// written here, so it is well formed.
#[inline]
fn take_varint(buf: &[u8]) -> (u64, &[u8]) {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate() {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return (v, &buf[i + 1..]);
        }
    }
    (v, &[])
}

/// A closed stretch.
struct Stretch {
    /// Where it starts in the arena.
    at: usize,
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
    buf: &'a [u8],
    left: usize,
    key: Vec<u8>,
    fingerprint: u64,
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

impl Cursor<'_> {
    /// Steps to the next key; `false` past the last.
    #[inline]
    fn next(&mut self) -> bool {
        if self.left == 0 {
            return false;
        }
        self.left -= 1;
        let (shared, buf) = take_varint(self.buf);
        let (len, buf) = take_varint(buf);
        let (rest, buf) = buf.split_at(len as usize);
        self.key.truncate(shared as usize);
        self.key.extend_from_slice(rest);
        let (fingerprint, buf) = buf.split_at(8);
        self.fingerprint = u64::from_le_bytes(fingerprint.try_into().unwrap_or_default());
        let (rows, buf) = take_varint(buf);
        self.rows = rows;
        self.buf = buf;
        self.prefix = prefix(&self.key, self.skip);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::memory_pool::{GreedyMemoryPool, UnboundedMemoryPool};

    fn pool() -> Arc<dyn MemoryPool> {
        Arc::new(UnboundedMemoryPool::default())
    }

    fn run(values: &[&str]) -> Stretches {
        let mut s = Stretches::new(usize::MAX, &pool()).unwrap();
        for (i, v) in values.iter().enumerate() {
            s.add(i as u64, v.as_bytes(), 1).unwrap();
        }
        s
    }

    #[test]
    fn overlapping_stretches_merge_to_the_exact_count() {
        // Two runs: the first two stretches (a file each), the second one;
        // `b` lies in all three, `c` in two, `e` across a stretch's end.
        let mut first = run(&["a", "b", "b", "c", "e"]);
        for v in ["b", "c", "d", "e"] {
            first.add(0, v.as_bytes(), 1).unwrap();
        }
        assert_eq!(first.stretches(), 2);
        let second = run(&["b", "f"]);
        let t = merged(vec![first, second], false, 1);
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
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut want = std::collections::HashMap::new();
        let mut runs = Vec::new();
        for _ in 0..3 {
            let mut s = Stretches::new(usize::MAX, &pool()).unwrap();
            for _ in 0..3 {
                let mut keys: Vec<String> = (0..5_000)
                    .map(|_| format!("k{:05}", next() % 20_000))
                    .collect();
                keys.sort();
                for k in keys {
                    s.add(0, k.as_bytes(), 1).unwrap();
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
        let one = merged(runs, false, 1);
        let repeated = want.values().filter(|&&n| n > 1).count() as u64;
        assert_eq!((one.distinct, one.repeated), (want.len() as u64, repeated));
        for threads in [2, 4, 7] {
            let got = merged(drawn().0, false, threads);
            assert_eq!((got.distinct, got.repeated), (one.distinct, one.repeated));
            assert_eq!(got.samples(), one.samples());
        }
    }

    /// Keys that differ past their first 8 bytes, end in zero bytes, or
    /// are the start of others (the empty key too) merge to a HashMap's
    /// count on any number of threads.
    #[test]
    fn keys_alike_in_their_prefixes_are_told_apart_by_their_bytes() {
        let mut rng = 7u64;
        let mut next = move |n: u64| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % n
        };
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
                let mut s = Stretches::new(usize::MAX, &pool()).unwrap();
                for t in 0..3u64 {
                    let mut part: Vec<&Vec<u8>> = (keys.iter().enumerate())
                        .filter(|(i, _)| (*i as u64 * 7 + seed + r * 3 + t) % 5 < 2)
                        .map(|(_, k)| k)
                        .collect();
                    part.sort();
                    for k in part {
                        s.add(0, k, 1).unwrap();
                        *want.entry(k.clone()).or_insert(0u64) += 1;
                    }
                }
                runs.push(s);
            }
            (runs, want)
        };
        let (runs, want) = runs_of(0);
        let one = merged(runs, false, 1);
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
            let got = merged(runs_of(0).0, false, threads);
            assert_eq!((got.distinct, got.repeated), (one.distinct, one.repeated));
            assert_eq!(got.samples(), one.samples());
        }
    }

    #[test]
    fn keys_come_back_whole_with_their_fingerprints_and_rows() {
        let values = ["customer-0001@x", "customer-0002@x", "customer-0100@y", "d"];
        let mut s = run(&values);
        s.add(9, b"d", 4).unwrap();
        let mut back = Vec::new();
        s.into_each(|f, k, n| back.push((f, String::from_utf8(k.to_vec()).unwrap(), n)));
        let want: Vec<(u64, String, u64)> = (values.iter().enumerate())
            .map(|(i, v)| (i as u64, v.to_string(), if *v == "d" { 5 } else { 1 }))
            .collect();
        assert_eq!(back, want);
    }

    #[test]
    fn values_out_of_order_give_the_stretches_up() {
        let mut s = Stretches::new(usize::MAX, &pool()).unwrap();
        let got: Vec<Result<(), Stop>> = (["m", "c", "x", "a"].iter())
            .map(|v| s.add(0, v.as_bytes(), 1))
            .collect();
        assert_eq!(got, vec![Ok(()), Ok(()), Ok(()), Err(Stop::Disorder)]);
        // What was kept before is whole: m, c and x (a was refused).
        let mut back = Vec::new();
        s.into_each(|_, k, _| back.push(k.to_vec()));
        assert_eq!(back, vec![b"m".to_vec(), b"c".to_vec(), b"x".to_vec()]);
    }

    #[test]
    fn stretches_beyond_their_budget_stop_full() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 20));
        let mut s = Stretches::new(1 << 20, &pool).unwrap();
        let stop = (0..1_000_000u64)
            .map(|i| s.add(i, format!("key-{i:012}").as_bytes(), 1))
            .find_map(Result::err);
        assert_eq!(stop, Some(Stop::Full));
        assert!(s.bytes() <= 1 << 20);
        let mut kept = 0;
        s.into_each(|_, _, _| kept += 1);
        assert!(kept > 1000, "{kept}");
    }
}
