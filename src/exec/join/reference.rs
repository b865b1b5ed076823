//! `values(k) in REF(k)`: the staged rows whose key is absent from a
//! reference table, on the key engine (packed words, or fingerprints for
//! keys that pack into no word) or as a DataFusion anti-join (floats, and
//! staged keys whose table the pool refuses).

use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::cast;
use datafusion::prelude::{ident, lit, SessionContext};

use super::{fingerprint_plan, on_engine, union_all, JoinResult, JoinSample};
use crate::check::RefLookup;
use crate::exec::keys;
use crate::exec::{grouped_top, table};
use crate::exec::{ExecError, SAMPLES};
use crate::plan::join::{self as pj, other_key};
use crate::staged::reference::Dataset;
use crate::staged::StagedInput;
use crate::value::Value;

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
pub fn reference_on_engine(
    staged: &StagedInput,
    reference: &Dataset,
    lookup: &RefLookup,
) -> Result<Option<String>, ExecError> {
    if let Some(p) = keys::join::packing_for(staged, &lookup.columns, &lookup.key_types) {
        return Ok(Some(keys::join::describe(&p)));
    }
    let most = lookup_keys();
    Ok(fingerprint_plan(staged, &lookup.columns, &lookup.key_types, None)?.map(|_| {
        if reference_rows(reference) > most as u64 {
            keys::join::describe_spread()
        } else {
            format!(
                "{}; spread into radix partitions instead if a scan task meets more than {most} distinct staged keys",
                keys::join::describe_fingerprinted()
            )
        }
    }))
}

fn reference_rows(reference: &Dataset) -> u64 {
    reference.parts.iter().map(|p| p.input.row_count()).sum()
}

/// The most distinct keys the engine's fingerprinted lookup keeps in the
/// table it probes in place: a reference of more rows goes to the spread
/// lookup (both sides radix-partitioned) at once, and so does a lookup
/// whose staged keys outgrow it in a scan task. Measured at 10M staged
/// rows of text keys, 2 threads: 200,000 distinct keys 0.34 to 0.49 s in
/// place against DataFusion's 0.62 to 0.84 s; 500,000 and 1M about even,
/// at twice the memory; 3M and 10M slower (`benches/README.md`). A test
/// build takes another bound from `DQGATE_TEST_LOOKUP_KEYS`.
fn lookup_keys() -> usize {
    crate::hooks::lookup_keys().unwrap_or(1 << 18)
}

/// The reference's keys as the other side of the key engine's lookup.
fn reference_side(
    ctx: &SessionContext,
    reference: &Dataset,
    lookup: &RefLookup,
) -> Result<keys::join::Side, ExecError> {
    let frame = reference_keys(ctx, reference, lookup)?;
    // A reference of one part may be walked page by page.
    let input = match &reference.parts[..] {
        [part] => {
            keys::join::SideInput::of(&part.input, &lookup.ref_columns, frame, keys::threads(ctx))
        }
        _ => keys::join::SideInput::Frame(frame),
    };
    Ok(keys::join::Side {
        input,
        rows: reference_rows(reference),
    })
}

/// Every distinct staged key the reference lacks, exact, values in the
/// order of the key columns (typed as the staged columns), found by the
/// key engine's spread lookup, whose memory is bounded (it writes to disk
/// past its budget; `bits`: the test-only collision switch); `None` when
/// the key takes no fingerprinted lookup,
/// the pool refuses even its budget, or more keys are missing than the
/// key engine's budget holds (64 bytes a key more than its own: the
/// failed rows select the staged rows by them, in a join whose table
/// holds them).
pub async fn missing_keys(
    ctx: &SessionContext,
    staged: &StagedInput,
    reference: &Dataset,
    lookup: &RefLookup,
    bits: Option<u32>,
) -> Result<Option<Vec<Vec<Value>>>, ExecError> {
    let (columns, types) = (&lookup.columns, &lookup.key_types);
    let Some(plan) = fingerprint_plan(staged, columns, types, bits)? else {
        return Ok(None);
    };
    let side = super::staged_side(ctx, staged, columns)?;
    let other = reference_side(ctx, reference, lookup)?;
    let want = keys::join::Want::Missing;
    let label = "failed rows: the missing keys";
    let most = (keys::budget(ctx) / (plan.key_bytes() + 64)) as usize;
    let spread = keys::join::spread(ctx, (side, other), &plan, want, (most + 1, true), label);
    let Some(joined) = spread.await? else {
        return Ok(None);
    };
    Ok((joined.samples.len() <= most)
        .then(|| joined.samples.into_iter().map(|(key, _)| key).collect()))
}

/// Staged rows whose key is absent from the reference, and the top keys.
/// With `engine`, the key engine runs it: by packed words when the key
/// packs exactly, else by fingerprint when the staged keys' table fits
/// (`bits`: the test-only collision switch).
pub async fn not_in_reference(
    ctx: &SessionContext,
    staged: &StagedInput,
    reference: &Dataset,
    lookup: &RefLookup,
    (engine, bits): (bool, Option<u32>),
    label: &str,
) -> Result<JoinResult, ExecError> {
    let mut joined = None;
    // Why the engine's fingerprinted lookup left it to DataFusion.
    let mut gave_up: Option<String> = None;
    if engine {
        let reference_rows = reference_rows(reference);
        let other = || reference_side(ctx, reference, lookup);
        let want = keys::join::Want::Missing;
        let (columns, types) = (&lookup.columns, &lookup.key_types);
        let most = lookup_keys();
        joined = match fingerprint_plan(staged, columns, types, bits)? {
            Some(plan) => {
                // The in-place table's answer, or why the lookup is spread.
                let in_place = if reference_rows > most as u64 {
                    Err(format!(
                        "the reference has {reference_rows} rows, more than the {most} keys the in-place table keeps"
                    ))
                } else {
                    let plan = plan.clone().with_most_keys(most);
                    let side = super::staged_side(ctx, staged, columns)?;
                    match keys::join::build_fingerprinted(ctx, side, &plan, label).await {
                        Ok(Some(built)) => Ok(keys::join::probe_fingerprinted(
                            built,
                            other()?,
                            want,
                            label,
                        )
                        .await?),
                        Ok(None) => Err("the memory pool refuses the in-place table".into()),
                        Err(ExecError::GaveUp(keys::GaveUp::TooManyKeys(most))) => Err(format!(
                            "more than {most} distinct staged keys, the most the in-place table keeps"
                        )),
                        Err(e) => return Err(e),
                    }
                };
                match in_place {
                    Ok(joined) => Some(joined),
                    Err(why) => {
                        let side = super::staged_side(ctx, staged, columns)?;
                        let spread =
                            keys::join::spread(ctx, (side, other()?), &plan, want, (SAMPLES, false), label)
                                .await?;
                        if spread.is_none() {
                            gave_up = Some("the memory pool refuses the keys' partitions".into());
                        }
                        spread.map(|mut j| {
                            j.passes.insert(0, format!("spread lookup: {why}"));
                            j
                        })
                    }
                }
            }
            None => on_engine(ctx, staged, columns, types, other, want, label).await?,
        }
        .map(|j| (j.value, j.samples, j.passes));
    }
    let (value, best, passes) = match joined {
        Some(j) => j,
        None => {
            let frame = not_in_reference_frame(ctx, staged, reference, lookup)?;
            let top = grouped_top(frame, lookup.columns.len(), label, staged.row_count()).await?;
            let passes = gave_up
                .map(|why| format!("DataFusion's anti-join, not the key engine's lookup: {why}"))
                .into_iter()
                .collect();
            (top.rows, top.best, passes)
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
