//! The published side of `across published`: the types keys are compared
//! in, what the footers leave to read of the other partitions (see
//! `exec::published`), and what the key zones in their indexes' headers
//! leave of that.

use datafusion::arrow::datatypes::DataType;
use datafusion::dataframe::DataFrame;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::{cast, Expr};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::prelude::{ident, lit, SessionContext};
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};

use super::indexed::Indexes;
use super::{union_all, PublishedPart};
use crate::check::common_key_type;
use crate::exec::published;
use crate::exec::ExecError;
use crate::exec::{keys, stats, table};
use crate::keyindex::Within;
use crate::plan::join::{other_key, PARTITION};
use crate::staged::StagedInput;

/// The type each key part is compared in: the staged type, widened to
/// every published partition's type.
pub(super) fn across_types(
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
    /// `None` on Ballista, or when a key column comes from Hive
    /// directories of a part: files are then pruned by the staged integer
    /// ranges only.
    pub pruned: Option<published::Pruned>,
    /// The staged keys' values the footers were compared with (`None` on
    /// Ballista), which the key zones are compared with too.
    values: Option<published::StagedValues>,
    /// How many staged keys were compared with the footers when a sample
    /// of them already fell within every range (see [`staged_values`]).
    sampled: Option<usize>,
}

impl PublishedSide {
    /// The published keys of `parts` (other than `staged`'s) that the
    /// footers leave to read, with [`PARTITION`], and the keys alone;
    /// `None` when nothing is left. Planned only where a DataFusion plan
    /// reads them (the key indexes need none).
    pub(super) fn frames(
        &self,
        ctx: &SessionContext,
        staged: &StagedInput,
        parts: &[PublishedPart],
        keys: &[String],
    ) -> Result<Option<(DataFrame, DataFrame)>, ExecError> {
        let published = match &self.pruned {
            Some(p) => p.frame(ctx, keys::threads(ctx))?,
            None => published_keys(ctx, staged, parts, keys, &self.types)?,
        };
        let Some(published) = published else {
            return Ok(None);
        };
        let projected = published
            .clone()
            .select(
                (0..keys.len())
                    .map(|i| ident(other_key(i)))
                    .collect::<Vec<_>>(),
            )
            .map_err(|e| ExecError::engine("planning the published partitions", e))?;
        Ok(Some((published, projected)))
    }

    /// The published side as the key indexes see it: the indexed parts
    /// whose key zones hold no staged value are taken out of `indexes`
    /// (no staged key can be in them), and out of what the footers leave
    /// to read.
    pub(super) fn kept(&self, indexes: &mut Indexes, parts: &[PublishedPart]) -> Kept {
        let out = match &self.values {
            Some(values) => indexes.rule_out(values, &self.types),
            None => Vec::new(),
        };
        let kept = |part: usize| out.binary_search(&part).is_err();
        Kept {
            pruned: self.pruned.as_ref().map(|p| match out.is_empty() {
                true => p.clone(),
                false => p.only(kept),
            }),
            rows: (parts.iter().enumerate())
                .filter(|(n, _)| kept(*n))
                .map(|(_, p)| p.input.row_count())
                .sum(),
            zoned: out.len()
                + (indexes.indexed.iter())
                    .filter(|(_, e)| !e.zones.is_empty())
                    .count(),
            ruled_out: out.len(),
            parts: parts.len(),
        }
    }

    /// How the published side is read, for `explain`.
    pub fn describe(&self) -> String {
        let mut out = match &self.pruned {
            Some(p) => Self::reading(p),
            None => "files outside the staged integer key range skipped".into(),
        };
        if let Some(line) = self.sampled() {
            out = format!("{line}; {out}");
        }
        out
    }

    /// What `explain` and `-v` say when a sample of the staged keys
    /// sufficed for the footers.
    pub fn sampled(&self) -> Option<String> {
        self.sampled.map(|n| {
            format!("the first {n} staged key(s) already fall within every published footer range and key zone, so the rest are not read for pruning")
        })
    }

