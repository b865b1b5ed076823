//! `dqgate suggest`: a first rule file, proposed from the data.
//!
//! ```text
//!  staged files ──profile──▶ Profile (rows, and per column: nulls, distinct
//!                               │     values, range, the values when few)
//!                 keys::find ───┤ (unique columns; pairs only when none is)
//!   --table ──history::before ──┤ (the published runs before this one)
//!                               ▼
//!                write ──▶ rule text, each statement with what was observed
//! ```
//!
//! The profile is measured by the audit's own stages (an [`crate::plan::AuditPlan`]
//! run by [`crate::exec::observe`]: the footers answer what they answer
//! exactly, one fused aggregate the other nulls and ranges, the key engine
//! the distinct counts), so a suggested bound is computed as `check` will
//! compute it, and every suggested statement holds on the data it came from. The text is
//! deterministic: it depends on the staged files, the run key and the
//! published records, never on the clock or the paths.

mod bounds;
mod history;
mod keys;
mod names;
mod profile;
mod write;

use datafusion::arrow::datatypes::Schema;

use crate::check::Metric;
use crate::dsl::ast::HistoryStat;
use crate::engine::{self, EngineOptions};
use crate::error::Error;
use crate::staged::StagedInput;
use crate::value::Value;
use crate::verdict::history::PastRuns;
use crate::verdict::human::count_of;
use profile::Profile;
use write::{Line, Section};

pub use names::table_name;

/// What a suggestion is made from, besides the staged files.
#[derive(Debug, Clone, Default)]
pub struct Request<'a> {
    /// The table's name, for the `table` line.
    pub table: String,
    /// The run key (`--partition`), in the order given; it becomes
    /// `partitioned by`.
    pub run_key: Vec<(String, String)>,
    /// The published partitions' audit records (`--table`), for
    /// `history(N)` baselines.
    pub past: Option<&'a PastRuns>,
}

/// A suggested rule file.
#[derive(Debug, Clone)]
pub struct Suggestion {
    pub text: String,
    /// Statements in it.
    pub statements: usize,
    /// Passes over the data it cost.
    pub passes: usize,
}

/// Profiles `input` and writes a rule file that holds on it.
///
/// Errors: the staged files cannot be read (exit 3), or a run-key value does
/// not fit its column's type (exit 2).
pub async fn suggest(
    input: &StagedInput,
    request: &Request<'_>,
    engine_opts: &EngineOptions,
) -> Result<Suggestion, Error> {
    let typed = typed_run_key(&request.run_key, &input.schema)?;
    let ctx = engine::session(engine_opts).map_err(|e| Error::engine("starting the engine", e))?;
    engine::distrust_float_statistics(&ctx, &input.schema);
    let profile = profile::profile(&ctx, input).await?;
    let (keys, key_passes) = keys::find(&ctx, input, &profile).await?;
    let mut sections = vec![partition_section(&profile, request, &typed, &input.schema)];
    sections.push(keys_section(&profile, &keys));
    let matched = matched_keys(&profile, request, &typed);
    for c in &profile.columns {
        sections.push(column_section(
            c,
            &profile,
            &keys,
            matched.contains(&c.name()),
        ));
    }
    let statements = sections
        .iter()
        .flat_map(|s| &s.lines)
        .filter(|l| !l.statement.is_empty())
        .count();
    let keys_given: Vec<String> = request.run_key.iter().map(|(k, _)| k.clone()).collect();
    let text = write::render(
        &header(&profile, request),
        &request.table,
        &keys_given,
        &sections,
    );
    Ok(Suggestion {
        text,
        statements,
        passes: profile.passes + key_passes,
    })
}

/// Each run-key value typed like its column (`None`: not a column).
fn typed_run_key(
    run_key: &[(String, String)],
    schema: &Schema,
) -> Result<Vec<Option<Value>>, Error> {
    run_key
        .iter()
        .map(|(k, v)| match schema.field_with_name(k) {
            Err(_) => Ok(None),
            Ok(f) => crate::scalar::parse_as(v, f.data_type())
                .map(Some)
                .map_err(|e| {
                    Error::Usage(format!(
                        "--partition {k}={v}: the column `{k}` of the staged files is {}: {e}",
                        f.data_type()
                    ))
                }),
        })
        .collect()
}

fn header(p: &Profile, request: &Request<'_>) -> Vec<String> {
    let mut h = vec![
        format!(
            "Suggested by `dqgate suggest` from {}, {} ({}).",
            count_of(p.files as u64, "file", "files"),
            count_of(p.rows, "row", "rows"),
            p.fingerprint
        ),
        "Every statement holds on that data. Each comment says what was observed;".into(),
        "bounds are guesses from one partition: review them before relying on them.".into(),
    ];
    if request.run_key.is_empty() {
        let candidates = run_key_candidates(p);
        if !candidates.is_empty() {
            h.push(String::new());
            h.push(
                "Every row has the same value here, which may be the run key. Suggest with".into(),
            );
            h.push("it for `partitioned by` and a check that rows belong to it:".into());
            h.push(format!("run key candidate: {}", candidates.join(" ")));
        }
    }
    h
}

/// `--partition k=v` for each date column and each `key=value` directory
/// column that holds one value in every row.
fn run_key_candidates(p: &Profile) -> Vec<String> {
    p.columns
        .iter()
        .filter(|c| c.kind == profile::Kind::Date || c.hive)
        .filter(|c| c.nulls == Some(0) && c.distinct == Some(1))
        .filter_map(|c| match c.values.as_deref() {
            Some([(v, _)]) => {
                let text = match v {
                    Value::Text(s) => s.clone(),
                    other => other.to_string(),
                };
                let fits = !text.is_empty()
                    && !text.contains(['/', '\\', '\0', ' '])
                    && text != ".."
                    && !c.name().contains(['=', ' ']);
                fits.then(|| format!("--partition {}={text}", c.name()))
            }
            _ => None,
        })
        .collect()
}

