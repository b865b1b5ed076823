//! The checked rule set: names resolved, types agreed, SQL planned.
//!
//! A [`CheckedRules`] value exists only when the checker found no error, so the
//! planner never meets an unknown column or a text threshold on a number.

use datafusion::logical_expr::Expr;

use crate::dsl::ast::{ArithOp, CmpOp, DeclaredType, HistoryStat, Nulls, Severity};
use crate::value::{arith, negate, Value};

/// A rule file ready to plan.
#[derive(Debug, Clone)]
pub struct CheckedRules {
    pub table: String,
    pub partitioned_by: Vec<String>,
    pub statements: Vec<CheckedStatement>,
}

impl CheckedRules {
    /// Every metric that a `published.*` reference asks for, deduplicated,
    /// in first-use order.
    pub fn published_metrics(&self) -> Vec<Metric> {
        let mut out = Vec::new();
        for s in &self.statements {
            s.threshold
                .for_each_operand(&mut |o| o.collect_published(&mut out));
        }
        out
    }

    /// Whether a threshold reads `history(N)`.
    pub fn uses_history(&self) -> bool {
        self.statements
            .iter()
            .any(|s| !s.threshold.history_refs().is_empty())
    }

    /// Whether a `schema matches published` statement needs the published
    /// version's schema.
    pub fn uses_published_schema(&self) -> bool {
        self.statements
            .iter()
            .any(|s| s.metric == Metric::SchemaDrift)
    }
}

/// One statement of the file, in file order.
#[derive(Debug, Clone)]
pub struct CheckedStatement {
    /// 1-based line of the severity word.
    pub line: usize,
    /// The `as` label, else the statement's collapsed source text.
    pub name: String,
    pub severity: Severity,
    pub metric: Metric,
    pub threshold: Threshold,
    /// How to find offending keys or rows when the statement fails.
    pub samples: Option<SampleSpec>,
}

/// A measurable quantity. Equal metrics are computed once per run.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Metric {
    RowCount,
    NullCount(String),
    NullRate(String),
    DistinctCount(String),
    DuplicateCount(Vec<String>),
    /// Duplicated keys plus rows with a null key part.
    PrimaryKeyViolations(Vec<String>),
    Min(String),
    Max(String),
    Sum(String),
    Avg(String),
    CountWhere(Filter),
    RateWhere(Filter),
    /// Distinct key tuples occurring in more than one row, a null key part
    /// being a value like any other (`nulls not distinct`).
    DuplicateCountNullsEqual(Vec<String>),
    /// `schema matches published`: columns that differ from the published
    /// version's schema (answered from the footers).
    SchemaDrift,
    /// `column c is TYPE [null | not null]` (answered from the footers).
    ColumnType {
        column: String,
        declared: DeclaredType,
        /// `Some(false)`: `not null`; `Some(true)`: `null`; `None`: either.
        nullable: Option<bool>,
    },
    /// Staged rows whose key (all parts non-null) is absent from a reference
    /// table; observed by an anti-join pass of its own.
    NotInReference(RefLookup),
    /// Distinct staged keys (all parts non-null) that occur in another
    /// published partition of the table; observed by a join pass of its own.
    DuplicateAcrossPublished(Vec<String>),
}

/// `values(columns) in reference(ref_columns)`, typed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefLookup {
    pub columns: Vec<String>,
    pub reference: String,
    pub ref_columns: Vec<String>,
    /// The type each key part is compared in (both sides are cast to it).
    pub key_types: Vec<datafusion::arrow::datatypes::DataType>,
}

impl Metric {
    /// Whether the metric is observed by a join pass of its own rather than
    /// from the fused aggregate or a key set's pass.
    pub fn is_join(&self) -> bool {
        matches!(
            self,
            Metric::NotInReference(_) | Metric::DuplicateAcrossPublished(_)
        )
    }
}

/// A row filter: a planned DataFusion expression and how to show it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Filter {
    /// Rows where this is TRUE are counted.
    pub expr: Expr,
    /// E.g. `amount > 100000` or `currency not in ('EUR', 'USD')`.
    pub text: String,
}

impl Metric {
    /// The metric's name in the verdict (`null_rate(customer_id)`).
    pub fn name(&self) -> String {
        let keys = |k: &[String]| {
            k.iter()
                .map(|c| quote_ident(c))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            Metric::RowCount => "row_count".into(),
            Metric::NullCount(c) => format!("null_count({})", quote_ident(c)),
            Metric::NullRate(c) => format!("null_rate({})", quote_ident(c)),
            Metric::DistinctCount(c) => format!("distinct_count({})", quote_ident(c)),
            Metric::DuplicateCount(k) => format!("duplicate_count({})", keys(k)),
            Metric::PrimaryKeyViolations(k) => format!("primary_key_violations({})", keys(k)),
            Metric::Min(c) => format!("min({})", quote_ident(c)),
            Metric::Max(c) => format!("max({})", quote_ident(c)),
            Metric::Sum(c) => format!("sum({})", quote_ident(c)),
            Metric::Avg(c) => format!("avg({})", quote_ident(c)),
            Metric::CountWhere(f) => format!("count(where {})", f.text),
            Metric::RateWhere(f) => format!("rate(where {})", f.text),
            Metric::DuplicateCountNullsEqual(k) => {
                format!("duplicate_count({}) nulls not distinct", keys(k))
            }
            Metric::SchemaDrift => "schema_drift".into(),
            Metric::ColumnType { column, .. } => format!("type({})", quote_ident(column)),
            Metric::NotInReference(r) => {
                let staged = if r.columns.len() == 1 {
                    keys(&r.columns)
                } else {
                    format!("({})", keys(&r.columns))
                };
                format!(
                    "count(where {staged} not in {}({}))",
                    quote_ident(&r.reference),
                    keys(&r.ref_columns)
                )
            }
            Metric::DuplicateAcrossPublished(k) => {
                format!("duplicate_count_across_published({})", keys(k))
            }
        }
    }

