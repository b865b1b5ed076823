//! A small inline SVG line chart of one metric across published partitions:
//! the published values joined by a line in run-key order, this run's value
//! as a larger dot coloured by its outcome, and the threshold(s) as dashed
//! lines. Hovering a dot shows its run key and value (an SVG `<title>`, no
//! script). Coordinates are printed with one decimal, so the markup is
//! deterministic.

use std::fmt::Write as _;

use super::input::escape;
use crate::verdict::Outcome;

const W: f64 = 330.0;
const H: f64 = 150.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 14.0;
const TOP: f64 = 18.0;
const BOTTOM: f64 = 30.0;

/// One metric's points.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// The x axis: run keys in order (published ones and this run's).
    pub labels: Vec<String>,
    /// The published value at each label, if that partition is published
    /// and its record has a number for the metric.
    pub published: Vec<Option<f64>>,
    /// This run's values (one per verdict of the table in the report).
    pub runs: Vec<RunPoint>,
    /// Bounds from the expectation (`< 0.02`, `between 1 and 9`).
    pub thresholds: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunPoint {
    /// Index into `labels`.
    pub at: usize,
    pub value: f64,
    pub outcome: Outcome,
}

fn bounds(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

/// Room above and below; a range of non-negative values (counts, rates)
/// does not reach below zero.
fn pad(lo: f64, hi: f64) -> (f64, f64) {
    let pad = if hi > lo {
        (hi - lo) * 0.08
    } else {
        lo.abs().max(1.0) * 0.1
    };
    let bottom = if lo >= 0.0 {
        (lo - pad).max(0.0)
    } else {
        lo - pad
    };
    (bottom, hi + pad)
}

/// Numeric bounds of an `expected` text such as `< 0.02`, `= 0` or
/// `between 1000 and 50000000`; none when it names something else (a date,
/// an unresolved `published.*`).
pub fn thresholds(expected: &str) -> Vec<f64> {
    let words: Vec<&str> = expected.split_whitespace().collect();
    let num = |s: &str| s.parse::<f64>().ok().filter(|x| x.is_finite());
    match words.as_slice() {
        ["between", lo, "and", hi] => match (num(lo), num(hi)) {
            (Some(a), Some(b)) => vec![a, b],
            _ => vec![],
        },
        [op, v] if ["=", "==", "!=", "<", "<=", ">", ">="].contains(op) => {
            num(v).into_iter().collect()
        }
        _ => vec![],
    }
}

/// A number for an axis label: integers plainly, others with at most four
/// significant digits.
pub fn compact(x: f64) -> String {
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{}", x as i64);
    }
    if x.abs() < 1e-3 {
        return format!("{x:.2e}");
    }
    let magnitude = x.abs().log10().floor() as i32;
    let decimals = (3 - magnitude).clamp(0, 12) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn outcome_class(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "pass",
        Outcome::Failed => "fail",
        Outcome::Warned => "warn",
        Outcome::Skipped => "skip",
    }
}

impl Chart {
    /// The vertical range: the values, and the bounds near them (a bound far
    /// away, such as `row_count between 1 and 50_000_000`, would flatten the
    /// line; it is named at the chart's edge instead), padded; a flat series
    /// gets room around it.
    fn range(&self) -> (f64, f64) {
        let values = self
            .published
            .iter()
            .flatten()
            .copied()
            .chain(self.runs.iter().map(|r| r.value));
        let (lo, hi) = bounds(values);
        if lo > hi {
            let (lo, hi) = bounds(self.thresholds.iter().copied());
            return if lo > hi { (0.0, 1.0) } else { pad(lo, hi) };
        }
        let near = self.thresholds.iter().copied().filter(|t| {
            let reach = 2.0 * if hi > lo { hi - lo } else { lo.abs().max(1.0) };
            (lo - reach..=hi + reach).contains(t)
        });
        let (tlo, thi) = bounds(near);
        pad(lo.min(tlo), hi.max(thi))
    }

