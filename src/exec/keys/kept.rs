//! A dictionary page kept across a run's column chunks.
//!
//! A column written from an Arrow dictionary (pyarrow's `dictionary_encode`,
//! pandas categoricals) carries the whole Arrow dictionary into every row
//! group: 2.5M ids make a 60 MB dictionary page, written again, byte for
//! byte, in each group of the file. [`super::pages::Reader`] decompressed,
//! parsed and hashed it for every group, in each pass. It now keeps the
//! last large dictionary it read of each column, and a later chunk whose dictionary page
//! is the same bytes on disk (its header and its compressed values,
//! compared in full) skips the page and reuses the parsed dictionary.
//!
//! Only the bytes decide: the kept page's header is parsed here (Thrift's
//! compact protocol, which the Parquet crate does not export) and must
//! span exactly the bytes from the chunk's dictionary offset to its first
//! data page, so equal bytes are the same page and nothing is trusted to a
//! footer or a hash.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use datafusion::parquet::file::metadata::ColumnChunkMetaData;
use datafusion::parquet::schema::types::ColumnPath;

use super::encode::Kind;

/// Dictionary pages shorter than this are read again. Writers cap the
/// dictionaries they build at about 1 MiB a page (pyarrow, parquet-mr,
/// arrow-rs), different in each row group, so those are left alone; an
/// Arrow dictionary written whole is not capped. (The test hook that keeps no key column,
/// [`crate::hooks::keep_bytes`], keeps every dictionary page, so that the
/// cross-checks' small files take this path too.)
const KEEP_FROM: u64 = 4 << 20;

/// The most bytes of a dictionary page's header read.
const HEADER: usize = 1 << 10;

/// The bytes compared at a time.
const PIECE: usize = 256 << 10;

/// Where a chunk's dictionary page lies, if it is long enough to keep
/// (`from` bytes, else [`KEEP_FROM`]): its offset and length, from the
/// dictionary offset to the first data page.
pub(super) fn span(chunk: &ColumnChunkMetaData, from: Option<u64>) -> Option<(u64, u64)> {
    let (at, len) = crate::staged::stats::dictionary_page(chunk)?;
    let from = match (from, crate::hooks::keep_bytes()) {
        (Some(from), _) => from,
        (None, Some(_)) => 1,
        (None, None) => KEEP_FROM,
    };
    (len >= from).then_some((at, len))
}

/// A parsed dictionary, and the page on disk it was read from.
pub(super) struct Kept {
    column: ColumnPath,
    path: PathBuf,
    at: u64,
    len: u64,
    kind: Kind,
    hashed: bool,
    /// Each value's place in `page` and its fingerprint.
    pub dict: Vec<(u32, u32, u64)>,
    /// The decompressed page.
    pub page: bytes::Bytes,
}

impl Kept {
    /// Keeps `dict` and `page`, read as `kind` (hashed or not) from the
    /// dictionary page at `span` of `file` (at `path`), a chunk of
    /// `column`, if its header says it is one page of exactly those bytes.
    pub(super) fn new(
        column: &ColumnPath,
        (path, file): (&Path, &File),
        (at, len): (u64, u64),
        (kind, hashed): (Kind, bool),
        dict: Vec<(u32, u32, u64)>,
        page: bytes::Bytes,
    ) -> io::Result<Option<Kept>> {
        let whole = dictionary_header(file, (at, len))?
            .is_some_and(|h| (h.len as u64).checked_add(h.compressed) == Some(len));
        Ok(whole.then(|| Kept {
            column: column.clone(),
            path: path.to_path_buf(),
            at,
            len,
            kind,
            hashed,
            dict,
            page,
        }))
    }

    /// Trades the kept dictionary and page for `dict` and `page`: the
    /// reader's current ones.
    pub(super) fn trade(&mut self, dict: &mut Vec<(u32, u32, u64)>, page: &mut bytes::Bytes) {
        std::mem::swap(&mut self.dict, dict);
        std::mem::swap(&mut self.page, page);
    }

    /// The column whose dictionary this is.
    pub(super) fn column(&self) -> &ColumnPath {
        &self.column
    }

