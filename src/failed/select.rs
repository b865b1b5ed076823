//! The DataFusion plans that select offending rows, whole, with each row's
//! file and position in it.
//!
//! Every plan starts from [`positioned`]: the staged table (every column,
//! Hive keys included) plus `input_file_name()` and `file_row_index()`,
//! which the Parquet scan answers itself (the file each row came from, and
//! the row's 0-based position in that file, counted over all its row
//! groups whatever the scan skipped).

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{DFSchema, JoinType, ScalarValue};
use datafusion::dataframe::DataFrame;
use datafusion::error::Result;
use datafusion::functions::core::expr_fn::{file_row_index, input_file_name};
use datafusion::functions_aggregate::count::count_all;
use datafusion::functions_aggregate::min_max::min;
use datafusion::logical_expr::{binary_expr, cast, Expr, Operator};
use datafusion::prelude::{col, ident, lit, SessionContext};

use super::{PARTITION_COLUMN, ROW_COLUMN};
use crate::exec::{self, ExecError};
use crate::plan::join::{other_key, PARTITION};
use crate::staged::StagedInput;
use crate::value::Value;

/// The column holding the object-store location of a row's file.
pub const FILE_LOCATION: &str = "__dqgate_file_location";

/// The name of the flag column telling whether a row meets predicate `i`.
pub fn flag(i: usize) -> String {
    format!("__dqgate_meets_{i}")
}

fn key_alias(i: usize) -> String {
    format!("__dqgate_k{i}")
}

/// The staged columns of a frame, by name.
fn columns_of(schema: &DFSchema) -> Vec<Expr> {
    schema.fields().iter().map(|f| ident(f.name())).collect()
}

fn engine(context: &str) -> impl FnOnce(datafusion::error::DataFusionError) -> ExecError + '_ {
    move |e| ExecError::engine(context.to_string(), e)
}

/// The staged table with [`FILE_LOCATION`] and [`ROW_COLUMN`], and how
/// many staged columns it has.
pub fn positioned(
    ctx: &SessionContext,
    input: &StagedInput,
) -> Result<(DataFrame, usize), ExecError> {
    let table = exec::table(ctx, input)?;
    let mut exprs = columns_of(table.schema());
    let width = exprs.len();
    exprs.push(input_file_name().alias(FILE_LOCATION));
    exprs.push(file_row_index().alias(ROW_COLUMN));
    let frame = table
        .select(exprs)
        .map_err(engine("planning the failed rows"))?;
    Ok((frame, width))
}

/// Rows meeting any of `predicates` (TRUE, not NULL), each with a flag per
/// predicate ([`flag`]): one scan for all of them.
pub fn meeting(
    ctx: &SessionContext,
    input: &StagedInput,
    predicates: &[Expr],
) -> Result<DataFrame, ExecError> {
    let any = predicates
        .iter()
        .cloned()
        .reduce(Expr::or)
        .unwrap_or_else(|| lit(false));
    let flags = predicates
        .iter()
        .enumerate()
        .map(|(i, p)| p.clone().is_true().alias(flag(i)));
    filtered_positioned(ctx, input, any, flags.collect())
}

/// The staged rows where `filter` is TRUE, with [`FILE_LOCATION`],
/// [`ROW_COLUMN`] and `extra` columns. The filter comes before the
/// positions, so that the scan evaluates it itself (the optimizer keeps a
/// filter above a projection that holds `input_file_name()`) and decodes
/// the other columns only for the rows that pass.
fn filtered_positioned(
    ctx: &SessionContext,
    input: &StagedInput,
    filter: Expr,
    extra: Vec<Expr>,
) -> Result<DataFrame, ExecError> {
    let table = exec::table(ctx, input)?;
    let mut exprs = columns_of(table.schema());
    exprs.push(input_file_name().alias(FILE_LOCATION));
    exprs.push(file_row_index().alias(ROW_COLUMN));
    exprs.extend(extra);
    table
        .filter(filter)
        .and_then(|f| f.select(exprs))
        .map_err(engine("planning the failed rows"))
}

/// `k1 IS NOT NULL AND k2 IS NOT NULL ...`
fn not_null(keys: &[String]) -> Expr {
    keys.iter()
        .map(|k| ident(k).is_not_null())
        .reduce(Expr::and)
        .unwrap_or_else(|| lit(true))
}

/// Every row of each key that occurs more than once: the duplicated keys
/// (a grouped pass over the key columns) semi-joined with the staged rows.
pub fn duplicated(
    ctx: &SessionContext,
    input: &StagedInput,
    keys: &[String],
    nulls_equal: bool,
) -> Result<DataFrame, ExecError> {
    let table = exec::table(ctx, input)?;
    let (base, _) = positioned(ctx, input)?;
    let plan = || -> Result<DataFrame> {
        let table = if nulls_equal {
            table
        } else {
            table.filter(not_null(keys))?
        };
        let rows = crate::plan::ROWS;
        let aliases = || (0..keys.len()).map(|i| col(key_alias(i)));
        let on: Vec<Expr> = (keys.iter().zip(aliases()))
            .map(|(k, alias)| match nulls_equal {
                true => binary_expr(ident(k), Operator::IsNotDistinctFrom, alias),
                false => ident(k).eq(alias),
            })
            .collect();
        let dups = table
            .aggregate(
                (keys.iter().enumerate())
                    .map(|(i, k)| ident(k).alias(key_alias(i)))
                    .collect(),
                vec![count_all().alias(rows)],
            )?
            .filter(col(rows).gt(lit(1i64)))?
            .select(aliases().collect::<Vec<_>>())?;
        base.join_on(dups, JoinType::LeftSemi, on)
    };
    plan().map_err(engine("planning the failed rows of a key check"))
}

