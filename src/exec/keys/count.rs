//! Counting each radix partition exactly. A [`Sieve`] of hash bits picks
//! the few words that may repeat (about 5% of unique keys), and only those
//! go through an open-addressing [`Table`] of words with a side map of the
//! words seen more than once: a table probe of random keys costs a branch
//! miss at every collision (about 9 ns a word), the sieve's two passes
//! about 3 ns. A partition far larger than the others holds a hot word's
//! every row: it is [`Tally`]ed as it is read instead, in the memory of its
//! distinct words. Partitions are independent, so every core takes the
//! next one.
//! The joins still build and probe tables directly.

use datafusion::common::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::key::Key;
use super::store::{LocalStore, StoreError};

/// What counting found over all partitions.
pub struct Counted<K> {
    /// Words seen more than once, with how often: all of them, or none
    /// when there were more than the count was to keep.
    pub repeated: Vec<(K, u64)>,
    /// Distinct words.
    pub distinct: u64,
    /// Words seen more than once, and their rows, kept or not.
    pub candidates: u64,
    pub candidate_rows: u64,
}

impl<K> Counted<K> {
    /// Whether `repeated` holds every word seen more than once.
    pub fn complete(&self) -> bool {
        self.repeated.len() as u64 == self.candidates
    }
}

/// Which repeated words a count keeps.
#[derive(Debug, Clone, Copy)]
pub enum Keep {
    /// All of them, or none when there are more than this many.
    Most(u64),
    /// The first this many as [`rank_top`] ranks them (a packed key's
    /// samples: 10M keys each twice kept 5M words and their counts, 80 MB).
    Top(usize),
}

/// Counts every partition of `stores` (the same partitioning) on `threads`
/// threads, keeping the repeated words `keep` says; `join` gives back the
/// word that a partition keeps as a stored one.
pub fn count<K: Key, W: Send + Ord>(
    stores: &[LocalStore<K>],
    (threads, keep): (usize, Keep),
    join: impl Fn(usize, K) -> W + Sync,
) -> Result<Counted<W>, StoreError> {
    let partitions = stores.first().map_or(0, LocalStore::partitions);
    let found = Mutex::new(Counted {
        repeated: Vec::new(),
        distinct: 0,
        candidates: 0,
        candidate_rows: 0,
    });
    let (usual, big) = sizes(stores);
    each_partition(partitions, threads, Sieve::default, |sieve, p, buf| {
        let distinct = if words_of(stores, p) > big {
            // A hot word's partition: tallied as it is read, in the
            // memory of its distinct words.
            sieve.tally.reset(usual);
            visit(stores, p, buf, |w| sieve.tally.add(w))?;
            sieve.tally.repeats_into(&mut sieve.table)
        } else {
            // The in-memory words are read where they are; spilled ones
            // are read back into the sieve's own buffer.
            let mut spilled = std::mem::take(&mut sieve.spilled);
            spilled.clear();
            for s in stores {
                s.spilled(p, buf, |w| spilled.push(w))?;
            }
            let mut parts: Vec<&[K]> = stores.iter().flat_map(|s| s.in_memory(p)).collect();
            parts.push(&spilled);
            let distinct = sieve.count(&parts);
            drop(parts);
            sieve.spilled = spilled;
            distinct
        };
        let mut f = found.lock().expect("lock");
        f.distinct += distinct;
        f.candidates += sieve.table.repeated.len() as u64;
        f.candidate_rows += sieve.table.repeated.values().sum::<u64>();
        match keep {
            Keep::Most(most) if f.candidates > most => {
                f.repeated = Vec::new();
                sieve.table.repeated.clear();
            }
            _ => (f.repeated).extend(sieve.table.repeated.drain().map(|(w, n)| (join(p, w), n))),
        }
        if let Keep::Top(k) = keep {
            if f.repeated.len() > 4 * k.max(1024) {
                rank_top(&mut f.repeated, k);
            }
        }
        Ok(())
    })?;
    let mut counted = found.into_inner().expect("lock");
    if let Keep::Top(k) = keep {
        rank_top(&mut counted.repeated, k);
    }
    Ok(counted)
}

