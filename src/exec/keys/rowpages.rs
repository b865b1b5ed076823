//! A composite key of local files read page by page in the fingerprint
//! scan: each part's column walked with [`pages::Reader`], a row group at
//! a time, its values folded into one fingerprint a row as DataFusion folds
//! the key's columns ([`encode::then`]).
//!
//! The parts are text, 32-bit and 64-bit integer columns ([`encode::Kind`]).
//! Rows are matched across the parts' chunks by position, so a row group
//! costs 9 bytes a row (its fingerprints and whether a part is null),
//! reserved in the memory pool. A row group larger than [`MAX_ROWS`], one
//! the pool refuses, and one whose page surprises the reader go whole
//! through the Arrow reader, batch by batch.
//!
//! The verification still reads a composite's batches: walking its pages
//! too meant keeping each row group's values until its last part was
//! folded, and measured no faster than the Arrow reader, at twice the
//! memory for two text parts (`benches/README.md`). Each run notes every
//! row's partition as it goes ([`super::placed`]), so that when the
//! candidates lie in few rows the verification reads only theirs.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::common::hash_utils::RandomState;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};

use super::encode::{self, Kind};
use super::pages::{self, Reader, Visit};
use super::walks::{self, FileColumns, Walks};
use crate::exec::ExecError as Error;
use crate::staged::StagedInput;

/// The most rows of a row group walked page by page (9 bytes a row).
pub(super) const MAX_ROWS: u64 = 1 << 23;

/// The walks of a composite key.
pub(super) type RowPages = Walks<FileColumns>;

/// A key's columns walked page by page: a single text key's, or a
/// composite's.
pub(super) enum Paged {
    One(pages::TextPages),
    Rows(RowPages),
}

/// How the key `columns` of `input` are walked on at most `threads` runs,
/// or `None` when they are not (see [`pages`] and this module's doc).
pub(super) fn paged(input: &StagedInput, columns: &[String], threads: usize) -> Option<Paged> {
    match columns {
        [k] => pages::plan(input, k, threads).map(Paged::One),
        _ => walks::planned(input, columns, threads, |_| true).map(Paged::Rows),
    }
}

/// What a walk of a composite key tells its consumer, a stretch of rows at
/// a time: each row's whole fingerprint, and whether a part of it is null.
pub(super) trait Rows {
    fn rows(&mut self, hashes: &[u64], nulls: &[bool]);

    /// Whether the next row group comes decoded, through the Arrow reader
    /// ([`Rows::columns`]): a composite's keys binned ([`super::rowbins`]).
    fn decoded(&mut self) -> bool {
        false
    }

    /// A batch of the key columns as the Arrow reader decodes them, with
    /// each row's fingerprint and whether a part of it is null.
    fn columns(&mut self, _columns: &[ArrayRef], hashes: &[u64], nulls: &[bool]) {
        self.rows(hashes, nulls)
    }
}

/// Walks every run of `rows` in a blocking task of its own, each with a
/// visitor from `visitor`, its buffers reserved in `pool`. Returns the
/// visitors in run order, and how many dictionary pages were skipped as
/// repeats of a kept one.
pub(super) async fn walk<V: Rows + Send + 'static>(
    rows: &RowPages,
    label: &str,
    pool: &Arc<dyn MemoryPool>,
    visitor: impl Fn() -> V,
) -> Result<(Vec<V>, u64), Error> {
    let state = || Walker {
        reader: Reader::default(),
        hashes: Vec::new(),
        nulls: Vec::new(),
        reserved: MemoryConsumer::new("dqgate key pages").register(pool),
    };
    let done = walks::walk_runs(rows, label, (state, visitor), group::<V>).await?;
    let reused = done.iter().map(|(w, _)| w.reader.reused).sum();
    Ok((done.into_iter().map(|(_, v)| v).collect(), reused))
}

/// A run's buffers.
struct Walker {
    reader: Reader,
    hashes: Vec<u64>,
    nulls: Vec<bool>,
    reserved: MemoryReservation,
}