    /// True for metrics judged from the schemas rather than by a threshold.
    pub fn is_schema(&self) -> bool {
        matches!(self, Metric::SchemaDrift | Metric::ColumnType { .. })
    }
}

/// A column name as the rule language writes it: bare when it is a plain
/// identifier, else in double quotes.
pub fn quote_ident(name: &str) -> String {
    let plain = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// What the metric is compared with.
#[derive(Debug, Clone)]
pub enum Threshold {
    Op(CmpOp, Operand),
    /// Inclusive on both ends.
    Between(Operand, Operand),
}

impl Threshold {
    pub fn for_each_operand(&self, f: &mut impl FnMut(&Operand)) {
        match self {
            Threshold::Op(_, o) => f(o),
            Threshold::Between(a, b) => {
                f(a);
                f(b);
            }
        }
    }

    pub fn uses_published(&self) -> bool {
        let mut any = false;
        self.for_each_operand(&mut |o| any |= o.uses_published());
        any
    }

    /// Every `STAT(history(N).METRIC)` reference, in order.
    pub fn history_refs(&self) -> Vec<HistoryRef> {
        let mut out = Vec::new();
        self.for_each_operand(&mut |o| {
            o.tree.walk(&mut |t| {
                if let ValueTree::History(h) = t {
                    out.push(h.as_ref().clone());
                }
            })
        });
        out
    }
}

/// One side of a comparison: an expression tree and its source text.
#[derive(Debug, Clone)]
pub struct Operand {
    pub tree: ValueTree,
    pub text: String,
}

impl Operand {
    fn collect_published(&self, out: &mut Vec<Metric>) {
        self.tree.walk(&mut |t| {
            if let ValueTree::Published(m) = t {
                if !out.contains(m) {
                    out.push(m.clone());
                }
            }
        });
    }

    pub fn uses_published(&self) -> bool {
        let mut v = Vec::new();
        self.collect_published(&mut v);
        !v.is_empty()
    }
}

/// A threshold expression with literals and run-key values already resolved.
#[derive(Debug, Clone)]
pub enum ValueTree {
    Const(Value),
    /// The same metric over the published version of the partition.
    Published(Metric),
    Neg(Box<ValueTree>),
    Binary(ArithOp, Box<ValueTree>, Box<ValueTree>),
    /// A statistic of the metric over earlier published partitions.
    History(Box<HistoryRef>),
}

/// `STAT(history(N).METRIC)`, checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HistoryRef {
    pub stat: HistoryStat,
    pub n: u32,
    pub metric: Metric,
}

impl HistoryRef {
    /// How the reference is written, e.g. `median(history(7).row_count)`.
    pub fn text(&self) -> String {
        format!(
            "{}(history({}).{})",
            self.stat.as_str(),
            self.n,
            self.metric.name()
        )
    }
}

impl ValueTree {
    /// The tree folded to a constant when it holds no `published` or
    /// `history` reference (those are known only when the verdict is judged).
    pub fn fold(&self) -> ValueTree {
        match self.constant() {
            Some(v) => ValueTree::Const(v),
            None => self.clone(),
        }
    }

    fn constant(&self) -> Option<Value> {
        Some(match self {
            ValueTree::Const(v) => v.clone(),
            ValueTree::Published(_) | ValueTree::History(_) => return None,
            ValueTree::Neg(a) => negate(&a.constant()?),
            ValueTree::Binary(op, a, b) => arith(*op, &a.constant()?, &b.constant()?),
        })
    }

    fn walk(&self, f: &mut impl FnMut(&ValueTree)) {
        f(self);
        match self {
            ValueTree::Neg(a) => a.walk(f),
            ValueTree::Binary(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            ValueTree::Const(_) | ValueTree::Published(_) | ValueTree::History(_) => {}
        }
    }
}

/// Where samples of a failed statement come from.
#[derive(Debug, Clone)]
pub enum SampleSpec {
    /// Duplicated keys, from the key set's grouped aggregate.
    DuplicateKeys(Vec<String>),
    /// Rows matching the filter, grouped by these columns.
    Rows { filter: Expr, columns: Vec<String> },
    /// Duplicated keys of a statement that declared its null semantics
    /// (`nulls distinct` / `nulls not distinct`); the verdict reports them.
    DuplicateKeysNulls(Vec<String>, Nulls),
    /// Offending keys found by the statement's own join pass
    /// (`values ... in REF(...)`, `unique ... across published`).
    Joined,
}
