//! The reader of the pruned published side: the key columns of the row
//! groups and pages left to read, straight from the Parquet files, split
//! into streams of about equal rows, or as a DataFusion table a part.

use std::fs::File;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::metadata::ParquetMetaData;
use futures::future::{BoxFuture, FutureExt};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::dataframe::DataFrame;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderBuilder, ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::{ident, lit, SessionContext};
use futures::{StreamExt, TryStreamExt};

use super::pruned::{Item, Pruned, Source};
use crate::exec::ExecError as Error;
use crate::plan::join::{other_key, PARTITION};

/// Rows a batch of the published reader.
const BATCH: usize = 8192;

impl Pruned {
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

    /// The key columns of every item and, last, [`PART`](super::PART) (the
    /// index in the `parts` planned of the part each batch comes from: a
    /// batch never spans two files), in `n` streams. Text key columns are
    /// `Utf8View`, decoded as views into the pages, not copied value by
    /// value and cast.
    pub fn streams(&self, n: usize) -> Vec<SendableRecordBatchStream> {
        let all: Vec<usize> = (0..self.items.len()).collect();
        let this = Arc::new(self.clone());
        self.shares(&all, n)
            .into_iter()
            .map(|share| read(this.clone(), share, true))
            .collect()
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

/// Reads `items` of `pruned` one after another (`numbered`: with [`PART`](super::PART)).
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
        let meta = if numbered {
            let views = crate::exec::scan::view_schema(item.meta.schema());
            let options = ArrowReaderOptions::new().with_schema(views);
            ArrowReaderMetadata::try_new(item.meta.metadata().clone(), options)?
        } else {
            item.meta.clone()
        };
        match &item.source {
            Source::Local(path) => {
                let file = File::open(path)?;
                let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta);
                let reader = only(builder, item, mask).build()?;
                Ok(futures::stream::iter(reader.map(move |b| shape(b?))).boxed())
            }
            // Fetched by ranged reads of the row groups' key column chunks.
            Source::Remote { store, path, size } => {
                let reader = Ranged {
                    store: store.clone(),
                    path: path.clone(),
                    size: *size,
                    metadata: item.meta.metadata().clone(),
                };
                let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, meta);
                let stream = only(builder, item, mask).build()?;
                Ok(stream.map(move |b| shape(b?)).boxed())
            }
        }
    }

    /// A batch as read, in key order, cast to the compared types (and
    /// with [`PART`](super::PART) when `part` is given, text as views).
    fn shape(
        &self,
        batch: &RecordBatch,
        part: Option<u32>,
    ) -> datafusion::error::Result<RecordBatch> {
        let read = part.map(|_| self.with_part.fields());
        let mut columns = self
            .keys
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let t = match read {
                    Some(fields) => fields[i].data_type(),
                    None => &self.types[i],
                };
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

/// The key columns (`mask`) of the item's row groups and pages, as either
/// reader takes them.
fn only<T>(
    builder: ArrowReaderBuilder<T>,
    item: &Item,
    mask: ProjectionMask,
) -> ArrowReaderBuilder<T> {
    let builder = builder
        .with_projection(mask)
        .with_row_groups(item.row_groups.clone())
        .with_batch_size(BATCH);
    match &item.selection {
        Some(s) => builder.with_row_selection(s.clone()),
        None => builder,
    }
}

/// A published object read by ranges of its store, its footer already
/// known (read when the table was listed).
struct Ranged {
    store: Arc<dyn ObjectStore>,
    path: ObjectPath,
    size: u64,
    metadata: Arc<ParquetMetaData>,
}

impl Ranged {
    fn failed(&self, e: object_store::Error) -> ParquetError {
        ParquetError::External(Box::new(e))
    }

    fn checked(&self, range: &Range<u64>) -> Result<(), ParquetError> {
        match range.end <= self.size {
            true => Ok(()),
            false => Err(ParquetError::General(format!(
                "bytes {}..{} of `{}` asked for, past its {} bytes",
                range.start, range.end, self.path, self.size
            ))),
        }
    }
}

impl AsyncFileReader for Ranged {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, Result<Bytes, ParquetError>> {
        async move {
            self.checked(&range)?;
            let got = self.store.get_range(&self.path, range).await;
            got.map_err(|e| self.failed(e))
        }
        .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, Result<Vec<Bytes>, ParquetError>> {
        async move {
            ranges.iter().try_for_each(|r| self.checked(r))?;
            let got = self.store.get_ranges(&self.path, &ranges).await;
            got.map_err(|e| self.failed(e))
        }
        .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        _: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, Result<Arc<ParquetMetaData>, ParquetError>> {
        let metadata = self.metadata.clone();
        async move { Ok(metadata) }.boxed()
    }
}
