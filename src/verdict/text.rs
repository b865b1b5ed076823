//! The verdict for people: one line per check, samples under failures, and a
//! last line with the verdict.
//!
//! Values read as people read them (see [`super::human`]): rates as
//! percentages, counts grouped, `1 row` / `2 rows`, long text shortened.
//! With colour (`--color`, see [`Colour`]), the marks `ok`, `FAIL`, `WARN`
//! and `skip` and the verdict word are coloured; the text is otherwise the
//! same byte for byte.

use std::fmt::Write as _;

use super::human::{self, count_of};
use super::{CheckResult, Outcome, Verdict};

/// Whether the marks are coloured (ANSI SGR sequences).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Colour {
    #[default]
    Off,
    On,
}

impl Colour {
    /// `text` in the colour of `outcome`, or as it is without colour.
    fn paint(self, outcome: Outcome, text: &str) -> String {
        let code = match outcome {
            Outcome::Passed => "32",   // green
            Outcome::Failed => "1;31", // bold red
            Outcome::Warned => "33",   // yellow
            Outcome::Skipped => "2",   // dim
        };
        match self {
            Colour::Off => text.to_string(),
            Colour::On => format!("\x1b[{code}m{text}\x1b[0m"),
        }
    }
}

/// Renders the text report without colour.
pub fn render(v: &Verdict) -> String {
    render_with(v, Colour::Off)
}

/// Renders the text report, colouring the marks when `colour` is on.
pub fn render_with(v: &Verdict, colour: Colour) -> String {
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
        "input {}, {}, {}",
        count_of(v.input.files.len() as u64, "file", "files"),
        count_of(v.input.row_count, "row", "rows"),
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
        check_line(&mut out, c, width, colour);
    }
    let s = v.summary();
    let (word, outcome) = if v.passed() {
        ("PASS", Outcome::Passed)
    } else {
        ("FAIL", Outcome::Failed)
    };
    let _ = writeln!(
        out,
        "\nverdict: {}  ({}: {} passed, {} failed, {} warned, {} skipped)",
        colour.paint(outcome, word),
        count_of(s.checks as u64, "check", "checks"),
        s.passed,
        s.failed,
        s.warned,
        s.skipped
    );
    out
}

fn mark(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "ok",
        Outcome::Failed => "FAIL",
        Outcome::Warned => "WARN",
        Outcome::Skipped => "skip",
    }
}

fn check_line(out: &mut String, c: &CheckResult, width: usize, colour: Colour) {
    let o = c.outcome();
    let m = mark(o);
    let pad = " ".repeat(4 - m.len());
    let _ = write!(
        out,
        "{}{pad}  line {:<4} {:<width$}  ",
        colour.paint(o, m),
        c.line,
        c.name
    );
    if o == Outcome::Skipped {
        let _ = writeln!(
            out,
            "expected {} (skipped: {})",
            c.expected,
            c.note.as_deref().unwrap_or("")
        );
        return;
    }
    let (value, expected) = human::value_and_expected(&c.metric, &c.value.to_string(), &c.expected);
    let _ = writeln!(out, "{} = {value}  (expected {expected})", c.metric);
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
    if let Some(f) = &c.failed_rows {
        let cut = if f.cut { ", cut at the limit" } else { "" };
        let _ = writeln!(
            out,
            "                 failed rows: {}  ({}{cut})",
            f.path,
            count_of(f.rows, "row", "rows")
        );
    }
}
