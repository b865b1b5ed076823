//! The published side of `unique(k) across published`, read only where it
//! can hold a staged key.
//!
//! The staged key columns are read once into their sorted distinct values,
//! one list a key column, in the type the column is compared in. A
//! published row group is read only if, for every key column, some staged
//! value lies within the row group's footer range `[min, max]`; in a file
//! with a page index the same test picks the pages within each row group
//! that is read. Keys that rise with time (increasing ids, time-prefixed
//! ids, timestamps, `(date, seq)`) then cost the row groups and pages
//! around the staged keys, whatever the table's size. Scattered keys, which
//! every range admits, are read whole: by this module's own reader, the key
//! columns only, with no DataFusion table a file.
//!
//! Pruning never drops a row that could hold a staged key: a range that is
//! missing (no statistics) or cannot be compared admits everything, and a
//! row group or page whose key column is all null holds no key (rows with
//! a null key part are left out of the join on both sides).

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::row::{OwnedRow, Row, RowConverter, Rows, SortField};
use datafusion::dataframe::DataFrame;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{cast as cast_expr, Expr};
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::file::metadata::PageIndexPolicy;
use datafusion::parquet::file::metadata::RowGroupMetaData;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::{ident, lit, SessionContext};
use futures::{StreamExt, TryStreamExt};

use super::ExecError as Error;
use crate::plan::join::{other_key, PARTITION};
use crate::staged::remote::Location;
use crate::staged::{StagedFile, StagedInput};

/// A published partition other than the one being replaced, opened.
#[derive(Debug, Clone)]
pub struct PublishedPart {
    /// `k=v[/k=v]`.
    pub rel: String,
    pub input: StagedInput,
}

/// Staged values kept for pruning, in bytes of the row format a key
/// column: beyond it, only the column's range is kept.
const VALUES_BYTES: usize = 256 << 20;

/// The last column of [`Pruned::streams`]' batches: the part's index.
pub const PART: &str = "__dqgate_part";

/// Rows a batch of the published reader.
const BATCH: usize = 8192;

/// What the staged keys admit of one key column.
enum Admit {
    /// The sorted distinct codes of an integer-like column (see
    /// [`int_codes`]), or (too many to keep) only their range.
    Ints(Vec<u64>, Option<(u64, u64)>),
    /// The sorted distinct non-null staged values.
    Values(Rows),
    /// Only the range of the staged values (too many to keep).
    Range(OwnedRow, OwnedRow),
    /// No staged value: no staged key, nothing is admitted.
    Nothing,
}

/// One key column's staged values and the converter they were made with.
struct Column {
    converter: RowConverter,
    admit: Admit,
}

impl Column {
    /// For each entry of the footer ranges `mins`/`maxes` (of `rows` rows,
    /// `nulls` of them null): whether it can hold a staged value. A range
    /// of only nulls holds no key; a range that is missing or cannot be
    /// compared is read.
    fn admits_ranges(
        &self,
        ty: &DataType,
        mins: &ArrayRef,
        maxes: &ArrayRef,
        nulls: &dyn Fn(usize) -> Option<u64>,
        rows: &dyn Fn(usize) -> u64,
    ) -> Vec<bool> {
        let within: Box<dyn Fn(usize) -> bool + '_> = match &self.admit {
            Admit::Nothing => Box::new(|_| false),
            Admit::Ints(codes, range) => {
                let bounds = (|| {
                    let lo = int_codes(&cast(mins, ty).ok()?)?;
                    let hi = int_codes(&cast(maxes, ty).ok()?)?;
                    Some((lo, hi))
                })();
                let Some((lo, hi)) = bounds else {
                    return vec![true; mins.len()];
                };
                Box::new(move |i| match (lo[i], hi[i], range) {
                    (Some(lo), Some(hi), Some((a, b))) => lo <= *b && hi >= *a,
                    (Some(lo), Some(hi), None) => {
                        let at = codes.partition_point(|c| *c < lo);
                        at < codes.len() && codes[at] <= hi
                    }
                    _ => true,
                })
            }
            Admit::Values(_) | Admit::Range(..) => {
                let bounds = (|| {
                    let mins = cast(mins, ty).ok()?;
                    let maxes = cast(maxes, ty).ok()?;
                    let convert =
                        |a: &ArrayRef| self.converter.convert_columns(std::slice::from_ref(a)).ok();
                    let (lo, hi) = (convert(&mins)?, convert(&maxes)?);
                    Some((mins, maxes, lo, hi))
                })();
                let Some((mins, maxes, lo, hi)) = bounds else {
                    return vec![true; mins.len()];
                };
                Box::new(move |i| {
                    mins.is_null(i) || maxes.is_null(i) || self.admits(lo.row(i), hi.row(i))
                })
            }
        };
        (0..mins.len())
            .map(|i| nulls(i).is_none_or(|k| k < rows(i)) && within(i))
            .collect()
    }

    /// Whether some staged value (kept as rows) lies within `[min, max]`.
    fn admits(&self, min: Row<'_>, max: Row<'_>) -> bool {
        match &self.admit {
            Admit::Range(lo, hi) => min <= hi.row() && max >= lo.row(),
            Admit::Values(rows) => {
                let (mut lo, mut hi) = (0, rows.num_rows());
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if rows.row(mid) < min {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                lo < rows.num_rows() && rows.row(lo) <= max
            }
            Admit::Ints(..) | Admit::Nothing => unreachable!("answered by admits_ranges"),
        }
    }
}

