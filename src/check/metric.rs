//! Metrics and what they name: columns, key lists, `where` predicates, `values` lists.

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::Expr;
use datafusion::prelude::{ident, lit};

use super::predicate::PartitionLookup;
use super::rules::{quote_ident, Filter, Metric, ValueTree};
use super::statement::nulls_metric;
use super::{collapse, predicate, Checker, Kind};
use crate::diagnostic::{codes, suggest, Diagnostic};
use crate::dsl::ast::{self, Ident, MetricKind, ValueExpr};

impl Checker<'_> {
    /// A metric and the kind of its value; `None` after reporting an error.
    pub(super) fn metric(&mut self, m: &ast::Metric) -> (Option<Metric>, Kind) {
        let numeric = Kind::Number;
        match &m.kind {
            MetricKind::RowCount => (Some(Metric::RowCount), numeric),
            MetricKind::NullCount(c) => (
                self.column(c).map(|_| Metric::NullCount(c.name.clone())),
                numeric,
            ),
            MetricKind::NullRate(c) => (
                self.column(c).map(|_| Metric::NullRate(c.name.clone())),
                numeric,
            ),
            MetricKind::DistinctCount(c) => (
                self.column(c)
                    .map(|_| Metric::DistinctCount(c.name.clone())),
                numeric,
            ),
            MetricKind::DuplicateCount(k) => (self.keys(k).map(Metric::DuplicateCount), numeric),
            MetricKind::DuplicateCountNulls(k, nulls) => {
                (self.keys(k).map(|k| nulls_metric(k, *nulls)), numeric)
            }
            MetricKind::Min(c) | MetricKind::Max(c) => {
                let Some(ty) = self.column(c) else {
                    return (None, Kind::Any);
                };
                let kind = match ty {
                    None => Kind::Any,
                    // A column typed null holds no value to order (pandas
                    // writes an empty frame's text and date columns so):
                    // its min and max are null.
                    Some(ty) if only_nulls(&ty) => Kind::Any,
                    Some(ty) => match Kind::of_type(&ty) {
                        Some(k) => k,
                        None => {
                            self.error(
                                codes::TYPE,
                                c.span,
                                format!(
                                    "min and max are not defined for `{}` of type {ty}",
                                    c.name
                                ),
                            );
                            return (None, Kind::Any);
                        }
                    },
                };
                let name = c.name.clone();
                let metric = if matches!(m.kind, MetricKind::Min(_)) {
                    Metric::Min(name)
                } else {
                    Metric::Max(name)
                };
                (Some(metric), kind)
            }
            MetricKind::Sum(c) | MetricKind::Avg(c) => {
                let Some(ty) = self.column(c) else {
                    return (None, numeric);
                };
                if let Some(ty) = ty {
                    if Kind::of_type(&ty) != Some(Kind::Number) {
                        let f = if matches!(m.kind, MetricKind::Sum(_)) {
                            "sum"
                        } else {
                            "avg"
                        };
                        let why = if only_nulls(&ty) {
                            " (a writer that saw no values gave it no type: pandas writes an empty frame's object columns so; write the frame with a pyarrow schema to keep the type)"
                        } else {
                            ""
                        };
                        self.error(
                            codes::TYPE,
                            c.span,
                            format!(
                                "{f} needs a numeric column, but `{}` is of type {ty}{why}",
                                c.name
                            ),
                        );
                        return (None, numeric);
                    }
                }
                let name = c.name.clone();
                let metric = if matches!(m.kind, MetricKind::Sum(_)) {
                    Metric::Sum(name)
                } else {
                    Metric::Avg(name)
                };
                (Some(metric), numeric)
            }
            MetricKind::CountWhere(p) | MetricKind::RateWhere(p) => {
                let Some(expr) = self.predicate(p) else {
                    return (None, numeric);
                };
                let filter = Filter {
                    expr,
                    text: collapse(&p.sql),
                };
                let metric = if matches!(m.kind, MetricKind::CountWhere(_)) {
                    Metric::CountWhere(filter)
                } else {
                    Metric::RateWhere(filter)
                };
                (Some(metric), numeric)
            }
        }
    }

    /// Resolves a column: `Some(Some(type))` found, `Some(None)` unknown
    /// schema, `None` after reporting an error.
    pub(super) fn column(&mut self, c: &Ident) -> Option<Option<DataType>> {
        let Some(schema) = self.input.schema else {
            return Some(None);
        };
        if let Ok(f) = schema.field_with_name(&c.name) {
            return Some(Some(f.data_type().clone()));
        }
        let mut d = Diagnostic::new(
            codes::UNKNOWN_COLUMN,
            c.span,
            format!("unknown column `{}`", c.name),
        );
        let names = schema.fields().iter().map(|f| f.name().as_str());
        if let Some(s) = suggest(&c.name, names) {
            d = d.with_help(format!("did you mean `{}`?", quote_ident(s)));
        } else {
            let all: Vec<_> = schema
                .fields()
                .iter()
                .map(|f| quote_ident(f.name()))
                .collect();
            d = d.with_help(format!(
                "the staged files have the columns {}",
                all.join(", ")
            ));
        }
        self.diags.push(d);
        None
    }

    pub(super) fn keys(&mut self, keys: &[Ident]) -> Option<Vec<String>> {
        let mut ok = true;
        let mut out: Vec<String> = Vec::new();
        for k in keys {
            if out.contains(&k.name) {
                self.error(
                    codes::DUPLICATE_NAME,
                    k.span,
                    format!("`{}` appears twice in the key", k.name),
                );
                ok = false;
            }
            ok &= self.column(k).is_some();
            out.push(k.name.clone());
        }
        ok.then_some(out)
    }

    pub(super) fn predicate(&mut self, p: &ast::Predicate) -> Option<Expr> {
        let Some(schema) = self.input.schema else {
            // Without a schema only the run-key references can be checked.
            for (key, span) in &p.partition_refs {
                if self.lookup(&key.name).is_none() {
                    self.error(
                        codes::UNKNOWN_PARTITION_KEY,
                        *span,
                        format!(
                            "`partition.{}` is not a run-key column of this rule file",
                            key.name
                        ),
                    );
                }
            }
            return Some(lit(true));
        };
        match predicate::plan_predicate(self.input.ctx, schema, p, self) {
            Ok(e) => Some(e),
            Err(d) => {
                self.diags.extend(d);
                None
            }
        }
    }

    pub(super) fn referenced_columns(&self, expr: &Expr) -> Vec<String> {
        let refs = expr.column_refs();
        let Some(schema) = self.input.schema else {
            return Vec::new();
        };
        schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .filter(|n| refs.iter().any(|c| c.name == *n))
            .collect()
    }

    pub(super) fn values_filter(
        &mut self,
        column: &Ident,
        negated: bool,
        list: &[ValueExpr],
    ) -> Option<Filter> {
        let ty = self.column(column)?;
        let col_kind = ty.as_ref().and_then(Kind::of_type).unwrap_or(Kind::Any);
        let mut values = Vec::new();
        let mut ok = true;
        for item in list {
            let Some((tree, kind)) = self.value_expr(item) else {
                ok = false;
                continue;
            };
            let ValueTree::Const(v) = tree.fold() else {
                self.error(
                    codes::TYPE,
                    item.span,
                    "a `values` list may hold only literals and `partition.KEY` values".into(),
                );
                ok = false;
                continue;
            };
            if !kind.compatible(col_kind) {
                self.error(
                    codes::TYPE,
                    item.span,
                    format!(
                        "`{}` holds {}, but this is {}",
                        column.name,
                        col_kind.describe(),
                        kind.describe()
                    ),
                );
                ok = false;
                continue;
            }
            values.push(v);
        }
        if !ok {
            return None;
        }
        let c = ident(&column.name);
        let lits: Vec<Expr> = values
            .iter()
            .map(|v| lit(crate::scalar::to_scalar(v)))
            .collect();
        let shown = values
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let name = quote_ident(&column.name);
        Some(if negated {
            Filter {
                expr: c.in_list(lits, false),
                text: format!("{name} in ({shown})"),
            }
        } else {
            Filter {
                expr: c.clone().is_not_null().and(c.in_list(lits, true)),
                text: format!("{name} not in ({shown})"),
            }
        })
    }
}

/// Whether a column of type `ty` can hold only nulls (Arrow's `Null`, also
/// dictionary-encoded).
fn only_nulls(ty: &DataType) -> bool {
    match ty {
        DataType::Null => true,
        DataType::Dictionary(_, v) => only_nulls(v),
        _ => false,
    }
}
