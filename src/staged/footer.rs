//! Decoding a Parquet footer, with the one writer quirk dqgate corrects.
//!
//! fastparquet writes a file without row groups (an empty data frame) with
//! `row_groups` as an empty Thrift list whose header byte is `0x00`: size 0,
//! element type 0, which is no Thrift type at all. The Parquet format says
//! the element type is `struct`; arrow-rs checks it, even for an empty list
//! (arrow-rs #8826, #9924), and refuses the footer with `Expected list
//! element type of Struct but got …`, while pyarrow, DuckDB and Polars read
//! the file as zero rows.
//!
//! An empty list carries no elements, so its element type tells nothing
//! about the data: when the footer does not decode as written, the header
//! byte of each empty top-level list of `FileMetaData` (every one of them is
//! a list of structs) is set to "empty list of structs" and the copy is
//! decoded again. Only that byte changes, only in empty lists, and only in a
//! decoded copy: the fingerprint still covers the footer as written. A
//! footer that still fails is refused with the original error.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};

use super::error::{corrupt, InputError};

/// `FileMetaData` fields that are lists of structs: `schema`, `row_groups`,
/// `key_value_metadata`, `column_orders`.
const STRUCT_LISTS: [i16; 4] = [2, 4, 5, 7];

/// Thrift compact-protocol type codes used here.
const LIST: u8 = 9;
const STRUCT: u8 = 12;

/// Decodes the Thrift `FileMetaData` (the footer without its 8-byte
/// trailer), correcting fastparquet's empty-list header if that is what
/// stops it.
pub fn decode(metadata: &[u8]) -> Result<ParquetMetaData, ParquetError> {
    let first = match ParquetMetaDataReader::decode_metadata(metadata) {
        Ok(md) => return Ok(md),
        Err(e) => e,
    };
    let Some(fixed) = corrected(metadata) else {
        return Err(first);
    };
    ParquetMetaDataReader::decode_metadata(&fixed).map_err(|_| first)
}

/// A copy of `metadata` with each empty top-level list of structs declared
/// as such, or `None` when no header needs it (or the bytes do not walk).
fn corrected(metadata: &[u8]) -> Option<Vec<u8>> {
    let mut out = metadata.to_vec();
    let mut changed = false;
    let mut r = Reader {
        bytes: metadata,
        at: 0,
    };
    let mut id: i16 = 0;
    loop {
        let head = r.byte()?;
        let ty = head & 0x0f;
        if ty == 0 {
            break; // end of FileMetaData
        }
        id = match head >> 4 {
            0 => r.zigzag()? as i16,
            delta => id.checked_add(i16::from(delta))?,
        };
        if ty == LIST && STRUCT_LISTS.contains(&id) {
            let at = r.at;
            let (size, elem) = r.list_header()?;
            if size == 0 && elem != STRUCT {
                out[at] = (out[at] & 0xf0) | STRUCT;
                changed = true;
            }
            for _ in 0..size {
                r.skip(elem, 0)?;
            }
        } else {
            r.skip(ty, 0)?;
        }
    }
    changed.then_some(out)
}

/// A cursor over compact-protocol bytes that can skip any value.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn advance(&mut self, n: usize) -> Option<()> {
        let end = self.at.checked_add(n)?;
        (end <= self.bytes.len()).then(|| self.at = end)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn zigzag(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A list or set header: element count and element type.
    fn list_header(&mut self) -> Option<(u64, u8)> {
        let head = self.byte()?;
        let size = match head >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        Some((size, head & 0x0f))
    }

    /// Skips one value of compact type `ty` (as it appears in a list, where
    /// booleans take a byte). Nesting is bounded, as the footer's is.
    fn skip(&mut self, ty: u8, depth: u8) -> Option<()> {
        if depth > 32 {
            return None;
        }
        match ty {
            1..=3 => self.advance(1),
            4..=6 => self.varint().map(drop),
            7 => self.advance(8),
            8 => {
                let n = usize::try_from(self.varint()?).ok()?;
                self.advance(n)
            }
            9 | 10 => {
                let (size, elem) = self.list_header()?;
                (0..size).try_for_each(|_| self.skip(elem, depth + 1))
            }
            11 => {
                let size = self.varint()?;
                if size == 0 {
                    return Some(());
                }
                let kinds = self.byte()?;
                (0..size).try_for_each(|_| {
                    self.skip(kinds >> 4, depth + 1)?;
                    self.skip(kinds & 0x0f, depth + 1)
                })
            }
            STRUCT => self.skip_struct(depth + 1),
            _ => None,
        }
    }

    fn skip_struct(&mut self, depth: u8) -> Option<()> {
        loop {
            let head = self.byte()?;
            let ty = head & 0x0f;
            if ty == 0 {
                return Some(());
            }
            if head >> 4 == 0 {
                self.zigzag()?;
            }
            // A boolean field's value is its type code: nothing follows.
            if ty != 1 && ty != 2 {
                self.skip(ty, depth)?;
            }
        }
    }
}

