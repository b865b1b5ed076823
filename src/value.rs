//! Scalar values shared by thresholds, observed metrics and the verdict.
//!
//! Numbers keep their exact kind (integers up to 128 bits, decimals with their
//! scale) so that counts and sums compare and print exactly; floats are used
//! only for rates, averages and floating-point columns.

use std::cmp::Ordering;

use datafusion::arrow::datatypes::TimeUnit;

mod parse;

pub use parse::{parse_date, parse_timestamp};

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    /// `value / 10^scale`.
    Decimal {
        value: i128,
        scale: i8,
    },
    /// Days since 1970-01-01.
    Date(i32),
    /// Since the epoch, UTC, in `unit`.
    Timestamp {
        value: i64,
        unit: TimeUnit,
    },
    Text(String),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A number as an `f64` (lossy above 2^53), or `None` for non-numbers.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            Value::Decimal { value, scale } => Some(*value as f64 / 10f64.powi(*scale as i32)),
            _ => None,
        }
    }

    pub fn is_numeric(&self) -> bool {
        matches!(
            self,
            Value::Int(_) | Value::Float(_) | Value::Decimal { .. }
        )
    }

    /// Exact rational form `(numerator, scale)` of an integer or decimal.
    fn as_exact(&self) -> Option<(i128, i8)> {
        match self {
            Value::Int(i) => Some((*i, 0)),
            Value::Decimal { value, scale } => Some((*value, *scale)),
            _ => None,
        }
    }

    /// Compares two values of compatible kinds; `None` when either is null,
    /// when either is NaN against a non-NaN... (NaN sorts above every number,
    /// as in DataFusion and Parquet's total order), or when the kinds do not
    /// compare (the checker rules those out before any data is read).
    pub fn compare(&self, other: &Value) -> Option<Ordering> {
        use Value::*;
        match (self, other) {
            (Null, _) | (_, Null) => None,
            (Bool(a), Bool(b)) => Some(a.cmp(b)),
            (Text(a), Text(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
            (Date(a), Date(b)) => Some(a.cmp(b)),
            (Timestamp { .. }, Timestamp { .. }) => {
                Some(self.timestamp_nanos()?.cmp(&other.timestamp_nanos()?))
            }
            _ if self.is_numeric() && other.is_numeric() => compare_numbers(self, other),
            _ => None,
        }
    }

    /// A timestamp as nanoseconds since the epoch (i128: no overflow).
    pub fn timestamp_nanos(&self) -> Option<i128> {
        match self {
            Value::Timestamp { value, unit } => Some(*value as i128 * unit_nanos(*unit)),
            _ => None,
        }
    }
}

pub fn unit_nanos(unit: TimeUnit) -> i128 {
    match unit {
        TimeUnit::Second => 1_000_000_000,
        TimeUnit::Millisecond => 1_000_000,
        TimeUnit::Microsecond => 1_000,
        TimeUnit::Nanosecond => 1,
    }
}

fn compare_numbers(a: &Value, b: &Value) -> Option<Ordering> {
    if let (Some(x), Some(y)) = (a.as_exact(), b.as_exact()) {
        if let Some(o) = compare_exact(x, y) {
            return Some(o);
        }
    }
    let (x, y) = (a.as_f64()?, b.as_f64()?);
    Some(x.total_cmp(&y)).map(|o| match (x.is_nan(), y.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => {
            // total_cmp orders -0.0 below 0.0; SQL says they are equal.
            if x == y {
                Ordering::Equal
            } else {
                o
            }
        }
    })
}

/// Compares `x.0 / 10^x.1` with `y.0 / 10^y.1` exactly, `None` on overflow.
fn compare_exact(x: (i128, i8), y: (i128, i8)) -> Option<Ordering> {
    let scale = x.1.max(y.1);
    let up = |(v, s): (i128, i8)| -> Option<i128> {
        let diff = (scale - s) as u32;
        10i128.checked_pow(diff)?.checked_mul(v)
    };
    if x.1 < 0 || y.1 < 0 {
        return None;
    }
    Some(up(x)?.cmp(&up(y)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_decimal_comparison() {
        let a = Value::Decimal {
            value: 1250,
            scale: 2,
        };
        assert_eq!(a.compare(&Value::Int(12)), Some(Ordering::Greater));
        assert_eq!(
            a.compare(&Value::Decimal {
                value: 125,
                scale: 1
            }),
            Some(Ordering::Equal)
        );
        let big = Value::Int(i64::MAX as i128 + 1);
        assert_eq!(
            big.compare(&Value::Int(i64::MAX as i128)),
            Some(Ordering::Greater)
        );
    }

    #[test]
    fn nan_and_null() {
        let nan = Value::Float(f64::NAN);
        assert_eq!(nan.compare(&Value::Int(5)), Some(Ordering::Greater));
        assert_eq!(nan.compare(&nan), Some(Ordering::Equal));
        assert_eq!(Value::Null.compare(&Value::Int(1)), None);
        assert_eq!(
            Value::Float(-0.0).compare(&Value::Int(0)),
            Some(Ordering::Equal)
        );
    }

    #[test]
    fn timestamps_across_units() {
        let a = Value::Timestamp {
            value: 1,
            unit: TimeUnit::Second,
        };
        let b = Value::Timestamp {
            value: 1000,
            unit: TimeUnit::Millisecond,
        };
        assert_eq!(a.compare(&b), Some(Ordering::Equal));
    }
}

/// `value / 10^scale` as text with exactly `scale` decimals: `1250, 2` → `12.50`.
pub fn format_decimal(value: i128, scale: i8) -> String {
    if scale <= 0 {
        let zeros = "0".repeat((-scale) as usize);
        return if value == 0 {
            "0".into()
        } else {
            format!("{value}{zeros}")
        };
    }
    let digits = value.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    let sign = if value < 0 { "-" } else { "" };
    format!("{sign}{int}.{frac}")
}

/// Days since the epoch as `YYYY-MM-DD`.
pub fn format_date(days: i32) -> String {
    chrono::DateTime::from_timestamp(days as i64 * 86_400, 0)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_else(|| format!("<date {days}>"))
}

/// RFC 3339 in UTC with `Z`, with the precision of the column's unit.
pub fn format_timestamp(value: i64, unit: TimeUnit) -> String {
    let nanos = value as i128 * unit_nanos(unit);
    let secs = nanos.div_euclid(1_000_000_000) as i64;
    let sub = nanos.rem_euclid(1_000_000_000) as u32;
    let Some(dt) = chrono::DateTime::from_timestamp(secs, sub) else {
        return format!("<timestamp {value}>");
    };
    let base = dt.format("%Y-%m-%dT%H:%M:%S").to_string();
    match unit {
        TimeUnit::Second => format!("{base}Z"),
        TimeUnit::Millisecond => format!("{base}.{:03}Z", sub / 1_000_000),
        TimeUnit::Microsecond => format!("{base}.{:06}Z", sub / 1_000),
        TimeUnit::Nanosecond => format!("{base}.{sub:09}Z"),
    }
}

/// A float as JSON would print it, with `NaN`, `Infinity`, `-Infinity` spelled
/// out.
pub fn format_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        serde_json::to_string(&f).unwrap_or_else(|_| f.to_string())
    }
}

impl std::fmt::Display for Value {
    /// The human form used in text reports and in `expected`: numbers plain,
    /// text in single quotes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Null => f.write_str("null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => f.write_str(&format_float(*x)),
            Value::Decimal { value, scale } => f.write_str(&format_decimal(*value, *scale)),
            Value::Date(d) => f.write_str(&format_date(*d)),
            Value::Timestamp { value, unit } => f.write_str(&format_timestamp(*value, *unit)),
            Value::Text(s) => write!(f, "'{}'", s.replace('\'', "''")),
        }
    }
}

