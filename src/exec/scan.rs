//! The staged files as one DataFusion table.
//!
//! The table is registered over exactly the discovered file list, so the
//! fingerprint covers exactly what is scanned. Two kinds of files need more
//! than a `ListingTable`:
//!
//! - A file without row groups (fastparquet's empty frame) holds no rows, and
//!   its footer may need the correction of [`crate::staged::footer`], which the
//!   scan's own footer reader does not make: it is left out of the scan,
//!   which changes no value. When no file has a row group the table is empty.
//! - Files under Hive-style `key=value` directories get their keys as
//!   columns: one `ListingTable` per distinct set of values, each closed by
//!   the values as literals, all in one `UNION ALL`.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::dataframe::DataFrame;
use datafusion::datasource::empty::EmptyTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::logical_expr::{col, lit, Expr};
use datafusion::prelude::SessionContext;

use super::error::ExecError as Error;
use crate::staged::remote::Location;
use crate::staged::stats::dictionary_page;
use crate::staged::{StagedFile, StagedInput};

const CONTEXT: &str = "registering the staged files";

/// The staged files as a DataFusion table. Files on an object store are read
/// through their store, registered with the session under the location's URL.
pub fn table(ctx: &SessionContext, input: &StagedInput) -> Result<DataFrame, Error> {
    table_typed(ctx, input, false)
}

/// The staged files as a table whose text columns decode as `Utf8View`: a
/// view points into the decompressed page instead of copying each value
/// into a new buffer (and its offset into another). The key engine reads
/// its key columns so; the rest of the audit keeps the files' types.
pub fn table_of_views(ctx: &SessionContext, input: &StagedInput) -> Result<DataFrame, Error> {
    table_typed(ctx, input, true)
}

fn table_typed(ctx: &SessionContext, input: &StagedInput, views: bool) -> Result<DataFrame, Error> {
    let scanned: Vec<&StagedFile> = input
        .files
        .iter()
        .filter(|f| f.metadata.num_row_groups() > 0)
        .collect();
    if scanned.is_empty() {
        return ctx
            .read_table(Arc::new(EmptyTable::new(input.schema.clone())))
            .map_err(|e| Error::engine(CONTEXT, e));
    }
    let mut groups: Vec<(&[_], Vec<&StagedFile>)> = Vec::new();
    for f in scanned {
        match groups
            .iter_mut()
            .find(|(values, _)| *values == f.hive.as_slice())
        {
            Some((_, files)) => files.push(f),
            None => groups.push((f.hive.as_slice(), vec![f])),
        }
    }
    let mut union: Option<DataFrame> = None;
    for (values, files) in groups {
        let frame = files_table(ctx, input, &files, views)?;
        let frame = if input.hive.is_empty() {
            frame
        } else {
            let mut exprs: Vec<Expr> = input
                .file_schema()
                .fields()
                .iter()
                .map(|f| col(datafusion::common::Column::from_name(f.name())))
                .collect();
            exprs.extend(
                values
                    .iter()
                    .zip(&input.hive)
                    .map(|(v, f)| lit(v.clone()).alias(f.name())),
            );
            frame.select(exprs).map_err(|e| Error::engine(CONTEXT, e))?
        };
        union = Some(match union {
            None => frame,
            Some(u) => u.union(frame).map_err(|e| Error::engine(CONTEXT, e))?,
        });
    }
    Ok(union.expect("at least one group"))
}

/// One `ListingTable` over `files`, with the files' common schema.
fn files_table(
    ctx: &SessionContext,
    input: &StagedInput,
    files: &[&StagedFile],
    views: bool,
) -> Result<DataFrame, Error> {
    if let Location::Remote(remote) = &input.location {
        ctx.register_object_store(&remote.url, remote.store.clone());
    }
    let urls = file_urls(input, files)?;
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .with_schema(if views {
            view_schema(&input.file_schema())
        } else {
            values_schema(input)
        });
    let table = ListingTable::try_new(config).map_err(|e| Error::engine(CONTEXT, e))?;
    ctx.read_table(Arc::new(table))
        .map_err(|e| Error::engine(CONTEXT, e))
}

/// The URL each of `files` is scanned at.
fn file_urls(input: &StagedInput, files: &[&StagedFile]) -> Result<Vec<ListingTableUrl>, Error> {
    match &input.location {
        Location::Local(dir) => {
            let dir = std::fs::canonicalize(dir)
                .map_err(|e| Error::Audit(format!("cannot resolve `{}`: {e}", dir.display())))?;
            files
                .iter()
                .map(|f| {
                    let url = url::Url::from_file_path(dir.join(&f.path))
                        .map_err(|_| Error::Audit(format!("{}: not a usable path", f.path)))?;
                    ListingTableUrl::try_new(url, None)
                        .map_err(|e| Error::engine(format!("registering {}", f.path), e))
                })
                .collect()
        }
        Location::Remote(remote) => files
            .iter()
            .map(|f| {
                remote
                    .file_url(&f.path)
                    .map_err(|e| Error::Audit(format!("registering {}: {e}", f.path)))
            })
            .collect(),
    }
}