/// Reads a file's size and its footer: the Thrift metadata plus the 8-byte
/// trailer (length and `PAR1`).
pub(crate) fn read_footer(path: &Path, rel: &str) -> Result<(u64, Vec<u8>), InputError> {
    let io = |e| InputError::Io {
        path: rel.to_string(),
        source: e,
    };
    let mut f = File::open(path).map_err(io)?;
    let size = f.metadata().map_err(io)?.len();
    check_size(rel, size)?;
    let mut head = [0u8; 4];
    f.read_exact(&mut head).map_err(io)?;
    let mut tail = [0u8; 8];
    f.seek(SeekFrom::End(-8)).map_err(io)?;
    f.read_exact(&mut tail).map_err(io)?;
    let len = footer_length(rel, size, &head, &tail)?;
    let mut footer = vec![0u8; len as usize + 8];
    f.seek(SeekFrom::End(-(len as i64) - 8)).map_err(io)?;
    f.read_exact(&mut footer).map_err(io)?;
    Ok((size, footer))
}

/// A Parquet file holds at least its two magic numbers and a footer length.
pub(crate) fn check_size(rel: &str, size: u64) -> Result<(), InputError> {
    if size < 12 {
        return Err(corrupt(rel, format!("file is only {size} bytes long")));
    }
    Ok(())
}

/// The footer's length from a file's first 4 and last 8 bytes, after checking
/// the magic numbers and that the footer fits in the file.
pub(crate) fn footer_length(
    rel: &str,
    size: u64,
    head: &[u8],
    tail: &[u8],
) -> Result<u64, InputError> {
    if head.len() != 4 || tail.len() != 8 {
        return Err(corrupt(
            rel,
            "short read of the file's first and last bytes",
        ));
    }
    if &tail[4..] == b"PARE" {
        return Err(corrupt(rel, "encrypted footers are not supported"));
    }
    if head != b"PAR1" || &tail[4..] != b"PAR1" {
        return Err(corrupt(
            rel,
            "missing the PAR1 magic bytes (truncated or not Parquet)",
        ));
    }
    let len = u32::from_le_bytes(tail[..4].try_into().expect("4 bytes")) as u64;
    if len + 12 > size {
        return Err(corrupt(
            rel,
            format!("footer length {len} exceeds the file size {size} (truncated?)"),
        ));
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fastparquet's footer of an empty frame with one int64 column `a`:
    /// version 1, schema [root, a], num_rows 0, row_groups `19 00`.
    const EMPTY: &[u8] = &[
        0x15, 0x02, // version: i32 1
        0x19, 0x2c, // schema: list of 2 structs
        0x48, 0x06, b's', b'c', b'h', b'e', b'm', b'a', 0x15, 0x02, 0x00, // root, 1 child
        0x15, 0x04, 0x25, 0x02, 0x18, 0x01, b'a', 0x00, // INT64, OPTIONAL, "a"
        0x16, 0x00, // num_rows: i64 0
        0x19, 0x00, // row_groups: size 0, element type 0
        0x00,
    ];

    #[test]
    fn fastparquet_empty_row_groups_decode() {
        assert!(ParquetMetaDataReader::decode_metadata(EMPTY).is_err());
        let fixed = corrected(EMPTY).expect("the header is corrected");
        let changed: Vec<usize> = (0..EMPTY.len()).filter(|&i| EMPTY[i] != fixed[i]).collect();
        assert_eq!(changed, vec![26]);
        assert_eq!(fixed[26], 0x0c);
        let md = decode(EMPTY).unwrap();
        assert_eq!(md.num_row_groups(), 0);
        assert_eq!(md.file_metadata().num_rows(), 0);
        assert_eq!(md.file_metadata().schema_descr().num_columns(), 1);
    }

    #[test]
    fn other_faults_keep_their_error() {
        // A truncated footer: the walk fails, the decoder's error stays.
        let err = decode(&EMPTY[..20]).unwrap_err();
        assert!(!err.to_string().is_empty());
        // Nothing to correct in a footer that walks but does not decode.
        assert!(corrected(&[0x15, 0x02, 0x00]).is_none());
        // A non-empty list is never touched.
        let mut bad = EMPTY.to_vec();
        bad[26] = 0x13; // one i8 element
        bad.insert(27, 0x07);
        assert!(corrected(&bad).is_none());
    }
}
