//! `STAT(history(N).METRIC)`: a statistic of a metric over the audit records
//! of the last `N` published partitions before this one.
//!
//! The baseline is built from audit records only, so a run that failed or
//! was never published cannot enter it; a record whose verdict is not `pass`
//! (which dqgate never writes) is left out as well. Records are given here
//! already ordered by run key, oldest first, and restricted to run keys that
//! sort before the audited one (see `audit::history`).

use crate::check::{HistoryRef, Metric};
use crate::dsl::ast::HistoryStat;
use crate::value::Value;

/// What one published partition's audit record says, as history reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct PastRun {
    /// The run key, in `partitioned by` order.
    pub partition: Vec<(String, String)>,
    /// The record's `verdict` is `pass`.
    pub passed: bool,
    /// `input.row_count`.
    pub row_count: Option<u64>,
    /// Each check's `metric` and `value`, first occurrence of each metric.
    pub metrics: Vec<(String, Value)>,
}

impl PastRun {
    /// The metric's value in this record; `None` when no check measured it.
    pub fn value(&self, m: &Metric) -> Option<Value> {
        if *m == Metric::RowCount {
            return self.row_count.map(|n| Value::Int(n as i128));
        }
        let name = m.name();
        self.metrics
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    }

    fn key(&self) -> String {
        self.partition
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// Published partitions of a table, as read from their audit records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PastRuns {
    pub runs: Vec<PastRun>,
    /// Partition directories without an audit record (not published by
    /// dqgate): never used.
    pub unrecorded: usize,
    /// Audit records that could not be read as JSON: never used.
    pub unreadable: usize,
}

/// Where the history comes from.
#[derive(Debug, Clone, Copy)]
pub enum History<'a> {
    /// No `--table`: history cannot be read.
    NotGiven,
    /// The published partitions before the audited one, oldest first.
    Runs(&'a PastRuns),
}

/// Why a threshold could not be evaluated: the check is skipped, with this
/// as its note.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Unresolved {
    /// `published.*` with nothing published to read it from.
    #[error("{0}")]
    NotPublished(String),
    #[error("no --table given, so {0} cannot be resolved")]
    NoTable(String),
    #[error("{text}: no published partition before this run key{}", joined_remarks(.remarks))]
    NoneBefore { text: String, remarks: Vec<String> },
    /// The records were read (`note` says which) but hold no value.
    #[error("{0}; no value to compute it from")]
    NoValue(String),
    #[error("{0}; stddev needs at least 2 values")]
    TooFewForStddev(String),
    #[error("{0} is not a number")]
    NotANumber(String),
}

/// `; remark; remark`, or nothing.
fn joined_remarks(remarks: &[String]) -> String {
    if remarks.is_empty() {
        String::new()
    } else {
        format!("; {}", remarks.join("; "))
    }
}

/// A statistic's value and a note on the records it was computed over; or
/// why it could not be computed (the check is then skipped).
pub fn statistic(h: &HistoryRef, history: History<'_>) -> Result<(Value, String), Unresolved> {
    let text = h.text();
    let History::Runs(past) = history else {
        return Err(Unresolved::NoTable(text));
    };
    let runs = &past.runs;
    let published: Vec<&PastRun> = runs.iter().filter(|r| r.passed).collect();
    let not_passed = runs.len() - published.len();
    let window = &published[published.len().saturating_sub(h.n as usize)..];
    let mut values = Vec::new();
    let (mut lacking, mut null) = (0, 0);
    for run in window {
        match run.value(&h.metric) {
            None => lacking += 1,
            Some(v) => match v.as_f64() {
                Some(_) => values.push(v),
                None => null += 1,
            },
        }
    }
    let mut remarks = Vec::new();
    if past.unrecorded > 0 {
        let dirs = if past.unrecorded == 1 {
            "directory"
        } else {
            "directories"
        };
        remarks.push(format!(
            "{} partition {dirs} without an audit record (not published by dqgate) ignored",
            past.unrecorded
        ));
    }
    if past.unreadable > 0 {
        remarks.push(format!(
            "{} unreadable audit record(s) ignored",
            past.unreadable
        ));
    }
    if not_passed > 0 {
        remarks.push(format!(
            "{not_passed} record(s) whose verdict is not pass left out"
        ));
    }
    if lacking > 0 {
        remarks.push(format!(
            "{lacking} record(s) without {} left out (the rule file changed?)",
            h.metric.name()
        ));
    }
    if null > 0 {
        remarks.push(format!("{null} record(s) with a null value left out"));
    }
    if window.is_empty() {
        return Err(Unresolved::NoneBefore { text, remarks });
    }
    let span = match (window.first(), window.last()) {
        (Some(a), Some(b)) if window.len() > 1 => format!("{} .. {}", a.key(), b.key()),
        (Some(a), _) => a.key(),
        _ => String::new(),
    };
    let mut note = if window.len() < h.n as usize {
        format!(
            "{text} over {} value(s) from {} of {} partitions ({span}): fewer published partitions than asked for",
            values.len(),
            window.len(),
            h.n
        )
    } else {
        format!(
            "{text} over {} value(s) from {} partitions ({span})",
            values.len(),
            window.len()
        )
    };
    if !remarks.is_empty() {
        note = format!("{note}; {}", remarks.join("; "));
    }
    if values.is_empty() {
        return Err(Unresolved::NoValue(note));
    }
    match compute(h.stat, &values) {
        Some(v) => Ok((v, note)),
        None => Err(Unresolved::TooFewForStddev(note)),
    }
}

