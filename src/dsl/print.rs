//! [`RuleFile`] → rule-language text, the inverse of [`parse`](super::parse).
//!
//! The printed text parses back to the same tree except for spans and
//! [`Statement::source_text`] (which follows the printed layout):
//! `normalized(parse(print(f))) == normalized(f)` for every file `f` the parser
//! produced. Layout is canonical (one space around operators, `, ` between list
//! items, minimal parentheses), so printing is also a formatter. Predicates are
//! printed as their `sql` text.

use std::fmt::Write as _;

use super::ast::{
    ArithOp, Assertion, Comparison, Ident, Literal, Metric, MetricKind, Predicate, RuleFile,
    Severity, Statement, ValueExpr, ValueKind,
};
use super::parser::collapse_whitespace;
use crate::diagnostic::Span;

/// Prints a rule file: the header, then one statement per line.
///
/// ```
/// let src = "table t  partitioned by d\ncheck   null_rate(x)<2%  as 'few'\n";
/// let (file, _) = dqgate::dsl::parse(src);
/// assert_eq!(
///     dqgate::dsl::print::print(&file),
///     "table t\npartitioned by d\n\ncheck null_rate(x) < 2% as 'few'\n"
/// );
/// ```
pub fn print(file: &RuleFile) -> String {
    let mut out = format!("table {}\n", ident(&file.table));
    if !file.partitioned_by.is_empty() {
        let keys: Vec<_> = file.partitioned_by.iter().map(ident).collect();
        let _ = writeln!(out, "partitioned by {}", keys.join(", "));
    }
    for r in &file.references {
        let _ = writeln!(out, "reference {} at {}", ident(&r.name), string(&r.path));
    }
    if !file.statements.is_empty() {
        out.push('\n');
    }
    for s in &file.statements {
        out.push_str(&statement(s));
        out.push('\n');
    }
    out
}

/// One statement, without a line break.
pub fn statement(s: &Statement) -> String {
    let severity = match s.severity {
        Severity::Check => "check",
        Severity::Warn => "warn",
    };
    let mut out = format!("{severity} {}", assertion(&s.assertion));
    if let Some(label) = &s.label {
        let _ = write!(out, " as {}", string(label));
    }
    out
}

/// An assertion as written after the severity word.
pub fn assertion(a: &Assertion) -> String {
    match a {
        Assertion::Compare { metric: m, cmp } => format!("{} {}", metric(m), comparison(cmp)),
        Assertion::Unique { keys, .. } => format!("unique({})", idents(keys)),
        Assertion::PrimaryKey { keys, .. } => format!("primary_key({})", idents(keys)),
        Assertion::Values {
            column,
            negated,
            list,
            ..
        } => {
            let items: Vec<_> = list.iter().map(value).collect();
            let not = if *negated { "not " } else { "" };
            format!("values({}) {not}in ({})", ident(column), items.join(", "))
        }
        Assertion::All { predicate, .. } => format!("all({})", predicate.sql),
        Assertion::UniqueNulls { keys, nulls, .. } => {
            format!("unique({}) nulls {}", idents(keys), nulls.as_str())
        }
        Assertion::SchemaMatches { .. } => "schema matches published".into(),
        Assertion::ColumnType {
            column,
            ty,
            nullable,
            ..
        } => {
            let null = match nullable {
                None => "",
                Some(true) => " null",
                Some(false) => " not null",
            };
            format!(
                "column {} is {}{null}",
                ident(column),
                super::types::canonical(&ty.ty)
            )
        }
        Assertion::InReference {
            columns,
            reference,
            ref_columns,
            ..
        } => format!(
            "values({}) in {}({})",
            idents(columns),
            ident(reference),
            idents(ref_columns)
        ),
        Assertion::UniqueAcrossPublished { keys, .. } => {
            format!("unique({}) across published", idents(keys))
        }
    }
}

