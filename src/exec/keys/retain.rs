//! The decoded key columns a fingerprint scan keeps for its verification
//! pass, so that the pass does not read and decode the Parquet again.
//!
//! A single text key is kept compactly ([`super::compact`]): its bytes and
//! 3 more a row. Any other key keeps its batches: they arrive as views into
//! the decompressed pages and their fingerprints are computed anyway, so
//! keeping them is a few `Arc`s and a copy of 8 bytes a row. The
//! verification then finds the candidates' rows among the kept ones
//! (`verify::Source::Kept`), instead of reading, decompressing and decoding
//! every key again.
//!
//! Keeping is not free: what is kept is fresh memory, and the first touch
//! of each page costs the kernel a fault and a clear (on a virtual machine,
//! the host's backing of the page too). Measured on local files (the page
//! cache), that costs as much as reading the columns again, at several
//! times the memory: 10M 22-character keys kept as batches, 0.64 s and 770
//! MB against 0.58 s and 250 MB read again; 50M kept compactly (1.2 GB),
//! the scan 1.8 to 2.0 s and the verification 0.26 s, against 1.0 to 1.1 s
//! and 1.1 s read again (`benches/README.md`). So local files are kept only
//! while small ([`LOCAL_BYTES`]: a second read's fixed costs then matter),
//! while files on an object store, where a second read is a second
//! download, are kept up to the budget.
//!
//! What is kept is bounded: by half of `--memory-limit` (and DataFusion's
//! memory pool), or by an eighth of the machine's memory. When the footers
//! say the columns will not fit, nothing is kept at all; otherwise the
//! first batch that does not fit makes every task drop what it kept. Either
//! way the verification then reads the key columns again.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayData, ArrayRef};
use datafusion::arrow::datatypes::DataType;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use datafusion::parquet::file::metadata::ColumnChunkMetaData;
use datafusion::prelude::SessionContext;

use super::compact::{TextRows, ROW_BYTES};
use super::tasks::Sidecar;
use crate::plan::keys::KeyJob;
use crate::staged::{Location, StagedInput};

/// The most that is kept of local files: below it, a second read's fixed
/// costs (planning, opening the files) are worth saving; above it, reading
/// again costs no more time than keeping, and much less memory.
pub(super) const LOCAL_BYTES: usize = 64 << 20;

/// The bytes every scan task together may keep.
pub(super) struct Budget {
    left: Arc<AtomicI64>,
    refused: Arc<AtomicBool>,
    pool: Arc<dyn MemoryPool>,
    /// A single text key, kept compactly ([`TextRows`]).
    text: bool,
    nulls_equal: bool,
}

impl Budget {
    /// The budget for keeping `columns` of `input`. When the footers
    /// already say they will not fit (see [`expected_bytes`]), nothing is
    /// kept from the start, so the scan never pays for keeping and
    /// dropping.
    pub fn new(ctx: &SessionContext, input: &StagedInput, job: &KeyJob) -> Budget {
        let pool = ctx.runtime_env().memory_pool.clone();
        let mut bytes = match pool.memory_limit() {
            MemoryLimit::Finite(limit) => limit / 2,
            _ => physical_memory() / 8,
        };
        let text = match job.keys.as_slice() {
            [k] => input.schema.field_with_name(k).is_ok_and(|f| {
                matches!(
                    f.data_type(),
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                )
            }),
            _ => false,
        };
        if let Location::Local(_) = input.location {
            bytes = bytes.min(crate::hooks::keep_bytes().unwrap_or(LOCAL_BYTES));
        }
        let expected = match text {
            true => text_bytes(input, &job.keys),
            false => expected_bytes(input, &job.keys),
        };
        Budget {
            left: Arc::new(AtomicI64::new(i64::try_from(bytes).unwrap_or(i64::MAX))),
            refused: Arc::new(AtomicBool::new(expected > bytes)),
            pool,
            text,
            nulls_equal: job.nulls_equal,
        }
    }

    /// A scan task's share.
    pub fn retainer(&self) -> Retainer {
        Retainer {
            batches: Vec::new(),
            bytes: 0,
            seen: HashSet::new(),
            left: self.left.clone(),
            refused: self.refused.clone(),
            reservation: MemoryConsumer::new("dqgate kept key columns").register(&self.pool),
            text: self.text.then(TextRows::default),
            nulls_equal: self.nulls_equal,
        }
    }

