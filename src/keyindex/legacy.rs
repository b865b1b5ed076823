//! Format 1 indexes (`"DQGKEYS1"`, written by dqgate until 2026-12-03),
//! still read: the staged keys as such an index sees them, and the lookup
//! through its bucket table.

use super::topbits::{starts, TopBits};

/// `hash` cut to what a format 1 index with `bits` of bucket holds of it:
/// the bucket's bits and the 32 after them.
fn prefix(hash: u64, bits: u32) -> u64 {
    hash >> (32 - bits)
}

/// The staged keys as a format 1 index with `bucket_bits` of bucket sees
/// them: the low 32 bits of their prefixes (see [`prefix`]), sorted, where each
/// bucket's start, and a bitmap of the top bits of the prefixes.
pub struct Probe {
    lows: Vec<u32>,
    starts: Vec<u32>,
    top_bits: TopBits,
}

impl Probe {
    /// The probe of staged fingerprints `hashes` (sorted, cut to the
    /// index's hash bits) for indexes of `bucket_bits`.
    pub fn new(hashes: impl ExactSizeIterator<Item = u64>, bucket_bits: u32) -> Probe {
        let prefixes: Vec<u64> = hashes.map(|h| prefix(h, bucket_bits)).collect();
        let buckets = prefixes.iter().map(|p| (p >> 32) as usize);
        Probe {
            starts: starts(1 << bucket_bits, buckets),
            top_bits: TopBits::new(prefixes.iter().copied(), bucket_bits + 32),
            lows: prefixes.iter().map(|p| *p as u32).collect(),
        }
    }

    /// Calls `f(j, i)` for each staged key `j` whose prefix equals the
    /// index's key `i`'s, in a format 1 index of bucket table `starts` and
    /// words `fps`: each of the index's keys tests one bit of the probe's
    /// bitmap; the keys are sorted by fingerprint, so the bitmap is read in
    /// order. Only a set bit (about one key in 64 that the staged keys do
    /// not hold) compares the key with the staged keys of its bucket.
    pub fn matches(&self, starts: &[u32], fps: &[u32], mut f: impl FnMut(usize, u64)) {
        for (b, w) in starts.windows(2).enumerate() {
            let high = (b as u64) << 32;
            for (i, fp) in fps[w[0] as usize..w[1] as usize].iter().enumerate() {
                if self.top_bits.holds(high | *fp as u64) {
                    let (lo, hi) = (self.starts[b] as usize, self.starts[b + 1] as usize);
                    for (s, x) in self.lows[lo..hi].iter().enumerate() {
                        if *x == *fp {
                            f(lo + s, w[0] as u64 + i as u64);
                        }
                    }
                }
            }
        }
    }
}
