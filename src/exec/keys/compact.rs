//! A single text key column kept compactly for the verification pass: the
//! values' bytes back to back, with a byte of length and 16 bits of
//! fingerprint a row beside them.
//!
//! The scan has each value in cache when it keeps it, so keeping is a copy
//! of the key's bytes and 3 more a row: no page buffers or 16-byte views
//! held. The verification then tests the kept fingerprint bits against its
//! candidates', and fingerprints and compares only the few rows that pass,
//! instead of reading, decompressing and hashing every key again.
//!
//! The memory is anonymous and in small pages ([`Slab::small_pages`]):
//! written once, front to back, it is first touched as it is filled, where
//! huge pages save no TLB misses, and on a virtual machine their first
//! touch cost more (50M 22-byte keys, 1.2 GB kept: 4.1 s in huge pages
//! against 2.3 s in small ones, median of 3).

use datafusion::arrow::array::{Array, ArrayRef, AsArray as _};
use datafusion::arrow::datatypes::DataType;

use super::slab::Slab;

/// Rows of a chunk.
const CHUNK_ROWS: usize = 1 << 20;
/// Value bytes of a chunk; a longer value is not kept.
const CHUNK_BYTES: usize = 1 << 25;
/// The length byte of a value of this many bytes or more, whose length is
/// then in `Chunk::long`.
const LONG: u8 = u8::MAX;
/// Bytes a kept row costs besides its value.
pub(super) const ROW_BYTES: usize = 3;

/// How many rows [`TextRows::each_maybe`] hands over at a time.
const HANDED: usize = 4096;

/// One scan task's kept text keys.
#[derive(Default)]
pub(super) struct TextRows {
    chunks: Vec<Chunk>,
    /// The column's type as the scan decoded it.
    pub data_type: Option<DataType>,
}

struct Chunk {
    bytes: Slab<u64>,
    used: usize,
    /// A byte a row: the value's length, or [`LONG`].
    lens: Slab<u64>,
    /// Two bytes a row: the fingerprint's low 16 bits.
    bits: Slab<u64>,
    rows: usize,
    /// The lengths of the values of [`LONG`] bytes or more, in row order.
    long: Vec<u32>,
    /// The rows (ascending) whose key is null.
    nulls: Vec<u32>,
}

impl Chunk {
    fn new() -> Chunk {
        Chunk {
            bytes: Slab::small_pages(CHUNK_BYTES / 8),
            used: 0,
            lens: Slab::small_pages(CHUNK_ROWS / 8),
            bits: Slab::small_pages(CHUNK_ROWS / 4),
            rows: 0,
            long: Vec::new(),
            nulls: Vec::new(),
        }
    }
}

impl TextRows {
    /// Keeps the counted rows of `column` (nulls only when `nulls_equal`)
    /// with their `fingerprints`. Returns the bytes it took, or `None` when
    /// the column is not text or a value is longer than a chunk: then
    /// nothing can be kept.
    pub fn append(
        &mut self,
        column: &ArrayRef,
        fingerprints: &[u64],
        nulls_equal: bool,
    ) -> Option<usize> {
        if self
            .data_type
            .as_ref()
            .is_some_and(|t| t != column.data_type())
        {
            return None;
        }
        self.data_type = Some(column.data_type().clone());
        match column.data_type() {
            DataType::Utf8View => {
                let a = column.as_string_view();
                self.extend(a, fingerprints, nulls_equal, |i| a.value(i).as_bytes())
            }
            DataType::Utf8 => {
                let a = column.as_string::<i32>();
                self.extend(a, fingerprints, nulls_equal, |i| a.value(i).as_bytes())
            }
            DataType::LargeUtf8 => {
                let a = column.as_string::<i64>();
                self.extend(a, fingerprints, nulls_equal, |i| a.value(i).as_bytes())
            }
            _ => None,
        }
    }

