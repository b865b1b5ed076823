//! Observations + thresholds → [`Verdict`]; its stable JSON and text forms.
//!
//! A verdict never acts. `publish` accepts only a [`PassedVerdict`], which
//! only [`Verdict::into_passed`] can construct.

pub mod history;
pub mod human;
pub mod json;
pub mod judge;
pub mod junit;
pub mod markdown;
pub mod schema;
pub mod text;

use crate::dsl::ast::{Nulls, Severity};
use crate::value::Value;

/// `pass`, `fail` or `skipped` for one statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Pass,
    Fail,
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skipped => "skipped",
        }
    }
}

/// How one statement came out, as reports show it: a `warn` that does not
/// hold is `Warned`, not `Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Failed,
    Warned,
    Skipped,
}

impl Outcome {
    pub fn of(status: Status, severity: Severity) -> Outcome {
        match (status, severity) {
            (Status::Pass, _) => Outcome::Passed,
            (Status::Skipped, _) => Outcome::Skipped,
            (Status::Fail, Severity::Check) => Outcome::Failed,
            (Status::Fail, Severity::Warn) => Outcome::Warned,
        }
    }
}

/// One offending key (or value, or row shape) and how many rows carry it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Column name and value, in the statement's column order.
    pub key: Vec<(String, Value)>,
    pub rows: u64,
    /// For `unique(...) across published`: the published partition
    /// (`k=v[/k=v]`) where the key also occurs.
    pub partition: Option<String>,
}

impl Sample {
    /// `k1=v1, k2=v2`, values in their human form (text quoted, long text
    /// shortened with its length).
    pub fn key_text(&self) -> String {
        let parts: Vec<String> = self
            .key
            .iter()
            .map(|(k, v)| format!("{k}={}", human::shorten(&v.to_string())))
            .collect();
        parts.join(", ")
    }

    /// `1 row`, `2,400 rows`, and where else the key lives for `across
    /// published` samples: `2 rows, also in sales_date=2025-03-05`.
    pub fn rows_text(&self) -> String {
        rows_text(self.rows, self.partition.as_deref())
    }
}

/// How a metric was obtained: from Parquet footers alone, or by a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Metadata,
    Scan,
}

/// The outcome of one statement.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    pub line: usize,
    pub name: String,
    pub severity: Severity,
    pub metric: String,
    pub value: Value,
    /// The expectation with references evaluated, e.g. `< 0.02`.
    pub expected: String,
    pub status: Status,
    /// Offending keys, on failed checks that collect them.
    pub samples: Option<Vec<Sample>>,
    /// Why a check was skipped, or a remark on how it was judged.
    pub note: Option<String>,
    pub source: Source,
    /// The declared null semantics of a key check (`nulls distinct` or
    /// `nulls not distinct` written in the rule); `None` when not declared.
    pub nulls: Option<Nulls>,
    /// Column-by-column differences of a `schema matches published` check.
    pub drift: Option<Vec<Drift>>,
    /// The other partition (`k=v`) a `schema matches published` check
    /// compared with, when nothing was published for the run key: the
    /// table's partition that sorts last by run key.
    pub compared_with: Option<String>,
    /// The Parquet file of the check's offending rows, when
    /// `--failed-rows DIR` wrote one.
    pub failed_rows: Option<FailedRows>,
}

/// A check's offending rows as written by `--failed-rows DIR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedRows {
    /// The file's name, relative to DIR (a verdict carries no absolute path).
    pub path: String,
    /// Rows in the file.
    pub rows: u64,
    /// True when the check had more offending rows than the limit
    /// (`--failed-rows-limit`) and the file holds only the first ones.
    pub cut: bool,
}

/// One difference between the published and the staged schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drift {
    pub column: String,
    pub change: DriftKind,
    /// The published side (type, nullability or both), `None` for an extra
    /// column.
    pub published: Option<String>,
    /// The staged side, `None` for a missing column.
    pub staged: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DriftKind {
    /// Published, but not in the staged files.
    Missing,
    /// In the staged files, not published.
    Extra,
    /// The Arrow type changed.
    Type,
    /// Nullable became required or the other way round.
    Nullability,
}

impl DriftKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DriftKind::Missing => "missing",
            DriftKind::Extra => "extra",
            DriftKind::Type => "type",
            DriftKind::Nullability => "nullability",
        }
    }
}

impl CheckResult {
    pub fn outcome(&self) -> Outcome {
        Outcome::of(self.status, self.severity)
    }
}

/// A staged data file as the verdict lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Relative to the staged directory, `/`-separated.
    pub path: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InputSummary {
    pub row_count: u64,
    pub files: Vec<InputFile>,
    pub fingerprint: String,
}

/// The audit's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub table: String,
    /// The run key, in `partitioned by` order.
    pub partition: Vec<(String, String)>,
    /// The rule file's path as given (relative), or its file name.
    pub rules_path: String,
    pub rules_sha256: String,
    pub input: InputSummary,
    pub checks: Vec<CheckResult>,
    /// The fingerprint of the published version that `published.*` checks
    /// were computed against; `None` when nothing was published.
    pub compared_against: Option<String>,
}

/// Disjoint counts that add up to the number of checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    pub checks: usize,
    pub passed: usize,
    pub failed: usize,
    pub warned: usize,
    pub skipped: usize,
}

impl Summary {
    /// Counts the outcomes of a verdict's checks.
    pub fn of(outcomes: impl IntoIterator<Item = Outcome>) -> Summary {
        let mut s = Summary::default();
        for o in outcomes {
            s.checks += 1;
            match o {
                Outcome::Passed => s.passed += 1,
                Outcome::Failed => s.failed += 1,
                Outcome::Warned => s.warned += 1,
                Outcome::Skipped => s.skipped += 1,
            }
        }
        s
    }
}

/// A sample's row count for people (`1 row`, `2,400 rows`), and for an
/// `across published` sample the partition that also holds the key.
pub fn rows_text(rows: u64, partition: Option<&str>) -> String {
    let rows = human::count_of(rows, "row", "rows");
    match partition {
        Some(p) => format!("{rows}, also in {p}"),
        None => rows,
    }
}

/// A run key as `k1=v1/k2=v2` (empty without `partitioned by`).
pub fn run_key_text(partition: &[(String, String)]) -> String {
    let parts: Vec<String> = partition.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join("/")
}

impl Verdict {
    pub fn summary(&self) -> Summary {
        Summary::of(self.checks.iter().map(CheckResult::outcome))
    }

    /// True when no `check` statement failed.
    pub fn passed(&self) -> bool {
        self.summary().failed == 0
    }

    /// The run key as `k1=v1/k2=v2` (empty without `partitioned by`).
    pub fn run_key_text(&self) -> String {
        run_key_text(&self.partition)
    }

    /// The only way to obtain a [`PassedVerdict`].
    pub fn into_passed(self) -> Result<PassedVerdict, Box<Verdict>> {
        if self.passed() {
            Ok(PassedVerdict(self))
        } else {
            Err(Box::new(self))
        }
    }
}

/// A verdict that passed: the only kind `publish` accepts.
#[derive(Debug, Clone)]
pub struct PassedVerdict(Verdict);

impl PassedVerdict {
    pub fn verdict(&self) -> &Verdict {
        &self.0
    }
}

impl std::ops::Deref for PassedVerdict {
    type Target = Verdict;
    fn deref(&self) -> &Verdict {
        &self.0
    }
}
