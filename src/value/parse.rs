//! Dates and timestamps written as text (rule-file literals, Hive partition
//! values) → [`Value`]s.

use datafusion::arrow::datatypes::TimeUnit;

use super::Value;

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
    let per = super::unit_nanos(unit);
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
