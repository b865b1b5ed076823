//! Checked rules → DataFusion plans, fused into as few scans as possible.
//!
//! Every metric is lowered to *atoms*: aggregate expressions such as
//! `count(*)`, `count(c)`, `min(c)` or `count(*) FILTER (WHERE p)`. Equal atoms
//! are computed once, and all of them go into **one** aggregate over one scan
//! of only the columns they read. Key checks (`unique`, `primary_key`,
//! `duplicate_count`) need a grouped aggregate; each distinct key *set* gets one,
//! shared by every statement over the same columns in any order.

mod columns;
pub mod fsum;
pub mod join;
pub mod keys;

use std::collections::BTreeSet;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::utils::expr::COUNT_STAR_EXPANSION;
use datafusion::dataframe::DataFrame;
use datafusion::error::Result;
use datafusion::functions_aggregate::count::count_all;
use datafusion::functions_aggregate::expr_fn::{count, count_distinct, max, min, sum};
use datafusion::logical_expr::{cast, Expr, ExprFunctionExt};
use datafusion::prelude::{col, ident, lit};

use crate::check::{CheckedRules, Metric};
use crate::value::Value;

pub use columns::ROWS;

/// One aggregate expression of the fused scan.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Atom {
    RowCount,
    NonNull(String),
    Distinct(String),
    Min(String),
    Max(String),
    Sum(String),
    /// Rows where the expression is TRUE.
    CountIf(Expr),
}

/// What one run computes: the atoms of the fused scan and the key sets.
#[derive(Debug, Clone, Default)]
pub struct AuditPlan {
    /// Deduplicated, in first-use order.
    pub atoms: Vec<Atom>,
    /// Distinct key sets (columns sorted by name) needing a grouped pass.
    pub key_sets: Vec<Vec<String>>,
    /// Atoms already answered exactly by the Parquet footers; they are not
    /// in `atoms` and cost no scan.
    pub from_footers: Vec<(Atom, Value)>,
    /// Single integer key columns whose exact range `[min, max]` the footers
    /// give and which is dense enough for a bitmap instead of a hash table.
    pub dense_keys: std::collections::HashMap<Vec<String>, (i64, i64)>,
    /// Columns of `engine_distinct` counted by that bitmap too (the set
    /// bits are the distinct values), with their ranges.
    pub dense_distinct: std::collections::HashMap<String, (i64, i64)>,
    /// Columns whose `distinct_count` runs as a grouped pass of its own, which
    /// can spill under a memory limit, instead of inside the fused aggregate,
    /// whose distinct sets must fit in memory. Their atoms are not in `atoms`.
    pub grouped_distinct: Vec<String>,
    /// Distinct key sets (columns sorted by name) of `nulls not distinct`
    /// checks: grouped passes that keep rows with null key parts.
    pub key_sets_nulls_equal: Vec<Vec<String>>,
    /// Joins with reference tables and published partitions, one pass each,
    /// deduplicated, in first-use order.
    pub joins: Vec<join::JoinPass>,
    /// How each key check runs (`plan::keys`); a key check without an entry
    /// runs as DataFusion's grouped aggregate.
    pub key_strategies: std::collections::HashMap<keys::KeyJob, keys::KeyStrategy>,
    /// Columns whose `distinct_count` the key engine counts exactly from
    /// packed words (fixed-width, not floating-point), each with its
    /// strategy; their atoms are not in `atoms`.
    pub engine_distinct: Vec<(String, keys::KeyStrategy)>,
    /// Whether the join passes run on the key engine where their key packs
    /// exactly (set with the key strategies; off on a cluster and when the
    /// grouped strategy is forced).
    pub join_engine: bool,
    /// The test-only collision switch of the join passes' fingerprints.
    pub join_test_bits: Option<u32>,
}

impl AuditPlan {
    /// Plans the metrics of every statement of `rules`.
    pub fn for_rules(rules: &CheckedRules) -> AuditPlan {
        let metrics: Vec<Metric> = rules.statements.iter().map(|s| s.metric.clone()).collect();
        AuditPlan::for_metrics(&metrics)
    }

