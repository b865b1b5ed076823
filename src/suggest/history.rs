//! Baselines from the published partitions (`--table`): `history(N)`
//! statements whose factors keep this partition's value inside them.
//!
//! The statistic is computed by the judge's own function
//! ([`crate::verdict::history::statistic`]) over the same window the audit
//! uses: the published partitions whose run key sorts before this one, typed
//! like their columns, the last `N` of them.

use std::cmp::Ordering;

use datafusion::arrow::datatypes::Schema;

use crate::check::{HistoryRef, Metric};
use crate::dsl::ast::HistoryStat;
use crate::value::Value;
use crate::verdict::history::{statistic, History, PastRun, PastRuns, Unresolved};

/// How many published partitions a suggested baseline looks back over.
pub const WINDOW: u32 = 7;

const LOWER: [f64; 7] = [0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.0];
const UPPER: [f64; 6] = [2.0, 5.0, 10.0, 20.0, 50.0, 100.0];

/// The published runs before `run_key`, oldest first, as the audit's
/// baseline orders them.
pub fn before(past: &PastRuns, run_key: &[(String, String)], schema: &Schema) -> PastRuns {
    let keys: Vec<&str> = run_key.iter().map(|(k, _)| k.as_str()).collect();
    let typed = |pairs: &[(String, String)]| -> Vec<Value> {
        keys.iter()
            .map(|k| {
                let raw = pairs
                    .iter()
                    .find(|(n, _)| n == k)
                    .map_or("", |(_, v)| v.as_str());
                match schema.field_with_name(k) {
                    Ok(f) => crate::scalar::parse_as(raw, f.data_type()).ok(),
                    Err(_) => raw.parse::<i128>().ok().map(Value::Int),
                }
                .unwrap_or_else(|| Value::Text(raw.to_string()))
            })
            .collect()
    };
    let current = typed(run_key);
    let mut runs: Vec<(Vec<Value>, &PastRun)> = past
        .runs
        .iter()
        .map(|r| (typed(&r.partition), r))
        .filter(|(k, _)| compare(k, &current) == Ordering::Less)
        .collect();
    runs.sort_by(|a, b| compare(&a.0, &b.0));
    PastRuns {
        runs: runs.into_iter().map(|(_, r)| r.clone()).collect(),
        unrecorded: past.unrecorded,
        unreadable: past.unreadable,
    }
}

fn compare(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = x
            .compare(y)
            .unwrap_or_else(|| x.to_string().cmp(&y.to_string()));
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// `stat(history(WINDOW).metric)` over `window`, with the judge's note, or
/// why there is none.
pub fn stat(
    window: &PastRuns,
    stat: HistoryStat,
    metric: Metric,
) -> Result<(f64, String), Unresolved> {
    let h = HistoryRef {
        stat,
        n: WINDOW,
        metric,
    };
    let (v, note) = statistic(&h, History::Runs(window))?;
    v.as_f64()
        .filter(|x| x.is_finite())
        .map(|x| (x, note))
        .ok_or_else(|| Unresolved::NotANumber(h.text()))
}

/// Factors `(low, high)` from the rounded ladders with `low * base <= value
/// <= high * base`: the widest band that still reads as a rule (half to
/// twice, then further only when the value needs it). `None` on a side that
/// no factor fits.
pub fn factors(value: f64, base: f64) -> (Option<f64>, Option<f64>) {
    if base <= 0.0 {
        return (None, None);
    }
    let low = LOWER
        .iter()
        .copied()
        .find(|f| f * base <= value * (1.0 - 1e-9));
    let high = UPPER
        .iter()
        .copied()
        .find(|f| f * base >= value * (1.0 + 1e-9));
    (low, high)
}

/// A factor as a number literal (`0.5`, `2`).
pub fn factor_text(f: f64) -> String {
    let t = format!("{f}");
    t.strip_suffix(".0").map_or(t.clone(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factors_widen_only_when_needed() {
        assert_eq!(factors(2_400.0, 2_300.0), (Some(0.5), Some(2.0)));
        assert_eq!(factors(300.0, 2_300.0), (Some(0.1), Some(2.0)));
        assert_eq!(factors(9_000.0, 2_000.0), (Some(0.5), Some(5.0)));
        assert_eq!(factors(0.0, 2_000.0), (Some(0.0), Some(2.0)));
        assert_eq!(factors(1.0, 0.0), (None, None));
        assert_eq!(factor_text(0.5), "0.5");
        assert_eq!(factor_text(2.0), "2");
    }
}
