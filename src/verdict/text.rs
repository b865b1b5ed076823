//! The verdict for people: one line per check, samples under failures, and a
//! last line with the verdict.

use std::fmt::Write as _;

use super::{CheckResult, Status, Verdict};
use crate::dsl::ast::Severity;

/// Renders the text report.
pub fn render(v: &Verdict) -> String {
    let mut out = String::new();
    let partition = if v.partition.is_empty() {
        String::new()
    } else {
        let p: Vec<String> = v
            .partition
            .iter()
            .map(|(k, val)| format!("{k}={val}"))
            .collect();
        format!(" [{}]", p.join(", "))
    };
    let _ = writeln!(out, "table {}{partition}  rules {}", v.table, v.rules_path);
    let _ = writeln!(
        out,
        "input {} file(s), {} row(s), {}",
        v.input.files.len(),
        v.input.row_count,
        v.input.fingerprint
    );
    out.push('\n');
    let width = v
        .checks
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0)
        .min(60);
    for c in &v.checks {
        check_line(&mut out, c, width);
    }
    let s = v.summary();
    let _ = writeln!(
        out,
        "\nverdict: {}  ({} checks: {} passed, {} failed, {} warned, {} skipped)",
        if v.passed() { "PASS" } else { "FAIL" },
        s.checks,
        s.passed,
        s.failed,
        s.warned,
        s.skipped
    );
    out
}

fn mark(c: &CheckResult) -> &'static str {
    match (c.status, c.severity) {
        (Status::Pass, _) => "ok  ",
        (Status::Fail, Severity::Check) => "FAIL",
        (Status::Fail, Severity::Warn) => "WARN",
        (Status::Skipped, _) => "skip",
    }
}

fn check_line(out: &mut String, c: &CheckResult, width: usize) {
    let _ = write!(out, "{}  line {:<4} {:<width$}  ", mark(c), c.line, c.name);
    if c.status == Status::Skipped {
        let _ = writeln!(
            out,
            "expected {} (skipped: {})",
            c.expected,
            c.note.as_deref().unwrap_or("")
        );
        return;
    }
    let _ = writeln!(out, "{} = {}  (expected {})", c.metric, c.value, c.expected);
    if let Some(note) = &c.note {
        let _ = writeln!(out, "                 note: {note}");
    }
    for s in c.samples.iter().flatten() {
        let _ = writeln!(
            out,
            "                 {}  ({})",
            s.key_text(),
            s.rows_text()
        );
    }
    for d in c.drift.iter().flatten() {
        let _ = writeln!(out, "                 {}", super::schema::drift_line(d));
    }
}
