//! Tokens → [`RuleFile`], collecting every syntax error.
//!
//! A hand-written recursive-descent parser over the [`lexer`]'s tokens. Each
//! statement is parsed on its own: when it has an error, the error is recorded,
//! the rest of the statement (up to the next newline at parenthesis depth 0) is
//! skipped and parsing continues, so an analyst sees every error of a file at
//! once. SQL predicates are not parsed here: their source text is cut out
//! between the matching parentheses and handed on (DataFusion parses them).
//! Value expressions are the only recursive part; their nesting is capped at
//! [`MAX_DEPTH`] so that no input can overflow the stack.

use super::ast::{Ident, Reference, RuleFile};
use super::lexer::{self, Token, TokenKind};
use crate::diagnostic::{codes, line_col, Diagnostic, Span};

mod across;
mod metric;
mod names;
mod schema;
mod statement;
mod tokens;
mod value;

/// How deeply value expressions (parentheses, unary minus) may nest.
pub const MAX_DEPTH: usize = 64;

/// Metric names, usable in `METRIC CMP` and after `published.`.
const METRICS: [&str; 11] = [
    "row_count",
    "null_count",
    "null_rate",
    "distinct_count",
    "duplicate_count",
    "min",
    "max",
    "sum",
    "avg",
    "count",
    "rate",
];

/// Assertions that are not `METRIC CMP`.
const ASSERTIONS: [&str; 4] = ["unique", "primary_key", "values", "all"];

/// Schema assertions: `schema matches published`, `column c is TYPE`.
const SCHEMA_ASSERTIONS: [&str; 2] = ["schema", "column"];

/// The largest `N` of `history(N)`.
pub const MAX_HISTORY: u32 = 1000;

/// The reserved words (lower case); a column so named is written in double
/// quotes.
pub const KEYWORDS: [&str; 15] = [
    "table",
    "partitioned",
    "by",
    "check",
    "warn",
    "between",
    "and",
    "in",
    "not",
    "where",
    "as",
    "date",
    "timestamp",
    "partition",
    "published",
];

/// Parses a rule file. Returns the tree of what parsed (statements with errors
/// are left out) and every diagnostic found, in source order; the file is
/// valid only when the list is empty. A missing `table` header is reported and
/// leaves an empty table name.
///
/// ```
/// let (file, diags) = dqgate::dsl::parse("table t\ncheck row_count > 0\n");
/// assert!(diags.is_empty());
/// assert_eq!(file.table.name, "t");
/// assert_eq!(file.statements[0].source_text, "row_count > 0");
/// ```
pub fn parse(source: &str) -> (RuleFile, Vec<Diagnostic>) {
    let lexed = lexer::lex(source);
    let mut parser = Parser::new(source, lexed.tokens, lexed.comments);
    let file = parser.file();
    let mut diags = lexed.diagnostics;
    diags.append(&mut parser.diags);
    diags.sort_by_key(|d| d.span.start);
    (file, diags)
}

/// Collapses whitespace runs outside `'strings'` and `"names"` to one space
/// and trims the result; used for [`Statement::source_text`](super::ast::Statement::source_text).
pub fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut quote: Option<char> = None;
    let mut blank = false;
    for ch in text.chars() {
        if quote.is_none() && ch.is_whitespace() {
            blank = true;
            continue;
        }
        if blank && !out.is_empty() {
            out.push(' ');
        }
        blank = false;
        match quote {
            Some(q) if q == ch => quote = None,
            None if ch == '\'' || ch == '"' => quote = Some(ch),
            _ => {}
        }
        out.push(ch);
    }
    out
}

/// A statement cannot be parsed further. `reported` is false when the cause
/// was a lexical error that the lexer already reported.
struct Failed {
    reported: bool,
}

/// Failure on an [`TokenKind::Invalid`] token: already reported by the lexer.
const SILENT: Failed = Failed { reported: false };

type PResult<T> = Result<T, Failed>;

struct Parser<'a> {
    src: &'a str,
    toks: Vec<Token>,
    comments: Vec<Span>,
    pos: usize,
    /// Current value-expression nesting.
    depth: usize,
    /// Code for syntax errors: `HEADER` while parsing the header.
    code: &'static str,
    diags: Vec<Diagnostic>,
    table: Option<Ident>,
    partitioned_by: Vec<Ident>,
    references: Vec<Reference>,
    /// The `table` keyword, once seen.
    table_kw: Option<Span>,
    /// The first token of the first statement, when it came before `table`.
    early: Option<Span>,
}