    /// Whether the dictionary page at `span` of `file` (at `path`), read
    /// as `kind`, is the kept one: the same bytes.
    pub(super) fn holds(
        &self,
        (path, file): (&Path, &File),
        (at, len): (u64, u64),
        (kind, hashed): (Kind, bool),
        buf: &mut Vec<u8>,
    ) -> io::Result<bool> {
        if (len, kind, hashed) != (self.len, self.kind, self.hashed) {
            return Ok(false);
        }
        if path == self.path && at == self.at {
            return Ok(true);
        }
        let other;
        let kept = match path == self.path {
            true => file,
            false => {
                other = File::open(&self.path)?;
                &other
            }
        };
        buf.resize(2 * PIECE, 0);
        let (a, b) = buf.split_at_mut(PIECE);
        let mut done = 0;
        while done < len {
            let n = (len - done).min(PIECE as u64) as usize;
            file.read_exact_at(&mut a[..n], at + done)?;
            kept.read_exact_at(&mut b[..n], self.at + done)?;
            if a[..n] != b[..n] {
                return Ok(false);
            }
            done += n as u64;
        }
        Ok(true)
    }
}

/// What a page header says of its page.
#[derive(Debug, PartialEq)]
struct Header {
    /// The header's own length.
    len: usize,
    /// A dictionary page.
    dictionary: bool,
    /// The page's length after its header.
    compressed: u64,
    /// Its length decompressed.
    uncompressed: u64,
    /// A dictionary page's count of values.
    values: Option<u64>,
}

/// The page header at the start of `buf`, if one is there whole.
fn page_header(buf: &[u8]) -> Option<Header> {
    let mut r = Compact { buf, at: 0 };
    let (mut kind, mut compressed, mut uncompressed, mut values) = (None, None, None, None);
    r.fields(0, |r, id, t| {
        match (id, t) {
            (1, I32) => kind = Some(r.int()?),
            (2, I32) => uncompressed = Some(r.int()?),
            (3, I32) => compressed = Some(r.int()?),
            // The dictionary page's own header.
            (7, STRUCT) => r.fields(1, |r, id, t| {
                match (id, t) {
                    (1, I32) => values = Some(u64::try_from(r.int()?).ok()?),
                    _ => r.skip(t, 1)?,
                }
                Some(())
            })?,
            _ => r.skip(t, 0)?,
        }
        Some(())
    })?;
    // PageType::DICTIONARY_PAGE is 2.
    Some(Header {
        len: r.at,
        dictionary: kind? == 2,
        compressed: u64::try_from(compressed?).ok()?,
        uncompressed: u64::try_from(uncompressed?).ok()?,
        values,
    })
}

/// The decompressed length and count of values of the dictionary page at
/// `span` of `file`, from its header; `None` when no dictionary page's
/// header (of at most [`HEADER`] bytes) is there.
pub(super) fn dictionary_size(file: &File, span: (u64, u64)) -> Option<(u64, u64)> {
    let h = dictionary_header(file, span).ok()??;
    Some((h.uncompressed, h.values?))
}

/// The header of the dictionary page at `span` of `file`; `None` when no
/// dictionary page's header is there whole. A dictionary page's header is
/// some 20 bytes: a longer one than [`HEADER`] is none.
fn dictionary_header(file: &File, (at, len): (u64, u64)) -> io::Result<Option<Header>> {
    let mut head = [0; HEADER];
    let head = &mut head[..len.min(HEADER as u64) as usize];
    file.read_exact_at(head, at)?;
    Ok(page_header(head).filter(|h| h.dictionary))
}

/// Thrift's compact protocol, read only as far as skipping what it holds.
struct Compact<'a> {
    buf: &'a [u8],
    at: usize,
}

const I32: u8 = 5;
const STRUCT: u8 = 12;
/// Nesting deeper than any Parquet header.
const DEPTH: usize = 16;

