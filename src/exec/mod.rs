//! Staged files → DataFusion session → observed metric values.
//!
//! The staged files are registered as one table over exactly the discovered
//! file list (so the fingerprint covers exactly what is scanned), then the
//! plans of `plan` run: the fused scalar aggregate once, each key set's grouped
//! aggregate once, and a filtered grouped pass for the samples of a failing
//! row check.

pub mod ballista;
pub mod dense;
mod duplicates;
mod error;
pub mod explain;
pub mod join;
pub mod keys;
pub mod pooled;
pub mod progress;
pub mod published;
pub mod scan;
pub mod stats;
pub mod topk;

pub use duplicates::{Duplicates, SAMPLES};
pub use error::ExecError;

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Schema;
use datafusion::common::ScalarValue;
use datafusion::dataframe::DataFrame;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::SessionContext;
use futures::{StreamExt, TryStreamExt};

use crate::plan::{self, Atom, AuditPlan, PassKind};
use crate::staged::StagedInput;
use crate::value::Value;
use error::ExecError as Error;
use topk::TopK;

/// Metric ingredients observed over one partition.
#[derive(Debug, Clone, Default)]
pub struct Observations {
    pub atoms: HashMap<Atom, Value>,
    pub duplicates: HashMap<Vec<String>, Duplicates>,
    /// The same for `nulls not distinct` key sets.
    pub duplicates_nulls_equal: HashMap<Vec<String>, Duplicates>,
    /// Bytes spilled to disk by all passes.
    pub spilled_bytes: u64,
    /// What each key engine pass did and cost, for the timing line.
    pub key_passes: Vec<String>,
}

/// The staged files as a DataFusion table (see [`scan::table`]).
pub fn table(ctx: &SessionContext, input: &StagedInput) -> Result<DataFrame, Error> {
    scan::table(ctx, input)
}

/// Runs the audit plan: the fused aggregate, then each key set's pass.
pub async fn observe(
    ctx: &SessionContext,
    input: &StagedInput,
    plan: &AuditPlan,
) -> Result<Observations, Error> {
    let mut obs = Observations::default();
    for (atom, value) in &plan.from_footers {
        obs.atoms.insert(atom.clone(), value.clone());
    }
    if !plan.atoms.is_empty() {
        let frame = plan::scalar_frame(table(ctx, input)?, plan)
            .map_err(|e| Error::engine("planning the scan", e))?;
        let label = format!("{}: fused aggregate", plan.pass_label(PassKind::Fused, 0));
        let (batches, spilled) = run(frame, &label, input.row_count()).await?;
        obs.spilled_bytes += spilled;
        let row = single_row(&batches)?;
        for (atom, value) in plan.atoms.iter().zip(row) {
            obs.atoms.insert(atom.clone(), value);
        }
    }
    for (i, keys) in plan.key_sets.iter().enumerate() {
        if has_unique_subset(&obs, keys) {
            // Rows that agree on all of `keys` agree on a subset of them that
            // has no duplicates: so `keys` has none either.
            obs.duplicates.insert(keys.clone(), Duplicates::default());
            continue;
        }
        let label = format!(
            "{}: keys ({})",
            plan.pass_label(PassKind::KeySets, i),
            keys.join(", ")
        );
        if let Some(range) = plan.dense_keys.get(keys) {
            let found = dense::duplicates(ctx, input, &keys[0], *range, &label).await?;
            obs.duplicates.insert(keys.clone(), found);
            continue;
        }
        if let Some(found) = engine_pass(ctx, input, plan, keys, false, &label, &mut obs).await? {
            obs.duplicates.insert(keys.clone(), found);
            continue;
        }
        let frame = plan::duplicates_frame(table(ctx, input)?, keys)
            .map_err(|e| Error::engine("planning a key check", e))?;
        let top = grouped_top(frame, keys.len(), &label, input.row_count()).await?;
        obs.spilled_bytes += top.spilled_bytes;
        obs.duplicates.insert(
            keys.clone(),
            Duplicates {
                keys: top.groups,
                samples: top.best,
            },
        );
    }
    for (i, column) in plan.grouped_distinct.iter().enumerate() {
        let label = format!(
            "{}: distinct {column}",
            plan.pass_label(PassKind::GroupedDistinct, i)
        );
        let frame = plan::distinct_frame(table(ctx, input)?, column)
            .map_err(|e| Error::engine("planning a distinct count", e))?;
        let top = grouped_top(frame, 1, &label, input.row_count()).await?;
        obs.spilled_bytes += top.spilled_bytes;
        obs.atoms.insert(
            Atom::Distinct(column.clone()),
            Value::Int(i128::from(top.groups)),
        );
    }
    observe_nulls_equal(ctx, input, plan, &mut obs).await?;
    for (i, (column, strategy)) in plan.engine_distinct.iter().enumerate() {
        let label = format!(
            "{}: distinct {column}",
            plan.pass_label(PassKind::EngineDistinct, i)
        );
        if let Some(range) = plan.dense_distinct.get(column) {
            let distinct = dense::distinct(ctx, input, column, *range, &label).await?;
            obs.atoms.insert(
                Atom::Distinct(column.clone()),
                Value::Int(i128::from(distinct)),
            );
            continue;
        }
        let job = plan::keys::KeyJob {
            keys: vec![column.clone()],
            nulls_equal: false,
        };
        let found = keys::find(ctx, input, &job, strategy, &label).await?;
        obs.spilled_bytes += found.spilled_bytes;
        obs.key_passes.extend(
            found
                .passes
                .iter()
                .map(|p| format!("distinct {column}: {p}")),
        );
        obs.atoms.insert(
            Atom::Distinct(column.clone()),
            Value::Int(i128::from(found.distinct)),
        );
    }
    Ok(obs)
}

