//! A key column of local files, read page by page: each value's
//! fingerprint is hashed straight from the decompressed page, without
//! building an Arrow array of it.
//!
//! The key engine reads text as `Utf8View` ([`super::direct`]): the Parquet
//! crate decompresses a page, checks its UTF-8, writes a 16-byte view a
//! value, and [`super::encode::fingerprints`] then hashes the views. Here a
//! `PLAIN` page's values are hashed where they lie, and a dictionary's
//! values once a dictionary, each index then costing a load. Over 10M
//! 22-character ids on two threads that took 0.08 to 0.09 s against 0.11
//! to 0.14 s, and over URL paths 0.17 s against 0.22 s.
//!
//! The hash is the one DataFusion gives the view (the unit tests hold it
//! to that), so the verification pass may read either way whatever the
//! first pass did; text typed as an Arrow dictionary in the files' schema
//! is hashed as DataFusion hashes a dictionary's values, as `str`
//! ([`encode::Kind`]). UTF-8 is checked as the Arrow reader checks it: a
//! value that is not UTF-8 is an error naming the file.
//!
//! A large dictionary page that a later chunk repeats byte for byte (an
//! Arrow dictionary written whole into every row group) is parsed once a
//! run: [`super::kept`].
//!
//! A visitor that files which values occur and how often, not where
//! (the verification of many candidates), takes them by value
//! ([`Visit::by_value`]): a dictionary page's rows tallied by index and
//! each value told once a chunk with its rows, a `PLAIN` page's values in
//! batches it can look up side by side, and nulls as counts.
//!
//! A single text key is walked here ([`plan`], [`walk`]), and so is a
//! join's side of one (`join::SideInput::of`: both sides of the spread
//! join, the staged side of the in-place table), hashed as views whatever
//! the files' type, as the joins compare text; a composite key
//! whose parts are text or 32- and 64-bit integers is walked a column at a
//! time through the same [`Reader`] ([`super::rowpages`]).
//!
//! Only flat optional or required `BYTE_ARRAY`, `INT32` and `INT64`
//! columns whose chunks list no encoding but `PLAIN`, the dictionary
//! encodings and `RLE` levels are read so; another chunk (and the rest of a
//! chunk whose page surprises the footer) goes through the Arrow reader,
//! skipping the rows already read.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray as _};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::parquet::basic::Encoding;
use datafusion::parquet::column::page::{Page, PageReader};
use datafusion::parquet::file::metadata::ColumnChunkMetaData;
use datafusion::parquet::file::serialized_reader::SerializedPageReader;

use super::decode::{hybrid, plain, u32_at, Tally};
use super::encode::{self, Kind};
use super::kept::{self, Kept};
use super::walks::{planned, walk_runs, FileColumns, Walks};
use crate::exec::ExecError as Error;
use crate::staged::StagedInput;

/// What a walk tells its consumer, row by row in file order.
pub(super) trait Visit {
    /// A value and its whole 64-bit fingerprint (0 when the reader was
    /// told not to hash).
    fn value(&mut self, fingerprint: u64, value: &[u8]);
    /// `n` null rows.
    fn nulls(&mut self, n: u64);
    /// Whether the rows of a dictionary-encoded page may come as each
    /// value once a chunk with how many rows hold it ([`Visit::rows`]; when
    /// the dictionary has at most half as many values as the chunk rows), a
    /// `PLAIN` page's a few at a time ([`Visit::batch`]), and a page's
    /// nulls as one count: for a visitor that files which values occur and
    /// how often, not where.
    fn by_value(&self) -> bool {
        false
    }
    /// Values of a `PLAIN` page, [`BATCH`] at a time (see
    /// [`Visit::by_value`]): a visitor may look them up side by side.
    fn batch(&mut self, values: &[(u64, &[u8])]) {
        for (fingerprint, value) in values {
            self.value(*fingerprint, value);
        }
    }
    /// `rows` rows of a value (see [`Visit::by_value`]).
    fn rows(&mut self, fingerprint: u64, value: &[u8], rows: u64) {
        for _ in 0..rows {
            self.value(fingerprint, value);
        }
    }
    /// Why the walk stops before the next row group, if it does.
    fn stop(&mut self) -> Option<Error> {
        None
    }
    /// Whether values are hashed for it (else their fingerprints are 0).
    fn hashed(&self) -> bool {
        true
    }
    /// Whether it wants no more values: the walk skips the rest of its
    /// run, from the next page on.
    fn done(&self) -> bool {
        false
    }
}

