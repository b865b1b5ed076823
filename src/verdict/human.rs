//! Numbers and values for people: what the text, Markdown and HTML outputs
//! show in place of the JSON's exact values.
//!
//! The JSON verdict keeps every value exact (`0.059166666666666666`,
//! `"< 0.02"`); these functions only change how a report shows them:
//!
//! - rates as percentages with three significant digits, more when needed to
//!   tell a value from its threshold: `5.92 %  (expected < 2 %)`;
//! - counts with digit grouping: `1,204,331`;
//! - `1 row`, `2 rows`;
//! - long text shortened, with its full length: `'aaaa…' (1,204 chars)`.
//!
//! They work on the values' shown text (a [`crate::value::Value`]'s
//! `Display`, or a JSON value read back by `dqgate report`), so every output
//! shows the same numbers the same way.

/// How a metric's values read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A fraction of rows, shown as a percentage.
    Rate,
    /// A number of rows, keys or values, shown with digit grouping.
    Count,
    /// Anything else (min, max, sum, avg, types): shown as it is.
    Plain,
}

/// The unit of a metric, from its name in the verdict.
pub fn unit_of(metric: &str) -> Unit {
    const RATES: [&str; 2] = ["null_rate(", "rate(where "];
    const COUNTS: [&str; 6] = [
        "null_count(",
        "distinct_count(",
        "duplicate_count(",
        "duplicate_count_across_published(",
        "primary_key_violations(",
        "count(where ",
    ];
    if RATES.iter().any(|p| metric.starts_with(p)) {
        Unit::Rate
    } else if metric == "row_count" || COUNTS.iter().any(|p| metric.starts_with(p)) {
        Unit::Count
    } else {
        Unit::Plain
    }
}

/// A check's value and expectation for people, from their shown forms
/// (`0.059166666666666666`, `< 0.02` → `5.92 %`, `< 2 %`). Text that is not
/// a number in the metric's unit is shown as it is (long text shortened).
pub fn value_and_expected(metric: &str, value: &str, expected: &str) -> (String, String) {
    let unit = unit_of(metric);
    let bounds = parse_expected(expected);
    match unit {
        Unit::Plain => (shorten(value), expected.to_string()),
        Unit::Count => (
            count_number(value, value),
            bounds.map_or_else(
                || expected.to_string(),
                |b| b.show(|t| count_number(t, value)),
            ),
        ),
        Unit::Rate => {
            let digits = rate_digits(value, bounds.as_ref());
            let show = |t: &str| match t.parse::<f64>() {
                Ok(x) if x.is_finite() => percent(x, digits),
                _ => t.to_string(),
            };
            (
                show(value),
                bounds.map_or_else(|| expected.to_string(), |b| b.show(show)),
            )
        }
    }
}

/// Significant digits for a rate: three, or as many as it takes for the
/// value not to read like a bound it differs from (`0.019999` against
/// `< 0.02` is `1.9999 %`, not `2 %`).
fn rate_digits(value: &str, bounds: Option<&Bounds<'_>>) -> usize {
    let (Ok(x), Some(b)) = (value.parse::<f64>(), bounds) else {
        return 3;
    };
    let limits: Vec<f64> = b.operands().iter().filter_map(|t| t.parse().ok()).collect();
    let mut digits = 3;
    while digits < 17
        && limits
            .iter()
            .any(|&y| y != x && percent(x, digits) == percent(y, digits))
    {
        digits += 1;
    }
    digits
}

/// `x` (a fraction) as a percentage with `digits` significant digits,
/// trailing zeros dropped: `percent(0.0591666, 3)` is `5.92 %`.
pub fn percent(x: f64, digits: usize) -> String {
    let p = x * 100.0;
    if p == 0.0 {
        return "0 %".into();
    }
    let magnitude = p.abs().log10().floor() as i64;
    let decimals = (digits as i64 - 1 - magnitude).clamp(0, 20) as usize;
    let text = format!("{p:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text} %")
}

