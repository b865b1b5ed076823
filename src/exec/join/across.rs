//! `unique(k) across published`: the distinct staged keys that also occur
//! in another published partition, with the partition where each sample
//! lives. The published side is read only where its footers admit a staged
//! key (see `exec::published`), or, where that reader cannot go, the files
//! outside the staged integer key range are skipped.

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{cast, Expr};
use datafusion::prelude::{lit, SessionContext};
use futures::TryStreamExt;

use super::side::{across_types, published_side, PublishedSide};
use super::{fingerprint_plan, on_engine, JoinResult, JoinSample, PublishedPart};
use crate::exec::ExecError;
use crate::exec::{grouped_top, keys, table};
use crate::keyindex::Kind;
use crate::plan::join as pj;
use crate::staged::{Location, StagedInput};
use crate::value::Value;

/// How `across published` runs on the key engine, for `explain`; `None`:
/// as a DataFusion plan.
pub fn across_on_engine(
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
) -> Result<Option<String>, ExecError> {
    let types = across_types(staged, parts, keys)?;
    if let Some(p) = keys::join::packing_for(staged, keys, &types) {
        return Ok(Some(keys::join::describe(&p)));
    }
    Ok(fingerprint_plan(staged, keys, &types, None)?.map(|_| {
        if keys::join::in_place(staged.row_count()) {
            format!(
                "{}; spread into radix partitions instead if the memory pool refuses its table",
                keys::join::describe_fingerprinted()
            )
        } else {
            keys::join::describe_spread()
        }
    }))
}

/// How `across published` runs when every other version has a key index
/// (see [`across_by_index_plan`]).
pub enum IndexPlan {
    /// The indexes are read: how.
    Indexes(String),
    /// The footers leave little of the partitions the key zones leave
    /// (keys that rise with time): why they win, and what they read of
    /// those partitions, whose rows are probed with the staged keys read
    /// for the indexes.
    Footers(String, String),
    /// The partitions' files are read as `across_on_engine` and the plan
    /// say: why.
    Files(String),
}

/// How `across published` runs through the key indexes of the published
/// versions, for `explain`.
pub fn across_by_index_plan(
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
    side: &PublishedSide,
) -> Result<IndexPlan, ExecError> {
    let types = across_types(staged, parts, keys)?;
    let mut indexes = match super::indexed::expected(staged, parts, keys, &types) {
        Ok(e) => e,
        Err(why) => return Ok(IndexPlan::Files(why)),
    };
    let kept = side.kept(&mut indexes, parts);
    if let (Some(why), Some(pruned)) = (kept.pruned_well(), &kept.pruned) {
        let zones = kept
            .describe()
            .map(|z| format!("{z}; of the rest, "))
            .unwrap_or_default();
        return Ok(IndexPlan::Footers(
            why,
            zones + &PublishedSide::reading(pruned),
        ));
    }
    Ok(
        match indexes.unreadable(kept.pruned.is_some(), parts.len()) {
            Some(why) => IndexPlan::Files(why),
            None => {
                let how = super::indexed::describe(&indexes, parts.len());
                IndexPlan::Indexes(match kept.describe() {
                    Some(zones) => format!("{zones}; the rest {how}"),
                    None => how,
                })
            }
        },
    )
}

/// Runs `blocking` (file reads) so that the tasks this worker spawned last
/// (a scan just started) go on on another worker meanwhile: on a
/// multi-thread runtime the worker hands its tasks over for the time it
/// blocks; on a current-thread one they wait, as they would anyway.
fn beside_tasks<T>(blocking: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(blocking),
        _ => blocking(),
    }
}

/// The semi-join frame of `across published` and the published side, or
/// `None` when pruning left nothing to compare with.
pub fn across_published_frames(
    ctx: &SessionContext,
    staged: &StagedInput,
    (side, parts): (&PublishedSide, &[PublishedPart]),
    keys: &[String],
) -> Result<Option<(DataFrame, DataFrame)>, ExecError> {
    let Some((published, projected)) = side.frames(ctx, staged, parts, keys)? else {
        return Ok(None);
    };
    let frame = pj::across_published_frame(table(ctx, staged)?, projected, keys, &side.types)
        .map_err(|e| ExecError::engine("planning the cross-partition check", e))?;
    Ok(Some((frame, published)))
}

