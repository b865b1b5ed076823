//! The candidates of a verification round, and the exact keys filed under
//! them ([`super::verify`]).
//!
//! A candidate row costs a probe of [`Candidates`], which gives the
//! fingerprint's ordinal, and a compare with the first key filed under that
//! ordinal, whose place is in a flat array and whose bytes are in one
//! arena. So a row of a key repeated a hundred times touches three cache
//! lines: the probe's slot, the ordinal's entry and the key's bytes, and
//! allocates nothing. (A map of fingerprints to vectors of boxed keys, as
//! before, took about six dependent loads a row: 2 s for the 10M rows of
//! 150,000 repeated e-mail addresses, three times DuckDB's whole
//! `count(DISTINCT)`.) A second key under one fingerprint, a collision of
//! the cut hash, goes to a side map.

use std::collections::HashMap;

use super::count::share;
use super::key::Key as _;

/// The candidate fingerprints of a round, behind a bit filter: a row is
/// looked up only when its fingerprint's filter bit is set. With about
/// 1.5% of the bits set, the test is a load and a branch that is almost
/// always "no", where the table's probe alone ends at a mispredicted branch
/// for every other row (half of its slots are empty). Measured on 50M text
/// keys, the probe was 0.5 s of a 1.2 s verification.
pub(super) struct Candidates {
    /// Open addressing by the fingerprint's mix, at most half full.
    slots: Vec<Slot>,
    slot_mask: usize,
    filter: Filter,
    /// A bit for each value of the candidates' low 16 bits, which is all
    /// that compactly kept text keeps of a fingerprint.
    low16: Vec<u64>,
    len: usize,
}

/// A bit filter of fingerprints: a fingerprint that is none of them fails
/// it but for a share about the share of bits set.
pub(super) struct Filter {
    bits: Vec<u64>,
    mask: u64,
}

impl Filter {
    /// A filter of `len` bits (a power of two, at least 64) over `words`.
    pub(super) fn new(len: usize, words: impl Iterator<Item = u64>) -> Filter {
        debug_assert!(len.is_power_of_two() && len >= 64);
        let mut f = Filter {
            bits: vec![0u64; len / 64],
            mask: len as u64 - 1,
        };
        for w in words {
            f.set(w);
        }
        f
    }

    /// Bits for `n` words: `per` a word, a power of two from 1 Ki to the
    /// greatest one within `most`.
    pub(super) fn sized(n: usize, per: usize, most: usize) -> usize {
        let most = 1usize << (usize::BITS - 1 - most.max(1 << 10).leading_zeros());
        n.saturating_mul(per)
            .next_power_of_two()
            .clamp(1 << 10, most)
    }

    #[inline]
    pub(super) fn set(&mut self, w: u64) {
        let b = w & self.mask;
        self.bits[(b >> 6) as usize] |= 1 << (b & 63);
    }

    /// Whether `w`'s bit is set: its low bits, which the candidates' slots
    /// (from a multiplied mix) do not follow, and which the test-only
    /// narrow fingerprints keep.
    #[inline]
    pub(super) fn passes(&self, w: u64) -> bool {
        let b = w & self.mask;
        self.bits[(b >> 6) as usize] & (1 << (b & 63)) != 0
    }
}

/// A candidate's fingerprint and ordinal (`FREE`: an empty slot).
#[derive(Clone, Copy)]
struct Slot {
    word: u64,
    ordinal: u32,
}

const FREE: u32 = u32::MAX;

/// The most candidates of one round: their ordinals are `u32`s.
pub(super) const MOST: u64 = (FREE / 2) as u64;