    /// Plans a list of metrics (also used for `published.*` references).
    pub fn for_metrics(metrics: &[Metric]) -> AuditPlan {
        let mut plan = AuditPlan::default();
        for m in metrics {
            for a in atoms_of(m) {
                if !plan.atoms.contains(&a) {
                    plan.atoms.push(a);
                }
            }
            if let Some(k) = key_set_of(m) {
                if !plan.key_sets.contains(&k) {
                    plan.key_sets.push(k);
                }
            }
            if let Some(k) = key_set_nulls_equal_of(m) {
                if !plan.key_sets_nulls_equal.contains(&k) {
                    plan.key_sets_nulls_equal.push(k);
                }
            }
            if let Some(j) = join::JoinPass::of(m) {
                if !plan.joins.contains(&j) {
                    plan.joins.push(j);
                }
            }
        }
        plan.key_sets_nulls_equal.sort();
        // Smaller key sets first: when one has no duplicates, every key set
        // containing it has none either, and its pass is skipped.
        plan.key_sets
            .sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
        plan
    }

    /// Moves every atom that `answer` can give exactly out of the scan.
    pub fn answer_from_footers(mut self, answer: impl Fn(&Atom) -> Option<Value>) -> AuditPlan {
        let mut scan = Vec::new();
        for atom in std::mem::take(&mut self.atoms) {
            match answer(&atom) {
                Some(v) => self.from_footers.push((atom, v)),
                None => scan.push(atom),
            }
        }
        self.atoms = scan;
        self
    }

    /// Marks single-column key sets whose exact integer range `range` knows
    /// and `suits` accepts for the bitmap strategy of `exec::dense`.
    pub fn dense_keys_from_footers(
        mut self,
        range: impl Fn(&str) -> Option<(i64, i64)>,
        suits: impl Fn(&str, u64) -> bool,
    ) -> AuditPlan {
        for keys in &self.key_sets {
            if let [column] = keys.as_slice() {
                if let Some(r) = bitmap_range(column, &range, &suits) {
                    self.dense_keys.insert(keys.clone(), r);
                }
            }
        }
        self
    }

    /// Marks the `engine_distinct` columns (not already in order) whose
    /// exact integer range `range` knows and `suits` accepts: their
    /// distinct values are the bits a bitmap of the range sets, as
    /// `dense_keys_from_footers` does for duplicates.
    pub fn dense_distinct_from_footers(
        mut self,
        range: impl Fn(&str) -> Option<(i64, i64)>,
        suits: impl Fn(&str, u64) -> bool,
    ) -> AuditPlan {
        for (column, strategy) in &self.engine_distinct {
            if matches!(strategy, keys::KeyStrategy::Ordered { .. }) {
                continue;
            }
            if let Some(r) = bitmap_range(column, &range, &suits) {
                self.dense_distinct.insert(column.clone(), r);
            }
        }
        self
    }