/// Distinct staged keys that also occur in another published partition,
/// with samples naming the partition. With `engine`, the key engine finds
/// them: by packed words when the key packs exactly, else by fingerprint
/// (`bits`: the test-only collision switch).
pub async fn across_published(
    ctx: &SessionContext,
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
    (engine, bits): (bool, Option<u32>),
    label: &str,
) -> Result<JoinResult, ExecError> {
    let started = std::time::Instant::now();
    // Both the distinct keys and the footers' comparison read the staged
    // key columns: one scan serves both where it can. It starts before the
    // indexes' headers are read (a year of partitions is a year of
    // headers), so that it runs beside them; where no index can be used
    // after all, it is dropped, having read at most its channels' batches.
    let kinds = Kind::all(&super::staged_types(staged, keys)?);
    let local = parts
        .iter()
        .all(|p| matches!(p.input.location, Location::Local(_)));
    let teed = match engine && local && kinds.is_some() {
        true => super::side::tee_staged_keys(ctx, staged, parts, keys).await?,
        false => None,
    };
    // With a key index beside every other version, the staged keys are
    // read for them while the footers are compared with the staged keys:
    // the indexes are read unless the footers leave little to read (keys
    // that rise with time).
    let indexes = match engine {
        true => {
            let types = across_types(staged, parts, keys)?;
            beside_tasks(|| super::indexed::expected(staged, parts, keys, &types))
        }
        false => Err(String::new()),
    };
    // Keys that pack into no word are fingerprinted: the staged side's
    // table is built while the published side is planned (both read the
    // staged keys; each mostly on one core).
    let fingerprinted = match engine {
        true => fingerprint_plan(staged, keys, &across_types(staged, parts, keys)?, bits)?,
        false => None,
    };
    let build = |now: bool| {
        let plan = fingerprinted.as_ref().filter(|_| now);
        async move {
            match plan {
                Some(plan) => {
                    let side = super::staged_side(ctx, staged, keys)?;
                    keys::join::build_fingerprinted(ctx, side, plan, label).await
                }
                None => Ok(None),
            }
        }
    };
    let (for_distinct, for_side) = match (indexes.is_ok(), teed) {
        (true, Some([a, b])) => (Some(a), Some(b)),
        _ => (None, None),
    };
    // Keys outside every partition's key zones are in none: both readers
    // leave them out (the day's new keys, when keys rise with time).
    let within = match (&indexes, &kinds) {
        (Ok(i), Some(kinds)) => i.within(kinds).map(Arc::new),
        _ => None,
    };
    // A task of its own, so that it runs on another core than the
    // footers' comparison.
    let distinct = {
        let (want, ctx, staged, keys, within) = (
            indexes.is_ok(),
            ctx.clone(),
            staged.clone(),
            keys.to_vec(),
            within.clone(),
        );
        async move {
            if !want {
                return Ok(None);
            }
            let task = async move {
                let keys =
                    super::indexed::distinct_keys(&ctx, &staged, &keys, 64, (for_distinct, within))
                        .await?;
                let keys = keys.map(super::indexed::StagedKeys::new);
                Ok::<_, ExecError>(keys.map(|k| (k, started.elapsed())))
            };
            tokio::spawn(task)
                .await
                .map_err(|e| ExecError::Audit(format!("reading the staged keys stopped: {e}")))?
        }
    };
    let side = async {
        let side = published_side(ctx, staged, parts, keys, (for_side, within.as_deref())).await?;
        Ok::<_, ExecError>((side, started.elapsed()))
    };
    let ((side, footers), mut built, distinct) =
        futures::try_join!(side, build(indexes.is_err()), distinct)?;
    let distinct = distinct.map(|(keys, took)| {
        let took = super::indexed::Took {
            started,
            distinct: took,
            footers,
        };
        (keys, took)
    });
    let mut read_passes = Vec::new();
    let why = match (indexes, distinct) {
        (Ok(mut indexes), Some((distinct, took))) => {
            let kept = side.kept(&mut indexes, parts);
            let zones = kept.describe();
            let with_zones = |passes: Vec<String>| zones.iter().cloned().chain(passes).collect();
            match (kept.pruned_well(), &kept.pruned) {
                // The footers win: the staged keys read for the indexes
                // serve as the probe's table, so they are not read a third
                // time.
                (Some(why), Some(pruned)) => {
                    let threads = keys::threads(ctx);
                    let by = super::indexed::probe_pruned(distinct, pruned, (threads, bits), took)
                        .await?;
                    let mut passes = vec![format!("key indexes not used: {why}")];
                    passes.extend(by.passes);
                    let passes = with_zones(passes);
                    return Ok(assemble(by.value, &by.best, by.located, passes));
                }
                (Some(why), None) => why,
                _ => {
                    let threads = keys::threads(ctx);
                    let read = kept.pruned.as_ref();
                    let how = (threads, bits);
                    match super::indexed::lookup(distinct, indexes, read, (parts, keys), how, took)
                        .await?
                    {
                        Ok(by) => {
                            let passes = with_zones(by.passes);
                            return Ok(assemble(by.value, &by.best, by.located, passes));
                        }
                        Err(why) => why,
                    }
                }
            }
        }
        (Ok(_), None) => {
            "the memory pool refuses the staged keys, so the partitions' files are read".into()
        }
        (Err(why), _) => why,
    };
    if engine {
        read_passes.push(format!("key indexes not used: {why}"));
        if built.is_none() {
            built = build(true).await?;
        }
    }
    let frames = side.frames(ctx, staged, parts, keys)?;
    read_passes.push(format!(
        "read the staged keys and prune the published side by footer ranges ({}{}): {:.2} s",
        match &side.pruned {
            Some(p) => format!("reads {}", p.counts.describe()),
            None => "whole files outside the staged integer range".into(),
        },
        side.sampled().map(|s| format!("; {s}")).unwrap_or_default(),
        started.elapsed().as_secs_f64()
    ));
    let PublishedSide { types, pruned, .. } = side;
    let Some((published, projected)) = frames else {
        return Ok(JoinResult {
            passes: read_passes,
            ..JoinResult::default()
        });
    };
    let mut found = None;
    // Where the top keys live, when the engine's pass saw it.
    let mut located: Option<Vec<(usize, String)>> = None;
    if engine {
        let other = || {
            Ok(match &pruned {
                Some(p) => keys::join::Side {
                    input: keys::join::SideInput::Streams(p.streams(keys::threads(ctx))),
                    rows: p.counts.rows.0,
                },
                None => keys::join::Side {
                    input: keys::join::SideInput::Frame(projected.clone()),
                    rows: parts.iter().map(|p| p.input.row_count()).sum(),
                },
            })
        };
        let want = keys::join::Want::Present;
        let joined = match (built.take(), &fingerprinted) {
            (Some(built), _) => {
                Some(keys::join::probe_fingerprinted(built, other()?, want, label).await?)
            }
            // The staged side is too large for the in-place table, or the
            // pool refused it.
            (None, Some(plan)) => {
                let side = super::staged_side(ctx, staged, keys)?;
                let spread = keys::join::spread(
                    ctx,
                    (side, other()?),
                    plan,
                    want,
                    (crate::exec::SAMPLES, false),
                    label,
                )
                .await?;
                if spread.is_none() {
                    read_passes.push(
                        "DataFusion's semi-join, not the key engine's: the memory pool refuses the keys' partitions".into(),
                    );
                }
                spread
            }
            (None, None) => on_engine(ctx, staged, keys, &types, other, want, label).await?,
        };
        if let Some(j) = joined {
            read_passes.extend(j.passes);
            // The probing join saw where each sample lives: no second read.
            if let (Some(at), Some(p)) = (&j.located, &pruned) {
                let mut pairs: Vec<(usize, String)> = at
                    .iter()
                    .enumerate()
                    .flat_map(|(i, parts)| {
                        parts.iter().map(move |q| (i, p.rel(*q as usize).into()))
                    })
                    .collect();
                pairs.sort_unstable();
                located = Some(pairs);
            }
            found = Some((j.value, j.samples, read_passes.clone()));
        }
    }
    let (value, best, passes) = match found {
        Some(f) => f,
        None => {
            let frame = pj::across_published_frame(table(ctx, staged)?, projected, keys, &types)
                .map_err(|e| ExecError::engine("planning the cross-partition check", e))?;
            let top = grouped_top(frame, keys.len(), label, staged.row_count()).await?;
            (top.groups, top.best, read_passes)
        }
    };
    if best.is_empty() {
        return Ok(JoinResult {
            value,
            samples: Vec::new(),
            passes,
        });
    }
    let found = match located {
        Some(found) => found,
        None => {
            let wanted: Vec<Vec<Expr>> = best
                .iter()
                .map(|(key, _)| {
                    key.iter()
                        .zip(&types)
                        .map(|(v, t)| cast(lit(crate::scalar::to_scalar(v)), t.clone()))
                        .collect()
                })
                .collect();
            let frame = pj::partitions_of_keys_frame(published, wanted)
                .map_err(|e| ExecError::engine("planning samples", e))?;
            locate(frame, &best, &types).await?
        }
    };
    Ok(assemble(value, &best, found, passes))
}

