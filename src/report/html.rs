//! The report page: a summary, one section per verdict file (per-check
//! status, value against the expectation, notes, samples), and, with a table,
//! its published partitions and a chart per metric.
//!
//! Every text that comes from a verdict, a record or a path goes through
//! [`escape`]. The page holds no script and loads nothing.

use std::fmt::Write as _;

use super::chart::{self, Chart, RunPoint};
use super::history::run_key_order;
use super::input::{escape, Input, TableHistory};
use super::model::{numeric, shown, CheckDoc, Doc, FailedRowsDoc, SampleDoc, VerdictDoc};
use crate::verdict::human::{self, count_of};
use crate::verdict::Outcome;

const STYLE: &str = include_str!("report.css");

/// The whole page.
pub fn page(inputs: &[Input], table: Option<&TableHistory>) -> String {
    let charts = table.map(|t| Charts::build(inputs, t)).unwrap_or_default();
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>{}</title>", escape(&title(inputs)));
    let _ = writeln!(out, "<style>\n{STYLE}</style>\n</head>\n<body>");
    header(&mut out, inputs, table);
    for (i, input) in inputs.iter().enumerate() {
        match &input.doc {
            Doc::Verdict(v) => verdict(&mut out, i, &input.shown, v, &charts),
            Doc::Error { message } => error(&mut out, i, &input.shown, message),
        }
    }
    if let Some(t) = table {
        history(&mut out, t, &charts);
    }
    out.push_str("<footer>made by dqgate report from the files named above</footer>\n");
    out.push_str("</body>\n</html>\n");
    out
}

fn title(inputs: &[Input]) -> String {
    let tables: Vec<&str> = inputs
        .iter()
        .filter_map(|i| match &i.doc {
            Doc::Verdict(v) => Some(v.table.as_str()),
            Doc::Error { .. } => None,
        })
        .collect();
    match tables.first() {
        Some(t) => format!("dqgate report: {t}"),
        None => "dqgate report".into(),
    }
}

fn header(out: &mut String, inputs: &[Input], table: Option<&TableHistory>) {
    let (mut pass, mut fail, mut err) = (0, 0, 0);
    for i in inputs {
        match &i.doc {
            Doc::Verdict(v) if v.passed() => pass += 1,
            Doc::Verdict(_) => fail += 1,
            Doc::Error { .. } => err += 1,
        }
    }
    out.push_str("<header>\n<h1>dqgate report</h1>\n<p class=\"overall\">");
    let _ = write!(
        out,
        "{}: <span class=\"badge pass\">{pass} pass</span> <span class=\"badge fail\">{fail} fail</span> <span class=\"badge error\">{err} error</span>",
        count_of(inputs.len() as u64, "verdict", "verdicts")
    );
    if let Some(t) = table {
        let _ = write!(
            out,
            " · history of <code>{}</code>: {}",
            escape(&t.shown),
            count_of(
                t.history.partitions.len() as u64,
                "published partition",
                "published partitions"
            )
        );
    }
    out.push_str("</p>\n<nav><ul>\n");
    for (i, input) in inputs.iter().enumerate() {
        let (class, word, what) = match &input.doc {
            Doc::Verdict(v) => {
                let (c, w) = verdict_badge(v);
                (c, w, heading_text(v))
            }
            Doc::Error { .. } => ("error", "ERROR", String::new()),
        };
        let _ = writeln!(
            out,
            "<li><a href=\"#verdict-{i}\"><span class=\"badge {class}\">{word}</span> {} <span class=\"file\">{}</span></a></li>",
            escape(&what),
            escape(&input.shown)
        );
    }
    out.push_str("</ul></nav>\n</header>\n");
}

fn verdict_badge(v: &VerdictDoc) -> (&'static str, &'static str) {
    if v.passed() {
        ("pass", "PASS")
    } else {
        ("fail", "FAIL")
    }
}

/// `daily_sales [sales_date=2025-03-05]`.
fn heading_text(v: &VerdictDoc) -> String {
    let key = v.run_key_text();
    if key.is_empty() {
        v.table.clone()
    } else {
        format!("{} [{key}]", v.table)
    }
}

fn outcome_badge(o: Outcome) -> (&'static str, &'static str) {
    match o {
        Outcome::Passed => ("pass", "pass"),
        Outcome::Failed => ("fail", "FAIL"),
        Outcome::Warned => ("warn", "WARN"),
        Outcome::Skipped => ("skip", "skipped"),
    }
}

