//! The key columns of local files read with the Parquet crate's own
//! synchronous reader, in the task that consumes each scan partition,
//! instead of through a DataFusion scan.
//!
//! DataFusion's Parquet scan fetches each row group's column chunk whole
//! before decoding it: a fresh buffer of the compressed chunk (hundreds of
//! MB for a row group of millions of text keys), first touched as it is
//! read, and on a virtual machine the host backs every page of it. The
//! synchronous reader reads a page at a time into buffers it reuses. Over
//! the same files, 50M 22-character keys decoded and hashed took 0.63 to
//! 0.68 s so, against 0.95 to 1.06 s through DataFusion (two threads), and
//! 10M 0.16 to 0.20 s against 0.23 to 0.25 s.
//!
//! Only where the result is the same: local files whose key columns are
//! top-level columns of every file (not Hive columns), of the table's type
//! or of a text or binary type the table reads as its view type. Anything
//! else is left to DataFusion, which casts and fills in what files lack.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;

use crate::exec::progress::Progress;
use crate::staged::{Location, StagedFile, StagedInput};

/// One file's reading plan: its path, reader metadata (with the type
/// hints), the projection, and where each key column lands in its batches.
pub(super) struct FilePlan {
    pub path: std::path::PathBuf,
    pub metadata: ArrowReaderMetadata,
    pub mask: ProjectionMask,
    order: Vec<usize>,
    /// The file's own reader metadata (no type hints), and the key
    /// columns' types as the plan reads them.
    plain: ArrowReaderMetadata,
    types: Vec<DataType>,
}

/// The streams of `columns` (typed as `schema`, DataFusion's view of them),
/// one per scan partition of at most `threads`, with a progress bar; `None`
/// when the files are not read this way (see the module's doc).
pub(super) fn streams(
    input: &StagedInput,
    columns: &[String],
    schema: SchemaRef,
    threads: usize,
    batch_size: usize,
    label: &str,
) -> Option<(Vec<SendableRecordBatchStream>, Progress)> {
    let Planned { files, runs, .. } = planned(input, threads, |path, f| {
        file_plan(path, f, columns, &schema)
    })?;
    let plans = Arc::new(files);
    let read = Arc::new(AtomicU64::new(0));
    let streams = runs
        .into_iter()
        .map(|run| {
            let batches = Run {
                plans: plans.clone(),
                run,
                at: 0,
                batch_size,
                read: read.clone(),
                reader: None,
            };
            let batches = futures::stream::iter(batches);
            Box::pin(RecordBatchStreamAdapter::new(schema.clone(), batches))
                as SendableRecordBatchStream
        })
        .collect();
    Some((streams, Progress::counting(label, read, input.row_count())))
}

/// The local files of `input` that hold row groups, planned, and their
/// row groups cut into runs.
pub(super) struct Planned<P> {
    /// A plan of each file.
    pub files: Vec<P>,
    /// The row groups `(file, group)` in file order, cut into runs of
    /// about equal rows, none empty.
    pub runs: Vec<Vec<(usize, usize)>>,
    pub rows: u64,
}

/// [`Planned`] files of `input` (`plan`: a file's, given its path), in at
/// most `threads` runs; `None` when the files are not local, hold no rows,
/// or a file has no plan.
pub(super) fn planned<P>(
    input: &StagedInput,
    threads: usize,
    mut plan: impl FnMut(std::path::PathBuf, &StagedFile) -> Option<P>,
) -> Option<Planned<P>> {
    let Location::Local(dir) = &input.location else {
        return None;
    };
    let mut plans = Vec::new();
    // (file, row group, rows) of every row group to read.
    let mut units = Vec::new();
    for f in &input.files {
        if f.metadata.num_row_groups() == 0 {
            continue;
        }
        let p = plan(dir.join(&f.path), f)?;
        for (g, rg) in f.metadata.row_groups().iter().enumerate() {
            units.push((plans.len(), g, rg.num_rows().max(0) as u64));
        }
        plans.push(p);
    }
    if units.is_empty() {
        return None;
    }
    let total: u64 = units.iter().map(|u| u.2).sum();
    let parts = threads.clamp(1, units.len());
    let mut runs: Vec<Vec<(usize, usize)>> = vec![Vec::new(); parts];
    let mut seen = 0u64;
    for (file, group, rows) in units {
        let p = ((seen * parts as u64) / total.max(1)) as usize;
        runs[p.min(parts - 1)].push((file, group));
        seen += rows;
    }
    runs.retain(|r| !r.is_empty());
    Some(Planned {
        files: plans,
        runs,
        rows: total,
    })
}

