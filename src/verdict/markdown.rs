//! The verdict as GitHub-flavoured Markdown (`--format markdown`), for a
//! pull-request comment: a summary line, then one table row per statement
//! with its status, the value against the expectation, and the samples of a
//! failure folded into a `<details>` element.
//!
//! Everything from the rule file or the data is escaped for a table cell.
//! Names, values and expectations are code spans (their delimiter is longer
//! than any backtick run inside, a `|` is written `\|` as GFM tables require,
//! a line break becomes a space); prose (notes) gets a backslash before
//! Markdown punctuation, `&amp;` for `&` and `<br>` for a line break. No
//! value can end a cell, start a link or emphasis, or inject markup.

use std::fmt::Write as _;

use super::human::{self, count_of};
use super::{CheckResult, Outcome, Verdict};

/// Renders the verdict as a Markdown section.
pub fn render(v: &Verdict) -> String {
    let s = v.summary();
    let mut out = String::new();
    let key = v.run_key_text();
    let key = if key.is_empty() {
        String::new()
    } else {
        format!(" {}", fenced(&key))
    };
    let _ = writeln!(
        out,
        "### dqgate: {} · {}{key}\n",
        if v.passed() { "✅ PASS" } else { "❌ FAIL" },
        fenced(&v.table),
    );
    let _ = writeln!(
        out,
        "**{}:** {} passed, {} failed, {} warned, {} skipped · {} in {} · rules {}\n",
        count_of(s.checks as u64, "check", "checks"),
        s.passed,
        s.failed,
        s.warned,
        s.skipped,
        count_of(v.input.row_count, "row", "rows"),
        count_of(v.input.files.len() as u64, "file", "files"),
        fenced(&v.rules_path),
    );
    out.push_str("| status | line | check | value | expected | samples |\n");
    out.push_str("|---|---:|---|---|---|---|\n");
    for c in &v.checks {
        row(&mut out, c);
    }
    out
}

/// What `--format markdown` prints when the data could not be audited.
pub fn error(message: &str) -> String {
    format!("### dqgate: 🛑 ERROR\n\n{}\n", cell(message.trim_end()))
}

fn status(o: Outcome) -> &'static str {
    match o {
        Outcome::Passed => "✅ pass",
        Outcome::Failed => "❌ **FAIL**",
        Outcome::Warned => "⚠️ warn",
        Outcome::Skipped => "⏭️ skipped",
    }
}

fn row(out: &mut String, c: &CheckResult) {
    let outcome = c.outcome();
    let (value, expected) = if outcome == Outcome::Skipped {
        (String::new(), c.expected.clone())
    } else {
        let (value, expected) =
            human::value_and_expected(&c.metric, &c.value.to_string(), &c.expected);
        (code_span(&format!("{} = {value}", c.metric)), expected)
    };
    let mut expected = code_span(&expected);
    if let Some(note) = &c.note {
        let _ = write!(expected, "<br>*{}*", cell(note));
    }
    let _ = writeln!(
        out,
        "| {} | {} | {} | {value} | {expected} | {} |",
        status(outcome),
        c.line,
        code_span(&c.name),
        samples(c)
    );
}

/// The samples folded into `<details>`; empty when there are none.
fn samples(c: &CheckResult) -> String {
    let list = match c.samples.as_deref() {
        Some(list) if !list.is_empty() => list,
        _ => return String::new(),
    };
    let items: Vec<String> = list
        .iter()
        .map(|s| format!("{} × {}", code_span(&s.key_text()), cell(&s.rows_text())))
        .collect();
    format!(
        "<details><summary>{}</summary>{}</details>",
        count_of(list.len() as u64, "sample", "samples"),
        items.join("<br>")
    )
}

/// Escapes text for a table cell.
pub fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '\n' => out.push_str("<br>"),
            '\r' => {}
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '#' | '!' | '$' => {
                out.push('\\');
                out.push(ch);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A code span inside a table cell.
pub fn code_span(s: &str) -> String {
    fenced(&s.replace('|', "\\|"))
}

/// A code span outside a table: a fence longer than any backtick run inside,
/// line breaks as spaces.
fn fenced(s: &str) -> String {
    let text: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{text}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_cannot_break_the_table() {
        assert_eq!(cell("a|b"), "a\\|b");
        assert_eq!(cell("x\ny"), "x<br>y");
        assert_eq!(cell("<script>&"), "\\<script\\>&amp;");
        assert_eq!(cell("row_count * 2"), "row\\_count \\* 2");
        assert_eq!(fenced("a|b"), "`a|b`");
        assert_eq!(code_span("a < b | c"), "`a < b \\| c`");
        assert_eq!(code_span("say `hi`"), "`` say `hi` ``");
        assert_eq!(code_span("x\ny"), "`x y`");
    }
}