    /// Whether the footers already said the columns will not fit: the
    /// scan keeps nothing.
    pub fn keeps_nothing(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// What the tasks kept, unless one of them ran out of budget.
    pub fn kept(&self, kept: Vec<Retainer>) -> Option<Vec<Retainer>> {
        (!self.refused.load(Ordering::Relaxed)).then_some(kept)
    }
}

/// One scan task's kept batches: the key columns and their fingerprints,
/// or a single text key's rows compactly.
pub(super) struct Retainer {
    pub batches: Vec<(Vec<ArrayRef>, Vec<u64>)>,
    pub text: Option<TextRows>,
    nulls_equal: bool,
    /// The bytes they hold (buffers shared by several batches once).
    pub bytes: usize,
    seen: HashSet<usize>,
    left: Arc<AtomicI64>,
    refused: Arc<AtomicBool>,
    reservation: MemoryReservation,
}

impl Retainer {
    fn give_up(&mut self) {
        self.refused.store(true, Ordering::Relaxed);
        self.batches = Vec::new();
        self.text = self.text.as_ref().map(|_| TextRows::default());
        self.seen = HashSet::new();
        self.bytes = 0;
        self.reservation.free();
    }

    /// What keeping a batch as it is takes: its fingerprints and the
    /// buffers not yet counted.
    fn array_bytes(&mut self, columns: &[ArrayRef], words: &[u64]) -> usize {
        words.len() * 8
            + columns
                .iter()
                .map(|c| self.new_bytes(&c.to_data()))
                .sum::<usize>()
    }

    /// The bytes of `data`'s buffers not yet counted (a page's buffer
    /// backs several batches).
    fn new_bytes(&mut self, data: &ArrayData) -> usize {
        let mut n = 0;
        for b in data.buffers() {
            if self.seen.insert(b.data_ptr().as_ptr() as usize) {
                n += b.capacity();
            }
        }
        if let Some(nulls) = data.nulls() {
            let b = nulls.buffer();
            if self.seen.insert(b.data_ptr().as_ptr() as usize) {
                n += b.capacity();
            }
        }
        n + data
            .child_data()
            .iter()
            .map(|c| self.new_bytes(c))
            .sum::<usize>()
    }
}

impl Sidecar<u64> for Retainer {
    fn keep(&mut self, columns: &[ArrayRef], words: &[u64]) {
        if self.refused.load(Ordering::Relaxed) {
            if self.bytes > 0 {
                self.give_up();
            }
            return;
        }
        let size = match &mut self.text {
            Some(text) => match text.append(&columns[0], words, self.nulls_equal) {
                Some(size) => size,
                None => return self.give_up(),
            },
            None => self.array_bytes(columns, words),
        };
        let wanted = size as i64;
        if self.left.fetch_sub(wanted, Ordering::Relaxed) < wanted
            || self.reservation.try_grow(size).is_err()
        {
            self.give_up();
            return;
        }
        self.bytes += size;
        if self.text.is_none() {
            self.batches.push((columns.to_vec(), words.to_vec()));
        }
    }
}

/// What keeping `columns` of `input` would take, from the footers: each
/// column chunk's uncompressed pages (what the views point into), and 24
/// bytes a row (a 16-byte view and an 8-byte fingerprint).
pub(super) fn expected_bytes(input: &StagedInput, columns: &[String]) -> usize {
    let mut bytes = 0usize;
    for f in &input.files {
        let schema = f.metadata.file_metadata().schema_descr();
        let leaves: Vec<usize> = (0..schema.num_columns())
            .filter(|i| {
                let path = schema.column(*i).path().parts().to_vec();
                path.len() == 1 && columns.contains(&path[0])
            })
            .collect();
        for rg in f.metadata.row_groups() {
            let rows = usize::try_from(rg.num_rows()).unwrap_or(0);
            bytes = bytes.saturating_add(rows.saturating_mul(24));
            for i in &leaves {
                let size = usize::try_from(rg.column(*i).uncompressed_size()).unwrap_or(0);
                bytes = bytes.saturating_add(size);
            }
        }
    }
    bytes
}

/// What keeping a single text key compactly would take: the column
/// chunks' uncompressed pages (each plain value is its bytes and a 4-byte
/// length), and [`ROW_BYTES`] a row.
fn text_bytes(input: &StagedInput, columns: &[String]) -> usize {
    let rows = usize::try_from(input.row_count()).unwrap_or(usize::MAX);
    let pages = columns
        .iter()
        .map(|c| usize::try_from(column_bytes(input, c).unwrap_or(0)).unwrap_or(0))
        .sum::<usize>();
    rows.saturating_mul(ROW_BYTES).saturating_add(pages)
}

/// Expected bytes of one key of `columns` (and 8 a part), from the
/// footers' uncompressed sizes (16 a part when the footers lack them).
pub(crate) fn key_bytes(input: &StagedInput, columns: &[String]) -> u64 {
    let rows = input.row_count().max(1);
    columns
        .iter()
        .map(|k| column_bytes(input, k).unwrap_or(16 * rows) / rows + 8)
        .sum()
}

/// The uncompressed bytes of `column`'s values, from the footers (see
/// [`chunk_bytes`]), if any file has it.
fn column_bytes(input: &StagedInput, column: &str) -> Option<u64> {
    let mut total = None;
    for f in &input.files {
        // Opened for the first chunk with a dictionary page.
        let mut file = None;
        let chunks = (f.metadata.row_groups().iter())
            .flat_map(|g| g.columns())
            .filter(|c| c.column_path().parts().first().map(String::as_str) == Some(column));
        for c in chunks {
            let open = || match &input.location {
                Location::Local(dir) => std::fs::File::open(dir.join(&f.path)).ok(),
                Location::Remote(_) => None,
            };
            let bytes = chunk_bytes(c, || file.get_or_insert_with(open).as_ref());
            *total.get_or_insert(0u64) += bytes;
        }
    }
    total
}

/// The uncompressed bytes of chunk `c`'s values. A dictionary page counts
/// at its values' mean length a row (or the data pages' bytes, if more),
/// from its header in `file` (local files only), not whole: an Arrow
/// dictionary is written whole into every row group (2.5M ids make a 60
/// MB page in each), and counted whole it made 1M dictionary-typed keys
/// look like 281 MB where they take 100 MB, so the memory pool refused the
/// join the key engine runs, under limits the engine keeps to. (A small
/// dictionary of long values counted too little the other way.)
fn chunk_bytes<'a>(
    c: &ColumnChunkMetaData,
    file: impl FnOnce() -> Option<&'a std::fs::File>,
) -> u64 {
    let all = c.uncompressed_size().max(0) as u64;
    let Some(span) = crate::staged::stats::dictionary_page(c) else {
        return all;
    };
    match file().and_then(|f| super::kept::dictionary_size(f, span)) {
        Some((dict, n)) if n > 0 && dict <= all => {
            let rows = c.num_values().max(0) as u64;
            // The data pages' bytes, or, if more, every row at the mean
            // (a chunk whose dictionary filled up goes on in plain pages).
            let at_mean = u128::from(rows) * u128::from(dict) / u128::from(n);
            let at_mean = u64::try_from(at_mean).unwrap_or(u64::MAX);
            (all - dict).max(at_mean)
        }
        _ => all,
    }
}