fn partition_section(
    p: &Profile,
    request: &Request<'_>,
    typed: &[Option<Value>],
    schema: &Schema,
) -> Section {
    let mut lines = vec![write::row_count(p)];
    for ((key, _), value) in request.run_key.iter().zip(typed) {
        let column = p.columns.iter().find(|c| c.name() == key);
        let label = match request.run_key.len() {
            1 => "rows belong to the run key".to_string(),
            _ => format!("rows belong to the run key's {key}"),
        };
        lines.push(write::run_key(column, key, value.as_ref(), p.rows, &label));
    }
    if let Some(past) = request.past {
        lines.extend(history_lines(p, request, past, schema));
    }
    Section {
        title: "The partition".into(),
        lines,
    }
}

/// Run-key columns whose every row holds the run key's value.
fn matched_keys<'p>(
    p: &'p Profile,
    request: &Request<'_>,
    typed: &[Option<Value>],
) -> Vec<&'p str> {
    request
        .run_key
        .iter()
        .zip(typed)
        .filter_map(|((key, _), value)| {
            let c = p.columns.iter().find(|c| c.name() == key)?;
            write::holds_run_key(c, value.as_ref()?, p.rows).then_some(c.name())
        })
        .collect()
}

fn keys_section(p: &Profile, keys: &[keys::Key]) -> Section {
    let mut lines = Vec::new();
    let mut primary_taken = false;
    for k in keys {
        let cols: Vec<String> = k.columns.iter().map(|c| names::ident(c)).collect();
        let observed = match k.columns.as_slice() {
            [one] => {
                let c = p.columns.iter().find(|c| c.name() == one);
                let present = c.map_or(0, |c| c.present(p.rows));
                format!(
                    "{} distinct values in {}",
                    crate::verdict::human::grouped(&present.to_string()),
                    count_of(present, "non-null row", "non-null rows")
                )
            }
            _ => "no two rows share these values; no column alone is unique".into(),
        };
        if k.primary && !primary_taken {
            primary_taken = true;
            lines.push(Line::check(
                format!("check primary_key({})", cols.join(", ")),
                format!("{observed}, no nulls"),
            ));
        } else {
            lines.push(Line::check(
                format!("check unique({})", cols.join(", ")),
                observed,
            ));
        }
    }
    Section {
        title: "Keys".into(),
        lines,
    }
}

fn column_section(c: &profile::Column, p: &Profile, keys: &[keys::Key], run_key: bool) -> Section {
    let primary = keys
        .iter()
        .find(|k| k.primary)
        .is_some_and(|k| k.columns.iter().any(|x| x == c.name()));
    let unique = keys.iter().any(|k| k.columns == [c.name()]);
    let mut lines = Vec::new();
    lines.extend(write::column_type(c));
    lines.extend(write::nulls(c, p.rows, primary));
    if !run_key {
        match write::values(c, p.rows) {
            Some(v) => lines.push(v),
            None => lines.extend(write::ranges(c, unique)),
        }
    }
    if !c.kind.counted() {
        lines.push(Line::note(format!(
            "{}: {} is not profiled",
            c.name(),
            crate::verdict::schema::describe(c.field.data_type())
        )));
    }
    let origin = if c.hive {
        ", from key=value directories"
    } else {
        ""
    };
    Section {
        title: format!("{}{origin}", c.name()),
        lines,
    }
}

/// `history(N)` baselines: the row count, and the null rate of each column
/// with nulls whose rate the records hold.
fn history_lines(
    p: &Profile,
    request: &Request<'_>,
    past: &PastRuns,
    schema: &Schema,
) -> Vec<Line> {
    if request.run_key.is_empty() {
        return vec![Line::note(
            "history(N) baselines need the run key (--partition) to order the published partitions",
        )];
    }
    let window = history::before(past, &request.run_key, schema);
    let n = history::WINDOW;
    let mut out = Vec::new();
    match history::stat(&window, HistoryStat::Median, Metric::RowCount) {
        Err(why) => out.push(Line::note(format!("no row-count baseline: {why}"))),
        Ok((median, note)) => {
            let base = format!("median(history({n}).row_count)");
            let f = history::factor_text;
            let statement = match history::factors(p.rows as f64, median) {
                (Some(lo), Some(hi)) => {
                    format!(
                        "check row_count between {} * {base} and {} * {base}",
                        f(lo),
                        f(hi)
                    )
                }
                (Some(lo), None) => format!("check row_count >= {} * {base}", f(lo)),
                (None, Some(hi)) => format!("check row_count <= {} * {base}", f(hi)),
                (None, None) => String::new(),
            };
            let comment = format!("observed {}; {note}", count_of(p.rows, "row", "rows"));
            out.push(Line::check(statement, comment));
        }
    }
    for c in p.columns.iter().filter(|c| c.nulls.is_some_and(|n| n > 0)) {
        let rate = c.nulls.unwrap_or(0) as f64 / p.rows.max(1) as f64;
        let metric = Metric::NullRate(c.name().to_string());
        if let Ok((max, note)) = history::stat(&window, HistoryStat::Max, metric) {
            if rate <= 2.0 * max + 0.001 - 1e-12 {
                out.push(Line::check(
                    format!(
                        "check null_rate({}) <= 2 * max(history({n}).null_rate({})) + 0.1%",
                        names::ident(c.name()),
                        names::ident(c.name())
                    ),
                    format!(
                        "observed {}; {note}",
                        crate::verdict::human::percent(rate, 3)
                    ),
                ));
            }
        }
    }
    out
}
