//! The verdict's JSON form (`dqgate.verdict/v1`) through serialize-only wire
//! structs with a fixed field order.
//!
//! The output is byte-identical for the same inputs: no clock, no host, no
//! absolute path, no map with unstable order. Fields beyond the spec
//! (`source`, `note`, `compared_against`, `published`, `read`, and on checks
//! `nulls`, `drift`, `compared_with` and `failed_rows`) are additions that do not change
//! the fixed keys.

use serde::Serialize;

use super::{CheckResult, InputFile, Sample, Verdict};
use crate::diagnostic::{self, Diagnostic};
use crate::dsl::ast::Severity;
use crate::value::Value;

pub const FORMAT: &str = "dqgate.verdict/v1";

/// The published form of a version, appended to the verdict in the audit
/// record `_dqgate_audit.json` so that a reader can use it as a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublishedManifest {
    /// The version's unique id (also the suffix of its file names).
    pub version: String,
    /// Data files under their published names, relative to the partition
    /// directory, sorted.
    pub files: Vec<PublishedFile>,
    /// The key indexes written beside the files, sorted by path (left out
    /// when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub key_indexes: Vec<KeyIndexFile>,
}

/// A key index in a version (see `keyindex`): its file, the key columns it
/// holds, its size and the XXH3-64 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyIndexFile {
    pub path: String,
    pub columns: Vec<String>,
    pub bytes: u64,
    pub checksum: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PublishedFile {
    pub path: String,
    /// The name it had in the staged directory (`input.files`).
    pub staged_path: String,
    pub bytes: u64,
}

/// The verdict as printed by `--format json`.
pub fn to_json(v: &Verdict) -> String {
    render(&wire(v, None))
}

/// The audit record: the verdict plus the `published` manifest, and the
/// `read` object of an audit that read other partitions (its read set).
pub fn to_record_json(
    v: &Verdict,
    published: &PublishedManifest,
    read: Option<&serde_json::Value>,
) -> String {
    let mut w = wire(v, Some(published));
    w.read = read;
    render(&w)
}

/// What `--format json` prints when the data could not be audited.
pub fn error_json(message: &str) -> String {
    #[derive(Serialize)]
    struct ErrorWire<'a> {
        format: &'static str,
        verdict: &'static str,
        error: &'a str,
    }
    render(&ErrorWire {
        format: FORMAT,
        verdict: "error",
        error: message,
    })
}

/// The error record of an invalid rule file: [`error_json`]'s keys, then
/// each diagnostic (code, line, column, message, help) and the text that
/// stderr shows.
pub fn rule_error_json(
    message: &str,
    file: &str,
    source: &str,
    diagnostics: &[Diagnostic],
) -> String {
    #[derive(Serialize)]
    struct RuleErrorWire<'a> {
        format: &'static str,
        verdict: &'static str,
        error: &'a str,
        diagnostics: Vec<diagnostic::DiagnosticWire<'a>>,
        rendered: String,
    }
    render(&RuleErrorWire {
        format: FORMAT,
        verdict: "error",
        error: message,
        diagnostics: diagnostic::wire(source, diagnostics),
        rendered: diagnostic::render(file, source, diagnostics),
    })
}

/// What `lint --format json` prints for a rule file without errors.
pub fn lint_ok_json(file: &str) -> String {
    #[derive(Serialize)]
    struct LintWire<'a> {
        format: &'static str,
        rules: &'a str,
        diagnostics: [(); 0],
    }
    render(&LintWire {
        format: "dqgate.lint/v1",
        rules: file,
        diagnostics: [],
    })
}

fn render<T: Serialize>(t: &T) -> String {
    let mut s = serde_json::to_string_pretty(t).expect("wire structs serialize");
    s.push('\n');
    s
}

#[derive(Serialize)]
struct VerdictWire<'a> {
    format: &'static str,
    verdict: &'static str,
    table: &'a str,
    partition: Pairs<'a>,
    rules: RulesWire<'a>,
    input: InputWire<'a>,
    checks: Vec<CheckWire<'a>>,
    summary: SummaryWire,
    #[serde(skip_serializing_if = "Option::is_none")]
    compared_against: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    published: Option<&'a PublishedManifest>,
    /// The record's read set: the table state the verdict holds for.
    #[serde(skip_serializing_if = "Option::is_none")]
    read: Option<&'a serde_json::Value>,
}

