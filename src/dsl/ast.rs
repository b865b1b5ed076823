//! The untyped syntax tree of a rule file, with spans for diagnostics.
//!
//! The parser produces it and nothing else mutates it; the checker reads it and
//! produces a typed rule set (see `check`). Column names are not resolved here.

use crate::diagnostic::Span;

/// A parsed rule file.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleFile {
    /// The `table NAME` header.
    pub table: Ident,
    /// The run-key columns of `partitioned by`, in order; empty when absent.
    pub partitioned_by: Vec<Ident>,
    pub statements: Vec<Statement>,
}

/// A name with where it was written. `quoted` is true for `"double quoted"`
/// column names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Ident {
    pub name: String,
    pub span: Span,
    pub quoted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    /// `check`: blocks the verdict when it does not hold.
    Check,
    /// `warn`: reported, never blocks.
    Warn,
}

/// One `check` / `warn` line (or several, while a parenthesis is open).
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub severity: Severity,
    pub assertion: Assertion,
    /// The text of `as '...'`, if given.
    pub label: Option<String>,
    /// The statement's source text without the severity word and without the
    /// `as` clause, comments removed, whitespace outside string literals
    /// collapsed to single spaces. The verdict names a check by this when it
    /// has no label.
    pub source_text: String,
    /// From the severity word to the end of the statement.
    pub span: Span,
}

/// What a statement asserts.
#[derive(Debug, Clone, PartialEq)]
pub enum Assertion {
    /// `METRIC CMP`, e.g. `null_rate(sku) < 0.5%`.
    Compare { metric: Metric, cmp: Comparison },
    /// `unique(k, ...)`
    Unique { keys: Vec<Ident>, span: Span },
    /// `primary_key(k, ...)`
    PrimaryKey { keys: Vec<Ident>, span: Span },
    /// `values(c) in (...)` or, with `negated`, `values(c) not in (...)`.
    Values {
        column: Ident,
        negated: bool,
        list: Vec<ValueExpr>,
        span: Span,
    },
    /// `all(P)`
    All { predicate: Predicate, span: Span },
}

/// A measurable quantity of a partition.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub kind: MetricKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum MetricKind {
    RowCount,
    NullCount(Ident),
    NullRate(Ident),
    DistinctCount(Ident),
    DuplicateCount(Vec<Ident>),
    Min(Ident),
    Max(Ident),
    Sum(Ident),
    Avg(Ident),
    CountWhere(Predicate),
    RateWhere(Predicate),
}

/// A SQL boolean expression, handed to DataFusion's SQL parser as is.
#[derive(Debug, Clone, PartialEq)]
pub struct Predicate {
    /// The source text between the parentheses (after `where` for
    /// `count`/`rate`), with `#` comments replaced by spaces so that byte
    /// offsets in `sql` map to `span.start + offset` in the file.
    pub sql: String,
    pub span: Span,
    /// Every `partition.KEY` reference inside the predicate, with the span of
    /// the whole `partition.KEY` text (absolute file offsets).
    pub partition_refs: Vec<(Ident, Span)>,
}

/// `CMP` of the grammar.
#[derive(Debug, Clone, PartialEq)]
pub enum Comparison {
    Op {
        op: CmpOp,
        rhs: ValueExpr,
    },
    /// Inclusive on both ends.
    Between {
        low: ValueExpr,
        high: ValueExpr,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `=` or `==`
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }
}

/// A threshold value: a literal, a reference, or arithmetic over them.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueExpr {
    pub kind: ValueKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ValueKind {
    Literal(Literal),
    /// `partition.KEY`
    PartitionRef(Ident),
    /// `published.METRIC`
    PublishedRef(Box<Metric>),
    /// Unary minus.
    Neg(Box<ValueExpr>),
    Binary {
        op: ArithOp,
        lhs: Box<ValueExpr>,
        rhs: Box<ValueExpr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Literal {
    /// A number as written, underscores removed (`1_000` → `"1000"`; `1e6`,
    /// `0.25` kept as text). `percent` is true for `2%`: the value is the
    /// number divided by 100.
    Number { text: String, percent: bool },
    /// `'text'`, with `''` already unescaped.
    String(String),
    /// `date '2025-03-05'`: the quoted text, unvalidated.
    Date(String),
    /// `timestamp '2025-03-05 12:00:00'`: the quoted text, unvalidated.
    Timestamp(String),
}
