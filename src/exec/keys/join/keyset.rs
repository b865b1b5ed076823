//! The table of the fingerprinted joins: distinct exact keys by 64-bit
//! fingerprint, with the rows of each (see [`KeySet`]).

use super::job::Want;
use crate::exec::keys::key::Key;
use crate::exec::keys::slab::Slab;

/// Bytes of an [`Entry`] and a [`Slot`].
pub(super) const ENTRY: usize = std::mem::size_of::<Entry>();
pub(super) const SLOT: usize = std::mem::size_of::<Slot>();

/// One distinct key: its fingerprint and where its bytes lie.
#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) fp: u64,
    start: u64,
    len: u32,
}

/// A slot of the table: 32 bits of the mixed fingerprint, the entry
/// number + 1 (0: empty), the key's length, the rows counted so far, and
/// the key's head (see [`head_of`]). Two slots share a cache line, so a key
/// of up to 16 bytes is found and counted, or found absent, within one
/// line of the table; a longer key's bytes are compared in
/// [`KeySet::bytes`] when its head matches.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(32))]
pub(super) struct Slot {
    tag: u32,
    entry: u32,
    len: u32,
    rows: u32,
    head: [u64; 2],
}

/// The first and last 8 bytes of `key` (first and last 4 when shorter,
/// its bytes when shorter still): with the length, the whole key when it
/// has at most 16 bytes.
#[inline]
fn head_of(key: &[u8]) -> [u64; 2] {
    let n = key.len();
    let word = |at: usize| u64::from_le_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| {
        u64::from(u32::from_le_bytes(
            key[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    match n {
        8.. => [word(0), word(n - 8)],
        4..8 => [half(0), half(n - 4)],
        _ => [key.iter().rev().fold(0, |v, b| v << 8 | u64::from(*b)), 0],
    }
}

/// Distinct exact keys by fingerprint: an open-addressing table of slots
/// (keys whose fingerprints collide take slots side by side), the entries,
/// and their bytes end to end. The rows of each key are counted in its
/// slot (at most [`PROBE_ROWS`](super::PROBE_ROWS) in all, so 32 bits hold them), and copied
/// by entry into [`KeySet::rows`] once the set is whole.
#[derive(Default)]
pub(super) struct KeySet {
    /// The slots, in zeroed anonymous memory (huge pages where the kernel
    /// allows: a table of millions of keys is backed by a few hundred
    /// faults, not a fault a 4 KiB page); `None` before the first key.
    table: Option<Slab<u128>>,
    pub(super) entries: Vec<Entry>,
    /// Rows of each entry, from [`KeySet::finish`].
    pub(super) rows: Vec<u64>,
    bytes: Vec<u8>,
}

/// The first slot of a fingerprint in a table of `mask + 1` slots, and the
/// tag its slot carries.
#[inline]
fn slot_of(fp: u64, mask: usize) -> (usize, u32) {
    let h = fp.mix();
    ((h as usize) & mask, (h >> 32) as u32)
}

/// Words of a [`Slot`] in a slab.
const SLOT_WORDS: usize = SLOT / 16;

impl KeySet {
    fn slots(&self) -> &[Slot] {
        match &self.table {
            // SAFETY: the slab holds `SLOT_WORDS` words a slot, page-aligned
            // (so aligned for `Slot`), and every bit pattern of a `Slot`
            // (integers only) is valid; all zeros is an empty slot.
            Some(t) => unsafe {
                let words = t.words();
                std::slice::from_raw_parts(words.as_ptr().cast(), words.len() / SLOT_WORDS)
            },
            None => &[],
        }
    }

    fn slots_mut(&mut self) -> &mut [Slot] {
        match &mut self.table {
            // SAFETY: as in `slots`, and `&mut self` makes the access unique.
            Some(t) => unsafe {
                let words = t.words_mut();
                std::slice::from_raw_parts_mut(words.as_mut_ptr().cast(), words.len() / SLOT_WORDS)
            },
            None => &mut [],
        }
    }

    pub(super) fn key(&self, e: u32) -> &[u8] {
        let Entry { start, len, .. } = self.entries[e as usize];
        &self.bytes[start as usize..start as usize + len as usize]
    }

    pub(super) fn fingerprint(&self, e: u32) -> u64 {
        self.entries[e as usize].fp
    }

    /// Empties the set for `keys` keys of `bytes` bytes in all. A table
    /// of about the size they need is kept and zeroed in place, so that a
    /// set filled partition after partition maps its table once.
    pub(super) fn reset(&mut self, keys: usize, bytes: usize) {
        self.entries.clear();
        self.rows.clear();
        self.bytes.clear();
        let want = (keys * 4).div_ceil(3).next_power_of_two().max(1024);
        match &mut self.table {
            Some(t) if (want..=want * 4).contains(&(t.words().len() / SLOT_WORDS)) => {
                t.words_mut().fill(0);
            }
            _ => self.table = Some(Slab::new(want * SLOT_WORDS)),
        }
        self.reserve(keys, bytes);
    }

    /// Where `key` (fingerprint `fp`, head `head`) is: `Ok(slot)`, or
    /// `Err(slot)`, the empty slot it would take.
    #[inline]
    fn locate(&self, fp: u64, key: &[u8], head: &[u64; 2]) -> Result<usize, usize> {
        let slots = self.slots();
        let mask = slots.len() - 1;
        let (mut i, tag) = slot_of(fp, mask);
        loop {
            let s = &slots[i];
            if s.entry == 0 {
                return Err(i);
            }
            if s.tag == tag && s.len as usize == key.len() && &s.head == head {
                let e = s.entry - 1;
                if key.len() <= 16 || self.key(e) == key {
                    return Ok(i);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// The entry of `key`, whose fingerprint is `fp`.
    #[inline]
    pub(super) fn find(&self, fp: u64, key: &[u8]) -> Option<u32> {
        self.table.as_ref()?;
        let at = self.locate(fp, key, &head_of(key)).ok()?;
        Some(self.slots()[at].entry - 1)
    }

    /// Loads the first slot of each of `fps`, so that the adds that follow
    /// find them in the cache: the loads do not depend on each other and
    /// overlap, where each add waits for its own.
    pub(super) fn touch(&self, fps: &[u64]) {
        let slots = self.slots();
        if slots.is_empty() {
            return;
        }
        let mask = slots.len() - 1;
        let mut sum = 0u32;
        for fp in fps {
            sum = sum.wrapping_add(slots[slot_of(*fp, mask).0].tag);
        }
        std::hint::black_box(sum);
    }

    /// Counts `rows` more rows of `key`.
    pub(super) fn add(&mut self, fp: u64, key: &[u8], rows: u32) {
        if (self.entries.len() + 1) * 4 > self.slots().len() * 3 {
            self.grow();
        }
        let head = head_of(key);
        match self.locate(fp, key, &head) {
            Ok(i) => self.slots_mut()[i].rows += rows,
            Err(i) => {
                self.entries.push(Entry {
                    fp,
                    start: self.bytes.len() as u64,
                    len: key.len() as u32,
                });
                self.bytes.extend_from_slice(key);
                let entry = self.entries.len() as u32;
                self.slots_mut()[i] = Slot {
                    tag: slot_of(fp, 0).1,
                    entry,
                    len: key.len() as u32,
                    rows,
                    head,
                };
            }
        }
    }

    /// Copies each entry's rows out of its slot, into [`KeySet::rows`].
    pub(super) fn finish(&mut self) {
        self.rows = vec![0; self.entries.len()];
        let mut rows = vec![0; self.entries.len()];
        for s in self.slots().iter().filter(|s| s.entry != 0) {
            rows[s.entry as usize - 1] = u64::from(s.rows);
        }
        self.rows = rows;
    }

    /// An empty set for `keys` keys of `bytes` bytes in all.
    pub(super) fn with_capacity(keys: usize, bytes: usize) -> KeySet {
        let mut set = KeySet::default();
        set.reserve(keys, bytes);
        set
    }

    /// Room for `keys` more keys of `bytes` more bytes in all, at most
    /// three quarters of the slots taken.
    pub(super) fn reserve(&mut self, keys: usize, bytes: usize) {
        self.entries.reserve(keys);
        self.bytes.reserve(bytes);
        let want = ((self.entries.len() + keys) * 4)
            .div_ceil(3)
            .next_power_of_two();
        if want > self.slots().len() {
            self.rehash(want);
        }
    }

    fn grow(&mut self) {
        self.rehash((self.slots().len() * 2).max(1024));
    }

    /// Every slot in a table of `n` slots (the tags' fingerprints are the
    /// entries').
    fn rehash(&mut self, n: usize) {
        let old = self.table.replace(Slab::new(n * SLOT_WORDS));
        let old = KeySet {
            table: old,
            ..KeySet::default()
        };
        let mask = n - 1;
        for s in old.slots().iter().filter(|s| s.entry != 0) {
            let (mut i, _) = slot_of(self.entries[s.entry as usize - 1].fp, mask);
            let slots = self.slots_mut();
            while slots[i].entry != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = *s;
        }
    }

    /// Adds every key of `other` with its rows.
    pub(super) fn merge(&mut self, other: &KeySet) {
        for s in other.slots().iter().filter(|s| s.entry != 0) {
            let e = s.entry - 1;
            self.add(other.entries[e as usize].fp, other.key(e), s.rows);
        }
    }

    /// The entries `want` reports, of those whose bit in `found` is set
    /// (found on the other side), and what they count: the rows of the
    /// keys not found ([`Want::Missing`]), or the keys found
    /// ([`Want::Present`]).
    pub(super) fn reported(&self, found: &[u64], want: Want) -> (Vec<u32>, u64) {
        let present = want == Want::Present;
        let hits: Vec<u32> = (0..self.entries.len() as u32)
            .filter(|e| (found[*e as usize >> 6] & (1 << (e & 63)) != 0) == present)
            .collect();
        let value = match want {
            Want::Missing => hits.iter().map(|e| self.rows[*e as usize]).sum(),
            Want::Present => hits.len() as u64,
        };
        (hits, value)
    }

    /// The `k` entries of `hits` with the most rows, then the smallest key
    /// bytes (which order as the keys do: text bytes, and Arrow's row
    /// format, ascending), in that order.
    pub(super) fn top(&self, mut hits: Vec<u32>, k: usize) -> Vec<u32> {
        let order = |a: &u32, b: &u32| {
            let (x, y) = (self.rows[*a as usize], self.rows[*b as usize]);
            y.cmp(&x).then_with(|| self.key(*a).cmp(self.key(*b)))
        };
        if hits.len() > k && k > 0 {
            hits.select_nth_unstable_by(k - 1, order);
            hits.truncate(k);
        }
        hits.truncate(k);
        hits.sort_unstable_by(order);
        hits
    }
}

/// Rows whose first slots are loaded together, ahead of their adds.
pub(super) const TOUCHED: usize = 256;

/// The most keys a building task's set has room for before its first key.
const INITIAL_KEYS: usize = 1 << 16;

/// The keys a scan task's set has room for before its first: its share
/// of the `rows` over `tasks`, so that it never grows (`across
/// published`: staged keys are mostly distinct). A join that expects few
/// keys (a lookup, with `most`) starts with room for at most a size that
/// stays in the cores' caches, and grows (its slots placed again as they
/// are) only as distinct keys arrive: a column of few distinct keys in
/// many rows (a fact table's foreign key) never touches a table sized for
/// the rows.
pub(super) fn room(rows: u64, tasks: usize, most: Option<usize>) -> usize {
    let share = (rows as usize).div_ceil(tasks.max(1));
    match most {
        Some(_) => share.min(INITIAL_KEYS),
        None => share,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With its length, a slot's head is the whole key up to 16 bytes: a
    /// change of any one byte changes it. Longer keys share heads, and
    /// are told apart by their bytes.
    #[test]
    fn heads_hold_keys_of_up_to_16_bytes_whole() {
        for n in 0..=40usize {
            let key: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            for at in 0..n {
                let mut other = key.clone();
                other[at] ^= 0x80;
                assert_eq!(
                    head_of(&key) != head_of(&other),
                    n <= 16 || at < 8 || at >= n - 8
                );
            }
        }
        let mut set = KeySet::default();
        let long = |c: u8| [b"0123456789", &[c][..], b"abcdefghij"].concat();
        for c in [b'x', b'y', b'z'] {
            set.add(7, &long(c), 1);
        }
        set.add(7, &long(b'y'), 2);
        set.finish();
        assert_eq!(set.entries.len(), 3);
        let e = set.find(7, &long(b'y')).expect("found");
        assert_eq!((set.key(e), set.rows[e as usize]), (&long(b'y')[..], 3));
        assert!(set.find(7, &long(b'w')).is_none());
    }

    /// A set emptied for the next partition keeps a table of about the size
    /// it needs, finds none of the keys before, and counts the new ones
    /// from zero; a set for many more keys maps a larger table.
    #[test]
    fn a_reset_set_holds_only_the_keys_after_it() {
        let mut set = KeySet::default();
        set.reset(3000, 3000 * 8);
        let slots = set.slots().len();
        for i in 0..3000u64 {
            set.add(i, format!("a-{i}").as_bytes(), 2);
        }
        set.reset(2900, 2900 * 8);
        assert_eq!(set.slots().len(), slots, "the table is kept");
        assert!(set.slots().iter().all(|s| s.entry == 0));
        for i in 0..2900u64 {
            set.add(i, format!("b-{i}").as_bytes(), 1);
        }
        set.add(7, b"b-7", 1);
        set.finish();
        assert_eq!(set.entries.len(), 2900);
        assert!(set.find(5, b"a-5").is_none());
        let e = set.find(7, b"b-7").expect("found");
        assert_eq!((set.rows[e as usize], set.fingerprint(e)), (2, 7));
        set.reset(100_000, 0);
        assert!(set.slots().len() > slots * 4);
    }

    /// Keys whose fingerprints collide are kept apart and found exactly.
    #[test]
    fn colliding_fingerprints_keep_their_keys_apart() {
        let mut set = KeySet::default();
        let keys: Vec<String> = (0..5000).map(|i| format!("key-{i}")).collect();
        for (i, k) in keys.iter().enumerate() {
            // Eight fingerprints for 5,000 keys.
            set.add((i % 8) as u64, k.as_bytes(), 1 + (i % 3) as u32);
        }
        set.add(3, b"key-3", 10);
        set.finish();
        assert_eq!(set.entries.len(), 5000);
        for (i, k) in keys.iter().enumerate() {
            let e = set.find((i % 8) as u64, k.as_bytes()).expect("found");
            assert_eq!(set.key(e), k.as_bytes());
            assert!(set.find((i % 8 + 1) as u64 % 8, k.as_bytes()).is_none());
        }
        assert!(set.find(0, b"key-").is_none());
        assert!(set.find(0, b"").is_none());
        let all: Vec<u32> = (0..5000).collect();
        let top = set.top(all, 3);
        let shown: Vec<(&[u8], u64)> = top
            .iter()
            .map(|e| (set.key(*e), set.rows[*e as usize]))
            .collect();
        assert_eq!(
            shown,
            [
                (&b"key-3"[..], 11),
                (&b"key-1001"[..], 3),
                (&b"key-1004"[..], 3)
            ]
        );
    }
}
