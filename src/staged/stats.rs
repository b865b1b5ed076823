//! What the staged footers state about a column: null counts, and the
//! smallest and largest values, per row group and overall; and where a
//! chunk's dictionary page lies.
//!
//! Null counts and min/max are used only when *every* row group of *every*
//! file carries them, and exact min/max only when the writer marked them
//! exact and the column's order in Parquet is the order dqgate compares in
//! (integers, decimals, dates, timestamps, and text). Floats are never
//! ordered here: writers leave NaN out of their statistics, while NaN is the
//! largest float for dqgate. `exec::stats` answers metrics with these, and
//! `publish` writes them as a Delta `add` action's statistics.

use std::cmp::Ordering;

use datafusion::arrow::array::{Array, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::file::metadata::ColumnChunkMetaData;

use super::input::{StagedFile, StagedInput};
use crate::value::Value;

/// Where `chunk`'s dictionary page lies: its offset, and its bytes up to
/// the first data page (its header included); `None` without one.
pub fn dictionary_page(chunk: &ColumnChunkMetaData) -> Option<(u64, u64)> {
    let at = u64::try_from(chunk.dictionary_page_offset()?).ok()?;
    let end = u64::try_from(chunk.data_page_offset()).ok()?;
    Some((at, end.checked_sub(at)?))
}

/// The rows of `column` that are not null, from the footers; `None` when a
/// row group does not count its nulls.
pub fn non_null(input: &StagedInput, column: &str) -> Option<i128> {
    let mut non_null: i128 = 0;
    for f in &input.files {
        non_null += f.row_count() as i128 - null_count(f, column)? as i128;
    }
    Some(non_null)
}

/// The exact smallest value of `column` (`Value::Null` when it holds only
/// nulls), or `None` when the footers cannot tell.
pub fn min(input: &StagedInput, column: &str) -> Option<Value> {
    extreme(input, column, Ordering::Less)
}

/// The exact largest value of `column`, as [`min`].
pub fn max(input: &StagedInput, column: &str) -> Option<Value> {
    extreme(input, column, Ordering::Greater)
}

/// Whether min/max statistics order like dqgate compares values.
pub fn orderable(ty: &DataType) -> bool {
    match ty {
        DataType::Dictionary(_, v) => orderable(v),
        t => {
            t.is_integer()
                || matches!(
                    t,
                    DataType::Decimal128(..)
                        | DataType::Decimal256(..)
                        | DataType::Date32
                        | DataType::Date64
                        | DataType::Timestamp(..)
                        | DataType::Utf8
                        | DataType::LargeUtf8
                        | DataType::Utf8View
                )
        }
    }
}

fn file_schema(f: &StagedFile) -> Option<Schema> {
    let md = f.metadata.file_metadata();
    parquet_to_arrow_schema(md.schema_descr(), md.key_value_metadata()).ok()
}

fn converter<'a>(
    f: &'a StagedFile,
    schema: &'a Schema,
    column: &str,
) -> Option<StatisticsConverter<'a>> {
    StatisticsConverter::try_new(column, schema, f.metadata.file_metadata().schema_descr())
        .ok()
        .map(|c| c.with_missing_null_counts_as_zero(false))
}

pub fn null_count(f: &StagedFile, column: &str) -> Option<u64> {
    if f.metadata.num_row_groups() == 0 {
        return Some(0);
    }
    let schema = file_schema(f)?;
    let conv = converter(f, &schema, column)?;
    let counts = conv
        .row_group_null_counts(f.metadata.row_groups().iter())
        .ok()?;
    if counts.null_count() > 0 {
        return None;
    }
    Some(counts.values().iter().sum())
}

pub fn column_type<'a>(input: &'a StagedInput, column: &str) -> Option<&'a DataType> {
    Some(input.schema.field_with_name(column).ok()?.data_type())
}

pub fn extreme(input: &StagedInput, column: &str, want: Ordering) -> Option<Value> {
    bound(input, column, want, true)
}

/// The smallest (`Less`) or largest value the footers give for `column`:
/// with `exact`, only from exact statistics; without, from statistics that
/// may be truncated, which bound the values but need not occur.
pub fn bound(input: &StagedInput, column: &str, want: Ordering, exact: bool) -> Option<Value> {
    if !orderable(column_type(input, column)?) {
        return None;
    }
    let mut best: Option<Value> = None;
    for f in &input.files {
        for v in row_group_bounds(f, column, want, exact)?
            .into_iter()
            .flatten()
        {
            best = match best {
                None => Some(v),
                Some(b) => Some(if v.compare(&b)? == want { v } else { b }),
            };
        }
    }
    Some(best.unwrap_or(Value::Null))
}

/// Each row group's exact minimum (`Less`) or maximum of `column`, `None`
/// for a row group of only nulls; `None` overall when any row group lacks
/// exact statistics (or, without `exact`, any statistics).
pub fn row_group_bounds(
    f: &StagedFile,
    column: &str,
    want: Ordering,
    exact: bool,
) -> Option<Vec<Option<Value>>> {
    if f.metadata.num_row_groups() == 0 {
        return Some(Vec::new());
    }
    let schema = file_schema(f)?;
    let conv = converter(f, &schema, column)?;
    let groups = f.metadata.row_groups();
    let nulls = conv.row_group_null_counts(groups.iter()).ok()?;
    let (values, exact_values) = if want == Ordering::Less {
        (
            conv.row_group_mins(groups.iter()).ok()?,
            conv.row_group_is_min_value_exact(groups.iter()).ok()?,
        )
    } else {
        (
            conv.row_group_maxes(groups.iter()).ok()?,
            conv.row_group_is_max_value_exact(groups.iter()).ok()?,
        )
    };
    groups
        .iter()
        .enumerate()
        .map(|(i, rg)| {
            if nulls.is_null(i) {
                return None;
            }
            if nulls.value(i) == rg.num_rows() as u64 {
                return Some(None); // only nulls: no value to contribute
            }
            if values.is_null(i) || (exact && !is_true(&exact_values, i)) {
                return None;
            }
            let s = ScalarValue::try_from_array(&values, i).ok()?;
            Some(Some(crate::scalar::from_scalar(&s)?))
        })
        .collect()
}

fn is_true(a: &BooleanArray, i: usize) -> bool {
    a.is_valid(i) && a.value(i)
}
