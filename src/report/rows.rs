//! The first rows of each check's failed-rows file (`check --failed-rows
//! DIR`), read for the page when `report --failed-rows DIR` says where the
//! files are. Only the first [`PREVIEW_ROWS`] rows of each file are read.

use std::fs::File;
use std::path::Path;

use datafusion::arrow::record_batch::RecordBatchReader as _;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::input::Input;
use super::model::{Doc, Preview, PreviewError};

/// Rows of a failed-rows file shown under its check.
pub const PREVIEW_ROWS: usize = 10;

/// Reads the first rows of every failed-rows file the verdicts name, from
/// `dir`; a file that cannot be read is shown with the reason instead.
pub fn attach(inputs: &mut [Input], dir: &Path) {
    for input in inputs {
        let Doc::Verdict(v) = &mut input.doc else {
            continue;
        };
        for c in &mut v.checks {
            if let Some(f) = &mut c.failed_rows {
                f.preview = Some(preview(&dir.join(&f.path)));
            }
        }
    }
}

/// The column names and the first rows of a Parquet file, as text.
fn preview(path: &Path) -> Result<Preview, PreviewError> {
    let shown = || path.display().to_string();
    let file = File::open(path).map_err(|e| PreviewError::Open {
        path: shown(),
        reason: e.to_string(),
    })?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .and_then(|b| {
            b.with_batch_size(PREVIEW_ROWS)
                .with_limit(PREVIEW_ROWS)
                .build()
        })
        .map_err(|e| PreviewError::Read {
            path: shown(),
            reason: e.to_string(),
        })?;
    let columns: Vec<String> = reader
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let options = FormatOptions::default().with_null("null");
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| PreviewError::Read {
            path: shown(),
            reason: e.to_string(),
        })?;
        let formatters = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PreviewError::Format(e.to_string()))?;
        for i in 0..batch.num_rows() {
            rows.push(formatters.iter().map(|f| f.value(i).to_string()).collect());
        }
    }
    Ok(Preview { columns, rows })
}