/// Each staged file's object-store location as a scan reports it
/// (`input_file_name()`), with the file's index in `input.files`.
pub fn file_locations(
    input: &StagedInput,
) -> Result<std::collections::HashMap<String, usize>, Error> {
    let files: Vec<&StagedFile> = input.files.iter().collect();
    Ok(file_urls(input, &files)?
        .iter()
        .enumerate()
        .map(|(i, url)| (url.prefix().as_ref().to_string(), i))
        .collect())
}

/// `schema` with its text fields as `Utf8View`.
pub(crate) fn view_schema(schema: &SchemaRef) -> SchemaRef {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_data_type(as_view(f.data_type())))
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The files' schema, with text typed as a dictionary whose dictionary
/// pages reach [`LARGE_DICTIONARY`] in some file read as its values' type.
///
/// DataFusion evaluates a predicate, an `IN` list or a grouping over a
/// dictionary on every value of the dictionary, for every batch; pyarrow
/// writes an Arrow dictionary whole into every row group, so 2.5M ids of
/// a pandas categorical cost 2.5M comparisons for each batch of 8,192 rows
/// (`values(k) in (...)` over 10M such rows: 274 s, against 1.6 s as
/// text). Read as its values, each batch costs its own rows. A small
/// dictionary (a currency, a status) stays one: its values cost less than
/// the batch's rows (10M rows of 5 currencies: 0.39 s kept, 0.53 s cast).
pub(crate) fn values_schema(input: &StagedInput) -> SchemaRef {
    let schema = input.file_schema();
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, v)
                if matches!(**v, DataType::Utf8 | DataType::LargeUtf8)
                    && large_dictionary(input, f.name()) =>
            {
                f.as_ref().clone().with_data_type(v.as_ref().clone())
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// The dictionary page, from its offset to the first data page, from
/// which a dictionary is read as its values.
const LARGE_DICTIONARY: u64 = 64 << 10;

/// Whether a chunk of top-level column `column` in some staged file has a
/// dictionary page of [`LARGE_DICTIONARY`] or more.
fn large_dictionary(input: &StagedInput, column: &str) -> bool {
    input.files.iter().any(|f| {
        let descr = f.metadata.file_metadata().schema_descr();
        let fields = descr.root_schema().get_fields();
        let Some(root) = fields.iter().position(|r| r.name() == column) else {
            return false;
        };
        (f.metadata.row_groups().iter()).any(|rg| {
            (rg.columns().iter().enumerate()).any(|(i, c)| {
                descr.get_column_root_idx(i) == root
                    && dictionary_page(c).is_some_and(|(_, len)| len >= LARGE_DICTIONARY)
            })
        })
    })
}

/// `Utf8View` for a text type, the type itself otherwise.
pub(crate) fn as_view(t: &DataType) -> DataType {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 => DataType::Utf8View,
        t => t.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dictionary of text whose pages reach the limit in some file is
    /// read as its values; a small one stays a dictionary, as does
    /// anything else.
    #[test]
    fn only_large_dictionaries_are_read_as_values() {
        use datafusion::arrow::array::{ArrayRef, DictionaryArray, Int64Array, RecordBatch};
        use datafusion::arrow::datatypes::Int32Type;
        use datafusion::parquet::arrow::ArrowWriter;
        let dir = tempfile::tempdir().unwrap();
        let n = 30_000;
        let ids: Vec<String> = (0..n).map(|i| format!("id-{:012}", i * 7919)).collect();
        let big: DictionaryArray<Int32Type> = ids.iter().map(String::as_str).collect();
        let small: DictionaryArray<Int32Type> =
            (0..n).map(|i| ["EUR", "USD", "GBP"][i % 3]).collect();
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("big", Arc::new(big)),
            ("small", Arc::new(small)),
            ("n", Arc::new(Int64Array::from_iter_values(0..n as i64))),
        ];
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let file = std::fs::File::create(dir.path().join("part-0.parquet")).unwrap();
        let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let input = StagedInput::open(dir.path()).unwrap();
        let schema = values_schema(&input);
        let types: Vec<&DataType> = schema.fields().iter().map(|f| f.data_type()).collect();
        assert_eq!(types[0], &DataType::Utf8);
        assert!(matches!(types[1], DataType::Dictionary(..)), "{types:?}");
        assert_eq!(types[2], &DataType::Int64);
    }

    #[test]
    fn views_replace_only_text_fields() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Utf8, true),
            Field::new("b", DataType::LargeUtf8, false),
            Field::new("c", DataType::Int64, true),
            Field::new("d", DataType::Binary, true),
            Field::new(
                "e",
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                true,
            ),
        ]));
        let views = view_schema(&schema);
        let types: Vec<&DataType> = views.fields().iter().map(|f| f.data_type()).collect();
        assert_eq!(types[..2], [&DataType::Utf8View, &DataType::Utf8View]);
        assert_eq!(
            types[2..],
            schema
                .fields()
                .iter()
                .skip(2)
                .map(|f| f.data_type())
                .collect::<Vec<_>>()[..]
        );
        assert!(!views.field(1).is_nullable(), "nullability is kept");
    }
}
