//! The suggested rule file's text: sections of statements, each with a
//! comment saying what was observed.

use super::bounds::{literal, number, percent_up, step, two_digits};
use super::names::{declared, ident, sql_ident};
use super::profile::{Column, Kind, Profile};
use crate::value::Value;
use crate::verdict::human::{count_of, grouped, percent, shorten};

/// A statement (empty for a comment-only line) and what it rests on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub statement: String,
    pub comment: String,
}

impl Line {
    pub fn check(statement: impl Into<String>, comment: impl Into<String>) -> Line {
        Line {
            statement: statement.into(),
            comment: comment.into(),
        }
    }

    pub fn note(comment: impl Into<String>) -> Line {
        Line::check("", comment)
    }
}

/// Statements under a heading.
#[derive(Debug, Clone, Default)]
pub struct Section {
    pub title: String,
    pub lines: Vec<Line>,
}

/// The widest statement that sets the comment column; longer ones push
/// their comment along.
const COMMENT_COLUMN: usize = 52;

/// Renders the header comment, `table` and `partitioned by`, then the
/// sections, comments aligned.
pub fn render(header: &[String], table: &str, keys: &[String], sections: &[Section]) -> String {
    let mut out = String::new();
    for h in header {
        out.push_str(&format!("# {h}\n").replace("# \n", "#\n"));
    }
    out.push_str(&format!("table {}\n", ident(table)));
    if !keys.is_empty() {
        let keys: Vec<String> = keys.iter().map(|k| ident(k)).collect();
        out.push_str(&format!("partitioned by {}\n", keys.join(", ")));
    }
    let width = sections
        .iter()
        .flat_map(|s| &s.lines)
        .map(|l| l.statement.chars().count())
        .filter(|&n| n <= COMMENT_COLUMN)
        .max()
        .unwrap_or(0);
    for s in sections.iter().filter(|s| !s.lines.is_empty()) {
        out.push_str(&format!("\n# {}\n", s.title));
        for l in &s.lines {
            if l.statement.is_empty() {
                out.push_str(&format!("# {}\n", l.comment));
            } else {
                let pad = width.saturating_sub(l.statement.chars().count());
                out.push_str(&format!(
                    "{}{}  # {}\n",
                    l.statement,
                    " ".repeat(pad),
                    l.comment
                ));
            }
        }
    }
    out
}

/// `check row_count ...` from the rows observed: half to twice, rounded.
pub fn row_count(p: &Profile) -> Line {
    let files = count_of(p.files as u64, "file", "files");
    if p.rows == 0 {
        return Line::check(
            "check row_count >= 0",
            format!("observed an empty partition ({files}): set the rows you expect"),
        );
    }
    let low = two_digits(p.rows / 2, false).max(1);
    let high = two_digits(p.rows.saturating_mul(2), true);
    Line::check(
        format!(
            "check row_count between {} and {}",
            number(&Value::Int(low.into())).unwrap_or_default(),
            number(&Value::Int(high.into())).unwrap_or_default()
        ),
        format!(
            "observed {} in {files}; bounds: half and twice, rounded",
            count_of(p.rows, "row", "rows")
        ),
    )
}

/// `column c is TYPE [not null]`, from the files' declaration.
pub fn column_type(c: &Column) -> Option<Line> {
    if c.hive {
        return None;
    }
    let ty = declared(c.field.data_type())?;
    let (not_null, said) = if c.field.is_nullable() {
        ("", "nullable")
    } else {
        (" not null", "required (not null)")
    };
    Some(Line::check(
        format!("check column {} is {ty}{not_null}", ident(c.name())),
        format!("the files declare {ty}, {said}"),
    ))
}

/// The null statement of a column: none, all, or a rate with headroom.
/// `keyed`: a primary key already forbids nulls.
pub fn nulls(c: &Column, rows: u64, keyed: bool) -> Option<Line> {
    let nulls = c.nulls?;
    let name = ident(c.name());
    let of_rows = count_of(rows, "row", "rows");
    if nulls == 0 {
        if keyed || rows == 0 {
            return None;
        }
        return Some(Line::check(
            format!("check null_count({name}) = 0"),
            format!("no nulls in {of_rows}"),
        ));
    }
    if nulls == rows {
        return Some(Line::check(
            format!("check null_rate({name}) = 100%"),
            format!("every one of {of_rows} is null"),
        ));
    }
    let rate = nulls as f64 / rows as f64;
    let seen = format!(
        "observed {} ({} of {of_rows})",
        percent(rate, 3),
        grouped(&nulls.to_string())
    );
    Some(if 2.0 * rate >= 1.0 {
        Line::check(
            format!("check null_rate({name}) < 100%"),
            format!("{seen}; not all null"),
        )
    } else {
        Line::check(
            format!("check null_rate({name}) <= {}", percent_up(2.0 * rate)),
            format!("{seen}; bound: twice that, rounded up"),
        )
    })
}