/// The staged key columns' values, for pruning.
pub struct StagedValues {
    columns: Vec<Column>,
}

impl StagedValues {
    /// Reads the staged key columns (cast to `types`) once.
    pub async fn read(
        ctx: &SessionContext,
        staged: &StagedInput,
        keys: &[String],
        types: &[DataType],
    ) -> Result<StagedValues, Error> {
        let exprs: Vec<Expr> = keys
            .iter()
            .zip(types)
            .map(|(k, t)| cast_expr(ident(k), t.clone()).alias(k))
            .collect();
        let frame = super::table(ctx, staged)?
            .select(exprs)
            .map_err(|e| Error::engine("planning the staged keys", e))?;
        let mut stream = frame
            .execute_stream()
            .await
            .map_err(|e| Error::engine("reading the staged keys", e))?;
        let mut columns = Vec::new();
        for t in types {
            let converter = RowConverter::new(vec![SortField::new(t.clone())])
                .map_err(|e| Error::Audit(format!("comparing keys of type {t}: {e}")))?;
            let values = if is_int(t) {
                Values::Ints(IntValues::default())
            } else {
                Values::Rows {
                    kept: Some(converter.empty_rows(0, 0)),
                    range: None,
                }
            };
            columns.push((converter, values));
        }
        while let Some(batch) = stream.next().await {
            let batch = batch.map_err(|e| Error::engine("reading the staged keys", e))?;
            for ((converter, values), array) in columns.iter_mut().zip(batch.columns()) {
                let (kept, range) = match values {
                    Values::Ints(acc) => {
                        acc.push(int_codes(array));
                        continue;
                    }
                    Values::Rows { kept, range } => (kept, range),
                };
                let rows = converter
                    .convert_columns(std::slice::from_ref(array))
                    .map_err(|e| Error::Audit(format!("comparing staged keys: {e}")))?;
                for r in (0..array.len()).filter(|r| array.is_valid(*r)) {
                    let row = rows.row(r);
                    match range {
                        None => *range = Some((row.owned(), row.owned())),
                        Some((lo, hi)) => {
                            if row < lo.row() {
                                *lo = row.owned();
                            }
                            if row > hi.row() {
                                *hi = row.owned();
                            }
                        }
                    }
                    if let Some(k) = kept {
                        k.push(row);
                    }
                }
                if kept.as_ref().is_some_and(|k| k.size() > VALUES_BYTES) {
                    *kept = None;
                }
            }
        }
        let columns = columns
            .into_iter()
            .map(|(converter, values)| {
                let admit = match values {
                    Values::Ints(acc) => acc.admit(),
                    Values::Rows { range: None, .. } => Admit::Nothing,
                    Values::Rows {
                        kept: None,
                        range: Some((lo, hi)),
                    } => Admit::Range(lo, hi),
                    Values::Rows {
                        kept: Some(rows), ..
                    } => Admit::Values(sorted_distinct(&converter, &rows)),
                };
                Column { converter, admit }
            })
            .collect();
        Ok(StagedValues { columns })
    }
}

/// One key column's staged values while they are read.
enum Values {
    Ints(IntValues),
    /// In the row format: all of them while they fit [`VALUES_BYTES`], and
    /// their range.
    Rows {
        kept: Option<Rows>,
        range: Option<(OwnedRow, OwnedRow)>,
    },
}