/// How many values [`Visit::batch`] is given at a time.
pub(super) const BATCH: usize = 32;

/// The walks of a single text key.
pub(super) type TextPages = Walks<FileColumns>;

/// The plan for the single text key `column` of `input` on at most
/// `threads` runs, or `None` when these files are not read so (see the
/// module's doc).
pub(super) fn plan(input: &StagedInput, column: &str, threads: usize) -> Option<TextPages> {
    let text = |k: Kind| matches!(k, Kind::Text | Kind::Str);
    planned(input, &[column.to_string()], threads, text)
}

/// [`plan`], with text typed as an Arrow dictionary hashed as views too,
/// as a join compares text keys (`Utf8View`) whatever the files' type.
pub(super) fn plan_as_views(
    input: &StagedInput,
    column: &str,
    threads: usize,
) -> Option<TextPages> {
    let mut pages = plan(input, column, threads)?;
    for file in Arc::get_mut(&mut pages.files)? {
        for (_, kind) in &mut file.parts {
            *kind = Kind::Text;
        }
    }
    Some(pages)
}

/// Walks every run of `pages` in a blocking task of its own, each with a
/// visitor from `visitor`; returns the visitors in run order, and how many
/// dictionary pages were skipped as repeats of a kept one.
pub(super) async fn walk<V: Visit + Send + 'static>(
    pages: &TextPages,
    label: &str,
    visitor: impl Fn() -> V,
) -> Result<(Vec<V>, u64), Error> {
    let group = |reader: &mut Reader, file: &FileColumns, group, v: &mut V| match v.stop() {
        Some(why) => Err(why),
        None if v.done() => Ok(0),
        None => reader.group(file, group, v),
    };
    let done = walk_runs(pages, label, (Reader::default, visitor), group).await?;
    let reused = done.iter().map(|(r, _)| r.reused).sum();
    Ok((done.into_iter().map(|(_, v)| v).collect(), reused))
}

/// What a timing line says of `n` dictionary pages skipped as repeats.
pub(super) fn repeats(n: u64) -> String {
    match n {
        0 => String::new(),
        n => format!(", skipping {n} dictionary page(s) that repeat the last one parsed"),
    }
}

/// A run's reusable buffers, and how it reads a column.
#[derive(Default)]
pub(super) struct Reader {
    /// The current dictionary: each value's place in `dict_page` and its
    /// fingerprint.
    dict: Vec<(u32, u32, u64)>,
    dict_page: bytes::Bytes,
    /// A page's definition levels, and its dictionary indices.
    defs: Vec<u32>,
    indices: Vec<u32>,
    /// The chunk's dictionary rows tallied, when its visitor takes them
    /// by value.
    tally: Tally,
    by_value: bool,
    /// The rows of the chunk being read.
    chunk_rows: u64,
    /// The last large dictionary read of each column, for a later chunk
    /// of the same one.
    kept: Vec<Kept>,
    /// The dictionary pages read in the current chunk.
    dictionaries: u32,
    /// Bytes compared against the kept dictionary's.
    scratch: Vec<u8>,
    /// What the column holds.
    kind: Kind,
    /// Values are passed unhashed (fingerprint 0).
    unhashed: bool,
    /// Test only: data pages of this encoding surprise the reader.
    #[cfg(test)]
    pub(super) surprise: Option<Encoding>,
    /// The chunks that reused a kept dictionary.
    pub(super) reused: u64,
    /// The shortest dictionary page kept, if not the default.
    pub(super) keep_from: Option<u64>,
}

/// Why a page is left to the Arrow reader.
pub(super) struct Surprise;

/// Whether every encoding a chunk lists is one the walker reads.
fn readable(chunk: &ColumnChunkMetaData) -> bool {
    chunk.encodings().all(|e| {
        matches!(
            e,
            Encoding::PLAIN | Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY | Encoding::RLE
        )
    })
}

impl Reader {
    /// Reads values of `kind`, hashed unless `hashed` is false.
    pub(super) fn set(&mut self, kind: Kind, hashed: bool) {
        self.kind = kind;
        self.unhashed = !hashed;
    }