/// The staged rows whose key parts are all non-null, with the key cast to
/// `types` as extra columns ([`key_alias`]), and the names of those columns.
fn keyed(
    ctx: &SessionContext,
    input: &StagedInput,
    columns: &[String],
    types: &[DataType],
) -> Result<(DataFrame, Vec<Expr>, Vec<String>), ExecError> {
    let casts = columns
        .iter()
        .zip(types)
        .enumerate()
        .map(|(i, (c, t))| cast(ident(c), t.clone()).alias(key_alias(i)))
        .collect();
    let frame = filtered_positioned(ctx, input, not_null(columns), casts)?;
    let width = frame.schema().fields().len() - columns.len();
    let kept = frame.schema().fields()[..width]
        .iter()
        .map(|f| ident(f.name()))
        .collect();
    Ok((frame, kept, (0..columns.len()).map(key_alias).collect()))
}

/// Staged rows whose key the other side (its key parts as [`other_key`]
/// columns) lacks.
pub fn orphans(
    ctx: &SessionContext,
    input: &StagedInput,
    other: DataFrame,
    columns: &[String],
    types: &[DataType],
) -> Result<DataFrame, ExecError> {
    let how = (
        JoinType::LeftAnti,
        "planning the orphan rows of a reference check",
    );
    keyed_join(ctx, input, other, (columns, types), how)
}

/// Staged rows whose key is one of `keys` (its key parts as [`other_key`]
/// columns).
pub fn matching(
    ctx: &SessionContext,
    input: &StagedInput,
    keys: DataFrame,
    columns: &[String],
    types: &[DataType],
) -> Result<DataFrame, ExecError> {
    let how = (
        JoinType::LeftSemi,
        "planning the rows of a reference check's missing keys",
    );
    keyed_join(ctx, input, keys, (columns, types), how)
}

/// The staged rows [`keyed`] by `columns` cast to `types`, joined (`how`:
/// an anti- or semi-join, and what it plans) with `other`'s
/// [`other_key`] columns.
fn keyed_join(
    ctx: &SessionContext,
    input: &StagedInput,
    other: DataFrame,
    (columns, types): (&[String], &[DataType]),
    (how, what): (JoinType, &str),
) -> Result<DataFrame, ExecError> {
    let (left, kept, l) = keyed(ctx, input, columns, types)?;
    let r: Vec<String> = (0..columns.len()).map(other_key).collect();
    let l: Vec<&str> = l.iter().map(String::as_str).collect();
    let r: Vec<&str> = r.iter().map(String::as_str).collect();
    left.join(other, how, &l, &r, None)
        .and_then(|f| f.select(kept))
        .map_err(engine(what))
}

/// `keys` (each its parts' values) as a frame of [`other_key`] columns of
/// `types`.
pub fn keys_frame(
    ctx: &SessionContext,
    keys: &[Vec<Value>],
    types: &[DataType],
) -> Result<DataFrame, ExecError> {
    let columns = types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let values = keys
                .iter()
                .map(|k| crate::scalar::to_scalar(&k[i]).cast_to(t))
                .collect::<Result<Vec<_>>>()?;
            let array = match values.is_empty() {
                true => datafusion::arrow::array::new_empty_array(t),
                false => ScalarValue::iter_to_array(values)?,
            };
            Ok((other_key(i), array))
        })
        .collect::<Result<Vec<_>>>()
        .map_err(engine("typing a reference check's missing keys"))?;
    let batch = datafusion::arrow::array::RecordBatch::try_from_iter(columns)
        .map_err(|e| engine("typing a reference check's missing keys")(e.into()))?;
    ctx.read_batch(batch)
        .map_err(engine("typing a reference check's missing keys"))
}

/// Staged rows whose key another published partition holds, with the
/// first such partition (by its `k=v` path) in [`PARTITION_COLUMN`].
/// `published` holds the key parts as [`other_key`] columns plus
/// [`PARTITION`].
pub fn clashing(
    ctx: &SessionContext,
    input: &StagedInput,
    published: DataFrame,
    keys: &[String],
    types: &[DataType],
) -> Result<DataFrame, ExecError> {
    let (left, mut kept, l) = keyed(ctx, input, keys, types)?;
    let r: Vec<String> = (0..keys.len()).map(other_key).collect();
    let plan = || -> Result<DataFrame> {
        let other = published.aggregate(
            r.iter().map(col).collect(),
            vec![min(col(PARTITION)).alias(PARTITION_COLUMN)],
        )?;
        let l: Vec<&str> = l.iter().map(String::as_str).collect();
        let r: Vec<&str> = r.iter().map(String::as_str).collect();
        kept.push(col(PARTITION_COLUMN));
        left.join(other, JoinType::Inner, &l, &r, None)?
            .select(kept)
    };
    plan().map_err(engine("planning the failed rows of `across published`"))
}
