//! Bounds with headroom, and values as the rule language writes them.
//!
//! A suggested bound is a round number on the far side of what was
//! observed, so that it holds on the data it came from and leaves room for
//! the next partition: ranges of values step along 1, 2, 5, 10, 20, ...;
//! counts and rates keep two significant digits. Every bound is compared
//! exactly with the observed value (as the judge compares), never through
//! a float.

use crate::value::{format_date, format_decimal, format_timestamp, Value};
use crate::verdict::human::grouped;

/// A round number `mantissa * 10^exponent`, written exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Round {
    mantissa: i128,
    exponent: i32,
}

impl Round {
    fn value(self) -> Value {
        if self.exponent >= 0 {
            Value::Int(self.mantissa * 10i128.pow(self.exponent as u32))
        } else {
            Value::Decimal {
                value: self.mantissa,
                scale: (-self.exponent) as i8,
            }
        }
    }
}

/// The smallest of 1, 2, 5 × 10^k (or its negation) that is at least `v`
/// when `up`, at most `v` otherwise; `None` for a value that is not a finite
/// number or beyond 10^30.
pub fn step(v: &Value, up: bool) -> Option<Value> {
    let x = v.as_f64().filter(|x| x.is_finite())?;
    // Walk outwards (away from zero on the side that needs room).
    let outward = if up { x > 0.0 } else { x < 0.0 };
    if !outward {
        return Some(Value::Int(0));
    }
    let start = x.abs().log10().floor() as i32 - 1;
    for exponent in start.max(-18)..=30 {
        for m in [1i128, 2, 5] {
            let mantissa = if up { m } else { -m };
            let r = Round { mantissa, exponent }.value();
            let beyond = r
                .compare(v)
                .is_some_and(|o| if up { o.is_ge() } else { o.is_le() });
            if beyond {
                return Some(r);
            }
        }
    }
    None
}

/// `n` rounded to two significant digits, up or down: 2,437 → 2,500 / 2,400.
pub fn two_digits(n: u64, up: bool) -> u64 {
    let mut scale = 1u64;
    while n / scale >= 100 {
        scale *= 10;
    }
    let down = n / scale * scale;
    if up && down < n {
        down + scale
    } else {
        down
    }
}

/// A fraction's upper bound, as a percentage literal with two significant
/// digits: at least `rate` (exactly), e.g. `0.1184` → `12%`.
pub fn percent_up(rate: f64) -> String {
    let p = rate * 100.0;
    if p <= 0.0 {
        return "0%".into();
    }
    let exponent = p.log10().floor() as i32 - 1;
    let unit = 10f64.powi(exponent);
    let mut steps = (p / unit - 1e-9).ceil().max(1.0) as i64;
    // A float quotient can land one step short of `p`: step up until the
    // literal, read back, is at least the rate.
    loop {
        let text = decimal_text(steps, exponent);
        let back: f64 = text.parse::<f64>().unwrap_or(f64::MAX) / 100.0;
        if back >= rate {
            return format!("{text}%");
        }
        steps += 1;
    }
}

/// `steps * 10^exponent` as plain decimal text.
fn decimal_text(steps: i64, exponent: i32) -> String {
    if exponent >= 0 {
        (steps as i128 * 10i128.pow(exponent as u32)).to_string()
    } else {
        let t = format_decimal(steps as i128, (-exponent) as i8);
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t
        }
    }
}

/// A number literal with its integer digits grouped by `_`: `1_200_000`.
pub fn number(v: &Value) -> Option<String> {
    let text = match v {
        Value::Int(i) => i.to_string(),
        Value::Decimal { value, scale } => format_decimal(*value, *scale),
        _ => return None,
    };
    Some(grouped(&text).replace(',', "_"))
}

/// Any value the rule language can write as a literal: numbers, text,
/// dates, timestamps (in UTC, at the column's precision). `None` for
/// floats that are not finite, booleans and nulls.
pub fn literal(v: &Value) -> Option<String> {
    match v {
        Value::Int(_) | Value::Decimal { .. } => number(v),
        Value::Float(f) if f.is_finite() => Some(crate::value::format_float(*f)),
        Value::Text(s) => Some(format!("'{}'", s.replace('\'', "''"))),
        Value::Date(d) => Some(format!("date '{}'", format_date(*d))),
        Value::Timestamp { value, unit } => {
            let t = format_timestamp(*value, *unit);
            if t.starts_with('<') {
                return None;
            }
            let t = t.trim_end_matches('Z').replacen('T', " ", 1);
            Some(format!("timestamp '{t}'"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round_and_beyond_the_value() {
        let up = |v: Value| literal(&step(&v, true).unwrap()).unwrap();
        let down = |v: Value| literal(&step(&v, false).unwrap()).unwrap();
        assert_eq!(up(Value::Int(1_000_731)), "2_000_000");
        assert_eq!(up(Value::Int(2_000_000)), "2_000_000");
        assert_eq!(up(Value::Float(0.7)), "1");
        assert_eq!(up(Value::Float(0.07)), "0.1");
        assert_eq!(
            up(Value::Decimal {
                value: 249_999,
                scale: 2
            }),
            "5_000"
        );
        assert_eq!(down(Value::Int(-37)), "-50");
        assert_eq!(down(Value::Int(12)), "0");
        assert_eq!(up(Value::Int(-3)), "0");
        assert!(step(&Value::Float(f64::NAN), true).is_none());
    }

    #[test]
    fn counts_keep_two_digits() {
        assert_eq!(two_digits(2_437, true), 2_500);
        assert_eq!(two_digits(2_437, false), 2_400);
        assert_eq!(two_digits(2_400, true), 2_400);
        assert_eq!(two_digits(7, true), 7);
        assert_eq!(two_digits(0, false), 0);
    }

    #[test]
    fn percentages_hold_the_rate() {
        assert_eq!(percent_up(0.1184), "12%");
        assert_eq!(percent_up(0.000834), "0.084%");
        assert_eq!(percent_up(0.02), "2%");
        assert_eq!(percent_up(0.0), "0%");
        assert_eq!(percent_up(1.0 / 3.0), "34%");
    }

    #[test]
    fn literals_read_back() {
        assert_eq!(number(&Value::Int(-1_234_567)).unwrap(), "-1_234_567");
        assert_eq!(literal(&Value::Text("O'Hara".into())).unwrap(), "'O''Hara'");
        assert_eq!(literal(&Value::Date(20_152)).unwrap(), "date '2025-03-05'");
        let ts = Value::Timestamp {
            value: 1_741_176_000_250,
            unit: datafusion::arrow::datatypes::TimeUnit::Millisecond,
        };
        assert_eq!(literal(&ts).unwrap(), "timestamp '2025-03-05 12:00:00.250'");
    }
}
