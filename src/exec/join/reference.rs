//! `values(k) in REF(k)`: the staged rows whose key is absent from a
//! reference table, on the key engine or as a DataFusion anti-join.

use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::cast;
use datafusion::prelude::{ident, lit, SessionContext};

use super::{on_engine, union_all, JoinResult, JoinSample};
use crate::check::RefLookup;
use crate::exec::keys;
use crate::exec::ExecError;
use crate::exec::{grouped_top, table};
use crate::plan::join::{self as pj, other_key};
use crate::staged::reference::Dataset;
use crate::staged::StagedInput;

/// The reference's key parts, cast, as [`other_key`] columns.
pub fn reference_keys(
    ctx: &SessionContext,
    reference: &Dataset,
    lookup: &RefLookup,
) -> Result<DataFrame, ExecError> {
    let mut frames = Vec::new();
    for part in &reference.parts {
        let mut exprs = Vec::new();
        for (i, (rc, ty)) in lookup.ref_columns.iter().zip(&lookup.key_types).enumerate() {
            let in_file = part.input.schema.field_with_name(rc).is_ok();
            let e = match part.hive.iter().find(|(k, _)| k == rc) {
                Some((_, v)) if !in_file => cast(lit(v.clone()), ty.clone()),
                _ if in_file => cast(ident(rc), ty.clone()),
                _ => {
                    return Err(ExecError::Audit(format!(
                        "reference `{}`: the files of `{}` have no column `{rc}`",
                        lookup.reference,
                        part_name(&part.hive)
                    )))
                }
            };
            exprs.push(e.alias(other_key(i)));
        }
        frames.push(table(ctx, &part.input)?.select(exprs));
    }
    union_all(frames, "planning the reference")?
        .ok_or_else(|| ExecError::Audit(format!("reference `{}` has no files", lookup.reference)))
}

fn part_name(hive: &[(String, String)]) -> String {
    if hive.is_empty() {
        return ".".into();
    }
    hive.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("/")
}

/// The anti-join frame of a reference lookup (also rendered by `explain`).
pub fn not_in_reference_frame(
    ctx: &SessionContext,
    staged: &StagedInput,
    reference: &Dataset,
    lookup: &RefLookup,
) -> Result<DataFrame, ExecError> {
    let other = reference_keys(ctx, reference, lookup)?;
    pj::not_in_reference_frame(table(ctx, staged)?, other, lookup)
        .map_err(|e| ExecError::engine("planning the reference lookup", e))
}

/// How a reference lookup runs on the key engine, for `explain`; `None`:
/// as a DataFusion plan.
pub fn reference_on_engine(staged: &StagedInput, lookup: &RefLookup) -> Option<String> {
    keys::join::packing_for(staged, &lookup.columns, &lookup.key_types)
        .map(|p| keys::join::describe(&p))
}

/// Staged rows whose key is absent from the reference, and the top keys.
/// With `engine`, the key engine runs it when the key packs exactly.
pub async fn not_in_reference(
    ctx: &SessionContext,
    staged: &StagedInput,
    reference: &Dataset,
    lookup: &RefLookup,
    engine: bool,
    label: &str,
) -> Result<JoinResult, ExecError> {
    let mut joined = None;
    if engine {
        let other = || {
            Ok(keys::join::Side {
                input: keys::join::SideInput::Frame(reference_keys(ctx, reference, lookup)?),
                rows: reference.parts.iter().map(|p| p.input.row_count()).sum(),
            })
        };
        let want = keys::join::Want::Missing;
        joined = on_engine(
            ctx,
            staged,
            &lookup.columns,
            &lookup.key_types,
            other,
            want,
            label,
        )
        .await?
        .map(|j| (j.value, j.samples, j.passes));
    }
    let (value, best, passes) = match joined {
        Some(j) => j,
        None => {
            let frame = not_in_reference_frame(ctx, staged, reference, lookup)?;
            let top = grouped_top(frame, lookup.columns.len(), label, staged.row_count()).await?;
            (top.rows, top.best, Vec::new())
        }
    };
    Ok(JoinResult {
        value,
        samples: best
            .into_iter()
            .map(|(key, rows)| JoinSample {
                key,
                rows,
                partition: None,
            })
            .collect(),
        passes,
    })
}