/// Row group `group` of `file` to `v`: page by page where it can, else
/// through the Arrow reader. Returns its rows.
fn group<V: Rows>(
    w: &mut Walker,
    file: &FileColumns,
    group: usize,
    v: &mut V,
) -> Result<u64, Error> {
    let path = &file.arrow.path;
    let failed =
        |e: &dyn std::fmt::Display| Error::Audit(format!("reading {}: {e}", path.display()));
    let rows = file
        .arrow
        .metadata
        .metadata()
        .row_group(group)
        .num_rows()
        .max(0) as u64;
    let walked =
        !v.decoded() && rows <= MAX_ROWS && w.reserved.try_resize(rows as usize * 9).is_ok();
    if walked && w.pages(file, group)? {
        v.rows(&w.hashes, &w.nulls);
        return Ok(rows);
    }
    w.reserved.free();
    let mut hashes = Vec::new();
    for batch in file.arrow.group_batches(group, 0).map_err(|e| failed(&e))? {
        let batch = batch.map_err(|e| failed(&e))?;
        let columns = batch.columns();
        encode::fingerprints(columns, None, &mut hashes).map_err(|e| failed(&e))?;
        let nulls: Vec<bool> = match encode::counted_rows(columns, false) {
            None => vec![false; batch.num_rows()],
            Some(valid) => (0..batch.num_rows()).map(|i| valid.is_null(i)).collect(),
        };
        v.columns(columns, &hashes, &nulls);
    }
    Ok(rows)
}

impl Walker {
    /// Every part's chunk of row group `group` of `file`, folded into
    /// `hashes` and `nulls`; false when a page surprised the reader.
    fn pages(&mut self, file: &FileColumns, group: usize) -> Result<bool, Error> {
        let path = &file.arrow.path;
        let rg = file.arrow.metadata.metadata().row_group(group);
        let rows = rg.num_rows().max(0) as usize;
        self.hashes.clear();
        self.hashes.resize(rows, 0);
        self.nulls.clear();
        self.nulls.resize(rows, false);
        let state = RandomState::with_seed(encode::SEED);
        for (p, &(leaf, kind)) in file.parts.iter().enumerate() {
            self.reader.set(kind, p == 0);
            let mut fold = Fold {
                hashes: &mut self.hashes,
                nulls: &mut self.nulls,
                at: 0,
                first: p == 0,
                kind,
                state: &state,
            };
            let chunk = rg.column(leaf);
            let done = self.reader.chunk(path, chunk, rows as u64, &mut fold)?;
            if done < rows as u64 {
                return Ok(false);
            }
            if fold.at != rows {
                return Err(Error::Audit(format!(
                    "reading {}: the column chunk of `{}` holds {} values where its row group has {rows} rows",
                    path.display(),
                    chunk.column_descr().name(),
                    fold.at
                )));
            }
        }
        Ok(true)
    }
}

/// Folds a part's values into each row's fingerprint.
struct Fold<'a> {
    hashes: &'a mut [u64],
    nulls: &'a mut [bool],
    at: usize,
    first: bool,
    kind: Kind,
    state: &'a RandomState,
}

