//! The distinct keys of a stream of key columns, in canonical bytes, sorted
//! by fingerprint (then bytes), each with how many rows carry it: what an
//! index is written from, and what the staged side of a lookup in indexes
//! is.

use std::sync::Arc;

use datafusion::execution::memory_pool::MemoryReservation;
use twox_hash::XxHash3_64;

use super::canon::{Columns, Kind};
use super::topbits::{bucket, bucket_bits, starts, TopBits};
use super::zones::Within;

/// One distinct key.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Its fingerprint (cut to the index's bits, see [`fingerprint`]).
    pub hash: u64,
    start: u64,
    len: u32,
    /// How many rows carry it.
    pub rows: u32,
    /// The first row that holds it, counted through the files read (the
    /// callers take at most `u32::MAX` rows).
    pub row: u32,
}

/// The keys collected, in the order they came.
#[derive(Clone)]
struct InOrder<'a> {
    arena: &'a [u8],
    lens: std::slice::Iter<'a, u32>,
    at: usize,
}

impl<'a> Iterator for InOrder<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let len = *self.lens.next()? as usize;
        let key = self.arena.get(self.at..self.at + len)?;
        self.at += len;
        Some(key)
    }
}

/// Distinct keys, sorted by fingerprint and bytes.
pub struct Distinct {
    pub kinds: Vec<Kind>,
    /// Bits of each fingerprint kept.
    bits: u32,
    arena: Vec<u8>,
    pub entries: Vec<Entry>,
    /// Rows whose key was left out as in no partition's zones (see
    /// [`Collecting::within`]).
    pub outside: u64,
    _memory: MemoryReservation,
}

/// Keys being collected, in the order they came: their bytes, and beside
/// them only what [`Collecting::finish`] cannot work out (16 bytes a key,
/// not a whole `Entry`: the entries are made once, where they belong).
pub struct Collecting {
    arena: Vec<u8>,
    hashes: Vec<u64>,
    lens: Vec<u32>,
    rows: Vec<u32>,
    /// Bits of each fingerprint kept.
    bits: u32,
    /// Only the keys that can lie in a partition are kept, when known.
    within: Option<Arc<Within>>,
    outside: u64,
    /// Which rows of a batch the zones hold (a buffer kept between batches).
    keep: Vec<bool>,
}

impl Collecting {
    /// Room for `rows` keys of about `key_bytes` each, fingerprints cut to
    /// `bits`.
    pub fn new(rows: u64, key_bytes: u64, bits: u32) -> Collecting {
        let n = rows as usize;
        Collecting {
            arena: Vec::with_capacity((rows * key_bytes) as usize),
            hashes: Vec::with_capacity(n),
            lens: Vec::with_capacity(n),
            rows: Vec::with_capacity(n),
            bits,
            within: None,
            outside: 0,
            keep: Vec::new(),
        }
    }

    /// Keeps only the keys `within` holds (those that can lie in some
    /// published partition); the others are counted, not kept.
    pub fn within(mut self, within: Option<Arc<Within>>) -> Collecting {
        self.within = within;
        self
    }

    /// The bytes it holds now.
    pub fn bytes(&self) -> usize {
        self.arena.capacity()
            + self.hashes.capacity() * 8
            + (self.lens.capacity() + self.rows.capacity()) * 4
    }

    /// What `rows` keys of `key_bytes` (with `parts` parts) will cost, at
    /// the most (while they are sorted).
    pub fn bytes_for(rows: u64, key_bytes: u64, parts: usize) -> usize {
        rows as usize * (key_bytes as usize + 9 * parts + 16 + ENTRY)
    }

    /// Adds the keys of the first `rows` rows of `columns`, the first of
    /// them row `first` of what was read.
    pub fn push(&mut self, columns: &Columns, rows: usize, first: u64) {
        // Which rows the zones hold, a column at a time.
        let mut keep = std::mem::take(&mut self.keep);
        keep.clear();
        if let Some(w) = &self.within {
            keep.resize(rows, true);
            w.sift(columns, &mut keep);
        }
        for row in 0..rows {
            let start = self.arena.len();
            if keep.get(row) == Some(&false) {
                self.outside += 1;
                continue;
            }
            if columns.encode(row, &mut self.arena) {
                self.hashes
                    .push(fingerprint(&self.arena[start..], self.bits));
                self.lens.push((self.arena.len() - start) as u32);
                self.rows.push((first + row as u64) as u32);
            }
        }
        self.keep = keep;
    }

