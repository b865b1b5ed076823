//! `unique(k) across published`: the distinct staged keys that also occur
//! in another published partition, with the partition where each sample
//! lives. The published side is read only where its footers admit a staged
//! key (see `exec::published`), or, where that reader cannot go, the files
//! outside the staged integer key range are skipped.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{cast, Expr};
use datafusion::prelude::{ident, lit, SessionContext};
use futures::TryStreamExt;

use super::{fingerprint_plan, on_engine, union_all, JoinResult, JoinSample, PublishedPart};
use crate::check::common_key_type;
use crate::exec::published;
use crate::exec::ExecError;
use crate::exec::{grouped_top, keys, stats, table};
use crate::plan::join::{self as pj, other_key, PARTITION};
use crate::staged::StagedInput;
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
    Ok(fingerprint_plan(staged, keys, &types, None)?.map(|_| keys::join::describe_fingerprinted()))
}

/// How `across published` runs through the key indexes of the published
/// versions, for `explain`; `Err` says why it cannot (the partitions' files
/// are then read as `across_on_engine` and the plan say).
pub fn across_by_index_plan(
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
    side: &PublishedSide,
) -> Result<Result<String, String>, ExecError> {
    let types = across_types(staged, parts, keys)?;
    let indexes = match super::indexed::expected(staged, parts, keys, &types) {
        Ok(e) => e,
        Err(why) => return Ok(Err(why)),
    };
    let unreadable = indexes.unreadable(side.pruned.is_some(), parts.len());
    Ok(match side.pruned_well().or(unreadable) {
        Some(why) => Err(why),
        None => Ok(super::indexed::describe(&indexes, parts.len())),
    })
}

/// The type each key part is compared in: the staged type, widened to
/// every published partition's type.
fn across_types(
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
) -> Result<Vec<DataType>, ExecError> {
    let mut types = Vec::new();
    for k in keys {
        let mut t = staged.schema.field_with_name(k)?.data_type().clone();
        for p in parts {
            let theirs = p.input.schema.field_with_name(k).map_err(|_| {
                ExecError::Audit(format!(
                    "the published partition `{}` has no column `{k}`",
                    p.rel
                ))
            })?;
            t = common_key_type(&t, theirs.data_type()).ok_or_else(|| {
                ExecError::Audit(format!(
                    "column `{k}` is {} in the published partition `{}` but {t} in the staged files; keys of different kinds cannot be compared",
                    theirs.data_type(),
                    p.rel
                ))
            })?;
        }
        types.push(t);
    }
    Ok(types)
}

/// The published partitions' key parts, cast, as [`other_key`] columns plus
/// [`PARTITION`]; files and row groups outside the staged integer key
/// ranges are pruned. `None` when no file is left to read.
fn published_keys(
    ctx: &SessionContext,
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
    types: &[DataType],
) -> Result<Option<DataFrame>, ExecError> {
    let ranges: Vec<(String, (i64, i64))> = keys
        .iter()
        .filter_map(|k| stats::integer_range(staged, k).map(|r| (k.clone(), r)))
        .collect();
    let mut frames = Vec::new();
    for part in parts {
        let input = prune(&part.input, &ranges);
        if input.files.is_empty() {
            continue;
        }
        let mut exprs: Vec<Expr> = keys
            .iter()
            .zip(types)
            .enumerate()
            .map(|(i, (k, t))| cast(ident(k), t.clone()).alias(other_key(i)))
            .collect();
        exprs.push(lit(part.rel.clone()).alias(PARTITION));
        let in_range = ranges
            .iter()
            .map(|(k, (lo, hi))| ident(k).between(lit(*lo), lit(*hi)))
            .reduce(Expr::and)
            .unwrap_or_else(|| lit(true));
        frames.push(
            table(ctx, &input)?
                .filter(in_range)
                .and_then(|f| f.select(exprs)),
        );
    }
    union_all(frames, "planning the published partitions")
}

/// The files of `input` whose footers do not rule out every staged key.
fn prune(input: &StagedInput, ranges: &[(String, (i64, i64))]) -> StagedInput {
    let mut kept = input.clone();
    kept.files.retain(|f| {
        let one = StagedInput {
            files: vec![f.clone()],
            ..input.clone()
        };
        ranges.iter().all(|(k, (lo, hi))| {
            stats::integer_range(&one, k).is_none_or(|(min, max)| max >= *lo && min <= *hi)
        })
    });
    kept
}

/// The published side of `across published`: the compared key types, what
/// the footers pruned, and (unless nothing is left to read) the published
/// keys with [`PARTITION`] and the keys alone.
pub struct PublishedSide {
    pub types: Vec<DataType>,
    /// `None` on Ballista, for a part on an object store, or when a key
    /// column comes from Hive directories of a part: files are then pruned
    /// by the staged integer ranges only.
    pub pruned: Option<published::Pruned>,
    frames: Option<(DataFrame, DataFrame)>,
}

impl PublishedSide {
    /// Why the footers' pruning is read rather than the key indexes: it
    /// leaves at most a tenth of the published rows to read (keys that
    /// rise with time). Reading and probing a row costs about nine times
    /// what looking up an index key does (0.21 s for 5.7M rows of 33-byte
    /// text, against 0.13 s for the 30M keys of their indexes).
    pub fn pruned_well(&self) -> Option<String> {
        let (read, all) = self.pruned.as_ref()?.counts.rows;
        (read <= all / 10).then(|| {
            format!("the footers leave {read} of {all} published row(s) to read, fewer than the indexes hold")
        })
    }

