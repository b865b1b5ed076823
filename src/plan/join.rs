//! Joins with other tables: `values(c, ...) in REF(r, ...)` as an anti-join
//! with the reference table, `unique(k, ...) across published` as a semi-join
//! with the other published partitions. Each is a pass of its own over the
//! staged key columns, grouped by the staged key so that the same pass gives
//! the value and the samples.
//!
//! Both sides are projected to the key columns only and cast to the type the
//! checker chose for each key part (`int32` against `int64` compares as
//! `int64`). Rows with a null key part on the staged side are left out
//! (they are neither violations nor clashes); a null on the other side never
//! equals anything.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::JoinType;
use datafusion::dataframe::DataFrame;
use datafusion::error::Result;
use datafusion::functions_aggregate::count::count_all;
use datafusion::logical_expr::{cast, Expr};
use datafusion::prelude::{col, ident, lit};

use super::columns::ROWS;
use crate::check::{Metric, RefLookup};

/// The column holding a published partition's `k=v[/k=v]` in the union of
/// published partitions.
pub const PARTITION: &str = "__dqgate_partition";

/// A join pass of the audit: what it is for, for `explain` and the run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum JoinPass {
    /// Staged keys absent from a reference table.
    Reference(RefLookup),
    /// Staged keys present in another published partition.
    AcrossPublished(Vec<String>),
}

impl JoinPass {
    pub fn of(m: &Metric) -> Option<JoinPass> {
        match m {
            Metric::NotInReference(r) => Some(JoinPass::Reference(r.clone())),
            Metric::DuplicateAcrossPublished(k) => Some(JoinPass::AcrossPublished(k.clone())),
            _ => None,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            JoinPass::Reference(r) => format!(
                "anti-join of ({}) against reference `{}` ({})",
                r.columns.join(", "),
                r.reference,
                r.ref_columns.join(", ")
            ),
            JoinPass::AcrossPublished(k) => format!(
                "semi-join of ({}) with the other published partitions",
                k.join(", ")
            ),
        }
    }
}

/// The name of the `i`-th cast key part on the other side of a join.
pub fn other_key(i: usize) -> String {
    format!("__dqgate_r{i}")
}

fn staged_key(i: usize) -> String {
    format!("__dqgate_l{i}")
}

/// The staged rows whose key parts are all non-null: the key columns as they
/// are, and cast to `types` as `__dqgate_l0, ...`.
fn staged_keys(staged: DataFrame, columns: &[String], types: &[DataType]) -> Result<DataFrame> {
    let not_null = columns
        .iter()
        .map(|c| ident(c).is_not_null())
        .reduce(Expr::and)
        .unwrap_or_else(|| lit(true));
    let mut exprs: Vec<Expr> = columns.iter().map(ident).collect();
    exprs.extend(
        columns
            .iter()
            .zip(types)
            .enumerate()
            .map(|(i, (c, t))| cast(ident(c), t.clone()).alias(staged_key(i))),
    );
    staged.filter(not_null)?.select(exprs)
}

/// `other` must hold the cast key parts as [`other_key`]`(i)`. The result:
/// the staged key columns and, in [`ROWS`], how many staged rows carry each
/// key, for keys that match (`LeftSemi`) or do not match (`LeftAnti`).
fn grouped_join(
    staged: DataFrame,
    other: DataFrame,
    columns: &[String],
    types: &[DataType],
    how: JoinType,
) -> Result<DataFrame> {
    let left = staged_keys(staged, columns, types)?;
    let l: Vec<String> = (0..columns.len()).map(staged_key).collect();
    let r: Vec<String> = (0..columns.len()).map(other_key).collect();
    let l: Vec<&str> = l.iter().map(String::as_str).collect();
    let r: Vec<&str> = r.iter().map(String::as_str).collect();
    left.join(other, how, &l, &r, None)?.aggregate(
        columns.iter().map(ident).collect(),
        vec![count_all().alias(ROWS)],
    )
}

/// Staged keys absent from the reference, with their staged row counts.
/// `reference` holds the reference's key parts as [`other_key`]`(i)`.
pub fn not_in_reference_frame(
    staged: DataFrame,
    reference: DataFrame,
    lookup: &RefLookup,
) -> Result<DataFrame> {
    grouped_join(
        staged,
        reference,
        &lookup.columns,
        &lookup.key_types,
        JoinType::LeftAnti,
    )
}

/// Staged keys present in the published partitions, with their staged row
/// counts. `published` holds the key parts as [`other_key`]`(i)`.
pub fn across_published_frame(
    staged: DataFrame,
    published: DataFrame,
    keys: &[String],
    types: &[DataType],
) -> Result<DataFrame> {
    grouped_join(staged, published, keys, types, JoinType::LeftSemi)
}

/// Which published partitions hold which of the given keys: `published`
/// (key parts as [`other_key`]`(i)` plus [`PARTITION`]) filtered to
/// `keys`, grouped by key and partition.
pub fn partitions_of_keys_frame(published: DataFrame, keys: Vec<Vec<Expr>>) -> Result<DataFrame> {
    let wanted = keys
        .into_iter()
        .filter_map(|parts| {
            parts
                .into_iter()
                .enumerate()
                .map(|(i, v)| col(other_key(i)).eq(v))
                .reduce(Expr::and)
        })
        .reduce(Expr::or)
        .unwrap_or_else(|| lit(false));
    let width = published.schema().fields().len() - 1;
    let mut group: Vec<Expr> = (0..width).map(|i| col(other_key(i))).collect();
    group.push(col(PARTITION));
    published
        .filter(wanted)?
        .aggregate(group, vec![count_all().alias(ROWS)])
}
