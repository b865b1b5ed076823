//! `dqgate explain`: the plans a rule file compiles to, and what they cost.

use std::fmt::Write as _;

use datafusion::physical_plan::displayable;
use datafusion::prelude::SessionContext;

use super::ExecError as Error;
use crate::check::{CheckedRules, CheckedStatement, SampleSpec};
use crate::exec;
use crate::plan::{self, duplicates_frame, key_set_of, scalar_frame, AuditPlan, PassKind};
use crate::staged::StagedInput;

/// Renders every pass of the audit with DataFusion's optimized logical plan
/// and physical plan.
pub async fn explain(
    ctx: &SessionContext,
    input: &StagedInput,
    rules: &CheckedRules,
    plan: &AuditPlan,
) -> Result<String, Error> {
    let mut out = String::new();
    let bytes: u64 = input.files.iter().map(|f| f.bytes).sum();
    let _ = writeln!(
        out,
        "{} statement(s) compile to {} pass(es) over {} file(s), {} row(s), {} byte(s)",
        rules.statements.len(),
        plan.scans(),
        input.files.len(),
        input.row_count(),
        bytes
    );
    if !plan.from_footers.is_empty() {
        let answered: Vec<String> = plan
            .from_footers
            .iter()
            .map(|(a, v)| format!("{} = {v}", a.describe()))
            .collect();
        let _ = writeln!(
            out,
            "\nanswered from Parquet footers, no scan: {}",
            answered.join(", ")
        );
    }
    if !plan.atoms.is_empty() {
        let pass = plan.pass_number(PassKind::Fused, 0);
        let users: Vec<String> = rules
            .statements
            .iter()
            .filter(|s| {
                plan::atoms_of(&s.metric)
                    .iter()
                    .any(|a| plan.atoms.contains(a))
            })
            .map(|s| format!("line {}", s.line))
            .collect();
        let _ = writeln!(
            out,
            "\npass {pass}: one fused aggregate, {} aggregate expression(s), for {}",
            plan.atoms.len(),
            users.join(", ")
        );
        let frame = scalar_frame(exec::table(ctx, input)?, plan)
            .map_err(|e| Error::engine("planning", e))?;
        render(&mut out, frame).await?;
    }
    for (i, keys) in plan.key_sets.iter().enumerate() {
        let pass = plan.pass_number(PassKind::KeySets, i);
        let users: Vec<String> = rules
            .statements
            .iter()
            .filter(|s| key_set_of(&s.metric).as_ref() == Some(keys))
            .map(|s| format!("line {}", s.line))
            .collect();
        let _ = writeln!(
            out,
            "\npass {pass}: duplicate keys over ({}), for {}",
            keys.join(", "),
            users.join(", ")
        );
        let smaller: Vec<String> = plan.key_sets[..pass_index(plan, keys)]
            .iter()
            .filter(|s| s.iter().all(|c| keys.contains(c)))
            .map(|s| format!("({})", s.join(", ")))
            .collect();
        if !smaller.is_empty() {
            let _ = writeln!(
                out,
                "  skipped at run time when {} has no duplicates (then neither has this key)",
                smaller.join(" or ")
            );
        }
        if let Some(range) = plan.dense_keys.get(keys) {
            let (bits, over) = bitmap(*range);
            let _ = writeln!(
                out,
                "  by {bits} over the key range {over}: one scan of ({}) alone, no hash table",
                keys.join(", ")
            );
            continue;
        }
        if let Some(strategy) = plan.key_strategy(keys, false) {
            let _ = writeln!(out, "  by the key engine, {strategy}");
            continue;
        }
        let frame = duplicates_frame(exec::table(ctx, input)?, keys)
            .map_err(|e| Error::engine("planning", e))?;
        render(&mut out, frame).await?;
    }
    for (i, column) in plan.grouped_distinct.iter().enumerate() {
        let pass = plan.pass_number(PassKind::GroupedDistinct, i);
        let _ = writeln!(
            out,
            "\npass {pass}: distinct values of {column}, grouped so that it can spill under the memory limit"
        );
        let frame = plan::distinct_frame(exec::table(ctx, input)?, column)
            .map_err(|e| Error::engine("planning", e))?;
        render(&mut out, frame).await?;
    }
    for (i, keys) in plan.key_sets_nulls_equal.iter().enumerate() {
        let pass = plan.pass_number(PassKind::KeySetsNullsEqual, i);
        let users: Vec<String> = rules
            .statements
            .iter()
            .filter(|s| plan::key_set_nulls_equal_of(&s.metric).as_ref() == Some(keys))
            .map(|s| format!("line {}", s.line))
            .collect();
        let _ = writeln!(
            out,
            "\npass {pass}: duplicate keys over ({}) with nulls not distinct, for {}",
            keys.join(", "),
            users.join(", ")
        );
        if let Some(strategy) = plan.key_strategy(keys, true) {
            let _ = writeln!(out, "  by the key engine, {strategy}");
            continue;
        }
        let frame = plan::duplicates_nulls_equal_frame(exec::table(ctx, input)?, keys)
            .map_err(|e| Error::engine("planning", e))?;
        render(&mut out, frame).await?;
    }
    for (i, (column, strategy)) in plan.engine_distinct.iter().enumerate() {
        let pass = plan.pass_number(PassKind::EngineDistinct, i);
        if let Some(range) = plan.dense_distinct.get(column) {
            let (bits, over) = bitmap(*range);
            let _ = writeln!(
                out,
                "\npass {pass}: distinct values of {column}, by {bits} over the range {over}: one scan of ({column}) alone, its set bits counted",
            );
            continue;
        }
        let _ = writeln!(
            out,
            "\npass {pass}: distinct values of {column}, by the key engine, {strategy}"
        );
    }
    let schema_lines = lines_where(rules, |s| s.metric.is_schema());
    if !schema_lines.is_empty() {
        let _ = writeln!(
            out,
            "\nanswered from the schemas in the Parquet footers, no scan: {}",
            schema_lines.join(", ")
        );
    }
    let sampled = lines_where(rules, |s| {
        matches!(s.samples, Some(SampleSpec::Rows { .. }))
    });
    if !sampled.is_empty() {
        let _ = writeln!(
            out,
            "\nonly if they fail: one filtered pass each to collect samples, for {}",
            sampled.join(", ")
        );
    }
    Ok(out)
}