// File and header.
impl<'a> Parser<'a> {
    fn new(src: &'a str, toks: Vec<Token>, comments: Vec<Span>) -> Self {
        Parser {
            src,
            toks,
            comments,
            pos: 0,
            depth: 0,
            code: codes::SYNTAX,
            diags: Vec::new(),
            table: None,
            partitioned_by: Vec::new(),
            references: Vec::new(),
            table_kw: None,
            early: None,
        }
    }

    fn file(&mut self) -> RuleFile {
        let mut statements = Vec::new();
        loop {
            self.skip_newlines();
            let tok = self.peek().clone();
            if tok.kind == TokenKind::Eof {
                break;
            } else if tok.is_word("table") {
                self.table_line();
            } else if tok.is_word("partitioned") {
                self.misplaced_partitioned(tok.span);
            } else if tok.is_word("reference") {
                self.reference_line();
            } else {
                if self.table_kw.is_none() && self.early.is_none() {
                    self.early = Some(tok.span);
                }
                let result = self.statement();
                statements.extend(self.recover(result));
            }
        }
        self.report_missing_header();
        RuleFile {
            table: self.table.take().unwrap_or_else(|| Ident {
                name: String::new(),
                span: Span::new(0, 0),
                quoted: false,
            }),
            partitioned_by: std::mem::take(&mut self.partitioned_by),
            references: std::mem::take(&mut self.references),
            statements,
        }
    }

    fn report_missing_header(&mut self) {
        if self.table_kw.is_some() {
            return;
        }
        let span = self.early.unwrap_or_default();
        let msg = if self.early.is_some() {
            "missing `table` header: a rule file starts with `table NAME`"
        } else {
            "empty rule file: expected `table NAME`"
        };
        self.diags.push(
            Diagnostic::new(codes::HEADER, span, msg)
                .with_help("name the checked table on the first line, e.g. `table daily_sales`"),
        );
    }

    fn table_line(&mut self) {
        let kw = self.peek().span;
        if let Some(first) = self.table_kw {
            let (line, _) = line_col(self.src, first.start);
            let d = Diagnostic::new(
                codes::HEADER,
                kw,
                format!("second `table` line: the table is already named on line {line}"),
            )
            .with_help("a rule file checks one table; put rules for another table in its own file");
            self.diags.push(d);
            return self.skip_statement();
        }
        self.table_kw = Some(kw);
        if let Some(first) = self.early {
            let d = Diagnostic::new(
                codes::HEADER,
                first,
                "statement before the `table` header: `table NAME` must come first",
            )
            .with_help("move the `table` line to the top of the file");
            self.diags.push(d);
        }
        self.code = codes::HEADER;
        let result = self.header();
        self.recover(result);
        self.code = codes::SYNTAX;
    }

    /// `table NAME [partitioned by ...]`, `partitioned by` possibly on the
    /// next line.
    fn header(&mut self) -> PResult<()> {
        self.bump();
        self.table = Some(self.name("a table name", "table")?);
        if self.peek().is_word("partitioned") {
            self.partitioned_by = self.partitioned()?;
            return self.expect_end("the `partitioned by` columns");
        }
        self.expect_end("the table name")?;
        self.skip_newlines();
        if self.peek().is_word("partitioned") {
            self.partitioned_by = self.partitioned()?;
            self.expect_end("the `partitioned by` columns")?;
        }
        Ok(())
    }

    /// `partitioned by col, ...`
    fn partitioned(&mut self) -> PResult<Vec<Ident>> {
        self.bump();
        if !self.peek().is_word("by") {
            return Err(self.expected("`by`", "partitioned"));
        }
        self.bump();
        self.names("partitioned by")
    }