    /// How the published side is read, for `explain`.
    pub fn describe(&self) -> String {
        match &self.pruned {
            Some(p) => {
                let mut out = format!(
                    "footer ranges of each published row group (and page, in files with a page index) compared with the sorted staged keys: reads {}",
                    p.counts.describe()
                );
                for f in p.files_read(20) {
                    out += &format!("\n    {f}");
                }
                out
            }
            None => "files outside the staged integer key range skipped".into(),
        }
    }
}

/// The published side, pruned by footer ranges against the staged keys.
pub async fn published_side(
    ctx: &SessionContext,
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
) -> Result<PublishedSide, ExecError> {
    let types = across_types(staged, parts, keys)?;
    // On Ballista the published side stays a plan of files, which the
    // cluster can be sent: the files outside the staged range are skipped.
    let pruned = if crate::exec::ballista::is_client(ctx) {
        None
    } else {
        let values = published::StagedValues::read(ctx, staged, keys, &types).await?;
        published::Pruned::plan(parts, keys, &types, &values)?
    };
    let published = match &pruned {
        Some(p) => p.frame(ctx, keys::threads(ctx))?,
        None => published_keys(ctx, staged, parts, keys, &types)?,
    };
    let frames = match published {
        None => None,
        Some(published) => {
            let projected = published
                .clone()
                .select(
                    (0..keys.len())
                        .map(|i| ident(other_key(i)))
                        .collect::<Vec<_>>(),
                )
                .map_err(|e| ExecError::engine("planning the published partitions", e))?;
            Some((published, projected))
        }
    };
    Ok(PublishedSide {
        types,
        pruned,
        frames,
    })
}

/// The other published partitions' keys, cast to the types they are
/// compared in (returned too), as [`other_key`] columns plus [`PARTITION`];
/// `None` when pruning by footer ranges left nothing to compare with.
pub async fn published_keys_frame(
    ctx: &SessionContext,
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
) -> Result<Option<(Vec<DataType>, DataFrame)>, ExecError> {
    let side = published_side(ctx, staged, parts, keys).await?;
    Ok(side.frames.map(|(published, _)| (side.types, published)))
}

/// The semi-join frame of `across published` and the published side, or
/// `None` when pruning left nothing to compare with.
pub fn across_published_frames(
    ctx: &SessionContext,
    staged: &StagedInput,
    side: &PublishedSide,
    keys: &[String],
) -> Result<Option<(DataFrame, DataFrame)>, ExecError> {
    let Some((published, projected)) = &side.frames else {
        return Ok(None);
    };
    let frame =
        pj::across_published_frame(table(ctx, staged)?, projected.clone(), keys, &side.types)
            .map_err(|e| ExecError::engine("planning the cross-partition check", e))?;
    Ok(Some((frame, published.clone())))
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
    // With a key index beside every other version, the staged keys are
    // read for them while the footers are compared with the staged keys:
    // the indexes are read unless the footers leave little to read (keys
    // that rise with time).
    let indexes = match engine {
        true => super::indexed::expected(staged, parts, keys, &across_types(staged, parts, keys)?),
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
    // A task of its own, so that it runs on another core than the
    // footers' comparison.
    let distinct = {
        let (want, ctx, staged, keys) =
            (indexes.is_ok(), ctx.clone(), staged.clone(), keys.to_vec());
        async move {
            if !want {
                return Ok(None);
            }
            let task = async move {
                let keys = super::indexed::distinct_keys(&ctx, &staged, &keys, 64).await?;
                Ok::<_, ExecError>(keys.map(|k| (k, started.elapsed())))
            };
            tokio::spawn(task)
                .await
                .map_err(|e| ExecError::Audit(format!("reading the staged keys stopped: {e}")))?
        }
    };
    let side = async {
        let side = published_side(ctx, staged, parts, keys).await?;
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
        (Ok(indexes), Some((distinct, took))) => match (side.pruned_well(), &side.pruned) {
            // The footers win: the staged keys read for the indexes serve
            // as the probe's table, so they are not read a third time.
            (Some(why), Some(pruned)) => {
                let threads = keys::threads(ctx);
                let by =
                    super::indexed::probe_pruned(distinct, pruned, (threads, bits), took).await?;
                let mut passes = vec![format!("key indexes not used: {why}")];
                passes.extend(by.passes);
                return Ok(assemble(by.value, &by.best, by.located, passes));
            }
            (Some(why), None) => why,
            _ => {
                let threads = keys::threads(ctx);
                let read = side.pruned.as_ref();
                let how = (threads, bits);
                match super::indexed::lookup(distinct, indexes, read, (parts, keys), how, took)
                    .await?
                {
                    Ok(by) => return Ok(assemble(by.value, &by.best, by.located, by.passes)),
                    Err(why) => why,
                }
            }
        },
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
    read_passes.push(format!(
        "read the staged keys and prune the published side by footer ranges ({}): {:.2} s",
        match &side.pruned {
            Some(p) => format!("reads {}", p.counts.describe()),
            None => "whole files outside the staged integer range".into(),
        },
        started.elapsed().as_secs_f64()
    ));
    let PublishedSide {
        types,
        pruned,
        frames,
    } = side;
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
        let joined = match built.take() {
            Some(built) => {
                Some(keys::join::probe_fingerprinted(built, other()?, want, label).await?)
            }
            None => on_engine(ctx, staged, keys, &types, other, want, label).await?,
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
