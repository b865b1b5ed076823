//! Counting each radix partition exactly: an open-addressing table of words
//! sized for the partition (it stays in a core's L2), and a side map of the
//! words seen more than once. Partitions are independent, so every core
//! takes the next one; a word costs one probe, about 3 ns.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::key::Key;
use super::store::LocalStore;

/// What counting found over all partitions.
pub struct Counted<K> {
    /// Words seen more than once, with how often.
    pub repeated: Vec<(K, u64)>,
    /// Distinct words.
    pub distinct: u64,
}

/// Counts every partition of `stores` (the same partitioning) on `threads`
/// threads.
pub fn count<K: Key>(stores: &[LocalStore<K>], threads: usize) -> Result<Counted<K>, String> {
    let partitions = stores.first().map_or(0, LocalStore::partitions);
    let next = AtomicUsize::new(0);
    let found = Mutex::new(Counted {
        repeated: Vec::new(),
        distinct: 0,
    });
    let failed: Mutex<Option<String>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                let mut table = Table::default();
                let mut buf = Vec::new();
                loop {
                    let p = next.fetch_add(1, Ordering::Relaxed);
                    if p >= partitions {
                        break;
                    }
                    let words: usize = stores.iter().map(|s| s.words_of(p)).sum();
                    table.reset(words);
                    for s in stores {
                        for chunk in s.in_memory(p) {
                            chunk.iter().for_each(|w| table.insert(*w));
                        }
                        if let Err(e) = s.spilled(p, &mut buf, |w| table.insert(w)) {
                            *failed.lock().expect("lock") = Some(e);
                            return;
                        }
                    }
                    let mut f = found.lock().expect("lock");
                    f.distinct += table.distinct;
                    f.repeated.extend(table.repeated.drain());
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().expect("lock") {
        return Err(e);
    }
    Ok(found.into_inner().expect("lock"))
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
        if w == K::EMPTY {
            self.empties += 1;
            match self.empties {
                1 => self.distinct += 1,
                n => {
                    self.repeated.insert(w, n);
                }
            }
            return;
        }
        let mut i = (w.mix() as usize) & self.mask;
        loop {
            let s = self.slots[i];
            if s == K::EMPTY {
                self.slots[i] = w;
                self.distinct += 1;
                return;
            }
            if s == w {
                *self.repeated.entry(w).or_insert(1) += 1;
                return;
            }
            i = (i + 1) & self.mask;
        }
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
    }
}