impl Compact<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    /// A zigzag-encoded integer.
    fn int(&mut self) -> Option<i64> {
        let v = self.varint()?;
        Some((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn bytes(&mut self, n: u64) -> Option<()> {
        let end = self.at.checked_add(usize::try_from(n).ok()?)?;
        (end <= self.buf.len()).then(|| self.at = end)
    }

    /// A struct's fields up to its stop, each to `field` with its id and
    /// type, which reads or skips the value.
    fn fields(
        &mut self,
        depth: usize,
        mut field: impl FnMut(&mut Self, i64, u8) -> Option<()>,
    ) -> Option<()> {
        let mut id = 0i64;
        loop {
            let b = self.byte()?;
            if b == 0 {
                return Some(());
            }
            id = match b >> 4 {
                0 => self.int()?,
                delta => id + i64::from(delta),
            };
            if depth > DEPTH {
                return None;
            }
            field(self, id, b & 0x0f)?;
        }
    }

    /// Skips a value of type `t` (a field's: booleans hold no byte).
    fn skip(&mut self, t: u8, depth: usize) -> Option<()> {
        match t {
            1 | 2 => Some(()),
            3 => self.bytes(1),
            4..=6 => self.varint().map(drop),
            7 => self.bytes(8),
            8 => {
                let n = self.varint()?;
                self.bytes(n)
            }
            9 | 10 => {
                let b = self.byte()?;
                let n = match b >> 4 {
                    15 => self.varint()?,
                    n => u64::from(n),
                };
                self.elements(n, &[b & 0x0f], depth)
            }
            11 => {
                let n = self.varint()?;
                if n == 0 {
                    return Some(());
                }
                let b = self.byte()?;
                self.elements(n, &[b >> 4, b & 0x0f], depth)
            }
            12 => self.fields(depth + 1, |r, _, t| r.skip(t, depth + 1)),
            _ => None,
        }
    }

    /// Skips `n` elements of a collection, each of the types `ts`
    /// (booleans a byte each).
    fn elements(&mut self, n: u64, ts: &[u8], depth: usize) -> Option<()> {
        if depth > DEPTH {
            return None;
        }
        for _ in 0..n {
            for &t in ts {
                match t {
                    1 | 2 => self.bytes(1)?,
                    t => self.skip(t, depth + 1)?,
                }
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::column::page::Page;
    use datafusion::parquet::file::properties::{
        EnabledStatistics, WriterProperties, WriterVersion,
    };
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

    /// Every page header of every chunk, v1 and v2 pages with statistics
    /// on each, parses to a length that lands on the next page, and the
    /// dictionary page spans exactly what `span` finds.
    #[test]
    fn headers_chain_through_every_chunk() {
        for version in [WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f.parquet");
            let values: Vec<Option<String>> = (0..20_000)
                .map(|i| (i % 7 != 0).then(|| format!("value {} ✓", (i * 7919) % 3000)))
                .collect();
            let column: ArrayRef = Arc::new(StringArray::from(values));
            let batch = RecordBatch::try_from_iter([("k", column)]).unwrap();
            let props = WriterProperties::builder()
                .set_writer_version(version)
                .set_statistics_enabled(EnabledStatistics::Page)
                .set_data_page_row_count_limit(1000)
                .set_max_row_group_row_count(Some(8000))
                .build();
            let mut w =
                ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), Some(props))
                    .unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
            let bytes = std::fs::read(&path).unwrap();
            let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
            let (mut pages, mut sized) = (0, 0);
            for (g, rg) in reader.metadata().row_groups().iter().enumerate() {
                let c = rg.column(0);
                let (start, n) = c.byte_range();
                let mut at = start as usize;
                let dict = c.dictionary_page_offset().unwrap() as usize;
                assert_eq!(dict, at);
                // Its decompressed length and values, as the Parquet
                // crate's reader reads them.
                let span = crate::staged::stats::dictionary_page(c).unwrap();
                let file = File::open(&path).unwrap();
                let mut read = (reader.get_row_group(g).unwrap())
                    .get_column_page_reader(0)
                    .unwrap();
                if let Some(Page::DictionaryPage {
                    buf, num_values, ..
                }) = read.get_next_page().unwrap()
                {
                    let want = (buf.len() as u64, u64::from(num_values));
                    assert_eq!(dictionary_size(&file, span), Some(want));
                    sized += 1;
                }
                while at < (start + n) as usize {
                    let h = page_header(&bytes[at..]).unwrap();
                    if h.dictionary {
                        assert_eq!(
                            at + h.len + h.compressed as usize,
                            c.data_page_offset() as usize
                        );
                    }
                    at += h.len + h.compressed as usize;
                    pages += 1;
                }
                assert_eq!(at, (start + n) as usize, "{version:?}");
            }
            assert!(pages > 20, "{pages} pages");
            assert_eq!(sized, reader.metadata().num_row_groups(), "{version:?}");
            // What is not a whole header is none.
            let h = page_header(&bytes[4..]).unwrap();
            for cut in 0..h.len {
                assert_eq!(page_header(&bytes[4..4 + cut]), None, "cut at {cut}");
            }
            assert_eq!(page_header(&[0x15; 64]), None);
            assert_eq!(page_header(&[0x1c; 64]), None);
        }
    }
}
