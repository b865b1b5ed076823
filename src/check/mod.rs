//! Syntax tree + Arrow schema → [`CheckedRules`]: names resolved, types agreed,
//! SQL predicates planned, all before any data is read.
//!
//! The checker reports every problem of the file (unknown columns with a "did
//! you mean", type mismatches, bad literals, unknown run-key references) and
//! produces a rule set only when there is none.

mod across;
pub mod literal;
pub mod predicate;
pub mod rules;

use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::logical_expr::Expr;
use datafusion::prelude::{ident, lit, SessionContext};

pub use across::common_key_type;
pub use rules::*;

use crate::diagnostic::{codes, line_col, suggest, Diagnostic, Span};
use crate::dsl::ast::{
    self, Assertion, CmpOp, Comparison, Ident, MetricKind, ValueExpr, ValueKind,
};
use crate::runkey::RunKey;
use crate::value::Value;
use predicate::PartitionLookup;

/// What the checker needs besides the syntax tree.
pub struct CheckInput<'a> {
    /// The rule file's text (for line numbers and threshold texts).
    pub source: &'a str,
    pub file: &'a ast::RuleFile,
    /// The staged files' schema; `None` checks only what needs no data
    /// (`dqgate lint` without `--staged`).
    pub schema: Option<&'a Schema>,
    /// The run key, when known; `partition.KEY` values are typed from it.
    pub run_key: Option<&'a RunKey>,
    /// The schemas of the opened `reference` tables, by name; a reference
    /// missing here is checked by name only.
    pub references: &'a [(String, datafusion::arrow::datatypes::SchemaRef)],
    pub ctx: &'a SessionContext,
}

/// Checks a parsed rule file against a schema.
pub fn check(input: &CheckInput<'_>) -> Result<CheckedRules, Vec<Diagnostic>> {
    let mut checker = Checker::new(input);
    checker.declared_references();
    let statements: Vec<_> = input
        .file
        .statements
        .iter()
        .filter_map(|s| checker.statement(s))
        .collect();
    if !checker.diags.is_empty() || input.schema.is_none() {
        let mut diags = checker.diags;
        diags.sort_by_key(|d| d.span.start);
        return Err(diags);
    }
    Ok(CheckedRules {
        table: input.file.table.name.clone(),
        partitioned_by: input
            .file
            .partitioned_by
            .iter()
            .map(|i| i.name.clone())
            .collect(),
        statements,
    })
}

/// The kind of value a metric or threshold has, for comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Number,
    Text,
    Date,
    Timestamp,
    Bool,
    /// Unknown without a schema: compatible with everything.
    Any,
}

impl Kind {
    fn of_type(ty: &DataType) -> Option<Kind> {
        use DataType::*;
        Some(match ty {
            Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 | UInt64 | Float16 | Float32
            | Float64 | Decimal32(..) | Decimal64(..) | Decimal128(..) | Decimal256(..) => {
                Kind::Number
            }
            Utf8 | LargeUtf8 | Utf8View => Kind::Text,
            Date32 | Date64 => Kind::Date,
            Timestamp(..) => Kind::Timestamp,
            Boolean => Kind::Bool,
            Dictionary(_, v) => return Kind::of_type(v),
            _ => return None,
        })
    }

    fn of_value(v: &Value) -> Kind {
        match v {
            Value::Int(_) | Value::Float(_) | Value::Decimal { .. } => Kind::Number,
            Value::Text(_) => Kind::Text,
            Value::Date(_) => Kind::Date,
            Value::Timestamp { .. } => Kind::Timestamp,
            Value::Bool(_) => Kind::Bool,
            Value::Null => Kind::Any,
        }
    }

    fn compatible(self, other: Kind) -> bool {
        self == Kind::Any || other == Kind::Any || self == other
    }

    fn describe(self) -> &'static str {
        match self {
            Kind::Number => "a number",
            Kind::Text => "text",
            Kind::Date => "a date",
            Kind::Timestamp => "a timestamp",
            Kind::Bool => "a boolean",
            Kind::Any => "a value",
        }
    }
}

/// A `partitioned by` column with its type and run-key value.
struct PartitionKey {
    name: String,
    ty: DataType,
    value: Option<Value>,
}

struct Checker<'a> {
    input: &'a CheckInput<'a>,
    keys: Vec<PartitionKey>,
    diags: Vec<Diagnostic>,
}

impl PartitionLookup for Checker<'_> {
    fn lookup(&self, key: &str) -> Option<(DataType, Option<ScalarValue>)> {
        let k = self.keys.iter().find(|k| k.name == key)?;
        let value = k.value.as_ref().map(|v| {
            let s = crate::scalar::to_scalar(v);
            s.cast_to(&k.ty).unwrap_or(s)
        });
        Some((k.ty.clone(), value))
    }
}

