//! A verdict read back from its JSON form (`dqgate.verdict/v1`): what
//! `check --format json` and `publish --format json` print, and what an audit
//! record `_dqgate_audit.json` holds.
//!
//! Values stay JSON values: the JSON has lost the column types that
//! [`crate::value::Value`] needs (a date and a text look alike), and a report
//! only shows them. Keys this reader does not know (additions of later
//! versions) are ignored; the fixed keys must be there and well-typed.

use serde::Deserialize;
use serde_json::{Map, Value as Json};

use crate::dsl::ast::Severity;
use crate::verdict::json::FORMAT;
use crate::verdict::{Outcome, Status, Summary};

/// One verdict file: a verdict, or the record of a run that could not audit.
#[derive(Debug, Clone, PartialEq)]
pub enum Doc {
    Verdict(VerdictDoc),
    Error { message: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct VerdictDoc {
    pub table: String,
    /// The run key in `partitioned by` order.
    pub partition: Vec<(String, String)>,
    pub rules_path: String,
    pub rules_sha256: String,
    pub row_count: u64,
    pub files: usize,
    pub fingerprint: String,
    pub checks: Vec<CheckDoc>,
    pub compared_against: Option<String>,
    /// `published.version` of an audit record.
    pub published_version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CheckDoc {
    pub line: usize,
    pub name: String,
    #[serde(deserialize_with = "severity")]
    pub severity: Severity,
    pub metric: String,
    pub value: Json,
    pub expected: String,
    #[serde(deserialize_with = "status")]
    pub status: Status,
    #[serde(default)]
    pub samples: Option<Vec<SampleDoc>>,
    #[serde(default)]
    pub note: Option<String>,
    /// The file of the check's failed rows (`check --failed-rows DIR`).
    #[serde(default)]
    pub failed_rows: Option<FailedRowsDoc>,
}

/// A check's failed-rows file as the verdict names it, and its first rows
/// once read ([`super::rows::attach`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct FailedRowsDoc {
    /// Relative to the `--failed-rows` directory.
    pub path: String,
    pub rows: u64,
    pub cut: bool,
    /// The first rows, or why they could not be read; `None` when no
    /// directory was given.
    #[serde(skip)]
    pub preview: Option<Result<Preview, PreviewError>>,
}

/// Why a failed-rows file's first rows could not be shown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreviewError {
    #[error("cannot open {path}: {reason}")]
    Open { path: String, reason: String },
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{0}")]
    Format(String),
}

/// Column names and the first rows of a file, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preview {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SampleDoc {
    pub key: Map<String, Json>,
    pub rows: u64,
    /// `across published` samples: the published partition holding the key.
    #[serde(default)]
    pub partition: Option<String>,
}

impl CheckDoc {
    pub fn outcome(&self) -> Outcome {
        Outcome::of(self.status, self.severity)
    }
}

impl VerdictDoc {
    /// Counts recomputed from the checks (they are disjoint and add up).
    pub fn summary(&self) -> Summary {
        Summary::of(self.checks.iter().map(CheckDoc::outcome))
    }

    pub fn passed(&self) -> bool {
        self.summary().failed == 0
    }

    /// `k1=v1/k2=v2`, empty without a run key.
    pub fn run_key_text(&self) -> String {
        crate::verdict::run_key_text(&self.partition)
    }
}