/// An integer-like column's staged codes: all of them while they fit
/// [`VALUES_BYTES`], then only their range.
#[derive(Default)]
struct IntValues {
    codes: Vec<u64>,
    range: Option<(u64, u64)>,
    /// Too many codes: only `range` is kept.
    ranged: bool,
    /// A batch that could not be coded: everything is admitted.
    unknown: bool,
}

impl IntValues {
    fn push(&mut self, codes: Option<Vec<Option<u64>>>) {
        let Some(codes) = codes else {
            self.unknown = true;
            return;
        };
        for c in codes.into_iter().flatten() {
            self.range = Some(match self.range {
                None => (c, c),
                Some((lo, hi)) => (lo.min(c), hi.max(c)),
            });
            if !self.ranged {
                self.codes.push(c);
            }
        }
        if self.codes.len() > VALUES_BYTES / 8 {
            self.ranged = true;
            self.codes = Vec::new();
        }
    }

    fn admit(mut self) -> Admit {
        match self.range {
            _ if self.unknown => Admit::Ints(Vec::new(), Some((0, u64::MAX))),
            None => Admit::Nothing,
            Some(r) if self.ranged => Admit::Ints(Vec::new(), Some(r)),
            Some(_) => {
                self.codes.sort_unstable();
                self.codes.dedup();
                Admit::Ints(self.codes, None)
            }
        }
    }
}

/// Whether `t` is integer-like: its values order as their [`int_codes`].
fn is_int(t: &DataType) -> bool {
    t.is_integer()
        || matches!(
            t,
            DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _)
        )
}

/// Order-preserving codes of an integer-like array: signed values (dates
/// and timestamps as their integers) with the sign bit flipped, unsigned
/// values as they are; `None` for a null. `None` for other types.
fn int_codes(array: &ArrayRef) -> Option<Vec<Option<u64>>> {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Int64Type, UInt64Type};
    if !is_int(array.data_type()) {
        return None;
    }
    if array.data_type().is_unsigned_integer() {
        let a = cast(array, &DataType::UInt64).ok()?;
        return Some(a.as_primitive::<UInt64Type>().iter().collect());
    }
    let a = cast(array, &DataType::Int64).ok()?;
    Some(
        a.as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(|v| (v as u64) ^ (1 << 63)))
            .collect(),
    )
}

/// `rows` sorted, each value once. Rows sort by their first 16 bytes as
/// one integer (zero-padded: the row format is order-preserving bytes, so a
/// shorter row that is a prefix of a longer one still sorts first), and by
/// their whole bytes only where those are equal: a plain comparison sort
/// of 1M rows spent most of its time in `memcmp`.
fn sorted_distinct(converter: &RowConverter, rows: &Rows) -> Rows {
    let prefix = |i: usize| {
        let bytes = rows.row(i);
        let bytes = bytes.as_ref();
        let mut p = [0u8; 16];
        let n = bytes.len().min(16);
        p[..n].copy_from_slice(&bytes[..n]);
        u128::from_be_bytes(p)
    };
    let mut order: Vec<(u128, u32)> = (0..rows.num_rows())
        .map(|i| (prefix(i), i as u32))
        .collect();
    let whole = |a: u32, b: u32| rows.row(a as usize).cmp(&rows.row(b as usize));
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| whole(a.1, b.1)));
    order.dedup_by(|a, b| a.0 == b.0 && whole(a.1, b.1).is_eq());
    let mut out = converter.empty_rows(order.len(), 0);
    for (_, i) in order {
        out.push(rows.row(i as usize));
    }
    out
}

/// One published file's share of the read: its row groups, and the rows
/// within them when its page index picked pages.
#[derive(Debug, Clone)]
struct Item {
    part: usize,
    /// The path within the table, for `explain`.
    name: String,
    path: PathBuf,
    meta: ArrowReaderMetadata,
    row_groups: Vec<usize>,
    selection: Option<RowSelection>,
    rows: u64,
}

/// Counts of what the footers pruned, for `explain` and the timing line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub files: (usize, usize),
    pub row_groups: (usize, usize),
    /// Pages read and pages in the row groups read, of files with a page
    /// index.
    pub pages: (usize, usize),
    /// Rows read and rows published.
    pub rows: (u64, u64),
}