/// A metric, e.g. `null_rate(sku)` or `count(where x > 0)`.
pub fn metric(m: &Metric) -> String {
    let one = |name: &str, c: &Ident| format!("{name}({})", ident(c));
    match &m.kind {
        MetricKind::RowCount => "row_count".into(),
        MetricKind::NullCount(c) => one("null_count", c),
        MetricKind::NullRate(c) => one("null_rate", c),
        MetricKind::DistinctCount(c) => one("distinct_count", c),
        MetricKind::DuplicateCount(keys) => format!("duplicate_count({})", idents(keys)),
        MetricKind::Min(c) => one("min", c),
        MetricKind::Max(c) => one("max", c),
        MetricKind::Sum(c) => one("sum", c),
        MetricKind::Avg(c) => one("avg", c),
        MetricKind::CountWhere(p) => format!("count(where {})", p.sql),
        MetricKind::RateWhere(p) => format!("rate(where {})", p.sql),
        MetricKind::DuplicateCountNulls(keys, nulls) => {
            format!("duplicate_count({}) nulls {}", idents(keys), nulls.as_str())
        }
    }
}

fn comparison(c: &Comparison) -> String {
    match c {
        Comparison::Op { op, rhs } => format!("{} {}", op.symbol(), value(rhs)),
        Comparison::Between { low, high } => {
            format!("between {} and {}", value(low), value(high))
        }
    }
}

/// A value expression with the fewest parentheses that keep its shape.
pub fn value(v: &ValueExpr) -> String {
    match &v.kind {
        ValueKind::Literal(l) => literal(l),
        ValueKind::PartitionRef(key) => format!("partition.{}", ident(key)),
        ValueKind::PublishedRef(m) => format!("published.{}", metric(m)),
        ValueKind::History { stat, n, metric: m } => {
            format!("{}(history({n}).{})", stat.as_str(), metric(m))
        }
        ValueKind::Neg(inner) => {
            // `- -x`, not `-(-x)`: parentheses would count as nesting levels
            // and a chain that parsed could exceed the depth limit when
            // printed (found by the fuzzer).
            if matches!(inner.kind, ValueKind::Neg(_)) {
                format!("- {}", value(inner))
            } else {
                format!("-{}", parenthesized(inner, precedence(inner) < 3))
            }
        }
        ValueKind::Binary { op, lhs, rhs } => {
            let p = op_precedence(*op);
            let l = parenthesized(lhs, precedence(lhs) < p);
            let r = parenthesized(rhs, precedence(rhs) <= p);
            format!("{l} {} {r}", op_symbol(*op))
        }
    }
}

fn parenthesized(v: &ValueExpr, wrap: bool) -> String {
    if wrap {
        format!("({})", value(v))
    } else {
        value(v)
    }
}

fn precedence(v: &ValueExpr) -> u8 {
    match &v.kind {
        ValueKind::Binary { op, .. } => op_precedence(*op),
        ValueKind::Neg(_) => 3,
        _ => 4,
    }
}

fn op_precedence(op: ArithOp) -> u8 {
    match op {
        ArithOp::Add | ArithOp::Sub => 1,
        ArithOp::Mul | ArithOp::Div => 2,
    }
}

fn op_symbol(op: ArithOp) -> &'static str {
    match op {
        ArithOp::Add => "+",
        ArithOp::Sub => "-",
        ArithOp::Mul => "*",
        ArithOp::Div => "/",
    }
}

fn literal(l: &Literal) -> String {
    match l {
        Literal::Number { text, percent } => {
            format!("{text}{}", if *percent { "%" } else { "" })
        }
        Literal::String(s) => string(s),
        Literal::Date(s) => format!("date {}", string(s)),
        Literal::Timestamp(s) => format!("timestamp {}", string(s)),
    }
}

/// `'text'` with `'` doubled.
fn string(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// A name, in double quotes when it was quoted or is not a plain identifier.
fn ident(i: &Ident) -> String {
    if i.quoted || !is_plain(&i.name) {
        format!("\"{}\"", i.name.replace('"', "\"\""))
    } else {
        i.name.clone()
    }
}

/// Whether `name` is a plain identifier, `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_plain(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn idents(ids: &[Ident]) -> String {
    ids.iter().map(ident).collect::<Vec<_>>().join(", ")
}

