//! What the staged keys are looked up through: a bitmap of the top bits of
//! their fingerprints, and buckets of fingerprints in sorted order.

/// Bits of the bucket number for `keys` keys: 8 to 16 keys a bucket.
pub(super) fn bucket_bits(keys: u64) -> u32 {
    match keys {
        0..=15 => 0,
        n => (63 - n.leading_zeros()).saturating_sub(3).min(30),
    }
}

/// The bucket of `hash`: its top `bits`.
pub(super) fn bucket(hash: u64, bits: u32) -> u64 {
    match bits {
        0 => 0,
        b => hash >> (64 - b),
    }
}

/// Where each of `buckets` buckets starts among values sorted by bucket,
/// from each value's bucket (`of`).
pub(super) fn starts(buckets: usize, of: impl Iterator<Item = usize>) -> Vec<u32> {
    let mut starts = vec![0u32; buckets + 1];
    for b in of {
        starts[b + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    starts
}

/// A bitmap of the top bits of `width`-bit values, about 64 bits a value:
/// a value whose bit is clear is not among them.
pub(super) struct TopBits {
    words: Vec<u64>,
    shift: u32,
}

impl TopBits {
    pub fn new(values: impl ExactSizeIterator<Item = u64>, width: u32) -> TopBits {
        let n = values.len() as u64;
        // About 64 bits a value: fewer let more through to a compare, more
        // cost more misses of the caches (measured at 1M keys, 8 to 256
        // bits a key, for index keys and for rows of Parquet files).
        let bits = (64 - n.leading_zeros() + 6).clamp(12, 28).min(width);
        let shift = width - bits;
        let mut words = vec![0u64; (1usize << bits).div_ceil(64)];
        for v in values {
            let at = v >> shift;
            words[(at >> 6) as usize] |= 1 << (at & 63);
        }
        TopBits { words, shift }
    }

    /// Whether `value` may be among the values.
    #[inline]
    pub fn holds(&self, value: u64) -> bool {
        let at = value >> self.shift;
        self.words[(at >> 6) as usize] >> (at & 63) & 1 != 0
    }
}