impl Candidates {
    /// The candidates `fingerprints` (each once; at most [`MOST`]).
    pub(super) fn new(fingerprints: impl Iterator<Item = u64> + Clone) -> Candidates {
        let n = fingerprints.clone().count();
        // 64 bits a candidate, from 1 Ki to 8 Mi bits (1 MiB).
        let len = Filter::sized(n, 64, 1 << 23);
        let slots = (n * 2).next_power_of_two().max(16);
        let mut c = Candidates {
            slots: vec![
                Slot {
                    word: 0,
                    ordinal: FREE
                };
                slots
            ],
            slot_mask: slots - 1,
            filter: Filter::new(len, std::iter::empty()),
            low16: vec![0u64; (1 << 16) / 64],
            len: 0,
        };
        for w in fingerprints {
            let mut i = (w.mix() as usize) & c.slot_mask;
            while c.slots[i].ordinal != FREE && c.slots[i].word != w {
                i = (i + 1) & c.slot_mask;
            }
            if c.slots[i].ordinal != FREE {
                continue;
            }
            c.slots[i] = Slot {
                word: w,
                ordinal: c.len as u32,
            };
            c.len += 1;
            c.filter.set(w);
            c.low16[usize::from(w as u16 >> 6)] |= 1 << (w & 63);
        }
        c
    }

    /// How many candidates there are.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Whether some candidate's low 16 bits are `low`.
    #[inline]
    pub(super) fn maybe(&self, low: u16) -> bool {
        self.low16[usize::from(low >> 6)] & (1 << (low & 63)) != 0
    }

    /// Asks the cache for the slot of `w` if its filter bit is set (see
    /// [`Filed::batch`]): rows that are no candidate fetch nothing more.
    #[inline]
    pub(super) fn prefetch(&self, w: u64) {
        if self.passes(w) {
            prefetch(&self.slots[(w.mix() as usize) & self.slot_mask]);
        }
    }

    /// Whether `w`'s filter bit is set (see [`Filter::passes`]).
    #[inline]
    fn passes(&self, w: u64) -> bool {
        self.filter.passes(w)
    }

    /// The ordinal of candidate `w`, if it is one.
    #[inline]
    pub(super) fn index(&self, w: u64) -> Option<u32> {
        if !self.passes(w) {
            return None;
        }
        let mut i = (w.mix() as usize) & self.slot_mask;
        loop {
            let s = self.slots[i];
            if s.ordinal == FREE {
                return None;
            }
            if s.word == w {
                return Some(s.ordinal);
            }
            i = (i + 1) & self.slot_mask;
        }
    }
}

/// Asks the cache for the line at `p`: a hint, which reads nothing.
#[inline]
pub(super) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it neither reads nor faults.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The exact keys of one run's candidate rows, by the candidates' ordinals:
/// each key as a tag byte (0 for a null text value, 1 otherwise) and its
/// bytes, with the rows it was found in.
pub(super) struct Filed {
    first: Vec<First>,
    arena: Vec<u8>,
    /// The keys after the first under one ordinal.
    more: HashMap<u32, Vec<Key>>,
}

/// A key (tag and bytes) and its rows.
type Key = (Box<[u8]>, u64);

/// Where an ordinal's first key lies in the arena (tag included), and its
/// rows (0: no key filed yet).
#[derive(Clone, Copy, Default)]
struct First {
    start: u64,
    len: u64,
    rows: u64,
}

impl Filed {
    /// Room for the keys of `candidates` ordinals.
    pub(super) fn new(candidates: usize) -> Filed {
        Filed {
            first: vec![First::default(); candidates],
            arena: Vec::new(),
            more: HashMap::new(),
        }
    }

    /// Files `rows` rows of the key `tag`, `bytes` under `ordinal`.
    #[inline]
    pub(super) fn file(&mut self, ordinal: u32, tag: u8, bytes: &[u8], rows: u64) {
        if rows == 0 {
            return;
        }
        let first = &mut self.first[ordinal as usize];
        if first.rows == 0 {
            first.start = self.arena.len() as u64;
            first.len = bytes.len() as u64 + 1;
            first.rows = rows;
            self.arena.push(tag);
            self.arena.extend_from_slice(bytes);
            return;
        }
        let at = first.start as usize;
        let key = &self.arena[at..at + first.len as usize];
        if key[0] == tag && key[1..] == *bytes {
            first.rows += rows;
            return;
        }
        let keys = self.more.entry(ordinal).or_default();
        match keys
            .iter_mut()
            .find(|(k, _)| k[0] == tag && k[1..] == *bytes)
        {
            Some((_, n)) => *n += rows,
            None => {
                let mut key = Vec::with_capacity(bytes.len() + 1);
                key.push(tag);
                key.extend_from_slice(bytes);
                keys.push((key.into_boxed_slice(), rows));
            }
        }
    }

