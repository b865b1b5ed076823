//! A data page's values as [`super::pages`] reads them: `PLAIN` values
//! ([`plain`]), the RLE/bit-packed hybrid of levels and dictionary indices
//! ([`hybrid`]), and dictionary rows tallied by index ([`Tally`]) for a
//! visitor that takes each value once with how many rows hold it.

use datafusion::common::hash_utils::RandomState;

use super::encode::{self, Kind};

pub(super) fn u32_at(buf: &[u8], at: usize) -> Result<u32, String> {
    buf.get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map(u32::from_le_bytes)
        .ok_or_else(|| "a page ends inside a length".to_string())
}

/// `n` values of `PLAIN` data of `kind`, each with its fingerprint (0
/// unless `hashed`). A text page of ASCII (its lengths included, below
/// 128) is UTF-8 as a whole; otherwise each value is checked.
pub(super) fn plain<'a>(
    kind: Kind,
    hashed: bool,
    data: &'a [u8],
    n: usize,
    mut each: impl FnMut(u64, &'a [u8]),
) -> Result<(), String> {
    let state = RandomState::with_seed(encode::SEED);
    let width = match kind {
        Kind::Text | Kind::Str => 0,
        Kind::I32 => 4,
        Kind::I64 => 8,
    };
    if width > 0 {
        let values = data
            .get(..n * width)
            .ok_or("the values overrun their page")?;
        for x in values.chunks_exact(width) {
            each(
                if hashed {
                    encode::first(kind, &state, x)
                } else {
                    0
                },
                x,
            );
        }
        return Ok(());
    }
    let ascii = data.is_ascii();
    let mut at = 0;
    for _ in 0..n {
        let len = u32_at(data, at)? as usize;
        let value = data
            .get(at + 4..at + 4 + len)
            .ok_or("a value overruns its page")?;
        if !ascii && std::str::from_utf8(value).is_err() {
            return Err(format!(
                "a text value is not UTF-8: {}",
                String::from_utf8_lossy(value)
            ));
        }
        each(
            if hashed {
                encode::first(kind, &state, value)
            } else {
                0
            },
            value,
        );
        at += 4 + len;
    }
    Ok(())
}

/// `n` values of the RLE/bit-packed hybrid encoding, `width` bits each.
pub(super) fn hybrid(buf: &[u8], width: u32, n: usize, out: &mut Vec<u32>) -> Result<(), String> {
    let end = out.len() + n;
    let bytes = width.div_ceil(8) as usize;
    let mask = if width == 32 {
        u32::MAX
    } else {
        (1u32 << width) - 1
    };
    let mut at = 0;
    while out.len() < end {
        let mut header = 0u64;
        let mut shift = 0;
        loop {
            let b = *buf.get(at).ok_or("levels or indices end early")?;
            at += 1;
            header |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
            if shift > 63 {
                return Err("a run header is too long".into());
            }
        }
        if header & 1 == 1 {
            // Bit-packed groups of 8 values, least significant bit first.
            let values = (header >> 1) as usize * 8;
            let len = (values * width as usize).div_ceil(8);
            let packed = buf.get(at..at + len).ok_or("a bit-packed run overruns")?;
            at += len;
            let (mut acc, mut have, mut next) = (0u64, 0u32, 0usize);
            for _ in 0..values.min(end - out.len()) {
                while have < width {
                    acc |= u64::from(packed[next]) << have;
                    next += 1;
                    have += 8;
                }
                out.push(acc as u32 & mask);
                acc >>= width;
                have -= width;
            }
        } else {
            let run = (header >> 1) as usize;
            let raw = buf.get(at..at + bytes).ok_or("an RLE run overruns")?;
            at += bytes;
            let value = raw.iter().rev().fold(0u32, |v, b| (v << 8) | u32::from(*b));
            if value > mask {
                return Err(format!("a run value {value} wider than {width} bits"));
            }
            let take = run.min(end - out.len());
            out.extend(std::iter::repeat_n(value, take));
        }
    }
    Ok(())
}

/// Rows tallied by dictionary index, to be told once a value.
///
/// The verification of `distinct_count` over a column of 150,000 e-mail
/// addresses repeated in 10M rows files every row's key under its
/// fingerprint: a probe and a compare that each miss the cache. Tallied,
/// a row costs an increment in an array the size of the dictionary, and a
/// value is filed once a chunk with its rows.
#[derive(Default)]
pub(super) struct Tally {
    counts: Vec<u32>,
    /// Indices below this were counted since the last drain.
    len: usize,
}

impl Tally {
    /// Counts the rows of `indices`, of a dictionary of `len` values.
    pub(super) fn add(&mut self, indices: &[u32], len: usize) -> Result<(), String> {
        if self.counts.len() < len {
            self.counts.resize(len, 0);
        }
        self.len = self.len.max(len);
        let counts = &mut self.counts[..len];
        for &k in indices {
            let c = counts
                .get_mut(k as usize)
                .ok_or_else(|| format!("dictionary index {k} past its {len} values"))?;
            *c += 1;
        }
        Ok(())
    }

    /// Each index counted since the last drain with its rows, in index
    /// order; the counts are then zero again.
    pub(super) fn drain(&mut self, mut each: impl FnMut(usize, u64)) {
        for (k, c) in self.counts[..self.len].iter_mut().enumerate() {
            if *c > 0 {
                each(k, u64::from(*c));
                *c = 0;
            }
        }
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_runs_and_packed_groups() {
        // An RLE run of 3 fives (width 3), then one group of 8 packed values.
        let mut buf = vec![3 << 1, 5];
        buf.push((1 << 1) | 1);
        let vals = [0u32, 1, 2, 3, 4, 5, 6, 7];
        let mut bits = 0u32;
        let mut packed = Vec::new();
        let mut have = 0;
        for v in vals {
            bits |= v << have;
            have += 3;
            while have >= 8 {
                packed.push(bits as u8);
                bits >>= 8;
                have -= 8;
            }
        }
        buf.extend(packed);
        let mut out = Vec::new();
        hybrid(&buf, 3, 10, &mut out).unwrap();
        assert_eq!(out, [5, 5, 5, 0, 1, 2, 3, 4, 5, 6]);
        assert!(hybrid(&buf[..4], 3, 11, &mut Vec::new()).is_err());
        assert!(hybrid(&[2, 9], 3, 1, &mut Vec::new()).is_err());
    }

    #[test]
    fn a_tally_gives_each_index_once_with_its_rows() {
        let mut t = Tally::default();
        t.add(&[2, 0, 2, 2], 3).unwrap();
        t.add(&[0, 4], 5).unwrap();
        assert!(t.add(&[1, 5], 5).is_err());
        let mut got = Vec::new();
        t.drain(|k, n| got.push((k, n)));
        // The error's page counted its rows before the bad index; a walk
        // that meets it fails as a whole.
        assert_eq!(got, [(0, 2), (1, 1), (2, 3), (4, 1)]);
        t.drain(|k, n| panic!("{k} {n} after a drain"));
        t.add(&[1], 2).unwrap();
        got.clear();
        t.drain(|k, n| got.push((k, n)));
        assert_eq!(got, [(1, 1)]);
    }
}
