//! The reader of the pruned published side: the key columns of the row
//! groups and pages left to read, straight from the Parquet files, split
//! into streams of about equal rows, or as a DataFusion table a part.

use std::fs::File;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::dataframe::DataFrame;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::prelude::{ident, lit, SessionContext};
use futures::{StreamExt, TryStreamExt};

use super::pruned::Pruned;
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
        let file = File::open(&item.path)?;
        let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta)
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
