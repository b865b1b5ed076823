//! Thresholds: operands and value expressions typed against their metric.

use super::rules::{HistoryRef, Operand, Threshold, ValueTree};
use super::{collapse, literal, Checker, Kind};
use crate::diagnostic::{codes, Span};
use crate::dsl::ast::{self, Comparison, ValueExpr, ValueKind};
use crate::value::Value;

impl Checker<'_> {
    pub(super) fn threshold(
        &mut self,
        cmp: &Comparison,
        kind: Kind,
        metric_span: Span,
    ) -> Option<Threshold> {
        match cmp {
            Comparison::Op { op, rhs } => {
                let o = self.operand(rhs, kind, metric_span)?;
                Some(Threshold::Op(*op, o))
            }
            Comparison::Between { low, high } => {
                let lo = self.operand(low, kind, metric_span);
                let hi = self.operand(high, kind, metric_span);
                Some(Threshold::Between(lo?, hi?))
            }
        }
    }

    pub(super) fn operand(
        &mut self,
        e: &ValueExpr,
        metric_kind: Kind,
        metric_span: Span,
    ) -> Option<Operand> {
        let (tree, kind) = self.value_expr(e)?;
        if !kind.compatible(metric_kind) {
            let metric_text = self.text(metric_span);
            self.error(
                codes::TYPE,
                e.span,
                format!(
                    "cannot compare `{metric_text}` ({}) with {}",
                    metric_kind.describe(),
                    kind.describe()
                ),
            );
            return None;
        }
        Some(Operand {
            tree,
            text: collapse(self.text(e.span)),
        })
    }

    pub(super) fn value_expr(&mut self, e: &ValueExpr) -> Option<(ValueTree, Kind)> {
        match &e.kind {
            ValueKind::Literal(l) => match literal::literal_value(l) {
                Ok(v) => {
                    let k = Kind::of_value(&v);
                    Some((ValueTree::Const(v), k))
                }
                Err(msg) => {
                    self.error(codes::LITERAL, e.span, msg.to_string());
                    None
                }
            },
            ValueKind::PartitionRef(key) => {
                let Some(k) = self.keys.iter().find(|k| k.name == key.name) else {
                    self.error(
                        codes::UNKNOWN_PARTITION_KEY,
                        e.span,
                        format!(
                            "`partition.{}` is not a run-key column of this rule file",
                            key.name
                        ),
                    );
                    return None;
                };
                let kind = Kind::of_type(&k.ty).unwrap_or(Kind::Text);
                let v = k.value.clone().unwrap_or(Value::Null);
                Some((ValueTree::Const(v), kind))
            }
            ValueKind::PublishedRef(m) => {
                let (metric, kind) = self.metric(m);
                Some((ValueTree::Published(metric?), kind))
            }
            ValueKind::History { stat, n, metric } => {
                let (checked, kind) = self.metric(metric);
                let checked = checked?;
                if !kind.compatible(Kind::Number) {
                    self.error(
                        codes::TYPE,
                        metric.span,
                        format!(
                            "`{}` of history needs a numeric metric, but `{}` is {}",
                            stat.as_str(),
                            checked.name(),
                            kind.describe()
                        ),
                    );
                    return None;
                }
                let h = HistoryRef {
                    stat: *stat,
                    n: *n,
                    metric: checked,
                };
                Some((ValueTree::History(Box::new(h)), Kind::Number))
            }
            ValueKind::Neg(inner) => {
                let (t, k) = self.value_expr(inner)?;
                self.require_number(k, inner.span, "-")?;
                Some((ValueTree::Neg(Box::new(t)), Kind::Number))
            }
            ValueKind::Binary { op, lhs, rhs } => {
                let l = self.value_expr(lhs);
                let r = self.value_expr(rhs);
                let ((lt, lk), (rt, rk)) = (l?, r?);
                let sym = match op {
                    ast::ArithOp::Add => "+",
                    ast::ArithOp::Sub => "-",
                    ast::ArithOp::Mul => "*",
                    ast::ArithOp::Div => "/",
                };
                self.require_number(lk, lhs.span, sym)?;
                self.require_number(rk, rhs.span, sym)?;
                Some((
                    ValueTree::Binary(*op, Box::new(lt), Box::new(rt)),
                    Kind::Number,
                ))
            }
        }
    }

    pub(super) fn require_number(&mut self, k: Kind, span: Span, op: &str) -> Option<()> {
        if k.compatible(Kind::Number) {
            return Some(());
        }
        self.error(
            codes::TYPE,
            span,
            format!("`{op}` needs numbers, but this is {}", k.describe()),
        );
        None
    }
}
