//! The key engine's scan tasks: the key columns' streams, one per scan
//! partition, the scan that feeds each stream to a task of its own, how
//! many threads count, and what a scan task keeps beside its store.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::dataframe::DataFrame;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::{ident, SessionContext};
use futures::StreamExt;

use crate::exec::progress;
use crate::exec::ExecError as Error;
use crate::staged::StagedInput;

/// The key columns' streams, one per scan partition, with a progress bar:
/// read by the Parquet reader itself where that gives what DataFusion's
/// scan would ([`super::direct`]), else by a DataFusion scan.
pub(crate) async fn streams(
    ctx: &SessionContext,
    input: &StagedInput,
    columns: &[String],
    label: &str,
) -> Result<(Vec<SendableRecordBatchStream>, progress::Progress), Error> {
    let (frame, direct) = planned(ctx, input, columns, threads(ctx), label)?;
    match direct {
        Some(direct) => Ok(direct),
        None => frame_streams(frame, label, input.row_count()).await,
    }
}

/// The key columns in one stream, files and row groups in order (`what`
/// names them in messages): read by the Parquet reader itself where that
/// gives what DataFusion's scan would, else by a DataFusion scan.
pub(crate) async fn one_stream(
    ctx: &SessionContext,
    input: &StagedInput,
    columns: &[String],
    what: &str,
) -> Result<SendableRecordBatchStream, Error> {
    let (frame, direct) = planned(ctx, input, columns, 1, what)?;
    if let Some(stream) = direct.and_then(|(mut one, _)| one.pop()) {
        return Ok(stream);
    }
    frame
        .execute_stream()
        .await
        .map_err(|e| Error::engine(format!("reading {what}"), e))
}

/// The direct reader's streams, with their progress bar.
type Direct = (Vec<SendableRecordBatchStream>, progress::Progress);

/// The DataFusion scan of the key columns, and the direct reader's
/// streams of them (at most `threads`) where it reads these files.
fn planned(
    ctx: &SessionContext,
    input: &StagedInput,
    columns: &[String],
    threads: usize,
    label: &str,
) -> Result<(DataFrame, Option<Direct>), Error> {
    let frame = crate::exec::scan::table_of_views(ctx, input)?
        .select(columns.iter().map(ident).collect::<Vec<_>>())
        .map_err(|e| Error::engine(format!("planning a scan of {label}"), e))?;
    if crate::exec::ballista::is_client(ctx) {
        return Ok((frame, None));
    }
    let schema = Arc::new(frame.schema().as_arrow().clone());
    let batch_size = ctx.state().config().batch_size();
    let direct = super::direct::streams(input, columns, schema, threads, batch_size, label);
    Ok((frame, direct))
}

/// The streams of `frame`, one per partition of its physical plan, with a
/// progress bar over `rows` rows.
pub(super) async fn frame_streams(
    frame: datafusion::dataframe::DataFrame,
    label: &str,
    rows: u64,
) -> Result<(Vec<SendableRecordBatchStream>, progress::Progress), Error> {
    let task = Arc::new(frame.task_ctx());
    let physical = frame
        .create_physical_plan()
        .await
        .map_err(|e| Error::engine(format!("planning {label}"), e))?;
    let bar = progress::Progress::start(label, physical.clone(), rows);
    let n = physical
        .properties()
        .output_partitioning()
        .partition_count();
    let streams = (0..n)
        .map(|p| {
            physical
                .execute(p, task.clone())
                .map_err(|e| Error::engine(format!("running {label}"), e))
        })
        .collect::<Result<_, _>>()?;
    Ok((streams, bar))
}

/// Feeds every batch of every stream to `step`, one task per stream, and
/// returns each task's state, in stream order. The first error stops every
/// task (dropping the set aborts them), so a strategy that gives up does
/// not leave scans running beside its fallback.
pub(super) async fn scan<S, F>(
    streams: Vec<SendableRecordBatchStream>,
    init: impl Fn() -> S,
    step: F,
) -> Result<Vec<S>, Error>
where
    S: Send + 'static,
    F: Fn(&mut S, &[ArrayRef]) -> Result<(), Error> + Send + Sync + 'static,
{
    let step = Arc::new(step);
    let mut tasks = tokio::task::JoinSet::new();
    let n = streams.len();
    for (i, mut stream) in streams.into_iter().enumerate() {
        let step = step.clone();
        let mut state = init();
        tasks.spawn(async move {
            while let Some(batch) = stream.next().await {
                let batch = batch.map_err(|e| Error::engine("running a key check", e))?;
                step(&mut state, batch.columns())?;
            }
            Ok::<(usize, S), Error>((i, state))
        });
    }
    let mut states: Vec<Option<S>> = (0..n).map(|_| None).collect();
    while let Some(done) = tasks.join_next().await {
        let (i, state) =
            done.map_err(|e| Error::Audit(format!("a key check task failed: {e}")))??;
        states[i] = Some(state);
    }
    Ok(states.into_iter().flatten().collect())
}

pub(crate) fn threads(ctx: &SessionContext) -> usize {
    ctx.state().config().target_partitions()
}

/// What a scan task keeps beside its store: nothing, or (for fingerprints)
/// the decoded key columns for the verification pass.
pub(super) trait Sidecar<K>: Send + 'static {
    /// Called with each batch after its words are encoded.
    fn keep(&mut self, columns: &[ArrayRef], words: &[K]);
}

impl<K> Sidecar<K> for () {
    fn keep(&mut self, _: &[ArrayRef], _: &[K]) {}
}

/// `f` in a blocking task.
pub(super) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Audit(format!("a key check task failed: {e}")))
}