    /// Reads row group `group` of `file` to `v`; returns its rows.
    fn group(
        &mut self,
        file: &FileColumns,
        group: usize,
        v: &mut impl Visit,
    ) -> Result<u64, Error> {
        let path = &file.arrow.path;
        let failed =
            |e: &dyn std::fmt::Display| Error::Audit(format!("reading {}: {e}", path.display()));
        let rg = file.arrow.metadata.metadata().row_group(group);
        let rows = rg.num_rows().max(0) as u64;
        let [(leaf, kind)] = file.parts[..] else {
            return Err(failed(
                &"internal: a single key planned with several columns",
            ));
        };
        self.set(kind, v.hashed());
        let done = self.chunk(path, rg.column(leaf), rows, v)?;
        if done == rows || v.done() {
            return Ok(rows);
        }
        // The rest of the chunk through the Arrow reader.
        let mut hashes = Vec::new();
        for batch in file
            .arrow
            .group_batches(group, done as usize)
            .map_err(|e| failed(&e))?
        {
            let batch = batch.map_err(|e| failed(&e))?;
            // A dictionary's values, as views; hashed as views unless the
            // column's kind is the dictionary's.
            let read = batch.column(0);
            let column = cast(read, &DataType::Utf8View).map_err(|e| failed(&e))?;
            let hashed = match kind {
                Kind::Str => read,
                _ => &column,
            };
            encode::fingerprints(std::slice::from_ref(hashed), None, &mut hashes)
                .map_err(|e| failed(&e))?;
            let a = column.as_string_view();
            for (i, h) in hashes.iter().enumerate() {
                match a.is_valid(i) {
                    true => v.value(*h, a.value(i).as_bytes()),
                    false => v.nulls(1),
                }
            }
        }
        Ok(rows)
    }

    /// Reads the column chunk `chunk` (of `rows` rows) of the file at
    /// `path` to `v`, page by page; returns the rows read: fewer than
    /// `rows` when a page (or the chunk's encodings) surprised the reader,
    /// before any of its rows was visited.
    pub(super) fn chunk(
        &mut self,
        path: &Path,
        chunk: &ColumnChunkMetaData,
        rows: u64,
        v: &mut impl Visit,
    ) -> Result<u64, Error> {
        let failed =
            |e: &dyn std::fmt::Display| Error::Audit(format!("reading {}: {e}", path.display()));
        if !readable(chunk) {
            return Ok(0);
        }
        let f = Arc::new(File::open(path).map_err(|e| failed(&e))?);
        let read_as = (self.kind, !self.unhashed);
        let span = kept::span(chunk, self.keep_from);
        // The column's kept dictionary, if any, is taken out for the chunk.
        let column = chunk.column_path();
        let mut kept =
            (self.kept.iter().position(|k| k.column() == column)).map(|i| self.kept.swap_remove(i));
        let reuse = match (&kept, span) {
            (Some(k), Some(span)) => {
                (k.holds((path, &f), span, read_as, &mut self.scratch)).map_err(|e| failed(&e))?
            }
            _ => false,
        };
        // A different large dictionary: the kept one is let go first.
        if span.is_some() && !reuse {
            kept = None;
        }
        self.dict.clear();
        self.dictionaries = 0;
        let mut pages = SerializedPageReader::new(f.clone(), chunk, rows as usize, None)
            .map_err(|e| failed(&e))?;
        // The page is skipped if the reader finds a dictionary page first.
        let mut skipped = false;
        if reuse {
            let first = pages.peek_next_page().map_err(|e| failed(&e))?;
            match (first.is_some_and(|p| p.is_dict), kept.as_mut()) {
                (true, Some(k)) => {
                    pages.skip_next_page().map_err(|e| failed(&e))?;
                    k.trade(&mut self.dict, &mut self.dict_page);
                    skipped = true;
                }
                _ => kept = None,
            }
        }
        let nullable = chunk.column_descr().max_def_level() == 1;
        // A tally counts a chunk's rows in u32s.
        self.by_value = v.by_value() && rows <= u64::from(u32::MAX);
        self.chunk_rows = rows;
        let mut done = 0;
        while let Some(page) = pages.get_next_page().map_err(|e| failed(&e))? {
            if v.done() {
                break;
            }
            match self.page(page, nullable, v) {
                Ok(Ok(n)) => done += n,
                Ok(Err(Surprise)) => break,
                Err(e) => return Err(failed(&e)),
            }
        }
        self.tallied(v);
        match (kept.as_mut(), span) {
            // The kept dictionary goes back, unless the chunk held another.
            (Some(k), _) if skipped => match self.dictionaries {
                0 => k.trade(&mut self.dict, &mut self.dict_page),
                _ => kept = None,
            },
            (None, Some(span)) if self.dictionaries == 1 => {
                let (dict, page) = (
                    std::mem::take(&mut self.dict),
                    std::mem::take(&mut self.dict_page),
                );
                kept = Kept::new(column, (path, &f), span, read_as, dict, page)
                    .map_err(|e| failed(&e))?;
            }
            _ => {}
        }
        self.kept.extend(kept);
        self.reused += u64::from(skipped);
        Ok(done)
    }