impl Counts {
    /// `read 3 of 365 file(s), 3 of 365 row group(s), ...`.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "{} of {} file(s), {} of {} row group(s)",
            self.files.0, self.files.1, self.row_groups.0, self.row_groups.1
        );
        if self.pages.1 > 0 {
            out += &format!(
                ", {} of {} page(s) in files with a page index",
                self.pages.0, self.pages.1
            );
        }
        out + &format!(", {} of {} row(s)", self.rows.0, self.rows.1)
    }
}

/// The published files to read, and where within them.
#[derive(Debug, Clone)]
pub struct Pruned {
    items: Vec<Item>,
    rels: Vec<String>,
    keys: Vec<String>,
    /// The key columns as read: [`other_key`] columns of the compared types.
    schema: SchemaRef,
    /// The same and [`PART`], the index of the batch's part.
    with_part: SchemaRef,
    types: Vec<DataType>,
    pub counts: Counts,
}

impl Pruned {
    /// Picks the row groups and pages of `parts` that can hold a key of
    /// `staged`. `None` when a key column of a part does not come from its
    /// files (a Hive directory column), which this reader does not read.
    pub fn plan(
        parts: &[PublishedPart],
        keys: &[String],
        types: &[DataType],
        staged: &StagedValues,
    ) -> Result<Option<Pruned>, Error> {
        let mut items = Vec::new();
        let mut counts = Counts::default();
        for (p, part) in parts.iter().enumerate() {
            let file_schema = part.input.file_schema();
            let local = matches!(part.input.location, Location::Local(_));
            if !local || keys.iter().any(|k| file_schema.field_with_name(k).is_err()) {
                return Ok(None);
            }
            for f in &part.input.files {
                counts.files.1 += 1;
                counts.row_groups.1 += f.metadata.num_row_groups();
                counts.rows.1 += f.row_count();
                if let Some(mut item) =
                    plan_file(p, &part.input, f, keys, types, staged, &mut counts)?
                {
                    item.name = f.path.clone();
                    counts.files.0 += 1;
                    counts.row_groups.0 += item.row_groups.len();
                    counts.rows.0 += item.rows;
                    items.push(item);
                }
            }
        }
        let fields: Vec<Field> = types
            .iter()
            .enumerate()
            .map(|(i, t)| Field::new(other_key(i), t.clone(), true))
            .collect();
        let mut numbered = fields.clone();
        numbered.push(Field::new(PART, DataType::UInt32, false));
        Ok(Some(Pruned {
            items,
            rels: parts.iter().map(|p| p.rel.clone()).collect(),
            keys: keys.to_vec(),
            schema: Arc::new(Schema::new(fields)),
            with_part: Arc::new(Schema::new(numbered)),
            types: types.to_vec(),
            counts,
        }))
    }

    /// The files read, with their row groups, at most `most` of them.
    pub fn files_read(&self, most: usize) -> Vec<String> {
        let mut out: Vec<String> = self
            .items
            .iter()
            .take(most)
            .map(|i| {
                let groups: Vec<String> = i.row_groups.iter().map(|g| g.to_string()).collect();
                let pages = if i.selection.is_some() {
                    ", pages picked by the page index"
                } else {
                    ""
                };
                format!("{} (row group(s) {}{pages})", i.name, groups.join(", "))
            })
            .collect();
        if self.items.len() > most {
            out.push(format!("and {} more file(s)", self.items.len() - most));
        }
        out
    }

    /// Whether nothing is left to read.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items split into `n` streams of about equal rows (largest first,
    /// each to the stream with the fewest rows so far).
    fn shares(&self, items: &[usize], n: usize) -> Vec<Vec<usize>> {
        let mut order = items.to_vec();
        order.sort_by_key(|i| std::cmp::Reverse(self.items[*i].rows));
        let mut shares: Vec<(u64, Vec<usize>)> = (0..n.max(1)).map(|_| (0, Vec::new())).collect();
        for i in order {
            let least = shares
                .iter_mut()
                .min_by_key(|(rows, _)| *rows)
                .expect("at least one share");
            least.0 += self.items[i].rows;
            least.1.push(i);
        }
        shares.into_iter().map(|(_, s)| s).collect()
    }