impl<'a> Checker<'a> {
    fn new(input: &'a CheckInput<'a>) -> Self {
        let mut diags = Vec::new();
        let mut keys: Vec<PartitionKey> = Vec::new();
        for id in &input.file.partitioned_by {
            if keys.iter().any(|k| k.name == id.name) {
                diags.push(Diagnostic::new(
                    codes::DUPLICATE_NAME,
                    id.span,
                    format!("`{}` is named twice in `partitioned by`", id.name),
                ));
                continue;
            }
            let ty = input
                .schema
                .and_then(|s| s.field_with_name(&id.name).ok())
                .map_or(DataType::Utf8, |f| f.data_type().clone());
            let value = match input.run_key.and_then(|rk| rk.get(&id.name)) {
                None => None,
                Some(raw) => match crate::scalar::parse_as(raw, &ty) {
                    Ok(v) => Some(v),
                    Err(why) => {
                        diags.push(Diagnostic::new(
                            codes::RUN_KEY,
                            id.span,
                            format!(
                                "--partition {}={raw}: {why}, the type of column `{}`",
                                id.name, id.name
                            ),
                        ));
                        None
                    }
                },
            };
            keys.push(PartitionKey {
                name: id.name.clone(),
                ty,
                value,
            });
        }
        Checker { input, keys, diags }
    }

    fn error(&mut self, code: &'static str, span: Span, msg: String) {
        self.diags.push(Diagnostic::new(code, span, msg));
    }

    fn statement(&mut self, s: &ast::Statement) -> Option<CheckedStatement> {
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

    /// A metric and the kind of its value; `None` after reporting an error.
    fn metric(&mut self, m: &ast::Metric) -> (Option<Metric>, Kind) {
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
    fn column(&mut self, c: &Ident) -> Option<Option<DataType>> {
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

    fn keys(&mut self, keys: &[Ident]) -> Option<Vec<String>> {
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

    fn predicate(&mut self, p: &ast::Predicate) -> Option<Expr> {
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

    fn referenced_columns(&self, expr: &Expr) -> Vec<String> {
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

    fn values_filter(
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

    fn threshold(&mut self, cmp: &Comparison, kind: Kind, metric_span: Span) -> Option<Threshold> {
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

    fn operand(&mut self, e: &ValueExpr, metric_kind: Kind, metric_span: Span) -> Option<Operand> {
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

    fn text(&self, span: Span) -> &'a str {
        self.input.source.get(span.start..span.end).unwrap_or("")
    }

    fn value_expr(&mut self, e: &ValueExpr) -> Option<(ValueTree, Kind)> {
        match &e.kind {
            ValueKind::Literal(l) => match literal::literal_value(l) {
                Ok(v) => {
                    let k = Kind::of_value(&v);
                    Some((ValueTree::Const(v), k))
                }
                Err(msg) => {
                    self.error(codes::LITERAL, e.span, msg);
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

    fn require_number(&mut self, k: Kind, span: Span, op: &str) -> Option<()> {
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

/// The metric `duplicate_count` stands for under declared null semantics.
fn nulls_metric(keys: Vec<String>, nulls: ast::Nulls) -> Metric {
    match nulls {
        ast::Nulls::Distinct => Metric::DuplicateCount(keys),
        ast::Nulls::NotDistinct => Metric::DuplicateCountNullsEqual(keys),
    }
}

/// The key columns of a key metric.
fn key_columns(m: &Metric) -> Option<Vec<String>> {
    match m {
        Metric::DuplicateCount(k) | Metric::DuplicateCountNullsEqual(k) => Some(k.clone()),
        _ => None,
    }
}

fn zero() -> Threshold {
    Threshold::Op(
        CmpOp::Eq,
        Operand {
            tree: ValueTree::Const(Value::Int(0)),
            text: "0".into(),
        },
    )
}

fn sample_spec(m: &Metric, columns: Vec<String>) -> Option<SampleSpec> {
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

/// Whitespace outside single-quoted strings collapsed to single spaces.
pub fn collapse(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut in_string = false;
    let mut pending_space = false;
    for c in s.chars() {
        if !in_string && c.is_whitespace() {
            pending_space = true;
            continue;
        }
        if pending_space && !out.is_empty() {
            out.push(' ');
        }
        pending_space = false;
        if c == '\'' {
            in_string = !in_string;
        }
        out.push(c);
    }
    out
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