    /// What the footers leave to read of `pruned`, and its first files.
    pub(super) fn reading(pruned: &published::Pruned) -> String {
        let mut out = format!(
            "footer ranges of each published row group (and page, in files with a page index) compared with the sorted staged keys: reads {}",
            pruned.counts.describe()
        );
        for f in pruned.files_read(20) {
            out += &format!("\n    {f}");
        }
        out
    }
}

/// What is left of the published side once the key zones in the indexes'
/// headers ruled out the partitions that cannot hold a staged key.
pub(super) struct Kept {
    /// What the footers leave to read of the partitions left.
    pub pruned: Option<published::Pruned>,
    /// The published rows of the partitions left.
    pub rows: u64,
    /// How many partitions' indexes have zones, how many they rule out,
    /// and how many partitions there are.
    zoned: usize,
    ruled_out: usize,
    parts: usize,
}

impl Kept {
    /// Why the footers' pruning is read rather than the key indexes: it
    /// leaves at most a tenth of the rows of the partitions left to read
    /// (keys that rise with time). Reading and probing a row costs about
    /// nine times what looking up an index key does (0.21 s for 5.7M rows
    /// of 33-byte text, against 0.13 s for the 30M keys of their indexes).
    pub fn pruned_well(&self) -> Option<String> {
        let read = self.pruned.as_ref()?.counts.rows.0;
        let of = match self.ruled_out {
            0 => format!("{} published row(s)", self.rows),
            _ => format!("the {} published row(s) the key zones leave", self.rows),
        };
        (read <= self.rows / 10).then(|| {
            format!("the footers leave {read} of {of} to read, fewer than the indexes hold")
        })
    }

    /// What the zones did, for `explain` and the timing line; `None` when
    /// no index has zones.
    pub fn describe(&self) -> Option<String> {
        (self.zoned > 0).then(|| {
            format!(
                "the key zones in {} index header(s) rule out {} of {} published partition(s): no staged key lies within them",
                self.zoned, self.ruled_out, self.parts
            )
        })
    }
}

/// The published side, pruned by footer ranges against the staged keys.
/// `shared`: the staged key columns from `tee_staged_keys`, else they
/// are read here.
pub async fn published_side(
    ctx: &SessionContext,
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
    (shared, within): (Option<SendableRecordBatchStream>, Option<&Within>),
) -> Result<PublishedSide, ExecError> {
    let types = across_types(staged, parts, keys)?;
    // On Ballista the published side stays a plan of files, which the
    // cluster can be sent: the files outside the staged range are skipped.
    let (pruned, values, sampled) = if crate::exec::ballista::is_client(ctx) {
        (None, None, None)
    } else {
        let (pruned, values, sampled) =
            staged_values(ctx, staged, parts, keys, &types, (shared, within)).await?;
        (pruned, Some(values), sampled)
    };
    Ok(PublishedSide {
        types,
        pruned,
        values,
        sampled,
    })
}

/// The staged keys a large staged side first compares with the published
/// footers and key zones: about its first 65,536 rows (a test build takes
/// another count from `DQGATE_TEST_SAMPLE_ROWS`), from 16 times as many
/// staged rows.
const SAMPLE_ROWS: usize = 65_536;

/// The staged rows a sample is taken from (`None`: all of them are read).
fn sample_of(staged: &StagedInput) -> Option<usize> {
    let sample = crate::hooks::sample_rows().unwrap_or(SAMPLE_ROWS).max(1);
    (staged.row_count() >= 16 * sample as u64).then_some(sample)
}