/// `line N` of every statement that `f` selects.
fn lines_where(rules: &CheckedRules, f: impl Fn(&CheckedStatement) -> bool) -> Vec<String> {
    rules
        .statements
        .iter()
        .filter(|s| f(s))
        .map(|s| format!("line {}", s.line))
        .collect()
}

fn pass_index(plan: &AuditPlan, keys: &[String]) -> usize {
    plan.key_sets.iter().position(|k| k == keys).unwrap_or(0)
}

pub(crate) async fn render(
    out: &mut String,
    frame: datafusion::dataframe::DataFrame,
) -> Result<(), Error> {
    let logical = frame
        .clone()
        .into_optimized_plan()
        .map_err(|e| Error::engine("optimizing", e))?;
    let physical = frame
        .create_physical_plan()
        .await
        .map_err(|e| Error::engine("planning", e))?;
    let _ = writeln!(out, "  logical plan:");
    for line in logical.display_indent().to_string().lines() {
        let _ = writeln!(out, "    {line}");
    }
    let _ = writeln!(out, "  physical plan:");
    for line in displayable(physical.as_ref())
        .indent(true)
        .to_string()
        .lines()
    {
        let _ = writeln!(out, "    {line}");
    }
    Ok(())
}

/// "a bitmap of N bits (M MiB)" for the range `[min, max]`, and
/// "[min, max] from the footers".
fn bitmap((min, max): (i64, i64)) -> (String, String) {
    let span = (max as i128 - min as i128 + 1) as u64;
    (
        format!(
            "a bitmap of {span} bits ({:.1} MiB)",
            span as f64 / 8.0 / 1024.0 / 1024.0
        ),
        format!("[{min}, {max}] from the footers"),
    )
}