/// `values(c) in (...)` for a column with few values of a listable kind.
pub fn values(c: &Column, rows: u64) -> Option<Line> {
    if !matches!(c.kind, Kind::Text | Kind::Integer | Kind::Unsigned) {
        return None;
    }
    let listed = c.listed(rows)?;
    let mut items = Vec::with_capacity(listed.len());
    for (v, _) in listed {
        let fits = match v {
            Value::Text(s) => s.chars().count() <= 64 && !s.chars().any(char::is_control),
            _ => true,
        };
        // Codes read as written (`2007`, not `2_007`).
        let item = match v {
            Value::Int(i) => Some(i.to_string()),
            _ => literal(v),
        };
        items.push(item.filter(|_| fits)?);
    }
    let mut seen: Vec<String> = listed
        .iter()
        .take(5)
        .map(|(v, n)| {
            format!(
                "{}: {}",
                shorten(&v.to_string()),
                count_of(*n, "row", "rows")
            )
        })
        .collect();
    if listed.len() > 5 {
        seen.push("...".into());
    }
    Some(Line::check(
        format!(
            "check values({}) in ({})",
            ident(c.name()),
            items.join(", ")
        ),
        format!(
            "observed {}: {}",
            count_of(listed.len() as u64, "value", "values"),
            seen.join(", ")
        ),
    ))
}

/// `min(c) >= ...` and `max(c) <= ...`: numbers widened to round values
/// (the upper bound left out for a unique column, whose values grow), dates
/// and timestamps as observed.
pub fn ranges(c: &Column, unique: bool) -> Vec<Line> {
    let (Some(min), Some(max)) = (&c.min, &c.max) else {
        return Vec::new();
    };
    let name = ident(c.name());
    let mut out = Vec::new();
    match c.kind {
        Kind::Date | Kind::Timestamp => {
            if let (Some(lo), Some(hi)) = (literal(min), literal(max)) {
                let span = format!("observed {min} .. {max}");
                out.push(Line::check(
                    format!("check min({name}) >= {lo}"),
                    format!("{span}; the next partition needs its own"),
                ));
                out.push(Line::check(format!("check max({name}) <= {hi}"), span));
            }
        }
        Kind::Integer | Kind::Decimal | Kind::Float | Kind::Unsigned => {
            let seen = |what: &str, v: &Value| match v {
                Value::Float(f) if f.is_nan() => format!("observed {what} NaN: no bound"),
                _ => format!("observed {what} {}", grouped(&v.to_string())),
            };
            if c.kind != Kind::Unsigned {
                if let Some(lo) = step(min, false).and_then(|v| number(&v)) {
                    out.push(Line::check(
                        format!("check min({name}) >= {lo}"),
                        seen("min", min),
                    ));
                }
            }
            if !unique {
                match step(max, true).and_then(|v| number(&v)) {
                    Some(hi) => out.push(Line::check(
                        format!("check max({name}) <= {hi}"),
                        seen("max", max),
                    )),
                    None => out.push(Line::note(format!("{}: {}", c.name(), seen("max", max)))),
                }
            }
        }
        _ => {}
    }
    out
}

/// `all(k = partition.k)` when every row holds the run key's value;
/// `label` names the statement.
pub fn run_key(
    c: Option<&Column>,
    key: &str,
    typed: Option<&Value>,
    rows: u64,
    label: &str,
) -> Line {
    let (Some(c), Some(typed)) = (c, typed) else {
        return Line::note(format!(
            "`{key}` is not a column: a directory level of the table only"
        ));
    };
    if holds_run_key(c, typed, rows) {
        return Line::check(
            format!(
                "check all({} = partition.{}) as '{}'",
                sql_ident(key),
                ident(key),
                label.replace('\'', "''")
            ),
            format!("every row has {key} = {typed}"),
        );
    }
    Line::note(format!(
        "{key}: not every row holds the run key's value {typed}, so no `all({key} = partition.{key})`"
    ))
}

/// Whether every row of `c` holds the run key's value `typed`.
pub fn holds_run_key(c: &Column, typed: &Value, rows: u64) -> bool {
    let only = c.values.as_deref().and_then(|v| match v {
        [(only, _)] => Some(only),
        _ => None,
    });
    rows == 0
        || (c.nulls == Some(0)
            && only.is_some_and(|v| v.compare(typed) == Some(std::cmp::Ordering::Equal)))
}