fn verdict(out: &mut String, i: usize, file: &str, v: &VerdictDoc, charts: &Charts) {
    let (class, word) = verdict_badge(v);
    let s = v.summary();
    let _ = writeln!(
        out,
        "<section class=\"verdict {class}\" id=\"verdict-{i}\">\n<h2><span class=\"badge {class}\">{word}</span> {}</h2>",
        escape(&heading_text(v))
    );
    let _ = writeln!(
        out,
        "<p class=\"counts\">{}: <b>{}</b> passed · <b>{}</b> failed · <b>{}</b> warned · <b>{}</b> skipped</p>",
        count_of(s.checks as u64, "check", "checks"), s.passed, s.failed, s.warned, s.skipped
    );
    let _ = write!(
        out,
        "<p class=\"meta\">verdict <code>{}</code> · rules <code>{}</code> · {} in {} · <code class=\"hash\">{}</code>",
        escape(file),
        escape(&v.rules_path),
        count_of(v.row_count, "row", "rows"),
        count_of(v.files as u64, "file", "files"),
        escape(&v.fingerprint)
    );
    if let Some(version) = &v.published_version {
        let _ = write!(out, " · published as <code>{}</code>", escape(version));
    }
    // A passed verdict's table starts folded: what needs reading is what failed.
    let open = if v.passed() { "" } else { " open" };
    let _ = write!(
        out,
        "</p>\n<details class=\"checks\"{open}><summary>checks</summary>\n"
    );
    // The history column only when the page has a table's history.
    let history = charts.table.is_some();
    let _ = writeln!(
        out,
        "<table class=\"checks\">\n<thead><tr><th>status</th><th>line</th><th>check</th><th>value</th><th>expected</th>{}</tr></thead>\n<tbody>",
        if history { "<th>history</th>" } else { "" }
    );
    for c in &v.checks {
        let link = history.then(|| charts.anchor(&v.table, &c.metric));
        check_row(out, c, link);
    }
    out.push_str("</tbody>\n</table>\n</details>\n</section>\n");
}

/// `chart`: `None` without a history column, else the chart to link to.
fn check_row(out: &mut String, c: &CheckDoc, chart: Option<Option<usize>>) {
    let outcome = c.outcome();
    let (class, word) = outcome_badge(outcome);
    let (value, expected) = if outcome == Outcome::Skipped {
        (
            String::from("<span class=\"none\">not judged</span>"),
            c.expected.clone(),
        )
    } else {
        let (value, expected) = human::value_and_expected(&c.metric, &shown(&c.value), &c.expected);
        (escape(&value), expected)
    };
    let mut expected = escape(&expected);
    if let Some(note) = &c.note {
        let _ = write!(expected, "<div class=\"note\">{}</div>", escape(note));
    }
    let link = match chart {
        None => String::new(),
        Some(None) => "<td></td>".into(),
        Some(Some(n)) => format!("<td><a href=\"#chart-{n}\">chart</a></td>"),
    };
    let _ = writeln!(
        out,
        "<tr class=\"{class}\"><td><span class=\"badge {class}\">{word}</span></td><td class=\"num\">{}</td><td>{}<div class=\"metric\">{}</div>{}{}</td><td class=\"value\">{value}</td><td>{expected}</td>{link}</tr>",
        c.line,
        escape(&c.name),
        escape(&c.metric),
        samples(c.samples.as_deref().unwrap_or_default(), outcome),
        c.failed_rows.as_ref().map(failed_rows).unwrap_or_default()
    );
}