impl Visit for Fold<'_> {
    #[inline]
    fn value(&mut self, fingerprint: u64, value: &[u8]) {
        if let Some(h) = self.hashes.get_mut(self.at) {
            *h = match self.first {
                true => fingerprint,
                false => encode::then(self.kind, self.state, *h, value),
            };
        }
        self.at += 1;
    }

    /// A null part leaves the fingerprint as it was (0 for a first part),
    /// as DataFusion's hash does.
    fn nulls(&mut self, n: u64) {
        let end = (self.at + n as usize).min(self.nulls.len());
        if self.at < end {
            self.nulls[self.at..end].fill(true);
        }
        self.at += n as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::DictionaryArray;
    use datafusion::arrow::array::{
        Array, ArrayRef, Date32Array, Int32Array, Int64Array, RecordBatch, StringArray,
        StringViewArray,
    };
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::Int32Type;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::execution::memory_pool::{GreedyMemoryPool, UnboundedMemoryPool};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::basic::{Compression, Encoding};
    use datafusion::parquet::file::properties::{WriterProperties, WriterVersion};
    use datafusion::parquet::schema::types::ColumnPath;

    /// The folded fingerprint of several parts is DataFusion's of their
    /// columns, nulls included.
    #[test]
    fn fingerprints_are_datafusions_of_the_columns() {
        let text = [
            "",
            "a",
            "twelve bytes",
            "thirteen byte",
            "ünïcödé ✓ and more",
            "x",
        ];
        let ints = [Some(0), Some(-1), None, Some(i32::MAX), Some(7), None];
        let longs = [None, Some(1i64 << 40), Some(-5), Some(0), None, Some(3)];
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringViewArray::from(text.to_vec())),
            Arc::new(Int32Array::from(ints.to_vec())),
            Arc::new(Int64Array::from(longs.to_vec())),
            Arc::new(StringViewArray::from(
                text.iter().rev().copied().collect::<Vec<_>>(),
            )),
        ];
        let mut want = Vec::new();
        encode::fingerprints(&columns, None, &mut want).unwrap();
        let state = RandomState::with_seed(encode::SEED);
        for (i, w) in want.iter().enumerate() {
            let mut h = encode::first(Kind::Text, &state, text[i].as_bytes());
            if let Some(x) = ints[i] {
                h = encode::then(Kind::I32, &state, h, &x.to_le_bytes());
            }
            if let Some(x) = longs[i] {
                h = encode::then(Kind::I64, &state, h, &x.to_le_bytes());
            }
            h = encode::then(Kind::Text, &state, h, text[text.len() - 1 - i].as_bytes());
            assert_eq!(h, *w, "row {i}");
        }
        // A first part that is null leaves 0 to fold into.
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![None, Some(3)])),
            Arc::new(StringViewArray::from(vec!["k", "k"])),
        ];
        encode::fingerprints(&columns, None, &mut want).unwrap();
        assert_eq!(want[0], encode::then(Kind::Text, &state, 0, b"k"));
        let h = encode::first(Kind::I32, &state, &3i32.to_le_bytes());
        assert_eq!(want[1], encode::then(Kind::Text, &state, h, b"k"));
    }

    /// Text in an Arrow dictionary hashes as `str`, and folds with
    /// `combine_hashes`, as a first part and as a later one.
    #[test]
    fn dictionary_parts_are_hashed_as_datafusion_hashes_them() {
        let text = [
            Some("a"),
            None,
            Some(""),
            Some("a value longer than twelve"),
            Some("a"),
        ];
        let ints = [Some(1), Some(2), None, Some(4), Some(1)];
        let dict: ArrayRef = Arc::new(text.iter().copied().collect::<DictionaryArray<Int32Type>>());
        let int: ArrayRef = Arc::new(Int32Array::from(ints.to_vec()));
        let state = RandomState::with_seed(encode::SEED);
        let mut want = Vec::new();
        encode::fingerprints(&[dict.clone(), int.clone()], None, &mut want).unwrap();
        for (i, w) in want.iter().enumerate() {
            let mut h = text[i].map_or(0, |t| encode::first(Kind::Str, &state, t.as_bytes()));
            if let Some(x) = ints[i] {
                h = encode::then(Kind::I32, &state, h, &x.to_le_bytes());
            }
            assert_eq!(h, *w, "dictionary first, row {i}");
        }
        encode::fingerprints(&[int, dict], None, &mut want).unwrap();
        for (i, w) in want.iter().enumerate() {
            let mut h = ints[i].map_or(0, |x| encode::first(Kind::I32, &state, &x.to_le_bytes()));
            if let Some(t) = text[i] {
                h = encode::then(Kind::Str, &state, h, t.as_bytes());
            }
            assert_eq!(h, *w, "dictionary second, row {i}");
        }
    }

    /// What a walk gave: each row's fingerprint and null flag.
    #[derive(Default)]
    struct Seen {
        hashes: Vec<u64>,
        nulls: Vec<bool>,
    }

    impl Rows for Seen {
        fn rows(&mut self, hashes: &[u64], nulls: &[bool]) {
            self.hashes.extend_from_slice(hashes);
            self.nulls.extend_from_slice(nulls);
        }
    }

    fn batch(n: usize) -> RecordBatch {
        let text: StringArray = (0..n)
            .map(|i| match i % 13 {
                0 => None,
                1 => Some(String::new()),
                2 => Some(format!("ünï-{}", i % 37)),
                3 => Some(format!("a longer value than twelve bytes {}", i % 53)),
                _ => Some(format!("k{}", (i * 7919) % 997)),
            })
            .collect();
        let ints: Int32Array = (0..n)
            .map(|i| (i % 5 != 0).then_some((i % 301) as i32 - 150))
            .collect();
        let longs: Int64Array = (0..n).map(|i| Some((i as i64 * 104729) << 20)).collect();
        let days: Date32Array = (0..n)
            .map(|i| (i % 9 != 0).then_some(i as i32 % 400))
            .collect();
        let codes: Vec<Option<String>> = (0..n)
            .map(|i| (i % 7 != 0).then(|| format!("code-{}", (i * 31) % 211)))
            .collect();
        let codes: DictionaryArray<Int32Type> = codes.iter().map(Option::as_deref).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new("t", DataType::Utf8, true),
            Field::new("i", DataType::Int32, true),
            Field::new("l", DataType::Int64, false),
            Field::new("d", DataType::Date32, true),
            Field::new("c", codes.data_type().clone(), true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(text),
            Arc::new(ints),
            Arc::new(longs),
            Arc::new(days),
            Arc::new(codes),
        ];
        RecordBatch::try_new(schema, columns).unwrap()
    }

    /// `batch` written as `props` says, walked with data pages of
    /// `surprise` left to the Arrow reader and buffers reserved in `pool`.
    fn walked(
        batch: &RecordBatch,
        props: WriterProperties,
        surprise: Option<Encoding>,
        pool: Arc<dyn MemoryPool>,
    ) -> Seen {
        let tmp = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(tmp.path().join("part-0.parquet")).unwrap();
        let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
        let input = StagedInput::open(tmp.path()).unwrap();
        let keys: Vec<String> = ["t", "i", "l", "d", "c"].map(String::from).to_vec();
        let Some(Paged::Rows(rows)) = paged(&input, &keys, 2) else {
            panic!("not walked page by page");
        };
        let mut seen = Seen::default();
        for run in &rows.runs {
            let mut reader = Reader::default();
            reader.surprise = surprise;
            let mut w = Walker {
                reader,
                hashes: Vec::new(),
                nulls: Vec::new(),
                reserved: MemoryConsumer::new("test").register(&pool),
            };
            for &(f, g) in run {
                group(&mut w, &rows.files[f], g, &mut seen).unwrap();
            }
        }
        seen
    }

    /// Every row's fingerprint and null flag as the Arrow reader and
    /// DataFusion's hash give them: through v1 and v2 pages, dictionaries
    /// that give way to plain pages, a delta encoding (the Arrow reader's),
    /// a page that surprises the walker, and a pool that refuses the
    /// buffers.
    #[test]
    fn rows_are_what_the_arrow_reader_gives() {
        let batch = batch(5000);
        let views: Vec<ArrayRef> = (batch.columns().iter())
            .map(|c| cast(c, &walks::read_as(c.data_type())).unwrap())
            .collect();
        let mut want = Vec::new();
        encode::fingerprints(&views, None, &mut want).unwrap();
        let valid = encode::counted_rows(&views, false).unwrap();
        let want_nulls: Vec<bool> = (0..batch.num_rows()).map(|i| valid.is_null(i)).collect();
        let unbounded: Arc<dyn MemoryPool> = Arc::new(UnboundedMemoryPool::default());
        let refusing: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1000));
        let (v1, v2) = (WriterVersion::PARQUET_1_0, WriterVersion::PARQUET_2_0);
        let cases = [
            (v1, true, None, None, &unbounded),
            (v2, true, None, None, &unbounded),
            (v1, false, None, None, &unbounded),
            (v1, true, None, Some(Encoding::PLAIN), &unbounded),
            (v2, true, None, Some(Encoding::RLE_DICTIONARY), &unbounded),
            (
                v2,
                false,
                Some(Encoding::DELTA_BINARY_PACKED),
                None,
                &unbounded,
            ),
            (v1, true, None, None, &refusing),
        ];
        for (version, dictionary, delta, surprise, pool) in cases {
            let mut props = WriterProperties::builder()
                .set_writer_version(version)
                .set_dictionary_enabled(dictionary)
                .set_dictionary_page_size_limit(400)
                .set_data_page_row_count_limit(97)
                .set_write_batch_size(31)
                .set_max_row_group_row_count(Some(1700))
                .set_compression(Compression::SNAPPY);
            if let Some(e) = delta {
                props = props.set_column_encoding(ColumnPath::from("i"), e);
            }
            let case = format!("{version:?} dictionary {dictionary} {delta:?} {surprise:?}");
            let seen = walked(&batch, props.build(), surprise, pool.clone());
            assert!(seen.hashes == want, "{case}");
            assert!(seen.nulls == want_nulls, "{case}");
        }
    }
}
