//! One check's rows as a Parquet file in DIR, written atomically: a hidden
//! temporary file in DIR, synced, renamed over the file's name, and DIR
//! synced, so a reader sees the previous file or the whole new one, and a
//! power cut leaves one of them.
//!
//! The bytes depend only on the rows: fixed writer properties, no clock, and
//! the check's line and name in the footer's key-value metadata.

use std::fs::File;
use std::io;
use std::path::Path;

use datafusion::arrow::array::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::WriterProperties;

/// The footer key that marks a file as dqgate's failed rows.
pub const MARK: &str = "dqgate.failed_rows";

/// The file name of the rows of the check on `line` named `name`:
/// `line-0009-unique_order_id.parquet`. Zero-padded so names sort by line.
pub fn file_name(line: usize, name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('_') {
            slug.push('_');
        }
    }
    let slug: String = slug.trim_matches('_').chars().take(48).collect();
    let slug = slug.trim_end_matches('_');
    if slug.is_empty() {
        format!("line-{line:04}.parquet")
    } else {
        format!("line-{line:04}-{slug}.parquet")
    }
}

/// Writes `batch` to `dir/name` atomically. `meta` goes into the footer
/// after the [`MARK`].
pub fn write_atomically(dir: &Path, name: &str, batch: &RecordBatch, meta: &str) -> io::Result<()> {
    let temp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let written = write_file(&temp, batch, meta).and_then(|()| {
        std::fs::rename(&temp, dir.join(name))?;
        File::open(dir)?.sync_all()
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

fn write_file(path: &Path, batch: &RecordBatch, meta: &str) -> io::Result<()> {
    let file = File::create(path)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_key_value_metadata(Some(vec![KeyValue::new(MARK.into(), meta.to_string())]))
        .build();
    let mut writer = ArrowWriter::try_new(file.try_clone()?, batch.schema(), Some(props))
        .map_err(io::Error::other)?;
    writer.write(batch).map_err(io::Error::other)?;
    writer.close().map_err(io::Error::other)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_by_line_and_say_the_check() {
        assert_eq!(
            file_name(9, "unique(order_id)"),
            "line-0009-unique_order_id.parquet"
        );
        assert_eq!(
            file_name(12, "rows belong to the run key"),
            "line-0012-rows_belong_to_the_run_key.parquet"
        );
        assert_eq!(file_name(3, "«»"), "line-0003.parquet");
        assert!(file_name(1, &"x".repeat(200)).len() < 80);
    }
}