    /// The distinct keys, sorted by fingerprint and bytes.
    /// The key zones of the keys collected (see `zones`), read in the
    /// order they came, as they lie in memory.
    pub fn zones(&self, kinds: &[Kind]) -> Vec<Option<super::Zones>> {
        let keys = InOrder {
            arena: &self.arena,
            lens: self.lens.iter(),
            at: 0,
        };
        super::zones::of(kinds, keys)
    }

    pub fn finish(self, kinds: Vec<Kind>, memory: MemoryReservation) -> Distinct {
        let Collecting {
            arena,
            hashes,
            lens,
            rows,
            bits,
            outside,
            ..
        } = self;
        let key = |e: &Entry| &arena[e.start as usize..][..e.len as usize];
        // Fingerprints are uniform: the entries are made straight into
        // buckets by their top bits (8 to 16 a bucket, in one pass), and
        // each bucket sorted where it lies, in the cache; no comparison
        // sort of the whole and no gather in random order.
        let top = bucket_bits(hashes.len() as u64);
        let starts = starts(1 << top, hashes.iter().map(|h| bucket(*h, top) as usize));
        let empty = Entry {
            hash: 0,
            start: 0,
            len: 0,
            rows: 0,
            row: 0,
        };
        let mut kept = vec![empty; hashes.len()];
        let mut at = starts.clone();
        let mut start = 0u64;
        for ((hash, len), row) in hashes.iter().zip(&lens).zip(&rows) {
            let b = bucket(*hash, top) as usize;
            kept[at[b] as usize] = Entry {
                hash: *hash,
                start,
                len: *len,
                rows: 1,
                row: *row,
            };
            at[b] += 1;
            start += *len as u64;
        }
        drop((hashes, lens, rows));
        for w in starts.windows(2) {
            // By fingerprint, then bytes (a collision), then row (the first
            // row of a key is the one kept).
            kept[w[0] as usize..w[1] as usize].sort_unstable_by(|a, b| {
                (a.hash.cmp(&b.hash))
                    .then_with(|| key(a).cmp(key(b)))
                    .then(a.row.cmp(&b.row))
            });
        }
        kept.dedup_by(|later, first| {
            let same = later.hash == first.hash && key(later) == key(first);
            if same {
                first.rows += later.rows;
            }
            same
        });
        Distinct {
            kinds,
            bits,
            arena,
            entries: kept,
            outside,
            _memory: memory,
        }
    }
}

/// Bytes an entry costs besides its key's bytes.
const ENTRY: usize = std::mem::size_of::<Entry>();

/// A key's fingerprint: XXH3-64 of its canonical bytes, with only its top
/// `bits` kept (64 but under the test-only collision switch). It is
/// written into indexes, so it never changes with a build or a machine.
pub fn fingerprint(key: &[u8], bits: u32) -> u64 {
    cut(XxHash3_64::oneshot(key), bits)
}

/// A fingerprint with only its top `bits` kept.
pub(super) fn cut(hash: u64, bits: u32) -> u64 {
    match bits {
        64.. => hash,
        0 => 0,
        b => hash >> (64 - b) << (64 - b),
    }
}

impl Distinct {
    /// The bytes of `e`.
    pub fn key(&self, e: &Entry) -> &[u8] {
        &self.arena[e.start as usize..][..e.len as usize]
    }

    /// How many rows carry a key.
    pub fn rows(&self) -> u64 {
        self.entries.iter().map(|e| e.rows as u64).sum()
    }
}

/// Distinct keys to look keys up in: a bitmap of the top bits of their
/// fingerprints, in front of a search of the key's bucket, then a compare
/// of bytes.
pub struct Finder {
    keys: Arc<Distinct>,
    /// Bits of each fingerprint compared (fewer than the keys' only under
    /// the test-only collision switch).
    hash_bits: u32,
    top_bits: TopBits,
    /// The keys' fingerprints, cut to `hash_bits`, in the keys' order: a
    /// bucket's are compared in one or two cache lines, not in its entries.
    hashes: Vec<u64>,
    /// Where the keys of each bucket of fingerprints start: a key is looked
    /// for among its bucket's (8 to 16), not by a search of them all.
    starts: Vec<u32>,
    bucket_bits: u32,
}