/// A count, or a bound computed for one, grouped: integers exactly, other
/// numbers with two decimals at most (trailing zeros dropped: `1680.0` is
/// `1,680`), more when needed not to read like the `value` they differ from.
fn count_number(text: &str, value: &str) -> String {
    let x = match text.parse::<f64>() {
        Ok(x) if x.is_finite() && !text.bytes().all(|b| b.is_ascii_digit() || b == b'-') => x,
        _ => return grouped(text),
    };
    let round = |decimals: usize| {
        let t = format!("{x:.decimals$}");
        let t = t.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    };
    let v = value.parse::<f64>().ok();
    let mut decimals = 2;
    while decimals < 17 && v.is_some_and(|v| v != x && round(decimals).parse() == Ok(v)) {
        decimals += 1;
    }
    grouped(&round(decimals))
}

/// A decimal number with its integer digits grouped by thousands
/// (`1204331` → `1,204,331`, `-1200.5` → `-1,200.5`); other text unchanged.
pub fn grouped(text: &str) -> String {
    let (sign, rest) = match text.strip_prefix('-') {
        Some(r) => ("-", r),
        None => ("", text),
    };
    let (int, frac) = match rest.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (rest, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || frac.is_some_and(|f| !digits(f)) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + int.len() / 3);
    out.push_str(sign);
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// A count with its noun: `1 row`, `2,400 rows`.
pub fn count_of(n: u64, one: &str, many: &str) -> String {
    format!(
        "{} {}",
        grouped(&n.to_string()),
        if n == 1 { one } else { many }
    )
}

/// Longest text shown whole; longer text keeps its first 32 characters.
pub const MAX_CHARS: usize = 48;
const KEEP: usize = 32;

/// Long text shortened, with its full length: a quoted value keeps its
/// quotes (`'abc…' (1,204 chars)`); short text is unchanged.
pub fn shorten(text: &str) -> String {
    let n = text.chars().count();
    if n <= MAX_CHARS {
        return text.to_string();
    }
    let quoted = n >= 2 && text.starts_with('\'') && text.ends_with('\'');
    let (inner, len) = if quoted {
        (&text[1..text.len() - 1], n - 2)
    } else {
        (text, n)
    };
    let head: String = inner.chars().take(KEEP).collect();
    let q = if quoted { "'" } else { "" };
    format!("{q}{head}…{q} ({})", count_of(len as u64, "char", "chars"))
}

/// An expectation as the judge writes it: `OP VALUE` or `between LO and HI`.
enum Bounds<'a> {
    Op(&'a str, &'a str),
    Between(&'a str, &'a str),
}

impl Bounds<'_> {
    fn operands(&self) -> Vec<&str> {
        match self {
            Bounds::Op(_, v) => vec![v],
            Bounds::Between(lo, hi) => vec![lo, hi],
        }
    }

    fn show(&self, f: impl Fn(&str) -> String) -> String {
        match self {
            Bounds::Op(op, v) => format!("{op} {}", f(v)),
            Bounds::Between(lo, hi) => format!("between {} and {}", f(lo), f(hi)),
        }
    }
}