    /// Chooses the strategy of every key check from the schema and the
    /// footer facts of its columns (see `plan::keys`).
    pub fn key_strategies_from_footers(
        mut self,
        schema: &Schema,
        facts: &dyn Fn(&str) -> keys::ColumnFacts,
        forced: Option<keys::Forced>,
        fingerprint_bits: Option<u32>,
    ) -> AuditPlan {
        let jobs = self
            .key_sets
            .iter()
            .map(|k| (k, false))
            .chain(self.key_sets_nulls_equal.iter().map(|k| (k, true)));
        for (k, nulls_equal) in jobs {
            let job = keys::KeyJob {
                keys: k.clone(),
                nulls_equal,
            };
            let strategy =
                keys::choose(&job, schema, facts, forced).with_test_bits(fingerprint_bits);
            if strategy != keys::KeyStrategy::Grouped {
                self.key_strategies.insert(job, strategy);
            }
        }
        let mut fused = Vec::new();
        for atom in std::mem::take(&mut self.atoms) {
            let Atom::Distinct(c) = &atom else {
                fused.push(atom);
                continue;
            };
            let job = keys::KeyJob {
                keys: vec![c.clone()],
                nulls_equal: false,
            };
            let floating = schema
                .field_with_name(c)
                .is_ok_and(|f| keys::floating(f.data_type()));
            match keys::choose(&job, schema, facts, forced).with_test_bits(fingerprint_bits) {
                s @ keys::KeyStrategy::Fingerprint { .. } if !floating => {
                    self.engine_distinct.push((c.clone(), s))
                }
                s @ (keys::KeyStrategy::Packed(_)
                | keys::KeyStrategy::Text { .. }
                | keys::KeyStrategy::Ordered { .. })
                    if keys::exact_distinct(&s) =>
                {
                    self.engine_distinct.push((c.clone(), s))
                }
                _ => fused.push(atom),
            }
        }
        self.atoms = fused;
        self.join_engine = forced != Some(keys::Forced::Grouped);
        self.join_test_bits = fingerprint_bits;
        self
    }

    /// The strategy of a key check, when the engine runs it.
    pub fn key_strategy(&self, keys: &[String], nulls_equal: bool) -> Option<&keys::KeyStrategy> {
        self.key_strategies.get(&keys::KeyJob {
            keys: keys.to_vec(),
            nulls_equal,
        })
    }

    /// Moves `count(distinct c)` out of the fused aggregate into a grouped
    /// pass per column, for every column except floating-point ones (whose
    /// grouping would not count NaN and -0.0 as the fused aggregate does).
    /// Costs one more scan each; used under `--memory-limit`, where a grouped
    /// aggregate spills and a distinct set cannot.
    pub fn distinct_by_grouping(mut self, schema: &Schema) -> AuditPlan {
        let floating = |c: &str| {
            schema
                .field_with_name(c)
                .is_ok_and(|f| keys::floating(f.data_type()))
        };
        let mut fused = Vec::new();
        for atom in std::mem::take(&mut self.atoms) {
            match atom {
                Atom::Distinct(c) if !floating(&c) => self.grouped_distinct.push(c),
                other => fused.push(other),
            }
        }
        self.atoms = fused;
        self
    }

    /// Whether a metric is answered by the footers alone.
    pub fn from_footers_only(&self, m: &Metric) -> bool {
        key_set_of(m).is_none()
            && key_set_nulls_equal_of(m).is_none()
            && !m.is_join()
            && atoms_of(m)
                .iter()
                .all(|a| self.from_footers.iter().any(|(f, _)| f == a))
    }

    /// How many passes over the data a run costs (before samples).
    pub fn scans(&self) -> usize {
        PassKind::ORDER.iter().map(|k| self.passes_of(*k)).sum()
    }

    /// How many passes of `kind` a run makes.
    fn passes_of(&self, kind: PassKind) -> usize {
        match kind {
            PassKind::Fused => usize::from(!self.atoms.is_empty()),
            PassKind::KeySets => self.key_sets.len(),
            PassKind::GroupedDistinct => self.grouped_distinct.len(),
            PassKind::KeySetsNullsEqual => self.key_sets_nulls_equal.len(),
            PassKind::EngineDistinct => self.engine_distinct.len(),
            PassKind::Joins => self.joins.len(),
        }
    }

    /// The number (from 1) of the `i`-th pass of `kind`: the one place
    /// passes are numbered, in the order a run makes them.
    pub fn pass_number(&self, kind: PassKind, i: usize) -> usize {
        let before: usize = PassKind::ORDER
            .iter()
            .take_while(|k| **k != kind)
            .map(|k| self.passes_of(*k))
            .sum();
        before + i + 1
    }