/// How `file` is read, or `None` when a key column is not a top-level
/// column of it with a type the reader gives as `schema` says.
pub(super) fn file_plan(
    path: std::path::PathBuf,
    file: &StagedFile,
    columns: &[String],
    schema: &SchemaRef,
) -> Option<FilePlan> {
    let plain =
        ArrowReaderMetadata::try_new(file.metadata.clone(), ArrowReaderOptions::new()).ok()?;
    let file_schema = plain.schema().clone();
    let mut fields: Vec<Field> = file_schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    let descr = file.metadata.file_metadata().schema_descr();
    let roots: Vec<&str> = descr
        .root_schema()
        .get_fields()
        .iter()
        .map(|f| f.name())
        .collect();
    let mut wanted = Vec::new();
    let types = (schema.fields().iter().take(columns.len()))
        .map(|f| f.data_type().clone())
        .collect();
    for (c, want) in columns.iter().zip(schema.fields()) {
        let root = roots.iter().position(|r| r == c)?;
        let i = file_schema.index_of(c).ok()?;
        if !same_as_read(fields[i].data_type(), want.data_type()) {
            return None;
        }
        fields[i] = fields[i].clone().with_data_type(want.data_type().clone());
        wanted.push(root);
    }
    let hinted = Arc::new(Schema::new_with_metadata(
        fields,
        file_schema.metadata().clone(),
    ));
    let options = ArrowReaderOptions::new().with_schema(hinted);
    let metadata = ArrowReaderMetadata::try_new(file.metadata.clone(), options).ok()?;
    let mask = ProjectionMask::roots(descr, wanted.iter().copied());
    // The projected batch holds the roots in file order.
    let mut sorted = wanted.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let order = wanted
        .iter()
        .map(|r| sorted.iter().position(|s| s == r))
        .collect::<Option<Vec<_>>>()?;
    Some(FilePlan {
        path,
        metadata,
        mask,
        order,
        plain,
        types,
    })
}

impl FilePlan {
    /// The batches of row group `group` from its row `skip` on, each with
    /// the key columns in key order.
    pub(super) fn group_batches(
        &self,
        group: usize,
        skip: usize,
    ) -> Result<impl Iterator<Item = Result<RecordBatch, String>> + '_, String> {
        let rows = self.metadata.metadata().row_group(group).num_rows().max(0) as usize;
        let selection = RowSelection::from(vec![
            RowSelector::skip(skip.min(rows)),
            RowSelector::select(rows - skip.min(rows)),
        ]);
        self.read(group, selection, self.metadata.clone())
    }

    /// The batches of the rows of row group `group` that `selection`
    /// selects, each with the key columns in key order, as the plan types
    /// them. Text is read as copies of its values, then typed: a view of
    /// a page would keep the whole page, and a batch of rows far apart
    /// every page between them.
    pub(super) fn selected_batches(
        &self,
        group: usize,
        selection: RowSelection,
    ) -> Result<impl Iterator<Item = Result<RecordBatch, String>> + '_, String> {
        let typed = |b: RecordBatch| -> Result<RecordBatch, String> {
            let columns = (b.columns().iter().zip(&self.types))
                .map(|(c, t)| cast(c, t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let fields = (b.schema().fields().iter().zip(&self.types))
                .map(|(f, t)| f.as_ref().clone().with_data_type(t.clone()))
                .collect::<Vec<_>>();
            RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| e.to_string())
        };
        Ok(self
            .read(group, selection, self.plain.clone())?
            .map(move |b| b.and_then(typed)))
    }

    /// The batches of `selection` of row group `group`, read as
    /// `metadata` types them, each with the key columns in key order.
    fn read(
        &self,
        group: usize,
        selection: RowSelection,
        metadata: ArrowReaderMetadata,
    ) -> Result<impl Iterator<Item = Result<RecordBatch, String>> + '_, String> {
        let file = std::fs::File::open(&self.path).map_err(|e| e.to_string())?;
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, metadata)
            .with_projection(self.mask.clone())
            .with_row_groups(vec![group])
            .with_row_selection(selection)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(reader.map(|b| {
            b.and_then(|b| b.project(&self.order))
                .map_err(|e| e.to_string())
        }))
    }
}