/// The result of `across published`: `value` clashing keys, samples of the
/// `best` (staged values and rows) where `found` (top key, partition) says
/// they live.
fn assemble(
    value: u64,
    best: &[(Vec<Value>, u64)],
    found: Vec<(usize, String)>,
    passes: Vec<String>,
) -> JoinResult {
    let mut samples = Vec::new();
    for (i, (key, rows)) in best.iter().enumerate() {
        for (_, partition) in found.iter().filter(|(at, _)| *at == i) {
            samples.push(JoinSample {
                key: key.clone(),
                rows: *rows,
                partition: Some(partition.clone()),
            });
        }
    }
    samples.truncate(crate::exec::SAMPLES);
    JoinResult {
        value,
        samples,
        passes,
    }
}

/// Runs the partition lookup of the top keys; returns (index of the top key,
/// partition), sorted by both.
async fn locate(
    frame: DataFrame,
    best: &[(Vec<Value>, u64)],
    types: &[DataType],
) -> Result<Vec<(usize, String)>, ExecError> {
    let as_compared = |v: &Value, t: &DataType| {
        let s = crate::scalar::to_scalar(v);
        s.cast_to(t)
            .ok()
            .and_then(|c| crate::scalar::from_scalar(&c))
            .unwrap_or_else(|| v.clone())
    };
    let wanted: Vec<Vec<Value>> = best
        .iter()
        .map(|(key, _)| {
            key.iter()
                .zip(types)
                .map(|(v, t)| as_compared(v, t))
                .collect()
        })
        .collect();
    let batches: Vec<RecordBatch> = frame
        .execute_stream()
        .await
        .map_err(|e| ExecError::engine("locating clashing keys", e))?
        .try_collect()
        .await
        .map_err(|e| ExecError::engine("locating clashing keys", e))?;
    let width = types.len();
    let mut found = Vec::new();
    for batch in &batches {
        for row in 0..batch.num_rows() {
            let value = |c: usize| {
                ScalarValue::try_from_array(batch.column(c), row)
                    .ok()
                    .and_then(|s| crate::scalar::from_scalar(&s))
                    .unwrap_or(Value::Null)
            };
            let key: Vec<Value> = (0..width).map(value).collect();
            let partition = match value(width) {
                Value::Text(p) => p,
                other => other.to_string(),
            };
            if let Some(i) = wanted.iter().position(|w| *w == key) {
                found.push((i, partition));
            }
        }
    }
    found.sort();
    found.dedup();
    Ok(found)
}