impl Finder {
    /// A finder of `keys` comparing `hash_bits` of each fingerprint.
    pub fn new(keys: Arc<Distinct>, hash_bits: u32) -> Finder {
        let hash_bits = hash_bits.min(keys.bits);
        let hashes: Vec<u64> = (keys.entries.iter())
            .map(|e| cut(e.hash, hash_bits))
            .collect();
        let bucket_bits = bucket_bits(keys.entries.len() as u64);
        Finder {
            top_bits: TopBits::new(hashes.iter().copied(), 64),
            starts: starts(
                1 << bucket_bits,
                hashes.iter().map(|h| bucket(*h, bucket_bits) as usize),
            ),
            hashes,
            bucket_bits,
            hash_bits,
            keys,
        }
    }

    /// How many bits of each fingerprint it compares.
    pub fn hash_bits(&self) -> u32 {
        self.hash_bits
    }

    /// The kinds of the keys' parts.
    pub fn kinds(&self) -> &[Kind] {
        &self.keys.kinds
    }

    /// The fingerprint of `key` (canonical bytes) that [`Finder::find`]
    /// takes.
    pub fn fingerprint(&self, key: &[u8]) -> u64 {
        fingerprint(key, self.hash_bits)
    }

    /// Keeps in `at` only the places `i` whose fingerprint `hashes[i]` may
    /// be a staged key's. The tests are independent loads, so many miss
    /// the caches at once, where a test a key as it is found would wait
    /// for each.
    pub fn sift(&self, hashes: &[u64], at: &mut Vec<u32>) {
        at.retain(|i| self.top_bits.holds(hashes[*i as usize]));
    }

    /// Whether a key whose fingerprint's top 32 bits are `top` may be
    /// among the keys.
    #[inline]
    pub fn may_hold_top(&self, top: u32) -> bool {
        self.top_bits.holds((top as u64) << 32)
    }

    /// The entries whose fingerprints' top 32 bits are `top`.
    pub fn with_top(&self, top: u32) -> impl Iterator<Item = usize> + '_ {
        let (lo, hi) = self.bucket_of_top(top);
        (lo..hi).filter(move |i| (self.hashes[*i] >> 32) as u32 == top)
    }

    /// Brings into the caches the fingerprints that [`Finder::with_top`]
    /// of each of `tops` compares: the loads do not wait on each other, so
    /// their misses overlap, where the compares would take them one by one.
    pub fn warm(&self, tops: impl Iterator<Item = u32>) {
        let sum = tops.fold(0u64, |sum, top| {
            let (lo, hi) = self.bucket_of_top(top);
            let first = self.hashes.get(lo).copied().unwrap_or(0);
            sum.wrapping_add(first).wrapping_add(hi as u64)
        });
        std::hint::black_box(sum);
    }

    /// Where the bucket of fingerprints with top 32 bits `top` is (a
    /// bucket is at most 30 top bits).
    fn bucket_of_top(&self, top: u32) -> (usize, usize) {
        self.bucket_of((top as u64) << 32)
    }

    /// Where the bucket of fingerprint `hash` is.
    fn bucket_of(&self, hash: u64) -> (usize, usize) {
        let b = bucket(hash, self.bucket_bits) as usize;
        (self.starts[b] as usize, self.starts[b + 1] as usize)
    }

    /// The fingerprint of entry `i`, cut to the bits compared.
    pub fn hash(&self, i: usize) -> u64 {
        self.hashes[i]
    }

    /// The canonical bytes of entry `i`'s key.
    pub fn key(&self, i: usize) -> &[u8] {
        self.keys.key(&self.keys.entries[i])
    }

    /// The entry whose key is `key` (fingerprint `hash`), if there is one.
    pub fn find(&self, key: &[u8], hash: u64) -> Option<usize> {
        // Sorted by whole fingerprints, so by their cut ones too.
        let (lo, hi) = self.bucket_of(hash);
        (lo..hi)
            .filter(|i| self.hashes[*i] == hash)
            .find(|i| self.keys.key(&self.keys.entries[*i]) == key)
    }
}