/// Counts one partition's words exactly while sending only a few of them
/// through a hash table, whose probes cost a branch miss each.
///
/// 1. A bitmap of 8 bits a word (it stays in L1 or L2) marks each word's
///    hash; a word whose bit is already set becomes a candidate: it repeats
///    an earlier word, or shares its bit (at most 1 in 8).
/// 2. The bitmap is cleared and marks the candidates' bits; every word
///    whose bit is set is picked, and only the picked words are counted in
///    the table. Every occurrence of a repeated word is picked (its second
///    occurrence was a candidate), so the table's repeats are all the
///    partition's repeats, and a word not picked occurs once.
///
/// Both passes are free of data-dependent branches: a word is appended
/// always, and the end moves on by its bit.
pub struct Sieve<K: Key> {
    /// Spilled words read back.
    spilled: Vec<K>,
    bits: Vec<u64>,
    picked: Vec<K>,
    pub table: Table<K>,
    tally: Tally<K>,
}

impl<K: Key> Default for Sieve<K> {
    fn default() -> Self {
        Sieve {
            spilled: Vec::new(),
            bits: Vec::new(),
            picked: Vec::new(),
            table: Table::default(),
            tally: Tally::default(),
        }
    }
}

/// Words past which a partition is tallied as it is read rather than
/// sieved (2 MiB of u64 words), when that is also 4 times the usual
/// partition: the sieve holds a partition's words twice, and a hot
/// word's partition holds every row of that word.
const BIG_WORDS: usize = 1 << 18;

/// The usual partition's words in `stores`, and the words past which a
/// partition is tallied.
fn sizes<K: Key>(stores: &[LocalStore<K>]) -> (usize, usize) {
    let words: u64 = stores.iter().map(|s| s.words).sum();
    let usual = words as usize / stores.first().map_or(1, LocalStore::partitions);
    (usual, (usual * 4).max(BIG_WORDS))
}

/// A partition's distinct words, each with how often it was added: a
/// partition far larger than the others holds a hot word many times, so
/// it is counted in the memory of its distinct words, one word at a
/// time as it is read (the hot word's probes all hit its one slot).
pub struct Tally<K: Key> {
    slots: Vec<K>,
    counts: Vec<u64>,
    mask: usize,
    distinct: usize,
    /// Occurrences of `K::EMPTY` itself, which cannot sit in a slot.
    empties: u64,
}

impl<K: Key> Default for Tally<K> {
    fn default() -> Self {
        Tally {
            slots: Vec::new(),
            counts: Vec::new(),
            mask: 0,
            distinct: 0,
            empties: 0,
        }
    }
}

impl<K: Key> Tally<K> {
    /// Empties the tally and sizes it for `words` distinct words.
    fn reset(&mut self, words: usize) {
        let slots = (words * 2).next_power_of_two().max(16);
        self.slots.clear();
        self.slots.resize(slots, K::EMPTY);
        self.counts.clear();
        self.counts.resize(slots, 0);
        self.mask = slots - 1;
        self.distinct = 0;
        self.empties = 0;
    }

