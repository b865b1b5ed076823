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

use datafusion::logical_expr::{Expr, Operator};

use crate::plan::Atom;
use crate::staged::stats::{bound, column_type, extreme, null_count, orderable, row_group_bounds};
use crate::staged::StagedInput;
use crate::value::Value;

/// The atom's value from the footers, or `None` when they cannot tell
/// exactly.
pub fn answer(atom: &Atom, input: &StagedInput) -> Option<Value> {
    match atom {
        Atom::RowCount => Some(Value::Int(input.row_count() as i128)),
        Atom::NonNull(c) => Some(Value::Int(crate::staged::stats::non_null(input, c)?)),
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
        text_ranges_apart: text && text_ranges_apart(input, column),
        text_bounds,
    }
}

/// Whether a text column's row groups' bounds, two or more, lie apart but
/// for an eighth of them once taken in order of their least value (see
/// [`crate::plan::keys::ColumnFacts::text_ranges_apart`]).
fn text_ranges_apart(input: &StagedInput, column: &str) -> bool {
    let mut ranges = Vec::new();
    for f in &input.files {
        let bounds = |want| row_group_bounds(f, column, want, false);
        let (Some(mins), Some(maxes)) = (bounds(Ordering::Less), bounds(Ordering::Greater)) else {
            return false;
        };
        for pair in mins.into_iter().zip(maxes) {
            match pair {
                (Some(Value::Text(min)), Some(Value::Text(max))) => ranges.push((min, max)),
                // A row group of only nulls holds no value to order.
                (None, None) => {}
                _ => return false,
            }
        }
    }
    ranges.sort_unstable();
    let mut reach: Option<&String> = None;
    let mut meeting = 0;
    for (min, max) in &ranges {
        if reach.is_some_and(|r| min < r) {
            meeting += 1;
        }
        reach = reach.max(Some(max));
    }
    ranges.len() >= 2 && meeting <= ranges.len() / 8
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