/// The check's failed-rows file: its name and row count, and its first rows
/// when they were read (`report --failed-rows DIR`).
fn failed_rows(f: &FailedRowsDoc) -> String {
    let cut = if f.cut { ", cut at the limit" } else { "" };
    let title = format!(
        "failed rows: {} ({}{cut})",
        f.path,
        count_of(f.rows, "row", "rows")
    );
    let preview = match &f.preview {
        None => return format!("<div class=\"note failed-rows\">{}</div>", escape(&title)),
        Some(Err(why)) => {
            return format!(
                "<div class=\"note failed-rows\">{}: {}</div>",
                escape(&title),
                escape(&why.to_string())
            )
        }
        Some(Ok(p)) => p,
    };
    let first = if (preview.rows.len() as u64) < f.rows {
        format!(", the first {}", preview.rows.len())
    } else {
        String::new()
    };
    let mut out = format!(
        "<details class=\"samples failed-rows\" open><summary>{}{first}</summary><table><thead><tr>",
        escape(&title)
    );
    for c in &preview.columns {
        let _ = write!(out, "<th>{}</th>", escape(c));
    }
    out.push_str("</tr></thead><tbody>");
    for row in &preview.rows {
        out.push_str("<tr>");
        for cell in row {
            let short = human::shorten(cell);
            if short == *cell {
                let _ = write!(out, "<td>{}</td>", escape(cell));
            } else {
                let _ = write!(
                    out,
                    "<td title=\"{}\">{}</td>",
                    escape(cell),
                    escape(&short)
                );
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></details>");
    out
}

/// The samples as a small table under the check's name, open on failures.
fn samples(list: &[SampleDoc], outcome: Outcome) -> String {
    if list.is_empty() {
        return String::new();
    }
    let mut columns: Vec<&str> = Vec::new();
    for s in list {
        for k in s.key.keys() {
            if !columns.contains(&k.as_str()) {
                columns.push(k);
            }
        }
    }
    let open = if outcome == Outcome::Failed {
        " open"
    } else {
        ""
    };
    let mut out = format!(
        "<details class=\"samples\"{open}><summary>{}</summary><table><thead><tr>",
        count_of(list.len() as u64, "sample", "samples")
    );
    for c in &columns {
        let _ = write!(out, "<th>{}</th>", escape(c));
    }
    let placed = list.iter().any(|s| s.partition.is_some());
    out.push_str("<th>rows</th>");
    if placed {
        out.push_str("<th>also in</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for s in list {
        out.push_str("<tr>");
        for c in &columns {
            let cell = s.key.get(*c).map(shown).unwrap_or_default();
            let short = human::shorten(&cell);
            if short == cell {
                let _ = write!(out, "<td>{}</td>", escape(&cell));
            } else {
                let _ = write!(
                    out,
                    "<td title=\"{}\">{}</td>",
                    escape(&cell),
                    escape(&short)
                );
            }
        }
        let _ = write!(
            out,
            "<td class=\"num\">{}</td>",
            human::grouped(&s.rows.to_string())
        );
        if placed {
            let p = s.partition.as_deref().unwrap_or_default();
            let _ = write!(out, "<td>{}</td>", escape(p));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></details>");
    out
}

fn error(out: &mut String, i: usize, file: &str, message: &str) {
    let _ = writeln!(
        out,
        "<section class=\"verdict error\" id=\"verdict-{i}\">\n<h2><span class=\"badge error\">ERROR</span> the data could not be audited</h2>\n<p class=\"meta\">verdict <code>{}</code></p>\n<pre class=\"message\">{}</pre>\n</section>",
        escape(file),
        escape(message)
    );
}

/// Charts of every metric of the table, built once for the page.
#[derive(Debug, Default)]
struct Charts {
    /// The table the history belongs to (from its records).
    table: Option<String>,
    cards: Vec<Card>,
}

#[derive(Debug)]
struct Card {
    metric: String,
    checks: Vec<String>,
    chart: Option<Chart>,
}

impl Charts {
    /// The card index of `metric` of `table`, if it has a chart.
    fn anchor(&self, table: &str, metric: &str) -> Option<usize> {
        if self.table.as_deref() != Some(table) {
            return None;
        }
        self.cards
            .iter()
            .position(|c| c.metric == metric && c.chart.is_some())
    }

    fn build(inputs: &[Input], t: &TableHistory) -> Charts {
        let parts = &t.history.partitions;
        let table = parts.first().map(|p| p.record.table.clone()).or_else(|| {
            inputs.iter().find_map(|i| match &i.doc {
                Doc::Verdict(v) => Some(v.table.clone()),
                Doc::Error { .. } => None,
            })
        });
        let runs: Vec<&VerdictDoc> = inputs
            .iter()
            .filter_map(|i| match &i.doc {
                Doc::Verdict(v) if Some(&v.table) == table.as_ref() => Some(v),
                _ => None,
            })
            .collect();
        let records: Vec<&VerdictDoc> = parts
            .iter()
            .map(|p| &p.record)
            .filter(|r| Some(&r.table) == table.as_ref())
            .collect();
        // The x axis: every run key, published or of this run, in order.
        let mut keys: Vec<&[(String, String)]> = records
            .iter()
            .chain(&runs)
            .map(|v| v.partition.as_slice())
            .collect();
        keys.sort_by(|a, b| run_key_order(a, b));
        keys.dedup();
        let at = |v: &VerdictDoc| keys.iter().position(|k| *k == v.partition.as_slice());
        let labels: Vec<String> = keys.iter().map(|k| key_label(k)).collect();
        // Metrics in the order this run's verdicts (else the records) name them.
        let mut metrics: Vec<(String, Vec<String>)> = Vec::new();
        let source = if runs.is_empty() { &records } else { &runs };
        for v in source {
            for c in &v.checks {
                match metrics.iter_mut().find(|(m, _)| *m == c.metric) {
                    Some((_, names)) if !names.contains(&c.name) => names.push(c.name.clone()),
                    Some(_) => {}
                    None => metrics.push((c.metric.clone(), vec![c.name.clone()])),
                }
            }
        }
        let value_of = |v: &VerdictDoc, metric: &str| {
            v.checks
                .iter()
                .filter(|c| c.metric == metric)
                .find_map(|c| numeric(&c.value).map(|x| (x, c.outcome())))
        };
        let cards = metrics
            .into_iter()
            .map(|(metric, checks)| {
                let mut published = vec![None; labels.len()];
                for r in &records {
                    if let (Some(i), Some((x, _))) = (at(r), value_of(r, &metric)) {
                        published[i] = Some(x);
                    }
                }
                let points: Vec<RunPoint> = runs
                    .iter()
                    .filter_map(|v| {
                        let (value, outcome) = value_of(v, &metric)?;
                        Some(RunPoint {
                            at: at(v)?,
                            value,
                            outcome,
                        })
                    })
                    .collect();
                let mut thresholds: Vec<f64> = runs
                    .first()
                    .map(|v| {
                        v.checks
                            .iter()
                            .filter(|c| c.metric == metric)
                            .flat_map(|c| chart::thresholds(&c.expected))
                            .collect()
                    })
                    .unwrap_or_default();
                thresholds.sort_by(f64::total_cmp);
                thresholds.dedup();
                let any = published.iter().any(Option::is_some) || !points.is_empty();
                let chart = any.then(|| Chart {
                    labels: labels.clone(),
                    published,
                    runs: points,
                    thresholds,
                });
                Card {
                    metric,
                    checks,
                    chart,
                }
            })
            .collect();
        Charts { table, cards }
    }
}

/// `2025-03-05`, or `2025-03-05/berlin` for several keys: the values only.
fn key_label(key: &[(String, String)]) -> String {
    if key.is_empty() {
        return "(no run key)".into();
    }
    let values: Vec<&str> = key.iter().map(|(_, v)| v.as_str()).collect();
    values.join("/")
}

fn history(out: &mut String, t: &TableHistory, charts: &Charts) {
    let parts = &t.history.partitions;
    let _ = writeln!(
        out,
        "<section class=\"history\" id=\"history\">\n<h2>Published history of <code>{}</code></h2>",
        escape(&t.shown)
    );
    if parts.is_empty() {
        out.push_str("<p class=\"none\">Nothing is published in this table yet.</p>\n</section>\n");
        return;
    }
    out.push_str("<table class=\"partitions\">\n<thead><tr><th>partition</th><th>version</th><th>rows</th><th>checks</th><th>publishes</th><th>rollbacks</th></tr></thead>\n<tbody>\n");
    for p in parts {
        let r = &p.record;
        let s = r.summary();
        let _ = writeln!(
            out,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{}</td><td>{} passed, {} warned, {} skipped</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&p.rel),
            escape(r.published_version.as_deref().unwrap_or("")),
            human::grouped(&r.row_count.to_string()),
            s.passed,
            s.warned,
            s.skipped,
            p.publishes,
            p.rollbacks
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out.push_str("<p class=\"legend\"><span class=\"key published\"></span> published partitions <span class=\"key run\"></span> this run (colour: its outcome) <span class=\"key threshold\"></span> threshold</p>\n<div class=\"cards\">\n");
    let mut not_charted = Vec::new();
    for (n, card) in charts.cards.iter().enumerate() {
        let Some(chart) = &card.chart else {
            not_charted.push(card.metric.as_str());
            continue;
        };
        let _ = writeln!(
            out,
            "<figure class=\"card\" id=\"chart-{n}\"><figcaption><b>{}</b><div class=\"used\">{}</div></figcaption>{}</figure>",
            escape(&card.metric),
            escape(&card.checks.join(" · ")),
            chart.svg(&card.metric)
        );
    }
    out.push_str("</div>\n");
    if !not_charted.is_empty() {
        let _ = writeln!(
            out,
            "<p class=\"none\">Not charted (no numeric values): {}</p>",
            escape(&not_charted.join(", "))
        );
    }
    out.push_str("</section>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<b a=\"1\" c='2'>&</b>"),
            "&lt;b a=&quot;1&quot; c=&apos;2&apos;&gt;&amp;&lt;/b&gt;"
        );
        assert_eq!(escape("a\u{1}b"), "a\\u{1}b");
    }
}