/// One scan of the staged key columns read by two readers side by side:
/// the distinct staged keys for the key indexes and the staged values the
/// footers are compared with. Each read them on its own before, so the
/// staged column was decompressed and decoded twice (a tenth of a 365-day
/// `across published` on rising keys).
///
/// Two streams of the scan, each batch in both, or `None` when the two
/// would not read the same thing: a key column the staged values cast, a
/// staged side compared through a sample first (see [`staged_values`]), or
/// a Ballista client (no staged values). A reader that stops early does
/// not hold the other up.
pub async fn tee_staged_keys(
    ctx: &SessionContext,
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
) -> Result<Option<[SendableRecordBatchStream; 2]>, ExecError> {
    let types = across_types(staged, parts, keys)?;
    if crate::exec::ballista::is_client(ctx)
        || sample_of(staged).is_some()
        || !published::StagedValues::reads_as_is(staged, keys, &types)
    {
        return Ok(None);
    }
    let mut stream = super::staged_keys_stream(ctx, staged, keys, "the staged keys").await?;
    let schema = stream.schema();
    let (mut a, a_rx) = mpsc::channel(32);
    let (mut b, b_rx) = mpsc::channel(32);
    tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            match item {
                Ok(batch) => {
                    let to_a = a.send(Ok(batch.clone())).await;
                    let to_b = b.send(Ok(batch)).await;
                    if to_a.is_err() && to_b.is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let shown = DataFusionError::Execution(e.to_string());
                    let _ = a.send(Err(e)).await;
                    let _ = b.send(Err(shown)).await;
                    return;
                }
            }
        }
    });
    let as_stream = |rx: mpsc::Receiver<_>| -> SendableRecordBatchStream {
        Box::pin(RecordBatchStreamAdapter::new(schema.clone(), rx))
    };
    Ok(Some([as_stream(a_rx), as_stream(b_rx)]))
}

/// The staged keys' values the published side is pruned by, what the
/// footers leave to read, and how many staged rows were read when a sample
/// of them sufficed.
///
/// Pruning only grows with the staged values: a range that a sample of
/// them admits, all of them admit. So when a sample already falls within
/// every published footer range (and every key zone of the partitions
/// with an index), all of the staged keys would prune nothing either, and
/// they are not read. That is the case of scattered keys, whose row groups
/// each span nearly the whole key space: reading 50M staged text keys to
/// learn that cost about 2 s. Keys that rise with time fall outside the
/// older partitions' ranges, so the sample does not suffice there, and all
/// of them are read as before.
async fn staged_values(
    ctx: &SessionContext,
    staged: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
    types: &[DataType],
    (shared, within): (Option<SendableRecordBatchStream>, Option<&Within>),
) -> Result<
    (
        Option<published::Pruned>,
        published::StagedValues,
        Option<usize>,
    ),
    ExecError,
> {
    if let Some(stream) = shared {
        let values = published::StagedValues::from_stream(stream, types, within).await?;
        let pruned = published::Pruned::plan(parts, keys, types, &values)?;
        return Ok((pruned, values, None));
    }
    if let Some(sample) = sample_of(staged) {
        let values =
            published::StagedValues::read(ctx, staged, keys, types, (Some(sample), within)).await?;
        let pruned = published::Pruned::plan(parts, keys, types, &values)?;
        let all_read = pruned.as_ref().is_none_or(|p| p.counts.reads_all());
        // The zones of every partition with an index, as `kept` compares
        // them; none when no index can be used.
        let zoned = super::indexed::expected(staged, parts, keys, types);
        let all_zones = zoned
            .iter()
            .flat_map(|i| &i.indexed)
            .all(|(_, e)| e.zones.is_empty() || values.admits_zones(&e.zones, types));
        if all_read && all_zones {
            return Ok((pruned, values, Some(sample)));
        }
    }
    let values = published::StagedValues::read(ctx, staged, keys, types, (None, within)).await?;
    let pruned = published::Pruned::plan(parts, keys, types, &values)?;
    Ok((pruned, values, None))
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
    let mut side = published_side(ctx, staged, parts, keys, (None, None)).await?;
    // The key zones of the published versions' indexes leave out the
    // partitions that hold no staged key where the footers cannot (keys
    // whose footer ranges span every region), as the check itself does.
    let types = across_types(staged, parts, keys)?;
    if let Ok(mut indexes) = super::indexed::expected(staged, parts, keys, &types) {
        side.pruned = side.kept(&mut indexes, parts).pruned;
    }
    let frames = side.frames(ctx, staged, parts, keys)?;
    Ok(frames.map(|(published, _)| (side.types, published)))
}
