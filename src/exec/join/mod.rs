//! Runs the join passes of `plan::join`: the staged keys against a
//! reference table, and against the other published partitions.
//!
//! The other side is a union of its parts (a reference's Hive parts, the
//! published partitions), each projected to the key columns only and cast to
//! the comparison type. For `across published`, published files whose footers
//! prove that their integer key range misses the staged range are not read at
//! all, and a range filter on the key lets the scan skip row groups too.
//!
//! - `reference`: `values(k) in REF(k)`, the staged keys against a reference.
//! - `across`: `unique(k) across published`, the staged keys against the
//!   other published partitions.
//!
//! This file holds what both share: the result of a pass, the union of the
//! other side's parts, and the dispatch to the key engine.

mod across;
mod indexed;
mod reference;
mod side;

use datafusion::arrow::datatypes::DataType;
use datafusion::dataframe::DataFrame;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::{ident, SessionContext};

use crate::exec::keys;
use crate::exec::ExecError;
use crate::staged::StagedInput;
use crate::value::Value;

pub use crate::exec::published::PublishedPart;
pub use across::{
    across_by_index_plan, across_on_engine, across_published, across_published_frames, IndexPlan,
};
pub use indexed::key_index;
pub use reference::{
    missing_keys, not_in_reference, not_in_reference_frame, reference_keys, reference_on_engine,
};
pub use side::{published_keys_frame, published_side, PublishedSide};

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

/// The staged key columns, in key order (text as `Utf8View`, which the
/// key engine reads in place).
fn staged_side(
    ctx: &SessionContext,
    staged: &StagedInput,
    columns: &[String],
) -> Result<keys::join::Side, ExecError> {
    let frame = staged_keys_frame(ctx, staged, columns, "a join")?;
    Ok(keys::join::Side {
        input: keys::join::SideInput::of(staged, columns, frame, keys::threads(ctx)),
        rows: staged.row_count(),
    })
}

/// The staged key columns as they come (text as `Utf8View`), for `what`
/// (in messages).
fn staged_keys_frame(
    ctx: &SessionContext,
    staged: &StagedInput,
    columns: &[String],
    what: &str,
) -> Result<DataFrame, ExecError> {
    crate::exec::scan::table_of_views(ctx, staged)?
        .select(columns.iter().map(ident).collect::<Vec<_>>())
        .map_err(|e| ExecError::engine(format!("planning {what}"), e))
}

/// The columns of [`staged_keys_frame`] in one stream, the files in order:
/// read by the Parquet reader itself where it reads these files (local,
/// uncast; one reused page buffer, not a fresh one a column chunk), else by
/// a DataFusion scan.
async fn staged_keys_stream(
    ctx: &SessionContext,
    staged: &StagedInput,
    columns: &[String],
    what: &str,
) -> Result<SendableRecordBatchStream, ExecError> {
    keys::one_stream(ctx, staged, columns, what).await
}

fn staged_types(staged: &StagedInput, columns: &[String]) -> Result<Vec<DataType>, ExecError> {
    columns
        .iter()
        .map(|c| {
            staged
                .schema
                .field_with_name(c)
                .map(|f| f.data_type().clone())
                .map_err(ExecError::from)
        })
        .collect()
}

/// The fingerprinted join of the staged `columns` compared in `compared`
/// types, when the key packs into no word and its types allow one
/// (`bits`: the test-only collision switch).
fn fingerprint_plan(
    staged: &StagedInput,
    columns: &[String],
    compared: &[DataType],
    bits: Option<u32>,
) -> Result<Option<keys::join::Fingerprinted>, ExecError> {
    if keys::join::packing_for(staged, columns, compared).is_some() {
        return Ok(None);
    }
    let staged_types = staged_types(staged, columns)?;
    let key_bytes = keys::key_bytes(staged, columns);
    Ok(keys::join::fingerprinted_for(
        &staged_types,
        compared,
        key_bytes,
        bits,
    ))
}

/// The key engine's join, when the key packs exactly; `None` otherwise
/// (the join then runs as a DataFusion plan, or for `across published` by
/// fingerprint, see `across`).
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
