//! The entries of a run's bins of exact values ([`super::binned`]): how
//! they are written and read back.

use std::hash::BuildHasher as _;

use datafusion::common::hash_utils::RandomState;

use super::key::Key as _;
use super::varint::{put_varint, take_varint};

/// The seed of the hash of a stored value that finds it in a bin's table
/// ([`Form::tag`]; any will do: it is compared byte for byte).
pub(super) const TAGS: u64 = 0x6269_6e73_7461_6773;

/// How a run's entries are written: the bytes of the cut fingerprint
/// they keep (those its mask may set; none when the fingerprint is hashed
/// again from the value), then the value's length shifted up a bit, whose
/// low bit says whether its rows follow (an entry of one row says none),
/// as varints, then its bytes.
#[derive(Clone, Copy)]
pub(super) struct Form {
    fingerprint: usize,
    /// The bits of 8 bytes read that are the fingerprint's.
    kept: u64,
}

impl Form {
    /// Entries keeping the bytes of cut fingerprints of `mask`, or none
    /// of them when `None` (their fingerprints read as 0).
    pub(super) fn of(mask: Option<u64>) -> Form {
        let Some(mask) = mask else {
            return Form {
                fingerprint: 0,
                kept: 0,
            };
        };
        let bits = 64 - mask.leading_zeros() as usize;
        let fingerprint = bits.div_ceil(8).max(1);
        Form {
            fingerprint,
            kept: u64::MAX >> (64 - 8 * fingerprint),
        }
    }

    /// The low half of the mix of the fingerprint `w` an entry keeps, or
    /// (`state` seeded with [`TAGS`]) of a hash of its `stored` bytes when
    /// it keeps none: what finds it in a bin's table.
    #[inline]
    pub(super) fn tag(self, w: u64, stored: &[u8], state: &RandomState) -> u32 {
        match self.fingerprint > 0 {
            true => w.mix() as u32,
            false => state.hash_one(stored) as u32,
        }
    }

    /// Appends an entry of `rows` rows of `value`, of cut fingerprint `w`.
    #[inline]
    pub(super) fn put(self, bin: &mut Vec<u8>, w: u64, value: &[u8], rows: u64) {
        // 8 bytes written and those past the fingerprint taken back: a
        // copy of a fixed length.
        if self.fingerprint > 0 {
            bin.extend_from_slice(&w.to_le_bytes());
            bin.truncate(bin.len() - (8 - self.fingerprint));
        }
        put_varint(bin, (value.len() as u64) << 1 | u64::from(rows != 1));
        if rows != 1 {
            put_varint(bin, rows);
        }
        bin.extend_from_slice(value);
    }

    /// Every entry of `part` (of a bin): where it starts, its cut
    /// fingerprint (0 when not kept), bytes and rows.
    pub(super) fn entries(self, part: &[u8]) -> impl Iterator<Item = (usize, u64, &[u8], u64)> {
        let mut at = 0;
        std::iter::from_fn(move || {
            (at < part.len()).then(|| {
                let (w, value, rows, next) = self.entry(part, at);
                let start = std::mem::replace(&mut at, next);
                (start, w, value, rows)
            })
        })
    }

    /// The entry at `at` of `bin`: its cut fingerprint (0 when not kept),
    /// bytes and rows, and where the next starts. (Bins are written here, and read back
    /// whole or not at all: an entry is never cut short.)
    #[inline]
    pub(super) fn entry(self, bin: &[u8], at: usize) -> (u64, &[u8], u64, usize) {
        let rest = &bin[at..];
        // 8 bytes read, those past the fingerprint dropped (all but at a
        // part's end, a read of a fixed length).
        let w = match rest.first_chunk::<8>() {
            _ if self.fingerprint == 0 => 0,
            Some(eight) => u64::from_le_bytes(*eight) & self.kept,
            None => {
                let mut w = [0u8; 8];
                w[..self.fingerprint].copy_from_slice(&rest[..self.fingerprint]);
                u64::from_le_bytes(w)
            }
        };
        let (head, rest) = take_varint(&rest[self.fingerprint..]);
        let (rows, rest) = match head & 1 {
            1 => take_varint(rest),
            _ => (1, rest),
        };
        let value = &rest[..((head >> 1) as usize).min(rest.len())];
        let next = bin.len() - rest.len() + value.len();
        (w, value, rows, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries of every fingerprint width, of one row and of many, empty
    /// and long values, read back as written, the last of a part (shorter
    /// than 8 bytes) included.
    #[test]
    fn entries_read_back_as_written() {
        for bits in [
            None,
            Some(0),
            Some(4),
            Some(8),
            Some(9),
            Some(36),
            Some(40),
            Some(64),
        ] {
            let mask = bits.map_or(0, |b| u64::MAX.checked_shr(64 - b).unwrap_or(0));
            let form = Form::of(bits.map(|_| mask));
            let written: Vec<(u64, Vec<u8>, u64)> = (0..200u64)
                .map(|i| {
                    let w = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & mask;
                    let value = vec![b'a' + (i % 26) as u8; (i * 7 % 150) as usize];
                    (
                        w,
                        value,
                        [1, 2, 127, 128, u64::from(u32::MAX)][i as usize % 5],
                    )
                })
                .collect();
            let mut part = Vec::new();
            for (w, value, rows) in &written {
                form.put(&mut part, *w, value, *rows);
            }
            let read: Vec<(u64, Vec<u8>, u64)> = (form.entries(&part))
                .map(|(_, w, value, rows)| (w, value.to_vec(), rows))
                .collect();
            assert_eq!(read, written, "{bits:?} bits");
            // An entry of an empty value in one row alone: its fingerprint
            // and a byte (fewer than 8 bytes for most widths).
            let mut short = Vec::new();
            form.put(&mut short, mask, b"", 1);
            assert_eq!(short.len(), form.fingerprint + 1);
            assert_eq!(form.entry(&short, 0), (mask, &b""[..], 1, short.len()));
        }
    }
}
