//! Conversions between our [`Value`] and DataFusion's `ScalarValue`.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;

use crate::value::Value;

/// A DataFusion scalar as a [`Value`]; `None` for kinds dqgate does not
/// report (binary, nested).
pub fn from_scalar(s: &ScalarValue) -> Option<Value> {
    use ScalarValue as S;
    if s.is_null() {
        return Some(Value::Null);
    }
    Some(match s {
        S::Boolean(Some(b)) => Value::Bool(*b),
        S::Int8(Some(v)) => Value::Int(*v as i128),
        S::Int16(Some(v)) => Value::Int(*v as i128),
        S::Int32(Some(v)) => Value::Int(*v as i128),
        S::Int64(Some(v)) => Value::Int(*v as i128),
        S::UInt8(Some(v)) => Value::Int(*v as i128),
        S::UInt16(Some(v)) => Value::Int(*v as i128),
        S::UInt32(Some(v)) => Value::Int(*v as i128),
        S::UInt64(Some(v)) => Value::Int(*v as i128),
        S::Float16(Some(v)) => Value::Float(v.to_f64()),
        S::Float32(Some(v)) => Value::Float(*v as f64),
        S::Float64(Some(v)) => Value::Float(*v),
        S::Decimal32(Some(v), _, s) => Value::Decimal {
            value: *v as i128,
            scale: *s,
        },
        S::Decimal64(Some(v), _, s) => Value::Decimal {
            value: *v as i128,
            scale: *s,
        },
        S::Decimal128(Some(v), _, s) => Value::Decimal {
            value: *v,
            scale: *s,
        },
        S::Decimal256(Some(v), _, s) => Value::Decimal {
            value: v.to_i128()?,
            scale: *s,
        },
        S::Date32(Some(d)) => Value::Date(*d),
        S::Date64(Some(ms)) => Value::Date((ms.div_euclid(86_400_000)) as i32),
        S::TimestampSecond(Some(v), _) => ts(*v, TimeUnit::Second),
        S::TimestampMillisecond(Some(v), _) => ts(*v, TimeUnit::Millisecond),
        S::TimestampMicrosecond(Some(v), _) => ts(*v, TimeUnit::Microsecond),
        S::TimestampNanosecond(Some(v), _) => ts(*v, TimeUnit::Nanosecond),
        S::Utf8(Some(t)) | S::LargeUtf8(Some(t)) | S::Utf8View(Some(t)) => Value::Text(t.clone()),
        S::Dictionary(_, inner) => return from_scalar(inner),
        _ => return None,
    })
}

fn ts(value: i64, unit: TimeUnit) -> Value {
    Value::Timestamp { value, unit }
}

/// A [`Value`] as a DataFusion literal (for `IN` lists and run-key values).
pub fn to_scalar(v: &Value) -> ScalarValue {
    match v {
        Value::Null => ScalarValue::Null,
        Value::Bool(b) => ScalarValue::Boolean(Some(*b)),
        Value::Int(i) => match i64::try_from(*i) {
            Ok(x) => ScalarValue::Int64(Some(x)),
            Err(_) => ScalarValue::Decimal128(Some(*i), 38, 0),
        },
        Value::Float(f) => ScalarValue::Float64(Some(*f)),
        Value::Decimal { value, scale } => ScalarValue::Decimal128(Some(*value), 38, *scale),
        Value::Date(d) => ScalarValue::Date32(Some(*d)),
        Value::Timestamp { value, unit } => {
            let tz = Some("UTC".into());
            match unit {
                TimeUnit::Second => ScalarValue::TimestampSecond(Some(*value), tz),
                TimeUnit::Millisecond => ScalarValue::TimestampMillisecond(Some(*value), tz),
                TimeUnit::Microsecond => ScalarValue::TimestampMicrosecond(Some(*value), tz),
                TimeUnit::Nanosecond => ScalarValue::TimestampNanosecond(Some(*value), tz),
            }
        }
        Value::Text(s) => ScalarValue::Utf8(Some(s.clone())),
    }
}

/// A run-key value that is not a value of its column's type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a valid {ty}")]
pub struct NotOfType {
    pub value: String,
    pub ty: DataType,
}

/// Parses a run-key value as the type of column `ty` (text when the cast is
/// not possible is an error the caller reports).
pub fn parse_as(value: &str, ty: &DataType) -> Result<Value, NotOfType> {
    let target = match ty {
        DataType::Dictionary(_, inner) => inner.as_ref(),
        other => other,
    };
    let parsed = match target {
        DataType::Date32 | DataType::Date64 => crate::value::parse_date(value).map(Value::Date),
        DataType::Timestamp(..) => crate::value::parse_timestamp(value),
        _ => ScalarValue::try_from_string(value.to_string(), target)
            .ok()
            .filter(|s| !s.is_null())
            .and_then(|s| from_scalar(&s)),
    };
    parsed.ok_or_else(|| NotOfType {
        value: value.to_string(),
        ty: target.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for v in [
            Value::Int(5),
            Value::Text("x".into()),
            Value::Date(3),
            Value::Decimal {
                value: 125,
                scale: 2,
            },
            Value::Timestamp {
                value: 7,
                unit: TimeUnit::Microsecond,
            },
        ] {
            assert_eq!(from_scalar(&to_scalar(&v)), Some(v));
        }
    }

    #[test]
    fn run_key_values_take_the_column_type() {
        assert_eq!(parse_as("42", &DataType::Int32), Ok(Value::Int(42)));
        assert_eq!(
            parse_as("1970-01-03", &DataType::Date32),
            Ok(Value::Date(2))
        );
        assert!(parse_as("abc", &DataType::Int64).is_err());
        assert_eq!(
            parse_as("EUR", &DataType::Utf8),
            Ok(Value::Text("EUR".into()))
        );
    }
}
