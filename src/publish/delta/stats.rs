//! The `stats` of a Delta `add` action, from the file's Parquet footer:
//! `numRecords`, and per column `nullCount`, `minValues` and `maxValues`,
//! so that Delta readers can skip files without opening them.
//!
//! A reader skips a file when its bounds exclude a predicate, so a bound
//! that is too narrow loses rows for every reader of the table. Bounds are
//! therefore written only where the footer states them exactly (the rules of
//! dqgate's own footer answers, [`crate::staged::stats`]: every row group has
//! them, marked exact, in an order readers compare in) and in a form that
//! cannot be read narrower than the data:
//!
//! - integers and dates exactly; decimals as exact decimal literals (the
//!   JSON text is written here, never through a binary float);
//! - text exactly, when at most 32 characters (longer bounds would have to
//!   be truncated with care, as Spark does; they are left out);
//! - timestamps with a time zone at millisecond precision, the minimum
//!   rounded down and the maximum rounded up, as Delta readers parse them;
//! - floats (NaN is not in Parquet statistics), booleans, timestamps without
//!   time zone, nested columns and partition columns: no bounds.
//!
//! A column without bounds is simply not skipped. `nullCount` is written for
//! every top-level column whose footer counts its nulls. Like Spark, only the
//! first 32 columns get statistics (`delta.dataSkippingNumIndexedCols`).

use datafusion::arrow::datatypes::{DataType, TimeUnit};

use crate::staged::stats;
use crate::staged::{StagedFile, StagedInput};
use crate::value::{format_date, format_decimal, Value};

/// Delta's default number of leading columns with statistics.
const INDEXED_COLUMNS: usize = 32;

/// Text bounds longer than this are left out rather than truncated.
const MAX_TEXT_BOUND: usize = 32;

/// The `stats` JSON of `file`, one of `input`'s files.
pub fn file_stats(input: &StagedInput, file: &StagedFile, partition_columns: &[String]) -> String {
    let one = StagedInput {
        location: input.location.clone(),
        files: vec![file.clone()],
        schema: input.schema.clone(),
        hive: input.hive.clone(),
        fingerprint: String::new(),
    };
    let rows = file.row_count();
    let (mut mins, mut maxes, mut nulls) = (Vec::new(), Vec::new(), Vec::new());
    let columns = input
        .schema
        .fields()
        .iter()
        .filter(|f| !partition_columns.contains(f.name()))
        .take(INDEXED_COLUMNS);
    for field in columns {
        let name = field.name();
        if field.data_type().is_nested() {
            continue;
        }
        let key = json_string(name);
        if let Some(non_null) = stats::non_null(&one, name) {
            nulls.push(format!("{key}:{}", rows as i128 - non_null));
        }
        let bound = |v: Option<Value>, up: bool| v.and_then(|v| literal(&v, field.data_type(), up));
        if let (Some(min), Some(max)) = (
            bound(stats::min(&one, name), false),
            bound(stats::max(&one, name), true),
        ) {
            mins.push(format!("{key}:{min}"));
            maxes.push(format!("{key}:{max}"));
        }
    }
    let mut out = format!("{{\"numRecords\":{rows}");
    for (label, entries) in [
        ("minValues", mins),
        ("maxValues", maxes),
        ("nullCount", nulls),
    ] {
        if !entries.is_empty() {
            out.push_str(&format!(",\"{label}\":{{{}}}", entries.join(",")));
        }
    }
    out.push('}');
    out
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// A bound as Delta's JSON literal; `up`: a maximum (rounded up where the
/// literal is coarser than the value). `None`: no safe literal.
fn literal(v: &Value, ty: &DataType, up: bool) -> Option<String> {
    let ty = match ty {
        DataType::Dictionary(_, inner) => inner.as_ref(),
        t => t,
    };
    match (v, ty) {
        (Value::Int(i), t) if t.is_integer() => Some(i.to_string()),
        (Value::Decimal { value, scale }, DataType::Decimal128(..) | DataType::Decimal256(..)) => {
            Some(format_decimal(*value, *scale))
        }
        (Value::Date(days), DataType::Date32 | DataType::Date64) => {
            Some(format!("\"{}\"", format_date(*days)))
        }
        (Value::Text(s), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
            if s.chars().count() <= MAX_TEXT_BOUND =>
        {
            Some(json_string(s))
        }
        (Value::Timestamp { value, unit }, DataType::Timestamp(_, Some(_))) => {
            let per_ms: i64 = match unit {
                TimeUnit::Second => return millis(value.checked_mul(1000)?),
                TimeUnit::Millisecond => 1,
                TimeUnit::Microsecond => 1_000,
                TimeUnit::Nanosecond => 1_000_000,
            };
            let ms = if up {
                value.div_euclid(per_ms) + i64::from(value.rem_euclid(per_ms) != 0)
            } else {
                value.div_euclid(per_ms)
            };
            millis(ms)
        }
        _ => None,
    }
}

/// `2025-03-04T08:00:00.123Z`.
fn millis(ms: i64) -> Option<String> {
    let t = chrono::DateTime::from_timestamp_millis(ms)?;
    Some(format!("\"{}\"", t.format("%Y-%m-%dT%H:%M:%S%.3fZ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_and_dates_are_exact_literals() {
        let wide = DataType::Decimal128(38, 10);
        let v = Value::Decimal {
            value: 123_456_789_012_345_678_901_234_567_890,
            scale: 10,
        };
        assert_eq!(
            literal(&v, &wide, true).unwrap(),
            "12345678901234567890.1234567890"
        );
        assert_eq!(
            literal(&Value::Date(20152), &DataType::Date32, false).unwrap(),
            "\"2025-03-05\""
        );
    }

    #[test]
    fn timestamp_bounds_widen_to_milliseconds() {
        let ts = DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()));
        let v = Value::Timestamp {
            value: 1_741_075_200_000_123,
            unit: TimeUnit::Microsecond,
        };
        assert_eq!(
            literal(&v, &ts, false).unwrap(),
            "\"2025-03-04T08:00:00.000Z\""
        );
        assert_eq!(
            literal(&v, &ts, true).unwrap(),
            "\"2025-03-04T08:00:00.001Z\""
        );
        let before_epoch = Value::Timestamp {
            value: -1,
            unit: TimeUnit::Microsecond,
        };
        assert_eq!(
            literal(&before_epoch, &ts, false).unwrap(),
            "\"1969-12-31T23:59:59.999Z\""
        );
        assert_eq!(
            literal(&before_epoch, &ts, true).unwrap(),
            "\"1970-01-01T00:00:00.000Z\""
        );
        let ntz = DataType::Timestamp(TimeUnit::Microsecond, None);
        assert_eq!(literal(&v, &ntz, true), None);
    }

    #[test]
    fn long_text_and_floats_get_no_bounds() {
        assert_eq!(
            literal(&Value::Text("x".repeat(33)), &DataType::Utf8, false),
            None
        );
        assert_eq!(
            literal(&Value::Text("é\"".into()), &DataType::Utf8, false).unwrap(),
            "\"é\\\"\""
        );
        assert_eq!(literal(&Value::Float(1.0), &DataType::Float64, false), None);
    }
}
