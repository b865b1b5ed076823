//! The verdict as JUnit XML (`--format junit`), for CI systems that collect
//! test reports (Jenkins, GitLab, GitHub Actions reporters, Azure DevOps).
//!
//! The shape is the Ant JUnit format: one `<testsuites>` holding one
//! `<testsuite>` per verdict, one `<testcase>` per statement (`classname` is
//! `table.k1=v1/k2=v2`, `name` the check's name). A failing `check` is a
//! `<failure>` whose message is the value against the expectation and whose
//! body adds the samples; a `skipped` check is `<skipped>`; a `warn` that does
//! not hold is a *passing* testcase whose `<system-out>` starts with
//! `WARNING`, so that the report's failure count agrees with the exit code
//! (warnings never block). A run that could not audit is one testcase with an
//! `<error>`. Times are a fixed `0` and there is no timestamp or host name:
//! the output is as deterministic as the JSON verdict.

use std::fmt::Write as _;

use super::{CheckResult, Outcome, Verdict};

/// Renders the verdict as a JUnit XML document.
pub fn render(v: &Verdict) -> String {
    render_with_error(v, None)
}

/// The verdict, plus an `<error>` testcase named `publish` when publishing a
/// passed verdict failed (so that stdout stays one XML document).
pub fn render_with_error(v: &Verdict, publish_error: Option<&str>) -> String {
    let s = v.summary();
    let suite = suite_name(v);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let errors = usize::from(publish_error.is_some());
    let counts = format!(
        "tests=\"{}\" failures=\"{}\" errors=\"{errors}\" skipped=\"{}\" time=\"0\"",
        s.checks + errors,
        s.failed,
        s.skipped
    );
    let _ = writeln!(out, "<testsuites name=\"dqgate\" {counts}>");
    let _ = writeln!(out, "  <testsuite name=\"{}\" {counts}>", attr(&suite));
    properties(&mut out, v);
    let classname = class_name(v);
    for c in &v.checks {
        testcase(&mut out, &classname, c);
    }
    if let Some(message) = publish_error {
        error_case(&mut out, &classname, "publish", message);
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// The document printed when the data could not be audited (or the rule
/// file was invalid): one testcase with an `<error>`.
pub fn error(message: &str) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = "tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0\"";
    let _ = writeln!(out, "<testsuites name=\"dqgate\" {counts}>");
    let _ = writeln!(out, "  <testsuite name=\"dqgate\" {counts}>");
    error_case(&mut out, "dqgate", "audit", message);
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

fn error_case(out: &mut String, classname: &str, name: &str, message: &str) {
    let _ = writeln!(
        out,
        "    <testcase classname=\"{}\" name=\"{name}\" time=\"0\">",
        attr(classname)
    );
    let _ = writeln!(
        out,
        "      <error type=\"error\" message=\"{}\">{}</error>",
        attr(first_line(message)),
        text(message)
    );
    out.push_str("    </testcase>\n");
}

/// `daily_sales [sales_date=2025-03-05]`, or the table alone.
fn suite_name(v: &Verdict) -> String {
    let key = v.run_key_text();
    if key.is_empty() {
        v.table.clone()
    } else {
        format!("{} [{key}]", v.table)
    }
}

/// `daily_sales.sales_date=2025-03-05`: CI systems group testcases by the
/// part before the last dot, so all runs of a table share a group.
fn class_name(v: &Verdict) -> String {
    let key = v.run_key_text();
    if key.is_empty() {
        v.table.clone()
    } else {
        format!("{}.{key}", v.table)
    }
}

fn properties(out: &mut String, v: &Verdict) {
    let mut props: Vec<(String, String)> = vec![
        (
            "dqgate.verdict".into(),
            if v.passed() { "pass" } else { "fail" }.into(),
        ),
        ("table".into(), v.table.clone()),
    ];
    for (k, val) in &v.partition {
        props.push((format!("partition.{k}"), val.clone()));
    }
    props.extend([
        ("rules.path".into(), v.rules_path.clone()),
        ("rules.sha256".into(), v.rules_sha256.clone()),
        ("input.row_count".into(), v.input.row_count.to_string()),
        ("input.fingerprint".into(), v.input.fingerprint.clone()),
    ]);
    if let Some(f) = &v.compared_against {
        props.push(("compared_against".into(), f.clone()));
    }
    out.push_str("    <properties>\n");
    for (k, val) in props {
        let _ = writeln!(
            out,
            "      <property name=\"{}\" value=\"{}\"/>",
            attr(&k),
            attr(&val)
        );
    }
    out.push_str("    </properties>\n");
}

/// `metric = value  (expected ...)`.
fn measured(c: &CheckResult) -> String {
    format!("{} = {}  (expected {})", c.metric, c.value, c.expected)
}

fn testcase(out: &mut String, classname: &str, c: &CheckResult) {
    let _ = writeln!(
        out,
        "    <testcase classname=\"{}\" name=\"{}\" time=\"0\">",
        attr(classname),
        attr(&c.name)
    );
    let mut body = format!("line {}: {}\n{}\n", c.line, c.name, measured(c));
    if let Some(note) = &c.note {
        let _ = writeln!(body, "note: {note}");
    }
    if let Some(samples) = c.samples.as_ref().filter(|s| !s.is_empty()) {
        body.push_str("samples:\n");
        for s in samples {
            let _ = writeln!(body, "  {}  ({})", s.key_text(), s.rows_text());
        }
    }
    match c.outcome() {
        Outcome::Failed => {
            let _ = writeln!(
                out,
                "      <failure type=\"check\" message=\"{}\">{}</failure>",
                attr(&measured(c)),
                text(&body)
            );
        }
        Outcome::Skipped => {
            let why = c.note.as_deref().unwrap_or("skipped");
            let _ = writeln!(out, "      <skipped message=\"{}\"/>", attr(why));
        }
        Outcome::Warned => {
            let _ = writeln!(
                out,
                "      <system-out>WARNING: does not hold (warn does not block)\n{}</system-out>",
                text(&body)
            );
        }
        Outcome::Passed => {
            let _ = writeln!(out, "      <system-out>{}</system-out>", text(&body));
        }
    }
    out.push_str("    </testcase>\n");
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// Escapes character data. Characters XML 1.0 cannot hold (most control
/// characters) are written as `\u{..}` so that the document stays
/// well-formed whatever the data held.
pub fn text(s: &str) -> String {
    escape(s, false)
}

/// Escapes an attribute value (also quotes, and line breaks as references
/// so that they survive attribute normalisation).
pub fn attr(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&apos;"),
            '\n' if attribute => out.push_str("&#10;"),
            '\t' if attribute => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            '\n' | '\t' => out.push(ch),
            c if xml_char(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    out
}

/// The characters XML 1.0 allows (`Char` production), less the
/// discouraged non-characters U+FFFE and U+FFFF.
fn xml_char(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_quotes_and_control_characters() {
        assert_eq!(text("a < b & c > d"), "a &lt; b &amp; c &gt; d");
        assert_eq!(attr("say \"hi\"\nit's"), "say &quot;hi&quot;&#10;it&apos;s");
        assert_eq!(text("bell\u{7}nul\u{0}"), "bell\\u{7}nul\\u{0}");
        assert_eq!(text("line\nnext\ttab"), "line\nnext\ttab");
        assert_eq!(text("\u{FFFF}é"), "\\u{ffff}é");
    }

    #[test]
    fn error_document_names_the_problem() {
        let doc = error("cannot read <staged>\nsecond line");
        assert!(doc.contains("errors=\"1\""));
        assert!(doc.contains("message=\"cannot read &lt;staged&gt;\""));
        assert!(doc.contains(">cannot read &lt;staged&gt;\nsecond line</error>"));
    }
}
