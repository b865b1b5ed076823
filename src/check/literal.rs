//! Rule-language literals → [`Value`]s, with the checker's error messages.

use crate::dsl::ast::Literal;
use crate::value::{parse_date, parse_timestamp, Value};

/// What is wrong with a literal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiteralError {
    #[error("`{0}` is not a date of the form YYYY-MM-DD")]
    Date(String),
    #[error("`{0}` is not a timestamp of the form YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM]")]
    Timestamp(String),
    #[error("`{0}` is not a number")]
    Number(String),
    #[error("`{0}` is not a number or is too large")]
    Integer(String),
}

/// Converts a literal; the error says what is wrong with it.
pub fn literal_value(lit: &Literal) -> Result<Value, LiteralError> {
    match lit {
        Literal::Number { text, percent } => {
            let v = number(text)?;
            Ok(if *percent { percent_of(v) } else { v })
        }
        Literal::String(s) => Ok(Value::Text(s.clone())),
        Literal::Date(s) => parse_date(s)
            .map(Value::Date)
            .ok_or_else(|| LiteralError::Date(s.clone())),
        Literal::Timestamp(s) => {
            parse_timestamp(s).ok_or_else(|| LiteralError::Timestamp(s.clone()))
        }
    }
}

fn number(text: &str) -> Result<Value, LiteralError> {
    if text.contains(['e', 'E']) {
        return text
            .parse::<f64>()
            .map(Value::Float)
            .map_err(|_| LiteralError::Number(text.to_string()));
    }
    if let Some((int, frac)) = text.split_once('.') {
        let digits = format!("{int}{frac}");
        if frac.len() <= 38 {
            if let Ok(v) = digits.parse::<i128>() {
                return Ok(Value::Decimal {
                    value: v,
                    scale: frac.len() as i8,
                });
            }
        }
        return text
            .parse::<f64>()
            .map(Value::Float)
            .map_err(|_| LiteralError::Number(text.to_string()));
    }
    text.parse::<i128>()
        .map(Value::Int)
        .map_err(|_| LiteralError::Integer(text.to_string()))
}

fn percent_of(v: Value) -> Value {
    match v {
        Value::Int(i) => Value::Decimal { value: i, scale: 2 },
        Value::Decimal { value, scale } if scale <= 36 => Value::Decimal {
            value,
            scale: scale + 2,
        },
        other => Value::Float(other.as_f64().unwrap_or(f64::NAN) / 100.0),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::datatypes::TimeUnit;

    use super::*;

    fn num(t: &str, percent: bool) -> Value {
        literal_value(&Literal::Number {
            text: t.into(),
            percent,
        })
        .unwrap()
    }

    #[test]
    fn numbers_and_percents() {
        assert_eq!(num("1000", false), Value::Int(1000));
        assert_eq!(
            num("0.25", false),
            Value::Decimal {
                value: 25,
                scale: 2
            }
        );
        assert_eq!(num("1e6", false), Value::Float(1e6));
        assert_eq!(num("2", true), Value::Decimal { value: 2, scale: 2 });
        assert_eq!(num("0.5", true), Value::Decimal { value: 5, scale: 3 });
    }

    #[test]
    fn typed_literals() {
        assert_eq!(
            literal_value(&Literal::Date("1970-01-02".into())).unwrap(),
            Value::Date(1)
        );
        assert!(literal_value(&Literal::Date("2025-02-30".into())).is_err());
        assert_eq!(
            parse_timestamp("1970-01-01 00:00:01.250"),
            Some(Value::Timestamp {
                value: 1250,
                unit: TimeUnit::Millisecond
            })
        );
        assert_eq!(
            parse_timestamp("1970-01-01T01:00:00+01:00"),
            Some(Value::Timestamp {
                value: 0,
                unit: TimeUnit::Second
            })
        );
        assert_eq!(
            parse_timestamp("1970-01-01 00:00:00Z"),
            Some(Value::Timestamp {
                value: 0,
                unit: TimeUnit::Second
            })
        );
        assert_eq!(parse_timestamp("yesterday"), None);
        // Fuzz finding: a multi-byte character where an offset could start
        // panicked on slicing.
        assert_eq!(parse_timestamp("2025-03-06 0н00:00"), None);
        assert_eq!(parse_timestamp("2025-03-06 00:00:0é"), None);
    }
}