/// The statistic over numeric values (in key order); `None` when undefined.
pub fn compute(stat: HistoryStat, values: &[Value]) -> Option<Value> {
    let floats: Vec<f64> = values.iter().filter_map(Value::as_f64).collect();
    let n = floats.len();
    if n == 0 {
        return None;
    }
    let mean = floats.iter().sum::<f64>() / n as f64;
    let pick = |want: std::cmp::Ordering| {
        values
            .iter()
            .cloned()
            .reduce(|a, b| if b.compare(&a) == Some(want) { b } else { a })
    };
    match stat {
        HistoryStat::Avg => Some(Value::Float(mean)),
        HistoryStat::Min => pick(std::cmp::Ordering::Less),
        HistoryStat::Max => pick(std::cmp::Ordering::Greater),
        HistoryStat::Median => {
            let mut sorted = floats;
            sorted.sort_by(f64::total_cmp);
            let mid = n / 2;
            Some(Value::Float(if n % 2 == 1 {
                sorted[mid]
            } else {
                (sorted[mid - 1] + sorted[mid]) / 2.0
            }))
        }
        HistoryStat::Stddev if n < 2 => None,
        HistoryStat::Stddev => {
            let var = floats.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            Some(Value::Float(var.sqrt()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(day: &str, rows: u64, passed: bool, nulls: Option<f64>) -> PastRun {
        PastRun {
            partition: vec![("d".into(), day.into())],
            passed,
            row_count: Some(rows),
            metrics: nulls
                .map(|r| vec![("null_rate(sku)".to_string(), Value::Float(r))])
                .unwrap_or_default(),
        }
    }

    fn href(stat: HistoryStat, n: u32, metric: Metric) -> HistoryRef {
        HistoryRef { stat, n, metric }
    }

    #[test]
    fn statistics() {
        let v: Vec<Value> = [4, 1, 3, 2].into_iter().map(Value::Int).collect();
        assert_eq!(compute(HistoryStat::Avg, &v), Some(Value::Float(2.5)));
        assert_eq!(compute(HistoryStat::Median, &v), Some(Value::Float(2.5)));
        assert_eq!(
            compute(HistoryStat::Median, &v[..3]),
            Some(Value::Float(3.0))
        );
        assert_eq!(compute(HistoryStat::Min, &v), Some(Value::Int(1)));
        assert_eq!(compute(HistoryStat::Max, &v), Some(Value::Int(4)));
        let sd = compute(HistoryStat::Stddev, &v)
            .and_then(|v| v.as_f64())
            .unwrap();
        assert!((sd - 1.2909944487358056).abs() < 1e-12, "{sd}");
        assert_eq!(compute(HistoryStat::Stddev, &v[..1]), None);
    }

    #[test]
    fn window_is_the_last_n_published_runs() {
        let runs = PastRuns {
            runs: vec![
                run("1", 100, true, None),
                run("2", 200, true, Some(0.1)),
                run("3", 999, false, Some(0.9)),
                run("4", 300, true, Some(0.3)),
            ],
            ..PastRuns::default()
        };
        let h = href(HistoryStat::Avg, 2, Metric::RowCount);
        let (v, note) = statistic(&h, History::Runs(&runs)).unwrap();
        assert_eq!(v, Value::Float(250.0));
        assert!(note.contains("from 2 partitions (d=2 .. d=4)"), "{note}");
        assert!(
            note.contains("1 record(s) whose verdict is not pass"),
            "{note}"
        );

        let h = href(HistoryStat::Max, 7, Metric::NullRate("sku".into()));
        let (v, note) = statistic(&h, History::Runs(&runs)).unwrap();
        assert_eq!(v, Value::Float(0.3));
        assert!(note.contains("from 3 of 7 partitions"), "{note}");
        assert!(
            note.contains("1 record(s) without null_rate(sku)"),
            "{note}"
        );
    }

    #[test]
    fn nothing_to_compute_is_a_reason_to_skip() {
        let h = href(HistoryStat::Median, 3, Metric::RowCount);
        assert!(statistic(&h, History::NotGiven)
            .unwrap_err()
            .to_string()
            .contains("no --table"));
        let empty = PastRuns {
            unrecorded: 2,
            ..PastRuns::default()
        };
        let why = statistic(&h, History::Runs(&empty))
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("no published partition before this run key")
                && why.contains("2 partition directories without an audit record"),
            "{why}"
        );
        let h = href(HistoryStat::Stddev, 3, Metric::RowCount);
        let one = PastRuns {
            runs: vec![run("1", 5, true, None)],
            ..PastRuns::default()
        };
        assert!(statistic(&h, History::Runs(&one))
            .unwrap_err()
            .to_string()
            .contains("at least 2 values"));
    }
}