/// An ordered map of text pairs.
struct Pairs<'a>(&'a [(String, String)]);

impl Serialize for Pairs<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[derive(Serialize)]
struct RulesWire<'a> {
    path: &'a str,
    sha256: &'a str,
}

#[derive(Serialize)]
struct InputWire<'a> {
    row_count: u64,
    files: &'a [InputFile],
    fingerprint: &'a str,
}

impl Serialize for InputFile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct FileWire<'a> {
            path: &'a str,
            bytes: u64,
        }
        FileWire {
            path: &self.path,
            bytes: self.bytes,
        }
        .serialize(s)
    }
}

#[derive(Serialize)]
struct CheckWire<'a> {
    line: usize,
    name: &'a str,
    severity: &'static str,
    metric: &'a str,
    value: &'a Value,
    expected: &'a str,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    samples: Option<Vec<SampleWire<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    source: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    nulls: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    drift: Option<Vec<DriftWire<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compared_with: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_rows: Option<FailedRowsWire<'a>>,
}

/// The file of a check's offending rows (`--failed-rows DIR`).
#[derive(Serialize)]
struct FailedRowsWire<'a> {
    path: &'a str,
    rows: u64,
    cut: bool,
}

/// One column's difference from the published schema.
#[derive(Serialize)]
struct DriftWire<'a> {
    column: &'a str,
    change: &'static str,
    published: Option<&'a str>,
    staged: Option<&'a str>,
}

#[derive(Serialize)]
struct SampleWire<'a> {
    key: KeyWire<'a>,
    rows: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<&'a str>,
}

struct KeyWire<'a>(&'a [(String, Value)]);

impl Serialize for KeyWire<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

#[derive(Serialize)]
struct SummaryWire {
    checks: usize,
    passed: usize,
    failed: usize,
    warned: usize,
    skipped: usize,
}

pub fn severity_str(s: Severity) -> &'static str {
    match s {
        Severity::Check => "check",
        Severity::Warn => "warn",
    }
}

fn wire<'a>(v: &'a Verdict, published: Option<&'a PublishedManifest>) -> VerdictWire<'a> {
    let s = v.summary();
    VerdictWire {
        format: FORMAT,
        verdict: if v.passed() { "pass" } else { "fail" },
        table: &v.table,
        partition: Pairs(&v.partition),
        rules: RulesWire {
            path: &v.rules_path,
            sha256: &v.rules_sha256,
        },
        input: InputWire {
            row_count: v.input.row_count,
            files: &v.input.files,
            fingerprint: &v.input.fingerprint,
        },
        checks: v.checks.iter().map(check_wire).collect(),
        summary: SummaryWire {
            checks: s.checks,
            passed: s.passed,
            failed: s.failed,
            warned: s.warned,
            skipped: s.skipped,
        },
        compared_against: v.compared_against.as_deref(),
        published,
        read: None,
    }
}

fn check_wire(c: &CheckResult) -> CheckWire<'_> {
    CheckWire {
        line: c.line,
        name: &c.name,
        severity: severity_str(c.severity),
        metric: &c.metric,
        value: &c.value,
        expected: &c.expected,
        status: c.status.as_str(),
        samples: c
            .samples
            .as_ref()
            .map(|v| v.iter().map(sample_wire).collect()),
        note: c.note.as_deref(),
        source: match c.source {
            super::Source::Metadata => "metadata",
            super::Source::Scan => "scan",
        },
        nulls: c.nulls.map(|n| n.as_str()),
        drift: c.drift.as_ref().map(|d| {
            d.iter()
                .map(|d| DriftWire {
                    column: &d.column,
                    change: d.change.as_str(),
                    published: d.published.as_deref(),
                    staged: d.staged.as_deref(),
                })
                .collect()
        }),
        compared_with: c.compared_with.as_deref(),
        failed_rows: c.failed_rows.as_ref().map(|f| FailedRowsWire {
            path: &f.path,
            rows: f.rows,
            cut: f.cut,
        }),
    }
}

fn sample_wire(s: &Sample) -> SampleWire<'_> {
    SampleWire {
        key: KeyWire(&s.key),
        rows: s.rows,
        partition: s.partition.as_deref(),
    }
}