    /// One page to `v`: the rows it held, or a surprise before any of them
    /// was visited.
    fn page(
        &mut self,
        page: Page,
        nullable: bool,
        v: &mut impl Visit,
    ) -> Result<Result<u64, Surprise>, String> {
        let (buf, rows, encoding, start) = match page {
            Page::DictionaryPage {
                buf,
                num_values,
                encoding,
                ..
            } => {
                if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
                    return Ok(Err(Surprise));
                }
                self.tallied(v);
                self.dictionary(buf, num_values as usize)?;
                return Ok(Ok(0));
            }
            Page::DataPage {
                buf,
                num_values,
                encoding,
                def_level_encoding,
                ..
            } => {
                let n = num_values as usize;
                self.defs.clear();
                let start = match nullable {
                    false => 0,
                    true if def_level_encoding == Encoding::RLE => {
                        let len = u32_at(&buf, 0)? as usize;
                        let levels = buf.get(4..4 + len).ok_or("a page's levels overrun it")?;
                        hybrid(levels, 1, n, &mut self.defs)?;
                        4 + len
                    }
                    true => return Ok(Err(Surprise)),
                };
                (buf, n, encoding, start)
            }
            Page::DataPageV2 {
                buf,
                num_values,
                encoding,
                def_levels_byte_len,
                rep_levels_byte_len,
                ..
            } => {
                let n = num_values as usize;
                let (rep, def) = (rep_levels_byte_len as usize, def_levels_byte_len as usize);
                self.defs.clear();
                if nullable && def > 0 {
                    let levels = buf
                        .get(rep..rep + def)
                        .ok_or("a page's levels overrun it")?;
                    hybrid(levels, 1, n, &mut self.defs)?;
                }
                (buf, n, encoding, rep + def)
            }
        };
        #[cfg(test)]
        if self.surprise == Some(encoding) {
            return Ok(Err(Surprise));
        }
        let non_null = match self.defs.is_empty() {
            true => rows,
            false => self.defs.iter().filter(|l| **l == 1).count(),
        };
        let data = buf.get(start..).ok_or("a page's levels overrun it")?;
        let defs = std::mem::take(&mut self.defs);
        let by_value = self.by_value
            && matches!(
                encoding,
                Encoding::PLAIN | Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY
            );
        if by_value && non_null < rows {
            v.nulls((rows - non_null) as u64);
        }
        let read = match non_null == rows || by_value {
            true => self.values(encoding, data, non_null, v),
            false => {
                let mut placed = Placed {
                    defs: &defs,
                    at: 0,
                    v,
                };
                let read = self.values(encoding, data, non_null, &mut placed);
                placed.gap();
                read
            }
        };
        self.defs = defs;
        Ok(read?.map(|()| rows as u64))
    }

    /// `n` values of a data page's `data` in `encoding` to `v`.
    fn values(
        &mut self,
        encoding: Encoding,
        data: &[u8],
        n: usize,
        v: &mut impl Visit,
    ) -> Result<Result<(), Surprise>, String> {
        let kind = self.kind;
        match encoding {
            Encoding::PLAIN if self.by_value => {
                // The rows tallied so far (a chunk's dictionary pages
                // before its writer fell back to plain ones) come first,
                // so that values come in the order of their pages.
                self.tallied(v);
                let mut batch = [(0, &[][..]); BATCH];
                let mut k = 0;
                plain(kind, !self.unhashed, data, n, |h, x| {
                    batch[k] = (h, x);
                    k += 1;
                    if k == BATCH {
                        v.batch(&batch);
                        k = 0;
                    }
                })?;
                v.batch(&batch[..k]);
            }
            Encoding::PLAIN => plain(kind, !self.unhashed, data, n, |h, x| v.value(h, x))?,
            Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY => {
                let (&width, indices) = data.split_first().ok_or("an empty dictionary page")?;
                if width > 32 {
                    return Err(format!("dictionary indices of {width} bits"));
                }
                self.indices.clear();
                hybrid(indices, u32::from(width), n, &mut self.indices)?;
                // A dictionary near the chunk's size is mostly told once a
                // row anyway, and its tally would cost a pass over it.
                if self.by_value && self.dict.len() as u64 * 2 <= self.chunk_rows {
                    self.tally.add(&self.indices, self.dict.len())?;
                    return Ok(Ok(()));
                }
                for &k in &self.indices {
                    let &(at, len, h) = self.dict.get(k as usize).ok_or_else(|| {
                        format!("dictionary index {k} past its {} values", self.dict.len())
                    })?;
                    v.value(h, &self.dict_page[at as usize..(at + len) as usize]);
                }
            }
            _ => return Ok(Err(Surprise)),
        }
        Ok(Ok(()))
    }

    /// The tallied rows to `v`, each value once.
    fn tallied(&mut self, v: &mut impl Visit) {
        let (dict, page) = (&self.dict, &self.dict_page);
        self.tally.drain(|k, n| {
            let (at, len, h) = dict[k];
            v.rows(h, &page[at as usize..(at + len) as usize], n);
        });
    }

    fn dictionary(&mut self, buf: bytes::Bytes, n: usize) -> Result<(), String> {
        self.dict.clear();
        let base = buf.as_ptr() as usize;
        let dict = &mut self.dict;
        plain(self.kind, !self.unhashed, &buf, n, |h, x| {
            dict.push(((x.as_ptr() as usize - base) as u32, x.len() as u32, h));
        })?;
        self.dict_page = buf;
        self.dictionaries += 1;
        Ok(())
    }
}