/// The grouped passes of `nulls not distinct` key sets. When no key column
/// is nullable, a null key part cannot occur and the `nulls distinct` result
/// of the same columns, if observed, is reused.
async fn observe_nulls_equal(
    ctx: &SessionContext,
    input: &StagedInput,
    plan: &AuditPlan,
    obs: &mut Observations,
) -> Result<(), Error> {
    for (i, keys) in plan.key_sets_nulls_equal.iter().enumerate() {
        let nullable = keys.iter().any(|k| {
            input
                .schema
                .field_with_name(k)
                .map_or(true, |f| f.is_nullable())
        });
        if let (false, Some(d)) = (nullable, obs.duplicates.get(keys)) {
            obs.duplicates_nulls_equal.insert(keys.clone(), d.clone());
            continue;
        }
        let label = format!(
            "{}: keys ({}) nulls not distinct",
            plan.pass_label(PassKind::KeySetsNullsEqual, i),
            keys.join(", ")
        );
        if let Some(found) = engine_pass(ctx, input, plan, keys, true, &label, obs).await? {
            obs.duplicates_nulls_equal.insert(keys.clone(), found);
            continue;
        }
        let frame = plan::duplicates_nulls_equal_frame(table(ctx, input)?, keys)
            .map_err(|e| Error::engine("planning a key check", e))?;
        let top = grouped_top(frame, keys.len(), &label, input.row_count()).await?;
        obs.spilled_bytes += top.spilled_bytes;
        obs.duplicates_nulls_equal.insert(
            keys.clone(),
            Duplicates {
                keys: top.groups,
                samples: top.best,
            },
        );
    }
    Ok(())
}

/// Runs a key check on the key engine when the plan gave it a strategy.
async fn engine_pass(
    ctx: &SessionContext,
    input: &StagedInput,
    plan: &AuditPlan,
    keys: &[String],
    nulls_equal: bool,
    label: &str,
    obs: &mut Observations,
) -> Result<Option<Duplicates>, Error> {
    let Some(strategy) = plan.key_strategy(keys, nulls_equal) else {
        return Ok(None);
    };
    let job = plan::keys::KeyJob {
        keys: keys.to_vec(),
        nulls_equal,
    };
    let found = keys::find(ctx, input, &job, strategy, label).await?;
    obs.spilled_bytes += found.spilled_bytes;
    obs.key_passes.extend(
        found
            .passes
            .iter()
            .map(|p| format!("({}): {p}", keys.join(", "))),
    );
    Ok(Some(found.duplicates))
}

/// An already observed key set, contained in `keys`, without duplicates.
fn has_unique_subset(obs: &Observations, keys: &[String]) -> bool {
    obs.duplicates
        .iter()
        .any(|(subset, d)| d.keys == 0 && subset.iter().all(|c| keys.contains(c)))
}

/// The most frequent value combinations of `columns` among rows matching
/// `filter`, for a failed row check.
pub async fn row_samples(
    ctx: &SessionContext,
    input: &StagedInput,
    filter: &Expr,
    columns: &[String],
) -> Result<Vec<(Vec<Value>, u64)>, Error> {
    let frame = plan::rows_frame(table(ctx, input)?, filter.clone(), columns)
        .map_err(|e| Error::engine("planning samples", e))?;
    Ok(
        grouped_top(frame, columns.len(), "samples", input.row_count())
            .await?
            .best,
    )
}

/// Streams a grouped result (`key columns..., ROWS`) and keeps the count of
/// groups and the top [`SAMPLES`] by count descending, key ascending.
async fn grouped_top(
    frame: DataFrame,
    key_columns: usize,
    label: &str,
    rows: u64,
) -> Result<topk::Top, Error> {
    let schema: Schema = frame.schema().as_arrow().clone();
    let mut top = TopK::new(&schema, key_columns, SAMPLES)?;
    let (mut stream, progress) = execute(frame, label, rows).await?;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(|e| Error::engine("running a grouped check", e))?;
        let batch = ballista::conform(batch, &schema)?;
        top.push(&batch)?;
    }
    let mut done = top.finish()?;
    done.spilled_bytes = progress.spilled_bytes();
    Ok(done)
}

/// Plans and starts a pass, with a progress bar over its scan.
async fn execute(
    frame: DataFrame,
    label: &str,
    rows: u64,
) -> Result<(SendableRecordBatchStream, progress::Progress), Error> {
    let task = frame.task_ctx();
    let physical = frame
        .create_physical_plan()
        .await
        .map_err(|e| Error::engine(format!("planning {label}"), e))?;
    let bar = progress::Progress::start(label, physical.clone(), rows);
    let stream = execute_stream(physical, Arc::new(task))
        .map_err(|e| Error::engine(format!("running {label}"), e))?;
    Ok((stream, bar))
}

/// Runs a pass to completion; also returns the bytes it spilled.
async fn run(frame: DataFrame, label: &str, rows: u64) -> Result<(Vec<RecordBatch>, u64), Error> {
    let (stream, progress) = execute(frame, label, rows).await?;
    let batches = stream
        .try_collect()
        .await
        .map_err(|e| Error::engine(format!("running {label}"), e))?;
    Ok((batches, progress.spilled_bytes()))
}

fn single_row(batches: &[RecordBatch]) -> Result<Vec<Value>, Error> {
    let batch = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| Error::Audit("the aggregate returned no row".into()))?;
    batch
        .columns()
        .iter()
        .map(|c| {
            let s = ScalarValue::try_from_array(c, 0)
                .map_err(|e| Error::engine("reading a metric", e))?;
            crate::scalar::from_scalar(&s)
                .ok_or_else(|| Error::Audit(format!("unsupported metric type {}", c.data_type())))
        })
        .collect()
}