/// The machine's physical memory in bytes (4 GiB when it cannot be read).
fn physical_memory() -> usize {
    // SAFETY: sysconf reads a system setting and has no other effect.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (usize::try_from(pages), usize::try_from(size)) {
        (Ok(p), Ok(s)) if p > 0 && s > 0 => p.saturating_mul(s),
        _ => 4 << 30,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_footers_give_the_bytes_keeping_would_take() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/data/sales_ok");
        let input = StagedInput::open(&dir).unwrap();
        let rows = input.row_count() as usize;
        let views = rows * 24;
        let sku = expected_bytes(&input, &["sku".into()]);
        let both = expected_bytes(&input, &["sku".into(), "currency".into()]);
        assert!(sku > views, "the column chunks count: {sku} vs {views}");
        assert!(both > sku, "each key column counts");
        assert_eq!(expected_bytes(&input, &["no_such_column".into()]), views);
    }

    /// A dictionary-encoded chunk counts its rows at the dictionary's mean
    /// value, not the dictionary page once a group plus the indices: 40k
    /// rows of 100 distinct 30-byte values are some 1.36 MB of values where
    /// the chunk holds about 40 KB. Without a dictionary page, the chunk's
    /// bytes are what counts.
    #[test]
    fn a_dictionary_counts_at_its_mean_value_a_row() {
        use datafusion::arrow::array::{RecordBatch, StringArray};
        use datafusion::parquet::arrow::ArrowWriter;
        use datafusion::parquet::file::properties::WriterProperties;
        let rows = 40_000usize;
        let values: Vec<String> = (0..rows).map(|i| format!("{:030}", i % 100)).collect();
        let column = Arc::new(StringArray::from(values)) as ArrayRef;
        let batch = RecordBatch::try_from_iter([("k", column)]).unwrap();
        for dictionary in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let props = WriterProperties::builder()
                .set_dictionary_enabled(dictionary)
                .set_max_row_group_row_count(Some(10_000))
                .build();
            let file = std::fs::File::create(dir.path().join("part-0.parquet")).unwrap();
            let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
            w.write(&batch).unwrap();
            w.close().unwrap();
            let input = StagedInput::open(dir.path()).unwrap();
            let chunks: u64 = (input.files[0].metadata.row_groups().iter())
                .map(|g| g.column(0).uncompressed_size() as u64)
                .sum();
            let got = column_bytes(&input, "k").unwrap();
            match dictionary {
                true => {
                    assert!(chunks < 100_000, "{chunks}");
                    assert_eq!(got, rows as u64 * 34, "{chunks}");
                }
                false => assert_eq!(got, chunks),
            }
        }
    }
}