impl serde::Serialize for Value {
    /// The verdict's encoding: integers exact, decimals as strings with the
    /// column's scale, dates and timestamps as ISO text, NaN and infinities as
    /// the strings `"NaN"`, `"Infinity"`, `"-Infinity"` (JSON has no such
    /// numbers).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Null => s.serialize_none(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => match i64::try_from(*i) {
                Ok(v) => s.serialize_i64(v),
                Err(_) => s.serialize_i128(*i),
            },
            Value::Float(x) if x.is_finite() => s.serialize_f64(*x),
            Value::Float(x) => s.serialize_str(&format_float(*x)),
            Value::Decimal { value, scale } => s.serialize_str(&format_decimal(*value, *scale)),
            Value::Date(d) => s.serialize_str(&format_date(*d)),
            Value::Timestamp { value, unit } => s.serialize_str(&format_timestamp(*value, *unit)),
            Value::Text(t) => s.serialize_str(t),
        }
    }
}

#[cfg(test)]
mod format_tests {
    use super::*;

    #[test]
    fn decimals_keep_scale() {
        assert_eq!(format_decimal(1250, 2), "12.50");
        assert_eq!(format_decimal(-5, 2), "-0.05");
        assert_eq!(format_decimal(0, 2), "0.00");
        assert_eq!(format_decimal(7, 0), "7");
    }

