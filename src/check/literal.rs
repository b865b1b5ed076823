//! Rule-language literals → [`Value`]s, with the checker's error messages.

use datafusion::arrow::datatypes::TimeUnit;

use crate::dsl::ast::Literal;
use crate::value::Value;

/// Converts a literal; the error text says what is wrong with it.
pub fn literal_value(lit: &Literal) -> Result<Value, String> {
    match lit {
        Literal::Number { text, percent } => {
            let v = number(text)?;
            Ok(if *percent { percent_of(v) } else { v })
        }
        Literal::String(s) => Ok(Value::Text(s.clone())),
        Literal::Date(s) => parse_date(s)
            .map(Value::Date)
            .ok_or_else(|| format!("`{s}` is not a date of the form YYYY-MM-DD")),
        Literal::Timestamp(s) => parse_timestamp(s).ok_or_else(|| {
            format!("`{s}` is not a timestamp of the form YYYY-MM-DD HH:MM:SS[.fraction][Z|+HH:MM]")
        }),
    }
}

fn number(text: &str) -> Result<Value, String> {
    if text.contains(['e', 'E']) {
        return text
            .parse::<f64>()
            .map(Value::Float)
            .map_err(|_| format!("`{text}` is not a number"));
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
            .map_err(|_| format!("`{text}` is not a number"));
    }
    text.parse::<i128>()
        .map(Value::Int)
        .map_err(|_| format!("`{text}` is not a number or is too large"))
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

/// `YYYY-MM-DD` → days since the epoch.
pub fn parse_date(s: &str) -> Option<i32> {
    let d = chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").ok()?;
    let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1)?;
    i32::try_from((d - epoch).num_days()).ok()
}

/// A timestamp literal; without an offset it is UTC. The unit follows the
/// number of fractional digits written (none: seconds, up to 3: ms, up to 6:
/// µs, else ns).
pub fn parse_timestamp(s: &str) -> Option<Value> {
    let s = s.trim();
    let (body, offset_secs) = split_offset(s)?;
    let body = body.replacen('T', " ", 1);
    let naive = chrono::NaiveDateTime::parse_from_str(&body, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(&body, "%Y-%m-%d %H:%M"))
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(&body, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
        })
        .ok()?;
    let frac = body.split_once('.').map_or(0, |(_, f)| f.len());
    let unit = match frac {
        0 => TimeUnit::Second,
        1..=3 => TimeUnit::Millisecond,
        4..=6 => TimeUnit::Microsecond,
        _ => TimeUnit::Nanosecond,
    };
    let utc = naive.and_utc().timestamp_nanos_opt()? as i128 - offset_secs as i128 * 1_000_000_000;
    let per = crate::value::unit_nanos(unit);
    Some(Value::Timestamp {
        value: i64::try_from(utc / per).ok()?,
        unit,
    })
}

/// Splits a trailing `Z` or `±HH:MM` offset off; returns the offset in seconds.
fn split_offset(s: &str) -> Option<(&str, i64)> {
    if let Some(body) = s.strip_suffix('Z').or_else(|| s.strip_suffix('z')) {
        return Some((body, 0));
    }
    // An offset needs a time part before it: look after the date.
    if s.len() > 10 {
        let tail_start = s.len().saturating_sub(6);
        // Not on a character boundary: no ASCII offset can be there.
        let Some(tail) = s.get(tail_start..) else {
            return Some((s, 0));
        };
        if let Some(sign) = tail.chars().next().filter(|c| *c == '+' || *c == '-') {
            let (h, m) = tail[1..].split_once(':')?;
            let secs = h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60;
            let secs = if sign == '-' { -secs } else { secs };
            return Some((&s[..tail_start], secs));
        }
    }
    Some((s, 0))
}

#[cfg(test)]
mod tests {
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
