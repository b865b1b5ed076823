//! The distinct keys of a stream of key columns, in canonical bytes, sorted
//! by fingerprint (then bytes), each with how many rows carry it: what an
//! index is written from, and what the staged side of a lookup in indexes
//! is.

use datafusion::execution::memory_pool::MemoryReservation;
use twox_hash::XxHash3_64;

use super::canon::{Columns, Kind};

/// One distinct key.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// Its fingerprint (cut to the index's bits, see [`fingerprint`]).
    pub hash: u64,
    start: u64,
    len: u32,
    /// How many rows carry it.
    pub rows: u64,
    /// The first row that holds it, counted through the files read.
    pub row: u64,
}

/// Distinct keys, sorted by fingerprint and bytes.
pub struct Distinct {
    pub kinds: Vec<Kind>,
    arena: Vec<u8>,
    pub entries: Vec<Entry>,
    _memory: MemoryReservation,
}

/// Keys being collected, in the order they came.
pub struct Collecting {
    arena: Vec<u8>,
    entries: Vec<Entry>,
    /// Bits of each fingerprint kept.
    bits: u32,
}

impl Collecting {
    /// Room for `rows` keys of about `key_bytes` each, fingerprints cut to
    /// `bits`.
    pub fn new(rows: u64, key_bytes: u64, bits: u32) -> Collecting {
        Collecting {
            arena: Vec::with_capacity((rows * key_bytes) as usize),
            entries: Vec::with_capacity(rows as usize),
            bits,
        }
    }

    /// The bytes it holds now.
    pub fn bytes(&self) -> usize {
        self.arena.capacity() + self.entries.capacity() * ENTRY
    }

    /// What `rows` keys of `key_bytes` (with `parts` parts) will cost.
    pub fn bytes_for(rows: u64, key_bytes: u64, parts: usize) -> usize {
        rows as usize * (key_bytes as usize + 9 * parts + ENTRY)
    }

    /// Adds the keys of the first `rows` rows of `columns`, the first of
    /// them row `first` of what was read.
    pub fn push(&mut self, columns: &Columns, rows: usize, first: u64) {
        for row in 0..rows {
            let start = self.arena.len();
            if columns.encode(row, &mut self.arena) {
                self.entries.push(Entry {
                    hash: fingerprint(&self.arena[start..], self.bits),
                    start: start as u64,
                    len: (self.arena.len() - start) as u32,
                    rows: 1,
                    row: first + row as u64,
                });
            }
        }
    }

    /// The distinct keys, sorted by fingerprint and bytes.
    pub fn finish(self, kinds: Vec<Kind>, memory: MemoryReservation) -> Distinct {
        let Collecting {
            arena, mut entries, ..
        } = self;
        let key = |e: &Entry| &arena[e.start as usize..][..e.len as usize];
        entries.sort_unstable_by(|a, b| {
            (a.hash.cmp(&b.hash))
                .then_with(|| key(a).cmp(key(b)))
                .then(a.row.cmp(&b.row))
        });
        let mut kept: Vec<Entry> = Vec::with_capacity(entries.len());
        for e in entries {
            match kept.last_mut() {
                Some(last) if last.hash == e.hash && key(last) == key(&e) => last.rows += e.rows,
                _ => kept.push(e),
            }
        }
        Distinct {
            kinds,
            arena,
            entries: kept,
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
        self.entries.iter().map(|e| e.rows).sum()
    }
}