    /// The key columns of every item and, last, [`PART`] (the index in
    /// the `parts` planned of the part each batch comes from: a batch never
    /// spans two files), in `n` streams.
    pub fn streams(&self, n: usize) -> Vec<SendableRecordBatchStream> {
        let all: Vec<usize> = (0..self.items.len()).collect();
        let this = Arc::new(self.clone());
        self.shares(&all, n)
            .into_iter()
            .map(|share| read(this.clone(), share, true))
            .collect()
    }

    /// The `rel` of part `i`.
    pub fn rel(&self, i: usize) -> &str {
        &self.rels[i]
    }

    /// The published keys as [`other_key`] columns plus [`PARTITION`], a
    /// table a part in one `UNION ALL` (`None` when nothing is left).
    pub fn frame(&self, ctx: &SessionContext, n: usize) -> Result<Option<DataFrame>, Error> {
        let this = Arc::new(self.clone());
        let mut union: Option<DataFrame> = None;
        for (p, rel) in self.rels.iter().enumerate() {
            let items: Vec<usize> = (0..self.items.len())
                .filter(|i| self.items[*i].part == p)
                .collect();
            if items.is_empty() {
                continue;
            }
            let partitions: Vec<Arc<dyn PartitionStream>> = self
                .shares(&items, n)
                .into_iter()
                .filter(|s| !s.is_empty())
                .map(|share| {
                    Arc::new(Share {
                        pruned: this.clone(),
                        items: share,
                    }) as Arc<dyn PartitionStream>
                })
                .collect();
            let table = datafusion::catalog::streaming::StreamingTable::try_new(
                self.schema.clone(),
                partitions,
            )
            .map_err(|e| Error::engine("planning the published partitions", e))?;
            let mut exprs: Vec<Expr> = (0..self.keys.len()).map(|i| ident(other_key(i))).collect();
            exprs.push(lit(rel.clone()).alias(PARTITION));
            let frame = ctx
                .read_table(Arc::new(table))
                .and_then(|f| f.select(exprs))
                .map_err(|e| Error::engine("planning the published partitions", e))?;
            union = Some(match union {
                None => frame,
                Some(u) => u
                    .union(frame)
                    .map_err(|e| Error::engine("planning the published partitions", e))?,
            });
        }
        Ok(union)
    }
}

/// One stream's items, as a DataFusion partition (executable again: each
/// run reads anew).
#[derive(Debug)]
struct Share {
    pruned: Arc<Pruned>,
    items: Vec<usize>,
}

impl PartitionStream for Share {
    fn schema(&self) -> &SchemaRef {
        &self.pruned.schema
    }

    fn execute(&self, _: Arc<TaskContext>) -> SendableRecordBatchStream {
        read(self.pruned.clone(), self.items.clone(), false)
    }
}