    fn misplaced_partitioned(&mut self, span: Span) {
        let msg = if self.table_kw.is_some() {
            "`partitioned by` must directly follow the `table` line"
        } else {
            "`partitioned by` without a `table` line before it"
        };
        self.diags.push(
            Diagnostic::new(codes::HEADER, span, msg)
                .with_help("write `table NAME partitioned by KEY` at the top of the file"),
        );
        self.skip_statement();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dsl::ast::{
        ArithOp, Assertion, CmpOp, Comparison, Literal, Metric, MetricKind, Predicate, Severity,
        Statement, ValueExpr, ValueKind,
    };

    const EXAMPLE: &str = include_str!("../../rules/daily_sales.dq");

    fn ok(src: &str) -> RuleFile {
        let (file, diags) = parse(src);
        assert!(diags.is_empty(), "unexpected diagnostics: {diags:#?}");
        file
    }

    fn stmt(text: &str) -> Statement {
        ok(&format!("table t\n{text}\n")).statements.remove(0)
    }

    fn errors(src: &str) -> Vec<Diagnostic> {
        parse(src).1
    }

    /// The span of the first occurrence of `needle` in `src`.
    fn at(src: &str, needle: &str) -> Span {
        let start = src.find(needle).expect("needle in source");
        Span::new(start, start + needle.len())
    }

    fn ident(name: &str) -> String {
        name.to_string()
    }

    /// A span-free rendering of a value expression, fully parenthesized.
    fn sexp(v: &ValueExpr) -> String {
        match &v.kind {
            ValueKind::Literal(Literal::Number { text, percent }) => {
                format!("{text}{}", if *percent { "%" } else { "" })
            }
            ValueKind::Literal(Literal::String(s)) => format!("'{s}'"),
            ValueKind::Literal(Literal::Date(s)) => format!("date:{s}"),
            ValueKind::Literal(Literal::Timestamp(s)) => format!("ts:{s}"),
            ValueKind::PartitionRef(k) => format!("partition.{}", k.name),
            ValueKind::PublishedRef(m) => format!("published.{}", super::super::print::metric(m)),
            ValueKind::History { .. } => super::super::print::value(v),
            ValueKind::Neg(e) => format!("(neg {})", sexp(e)),
            ValueKind::Binary { op, lhs, rhs } => {
                let op = match op {
                    ArithOp::Add => "+",
                    ArithOp::Sub => "-",
                    ArithOp::Mul => "*",
                    ArithOp::Div => "/",
                };
                format!("({op} {} {})", sexp(lhs), sexp(rhs))
            }
        }
    }

    fn compare(s: &Statement) -> (&Metric, &Comparison) {
        match &s.assertion {
            Assertion::Compare { metric, cmp } => (metric, cmp),
            other => panic!("not a comparison: {other:?}"),
        }
    }

    /// The right-hand side of `METRIC OP value` as an s-expression.
    fn rhs(text: &str) -> String {
        let s = stmt(&format!("check row_count = {text}"));
        match compare(&s).1 {
            Comparison::Op { rhs, .. } => sexp(rhs),
            other => panic!("not an operator comparison: {other:?}"),
        }
    }

    fn predicate(s: &Statement) -> &Predicate {
        match &s.assertion {
            Assertion::All { predicate, .. } => predicate,
            Assertion::Compare { metric, .. } => match &metric.kind {
                MetricKind::CountWhere(p) | MetricKind::RateWhere(p) => p,
                other => panic!("no predicate: {other:?}"),
            },
            other => panic!("no predicate: {other:?}"),
        }
    }

    #[test]
    fn example_file_parses() {
        let file = ok(EXAMPLE);
        assert_eq!(file.table.name, "daily_sales");
        let table = at(EXAMPLE, "table daily_sales");
        assert_eq!(file.table.span, Span::new(table.start + 6, table.end));
        assert_eq!(file.partitioned_by.len(), 1);
        assert_eq!(file.partitioned_by[0].name, "sales_date");
        assert_eq!(file.statements.len(), 11);
        let texts: Vec<_> = file
            .statements
            .iter()
            .map(|s| s.source_text.as_str())
            .collect();
        assert_eq!(texts[0], "row_count between 1_000 and 50_000_000");
        assert_eq!(texts[8], "all(sales_date = partition.sales_date)");
        assert_eq!(texts[9], "row_count >= 0.5 * published.row_count");
        assert_eq!(file.statements[10].severity, Severity::Warn);
        assert_eq!(file.statements[9].label.as_deref(), Some("no sudden drop"));
        let last = &file.statements[9];
        let line = "check row_count >= 0.5 * published.row_count      as 'no sudden drop'";
        assert_eq!(last.span, at(EXAMPLE, line));
    }

    #[test]
    fn every_metric_form() {
        let cases = [
            ("row_count", "row_count"),
            ("null_count(a)", "null_count(a)"),
            ("null_rate(a)", "null_rate(a)"),
            ("distinct_count(a)", "distinct_count(a)"),
            ("duplicate_count(a, b)", "duplicate_count(a, b)"),
            ("min(a)", "min(a)"),
            ("max(a)", "max(a)"),
            ("sum(a)", "sum(a)"),
            ("avg(a)", "avg(a)"),
            ("count(where a > 0)", "count(where a > 0)"),
            ("rate(where a > 0)", "rate(where a > 0)"),
        ];
        for (text, printed) in cases {
            let src = format!("table t\ncheck {text} > 1\n");
            let s = ok(&src).statements.remove(0);
            let (metric, _) = compare(&s);
            assert_eq!(super::super::print::metric(metric), printed);
            assert_eq!(metric.span, at(&src, text), "{text}");
        }
    }

    #[test]
    fn metric_kinds_carry_columns() {
        let s = stmt("check duplicate_count(a, \"b c\") = 0");
        let MetricKind::DuplicateCount(keys) = &compare(&s).0.kind else {
            panic!("not duplicate_count");
        };
        assert_eq!(keys[0].name, "a");
        assert!(!keys[0].quoted);
        assert_eq!(keys[1].name, "b c");
        assert!(keys[1].quoted);
        let s = stmt("check avg(price) > 0");
        assert!(matches!(&compare(&s).0.kind, MetricKind::Avg(c) if c.name == "price"));
    }

    #[test]
    fn key_assertions() {
        let src = "table t\ncheck unique(a, b)\ncheck primary_key(\"x\")\n";
        let file = ok(src);
        let Assertion::Unique { keys, span } = &file.statements[0].assertion else {
            panic!("not unique");
        };
        assert_eq!(
            keys.iter().map(|k| k.name.clone()).collect::<Vec<_>>(),
            [ident("a"), ident("b")]
        );
        assert_eq!(*span, at(src, "unique(a, b)"));
        let Assertion::PrimaryKey { keys, .. } = &file.statements[1].assertion else {
            panic!("not primary_key");
        };
        assert!(keys[0].quoted);
    }

    #[test]
    fn values_in_and_not_in() {
        let src = "table t\ncheck values(c) in ('a', 'b''c', -1, 2.5)\n";
        let file = ok(src);
        let Assertion::Values {
            column,
            negated,
            list,
            span,
        } = &file.statements[0].assertion
        else {
            panic!("not values");
        };
        assert_eq!(column.name, "c");
        assert!(!negated);
        let items: Vec<_> = list.iter().map(sexp).collect();
        assert_eq!(items, ["'a'", "'b'c'", "(neg 1)", "2.5"]);
        assert_eq!(*span, at(src, "values(c) in ('a', 'b''c', -1, 2.5)"));
        let s = stmt("check values(c) not in ('x')");
        assert!(matches!(
            s.assertion,
            Assertion::Values { negated: true, .. }
        ));
    }

    #[test]
    fn all_predicate() {
        let src = "table t\ncheck all(a > 0)\n";
        let file = ok(src);
        let Assertion::All { predicate, span } = &file.statements[0].assertion else {
            panic!("not all");
        };
        assert_eq!(predicate.sql, "a > 0");
        assert_eq!(predicate.span, at(src, "a > 0"));
        assert_eq!(*span, at(src, "all(a > 0)"));
    }

    #[test]
    fn every_comparison() {
        let ops = [
            ("=", CmpOp::Eq),
            ("==", CmpOp::Eq),
            ("!=", CmpOp::Ne),
            ("<", CmpOp::Lt),
            ("<=", CmpOp::Le),
            (">", CmpOp::Gt),
            (">=", CmpOp::Ge),
        ];
        for (text, want) in ops {
            let s = stmt(&format!("check row_count {text} 5"));
            assert!(
                matches!(compare(&s).1, Comparison::Op { op, .. } if *op == want),
                "{text}"
            );
        }
        let s = stmt("check min(a) between -1 and 2 * 3");
        let Comparison::Between { low, high } = compare(&s).1 else {
            panic!("not between");
        };
        assert_eq!(
            (sexp(low), sexp(high)),
            (ident("(neg 1)"), ident("(* 2 3)"))
        );
    }

    #[test]
    fn arithmetic_precedence_and_associativity() {
        assert_eq!(rhs("1 + 2 * 3"), "(+ 1 (* 2 3))");
        assert_eq!(rhs("(1 + 2) * 3"), "(* (+ 1 2) 3)");
        assert_eq!(rhs("1 - 2 - 3"), "(- (- 1 2) 3)");
        assert_eq!(rhs("8 / 4 / 2"), "(/ (/ 8 4) 2)");
        assert_eq!(rhs("-2 * 3"), "(* (neg 2) 3)");
        assert_eq!(rhs("- -2"), "(neg (neg 2))");
        assert_eq!(rhs("1 - -2"), "(- 1 (neg 2))");
        assert_eq!(
            rhs("0.5 * published.row_count + partition.n"),
            "(+ (* 0.5 published.row_count) partition.n)"
        );
    }

    #[test]
    fn value_spans() {
        let src = "table t\ncheck row_count > (1 + 2) * 3\n";
        let s = ok(src).statements.remove(0);
        let Comparison::Op { rhs, .. } = compare(&s).1 else {
            panic!()
        };
        assert_eq!(rhs.span, at(src, "(1 + 2) * 3"));
    }

    #[test]
    fn numbers_and_percents() {
        assert_eq!(rhs("1_000_000"), "1000000");
        assert_eq!(rhs("1e6"), "1e6");
        assert_eq!(rhs("2.5E-3"), "2.5E-3");
        assert_eq!(rhs("2%"), "2%");
        assert_eq!(rhs("0.5%"), "0.5%");
        assert_eq!(rhs("-3"), "(neg 3)");
        let src = "table t\ncheck null_rate(a) < 0.5%\n";
        let s = ok(src).statements.remove(0);
        let Comparison::Op { rhs, .. } = compare(&s).1 else {
            panic!()
        };
        assert_eq!(rhs.span, at(src, "0.5%"));
    }

    #[test]
    fn typed_literals_and_references() {
        assert_eq!(rhs("date '2025-03-05'"), "date:2025-03-05");
        assert_eq!(
            rhs("timestamp '2025-03-05 12:00:00.250'"),
            "ts:2025-03-05 12:00:00.250"
        );
        assert_eq!(rhs("'O''Hara'"), "'O'Hara'");
        assert_eq!(rhs("partition.\"run date\""), "partition.run date");
        assert_eq!(rhs("published.null_rate(sku)"), "published.null_rate(sku)");
        assert_eq!(
            rhs("published.count(where x > 0)"),
            "published.count(where x > 0)"
        );
        let src = "table t\ncheck row_count = published.null_rate(sku)\n";
        let s = ok(src).statements.remove(0);
        let Comparison::Op { rhs, .. } = compare(&s).1 else {
            panic!()
        };
        let ValueKind::PublishedRef(m) = &rhs.kind else {
            panic!()
        };
        assert_eq!(rhs.span, at(src, "published.null_rate(sku)"));
        assert_eq!(m.span, at(src, "null_rate(sku)"));
    }

    #[test]
    fn quoted_identifiers() {
        let s = stmt(r#"check null_rate("order ""id""") = 0"#);
        let MetricKind::NullRate(c) = &compare(&s).0.kind else {
            panic!()
        };
        assert_eq!(c.name, "order \"id\"");
        assert!(c.quoted);
        let file = ok("table \"my table\" partitioned by \"a b\", c\n");
        assert!(file.table.quoted);
        assert_eq!(file.partitioned_by[0].name, "a b");
        assert_eq!(file.partitioned_by[1].name, "c");
    }

    #[test]
    fn labels_unescape_quotes() {
        let s = stmt("check row_count > 0 as 'it''s fine'");
        assert_eq!(s.label.as_deref(), Some("it's fine"));
        assert_eq!(s.source_text, "row_count > 0");
    }

    #[test]
    fn header_forms() {
        assert!(ok("table t\n").partitioned_by.is_empty());
        assert_eq!(ok("table t partitioned by a, b\n").partitioned_by.len(), 2);
        let f = ok("# c\n\ntable t # c\npartitioned by a # c\ncheck row_count > 0");
        assert_eq!(f.partitioned_by[0].name, "a");
        assert_eq!(f.statements.len(), 1);
        assert!(
            ok("\r\ntable t\r\npartitioned by a\r\ncheck row_count > 0\r\n")
                .statements
                .len()
                == 1
        );
    }

    #[test]
    fn multi_line_statement_with_comments() {
        let src = "table t\ncheck count(where   # rows that matter\n    amount > 0  # positive\n    and currency = 'EUR'\n) <= 10   as 'x'  # trailing\ncheck row_count > 0\n";
        let file = ok(src);
        assert_eq!(file.statements.len(), 2);
        let s = &file.statements[0];
        assert_eq!(
            s.source_text,
            "count(where amount > 0 and currency = 'EUR' ) <= 10"
        );
        let p = predicate(s);
        assert_eq!(p.sql, "amount > 0            \n    and currency = 'EUR'");
        assert_eq!(p.span.end - p.span.start, p.sql.len());
        assert_eq!(&src[p.span.start..p.span.start + 6], "amount");
        let end = src.find("'x'").unwrap() + 3;
        assert_eq!(s.span, Span::new(at(src, "check count").start, end));
    }

    #[test]
    fn predicate_with_nested_parens_strings_and_hash() {
        let src = "table t\ncheck all((a + (b)) > 0 and c <> ')#(' and \"x)\" is not null) # real comment\n";
        let s = ok(src).statements.remove(0);
        let p = predicate(&s);
        assert_eq!(p.sql, "(a + (b)) > 0 and c <> ')#(' and \"x)\" is not null");
        assert_eq!(p.span, at(src, &p.sql));
        assert_eq!(
            s.source_text,
            "all((a + (b)) > 0 and c <> ')#(' and \"x)\" is not null)"
        );
    }

    #[test]
    fn predicate_with_sql_only_characters() {
        let s = stmt("check all(a::int || 'x' ~ '[0-9]+' and b[1] != 2; @x !)");
        assert_eq!(
            predicate(&s).sql,
            "a::int || 'x' ~ '[0-9]+' and b[1] != 2; @x !"
        );
    }

    #[test]
    fn predicate_partition_refs() {
        let src = "table t\ncheck rate(where d = partition.d or e = partition . \"E\" or partition.x > 0) > 0\n";
        let s = ok(src).statements.remove(0);
        let refs = &predicate(&s).partition_refs;
        assert_eq!(refs.len(), 3);
        assert_eq!(refs[0].0.name, "d");
        assert_eq!(
            refs[0].0.span,
            Span::new(at(src, "partition.d").end - 1, at(src, "partition.d").end)
        );
        assert_eq!(refs[0].1, at(src, "partition.d"));
        assert_eq!(refs[1].0.name, "E");
        assert!(refs[1].0.quoted);
        assert_eq!(refs[1].1, at(src, "partition . \"E\""));
        assert_eq!(refs[2].1, at(src, "partition.x"));
    }

    #[test]
    fn source_text_collapses_whitespace_outside_strings() {
        let s = stmt("check   null_rate(customer_id) <  2%   as 'x'  # c");
        assert_eq!(s.source_text, "null_rate(customer_id) < 2%");
        let s = stmt("check values( c )  in ( 'a  b' ,\t'c' )");
        assert_eq!(s.source_text, "values( c ) in ( 'a  b' , 'c' )");
        assert_eq!(collapse_whitespace("  a \"x  y\"\n b  "), "a \"x  y\" b");
    }

    #[test]
    fn keywords_are_lower_case() {
        let src = "table t\nCheck row_count > 0\n";
        let d = errors(src);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].span, at(src, "Check"));
        assert!(
            d[0].message.contains("expected `check` or `warn`"),
            "{}",
            d[0].message
        );
        assert_eq!(
            d[0].help.as_deref(),
            Some("keywords are lower case: write `check`")
        );
    }