    #[test]
    fn dates_and_timestamps() {
        assert_eq!(format_date(0), "1970-01-01");
        assert_eq!(format_date(-1), "1969-12-31");
        assert_eq!(
            format_timestamp(1_741_176_000_250, TimeUnit::Millisecond),
            "2025-03-05T12:00:00.250Z"
        );
        assert_eq!(
            format_timestamp(-1, TimeUnit::Second),
            "1969-12-31T23:59:59Z"
        );
        assert_eq!(
            format_timestamp(5, TimeUnit::Nanosecond),
            "1970-01-01T00:00:00.000000005Z"
        );
    }

    #[test]
    fn json_encoding() {
        let big = Value::Int(1i128 << 70);
        assert_eq!(
            serde_json::to_string(&big).unwrap(),
            "1180591620717411303424"
        );
        assert_eq!(
            serde_json::to_string(&Value::Float(f64::NAN)).unwrap(),
            "\"NaN\""
        );
        assert_eq!(serde_json::to_string(&Value::Float(0.25)).unwrap(), "0.25");
        assert_eq!(serde_json::to_string(&Value::Null).unwrap(), "null");
    }
}

/// An arithmetic operator between values: `+ - * /` (also the operator of the
/// rule language's value expressions, which re-export it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

/// Threshold arithmetic: exact on integers and decimals while it fits in 128
/// bits, floating otherwise; division is floating. Null propagates; non-numbers
/// give null (the checker rejects them before any data is read).
pub fn arith(op: ArithOp, a: &Value, b: &Value) -> Value {
    use ArithOp::*;
    if a.is_null() || b.is_null() || !a.is_numeric() || !b.is_numeric() {
        return Value::Null;
    }
    if let (Some(x), Some(y)) = (a.as_exact(), b.as_exact()) {
        if let Some(v) = exact_arith(op, x, y) {
            return v;
        }
    }
    let (x, y) = (
        a.as_f64().unwrap_or(f64::NAN),
        b.as_f64().unwrap_or(f64::NAN),
    );
    Value::Float(match op {
        Add => x + y,
        Sub => x - y,
        Mul => x * y,
        Div => x / y,
    })
}

fn exact_arith(op: ArithOp, x: (i128, i8), y: (i128, i8)) -> Option<Value> {
    use ArithOp::*;
    if x.1 < 0 || y.1 < 0 {
        return None;
    }
    let (v, scale) = match op {
        Add | Sub => {
            let scale = x.1.max(y.1);
            let xs = 10i128.checked_pow((scale - x.1) as u32)?.checked_mul(x.0)?;
            let ys = 10i128.checked_pow((scale - y.1) as u32)?.checked_mul(y.0)?;
            let v = if op == Add {
                xs.checked_add(ys)?
            } else {
                xs.checked_sub(ys)?
            };
            (v, scale)
        }
        Mul => (
            x.0.checked_mul(y.0)?,
            x.1.checked_add(y.1).filter(|s| *s <= 38)?,
        ),
        Div => return None,
    };
    Some(if scale == 0 {
        Value::Int(v)
    } else {
        Value::Decimal { value: v, scale }
    })
}

/// Negation, exact where possible.
pub fn negate(a: &Value) -> Value {
    match a {
        Value::Int(i) => i
            .checked_neg()
            .map_or(Value::Float(-(*i as f64)), Value::Int),
        Value::Decimal { value, scale } => {
            value.checked_neg().map_or(Value::Null, |v| Value::Decimal {
                value: v,
                scale: *scale,
            })
        }
        Value::Float(f) => Value::Float(-f),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod arith_tests {
    use super::ArithOp;
    use super::*;

    #[test]
    fn exact_where_possible() {
        let half = Value::Decimal { value: 5, scale: 1 };
        assert_eq!(
            arith(ArithOp::Mul, &half, &Value::Int(7)),
            Value::Decimal {
                value: 35,
                scale: 1
            }
        );
        assert_eq!(
            arith(ArithOp::Add, &Value::Int(1), &Value::Int(2)),
            Value::Int(3)
        );
        assert_eq!(
            arith(ArithOp::Div, &Value::Int(1), &Value::Int(4)),
            Value::Float(0.25)
        );
        assert_eq!(
            arith(ArithOp::Add, &Value::Null, &Value::Int(2)),
            Value::Null
        );
    }
}
