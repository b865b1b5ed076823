//! Statements: each assertion checked into its metric, threshold and samples.

use datafusion::logical_expr::Expr;

use super::rules::{CheckedStatement, Filter, Metric, Operand, SampleSpec, Threshold, ValueTree};
use super::{collapse, Checker};
use crate::diagnostic::line_col;
use crate::dsl::ast::{self, Assertion, CmpOp, MetricKind};
use crate::value::Value;

impl Checker<'_> {
    pub(super) fn statement(&mut self, s: &ast::Statement) -> Option<CheckedStatement> {
        let (metric, threshold, samples) = match &s.assertion {
            Assertion::Compare { metric, cmp } => {
                let (m, kind) = self.metric(metric);
                let threshold = self.threshold(cmp, kind, metric.span);
                let (m, threshold) = (m?, threshold?);
                let columns = match &m {
                    Metric::CountWhere(f) | Metric::RateWhere(f) => {
                        self.referenced_columns(&f.expr)
                    }
                    _ => Vec::new(),
                };
                let samples = match &metric.kind {
                    MetricKind::DuplicateCountNulls(_, nulls) => {
                        key_columns(&m).map(|k| SampleSpec::DuplicateKeysNulls(k, *nulls))
                    }
                    _ => sample_spec(&m, columns),
                };
                (m, threshold, samples)
            }
            Assertion::Unique { keys, .. } => {
                let k = self.keys(keys)?;
                (
                    Metric::DuplicateCount(k.clone()),
                    zero(),
                    Some(SampleSpec::DuplicateKeys(k)),
                )
            }
            Assertion::PrimaryKey { keys, .. } => {
                let k = self.keys(keys)?;
                (
                    Metric::PrimaryKeyViolations(k.clone()),
                    zero(),
                    Some(SampleSpec::DuplicateKeys(k)),
                )
            }
            Assertion::Values {
                column,
                negated,
                list,
                ..
            } => {
                let filter = self.values_filter(column, *negated, list)?;
                let samples = SampleSpec::Rows {
                    filter: filter.expr.clone(),
                    columns: vec![column.name.clone()],
                };
                (Metric::CountWhere(filter), zero(), Some(samples))
            }
            Assertion::UniqueNulls { keys, nulls, .. } => {
                let k = self.keys(keys)?;
                (
                    nulls_metric(k.clone(), *nulls),
                    zero(),
                    Some(SampleSpec::DuplicateKeysNulls(k, *nulls)),
                )
            }
            Assertion::SchemaMatches { .. } => (Metric::SchemaDrift, zero(), None),
            Assertion::ColumnType {
                column,
                ty,
                nullable,
                ..
            } => {
                let metric = Metric::ColumnType {
                    column: column.name.clone(),
                    declared: ty.ty.clone(),
                    nullable: *nullable,
                };
                (metric, zero(), None)
            }
            Assertion::InReference {
                columns,
                reference,
                ref_columns,
                ..
            } => {
                let lookup = self.in_reference(columns, reference, ref_columns)?;
                (
                    Metric::NotInReference(lookup),
                    zero(),
                    Some(SampleSpec::Joined),
                )
            }
            Assertion::UniqueAcrossPublished { keys, span } => {
                let k = self.across_published(keys, *span)?;
                (
                    Metric::DuplicateAcrossPublished(k),
                    zero(),
                    Some(SampleSpec::Joined),
                )
            }
            Assertion::All { predicate, .. } => {
                let expr = self.predicate(predicate)?;
                let columns = self.referenced_columns(&expr);
                let filter = Filter {
                    expr: Expr::IsFalse(Box::new(expr)),
                    text: format!("not ({})", collapse(&predicate.sql)),
                };
                let samples = SampleSpec::Rows {
                    filter: filter.expr.clone(),
                    columns,
                };
                (Metric::CountWhere(filter), zero(), Some(samples))
            }
        };
        Some(CheckedStatement {
            line: line_col(self.input.source, s.span.start).0,
            name: s.label.clone().unwrap_or_else(|| s.source_text.clone()),
            severity: s.severity,
            metric,
            threshold,
            samples,
        })
    }
}

/// The metric `duplicate_count` stands for under declared null semantics.
pub(super) fn nulls_metric(keys: Vec<String>, nulls: ast::Nulls) -> Metric {
    match nulls {
        ast::Nulls::Distinct => Metric::DuplicateCount(keys),
        ast::Nulls::NotDistinct => Metric::DuplicateCountNullsEqual(keys),
    }
}

/// The key columns of a key metric.
pub(super) fn key_columns(m: &Metric) -> Option<Vec<String>> {
    match m {
        Metric::DuplicateCount(k) | Metric::DuplicateCountNullsEqual(k) => Some(k.clone()),
        _ => None,
    }
}

pub(super) fn zero() -> Threshold {
    Threshold::Op(
        CmpOp::Eq,
        Operand {
            tree: ValueTree::Const(Value::Int(0)),
            text: "0".into(),
        },
    )
}

pub(super) fn sample_spec(m: &Metric, columns: Vec<String>) -> Option<SampleSpec> {
    match m {
        Metric::DuplicateCount(k) | Metric::PrimaryKeyViolations(k) => {
            Some(SampleSpec::DuplicateKeys(k.clone()))
        }
        Metric::DuplicateCountNullsEqual(k) => Some(SampleSpec::DuplicateKeysNulls(
            k.clone(),
            ast::Nulls::NotDistinct,
        )),
        Metric::CountWhere(f) | Metric::RateWhere(f) => Some(SampleSpec::Rows {
            filter: f.expr.clone(),
            columns,
        }),
        _ => None,
    }
}
