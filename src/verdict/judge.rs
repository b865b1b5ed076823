//! Observed metric values + thresholds → per-statement outcomes.

use std::cmp::Ordering;
use std::collections::HashMap;

use datafusion::arrow::datatypes::Schema;

use crate::check::{
    CheckedRules, CheckedStatement, Metric, Operand, SampleSpec, Threshold, ValueTree,
};
use crate::dsl::ast::{CmpOp, Nulls};
use crate::value::{arith, negate, Value};

use super::history::{History, Unresolved};
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
    /// Why a statement's metric could not be observed (it is `skipped`),
    /// e.g. `across published` without `--table`.
    pub skipped: &'a dyn Fn(&Metric) -> Option<String>,
    /// The samples of a join statement (`values ... in`, `across
    /// published`), shown when it fails.
    pub joined: &'a dyn Fn(&Metric) -> Option<Vec<Sample>>,
    /// What schema, history and `nulls not distinct` checks read.
    pub extra: Extra<'a>,
}

/// What the checks beyond metric thresholds read.
pub struct Extra<'a> {
    /// The staged files' schema.
    pub staged_schema: &'a Schema,
    /// The published version's schema, or why there is none.
    pub published_schema: Result<&'a Schema, &'a str>,
    /// Duplicate-key samples of `nulls not distinct` key sets.
    pub duplicates_nulls_equal: &'a dyn Fn(&[String]) -> RankedKeys,
    /// Earlier published partitions, for `history(N)`.
    pub history: History<'a>,
    /// The other partition (`k=v`) `schema matches published` read, for a
    /// run key with nothing published yet.
    pub schema_from: Option<&'a str>,
}

/// Judges every statement, in file order. What the verdict still needs is
/// the rows of the staged files some failed checks show as samples
/// ([`Judged::requests`]); [`Judged::complete`] adds them and returns the
/// verdict, whole.
pub fn judge(rules: &CheckedRules, m: &Measurements<'_>, info: RunInfo) -> Judged {
    let checks = rules.statements.iter().map(|s| judge_one(s, m)).collect();
    Judged(Verdict {
        table: rules.table.clone(),
        partition: info.partition,
        rules_path: info.rules_path,
        rules_sha256: info.rules_sha256,
        input: info.input,
        checks,
        compared_against: info.compared_against,
    })
}

/// A verdict whose statuses are known, before the samples that must be
/// read from the staged files for the checks that failed.
#[derive(Debug)]
pub struct Judged(Verdict);

/// Rows of the staged files a failed check shows as samples.
#[derive(Debug)]
pub enum SampleRequest<'r> {
    /// The rows matching `filter` (a check whose samples are rows), grouped
    /// by `columns`.
    Rows {
        check: usize,
        filter: &'r datafusion::prelude::Expr,
        columns: &'r [String],
    },
    /// A failed `primary_key`: its keys with a null part, after the `shown`
    /// duplicated keys.
    NullKeys {
        check: usize,
        keys: &'r [String],
        shown: usize,
    },
}

impl Judged {
    /// The samples still to read, in file order.
    pub fn requests<'r>(&self, rules: &'r CheckedRules) -> Vec<SampleRequest<'r>> {
        let mut out = Vec::new();
        for (i, (s, c)) in rules.statements.iter().zip(&self.0.checks).enumerate() {
            if c.status != Status::Fail {
                continue;
            }
            if let Some(SampleSpec::Rows { filter, columns }) = &s.samples {
                out.push(SampleRequest::Rows {
                    check: i,
                    filter,
                    columns,
                });
            }
        }
        for (i, (s, c)) in rules.statements.iter().zip(&self.0.checks).enumerate() {
            if let (Metric::PrimaryKeyViolations(keys), Status::Fail) = (&s.metric, c.status) {
                out.push(SampleRequest::NullKeys {
                    check: i,
                    keys,
                    shown: c.samples.as_ref().map_or(0, Vec::len),
                });
            }
        }
        out
    }

    /// The verdict, with the samples read for the requests (by check
    /// index; a check's samples follow those it has).
    pub fn complete(mut self, samples: Vec<(usize, Vec<Sample>)>) -> Verdict {
        for (i, more) in samples {
            if let Some(c) = self.0.checks.get_mut(i) {
                c.samples.get_or_insert_with(Vec::new).extend(more);
            }
        }
        self.0
    }
}

fn judge_one(s: &CheckedStatement, m: &Measurements<'_>) -> CheckResult {
    let mut result = judge_thresholded(s, m);
    if result.status == Status::Fail {
        if let Some(samples) = (m.joined)(&s.metric) {
            result.samples = Some(samples);
        }
    }
    if let Some(rel) = m.extra.schema_from {
        if s.metric == Metric::SchemaDrift && result.status != Status::Skipped {
            result.note = Some(format!(
                "nothing is published for this run key: compared with the table's current schema, \
                 that of partition {rel}"
            ));
            result.compared_with = Some(rel.to_string());
        }
    }
    if let Some(SampleSpec::DuplicateKeysNulls(keys, nulls)) = &s.samples {
        result.nulls = Some(*nulls);
        if result.status == Status::Fail {
            result.samples = Some(match nulls {
                Nulls::Distinct => duplicate_samples(keys, m.duplicates),
                Nulls::NotDistinct => duplicate_samples(keys, m.extra.duplicates_nulls_equal),
            });
        }
    }
    result
}

