//! Metrics answered from Parquet footers alone, without reading data pages.
//!
//! Row counts are always in the footer. Null counts and min/max are used only
//! when *every* row group of *every* file carries them, and min/max only when
//! the writer marked them exact and the column's order in Parquet is the order
//! dqgate compares in (integers, decimals, dates, timestamps, and exact text).
//! Floats are never answered here: writers leave NaN out of their statistics,
//! while NaN is the largest float for dqgate. Anything else falls back to the
//! scan, so a fast answer is never a different answer.

use std::cmp::Ordering;

use datafusion::arrow::array::{Array, BooleanArray};
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Expr, Operator};
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::arrow::parquet_to_arrow_schema;

use super::input::{StagedFile, StagedInput};
use crate::plan::Atom;
use crate::value::Value;

/// The atom's value from the footers, or `None` when they cannot tell
/// exactly.
pub fn answer(atom: &Atom, input: &StagedInput) -> Option<Value> {
    match atom {
        Atom::RowCount => Some(Value::Int(input.row_count() as i128)),
        Atom::NonNull(c) => {
            let mut non_null: i128 = 0;
            for f in &input.files {
                non_null += f.row_count() as i128 - null_count(f, c)? as i128;
            }
            Some(Value::Int(non_null))
        }
        Atom::Min(c) => extreme(input, c, Ordering::Less),
        Atom::Max(c) => extreme(input, c, Ordering::Greater),
        Atom::CountIf(e) => rows_with_a_null(input, &null_tested(e)?),
        _ => None,
    }
}

/// The columns of `a IS NULL OR b IS NULL OR ...` (a primary key's rows
/// with a null part), or `None` for any other expression.
fn null_tested(e: &Expr) -> Option<Vec<String>> {
    match e {
        Expr::IsNull(inner) => match inner.as_ref() {
            Expr::Column(c) if c.relation.is_none() => Some(vec![c.name.clone()]),
            _ => None,
        },
        Expr::BinaryExpr(b) if b.op == Operator::Or => {
            let mut cols = null_tested(&b.left)?;
            cols.extend(null_tested(&b.right)?);
            Some(cols)
        }
        _ => None,
    }
}

/// Rows where one of `columns` is null, when the footers tell exactly: no
/// column holds a null (0), or only one does (its null count).
fn rows_with_a_null(input: &StagedInput, columns: &[String]) -> Option<Value> {
    let mut counts = Vec::with_capacity(columns.len());
    for c in columns {
        let mut n = 0u64;
        for f in &input.files {
            n += null_count(f, c)?;
        }
        counts.push(n);
    }
    let mut holding = counts.iter().filter(|n| **n > 0);
    let first = holding.next().copied().unwrap_or(0);
    match holding.next() {
        None => Some(Value::Int(i128::from(first))),
        Some(_) => None,
    }
}

/// Whether min/max statistics order like dqgate compares values.
fn orderable(ty: &DataType) -> bool {
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

fn null_count(f: &StagedFile, column: &str) -> Option<u64> {
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

fn column_type<'a>(input: &'a StagedInput, column: &str) -> Option<&'a DataType> {
    Some(input.schema.field_with_name(column).ok()?.data_type())
}

fn extreme(input: &StagedInput, column: &str, want: Ordering) -> Option<Value> {
    bound(input, column, want, true)
}

/// The smallest (`Less`) or largest value the footers give for `column`:
/// with `exact`, only from exact statistics; without, from statistics that
/// may be truncated, which bound the values but need not occur.
fn bound(input: &StagedInput, column: &str, want: Ordering, exact: bool) -> Option<Value> {
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
fn row_group_bounds(
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

/// The exact `[min, max]` of an integer column that fits `i64`, from the
/// footers; `None` when they cannot tell, or the column holds only nulls.
pub fn integer_range(input: &StagedInput, column: &str) -> Option<(i64, i64)> {
    if !column_type(input, column)?.is_integer() {
        return None;
    }
    let as_i64 = |v: Value| match v {
        Value::Int(i) => i64::try_from(i).ok(),
        _ => None,
    };
    let min = as_i64(extreme(input, column, Ordering::Less)?)?;
    let max = as_i64(extreme(input, column, Ordering::Greater)?)?;
    Some((min, max))
}

/// An integer-like value's integer code: unscaled decimals, days, timestamp
/// units. The key engine packs columns by these.
fn integer_code(v: &Value) -> Option<i128> {
    match v {
        Value::Int(i) => Some(*i),
        Value::Date(d) => Some(i128::from(*d)),
        Value::Timestamp { value, .. } => Some(i128::from(*value)),
        Value::Decimal { value, .. } => Some(*value),
        _ => None,
    }
}

/// What the footers say about a key column, for `plan::keys::choose`.
pub fn column_facts(input: &StagedInput, column: &str) -> crate::plan::keys::ColumnFacts {
    let nullable = input
        .schema
        .field_with_name(column)
        .map_or(true, |f| f.is_nullable());
    let no_nulls = input
        .files
        .iter()
        .try_fold(0u64, |n, f| Some(n + null_count(f, column)?))
        == Some(0);
    let text = column_type(input, column).is_some_and(crate::plan::keys::is_text);
    let (range, text_bounds) = if text {
        let bound = |want| match bound(input, column, want, false) {
            Some(Value::Text(s)) => Some(s),
            _ => None,
        };
        (None, bound(Ordering::Less).zip(bound(Ordering::Greater)))
    } else {
        let range = match (
            extreme(input, column, Ordering::Less),
            extreme(input, column, Ordering::Greater),
        ) {
            (Some(min), Some(max)) => integer_code(&min).zip(integer_code(&max)),
            _ => None,
        };
        (range, None)
    };
    crate::plan::keys::ColumnFacts {
        range,
        may_hold_nulls: nullable && !no_nulls,
        row_group_ranges: row_group_ranges(input, column),
        text_bounds,
    }
}

/// Each row group's exact `[min, max]` integer code, files in input order;
/// `None` when any row group lacks them. Row groups of only nulls are left
/// out (they hold no value to order).
fn row_group_ranges(input: &StagedInput, column: &str) -> Option<Vec<(i128, i128)>> {
    if !orderable(column_type(input, column)?) {
        return None;
    }
    let mut out = Vec::new();
    for f in &input.files {
        let mins = row_group_bounds(f, column, Ordering::Less, true)?;
        let maxes = row_group_bounds(f, column, Ordering::Greater, true)?;
        for (min, max) in mins.iter().zip(&maxes) {
            if let (Some(min), Some(max)) = (min, max) {
                out.push((integer_code(min)?, integer_code(max)?));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::{col, lit};

    #[test]
    fn only_a_chain_of_null_tests_names_its_columns() {
        let keys = ["store_id".to_string(), "order_id".to_string()];
        assert_eq!(
            null_tested(&crate::plan::any_null(&keys)),
            Some(keys.to_vec())
        );
        assert_eq!(
            null_tested(&col("a").is_null().and(col("b").is_null())),
            None
        );
        assert_eq!(null_tested(&col("a").is_not_null()), None);
        assert_eq!(null_tested(&lit(false)), None);
    }
}
