//! Runs the join passes of `plan::join`: the staged keys against a
//! reference table, and against the other published partitions.
//!
//! The other side is a union of its parts (a reference's Hive parts, the
//! published partitions), each projected to the key columns only and cast to
//! the comparison type. For `across published`, published files whose footers
//! prove that their integer key range misses the staged range are not read at
//! all, and a range filter on the key lets the scan skip row groups too.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use datafusion::logical_expr::{cast, Expr};
use datafusion::prelude::{ident, lit, SessionContext};
use futures::TryStreamExt;

use super::published;
use super::ExecError;
use super::{grouped_top, keys, stats, table};
use crate::check::{common_key_type, RefLookup};
use crate::plan::join::{self as pj, other_key, PARTITION};
use crate::staged::reference::Dataset;
use crate::staged::StagedInput;
use crate::value::Value;

pub use super::published::PublishedPart;

/// One offending key: its staged values, how many staged rows carry it, and
/// (for `across published`) the published partition where it also lives.
#[derive(Debug, Clone, PartialEq)]
pub struct JoinSample {
    pub key: Vec<Value>,
    pub rows: u64,
    pub partition: Option<String>,
}

/// What a join pass observed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JoinResult {
    /// Violating staged rows (reference) or clashing distinct keys (across).
    pub value: u64,
    pub samples: Vec<JoinSample>,
    /// What each pass of the key engine did and cost (empty when the join
    /// ran as a DataFusion plan).
    pub passes: Vec<String>,
}

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

/// `UNION ALL` of the frames; `None` when there are none.
fn union_all(
    frames: Vec<datafusion::error::Result<DataFrame>>,
    context: &str,
) -> Result<Option<DataFrame>, ExecError> {
    let mut union: Option<DataFrame> = None;
    for frame in frames {
        let frame = frame.map_err(|e| ExecError::engine(context, e))?;
        union = Some(match union {
            None => frame,
            Some(u) => u.union(frame).map_err(|e| ExecError::engine(context, e))?,
        });
    }
    Ok(union)
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

/// The staged key columns, in key order.
fn staged_side(
    ctx: &SessionContext,
    staged: &StagedInput,
    columns: &[String],
) -> Result<keys::join::Side, ExecError> {
    let frame = table(ctx, staged)?
        .select(columns.iter().map(ident).collect::<Vec<_>>())
        .map_err(|e| ExecError::engine("planning a join", e))?;
    Ok(keys::join::Side {
        input: keys::join::SideInput::Frame(frame),
        rows: staged.row_count(),
    })
}

fn staged_types(staged: &StagedInput, columns: &[String]) -> Result<Vec<DataType>, ExecError> {
    columns
        .iter()
        .map(|c| {
            staged
                .schema
                .field_with_name(c)
                .map(|f| f.data_type().clone())
                .map_err(|e| ExecError::Audit(e.to_string()))
        })
        .collect()
}

/// The key engine's join, when `engine` and the key packs exactly; `None`
/// otherwise (the join then runs as a DataFusion plan).
async fn on_engine(
    ctx: &SessionContext,
    staged: &StagedInput,
    columns: &[String],
    compared: &[DataType],
    other: impl FnOnce() -> Result<keys::join::Side, ExecError>,
    want: keys::join::Want,
    label: &str,
) -> Result<Option<keys::join::Joined>, ExecError> {
    let Some(packing) = keys::join::packing_for(staged, columns, compared) else {
        return Ok(None);
    };
    let types = staged_types(staged, columns)?;
    let staged_side = staged_side(ctx, staged, columns)?;
    keys::join::run(ctx, staged_side, other()?, &packing, &types, want, label)
        .await
        .map(Some)
}

/// How a reference lookup runs on the key engine, for `explain`; `None`:
/// as a DataFusion plan.
pub fn reference_on_engine(staged: &StagedInput, lookup: &RefLookup) -> Option<String> {
    keys::join::packing_for(staged, &lookup.columns, &lookup.key_types)
        .map(|p| keys::join::describe(&p))
}

/// How `across published` runs on the key engine, for `explain`; `None`:
/// as a DataFusion plan.
pub fn across_on_engine(
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
) -> Result<Option<String>, ExecError> {
    let types = across_types(staged, parts, keys)?;
    Ok(keys::join::packing_for(staged, keys, &types).map(|p| keys::join::describe(&p)))
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

/// The type each key part is compared in: the staged type, widened to
/// every published partition's type.
fn across_types(
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
) -> Result<Vec<DataType>, ExecError> {
    let mut types = Vec::new();
    for k in keys {
        let mut t = staged
            .schema
            .field_with_name(k)
            .map_err(|e| ExecError::Audit(e.to_string()))?
            .data_type()
            .clone();
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
    let pruned = if super::ballista::is_client(ctx) {
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
/// them when the key packs exactly.
pub async fn across_published(
    ctx: &SessionContext,
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
    engine: bool,
    label: &str,
) -> Result<JoinResult, ExecError> {
    let started = std::time::Instant::now();
    let side = published_side(ctx, staged, parts, keys).await?;
    let mut read_passes = vec![format!(
        "read the staged keys and prune the published side by footer ranges ({}): {:.2} s",
        match &side.pruned {
            Some(p) => format!("reads {}", p.counts.describe()),
            None => "whole files outside the staged integer range".into(),
        },
        started.elapsed().as_secs_f64()
    )];
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
        if let Some(j) = on_engine(ctx, staged, keys, &types, other, want, label).await? {
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
    samples.truncate(super::SAMPLES);
    Ok(JoinResult {
        value,
        samples,
        passes,
    })
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