/// Parses an evaluated expectation whose operands are numbers; `None` for
/// anything else (text, dates, unevaluated references).
fn parse_expected(expected: &str) -> Option<Bounds<'_>> {
    let numeric = |s: &str| s.parse::<f64>().is_ok_and(f64::is_finite);
    if let Some(rest) = expected.strip_prefix("between ") {
        let (lo, hi) = rest.split_once(" and ")?;
        return (numeric(lo) && numeric(hi)).then_some(Bounds::Between(lo, hi));
    }
    let (op, v) = expected.split_once(' ')?;
    let is_op = matches!(op, "=" | "!=" | "<>" | "<" | "<=" | ">" | ">=");
    (is_op && numeric(v)).then_some(Bounds::Op(op, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(unit_of("null_rate(customer_id)"), Unit::Rate);
        assert_eq!(unit_of("rate(where amount > 0)"), Unit::Rate);
        assert_eq!(unit_of("row_count"), Unit::Count);
        assert_eq!(unit_of("count(where x not in stores(id))"), Unit::Count);
        assert_eq!(
            unit_of("duplicate_count(a, b) nulls not distinct"),
            Unit::Count
        );
        assert_eq!(unit_of("min(amount)"), Unit::Plain);
        assert_eq!(unit_of("avg(rate)"), Unit::Plain);
    }

    #[test]
    fn rates_read_as_percentages() {
        let pair = |v, e| value_and_expected("null_rate(c)", v, e);
        assert_eq!(
            pair("0.059166666666666666", "< 0.02"),
            ("5.92 %".into(), "< 2 %".into())
        );
        assert_eq!(
            pair("0.0008333333333333334", "< 0.005"),
            ("0.0833 %".into(), "< 0.5 %".into())
        );
        assert_eq!(pair("0", "= 0"), ("0 %".into(), "= 0 %".into()));
        assert_eq!(pair("1", ">= 0.999"), ("100 %".into(), ">= 99.9 %".into()));
        // A value just below its threshold does not read like it.
        assert_eq!(
            pair("0.019999", "< 0.02"),
            ("1.9999 %".into(), "< 2 %".into())
        );
        assert_eq!(
            pair("0.1", "between 0.05 and 0.25"),
            ("10 %".into(), "between 5 % and 25 %".into())
        );
        assert_eq!(pair("null", "< 0.02"), ("null".into(), "< 2 %".into()));
        assert_eq!(percent(0.000_000_123_4, 3), "0.0000123 %");
    }

    #[test]
    fn counts_are_grouped() {
        let pair = |v, e| value_and_expected("row_count", v, e);
        assert_eq!(
            pair("2400", "between 1000 and 50000000"),
            ("2,400".into(), "between 1,000 and 50,000,000".into())
        );
        assert_eq!(pair("12", ">= 1200.5"), ("12".into(), ">= 1,200.5".into()));
        assert_eq!(
            pair("2400", "between 1680.0 and 3600.0"),
            ("2,400".into(), "between 1,680 and 3,600".into())
        );
        assert_eq!(
            pair("2400", ">= -284.99938317287365"),
            ("2,400".into(), ">= -285".into())
        );
        // A bound just above the value does not read like it.
        assert_eq!(
            pair("1200", ">= 1200.0004"),
            ("1,200".into(), ">= 1,200.0004".into())
        );
        assert_eq!(grouped("-1234567"), "-1,234,567");
        assert_eq!(grouped("123"), "123");
        assert_eq!(grouped("1e21"), "1e21");
        assert_eq!(grouped("abc"), "abc");
        assert_eq!(
            grouped("340282366920938463463374607431768211455"),
            "340,282,366,920,938,463,463,374,607,431,768,211,455"
        );
        assert_eq!(count_of(1, "row", "rows"), "1 row");
        assert_eq!(count_of(0, "row", "rows"), "0 rows");
        assert_eq!(count_of(2400, "row", "rows"), "2,400 rows");
    }

    #[test]
    fn other_values_stay_as_they_are() {
        let pair = |v, e| value_and_expected("min(amount)", v, e);
        assert_eq!(pair("-12.50", ">= 0"), ("-12.50".into(), ">= 0".into()));
        let pair = |v, e| value_and_expected("row_count", v, e);
        assert_eq!(
            pair("2400", ">= 0.5 * published.row_count"),
            ("2,400".into(), ">= 0.5 * published.row_count".into())
        );
    }

    #[test]
    fn long_text_is_shortened_with_its_length() {
        assert_eq!(shorten("'EUR'"), "'EUR'");
        let long = format!("'{}'", "x".repeat(1204));
        assert_eq!(
            shorten(&long),
            format!("'{}…' (1,204 chars)", "x".repeat(32))
        );
        let multibyte = "é".repeat(60);
        assert_eq!(
            shorten(&multibyte),
            format!("{}… (60 chars)", "é".repeat(32))
        );
    }
}
