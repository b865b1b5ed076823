//! Each check's first offending rows in (file, row) order, kept while the
//! passes stream.
//!
//! The scan yields rows in no fixed order (files are read in parallel), so
//! each check keeps the rows it was given with their (file index, row)
//! positions; past twice its limit it sorts what it holds by position and
//! keeps the first `limit + 1` (one more than the limit tells whether the
//! file was cut). Memory is bounded by the limit, whatever the number of
//! offending rows; with `--failed-rows-limit all` it holds them all. Cost
//! per offending row: a filter and a `take` of its columns, and a share of
//! a sort of at most `2 × limit` positions.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, UInt32Array,
};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, take_record_batch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;

/// Why a failed-rows pass's rows could not be routed to their checks.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    #[error("the pass has no column `{0}`")]
    NoColumn(String),
    #[error("row positions are not 64-bit integers")]
    RowPositions,
    #[error("a flag column is not boolean")]
    FlagNotBoolean,
    #[error("file locations are not text")]
    LocationsNotText,
    #[error("a row without its file")]
    NoFile,
    #[error("a row came from `{0}`, which is not a staged file")]
    NotStaged(String),
    #[error(transparent)]
    Arrow(#[from] ArrowError),
}

/// The column naming each row's file, relative to the staged directory.
pub const FILE_COLUMN: &str = "_dqgate_file";
/// The column holding each row's 0-based position in its file.
pub const ROW_COLUMN: &str = "_dqgate_row";
/// `across published` only: the published partition (`k=v[/k=v]`) that
/// also holds the row's key (the first by path when several do).
pub const PARTITION_COLUMN: &str = "_dqgate_partition";

/// Fewer positions than this are never compacted (a sort per batch would
/// cost more than it saves).
const MIN_COMPACT: usize = 8192;

/// One check's rows so far.
#[derive(Debug)]
pub struct Kept {
    /// At most this many rows end in the file; `None`: all.
    limit: Option<usize>,
    /// The rows' columns (the staged ones, then any extra such as the
    /// published partition), batch by batch.
    batches: Vec<RecordBatch>,
    /// (file index, row in the file) of each kept row, in batch order.
    positions: Vec<(u32, i64)>,
    /// Offending rows seen, kept or not.
    seen: u64,
}

/// A check's rows, sorted by position and cut at the limit.
#[derive(Debug)]
pub struct Finished {
    /// The staged columns, [`FILE_COLUMN`], [`ROW_COLUMN`], then the extra
    /// columns.
    pub batch: RecordBatch,
    /// More rows offended than the file holds.
    pub cut: bool,
}

impl Kept {
    pub fn new(limit: Option<usize>) -> Kept {
        Kept {
            limit,
            batches: Vec::new(),
            positions: Vec::new(),
            seen: 0,
        }
    }

    /// Adds the rows of `batch` where `mask` is true (all rows without a
    /// mask); `files` and `rows` are their positions.
    pub fn push(
        &mut self,
        batch: &RecordBatch,
        files: &UInt32Array,
        rows: &Int64Array,
        mask: Option<&BooleanArray>,
    ) -> Result<(), ArrowError> {
        let (batch, files, rows) = match mask {
            None => (batch.clone(), files.clone(), rows.clone()),
            Some(m) => {
                let b = filter_record_batch(batch, m)?;
                let f = datafusion::arrow::compute::filter(files, m)?;
                let r = datafusion::arrow::compute::filter(rows, m)?;
                let f = f.as_any().downcast_ref::<UInt32Array>().cloned();
                let r = r.as_any().downcast_ref::<Int64Array>().cloned();
                match (f, r) {
                    (Some(f), Some(r)) => (b, f, r),
                    _ => return Err(ArrowError::ComputeError("filtered positions".into())),
                }
            }
        };
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.seen += batch.num_rows() as u64;
        self.positions.extend(
            files
                .values()
                .iter()
                .copied()
                .zip(rows.values().iter().copied()),
        );
        self.batches.push(batch);
        if let Some(limit) = self.limit {
            if self.positions.len() > MIN_COMPACT.max(2 * (limit + 1)) {
                self.compact(Some(limit + 1))?;
            }
        }
        Ok(())
    }