    /// Files a batch of keys that are candidates of `candidates` by their
    /// fingerprint (`fp`): `key` gives each one's tag, bytes and rows. Each
    /// step asks the cache for what the next needs for every key of the
    /// batch (the candidates' slots, the ordinals' entries, the first keys'
    /// bytes), so that the misses of one key overlap those of the others
    /// instead of following each other.
    pub(super) fn batch<'a, T>(
        &mut self,
        candidates: &Candidates,
        items: &'a [T],
        fp: impl Fn(&T) -> u64,
        key: impl Fn(&'a T) -> (u8, &'a [u8], u64),
    ) {
        let mut ordinals = [FREE; super::pages::BATCH];
        let ordinals = &mut ordinals[..items.len()];
        for t in items {
            candidates.prefetch(fp(t));
        }
        for (t, o) in items.iter().zip(ordinals.iter_mut()) {
            if let Some(i) = candidates.index(fp(t)) {
                *o = i;
                prefetch(&self.first[i as usize]);
            }
        }
        for &o in ordinals.iter().filter(|o| **o != FREE) {
            let first = self.first[o as usize];
            if first.rows > 0 {
                prefetch(self.arena.as_ptr().wrapping_add(first.start as usize));
            }
        }
        for (t, &o) in items.iter().zip(ordinals.iter()) {
            if o != FREE {
                let (tag, bytes, rows) = key(t);
                self.file(o, tag, bytes, rows);
            }
        }
    }

    /// Every filed key (tag and bytes) with its rows, by ordinal.
    #[cfg(test)]
    fn each(&self, mut f: impl FnMut(u32, &[u8], u64)) {
        for i in 0..self.first.len() as u32 {
            self.keys_of(i, |k, n| f(i, k, n));
        }
    }

    /// The keys (tag and bytes) filed under `ordinal`, with their rows.
    #[inline]
    fn keys_of<'a>(&'a self, ordinal: u32, mut f: impl FnMut(&'a [u8], u64)) {
        let first = self.first[ordinal as usize];
        if first.rows == 0 {
            return;
        }
        let at = first.start as usize;
        f(&self.arena[at..at + first.len as usize], first.rows);
        if !self.more.is_empty() {
            for (k, n) in self.more.get(&ordinal).into_iter().flatten() {
                f(k, *n);
            }
        }
    }
}

/// Ordinals a thread of [`together`] takes at a time. (Small in unit
/// tests, which cross their ends.)
const ORDINALS: usize = if cfg!(test) { 8 } else { 1 << 14 };

/// Ordinals ahead of the one counted whose first keys [`together`] asks
/// the cache for.
const AHEAD: usize = 16;