/// A JSON value as a report shows it: text without quotes, numbers as
/// written, `null` for a null metric.
pub fn shown(v: &Json) -> String {
    match v {
        Json::Null => "null".into(),
        Json::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value a chart can place: a finite JSON number, or a decimal written as a
/// string (`"12.50"`). Dates, timestamps, text, NaN and nulls are not.
pub fn numeric(v: &Json) -> Option<f64> {
    let x = match v {
        Json::Number(n) => n.as_f64()?,
        Json::String(s)
            if s.bytes()
                .all(|b| b.is_ascii_digit() || b == b'-' || b == b'.') =>
        {
            s.parse().ok()?
        }
        _ => return None,
    };
    x.is_finite().then_some(x)
}

#[derive(Deserialize)]
struct Raw {
    format: String,
    verdict: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    table: Option<String>,
    #[serde(default)]
    partition: Option<Map<String, Json>>,
    #[serde(default)]
    rules: Option<RawRules>,
    #[serde(default)]
    input: Option<RawInput>,
    #[serde(default)]
    checks: Option<Vec<CheckDoc>>,
    #[serde(default)]
    compared_against: Option<String>,
    #[serde(default)]
    published: Option<RawPublished>,
}

#[derive(Deserialize)]
struct RawRules {
    path: String,
    sha256: String,
}

#[derive(Deserialize)]
struct RawInput {
    row_count: u64,
    files: Vec<Json>,
    fingerprint: String,
}

#[derive(Deserialize)]
struct RawPublished {
    version: String,
}

fn severity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Severity, D::Error> {
    match String::deserialize(d)?.as_str() {
        "check" => Ok(Severity::Check),
        "warn" => Ok(Severity::Warn),
        other => Err(serde::de::Error::custom(format!(
            "`severity` is `{other}`, not `check` or `warn`"
        ))),
    }
}

fn status<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Status, D::Error> {
    match String::deserialize(d)?.as_str() {
        "pass" => Ok(Status::Pass),
        "fail" => Ok(Status::Fail),
        "skipped" => Ok(Status::Skipped),
        other => Err(serde::de::Error::custom(format!(
            "`status` is `{other}`, not `pass`, `fail` or `skipped`"
        ))),
    }
}

/// Parses a verdict file's text: one document, or several in a row (`publish
/// --format json` prints the verdict and then an error record when the
/// publish itself fails). The error says what is wrong and where.
pub fn parse_all(text: &str) -> Result<Vec<Doc>, DocError> {
    let mut docs = Vec::new();
    for raw in serde_json::Deserializer::from_str(text).into_iter::<Raw>() {
        docs.push(doc(raw?)?);
    }
    if docs.is_empty() {
        return Err(DocError::Empty);
    }
    Ok(docs)
}

/// Parses exactly one document (an audit record).
pub fn parse(text: &str) -> Result<Doc, DocError> {
    doc(serde_json::from_str(text)?)
}

/// Why a file is not a verdict (or audit record) document.
#[derive(Debug, thiserror::Error)]
pub enum DocError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("no verdict in the file")]
    Empty,
    #[error("`format` is `{0}`, expected `{FORMAT}`")]
    Format(String),
    #[error("`verdict` is `{0}`, not `pass`, `fail` or `error`")]
    Verdict(String),
    #[error("`{0}` is missing")]
    Missing(&'static str),
    #[error("`verdict` is `{said}` but {failed} check(s) failed")]
    Disagrees { said: String, failed: usize },
}

fn doc(raw: Raw) -> Result<Doc, DocError> {
    if raw.format != FORMAT {
        return Err(DocError::Format(raw.format));
    }
    match raw.verdict.as_str() {
        "error" => Ok(Doc::Error {
            message: raw.error.unwrap_or_default(),
        }),
        "pass" | "fail" => verdict(raw).map(Doc::Verdict),
        other => Err(DocError::Verdict(other.to_string())),
    }
}

fn verdict(raw: Raw) -> Result<VerdictDoc, DocError> {
    let missing = DocError::Missing;
    let rules = raw.rules.ok_or_else(|| missing("rules"))?;
    let input = raw.input.ok_or_else(|| missing("input"))?;
    let doc = VerdictDoc {
        table: raw.table.ok_or_else(|| missing("table"))?,
        partition: raw
            .partition
            .ok_or_else(|| missing("partition"))?
            .into_iter()
            .map(|(k, v)| (k, shown(&v)))
            .collect(),
        rules_path: rules.path,
        rules_sha256: rules.sha256,
        row_count: input.row_count,
        files: input.files.len(),
        fingerprint: input.fingerprint,
        checks: raw.checks.ok_or_else(|| missing("checks"))?,
        compared_against: raw.compared_against,
        published_version: raw.published.map(|p| p.version),
    };
    let said_pass = raw.verdict == "pass";
    if said_pass != doc.passed() {
        return Err(DocError::Disagrees {
            said: raw.verdict,
            failed: doc.summary().failed,
        });
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_a_chart_can_place() {
        assert_eq!(numeric(&serde_json::json!(3)), Some(3.0));
        assert_eq!(numeric(&serde_json::json!("-12.50")), Some(-12.5));
        assert_eq!(numeric(&serde_json::json!("2025-03-05")), None);
        assert_eq!(numeric(&serde_json::json!("NaN")), None);
        assert_eq!(numeric(&serde_json::json!(null)), None);
    }

    #[test]
    fn rejects_what_is_not_a_verdict() {
        let why = |text: &str| parse(text).unwrap_err().to_string();
        assert!(why("{}").contains("missing field `format`"));
        let other = r#"{"format": "x", "verdict": "pass"}"#;
        assert!(why(other).contains("expected `dqgate.verdict/v1`"));
        let err = r#"{"format": "dqgate.verdict/v1", "verdict": "error", "error": "boom"}"#;
        assert_eq!(
            parse(err).unwrap(),
            Doc::Error {
                message: "boom".into()
            }
        );
        let bad = r#"{"format": "dqgate.verdict/v1", "verdict": "pass", "table": "t",
            "partition": {}, "rules": {"path": "r", "sha256": "s"},
            "input": {"row_count": 0, "files": [], "fingerprint": "f"},
            "checks": [{"line": 1, "name": "n", "severity": "check", "metric": "m",
                        "value": 1, "expected": "= 0", "status": "fail"}]}"#;
        assert!(why(bad).contains("1 check(s) failed"));
        let sev = bad.replace("\"check\", \"metric", "\"fatal\", \"metric");
        assert!(why(&sev).contains("`severity` is `fatal`"));
    }
}