/// A copy with every span set to `Span::default()` and each `source_text`
/// replaced by the canonical printed assertion (whitespace collapsed), for
/// comparing trees that differ only in layout.
pub fn normalized(file: &RuleFile) -> RuleFile {
    let mut f = file.clone();
    f.table.span = Span::default();
    f.partitioned_by
        .iter_mut()
        .for_each(|k| k.span = Span::default());
    for r in &mut f.references {
        r.name.span = Span::default();
        r.path_span = Span::default();
        r.span = Span::default();
    }
    for s in &mut f.statements {
        s.span = Span::default();
        clear_assertion(&mut s.assertion);
        s.source_text = collapse_whitespace(&assertion(&s.assertion));
    }
    f
}

fn clear_assertion(a: &mut Assertion) {
    match a {
        Assertion::Compare { metric, cmp } => {
            clear_metric(metric);
            match cmp {
                Comparison::Op { rhs, .. } => clear_value(rhs),
                Comparison::Between { low, high } => {
                    clear_value(low);
                    clear_value(high);
                }
            }
        }
        Assertion::Unique { keys, span }
        | Assertion::PrimaryKey { keys, span }
        | Assertion::UniqueAcrossPublished { keys, span } => {
            *span = Span::default();
            keys.iter_mut().for_each(|k| k.span = Span::default());
        }
        Assertion::InReference {
            columns,
            reference,
            ref_columns,
            span,
        } => {
            *span = Span::default();
            reference.span = Span::default();
            columns
                .iter_mut()
                .chain(ref_columns.iter_mut())
                .for_each(|k| k.span = Span::default());
        }
        Assertion::Values {
            column, list, span, ..
        } => {
            *span = Span::default();
            column.span = Span::default();
            list.iter_mut().for_each(clear_value);
        }
        Assertion::All { predicate, span } => {
            *span = Span::default();
            clear_predicate(predicate);
        }
        Assertion::UniqueNulls { keys, span, .. } => {
            *span = Span::default();
            keys.iter_mut().for_each(|k| k.span = Span::default());
        }
        Assertion::SchemaMatches { span } => *span = Span::default(),
        Assertion::ColumnType {
            column, ty, span, ..
        } => {
            *span = Span::default();
            column.span = Span::default();
            ty.span = Span::default();
        }
    }
}

fn clear_metric(m: &mut Metric) {
    m.span = Span::default();
    match &mut m.kind {
        MetricKind::RowCount => {}
        MetricKind::NullCount(c)
        | MetricKind::NullRate(c)
        | MetricKind::DistinctCount(c)
        | MetricKind::Min(c)
        | MetricKind::Max(c)
        | MetricKind::Sum(c)
        | MetricKind::Avg(c) => c.span = Span::default(),
        MetricKind::DuplicateCount(keys) | MetricKind::DuplicateCountNulls(keys, _) => {
            keys.iter_mut().for_each(|k| k.span = Span::default());
        }
        MetricKind::CountWhere(p) | MetricKind::RateWhere(p) => clear_predicate(p),
    }
}

fn clear_predicate(p: &mut Predicate) {
    p.span = Span::default();
    for (key, span) in &mut p.partition_refs {
        key.span = Span::default();
        *span = Span::default();
    }
}

