//! Key columns read straight from a Parquet file: every row in order (what
//! an index of the file's keys is written from, with each key's row), or
//! only chosen rows (the keys an index names by row, checked as bytes).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::file::metadata::ParquetMetaData;

use super::canon::{Columns, Kind};

/// Rows a batch.
const BATCH: usize = 8192;

/// Why key columns could not be read.
pub type ReadError = String;

/// Calls `f` with the key columns of `rows` of the file at `path` (every
/// row when `None`; else row numbers in the file, ascending), batch by
/// batch in row order.
pub fn read_keys(
    path: &Path,
    meta: &Arc<ParquetMetaData>,
    columns: &[String],
    kinds: &[Kind],
    rows: Option<&[u64]>,
    mut f: impl FnMut(&Columns, usize),
) -> Result<(), ReadError> {
    let shown = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let plain = ArrowReaderMetadata::try_new(meta.clone(), ArrowReaderOptions::new())
        .map_err(|e| shown(&e))?;
    // Text as views: no copy of each value.
    let views = Arc::new(Schema::new(
        plain
            .schema()
            .fields()
            .iter()
            .map(|f| {
                let t = match f.data_type() {
                    DataType::Utf8 | DataType::LargeUtf8 => DataType::Utf8View,
                    t => t.clone(),
                };
                Field::new(f.name(), t, f.is_nullable()).with_metadata(f.metadata().clone())
            })
            .collect::<Vec<_>>(),
    ));
    let meta =
        ArrowReaderMetadata::try_new(meta.clone(), ArrowReaderOptions::new().with_schema(views))
            .map_err(|e| shown(&e))?;
    let roots = columns
        .iter()
        .map(|c| meta.schema().index_of(c))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| shown(&e))?;
    let mask = ProjectionMask::roots(meta.parquet_schema(), roots.iter().copied());
    let file = File::open(path).map_err(|e| shown(&e))?;
    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(file, meta.clone())
        .with_projection(mask)
        .with_batch_size(BATCH);
    if let Some(rows) = rows {
        let (groups, selection) = selection(meta.metadata(), rows);
        builder = builder
            .with_row_groups(groups)
            .with_row_selection(selection);
    }
    for batch in builder.build().map_err(|e| shown(&e))? {
        let batch = batch.map_err(|e| shown(&e))?;
        let keys: Vec<_> = columns
            .iter()
            .map(|c| {
                batch
                    .column_by_name(c)
                    .cloned()
                    .ok_or_else(|| shown(&format!("no column `{c}` read")))
            })
            .collect::<Result<_, _>>()?;
        f(
            &Columns::new(&keys, kinds).map_err(|e| shown(&e))?,
            batch.num_rows(),
        );
    }
    Ok(())
}

/// The row groups that hold `rows` (ascending row numbers of the file), and
/// the selection of exactly those rows within them.
fn selection(meta: &ParquetMetaData, rows: &[u64]) -> (Vec<usize>, RowSelection) {
    let mut groups = Vec::new();
    let mut selectors = Vec::new();
    let mut start = 0u64;
    let mut next = rows.iter().peekable();
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let end = start + rg.num_rows().max(0) as u64;
        let mut at = start;
        let mut any = false;
        while let Some(&&r) = next.peek() {
            if r >= end {
                break;
            }
            next.next();
            if r < at {
                continue;
            }
            if r > at {
                selectors.push(RowSelector::skip((r - at) as usize));
            }
            selectors.push(RowSelector::select(1));
            at = r + 1;
            any = true;
        }
        if any {
            groups.push(g);
            if end > at {
                selectors.push(RowSelector::skip((end - at) as usize));
            }
        }
        start = end;
    }
    (groups, selectors.into())
}