    /// Sorts the kept rows by position (dropping a row seen twice) and
    /// keeps the first `keep`.
    fn compact(&mut self, keep: Option<usize>) -> Result<(), ArrowError> {
        let Some(first) = self.batches.first() else {
            return Ok(());
        };
        let all = concat_batches(&first.schema(), &self.batches)?;
        let mut order: Vec<u32> = (0..self.positions.len() as u32).collect();
        order.sort_unstable_by_key(|&i| self.positions[i as usize]);
        order.dedup_by_key(|i| self.positions[*i as usize]);
        if let Some(keep) = keep {
            order.truncate(keep);
        }
        let positions = order.iter().map(|&i| self.positions[i as usize]).collect();
        let taken = take_record_batch(&all, &UInt32Array::from(order))?;
        self.batches = vec![taken];
        self.positions = positions;
        Ok(())
    }

    /// The rows in (file, row) order, at most the limit, with their file
    /// (a path relative to the staged directory) and row; `None` when no
    /// row offended.
    pub fn finish(mut self, files: &[String]) -> Result<Option<Finished>, ArrowError> {
        self.compact(None)?;
        let Some(batch) = self.batches.pop() else {
            return Ok(None);
        };
        let total = self.positions.len();
        let shown = self.limit.map_or(total, |l| l.min(total));
        let cut = total > shown;
        let batch = batch.slice(0, shown);
        let positions = &self.positions[..shown];
        let file: StringArray = positions
            .iter()
            .map(|(f, _)| files.get(*f as usize).map(String::as_str))
            .collect();
        let row: Int64Array = positions.iter().map(|(_, r)| Some(*r)).collect();
        Ok(Some(Finished {
            batch: with_positions(&batch, Arc::new(file), Arc::new(row))?,
            cut,
        }))
    }
}

/// The staged columns of `batch` (all but the extra ones, which come
/// after), then the file and row columns, then the extra columns.
fn with_positions(
    batch: &RecordBatch,
    file: ArrayRef,
    row: ArrayRef,
) -> Result<RecordBatch, ArrowError> {
    let schema = batch.schema();
    let extra = schema
        .fields()
        .iter()
        .filter(|f| f.name() == PARTITION_COLUMN)
        .count();
    let staged = schema.fields().len() - extra;
    let mut fields: Vec<Field> = schema.fields()[..staged]
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(FILE_COLUMN, DataType::Utf8, false));
    fields.push(Field::new(ROW_COLUMN, DataType::Int64, false));
    fields.extend(schema.fields()[staged..].iter().map(|f| f.as_ref().clone()));
    let mut columns: Vec<ArrayRef> = batch.columns()[..staged].to_vec();
    columns.push(file);
    columns.push(row);
    columns.extend(batch.columns()[staged..].iter().cloned());
    let out: SchemaRef = Arc::new(Schema::new(fields));
    RecordBatch::try_new(out, columns)
}

/// Maps the scan's file locations to indexes into the staged files.
pub struct Locations {
    by_location: HashMap<String, u32>,
    /// The staged files' relative paths, for a location not found exactly.
    relative: Vec<String>,
}

impl Locations {
    pub fn new(by_location: HashMap<String, usize>, relative: Vec<String>) -> Locations {
        Locations {
            by_location: by_location
                .into_iter()
                .map(|(k, v)| (k, v as u32))
                .collect(),
            relative,
        }
    }

    /// The index of each row's file; an error names a location that is no
    /// staged file.
    pub fn indexes(&self, locations: &dyn Array) -> Result<UInt32Array, RouteError> {
        let strings = datafusion::arrow::compute::cast(locations, &DataType::Utf8)?;
        let strings = strings
            .as_any()
            .downcast_ref::<StringArray>()
            .ok_or(RouteError::LocationsNotText)?;
        let mut last: Option<(&str, u32)> = None;
        let mut out = Vec::with_capacity(strings.len());
        for s in strings.iter() {
            let s = s.ok_or(RouteError::NoFile)?;
            let i = match last {
                Some((l, i)) if l == s => i,
                _ => {
                    let i = self.index(s)?;
                    last = Some((s, i));
                    i
                }
            };
            out.push(i);
        }
        Ok(UInt32Array::from(out))
    }

    fn index(&self, location: &str) -> Result<u32, RouteError> {
        if let Some(i) = self.by_location.get(location) {
            return Ok(*i);
        }
        // The longest relative path the location ends with (`a/b.parquet`
        // before `b.parquet`).
        self.relative
            .iter()
            .enumerate()
            .filter(|(_, r)| location == *r || location.ends_with(&format!("/{r}")))
            .max_by_key(|(_, r)| r.len())
            .map(|(i, _)| i as u32)
            .ok_or_else(|| RouteError::NotStaged(location.to_string()))
    }
}
