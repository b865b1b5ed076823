//! Which checks get a file of failed rows, and what selects their rows.
//!
//! A check that did not hold has offending rows when its metric counts rows
//! (or keys) and the count is too high: the rows behind `values ... in`,
//! `all(...)`, `count(where P)` and `rate(where P)`, the null rows of
//! `null_count` / `null_rate` and of `column c is ... not null`, the rows of
//! duplicated keys (and, for `primary_key`, those with a null key part),
//! the orphans of a reference check and the staged rows whose key another
//! published partition holds. A check that failed because its count is too
//! low (`count(where P) >= 10`) has none: the rows it counts break nothing.

use std::cmp::Ordering;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::logical_expr::{cast, Expr};
use datafusion::prelude::{ident, lit};

use crate::check::{
    CheckedRules, CheckedStatement, Metric, Operand, RefLookup, Threshold, ValueTree,
};
use crate::dsl::ast::CmpOp;
use crate::value::Value;
use crate::verdict::{CheckResult, Status, Verdict};

/// What selects some of a check's offending rows.
#[derive(Debug, Clone)]
pub enum Rows {
    /// Rows where the predicate is TRUE. Every such predicate of a run is
    /// answered by one filtered scan.
    Where(Expr),
    /// Every row of each key that occurs in more than one row. Keys with a
    /// null part are left out, unless `nulls_equal` (a null equals a null).
    Duplicated {
        keys: Vec<String>,
        nulls_equal: bool,
    },
    /// Rows whose key, all parts non-null, the reference lacks.
    Orphans(RefLookup),
    /// Rows whose key, all parts non-null, another published partition
    /// holds.
    Published(Vec<String>),
}

/// A check whose offending rows are wanted.
#[derive(Debug, Clone)]
pub struct Request {
    /// The check's index in the verdict.
    pub check: usize,
    pub line: usize,
    pub name: String,
    /// The selections whose union is the check's offending rows (for a
    /// primary key: its duplicated keys and its keys with a null part).
    pub rows: Vec<Rows>,
}

/// The checks of `verdict` that did not hold (failed or warned) and have
/// offending rows, in rule-file order.
pub fn requests(rules: &CheckedRules, verdict: &Verdict, schema: &Schema) -> Vec<Request> {
    rules
        .statements
        .iter()
        .zip(&verdict.checks)
        .enumerate()
        .filter(|(_, (_, c))| c.status == Status::Fail)
        .filter_map(|(i, (s, c))| {
            let rows = selections(s, c, schema);
            (!rows.is_empty()).then(|| Request {
                check: i,
                line: s.line,
                name: s.name.clone(),
                rows,
            })
        })
        .collect()
}

fn selections(s: &CheckedStatement, c: &CheckResult, schema: &Schema) -> Vec<Rows> {
    if let Metric::ColumnType {
        column,
        nullable: Some(false),
        ..
    } = &s.metric
    {
        return vec![Rows::Where(ident(column).is_null())];
    }
    if !exceeds(&s.threshold, &c.value) {
        return Vec::new();
    }
    match &s.metric {
        Metric::CountWhere(f) | Metric::RateWhere(f) => vec![Rows::Where(f.expr.clone())],
        Metric::NullCount(column) | Metric::NullRate(column) => {
            vec![Rows::Where(ident(column).is_null())]
        }
        Metric::DuplicateCount(keys) => vec![duplicated(keys, false, c, schema)],
        Metric::DuplicateCountNullsEqual(keys) => vec![duplicated(keys, true, c, schema)],
        Metric::PrimaryKeyViolations(keys) => vec![
            Rows::Duplicated {
                keys: keys.clone(),
                nulls_equal: false,
            },
            Rows::Where(crate::plan::any_null(keys)),
        ],
        Metric::NotInReference(r) => vec![Rows::Orphans(r.clone())],
        Metric::DuplicateAcrossPublished(keys) => vec![Rows::Published(keys.clone())],
        _ => Vec::new(),
    }
}

/// Whether a value that broke its threshold is too high (the rows it
/// counts are what breaks the check). A bound that depends on `published`
/// or `history` counts as exceeded: its rows are shown.
fn exceeds(t: &Threshold, value: &Value) -> bool {
    let above = |o: &Operand| match o.tree.fold() {
        ValueTree::Const(bound) => value.compare(&bound) == Some(Ordering::Greater),
        _ => true,
    };
    match t {
        Threshold::Op(CmpOp::Lt | CmpOp::Le, _) => true,
        Threshold::Op(CmpOp::Eq, o) => above(o),
        Threshold::Between(_, hi) => above(hi),
        Threshold::Op(CmpOp::Gt | CmpOp::Ge | CmpOp::Ne, _) => false,
    }
}

/// The rows of duplicated keys. When the verdict's samples are every
/// duplicated key (at most five) and the key compares exactly with `=`,
/// they become a predicate of the fused scan; otherwise a pass of their own
/// finds the keys again.
fn duplicated(keys: &[String], nulls_equal: bool, c: &CheckResult, schema: &Schema) -> Rows {
    let samples = c.samples.as_deref().unwrap_or_default();
    let complete = !samples.is_empty()
        && matches!(c.value, Value::Int(n) if usize::try_from(n).ok() == Some(samples.len()));
    let exact = keys.iter().all(|k| {
        schema
            .field_with_name(k)
            .is_ok_and(|f| compares_exactly(f.data_type()))
    });
    if complete && exact {
        let known: Option<Vec<Expr>> = samples
            .iter()
            .map(|s| key_equals(keys, &s.key, schema))
            .collect();
        if let Some(e) = known.and_then(|k| k.into_iter().reduce(Expr::or)) {
            return Rows::Where(e);
        }
    }
    Rows::Duplicated {
        keys: keys.to_vec(),
        nulls_equal,
    }
}

/// Types whose values `=` compares as the grouping does (no float: NaN and
/// -0.0 group otherwise; no dictionary or nested type).
fn compares_exactly(t: &DataType) -> bool {
    t.is_integer()
        || matches!(
            t,
            DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Utf8View
                | DataType::Boolean
                | DataType::Date32
                | DataType::Date64
        )
}

/// `k1 = v1 AND k2 = v2 ...` for one sampled key (`k IS NULL` for a null
/// part), the values cast to the columns' types.
fn key_equals(keys: &[String], sample: &[(String, Value)], schema: &Schema) -> Option<Expr> {
    let parts: Option<Vec<Expr>> = keys
        .iter()
        .map(|k| {
            let (_, v) = sample.iter().find(|(n, _)| n == k)?;
            let t = schema.field_with_name(k).ok()?.data_type().clone();
            Some(if v.is_null() {
                ident(k).is_null()
            } else {
                ident(k).eq(cast(lit(crate::scalar::to_scalar(v)), t))
            })
        })
        .collect();
    parts?.into_iter().reduce(Expr::and)
}