/// Whether a file column of type `file` reads as `table` with a type hint
/// that changes nothing but the layout of text or bytes.
fn same_as_read(file: &DataType, table: &DataType) -> bool {
    file == table
        || matches!(
            (file, table),
            (DataType::Utf8 | DataType::LargeUtf8, DataType::Utf8View)
                | (
                    DataType::Binary | DataType::LargeBinary,
                    DataType::BinaryView
                )
        )
}

/// The batches of a run of row groups, read as they are asked for: the
/// decoding happens in the task that consumes them, as in a DataFusion
/// scan (a reader thread beside each consumer would make four busy
/// threads of two cores' work).
struct Run {
    plans: Arc<Vec<FilePlan>>,
    run: Vec<(usize, usize)>,
    at: usize,
    batch_size: usize,
    read: Arc<AtomicU64>,
    reader: Option<(usize, ParquetRecordBatchReader)>,
}

impl Run {
    fn failed(&self, file: usize, e: &dyn std::fmt::Display) -> DataFusionError {
        let path = self.plans[file].path.display();
        DataFusionError::Execution(format!("reading {path}: {e}"))
    }

    /// A reader of the next file's row groups in the run.
    fn open(&mut self) -> Option<Result<(usize, ParquetRecordBatchReader), DataFusionError>> {
        let file = self.run.get(self.at)?.0;
        let groups: Vec<usize> = self.run[self.at..]
            .iter()
            .take_while(|(f, _)| *f == file)
            .map(|(_, g)| *g)
            .collect();
        self.at += groups.len();
        let plan = &self.plans[file];
        let reader = std::fs::File::open(&plan.path)
            .map_err(|e| self.failed(file, &e))
            .and_then(|f| {
                ParquetRecordBatchReaderBuilder::new_with_metadata(f, plan.metadata.clone())
                    .with_projection(plan.mask.clone())
                    .with_row_groups(groups)
                    .with_batch_size(self.batch_size)
                    .build()
                    .map_err(|e| self.failed(file, &e))
            });
        Some(reader.map(|r| (file, r)))
    }
}

impl Iterator for Run {
    type Item = Result<RecordBatch, DataFusionError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.reader.is_none() {
                match self.open()? {
                    Ok(r) => self.reader = Some(r),
                    Err(e) => {
                        // Nothing more after an error.
                        self.at = self.run.len();
                        return Some(Err(e));
                    }
                }
            }
            let (file, reader) = self.reader.as_mut()?;
            let file = *file;
            match reader.next() {
                None => self.reader = None,
                Some(batch) => {
                    let order = &self.plans[file].order;
                    let batch = batch
                        .map_err(|e| self.failed(file, &e))
                        .and_then(|b| b.project(order).map_err(|e| self.failed(file, &e)));
                    match &batch {
                        Ok(b) => {
                            self.read.fetch_add(b.num_rows() as u64, Ordering::Relaxed);
                        }
                        Err(_) => (self.at, self.reader) = (self.run.len(), None),
                    }
                    return Some(batch);
                }
            }
        }
    }
}