fn judge_thresholded(s: &CheckedStatement, m: &Measurements<'_>) -> CheckResult {
    if s.metric.is_schema() {
        return super::schema::judge(s, m.extra.staged_schema, m.extra.published_schema);
    }
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
        nulls: None,
        drift: None,
        compared_with: None,
        failed_rows: None,
    };
    if let Some(why) = (m.skipped)(&s.metric) {
        result.expected = describe_source(&s.threshold);
        result.note = Some(why);
        return result;
    }
    let refs = Refs {
        published: m.published,
        published_absent: m.published_absent,
        history: m.extra.history,
        notes: Vec::new(),
    };
    let (evaluated, notes) = match evaluate(&s.threshold, refs) {
        Ok(e) => e,
        Err(why) => {
            result.expected = describe_source(&s.threshold);
            result.note = Some(why.to_string());
            return result;
        }
    };
    let holds = holds(&result.value, &evaluated);
    result.expected = describe(&evaluated);
    result.status = if holds { Status::Pass } else { Status::Fail };
    let mut notes = notes;
    if result.value.is_null() && !holds {
        notes.push("the metric is null (no non-null values), and a null metric never holds".into());
    }
    if !notes.is_empty() {
        result.note = Some(notes.join("; "));
    }
    if result.status == Status::Fail {
        if let Some(SampleSpec::DuplicateKeys(keys)) = &s.samples {
            result.samples = Some(duplicate_samples(keys, m.duplicates));
        }
    }
    result
}

fn duplicate_samples(keys: &[String], duplicates: &dyn Fn(&[String]) -> RankedKeys) -> Vec<Sample> {
    let sorted = crate::plan::sorted(keys);
    duplicates(&sorted)
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
            partition: None,
        })
        .collect()
}

/// A threshold with its operands evaluated.
enum Evaluated {
    Op(CmpOp, Value),
    Between(Value, Value),
}

/// What threshold references resolve against, and the notes they leave.
struct Refs<'a> {
    published: Option<&'a MetricValues>,
    published_absent: &'a str,
    history: History<'a>,
    /// Remarks on how `history(N)` values were computed.
    notes: Vec<String>,
}

/// The evaluated threshold and the notes of its references; or why it could
/// not be evaluated (the check is skipped).
fn evaluate(t: &Threshold, mut refs: Refs<'_>) -> Result<(Evaluated, Vec<String>), Unresolved> {
    let e = match t {
        Threshold::Op(op, o) => Evaluated::Op(*op, eval_refs(&o.tree, &mut refs)?),
        Threshold::Between(lo, hi) => {
            let lo = eval_refs(&lo.tree, &mut refs)?;
            Evaluated::Between(lo, eval_refs(&hi.tree, &mut refs)?)
        }
    };
    Ok((e, refs.notes))
}

fn eval_refs(tree: &ValueTree, refs: &mut Refs<'_>) -> Result<Value, Unresolved> {
    Ok(match tree {
        ValueTree::Const(v) => v.clone(),
        ValueTree::Published(metric) => match refs.published {
            Some(p) => p.get(metric).cloned().unwrap_or(Value::Null),
            None => return Err(Unresolved::NotPublished(refs.published_absent.to_string())),
        },
        ValueTree::History(h) => {
            let (v, note) = super::history::statistic(h, refs.history)?;
            if !refs.notes.contains(&note) {
                refs.notes.push(note);
            }
            v
        }
        ValueTree::Neg(a) => negate(&eval_refs(a, refs)?),
        ValueTree::Binary(op, a, b) => arith(*op, &eval_refs(a, refs)?, &eval_refs(b, refs)?),
    })
}

/// Evaluates a threshold expression; `None` when it needs published values
/// and there are none, or history.
pub fn eval(tree: &ValueTree, published: Option<&MetricValues>) -> Option<Value> {
    let mut refs = Refs {
        published,
        published_absent: "",
        history: History::NotGiven,
        notes: Vec::new(),
    };
    if contains_history(tree) {
        return None;
    }
    eval_refs(tree, &mut refs).ok()
}

fn contains_history(tree: &ValueTree) -> bool {
    match tree {
        ValueTree::History(_) => true,
        ValueTree::Const(_) | ValueTree::Published(_) => false,
        ValueTree::Neg(a) => contains_history(a),
        ValueTree::Binary(_, a, b) => contains_history(a) || contains_history(b),
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