    /// The SVG markup; `label` names the metric for screen readers.
    pub fn svg(&self, label: &str) -> String {
        let (lo, hi) = self.range();
        let n = self.labels.len().max(1) as f64;
        let plot_w = W - LEFT - RIGHT;
        let plot_h = H - TOP - BOTTOM;
        let x = |i: usize| LEFT + (i as f64 + 0.5) * plot_w / n;
        let y = |v: f64| TOP + (hi - v) / (hi - lo) * plot_h;
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" aria-label=\"{}\">",
            escape(&format!("history of {label}"))
        );
        let _ = write!(
            s,
            "<rect class=\"plot\" x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w:.1}\" height=\"{plot_h:.1}\"/>"
        );
        for (v, anchor) in [(hi, TOP + 4.0), (lo, TOP + plot_h)] {
            let _ = write!(
                s,
                "<text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                LEFT - 6.0,
                anchor,
                escape(&compact(v))
            );
        }
        if let (Some(first), Some(last)) = (self.labels.first(), self.labels.last()) {
            let base = H - 10.0;
            let _ = write!(
                s,
                "<text class=\"axis\" x=\"{LEFT}\" y=\"{base}\" text-anchor=\"start\">{}</text>",
                escape(first)
            );
            if self.labels.len() > 1 {
                let _ = write!(
                    s,
                    "<text class=\"axis\" x=\"{:.1}\" y=\"{base}\" text-anchor=\"end\">{}</text>",
                    W - RIGHT,
                    escape(last)
                );
            }
        }
        for t in &self.thresholds {
            if !(lo..=hi).contains(t) {
                // Named in the margin: above the plot, or between the x labels.
                let (tx, ty, anchor, arrow) = if *t > hi {
                    (W - RIGHT, TOP - 6.0, "end", '↑')
                } else {
                    (LEFT + plot_w / 2.0, H - 10.0, "middle", '↓')
                };
                let _ = write!(
                    s,
                    "<text class=\"axis\" x=\"{tx:.1}\" y=\"{ty:.1}\" text-anchor=\"{anchor}\">{arrow} threshold {}</text>",
                    escape(&compact(*t))
                );
                continue;
            }
            let ty = y(*t);
            let _ = write!(
                s,
                "<line class=\"threshold\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{ty:.1}\" y2=\"{ty:.1}\"><title>threshold {}</title></line>",
                W - RIGHT,
                escape(&compact(*t))
            );
        }
        let points: Vec<(usize, f64)> = self
            .published
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.map(|v| (i, v)))
            .collect();
        if points.len() > 1 {
            let path: Vec<String> = points
                .iter()
                .map(|&(i, v)| format!("{:.1},{:.1}", x(i), y(v)))
                .collect();
            let _ = write!(
                s,
                "<polyline class=\"line\" points=\"{}\"/>",
                path.join(" ")
            );
        }
        for &(i, v) in &points {
            let _ = write!(
                s,
                "<circle class=\"published\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\"><title>{}: {} (published)</title></circle>",
                x(i),
                y(v),
                escape(&self.labels[i]),
                escape(&compact(v))
            );
        }
        for r in &self.runs {
            let _ = write!(
                s,
                "<circle class=\"run {}\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5.5\"><title>{}: {} (this run)</title></circle>",
                outcome_class(r.outcome),
                x(r.at),
                y(r.value),
                escape(&self.labels[r.at]),
                escape(&compact(r.value))
            );
        }
        s.push_str("</svg>");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_from_expectations() {
        assert_eq!(thresholds("< 0.02"), vec![0.02]);
        assert_eq!(thresholds("between 1000 and 50000000"), vec![1000.0, 5e7]);
        assert_eq!(
            thresholds(">= 0.5 * published.row_count"),
            Vec::<f64>::new()
        );
        assert_eq!(thresholds(">= 2025-03-05"), Vec::<f64>::new());
    }

    #[test]
    fn compact_numbers() {
        assert_eq!(compact(2400.0), "2400");
        assert_eq!(compact(0.059166666), "0.05917");
        assert_eq!(compact(-12.5), "-12.5");
        assert_eq!(compact(1234.5678), "1235");
        assert_eq!(compact(0.00009524), "9.52e-5");
    }

    #[test]
    fn places_points_inside_the_plot() {
        let c = Chart {
            labels: vec!["a".into(), "b".into(), "c".into()],
            published: vec![Some(1.0), None, Some(3.0)],
            runs: vec![RunPoint {
                at: 1,
                value: 2.0,
                outcome: Outcome::Failed,
            }],
            thresholds: vec![2.5],
        };
        let svg = c.svg("m");
        assert!(svg.contains("<polyline class=\"line\""));
        assert_eq!(svg.matches("<circle class=\"published\"").count(), 2);
        assert!(svg.contains("<circle class=\"run fail\""));
        assert!(svg.contains("<title>b: 2 (this run)</title>"));
        assert!(svg.contains("class=\"threshold\""));
        let far = Chart {
            thresholds: vec![1000.0],
            ..c
        };
        assert_eq!(far.range(), (0.84, 3.16));
        assert_eq!(pad(0.0, 0.0), (0.0, 0.1));
        assert!(far.svg("m").contains("↑ threshold 1000"));
    }
}
