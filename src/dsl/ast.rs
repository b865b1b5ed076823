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
    /// `reference NAME at 'PATH'` lines, in file order.
    pub references: Vec<Reference>,
    pub statements: Vec<Statement>,
}

/// `reference NAME at 'PATH'`: another table that `values(...) in NAME(...)`
/// looks keys up in. `PATH` is a published table root, a directory of
/// Parquet files or one Parquet file; a relative path is resolved against the
/// rule file's directory.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub name: Ident,
    /// The path as written (quotes removed, `''` unescaped).
    pub path: String,
    /// Where the quoted path was written.
    pub path_span: Span,
    /// From `reference` to the end of the line.
    pub span: Span,
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
    /// `unique(k, ...) nulls distinct` or `unique(k, ...) nulls not distinct`:
    /// `unique` with its null semantics declared.
    UniqueNulls {
        keys: Vec<Ident>,
        nulls: Nulls,
        span: Span,
    },
    /// `schema matches published`
    SchemaMatches { span: Span },
    /// `column c is TYPE [null | not null]`
    ColumnType {
        column: Ident,
        ty: TypeSpec,
        /// `Some(false)` for `not null`, `Some(true)` for `null`, `None` when
        /// nullability is not declared.
        nullable: Option<bool>,
        span: Span,
    },
    /// `values(c, ...) in NAME(r, ...)`: every staged key whose parts are all
    /// non-null occurs in the reference table `NAME`.
    InReference {
        columns: Vec<Ident>,
        reference: Ident,
        ref_columns: Vec<Ident>,
        span: Span,
    },
    /// `unique(k, ...) across published`: no staged key occurs in another
    /// published partition of the same table.
    UniqueAcrossPublished { keys: Vec<Ident>, span: Span },
}

/// How key checks treat a null key part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Nulls {
    /// `nulls distinct` (the v1 default): a key with a null part equals no
    /// other key, so such rows never duplicate anything.
    Distinct,
    /// `nulls not distinct`: a null key part is a value like any other.
    NotDistinct,
}

impl Nulls {
    /// `distinct` or `not distinct`, as written after `nulls`.
    pub fn as_str(self) -> &'static str {
        match self {
            Nulls::Distinct => "distinct",
            Nulls::NotDistinct => "not distinct",
        }
    }
}

/// A declared column type, as an analyst writes it (`decimal(12,2)`,
/// `timestamp(ms, 'UTC')`), already resolved to one of the known type names.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSpec {
    pub ty: DeclaredType,
    pub span: Span,
}

/// The types a `column ... is TYPE` declaration can name; see
/// `dsl::types` for the spellings of each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DeclaredType {
    Boolean,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    Decimal {
        precision: u8,
        scale: i8,
    },
    String,
    Binary,
    Date,
    Time,
    /// `unit` is one of `s`, `ms`, `us`, `ns` when given; `tz` the time zone
    /// when given.
    Timestamp {
        unit: Option<String>,
        tz: Option<String>,
    },
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
    /// `duplicate_count(k, ...) nulls [not] distinct`
    DuplicateCountNulls(Vec<Ident>, Nulls),
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
    /// `STAT(history(N).METRIC)`, e.g. `median(history(7).row_count)`.
    History {
        stat: HistoryStat,
        /// How many published partitions, at most.
        n: u32,
        metric: Box<Metric>,
    },
    /// Unary minus.
    Neg(Box<ValueExpr>),
    Binary {
        op: ArithOp,
        lhs: Box<ValueExpr>,
        rhs: Box<ValueExpr>,
    },
}

/// A statistic over a metric's values in earlier published partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HistoryStat {
    Avg,
    Median,
    Min,
    Max,
    /// The sample standard deviation (n - 1 in the denominator).
    Stddev,
}

impl HistoryStat {
    pub const ALL: [HistoryStat; 5] = [
        HistoryStat::Avg,
        HistoryStat::Median,
        HistoryStat::Min,
        HistoryStat::Max,
        HistoryStat::Stddev,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HistoryStat::Avg => "avg",
            HistoryStat::Median => "median",
            HistoryStat::Min => "min",
            HistoryStat::Max => "max",
            HistoryStat::Stddev => "stddev",
        }
    }

    pub fn from_name(name: &str) -> Option<HistoryStat> {
        HistoryStat::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

/// `+ - * /` between values; defined beside the arithmetic it names.
pub use crate::value::ArithOp;

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