    #[test]
    fn unknown_metric_suggests_nearest() {
        let src = "table t\ncheck nul_rate(sku) < 1%\n";
        let d = errors(src);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].span, at(src, "nul_rate"));
        assert_eq!(d[0].help.as_deref(), Some("did you mean `null_rate`?"));
        let d = errors("table t\ncheck row_count > published.unique(a)\n");
        assert!(d[0].message.contains("expected a metric"));
        assert_eq!(
            d[0].help.as_deref(),
            Some("`unique` is an assertion, not a metric")
        );
        let d = errors("table t\ncheck row_count > published.nul_count(a)\n");
        assert_eq!(d[0].help.as_deref(), Some("did you mean `null_count`?"));
    }

    #[test]
    fn missing_comparison_message() {
        let src = "table t\ncheck null_rate(sku)\n";
        let d = errors(src);
        assert_eq!(
            d[0].message,
            "expected a comparison (`=`, `<`, `between` ...) after `null_rate(sku)`, found end of line"
        );
        assert_eq!(d[0].span, Span::new(src.len() - 1, src.len()));
        assert_eq!(d[0].code, codes::SYNTAX);
        let d = errors("table t\ncheck row_count <> 0\n");
        assert_eq!(d[0].help.as_deref(), Some("write `!=` for \"not equal\""));
        assert_eq!(d[0].code, codes::LEX);
    }

    #[test]
    fn percent_errors() {
        let src = "table t\ncheck row_count > partition.n%\n";
        let d = errors(src);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].message, "`%` can only follow a number");
        assert_eq!(d[0].span, at(src, "%"));
        let d = errors("table t\ncheck null_rate(a) < 2 %\n");
        assert_eq!(d[0].message, "`%` must directly follow the number");
        let d = errors("table t\ncheck null_rate(a) < 2%%\n");
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn values_errors() {
        let src = "table t\ncheck values(c) = 1\nwarn values(c) not in ()\n";
        let d = errors(src);
        assert_eq!(
            d[0].message,
            "expected `in` or `not in` after `values(c)`, found `=`"
        );
        assert_eq!(
            d[1].message,
            "empty value list: expected at least one value after `in (`"
        );
        assert_eq!(d[1].span.start, at(src, ")\n").start);
    }

    #[test]
    fn between_without_and() {
        let src = "table t\ncheck row_count between 1 or 5\n";
        let d = errors(src);
        assert_eq!(d[0].message, "expected `and` after `between 1`, found `or`");
        assert_eq!(d[0].span, at(src, "or"));
    }

    #[test]
    fn missing_close_paren() {
        let src = "table t\ncheck null_rate(a < 2%\ncheck row_count > 0\n";
        let (file, d) = parse(src);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert_eq!(
            d[0].message,
            "expected `)` to close `null_rate(` after `a`, found `<`"
        );
        assert_eq!(d[0].span, at(src, "<"));
        assert_eq!(
            d[0].help.as_deref(),
            Some("the `(` at line 2, column 16 is not closed")
        );
        assert_eq!(file.statements.len(), 1, "the next statement is recovered");
    }

    #[test]
    fn unclosed_predicate_reports_once_and_recovers() {
        let src = "table t\ncheck all(a > (0\ncheck row_count > 0\n";
        let (file, d) = parse(src);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert!(
            d[0].message.contains("found end of line"),
            "{}",
            d[0].message
        );
        assert_eq!(file.statements.len(), 1);
    }

    #[test]
    fn trailing_tokens() {
        let src = "table t\ncheck unique(a) = 0\n";
        let d = errors(src);
        assert_eq!(
            d[0].message,
            "expected end of line after `unique(a)`, found `=`"
        );
        assert_eq!(d[0].span, at(src, "="));
        let d = errors("table t extra\n");
        assert_eq!(d[0].code, codes::HEADER);
        assert_eq!(
            d[0].message,
            "expected end of line after `the table name`, found `extra`"
        );
    }

    #[test]
    fn header_errors() {
        let src = "check row_count > 0\n";
        let (file, d) = parse(src);
        assert_eq!(file.table.name, "");
        assert_eq!(file.statements.len(), 1);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, codes::HEADER);
        assert_eq!(d[0].span, at(src, "check"));

        let src = "table a\ncheck row_count > 0\ntable b\n";
        let d = errors(src);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, codes::HEADER);
        assert!(d[0].message.contains("already named on line 1"));
        assert_eq!(d[0].span.start, src.rfind("table").unwrap());

        let src = "# c\ncheck row_count > 0\ntable a\n";
        let (file, d) = parse(src);
        assert_eq!(file.table.name, "a");
        assert_eq!(d.len(), 1);
        assert!(d[0].message.contains("before the `table` header"));

        let d = errors("table t\ncheck row_count > 0\npartitioned by d\n");
        assert!(d[0].message.contains("must directly follow"));
        let d = errors("table\n");
        assert_eq!(
            d[0].message,
            "expected a table name after `table`, found end of line"
        );
        let d = errors("table t partitioned d\n");
        assert_eq!(d[0].message, "expected `by` after `partitioned`, found `d`");
        let d = errors("");
        assert_eq!(d[0].code, codes::HEADER);
    }

    #[test]
    fn empty_predicate_and_missing_where() {
        let src = "table t\ncheck all( # nothing\n)\ncheck count(amount > 0) < 1\n";
        let d = errors(src);
        assert_eq!(d.len(), 2, "{d:#?}");
        assert!(d[0]
            .message
            .starts_with("expected a SQL condition after `all(`"));
        assert_eq!(
            d[1].message,
            "expected `where` after `count(`, found `amount`"
        );
    }

    #[test]
    fn several_errors_in_one_file() {
        let src = "table t\n\
            check nul_rate(a) < 1%\n\
            check row_count > 0\n\
            check min(a) >= 'x\n\
            warn values(c) in ()\n\
            check row_count between 1\n\
            chek row_count > 0\n\
            check max(a) < 1 as 'ok'\n";
        let (file, d) = parse(src);
        let spans: Vec<_> = d.iter().map(|d| &src[d.span.start..d.span.end]).collect();
        assert_eq!(spans, ["nul_rate", "'x", ")", "\n", "chek"], "{d:#?}");
        assert_eq!(d[1].code, codes::UNTERMINATED);
        assert_eq!(file.statements.len(), 2);
        assert_eq!(file.statements[1].label.as_deref(), Some("ok"));
    }

    #[test]
    fn lexical_errors_are_reported_once() {
        let cases = [
            "table t\n'abc\n",
            "table t\ncheck 'abc\n",
            "table t\ncheck row_count > published.\"x\n",
            "table t\ncheck row_count > 'x\n",
            "table t\ncheck row_count > 1 as 'x\n",
            "table t\ncheck row_count > date 'x\n",
            "table t\ncheck all(a = 'x)\n",
        ];
        for src in cases {
            let d = errors(src);
            assert_eq!(d.len(), 1, "{src:?}: {d:#?}");
            assert_eq!(d[0].code, codes::UNTERMINATED);
            assert_eq!(
                d[0].help.as_deref().map(|h| h.starts_with("close it")),
                Some(true)
            );
        }
    }

    #[test]
    fn crlf_error_at_end_of_line() {
        let src = "table t\r\ncheck null_rate(a)\r\n";
        let d = errors(src);
        assert_eq!(d[0].span, Span::new(src.len() - 2, src.len()));
    }

    #[test]
    fn deep_nesting_is_capped() {
        let src = format!(
            "table t\ncheck row_count > {}1{}\n",
            "(".repeat(200),
            ")".repeat(200)
        );
        let d = errors(&src);
        assert_eq!(d.len(), 1);
        assert!(d[0].message.contains("nested too deeply"));
        let src = format!("table t\ncheck row_count > {}1\n", "-".repeat(100_000));
        assert_eq!(errors(&src).len(), 1);
        let ok_depth = format!(
            "table t\ncheck row_count > {}1{}\n",
            "(".repeat(30),
            ")".repeat(30)
        );
        ok(&ok_depth);
    }

    #[test]
    fn no_panic_on_nasty_inputs() {
        let open = "(".repeat(100_000);
        let nasty = [
            String::new(),
            "# only a comment".into(),
            "\n\n\r\n".into(),
            "table".into(),
            "table t\ncheck".into(),
            "table t\ncheck all(".into(),
            "table t\ncheck all())))".into(),
            "table t\ncheck row_count > ((1\n".into(),
            "table t\ncheck values(c) in ('a".into(),
            "table t\ncheck null_rate(\"x".into(),
            format!("table t\ncheck all({open}"),
            format!("table t\ncheck row_count > {open}"),
            open.clone(),
            ")".repeat(1000),
            "table é\ncheck 名前(ü) ≥ 1 % ’\u{0}\u{7f}\u{feff}".into(),
            "table t\ncheck row_count > 1e\ncheck row_count > 1_\ncheck row_count > .5\n".into(),
            "'\"'\"".into(),
            "%%%%====!!!!<<>>".into(),
        ];
        for src in &nasty {
            let (_, d) = parse(src);
            for diag in &d {
                assert!(diag.span.start <= diag.span.end && diag.span.end <= src.len());
            }
        }
    }

    #[test]
    fn pseudo_random_inputs_never_panic() {
        let pieces = [
            "table",
            "t",
            "check",
            "warn",
            "(",
            ")",
            "'",
            "\"",
            "#",
            "\n",
            "\r\n",
            " ",
            "%",
            "1",
            "2.5e-3",
            "all",
            "count",
            "where",
            "partition",
            ".",
            "published",
            "between",
            "and",
            "values",
            "in",
            "not",
            "as",
            ",",
            "-",
            "*",
            "é",
            "null_rate",
            "<",
            ">=",
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..2000 {
            let mut src = String::new();
            for _ in 0..(seed % 40) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                src.push_str(pieces[(seed % pieces.len() as u64) as usize]);
            }
            let (_, d) = parse(&src);
            assert!(d.iter().all(|d| d.span.end <= src.len()), "{src:?}");
        }
    }
}