    fn extend<'a>(
        &mut self,
        column: &dyn Array,
        fingerprints: &[u64],
        nulls_equal: bool,
        value: impl Fn(usize) -> &'a [u8],
    ) -> Option<usize> {
        let nulls = column.logical_nulls();
        let n = column.len().min(fingerprints.len());
        let (mut i, mut took) = (0, 0);
        while i < n {
            if self.chunks.last().is_none_or(|c| c.rows >= CHUNK_ROWS) {
                self.chunks.push(Chunk::new());
            }
            let c = self.chunks.last_mut()?;
            let (bytes, lens) = (c.bytes.bytes_mut(), c.lens.bytes_mut());
            let bits = c.bits.bytes_mut();
            let (mut used, mut r) = (c.used, c.rows);
            // As many rows as fit this chunk.
            while i < n && r < CHUNK_ROWS {
                let v = match &nulls {
                    Some(b) if b.is_null(i) => {
                        if !nulls_equal {
                            i += 1;
                            continue;
                        }
                        c.nulls.push(r as u32);
                        &[][..]
                    }
                    _ => value(i),
                };
                let end = used + v.len();
                if end > CHUNK_BYTES {
                    break;
                }
                bytes[used..end].copy_from_slice(v);
                took += v.len() + ROW_BYTES;
                used = end;
                match u8::try_from(v.len()) {
                    Ok(len) if len < LONG => lens[r] = len,
                    // At most CHUNK_BYTES.
                    _ => {
                        lens[r] = LONG;
                        c.long.push(v.len() as u32);
                    }
                }
                bits[2 * r..2 * r + 2].copy_from_slice(&(fingerprints[i] as u16).to_le_bytes());
                r += 1;
                i += 1;
            }
            let full = i < n && r < CHUNK_ROWS;
            (c.used, c.rows) = (used, r);
            if full {
                if r == 0 {
                    // A value longer than a whole chunk.
                    return None;
                }
                self.chunks.push(Chunk::new());
            }
        }
        Some(took)
    }

    /// Hands `f` the values (`None`: null) of every kept row whose low 16
    /// fingerprint bits `maybe` says yes to, a few thousand at a time.
    pub fn each_maybe<'a>(
        &'a self,
        maybe: impl Fn(u16) -> bool,
        mut f: impl FnMut(&[Option<&'a [u8]>]),
    ) {
        let mut handed = Vec::with_capacity(HANDED);
        for c in &self.chunks {
            let (bytes, lens, bits) = (c.bytes.bytes(), c.lens.bytes(), c.bits.bytes());
            let (mut start, mut long, mut nulls) = (0, c.long.iter(), c.nulls.iter().peekable());
            for r in 0..c.rows {
                let len = match lens[r] {
                    LONG => long.next().map_or(0, |l| *l as usize),
                    len => usize::from(len),
                };
                let null = nulls.next_if(|n| **n as usize == r).is_some();
                let at = start;
                start += len;
                if !maybe(u16::from_le_bytes([bits[2 * r], bits[2 * r + 1]])) {
                    continue;
                }
                handed.push((!null).then(|| &bytes[at..at + len]));
                if handed.len() == HANDED {
                    f(&handed);
                    handed.clear();
                }
            }
        }
        if !handed.is_empty() {
            f(&handed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{LargeStringArray, StringArray, StringViewArray};
    use std::sync::Arc;

    fn kept(t: &TextRows, maybe: impl Fn(u16) -> bool) -> Vec<Option<Vec<u8>>> {
        let mut out = Vec::new();
        t.each_maybe(maybe, |vs| {
            out.extend(vs.iter().map(|v| v.map(<[u8]>::to_vec)));
        });
        out
    }

    /// Every layout keeps the same rows: values (empty, multi-byte, and
    /// longer than a length byte included) in order, nulls only when they
    /// count.
    #[test]
    fn keeps_counted_rows_of_every_layout() {
        let long = "ü".repeat(200);
        let values = [
            Some("a"),
            None,
            Some(""),
            Some(long.as_str()),
            Some("ünïcödé ключ"),
            None,
            Some("x"),
        ];
        let fps: Vec<u64> = (1..=values.len() as u64).map(|i| i << 16 | i).collect();
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(values.to_vec())),
            Arc::new(LargeStringArray::from(values.to_vec())),
            Arc::new(StringViewArray::from(values.to_vec())),
        ];
        for a in &arrays {
            for nulls_equal in [false, true] {
                let mut t = TextRows::default();
                assert!(t.append(a, &fps, nulls_equal).is_some());
                let counted = || {
                    values
                        .iter()
                        .zip(&fps)
                        .filter(|(v, _)| nulls_equal || v.is_some())
                };
                let want: Vec<_> = counted()
                    .map(|(v, _)| v.map(|s| s.as_bytes().to_vec()))
                    .collect();
                assert_eq!(kept(&t, |_| true), want, "{} {nulls_equal}", a.data_type());
                let odd: Vec<_> = counted()
                    .filter(|(_, fp)| *fp % 2 == 1)
                    .map(|(v, _)| v.map(|s| s.as_bytes().to_vec()))
                    .collect();
                assert_eq!(
                    kept(&t, |b| b % 2 == 1),
                    odd,
                    "the kept bits are the low 16"
                );
            }
        }
        let mut t = TextRows::default();
        t.append(&arrays[0], &fps, true);
        assert_eq!(t.append(&arrays[2], &fps, true), None, "one type a column");
    }

    #[test]
    fn rows_past_a_chunk_go_to_the_next() {
        let n = CHUNK_ROWS + 3;
        let a: ArrayRef = Arc::new(StringArray::from_iter_values((0..n).map(|i| i.to_string())));
        let fps: Vec<u64> = (0..n as u64).map(|i| i % 50_000).collect();
        let mut t = TextRows::default();
        t.append(&a, &fps, false).unwrap();
        assert_eq!(t.chunks.len(), 2);
        let seen: Vec<_> = kept(&t, |b| b == 7)
            .into_iter()
            .map(|v| String::from_utf8(v.unwrap()).unwrap())
            .collect();
        let want: Vec<_> = (0..n)
            .filter(|i| i % 50_000 == 7)
            .map(|i| i.to_string())
            .collect();
        assert_eq!(seen, want);
    }
}
