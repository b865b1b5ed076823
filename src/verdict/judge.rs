//! Observed metric values + thresholds → per-statement outcomes.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::check::{
    CheckedRules, CheckedStatement, Metric, Operand, SampleSpec, Threshold, ValueTree,
};
use crate::dsl::ast::CmpOp;
use crate::value::{arith, negate, Value};

use super::{CheckResult, InputSummary, Sample, Source, Status, Verdict};

/// Metric values of one partition.
pub type MetricValues = HashMap<Metric, Value>;

/// Offending keys with their row counts, most frequent first.
pub type RankedKeys = Vec<(Vec<Value>, u64)>;

/// Everything about the run that is not a check outcome.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub partition: Vec<(String, String)>,
    pub rules_path: String,
    pub rules_sha256: String,
    pub input: InputSummary,
    /// The published version's fingerprint, when one was compared against.
    pub compared_against: Option<String>,
}

/// What the judge reads for each statement.
pub struct Measurements<'a> {
    pub staged: &'a MetricValues,
    /// `None` when nothing is published for the run key.
    pub published: Option<&'a MetricValues>,
    /// Why published values are absent (shown on skipped checks).
    pub published_absent: &'a str,
    /// Duplicate-key samples by key set (sorted columns), values in that order.
    pub duplicates: &'a dyn Fn(&[String]) -> RankedKeys,
    pub source: &'a dyn Fn(&Metric) -> Source,
}

/// Judges every statement, in file order.
pub fn judge(rules: &CheckedRules, m: &Measurements<'_>, info: RunInfo) -> Verdict {
    let checks = rules.statements.iter().map(|s| judge_one(s, m)).collect();
    Verdict {
        table: rules.table.clone(),
        partition: info.partition,
        rules_path: info.rules_path,
        rules_sha256: info.rules_sha256,
        input: info.input,
        checks,
        compared_against: info.compared_against,
    }
}

fn judge_one(s: &CheckedStatement, m: &Measurements<'_>) -> CheckResult {
    let value = m.staged.get(&s.metric).cloned().unwrap_or(Value::Null);
    let mut result = CheckResult {
        line: s.line,
        name: s.name.clone(),
        severity: s.severity,
        metric: s.metric.name(),
        value,
        expected: String::new(),
        status: Status::Skipped,
        samples: None,
        note: None,
        source: (m.source)(&s.metric),
    };
    let evaluated = evaluate(&s.threshold, m.published);
    let Some((expected, holds)) = evaluated.map(|t| (describe(&t), holds(&result.value, &t)))
    else {
        result.expected = describe_source(&s.threshold);
        result.note = Some(m.published_absent.to_string());
        return result;
    };
    result.expected = expected;
    result.status = if holds { Status::Pass } else { Status::Fail };
    if result.value.is_null() && !holds {
        result.note =
            Some("the metric is null (no non-null values), and a null metric never holds".into());
    }
    if result.status == Status::Fail {
        if let Some(SampleSpec::DuplicateKeys(keys)) = &s.samples {
            result.samples = Some(duplicate_samples(keys, m));
        }
    }
    result
}

fn duplicate_samples(keys: &[String], m: &Measurements<'_>) -> Vec<Sample> {
    let sorted = crate::plan::sorted(keys);
    (m.duplicates)(&sorted)
        .into_iter()
        .map(|(values, rows)| Sample {
            key: keys
                .iter()
                .map(|k| {
                    let i = sorted.iter().position(|s| s == k).unwrap_or(0);
                    (k.clone(), values.get(i).cloned().unwrap_or(Value::Null))
                })
                .collect(),
            rows,
        })
        .collect()
}

/// A threshold with its operands evaluated.
enum Evaluated {
    Op(CmpOp, Value),
    Between(Value, Value),
}

fn evaluate(t: &Threshold, published: Option<&MetricValues>) -> Option<Evaluated> {
    Some(match t {
        Threshold::Op(op, o) => Evaluated::Op(*op, eval(&o.tree, published)?),
        Threshold::Between(lo, hi) => {
            Evaluated::Between(eval(&lo.tree, published)?, eval(&hi.tree, published)?)
        }
    })
}

/// Evaluates a threshold expression; `None` when it needs published values
/// and there are none.
pub fn eval(tree: &ValueTree, published: Option<&MetricValues>) -> Option<Value> {
    Some(match tree {
        ValueTree::Const(v) => v.clone(),
        ValueTree::Published(metric) => published?.get(metric).cloned().unwrap_or(Value::Null),
        ValueTree::Neg(a) => negate(&eval(a, published)?),
        ValueTree::Binary(op, a, b) => arith(*op, &eval(a, published)?, &eval(b, published)?),
    })
}

/// Folds a tree without `published` references to a constant.
pub fn fold(tree: &ValueTree) -> ValueTree {
    match eval(tree, Some(&MetricValues::new())) {
        Some(v) if !contains_published(tree) => ValueTree::Const(v),
        _ => tree.clone(),
    }
}

fn contains_published(tree: &ValueTree) -> bool {
    match tree {
        ValueTree::Published(_) => true,
        ValueTree::Const(_) => false,
        ValueTree::Neg(a) => contains_published(a),
        ValueTree::Binary(_, a, b) => contains_published(a) || contains_published(b),
    }
}

fn holds(value: &Value, t: &Evaluated) -> bool {
    match t {
        Evaluated::Op(op, v) => match value.compare(v) {
            None => false,
            Some(o) => match op {
                CmpOp::Eq => o == Ordering::Equal,
                CmpOp::Ne => o != Ordering::Equal,
                CmpOp::Lt => o == Ordering::Less,
                CmpOp::Le => o != Ordering::Greater,
                CmpOp::Gt => o == Ordering::Greater,
                CmpOp::Ge => o != Ordering::Less,
            },
        },
        Evaluated::Between(lo, hi) => {
            matches!(value.compare(lo), Some(Ordering::Greater | Ordering::Equal))
                && matches!(value.compare(hi), Some(Ordering::Less | Ordering::Equal))
        }
    }
}

fn describe(t: &Evaluated) -> String {
    match t {
        Evaluated::Op(op, v) => format!("{} {v}", op.symbol()),
        Evaluated::Between(lo, hi) => format!("between {lo} and {hi}"),
    }
}

fn describe_source(t: &Threshold) -> String {
    let text = |o: &Operand| o.text.clone();
    match t {
        Threshold::Op(op, o) => format!("{} {}", op.symbol(), text(o)),
        Threshold::Between(lo, hi) => format!("between {} and {}", text(lo), text(hi)),
    }
}

/// The statements that failed and collect row samples, with their filters.
pub fn row_sample_requests<'r>(
    rules: &'r CheckedRules,
    v: &Verdict,
) -> Vec<(usize, &'r SampleSpec)> {
    rules
        .statements
        .iter()
        .zip(&v.checks)
        .enumerate()
        .filter(|(_, (s, c))| {
            c.status == Status::Fail && matches!(s.samples, Some(SampleSpec::Rows { .. }))
        })
        .filter_map(|(i, (s, _))| s.samples.as_ref().map(|spec| (i, spec)))
        .collect()
}