    /// `pass N/M`: how the `i`-th pass of `kind` names itself on stderr.
    pub fn pass_label(&self, kind: PassKind, i: usize) -> String {
        format!("pass {}/{}", self.pass_number(kind, i), self.scans())
    }
}

/// The kinds of pass over the data, in the order a run makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// The fused aggregate of every scalar metric.
    Fused,
    /// A duplicate-key pass per key set.
    KeySets,
    /// A grouped distinct count per column (under a memory limit).
    GroupedDistinct,
    /// A duplicate-key pass per `nulls not distinct` key set.
    KeySetsNullsEqual,
    /// A distinct count per column on the key engine.
    EngineDistinct,
    /// A join pass (`values ... in`, `across published`).
    Joins,
}

impl PassKind {
    const ORDER: [PassKind; 6] = [
        PassKind::Fused,
        PassKind::KeySets,
        PassKind::GroupedDistinct,
        PassKind::KeySetsNullsEqual,
        PassKind::EngineDistinct,
        PassKind::Joins,
    ];
}

/// The atoms a metric is derived from.
pub fn atoms_of(m: &Metric) -> Vec<Atom> {
    match m {
        Metric::RowCount => vec![Atom::RowCount],
        Metric::NullCount(c) | Metric::NullRate(c) => {
            vec![Atom::RowCount, Atom::NonNull(c.clone())]
        }
        Metric::DistinctCount(c) => vec![Atom::Distinct(c.clone())],
        Metric::DuplicateCount(_) => vec![],
        Metric::PrimaryKeyViolations(k) => vec![Atom::CountIf(any_null(k))],
        Metric::Min(c) => vec![Atom::Min(c.clone())],
        Metric::Max(c) => vec![Atom::Max(c.clone())],
        Metric::Sum(c) => vec![Atom::Sum(c.clone())],
        Metric::Avg(c) => vec![Atom::Sum(c.clone()), Atom::NonNull(c.clone())],
        Metric::CountWhere(f) => vec![Atom::CountIf(f.expr.clone())],
        Metric::RateWhere(f) => vec![Atom::RowCount, Atom::CountIf(f.expr.clone())],
        Metric::NotInReference(_) | Metric::DuplicateAcrossPublished(_) => vec![],
        // Key sets and schemas, no aggregate atoms.
        Metric::DuplicateCountNullsEqual(_) | Metric::SchemaDrift | Metric::ColumnType { .. } => {
            vec![]
        }
    }
}

/// The sorted key set a `nulls not distinct` metric needs a grouped pass for.
pub fn key_set_nulls_equal_of(m: &Metric) -> Option<Vec<String>> {
    match m {
        Metric::DuplicateCountNullsEqual(k) => Some(sorted(k)),
        _ => None,
    }
}

/// The sorted key set a metric needs a grouped pass for.
pub fn key_set_of(m: &Metric) -> Option<Vec<String>> {
    match m {
        Metric::DuplicateCount(k) | Metric::PrimaryKeyViolations(k) => Some(sorted(k)),
        _ => None,
    }
}

