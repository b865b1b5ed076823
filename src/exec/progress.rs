//! Progress on long scans: rows read of the total (known from the footers),
//! on stderr, only when stderr is a terminal. Never on stdout.
//!
//! DataFusion reports the rows its scans have produced in the plan's
//! metrics (the key engine's own reads, in a counter); a ticker reads them a
//! few times a second while a pass runs.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use datafusion::physical_plan::ExecutionPlan;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// A progress bar for one pass; hidden when stderr is not a terminal.
pub struct Progress {
    bar: ProgressBar,
    ticker: Option<tokio::task::JoinHandle<()>>,
    plan: Option<Arc<dyn ExecutionPlan>>,
}

/// Where a pass's rows read so far are.
enum Rows {
    Plan(Arc<dyn ExecutionPlan>),
    Counter(Arc<AtomicU64>),
}

impl Rows {
    fn read(&self) -> u64 {
        match self {
            Rows::Plan(plan) => rows_scanned(plan.as_ref()),
            Rows::Counter(n) => n.load(Ordering::Relaxed),
        }
    }
}

impl Progress {
    /// Starts showing the rows scanned by `plan`'s leaves out of `total`.
    pub fn start(label: &str, plan: Arc<dyn ExecutionPlan>, total: u64) -> Progress {
        Progress::watching(label, Rows::Plan(plan), total)
    }

    /// Starts showing the rows that readers count in `read`, of `total`.
    pub fn counting(label: &str, read: Arc<AtomicU64>, total: u64) -> Progress {
        Progress::watching(label, Rows::Counter(read), total)
    }

    fn watching(label: &str, rows: Rows, total: u64) -> Progress {
        let visible =
            std::io::stderr().is_terminal() && std::env::var_os("DQGATE_NO_PROGRESS").is_none();
        let bar = if visible {
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
        } else {
            ProgressBar::hidden()
        };
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix} [{bar:30}] {human_pos}/{human_len} rows ({rate}, {eta} left)",
        ) {
            let style = style.with_key(
                "rate",
                |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                    let _ = w.write_str(&rate(state.per_sec()));
                },
            );
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        let plan = match &rows {
            Rows::Plan(plan) => Some(plan.clone()),
            Rows::Counter(_) => None,
        };
        let ticker = visible.then(|| {
            let bar = bar.clone();
            tokio::spawn(async move {
                loop {
                    bar.set_position(rows.read().min(total));
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        });
        Progress { bar, ticker, plan }
    }

    /// Bytes the pass spilled to disk (under `--memory-limit`).
    pub fn spilled_bytes(&self) -> u64 {
        self.plan.as_ref().map_or(0, |p| spilled(p.as_ref()))
    }
}

fn spilled(plan: &dyn ExecutionPlan) -> u64 {
    let own = plan.metrics().and_then(|m| m.spilled_bytes()).unwrap_or(0) as u64;
    own + plan
        .children()
        .iter()
        .map(|c| spilled(c.as_ref()))
        .sum::<u64>()
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
        self.bar.finish_and_clear();
    }
}

/// Rows produced so far by the plan's leaves (the scans).
fn rows_scanned(plan: &dyn ExecutionPlan) -> u64 {
    let children = plan.children();
    if children.is_empty() {
        return plan.metrics().and_then(|m| m.output_rows()).unwrap_or(0) as u64;
    }
    children.iter().map(|c| rows_scanned(c.as_ref())).sum()
}

/// A scan rate for people, with an SI prefix and one decimal below ten:
/// `950 rows/s`, `9.3 k rows/s`, `9.3 M rows/s`, `12 G rows/s`; a rate that
/// would round to 1000 takes the next prefix (`1.0 M rows/s`, not `1000 k`).
pub fn rate(per_sec: f64) -> String {
    if !per_sec.is_finite() || per_sec < 0.0 {
        return "- rows/s".into();
    }
    // Two significant digits: one decimal below ten (as rounded).
    let shown = |v: f64| {
        if format!("{v:.1}").parse::<f64>().is_ok_and(|r| r < 10.0) {
            format!("{v:.1}")
        } else {
            format!("{v:.0}")
        }
    };
    // A prefix once the unit below it would round to 1000.
    for (scale, prefix) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if per_sec >= scale * 0.9995 {
            return format!("{} {prefix} rows/s", shown(per_sec / scale));
        }
    }
    format!("{per_sec:.0} rows/s")
}

#[cfg(test)]
mod tests {
    use super::rate;

    #[test]
    fn rates_read_with_a_prefix() {
        assert_eq!(rate(9_348_900.938_2), "9.3 M rows/s");
        assert_eq!(rate(12_500_000.0), "12 M rows/s");
        assert_eq!(rate(950.4), "950 rows/s");
        assert_eq!(rate(0.0), "0 rows/s");
        assert_eq!(rate(1_500.0), "1.5 k rows/s");
        assert_eq!(rate(2.4e9), "2.4 G rows/s");
        assert_eq!(rate(f64::NAN), "- rows/s");
        assert_eq!(rate(999_999.0), "1.0 M rows/s");
        assert_eq!(rate(9_960.0), "10 k rows/s");
        assert_eq!(rate(999.7), "1.0 k rows/s");
    }
}