/// Reads `items` of `pruned` one after another (`numbered`: with [`PART`]).
fn read(pruned: Arc<Pruned>, items: Vec<usize>, numbered: bool) -> SendableRecordBatchStream {
    let schema = if numbered {
        pruned.with_part.clone()
    } else {
        pruned.schema.clone()
    };
    let stream = futures::stream::iter(items)
        .then(move |i| {
            let pruned = pruned.clone();
            async move { pruned.open(i, numbered).await }
        })
        .try_flatten();
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

type Batches = futures::stream::BoxStream<'static, datafusion::error::Result<RecordBatch>>;

impl Pruned {
    /// The batches of item `i`: its key columns, cast and named.
    async fn open(self: Arc<Self>, i: usize, numbered: bool) -> datafusion::error::Result<Batches> {
        let item = &self.items[i];
        let parquet = item.meta.parquet_schema();
        let roots: Vec<usize> = self
            .keys
            .iter()
            .map(|k| item.meta.schema().index_of(k))
            .collect::<Result<_, _>>()?;
        let mask = ProjectionMask::roots(parquet, roots);
        let this = self.clone();
        let part = numbered.then_some(item.part as u32);
        let shape = move |batch: RecordBatch| this.shape(&batch, part);
        let file = File::open(&item.path)?;
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file, item.meta.clone())
                .with_projection(mask)
                .with_row_groups(item.row_groups.clone())
                .with_batch_size(BATCH);
        if let Some(s) = &item.selection {
            builder = builder.with_row_selection(s.clone());
        }
        let reader = builder.build()?;
        Ok(futures::stream::iter(reader.map(move |b| shape(b?))).boxed())
    }

    /// A batch as read, in key order, cast to the compared types (and
    /// with [`PART`] when `part` is given).
    fn shape(
        &self,
        batch: &RecordBatch,
        part: Option<u32>,
    ) -> datafusion::error::Result<RecordBatch> {
        let mut columns = self
            .keys
            .iter()
            .zip(&self.types)
            .map(|(k, t)| {
                let column = batch.column_by_name(k).ok_or_else(|| {
                    datafusion::error::DataFusionError::Internal(format!("no column `{k}` read"))
                })?;
                Ok(cast(column, t)?)
            })
            .collect::<datafusion::error::Result<Vec<ArrayRef>>>()?;
        let schema = match part {
            None => self.schema.clone(),
            Some(p) => {
                columns.push(Arc::new(UInt32Array::from_value(p, batch.num_rows())));
                self.with_part.clone()
            }
        };
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

/// Whether any key column chunk of `f` has a page index.
fn has_page_index(f: &StagedFile, roots: &[usize]) -> bool {
    f.metadata.row_groups().iter().any(|rg| {
        roots.iter().any(|r| {
            rg.columns().get(*r).is_some_and(|c| {
                c.column_index_offset().is_some() && c.offset_index_offset().is_some()
            })
        })
    })
}

/// The part of one file to read; `None` when its footers rule out every
/// staged key.
fn plan_file(
    part: usize,
    input: &StagedInput,
    f: &StagedFile,
    keys: &[String],
    types: &[DataType],
    staged: &StagedValues,
    counts: &mut Counts,
) -> Result<Option<Item>, Error> {
    let failed = |e: &dyn std::fmt::Display| {
        Error::Audit(format!(
            "reading the footer of `{}`: {e}",
            input.location.name_of(&f.path)
        ))
    };
    let file_schema = input.file_schema();
    let roots: Vec<usize> = keys
        .iter()
        .filter_map(|k| file_schema.index_of(k).ok())
        .collect();
    let Location::Local(dir) = &input.location else {
        unreachable!("remote parts are not planned");
    };
    let path = dir.join(&f.path);
    let meta = if has_page_index(f, &roots) {
        let file = File::open(&path).map_err(|e| failed(&e))?;
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        ArrowReaderMetadata::load(&file, options).ok()
    } else {
        None
    };
    let meta = match meta {
        Some(m) => m,
        None => ArrowReaderMetadata::try_new(f.metadata.clone(), ArrowReaderOptions::new())
            .map_err(|e| failed(&e))?,
    };
    let metadata = meta.metadata().clone();
    let groups: &[RowGroupMetaData] = metadata.row_groups();
    let mut admitted = vec![true; groups.len()];
    let mut converters = Vec::new();
    for ((k, t), column) in keys.iter().zip(types).zip(&staged.columns) {
        let Ok(stats) = StatisticsConverter::try_new(k, meta.schema(), meta.parquet_schema())
        else {
            converters.push(None);
            continue;
        };
        let mins = stats.row_group_mins(groups.iter());
        let maxes = stats.row_group_maxes(groups.iter());
        let nulls = stats.row_group_null_counts(groups.iter());
        if let (Ok(mins), Ok(maxes), Ok(nulls)) = (mins, maxes, nulls) {
            let null_of = |i: usize| nulls.is_valid(i).then(|| nulls.value(i));
            let rows_of = |i: usize| groups[i].num_rows().max(0) as u64;
            let ok = column.admits_ranges(t, &mins, &maxes, &null_of, &rows_of);
            admitted.iter_mut().zip(ok).for_each(|(a, b)| *a &= b);
        }
        converters.push(Some(stats));
    }
    let row_groups: Vec<usize> = (0..groups.len())
        .filter(|i| admitted[*i] && groups[*i].num_rows() > 0)
        .collect();
    if row_groups.is_empty() {
        return Ok(None);
    }
    let mut rows: u64 = row_groups
        .iter()
        .map(|i| groups[*i].num_rows().max(0) as u64)
        .sum();
    let mut selection: Option<RowSelection> = None;
    if let (Some(index), Some(offsets)) = (metadata.column_index(), metadata.offset_index()) {
        let mut pages = None;
        for (((_, t), column), stats) in
            keys.iter().zip(types).zip(&staged.columns).zip(&converters)
        {
            let Some(stats) = stats else { continue };
            let Some(picked) = pick_pages(stats, column, t, index, offsets, groups, &row_groups)
            else {
                continue;
            };
            if pages.is_none() {
                pages = Some((picked.1, picked.2));
            }
            selection = Some(match selection {
                None => picked.0,
                Some(s) => s.intersection(&picked.0),
            });
        }
        if let Some((read, total)) = pages {
            counts.pages.0 += read;
            counts.pages.1 += total;
        }
        if let Some(s) = &selection {
            rows = s.row_count() as u64;
            if rows == 0 {
                return Ok(None);
            }
        }
    }
    Ok(Some(Item {
        part,
        name: String::new(),
        path,
        meta,
        row_groups,
        selection,
        rows,
    }))
}

/// The rows of the pages of `row_groups` (in the file's page index) that
/// can hold a staged value of one key column, with the pages picked and in
/// all; `None` when the index cannot say.
fn pick_pages(
    stats: &StatisticsConverter<'_>,
    column: &Column,
    ty: &DataType,
    index: &datafusion::parquet::file::metadata::ParquetColumnIndex,
    offsets: &datafusion::parquet::file::metadata::ParquetOffsetIndex,
    groups: &[RowGroupMetaData],
    row_groups: &[usize],
) -> Option<(RowSelection, usize, usize)> {
    let mins = stats.data_page_mins(index, offsets, row_groups).ok()?;
    let maxes = stats.data_page_maxes(index, offsets, row_groups).ok()?;
    let nulls = stats
        .data_page_null_counts(index, offsets, row_groups)
        .ok()?;
    let counts = stats
        .data_page_row_counts(offsets, groups, row_groups)
        .ok()??;
    if counts.len() != mins.len() || counts.null_count() > 0 {
        return None;
    }
    let null_of = |i: usize| nulls.is_valid(i).then(|| nulls.value(i));
    let rows_of = |i: usize| counts.value(i);
    let ok = column.admits_ranges(ty, &mins, &maxes, &null_of, &rows_of);
    let picked = ok.iter().filter(|b| **b).count();
    let selectors: Vec<RowSelector> = ok
        .iter()
        .enumerate()
        .map(|(i, keep)| {
            let n = counts.value(i) as usize;
            if *keep {
                RowSelector::select(n)
            } else {
                RowSelector::skip(n)
            }
        })
        .collect();
    Some((RowSelection::from(selectors), picked, ok.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;

    fn ints(values: Vec<Option<i64>>) -> ArrayRef {
        Arc::new(Int64Array::from(values))
    }

    #[test]
    fn int_codes_keep_the_order_of_signed_values() {
        let c = int_codes(&ints(vec![
            Some(-5),
            None,
            Some(0),
            Some(i64::MAX),
            Some(i64::MIN),
        ]))
        .unwrap();
        assert_eq!(c[1], None);
        assert!(c[4] < c[0] && c[0] < c[2] && c[2] < c[3]);
    }

    fn column(staged: Vec<Option<i64>>, ranged: bool) -> Column {
        let mut v = IntValues::default();
        v.push(int_codes(&ints(staged)));
        v.ranged = ranged;
        Column {
            converter: RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap(),
            admit: v.admit(),
        }
    }

    #[test]
    fn a_range_is_read_only_when_a_staged_value_lies_within_it() {
        let mins = ints(vec![Some(0), Some(11), Some(21), Some(31), None, Some(-9)]);
        let maxes = ints(vec![Some(9), Some(19), Some(30), Some(40), None, Some(10)]);
        let nulls = |i: usize| (i == 5).then_some(4);
        let rows = |_| 4;
        let staged = vec![Some(10), None, Some(20), Some(30), Some(10)];
        let got = column(staged.clone(), false).admits_ranges(
            &DataType::Int64,
            &mins,
            &maxes,
            &nulls,
            &rows,
        );
        // 0..9 and 11..19 hold none; 21..30 holds 30; no range: read; all
        // null: nothing to read.
        assert_eq!(got, [false, false, true, false, true, false]);
        let got =
            column(staged, true).admits_ranges(&DataType::Int64, &mins, &maxes, &nulls, &rows);
        assert_eq!(
            got,
            [false, true, true, false, true, false],
            "only 10..=30 kept"
        );
        let none = column(vec![None, None], false);
        assert!(matches!(none.admit, Admit::Nothing));
    }
}
