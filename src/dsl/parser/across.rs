//! The parts of the grammar that look beyond the staged partition:
//! `reference NAME at 'PATH'` header lines, `values(c, ...) in NAME(r, ...)`
//! and `unique(k, ...) across published`.

use super::{PResult, Parser, SILENT};
use crate::diagnostic::{codes, Diagnostic, Span};
use crate::dsl::ast::{Assertion, Ident, Reference};
use crate::dsl::lexer::TokenKind;

impl Parser<'_> {
    /// A `reference` line; recorded when it parses, skipped otherwise.
    pub(super) fn reference_line(&mut self) {
        let kw = self.peek().span;
        if self.table_kw.is_none() && self.early.is_none() {
            self.early = Some(kw);
        }
        self.code = codes::HEADER;
        let result = self.reference();
        self.code = codes::SYNTAX;
        if let Some(r) = self.recover(result) {
            self.references.push(r);
        }
    }

    /// `reference NAME at 'PATH'`
    fn reference(&mut self) -> PResult<Reference> {
        let start = self.bump().span;
        let name = self.name("a reference name", "reference")?;
        if !self.peek().is_word("at") {
            let e = self.expected("`at`", &format!("reference {}", self.text(name.span)));
            return Err(self.help(e, "write `reference NAME at 'path/to/table'`"));
        }
        self.bump();
        let tok = self.peek().clone();
        let path = match tok.kind {
            TokenKind::Str(p) if !p.is_empty() => p,
            TokenKind::Str(_) => {
                let msg = "empty reference path";
                let d = Diagnostic::new(codes::HEADER, tok.span, msg)
                    .with_help("give a table root, a directory of Parquet files or a Parquet file");
                return Err(self.fail(d));
            }
            TokenKind::Invalid => return Err(SILENT),
            _ => {
                let e = self.expected("a quoted path", "at");
                return Err(self.help(
                    e,
                    "write the path in single quotes, e.g. at 'warehouse/dim_stores'",
                ));
            }
        };
        self.bump();
        self.expect_end("the reference path")?;
        Ok(Reference {
            name,
            path,
            path_span: tok.span,
            span: start.to(tok.span),
        })
    }

    /// After `values(...)`: whether `in NAME` or `not in NAME` follows (a
    /// reference table rather than a value list).
    pub(super) fn names_a_reference(&self) -> bool {
        let at = |i: usize| self.toks.get(self.pos + i);
        let skip = usize::from(self.peek().is_word("not"));
        at(skip).is_some_and(|t| t.is_word("in"))
            && at(skip + 1)
                .is_some_and(|t| matches!(t.kind, TokenKind::Ident(_) | TokenKind::QuotedIdent(_)))
    }

    /// `in NAME(r, ...)` after `values(c, ...)`.
    pub(super) fn in_reference(&mut self, start: Span, columns: Vec<Ident>) -> PResult<Assertion> {
        if self.peek().is_word("not") {
            let span = self.peek().span;
            let d = Diagnostic::new(
                codes::SYNTAX,
                span,
                "`not in` a reference table is not supported",
            )
            .with_help("`values(c) in NAME(r)` checks that every key occurs in the reference");
            return Err(self.fail(d));
        }
        self.bump();
        let reference = self.name("a reference name", "in")?;
        let ref_columns = self.key_list(&reference.name.clone())?;
        Ok(Assertion::InReference {
            columns,
            reference,
            ref_columns,
            span: start.to(self.prev_span()),
        })
    }

    /// A value list checks exactly one column.
    pub(super) fn one_column(&mut self, mut columns: Vec<Ident>) -> PResult<Ident> {
        if columns.len() > 1 {
            let d = Diagnostic::new(
                codes::SYNTAX,
                columns[1].span,
                "`values` with a value list takes exactly one column",
            )
            .with_help(
                "several columns are compared with a reference table: `values(a, b) in NAME(x, y)`",
            );
            return Err(self.fail(d));
        }
        Ok(columns.remove(0))
    }

    /// `unique(k, ...)`, optionally `across published`.
    pub(super) fn unique(&mut self) -> PResult<Assertion> {
        let start = self.bump().span;
        let keys = self.key_list("unique")?;
        if !self.peek().is_word("across") {
            return Ok(Assertion::Unique {
                keys,
                span: start.to(self.prev_span()),
            });
        }
        self.bump();
        if !self.peek().is_word("published") {
            let e = self.expected("`published`", "across");
            return Err(self.help(
                e,
                "write `unique(k) across published` to compare with the other published partitions",
            ));
        }
        self.bump();
        Ok(Assertion::UniqueAcrossPublished {
            keys,
            span: start.to(self.prev_span()),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::diagnostic::codes;
    use crate::dsl::ast::Assertion;
    use crate::dsl::parse;

    fn errors(src: &str) -> Vec<crate::diagnostic::Diagnostic> {
        let (_, d) = parse(src);
        assert!(!d.is_empty(), "expected errors in {src:?}");
        d
    }

    #[test]
    fn reference_lines() {
        let src = "table t\npartitioned by d\nreference stores at 'dim/stores'\nreference \"my ref\" at '/abs/x.parquet' # c\ncheck values(s) in stores(id)\n";
        let (file, d) = parse(src);
        assert!(d.is_empty(), "{d:#?}");
        assert_eq!(file.references.len(), 2);
        assert_eq!(file.references[0].name.name, "stores");
        assert_eq!(file.references[0].path, "dim/stores");
        assert_eq!(
            &src[file.references[0].path_span.start..file.references[0].path_span.end],
            "'dim/stores'"
        );
        assert_eq!(file.references[1].name.name, "my ref");
        assert_eq!(file.statements.len(), 1);
    }

    #[test]
    fn values_in_reference_composite() {
        let (file, d) = parse("table t\nreference r at 'x'\ncheck values(a, \"b c\") in r(x, y)\n");
        assert!(d.is_empty(), "{d:#?}");
        let Assertion::InReference {
            columns,
            reference,
            ref_columns,
            ..
        } = &file.statements[0].assertion
        else {
            panic!("{:?}", file.statements[0].assertion)
        };
        assert_eq!(columns.len(), 2);
        assert_eq!(reference.name, "r");
        assert_eq!(ref_columns[1].name, "y");
        assert_eq!(
            file.statements[0].source_text,
            "values(a, \"b c\") in r(x, y)"
        );
    }

    #[test]
    fn unique_across_published() {
        let (file, d) = parse("table t\ncheck unique(a, b) across published as 'x'\n");
        assert!(d.is_empty(), "{d:#?}");
        assert!(matches!(
            &file.statements[0].assertion,
            Assertion::UniqueAcrossPublished { keys, .. } if keys.len() == 2
        ));
        assert_eq!(
            file.statements[0].source_text,
            "unique(a, b) across published"
        );
    }

    #[test]
    fn errors_are_reported_with_help() {
        let d = errors("table t\nreference stores 'x'\n");
        assert_eq!(d[0].code, codes::HEADER);
        assert_eq!(
            d[0].message,
            "expected `at` after `reference stores`, found string `'x'`"
        );
        let d = errors("table t\nreference stores at x\n");
        assert!(d[0]
            .message
            .starts_with("expected a quoted path after `at`"));
        let d = errors("table t\nreference stores at ''\n");
        assert_eq!(d[0].message, "empty reference path");
        let d = errors("table t\ncheck values(a) not in r(x)\n");
        assert_eq!(d[0].message, "`not in` a reference table is not supported");
        let d = errors("table t\ncheck values(a, b) in ('x')\n");
        assert_eq!(
            d[0].message,
            "`values` with a value list takes exactly one column"
        );
        let d = errors("table t\ncheck unique(a) across partitions\n");
        assert_eq!(
            d[0].message,
            "expected `published` after `across`, found `partitions`"
        );
        let d = errors("table t\ncheck values(a) in r\n");
        assert_eq!(d[0].message, "expected `(` after `r`, found end of line");
    }

    #[test]
    fn reference_before_table_is_a_header_error() {
        let (file, d) = parse("reference r at 'x'\ntable t\n");
        assert_eq!(d.len(), 1, "{d:#?}");
        assert!(d[0].message.contains("before the `table` header"));
        assert_eq!(file.references.len(), 1);
    }
}