/// Iterative, so deep trees cannot overflow the stack here either.
fn clear_value(v: &mut ValueExpr) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        v.span = Span::default();
        match &mut v.kind {
            ValueKind::Literal(_) => {}
            ValueKind::PartitionRef(key) => key.span = Span::default(),
            ValueKind::PublishedRef(m) | ValueKind::History { metric: m, .. } => clear_metric(m),
            ValueKind::Neg(inner) => stack.push(inner),
            ValueKind::Binary { lhs, rhs, .. } => {
                stack.push(lhs);
                stack.push(rhs);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::parse;

    const FILES: [&str; 4] = [
        include_str!("../../rules/daily_sales.dq"),
        "table \"Web Events\" partitioned by \"event day\", region
check distinct_count(\"user id\") > published.distinct_count(\"user id\") * (1 - 10%)
check duplicate_count(event_id, \"user id\") == 0 as 'no ''dupes'''
warn max(ts) <= timestamp '2025-03-05 12:00:00.250' + 0
check min(\"event day\") >= date '2025-01-01'
check values(kind) not in ('test', 'O''Hara', -1, 2.5e-3)
check rate(where
    kind = 'click'   # clicks only
    and (region <> ')' or region is null)  # paren in a string
  ) between published.rate(where kind = 'click') - 5% and 1
check all(length(\"user id\") > 0 and \"event day\" = partition.\"event day\")
",
        "table t
check sum(x) != -(-3)
check avg(x) > - -2
check sum(x) < (1 - 2) - (3 - 4) * 5 / (6 / 7)
check avg(x) = -(1 + 2) * -3
check count(where a::int || 'x' ~ '[#]' and b[1] != 2) >= partition.n
warn null_count(y) <= published.null_count(y) + 100
",
        "\r\ntable crlf\r\npartitioned by d\r\ncheck row_count > 0 # c\r\ncheck all(d = partition.d # c\r\n  and e > 1)\r\n",
    ];

    #[test]
    fn parse_print_parse_round_trips() {
        for src in FILES {
            let (first, diags) = parse(src);
            assert!(diags.is_empty(), "{src}\n{diags:#?}");
            let printed = print(&first);
            let (second, diags) = parse(&printed);
            assert!(diags.is_empty(), "{printed}\n{diags:#?}");
            assert_eq!(normalized(&second), normalized(&first), "{printed}");
            assert_eq!(print(&second), printed, "printing is idempotent");
        }
    }

    #[test]
    fn printed_text_is_its_own_source_text() {
        for src in FILES {
            let (again, _) = parse(&print(&parse(src).0));
            let norm = normalized(&again);
            for (n, s) in norm.statements.iter().zip(&again.statements) {
                assert_eq!(n.source_text, s.source_text);
            }
        }
    }

    #[test]
    fn prints_canonical_layout() {
        let (file, _) = parse(FILES[0]);
        let printed = print(&file);
        let want = "table daily_sales
partitioned by sales_date

check row_count between 1000 and 50000000
check null_rate(store_id) = 0
check null_rate(customer_id) < 2%
check primary_key(sales_date, store_id, order_id)
check unique(order_id)
check min(amount) >= 0
check values(currency) in ('EUR', 'USD', 'GBP')
check count(where amount > 100000) <= 10
check all(sales_date = partition.sales_date) as 'rows belong to the run key'
check row_count >= 0.5 * published.row_count as 'no sudden drop'
warn null_rate(sku) < 0.5%
";
        assert_eq!(printed, want);
    }

    #[test]
    fn minimal_parentheses() {
        let cases = [
            ("1 + 2 * 3", "1 + 2 * 3"),
            ("(1 + 2) * 3", "(1 + 2) * 3"),
            ("1 - (2 - 3)", "1 - (2 - 3)"),
            ("(1 - 2) - 3", "1 - 2 - 3"),
            ("8 / (4 * 2)", "8 / (4 * 2)"),
            ("-(1 + 2)", "-(1 + 2)"),
            ("-(-1)", "- -1"),
            ("- -1", "- -1"),
            ("-1 * 2", "-1 * 2"),
            ("((partition.x))", "partition.x"),
        ];
        for (text, want) in cases {
            let (file, d) = parse(&format!("table t\ncheck row_count = {text}\n"));
            assert!(d.is_empty(), "{d:?}");
            let Assertion::Compare {
                cmp: Comparison::Op { rhs, .. },
                ..
            } = &file.statements[0].assertion
            else {
                panic!("not a comparison");
            };
            assert_eq!(value(rhs), want, "{text}");
        }
    }

    #[test]
    fn names_that_need_quotes_are_quoted() {
        let id = |name: &str, quoted| Ident {
            name: name.into(),
            span: Span::default(),
            quoted,
        };
        assert_eq!(ident(&id("a_1", false)), "a_1");
        assert_eq!(ident(&id("a_1", true)), "\"a_1\"");
        assert_eq!(ident(&id("order id", false)), "\"order id\"");
        assert_eq!(ident(&id("say \"hi\"", true)), "\"say \"\"hi\"\"\"");
        assert_eq!(string("O'Hara"), "'O''Hara'");
    }

    #[test]
    fn normalized_clears_every_span() {
        let (file, _) = parse(FILES[1]);
        let debug = format!("{:?}", normalized(&file));
        let spans = debug.matches("Span {").count();
        let empty = debug.matches("Span { start: 0, end: 0 }").count();
        assert!(spans > 20);
        assert_eq!(spans, empty);
    }
}