/// A visitor told where a page's nulls lie among its values.
struct Placed<'a, V> {
    defs: &'a [u32],
    at: usize,
    v: &'a mut V,
}

impl<V: Visit> Placed<'_, V> {
    /// The nulls from here to the next value.
    fn gap(&mut self) {
        let from = self.at;
        while self.defs.get(self.at) == Some(&0) {
            self.at += 1;
        }
        if self.at > from {
            self.v.nulls((self.at - from) as u64);
        }
    }
}

impl<V: Visit> Visit for Placed<'_, V> {
    #[inline]
    fn value(&mut self, fingerprint: u64, value: &[u8]) {
        self.gap();
        self.v.value(fingerprint, value);
        self.at += 1;
    }

    fn nulls(&mut self, n: u64) {
        self.v.nulls(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{ArrayRef, StringViewArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::common::hash_utils::RandomState;

    #[test]
    fn fingerprints_are_datafusions_of_the_views() {
        let values = [
            "",
            "a",
            "twelve bytes",
            "thirteen byte",
            "ünïcödé ✓ and more than twelve",
            "0123456789abcdef0123456789abcdef",
        ];
        let array: ArrayRef = Arc::new(StringViewArray::from(values.to_vec()));
        let mut want = Vec::new();
        encode::fingerprints(&[array], None, &mut want).unwrap();
        let state = RandomState::with_seed(encode::SEED);
        let got: Vec<u64> = values
            .iter()
            .map(|v| encode::first(Kind::Text, &state, v.as_bytes()))
            .collect();
        assert_eq!(got, want);
    }

    /// What a walk visited: (fingerprint, value), `None` for a null.
    #[derive(Default)]
    struct Seen(Vec<Option<(u64, Vec<u8>)>>);

    impl Visit for Seen {
        fn value(&mut self, fingerprint: u64, value: &[u8]) {
            self.0.push(Some((fingerprint, value.to_vec())));
        }
        fn nulls(&mut self, n: u64) {
            self.0.extend((0..n).map(|_| None));
        }
    }

    fn values(n: usize) -> Vec<Option<String>> {
        (0..n)
            .map(|i| match i % 11 {
                0 => None,
                1 => Some(String::new()),
                2 => Some(format!("ünï-{}", i % 37)),
                3 => Some(format!("a longer value than twelve bytes {}", i % 53)),
                _ => Some(format!("k{}", (i * 7919) % 997)),
            })
            .collect()
    }

    /// Every value and null of the file, through dictionary pages that
    /// give way to plain ones, v1 and v2 pages, an encoding read by the
    /// Arrow reader, and a page that surprises the reader mid-chunk, of an
    /// optional and of a required column, typed as text or as a dictionary
    /// of text: the same fingerprints, values and nulls, in the same order,
    /// as the Arrow reader and DataFusion's hash give.
    #[test]
    fn pages_give_what_the_arrow_reader_gives() {
        let (v1, v2) = (WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0);
        let cases = [
            (v1, true, None, None),
            (v2, true, None, None),
            (v1, true, None, Some(Encoding::PLAIN)),
            (v2, true, None, Some(Encoding::RLE_DICTIONARY)),
            (v1, false, Some(Encoding::DELTA_LENGTH_BYTE_ARRAY), None),
            (v2, false, Some(Encoding::DELTA_BYTE_ARRAY), None),
        ];
        for nullable in [true, false] {
            let rows: Vec<Option<String>> = values(3000)
                .into_iter()
                .filter(|v| nullable || v.is_some())
                .collect();
            for (case, typed) in cases.into_iter().flat_map(|c| [(c, false), (c, true)]) {
                let seen = walked(&rows, nullable, typed, case);
                let want = arrow_read(&rows, typed);
                let case = format!("nullable {nullable}, dictionary-typed {typed}, {case:?}");
                assert_eq!(seen.len(), want.len(), "{case}");
                assert!(seen == want, "{case}");
            }
        }
    }

    use datafusion::parquet::file::properties::WriterVersion;

    type Case = (WriterVersion, bool, Option<Encoding>, Option<Encoding>);

    /// `rows` as the Arrow reader and DataFusion's hash give them, in order
    /// (`typed`: read as a dictionary).
    fn arrow_read(rows: &[Option<String>], typed: bool) -> Vec<Option<(u64, Vec<u8>)>> {
        let column = text_column(rows, typed, true);
        let mut hashes = Vec::new();
        encode::fingerprints(&[column], None, &mut hashes).unwrap();
        rows.iter()
            .zip(&hashes)
            .map(|(r, h)| r.as_ref().map(|v| (*h, v.as_bytes().to_vec())))
            .collect()
    }

    /// `rows` as text (views if `views`), or as a dictionary of text if
    /// `typed`.
    fn text_column(rows: &[Option<String>], typed: bool, views: bool) -> ArrayRef {
        use datafusion::arrow::array::{DictionaryArray, StringArray};
        use datafusion::arrow::datatypes::Int32Type;
        let values = rows.iter().map(|r| r.as_deref());
        match (typed, views) {
            (true, _) => Arc::new(values.collect::<DictionaryArray<Int32Type>>()),
            (false, true) => Arc::new(values.collect::<StringViewArray>()),
            (false, false) => Arc::new(values.collect::<StringArray>()),
        }
    }

    /// `rows` written as (version, dictionary, encoding) says (`typed`: as
    /// a dictionary-typed column), and walked with data pages of the
    /// `surprise` encoding left to the Arrow reader.
    fn walked(
        rows: &[Option<String>],
        nullable: bool,
        typed: bool,
        (version, dictionary, encoding, surprise): Case,
    ) -> Vec<Option<(u64, Vec<u8>)>> {
        use datafusion::arrow::array::RecordBatch;
        use datafusion::parquet::arrow::ArrowWriter;
        use datafusion::parquet::basic::Compression;
        use datafusion::parquet::file::properties::WriterProperties;
        let column = text_column(rows, typed, false);
        let field = Field::new("s", column.data_type().clone(), nullable);
        let schema = Arc::new(Schema::new(vec![field]));
        let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let mut props = WriterProperties::builder()
            .set_writer_version(version)
            .set_dictionary_enabled(dictionary)
            .set_dictionary_page_size_limit(512)
            .set_data_page_row_count_limit(100)
            .set_write_batch_size(50)
            .set_max_row_group_row_count(Some(1200))
            .set_compression(Compression::SNAPPY);
        if let Some(e) = encoding {
            props = props.set_encoding(e);
        }
        let file = File::create(tmp.path().join("part-0.parquet")).unwrap();
        let mut w = ArrowWriter::try_new(file, schema, Some(props.build())).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let input = StagedInput::open(tmp.path()).unwrap();
        let text = plan(&input, "s", 2).expect("read page by page");
        let mut seen = Seen::default();
        for run in &text.runs {
            let mut reader = Reader {
                surprise,
                ..Reader::default()
            };
            for &(f, g) in run {
                reader.group(&text.files[f], g, &mut seen).unwrap();
            }
        }
        seen.0
    }

    /// Row groups whose large dictionary pages (384 KB, kept from 256 KiB
    /// here) are the same bytes, in one file and across two: each page
    /// after the first is skipped and the kept dictionary reused; pages of
    /// the same length but other bytes are read. Either way every value, fingerprint and null is the
    /// Arrow reader's.
    #[test]
    fn a_repeated_dictionary_page_is_read_once() {
        use datafusion::arrow::array::RecordBatch;
        use datafusion::parquet::arrow::ArrowWriter;
        use datafusion::parquet::basic::Compression;
        use datafusion::parquet::file::properties::WriterProperties;
        let (groups, distinct, extra) = (4, 12_000, 3_000);
        // Every group starts with the distinct values, in its own rotation.
        let group = |g: usize, rotated: bool| {
            let turn = if rotated { g * 1000 } else { 0 };
            let mut rows: Vec<Option<String>> = (0..distinct)
                .map(|i| Some(format!("dictionary value ✓ {:08}", (i + turn) % distinct)))
                .collect();
            rows.extend((0..extra).map(|i| {
                (i % 13 != 0)
                    .then(|| format!("dictionary value ✓ {:08}", (i * 7919 + g) % distinct))
            }));
            rows
        };
        for (rotated, typed, files) in [(false, false, 1), (false, true, 2), (true, false, 1)] {
            let rows: Vec<Option<String>> = (0..groups).flat_map(|g| group(g, rotated)).collect();
            let column = text_column(&rows, typed, false);
            let field = Field::new("s", column.data_type().clone(), true);
            let schema = Arc::new(Schema::new(vec![field]));
            let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
            let tmp = tempfile::tempdir().unwrap();
            for f in 0..files {
                let props = WriterProperties::builder()
                    .set_dictionary_page_size_limit(64 << 20)
                    .set_max_row_group_row_count(Some(distinct + extra))
                    .set_compression(Compression::UNCOMPRESSED)
                    .build();
                let file = File::create(tmp.path().join(format!("part-{f}.parquet"))).unwrap();
                let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
                w.write(&batch).unwrap();
                w.close().unwrap();
            }
            let input = StagedInput::open(tmp.path()).unwrap();
            let text = plan(&input, "s", 1).expect("read page by page");
            let mut seen = Seen::default();
            let mut reader = Reader {
                keep_from: Some(256 << 10),
                ..Reader::default()
            };
            for &(f, g) in &text.runs[0] {
                reader.group(&text.files[f], g, &mut seen).unwrap();
            }
            let case = format!("rotated {rotated}, dictionary-typed {typed}, {files} file(s)");
            let want: Vec<_> = (0..files).flat_map(|_| arrow_read(&rows, typed)).collect();
            assert_eq!(seen.0.len(), want.len(), "{case}");
            assert!(seen.0 == want, "{case}");
            let reused = match rotated {
                true => 0,
                false => groups * files - 1,
            };
            assert_eq!(reader.reused as usize, reused, "{case}");
        }
    }

    /// A value that is not UTF-8 is an error naming the file, as the Arrow
    /// reader's.
    #[test]
    fn a_value_that_is_not_utf8_is_an_error() {
        let mut seen = Seen::default();
        let mut page = Vec::new();
        for v in [&b"ok"[..], &[0xff, 0xfe]] {
            page.extend((v.len() as u32).to_le_bytes());
            page.extend(v);
        }
        let state = RandomState::with_seed(encode::SEED);
        let err = plain(Kind::Text, true, &page, 2, |h, v| seen.value(h, v)).unwrap_err();
        assert!(err.contains("not UTF-8"), "{err}");
        assert_eq!(
            seen.0,
            [Some((
                encode::first(Kind::Text, &state, b"ok"),
                b"ok".to_vec()
            ))]
        );
        assert!(plain(Kind::Text, true, &page[..11], 2, |_, _| ())
            .unwrap_err()
            .contains("overruns"));
    }
}