pub fn sorted(k: &[String]) -> Vec<String> {
    k.iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Rows with a null part in `keys`: primary-key violations of their own.
pub fn any_null(keys: &[String]) -> Expr {
    keys.iter()
        .map(|k| ident(k).is_null())
        .reduce(Expr::or)
        .unwrap_or_else(|| lit(false))
}

impl Atom {
    /// How `explain` names the atom.
    pub fn describe(&self) -> String {
        match self {
            Atom::RowCount => "count(*)".into(),
            Atom::NonNull(c) => format!("count({c})"),
            Atom::Distinct(c) => format!("count(distinct {c})"),
            Atom::Min(c) => format!("min({c})"),
            Atom::Max(c) => format!("max({c})"),
            Atom::Sum(c) => format!("sum({c})"),
            Atom::CountIf(p) => format!("count(*) filter (where {p})"),
        }
    }

    /// The aggregate expression, typed for `schema`.
    pub fn expr(&self, schema: &Schema) -> Result<Expr> {
        let value_col = |c: &str| {
            // Aggregate dictionary-encoded columns over their values.
            match schema.field_with_name(c).map(|f| f.data_type().clone()) {
                Ok(DataType::Dictionary(_, v)) => cast(ident(c), *v),
                _ => ident(c),
            }
        };
        Ok(match self {
            Atom::RowCount => count_all(),
            Atom::NonNull(c) => count(ident(c)),
            Atom::Distinct(c) => count_distinct(value_col(c)),
            Atom::Min(c) => min(value_col(c)),
            Atom::Max(c) => max(value_col(c)),
            Atom::Sum(c) => {
                let ty = schema
                    .field_with_name(c)
                    .map(|f| f.data_type().clone())
                    .ok();
                if ty.as_ref().is_some_and(DataType::is_integer) {
                    // Exact: integer sums cannot overflow 38 digits.
                    sum(cast(ident(c), DataType::Decimal128(38, 0)))
                } else if ty.as_ref().is_some_and(DataType::is_floating) {
                    // Exact and independent of the order rows arrive in.
                    fsum::ExactSum::udaf().call(vec![cast(ident(c), DataType::Float64)])
                } else {
                    sum(ident(c))
                }
            }
            Atom::CountIf(p) => count(lit(COUNT_STAR_EXPANSION)).filter(p.clone()).build()?,
        })
    }
}

/// The fused scalar aggregate: one row, one column per atom (`a0`, `a1`, ...).
pub fn scalar_frame(table: DataFrame, plan: &AuditPlan) -> Result<DataFrame> {
    let schema = table.schema().as_arrow().clone();
    let exprs: Vec<Expr> = plan
        .atoms
        .iter()
        .enumerate()
        .map(|(i, a)| Ok(a.expr(&schema)?.alias(format!("a{i}"))))
        .collect::<Result<_>>()?;
    table.aggregate(vec![], exprs)
}

/// Keys occurring in more than one row, with their row counts in [`ROWS`]:
/// rows with a null key part are left out, as in a SQL UNIQUE constraint.
pub fn duplicates_frame(table: DataFrame, keys: &[String]) -> Result<DataFrame> {
    let not_null = keys
        .iter()
        .map(|k| ident(k).is_not_null())
        .reduce(Expr::and)
        .unwrap_or_else(|| lit(true));
    table
        .filter(not_null)?
        .aggregate(
            keys.iter().map(ident).collect(),
            vec![count_all().alias(ROWS)],
        )?
        .filter(col(ROWS).gt(lit(1i64)))
}

/// Keys occurring in more than one row, with their row counts in [`ROWS`],
/// a null key part being a value like any other (`nulls not distinct`; SQL
/// `GROUP BY` already groups nulls together).
pub fn duplicates_nulls_equal_frame(table: DataFrame, keys: &[String]) -> Result<DataFrame> {
    table
        .aggregate(
            keys.iter().map(ident).collect(),
            vec![count_all().alias(ROWS)],
        )?
        .filter(col(ROWS).gt(lit(1i64)))
}

/// Rows matching `filter`, grouped by `columns`, with their counts in [`ROWS`].
pub fn rows_frame(table: DataFrame, filter: Expr, columns: &[String]) -> Result<DataFrame> {
    table
        .filter(filter)?
        .aggregate(
            columns.iter().map(ident).collect(),
            vec![count_all().alias(ROWS)],
        )?
        .filter(col(ROWS).gt(lit(0i64)))
}

/// The distinct non-null values of `column`, one row each, with their counts
/// in [`ROWS`]: the grouped form of `count(distinct column)`.
pub fn distinct_frame(table: DataFrame, column: &str) -> Result<DataFrame> {
    rows_frame(table, ident(column).is_not_null(), &[column.to_string()])
}

/// Derives a metric's value from atom values and duplicate-key counts.
pub fn derive(
    m: &Metric,
    schema: &Schema,
    atom: &dyn Fn(&Atom) -> Value,
    duplicates: &dyn Fn(&[String]) -> Value,
) -> Value {
    derive_with(m, schema, atom, duplicates, &|_| Value::Null)
}

/// [`derive()`], with the duplicate-key counts of `nulls not distinct` key
/// sets too. Schema metrics have no value here (the judge compares schemas).
pub fn derive_with(
    m: &Metric,
    schema: &Schema,
    atom: &dyn Fn(&Atom) -> Value,
    duplicates: &dyn Fn(&[String]) -> Value,
    duplicates_nulls_equal: &dyn Fn(&[String]) -> Value,
) -> Value {
    let rows = || atom(&Atom::RowCount);
    match m {
        Metric::RowCount => rows(),
        Metric::NullCount(c) => null_count(rows(), atom(&Atom::NonNull(c.clone()))),
        Metric::NullRate(c) => rate(null_count(rows(), atom(&Atom::NonNull(c.clone()))), rows()),
        Metric::DistinctCount(c) => atom(&Atom::Distinct(c.clone())),
        Metric::DuplicateCount(k) => duplicates(&sorted(k)),
        Metric::PrimaryKeyViolations(k) => {
            let d = duplicates(&sorted(k));
            let n = atom(&Atom::CountIf(any_null(k)));
            crate::value::arith(crate::dsl::ast::ArithOp::Add, &d, &n)
        }
        Metric::Min(c) => atom(&Atom::Min(c.clone())),
        Metric::Max(c) => atom(&Atom::Max(c.clone())),
        Metric::Sum(c) => integer_sum(atom(&Atom::Sum(c.clone())), schema, c),
        Metric::Avg(c) => avg(atom(&Atom::Sum(c.clone())), atom(&Atom::NonNull(c.clone()))),
        Metric::CountWhere(f) => atom(&Atom::CountIf(f.expr.clone())),
        Metric::RateWhere(f) => rate(atom(&Atom::CountIf(f.expr.clone())), rows()),
        Metric::DuplicateCountNullsEqual(k) => duplicates_nulls_equal(&sorted(k)),
        Metric::SchemaDrift | Metric::ColumnType { .. } => Value::Null,
        // Observed by their own join pass (`exec::join`), not derived.
        Metric::NotInReference(_) | Metric::DuplicateAcrossPublished(_) => Value::Null,
    }
}

fn null_count(rows: Value, non_null: Value) -> Value {
    match (rows, non_null) {
        (Value::Int(r), Value::Int(n)) => Value::Int(r - n),
        _ => Value::Null,
    }
}

/// `part / whole`, 0 when there are no rows.
fn rate(part: Value, whole: Value) -> Value {
    match (part, whole) {
        (_, Value::Int(0)) => Value::Float(0.0),
        (Value::Int(p), Value::Int(w)) => Value::Float(p as f64 / w as f64),
        _ => Value::Null,
    }
}

fn integer_sum(v: Value, schema: &Schema, c: &str) -> Value {
    let is_int = schema
        .field_with_name(c)
        .is_ok_and(|f| f.data_type().is_integer());
    match v {
        Value::Decimal { value, scale: 0 } if is_int => Value::Int(value),
        other => other,
    }
}

fn avg(sum: Value, n: Value) -> Value {
    let Value::Int(n) = n else { return Value::Null };
    if n == 0 || sum.is_null() {
        return Value::Null;
    }
    match sum.as_f64() {
        Some(s) => Value::Float(s / n as f64),
        None => Value::Null,
    }
}

/// `column`'s exact integer range, when `range` knows it and `suits`
/// accepts (the column, its span) for a bitmap.
fn bitmap_range(
    column: &str,
    range: impl Fn(&str) -> Option<(i64, i64)>,
    suits: impl Fn(&str, u64) -> bool,
) -> Option<(i64, i64)> {
    let (min, max) = range(column)?;
    suits(column, (max as i128 - min as i128 + 1) as u64).then_some((min, max))
}