    #[inline]
    fn add(&mut self, w: K) {
        if w == K::EMPTY {
            self.empties += 1;
            return;
        }
        let mut i = (w.mix() as usize) & self.mask;
        loop {
            let s = self.slots[i];
            if s == w {
                self.counts[i] += 1;
                return;
            }
            if s == K::EMPTY {
                self.slots[i] = w;
                self.counts[i] = 1;
                self.distinct += 1;
                if self.distinct * 2 > self.slots.len() {
                    self.grow();
                }
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Doubles the slots, keeping every word and count.
    fn grow(&mut self) {
        let slots = std::mem::take(&mut self.slots);
        let counts = std::mem::take(&mut self.counts);
        let len = slots.len() * 2;
        self.slots.resize(len, K::EMPTY);
        self.counts.resize(len, 0);
        self.mask = len - 1;
        for (w, n) in slots
            .into_iter()
            .zip(counts)
            .filter(|(w, _)| *w != K::EMPTY)
        {
            let mut i = (w.mix() as usize) & self.mask;
            while self.slots[i] != K::EMPTY {
                i = (i + 1) & self.mask;
            }
            self.slots[i] = w;
            self.counts[i] = n;
        }
    }

    /// Puts the repeated words, with their counts, in `table`'s (emptied)
    /// repeats; returns how many distinct words were added.
    fn repeats_into(&self, table: &mut Table<K>) -> u64 {
        table.reset(0);
        let words = self.slots.iter().copied().zip(self.counts.iter().copied());
        let empty = (K::EMPTY, self.empties);
        for (w, n) in words.chain([empty]).filter(|(_, n)| *n > 1) {
            table.repeated.insert(w, n);
        }
        self.distinct as u64 + u64::from(self.empties > 0)
    }
}

impl<K: Key> Sieve<K> {
    /// Counts the words of `parts`: returns how many distinct words they
    /// hold and leaves the repeated ones, with their counts, in
    /// `self.table.repeated`.
    pub fn count(&mut self, parts: &[&[K]]) -> u64 {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let slots = (len * 8).next_power_of_two().max(64);
        let mask = slots - 1;
        self.bits.clear();
        self.bits.resize(slots / 64, 0);
        if self.picked.len() <= len {
            self.picked.resize(len + 1, K::ZERO);
        }
        let bits = &mut self.bits[..];
        let picked = &mut self.picked[..=len];
        let mut candidates = 0usize;
        for part in parts {
            for &w in *part {
                let b = (w.mix() as usize) & mask;
                let (i, m) = (b >> 6, 1u64 << (b & 63));
                let old = bits[i];
                bits[i] = old | m;
                picked[candidates] = w;
                candidates += usize::from(old & m != 0);
            }
        }
        self.table.reset(0);
        if candidates == 0 {
            return len as u64;
        }
        bits.fill(0);
        for &w in &picked[..candidates] {
            let b = (w.mix() as usize) & mask;
            bits[b >> 6] |= 1 << (b & 63);
        }
        let mut n = 0usize;
        for part in parts {
            for &w in *part {
                let b = (w.mix() as usize) & mask;
                picked[n] = w;
                n += ((bits[b >> 6] >> (b & 63)) & 1) as usize;
            }
        }
        // Every candidate but those that only shared a bit repeats a
        // picked word, so the picked words hold at least `n - candidates`
        // distinct ones: the table starts there (one hot word picked 10M
        // times no longer zeroes 32M slots) and grows past it.
        let table = &mut self.table;
        let least = n.saturating_sub(candidates);
        table.reset(least + least / 8);
        // A run of one word (a hot word picked again and again) is one
        // insertion.
        let mut i = 0;
        while i < n {
            let w = picked[i];
            let run = picked[i..n].iter().take_while(|v| **v == w).count();
            table.make_room();
            table.insert_n(w, run as u64);
            i += run;
        }
        (len - n) as u64 + self.table.distinct
    }
}

/// Runs `job(state, item)` for every item of `0..items` on `threads`
/// threads, each taking the next item and keeping its own `state` (from
/// `init`) across them; returns the states.
pub fn share<S: Send>(
    items: usize,
    threads: usize,
    init: impl Fn() -> S + Sync,
    job: impl Fn(&mut S, usize) + Sync,
) -> Vec<S> {
    let next = AtomicUsize::new(0);
    let worker = || {
        let mut state = init();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= items {
                break state;
            }
            job(&mut state, i);
        }
    };
    std::thread::scope(|scope| {
        let others: Vec<_> = (1..threads.min(items))
            .map(|_| scope.spawn(worker))
            .collect();
        let mut states = vec![worker()];
        for w in others {
            states.push(w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        states
    })
}

/// Runs `job(state, partition, buffer)` for every partition, each worker
/// taking the next one; a worker keeps its `state` (a table) across them.
pub fn each_partition<S: Send>(
    partitions: usize,
    threads: usize,
    init: impl Fn() -> S + Sync,
    job: impl Fn(&mut S, usize, &mut Vec<u8>) -> Result<(), StoreError> + Sync,
) -> Result<(), StoreError> {
    let failed: Mutex<Option<StoreError>> = Mutex::new(None);
    let init = || (init(), Vec::new());
    share(partitions, threads, init, |(state, buf), p| {
        if failed.lock().expect("lock").is_some() {
            return;
        }
        if let Err(e) = job(state, p, buf) {
            *failed.lock().expect("lock") = Some(e);
        }
    });
    match failed.into_inner().expect("lock") {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Words of partition `p` over all stores.
pub fn words_of<K: Key>(stores: &[LocalStore<K>], p: usize) -> usize {
    stores.iter().map(|s| s.words_of(p)).sum()
}

/// Calls `f` on every word of partition `p` of every store, in memory and
/// spilled.
pub fn visit<K: Key>(
    stores: &[LocalStore<K>],
    p: usize,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(K),
) -> Result<(), StoreError> {
    for s in stores {
        for chunk in s.in_memory(p) {
            chunk.iter().for_each(|w| f(*w));
        }
        s.spilled(p, buf, &mut f)?;
    }
    Ok(())
}

/// A set of words with linear probing, and the counts of repeated words.
pub struct Table<K: Key> {
    slots: Vec<K>,
    mask: usize,
    /// Occurrences of `K::EMPTY` itself, which cannot sit in a slot.
    empties: u64,
    pub distinct: u64,
    pub repeated: HashMap<K, u64>,
}

impl<K: Key> Default for Table<K> {
    fn default() -> Self {
        Table {
            slots: Vec::new(),
            mask: 0,
            empties: 0,
            distinct: 0,
            repeated: HashMap::new(),
        }
    }
}

impl<K: Key> Table<K> {
    /// Empties the table and sizes it for `words` (load at most 1/2).
    pub fn reset(&mut self, words: usize) {
        let slots = (words * 2).next_power_of_two().max(16);
        self.slots.clear();
        self.slots.resize(slots, K::EMPTY);
        self.mask = slots - 1;
        self.empties = 0;
        self.distinct = 0;
        self.repeated.clear();
    }

    #[inline]
    pub fn insert(&mut self, w: K) {
        self.insert_n(w, 1);
    }

    /// Inserts `n` (at least 1) occurrences of `w`.
    #[inline]
    pub fn insert_n(&mut self, w: K, n: u64) {
        if w == K::EMPTY {
            self.distinct += u64::from(self.empties == 0);
            self.empties += n;
            if self.empties > 1 {
                self.repeated.insert(w, self.empties);
            }
            return;
        }
        let mut i = (w.mix() as usize) & self.mask;
        loop {
            let s = self.slots[i];
            if s == K::EMPTY {
                self.slots[i] = w;
                self.distinct += 1;
                if n > 1 {
                    self.repeated.insert(w, n);
                }
                return;
            }
            if s == w {
                *self.repeated.entry(w).or_insert(1) += n;
                return;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Grows the table when one more word would fill more than half of
    /// it: for tables filled past the words they were sized for.
    #[inline]
    pub fn make_room(&mut self) {
        if self.distinct * 2 + 2 > self.slots.len() as u64 {
            self.grow();
        }
    }

    /// Doubles the slots (at least 16), keeping every word and count.
    pub fn grow(&mut self) {
        let old = std::mem::take(&mut self.slots);
        let slots = (old.len() * 2).max(16);
        self.slots.resize(slots, K::EMPTY);
        self.mask = slots - 1;
        for w in old.into_iter().filter(|w| *w != K::EMPTY) {
            let mut i = (w.mix() as usize) & self.mask;
            while self.slots[i] != K::EMPTY {
                i = (i + 1) & self.mask;
            }
            self.slots[i] = w;
        }
    }

    /// How often `w` was inserted (0: never).
    #[inline]
    pub fn count_of(&self, w: K) -> u64 {
        if !self.contains(w) {
            return 0;
        }
        self.repeated.get(&w).copied().unwrap_or(1)
    }

    /// The `k` most frequent words, count descending then word ascending
    /// (words order like their keys).
    pub fn top(&self, k: usize) -> Vec<(K, u64)> {
        let mut best: Vec<(K, u64)> = self.repeated.iter().map(|(w, n)| (*w, *n)).collect();
        if best.len() < k {
            // Then the smallest words seen once.
            let mut once: Vec<K> = self
                .slots
                .iter()
                .copied()
                .filter(|w| *w != K::EMPTY && !self.repeated.contains_key(w))
                .collect();
            if self.empties == 1 {
                once.push(K::EMPTY);
            }
            let want = k - best.len();
            if once.len() > want {
                once.select_nth_unstable(want);
                once.truncate(want);
            }
            best.extend(once.into_iter().map(|w| (w, 1)));
        }
        rank_top(&mut best, k);
        best
    }

    /// Every distinct word in the table.
    pub fn words(&self) -> impl Iterator<Item = K> + '_ {
        let empty = (self.empties > 0).then_some(K::EMPTY);
        self.slots
            .iter()
            .copied()
            .filter(|w| *w != K::EMPTY)
            .chain(empty)
    }

    /// Whether `w` is in the table.
    #[inline]
    pub fn contains(&self, w: K) -> bool {
        if w == K::EMPTY {
            return self.empties > 0;
        }
        let mut i = (w.mix() as usize) & self.mask;
        loop {
            let s = self.slots[i];
            if s == w {
                return true;
            }
            if s == K::EMPTY {
                return false;
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// Keeps the `k` best of `words`, count descending then word ascending,
/// in that order.
pub fn rank_top<K: Ord>(words: &mut Vec<(K, u64)>, k: usize) {
    let best = |a: &(K, u64), b: &(K, u64)| b.1.cmp(&a.1).then(a.0.cmp(&b.0));
    if words.len() > k {
        words.select_nth_unstable_by(k, best);
        words.truncate(k);
    }
    words.sort_unstable_by(best);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_counts_repeats_including_the_empty_word() {
        let mut t = Table::<u64>::default();
        t.reset(8);
        for w in [1, 2, 3, 2, 2, u64::MAX, 7, u64::MAX, 1] {
            t.insert(w);
        }
        assert_eq!(t.distinct, 5);
        let mut r: Vec<_> = t.repeated.iter().map(|(k, n)| (*k, *n)).collect();
        r.sort();
        assert_eq!(r, vec![(1, 2), (2, 3), (u64::MAX, 2)]);
        assert!(t.contains(7) && t.contains(u64::MAX) && !t.contains(8));
        assert_eq!((t.count_of(2), t.count_of(7), t.count_of(8)), (3, 1, 0));
        assert_eq!(t.top(4), vec![(2, 3), (1, 2), (u64::MAX, 2), (3, 1)]);
    }

    #[test]
    fn the_sieve_counts_like_the_table_with_repeats_and_shared_bits() {
        // Few distinct values among many words: candidates are mostly true
        // repeats; many distinct values in few bits: mostly shared bits.
        // A hot word (`modulus` 0: every other word is 7, the rest unique)
        // picks many words of few distinct ones: the table starts small and
        // grows.
        for (n, modulus) in [
            (0u64, 1u64),
            (1, 1),
            (5_000, 100),
            (20_000, 1 << 40),
            (3_000, 2_999),
            (40_000, 0),
        ] {
            let word = |i: u64| match modulus {
                0 if i.is_multiple_of(2) => 7,
                0 => i.wrapping_mul(0x2545_F491_4F6C_DD1D),
                m => i.wrapping_mul(0x2545_F491_4F6C_DD1D) % m,
            };
            let words: Vec<u64> = (0..n)
                .map(word)
                .chain([u64::MAX, u64::MAX].into_iter().take((n % 3) as usize))
                .collect();
            let mut table = Table::<u64>::default();
            table.reset(words.len());
            words.iter().for_each(|w| table.insert(*w));
            let mut sieve = Sieve::<u64>::default();
            let (a, b) = words.split_at(words.len() / 3);
            assert_eq!(
                sieve.count(&[a, &[], b]),
                table.distinct,
                "{n} words mod {modulus}"
            );
            let sorted = |m: &HashMap<u64, u64>| {
                let mut v: Vec<_> = m.iter().map(|(k, c)| (*k, *c)).collect();
                v.sort_unstable();
                v
            };
            assert_eq!(sorted(&sieve.table.repeated), sorted(&table.repeated));
            let mut tally = Tally::<u64>::default();
            tally.reset(1);
            words.iter().for_each(|w| tally.add(*w));
            assert_eq!(tally.repeats_into(&mut sieve.table), table.distinct);
            assert_eq!(sorted(&sieve.table.repeated), sorted(&table.repeated));
        }
    }

    /// A hot word's partition, far past the others, is tallied (in memory
    /// or spilled, the empty word hot too) and counted like the rest.
    #[test]
    fn a_hot_partition_is_tallied_and_counted_exactly() {
        use datafusion::execution::runtime_env::RuntimeEnvBuilder;
        for (hot, limit) in [(7u64, None), (u64::MAX, Some(4usize << 20))] {
            let mut runtime = RuntimeEnvBuilder::new();
            if let Some(l) = limit {
                runtime = runtime.with_memory_limit(l, 1.0);
            }
            let runtime = runtime.build_arc().expect("runtime");
            let words: Vec<u64> = (0..1_200_000u64)
                .map(|i| match i % 5 {
                    0 | 1 => hot,
                    2 => i % 20_000,
                    _ => i.wrapping_mul(0x2545_F491_4F6C_DD1D),
                })
                .collect();
            let stores: Vec<LocalStore<u64>> = words
                .chunks(words.len() / 2)
                .map(|half| {
                    let mut s = LocalStore::new(16, runtime.clone(), "test");
                    half.chunks(4096).for_each(|c| s.push_all(c).expect("push"));
                    s
                })
                .collect();
            assert_eq!(stores[1].spilled_bytes() > 0, limit.is_some());
            let big = sizes(&stores).1;
            let hot_ones = (0..16).filter(|p| words_of(&stores, *p) > big).count();
            assert_eq!(hot_ones, 1, "one partition is tallied");
            let mut got = count(&stores, (2, Keep::Most(u64::MAX)), |_, w| w).expect("count");
            got.repeated.sort_unstable();
            let want = super::super::testing::counted(&words);
            let rows: u64 = want.1.iter().map(|(_, n)| n).sum();
            assert!(got.complete() && got.candidate_rows == rows);
            assert_eq!((got.distinct, got.repeated), want, "hot word {hot}");
            // Keeping fewer repeated words than there are: none kept,
            // every one counted, with its rows.
            let most = want.1.len() as u64 - 1;
            let got = count(&stores, (2, Keep::Most(most)), |_, w| w).expect("count");
            assert!(!got.complete() && got.repeated.is_empty());
            let counted = (got.distinct, got.candidates, got.candidate_rows);
            assert_eq!(counted, (want.0, want.1.len() as u64, rows));
            // Keeping the top few: those `rank_top` ranks first of them all.
            let got = count(&stores, (2, Keep::Top(10)), |_, w| w).expect("count");
            let mut top = want.1.clone();
            rank_top(&mut top, 10);
            assert_eq!(
                (got.distinct, got.candidates),
                (want.0, want.1.len() as u64)
            );
            assert_eq!(got.repeated, top);
        }
    }
}