/// Counts the keys that the runs `parts` filed together, on `threads`
/// threads a range of ordinals at a time: each ordinal's keys of every
/// part, the rows of equal keys summed, go once to `visit(state, ordinal,
/// key, rows)`, each thread with its own `state` (from `init`); returns
/// the states. (Merging the parts into one on one thread, each key filed
/// again, took a fifth of the verification of a million candidates.)
pub(super) fn together<S: Send>(
    parts: &[Filed],
    threads: usize,
    init: impl Fn() -> S + Sync,
    visit: impl Fn(&mut S, u32, &[u8], u64) + Sync,
) -> Vec<S> {
    let ordinals = parts.iter().map(|p| p.first.len()).max().unwrap_or(0);
    share(ordinals.div_ceil(ORDINALS), threads, init, |state, c| {
        let ends = ordinals.min((c + 1) * ORDINALS);
        let mut keys: Vec<(&[u8], u64)> = Vec::new();
        for o in c * ORDINALS..ends {
            for p in parts.iter().filter(|p| o + AHEAD < p.first.len()) {
                let ahead = p.first[o + AHEAD];
                if ahead.rows > 0 {
                    prefetch(p.arena.as_ptr().wrapping_add(ahead.start as usize));
                }
            }
            for p in parts.iter().filter(|p| o < p.first.len()) {
                p.keys_of(o as u32, |key, rows| {
                    match keys.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, n)) => *n += rows,
                        None => keys.push((key, rows)),
                    }
                });
            }
            for (key, rows) in keys.drain(..) {
                visit(state, o as u32, key, rows);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_passes_its_words() {
        let f = Filter::new(1 << 12, (0..300u64).map(|i| i * 7919));
        assert!((0..300u64).all(|i| f.passes(i * 7919)));
        assert!((0..10_000u64).filter(|i| f.passes(i * 104_729 + 1)).count() < 2_000);
    }

    /// The filter only ever says "no" early: every candidate is found,
    /// whatever its bits (narrow test fingerprints, the empty word, a
    /// filter saturated by more candidates than its bits), and nothing
    /// else is.
    #[test]
    fn candidates_are_found_and_nothing_else() {
        let mix = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 7);
        for (n, narrow) in [
            (0u64, None),
            (1, None),
            (1000, None),
            (300_000, Some(12u32)),
        ] {
            let cut = |w: u64| narrow.map_or(w, |b| w & ((1 << b) - 1));
            let words: Vec<u64> = (0..n).map(|i| cut(mix(2 * i))).collect();
            let c = Candidates::new(words.iter().copied());
            assert!(
                words.iter().all(|w| c.index(*w).is_some()),
                "{n} candidates"
            );
            let wanted: std::collections::HashSet<u64> = words.iter().copied().collect();
            assert_eq!(c.len(), wanted.len());
            let mut ordinals: Vec<u32> = wanted.iter().map(|w| c.index(*w).unwrap()).collect();
            ordinals.sort_unstable();
            assert!(ordinals.iter().enumerate().all(|(i, o)| *o as usize == i));
            let strays = (0..20_000u64)
                .map(|i| cut(mix(2 * i + 1)))
                .filter(|w| c.index(*w).is_some() && !wanted.contains(w))
                .count();
            assert_eq!(strays, 0, "{n} candidates");
        }
        let edge = Candidates::new([0u64, 5, u64::MAX].into_iter());
        assert!([0, 5, u64::MAX].iter().all(|w| edge.index(*w).is_some()));
        assert!(edge.index(6).is_none() && edge.index(u64::MAX - 1).is_none());
    }

    /// Filing against a map of every key: counts and keys agree, whether
    /// keys share an ordinal (a collision) or not, and whatever the order
    /// of the runs counted together.
    #[test]
    fn filed_keys_match_a_map() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || super::super::testing::next(&mut state);
        let ordinals = 50u32;
        let mut runs: Vec<Filed> = (0..3).map(|_| Filed::new(ordinals as usize)).collect();
        let mut want: HashMap<(u32, Vec<u8>), u64> = HashMap::new();
        for _ in 0..20_000 {
            let ordinal = (next() % u64::from(ordinals)) as u32;
            // Up to 3 keys an ordinal, the empty key and nulls among them.
            let v = next() % 4;
            let (tag, bytes): (u8, Vec<u8>) = match v {
                0 => (0, vec![]),
                1 => (1, vec![]),
                _ => (1, format!("k{ordinal}-{v}").into_bytes()),
            };
            let rows = 1 + next() % 3;
            runs[(next() % 3) as usize].file(ordinal, tag, &bytes, rows);
            let mut key = vec![tag];
            key.extend_from_slice(&bytes);
            *want.entry((ordinal, key)).or_default() += rows;
        }
        for r in &runs {
            let mut each = HashMap::new();
            r.each(|i, k, n| assert!(each.insert((i, k.to_vec()), n).is_none()));
            assert!(each.keys().all(|k| want.contains_key(k)));
        }
        for threads in [1, 2, 3] {
            let got = together(&runs, threads, Vec::new, |seen, i, k, n| {
                seen.push(((i, k.to_vec()), n));
            });
            let mut all = HashMap::new();
            for (k, n) in got.into_iter().flatten() {
                assert!(all.insert(k, n).is_none());
            }
            assert_eq!(all, want);
        }
        let none = together(&[], 2, || 0, |n, _, _, _| *n += 1);
        assert_eq!(none.iter().sum::<i32>(), 0);
    }
}
