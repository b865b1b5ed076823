//! Statements and their assertions: `check [LABEL:] ASSERTION [severity]`,
//! `unique(...)`, `primary_key(...)`, `values(c) in (...)`, `all(...)`.

use super::{Failed, PResult, Parser, ASSERTIONS, KEYWORDS, METRICS, SCHEMA_ASSERTIONS, SILENT};
use crate::diagnostic::{codes, suggest, Diagnostic, Span};
use crate::dsl::ast::{Assertion, Severity, Statement, ValueExpr};
use crate::dsl::lexer::{Sym, Token, TokenKind};

impl Parser<'_> {
    pub(super) fn statement(&mut self) -> PResult<Statement> {
        let start = self.peek().clone();
        let severity = match &start.kind {
            TokenKind::Ident(w) if w == "check" => Severity::Check,
            TokenKind::Ident(w) if w == "warn" => Severity::Warn,
            _ => return Err(self.bad_statement_start(&start)),
        };
        self.bump();
        let body_start = self.peek().span.start;
        let assertion = self.assertion()?;
        let body = Span::new(body_start, self.prev_end());
        let label = self.label()?;
        self.expect_end(&self.text(body))?;
        Ok(Statement {
            severity,
            assertion,
            label,
            source_text: self.text(body),
            span: Span::new(start.span.start, self.prev_end()),
        })
    }

    pub(super) fn bad_statement_start(&mut self, tok: &Token) -> Failed {
        if tok.kind == TokenKind::Invalid {
            return SILENT;
        }
        let found = self.describe(tok);
        let msg = format!("expected `check` or `warn` at the start of a statement, found {found}");
        let mut d = Diagnostic::new(codes::SYNTAX, tok.span, msg);
        if let TokenKind::Ident(w) = &tok.kind {
            let lower = w.to_lowercase();
            if KEYWORDS.contains(&lower.as_str()) {
                d = d.with_help(format!("keywords are lower case: write `{lower}`"));
            } else if let Some(s) = suggest(w, ["check", "warn"]) {
                d = d.with_help(format!("did you mean `{s}`?"));
            } else if METRICS.contains(&w.as_str()) || ASSERTIONS.contains(&w.as_str()) {
                d = d.with_help("start the statement with `check` (blocks) or `warn` (reports)");
            }
        }
        self.fail(d)
    }

    /// `as 'label'`, if present.
    pub(super) fn label(&mut self) -> PResult<Option<String>> {
        if !self.peek().is_word("as") {
            return Ok(None);
        }
        self.bump();
        match self.peek().kind.clone() {
            TokenKind::Str(s) => {
                self.bump();
                Ok(Some(s))
            }
            _ => {
                let e = self.expected("a quoted label", "as");
                Err(self.help(e, "write the label in single quotes: as 'my check'"))
            }
        }
    }

    pub(super) fn assertion(&mut self) -> PResult<Assertion> {
        let tok = self.peek().clone();
        let name = match &tok.kind {
            TokenKind::Ident(n) => n.clone(),
            _ => return Err(self.expected_assertion(&tok)),
        };
        match name.as_str() {
            "unique" if self.nulls_after_keys() => self.unique_nulls(),
            "primary_key" if self.nulls_after_keys() => Err(self.primary_key_nulls()),
            "schema" => self.schema_matches(),
            "column" => self.column_type(),
            "unique" => self.unique(),
            "primary_key" => self.keys_assertion(&name),
            "values" => self.values(),
            "all" => self.all(),
            n if METRICS.contains(&n) => {
                let metric = self.metric()?;
                let cmp = self.comparison(&metric)?;
                Ok(Assertion::Compare { metric, cmp })
            }
            _ => Err(self.expected_assertion(&tok)),
        }
    }

    pub(super) fn expected_assertion(&mut self, tok: &Token) -> Failed {
        if tok.kind == TokenKind::Invalid {
            return SILENT;
        }
        let found = self.describe(tok);
        let msg = format!(
            "expected an assertion such as `row_count`, `null_rate(col)` or `all(condition)`, found {found}"
        );
        let mut d = Diagnostic::new(codes::SYNTAX, tok.span, msg);
        if let TokenKind::Ident(w) = &tok.kind {
            let names = METRICS
                .iter()
                .chain(ASSERTIONS.iter())
                .chain(SCHEMA_ASSERTIONS.iter())
                .copied();
            if let Some(s) = suggest(w, names) {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
        }
        self.fail(d)
    }

    /// `unique(k, ...)` or `primary_key(k, ...)`.
    pub(super) fn keys_assertion(&mut self, name: &str) -> PResult<Assertion> {
        let start = self.bump().span;
        let keys = self.key_list(name)?;
        let span = start.to(self.prev_span());
        Ok(if name == "unique" {
            Assertion::Unique { keys, span }
        } else {
            Assertion::PrimaryKey { keys, span }
        })
    }

    /// `values(c) [not] in (v, ...)`, or `values(c, ...) in NAME(r, ...)`.
    pub(super) fn values(&mut self) -> PResult<Assertion> {
        let start = self.bump().span;
        let columns = self.key_list("values")?;
        if self.names_a_reference() {
            return self.in_reference(start, columns);
        }
        let column = self.one_column(columns)?;
        let negated = self.peek().is_word("not");
        if negated {
            self.bump();
        }
        if !self.peek().is_word("in") {
            let after = self.text(start.to(self.prev_span()));
            return Err(self.expected("`in` or `not in`", &after));
        }
        self.bump();
        let list = self.value_list()?;
        let span = start.to(self.prev_span());
        Ok(Assertion::Values {
            column,
            negated,
            list,
            span,
        })
    }

    /// `(v, ...)` after `in`, at least one value.
    pub(super) fn value_list(&mut self) -> PResult<Vec<ValueExpr>> {
        let open = self.open("in")?;
        if self.peek().is_sym(Sym::RParen) {
            let span = self.peek().span;
            let msg = "empty value list: expected at least one value after `in (`";
            return Err(self.fail(Diagnostic::new(codes::SYNTAX, span, msg)));
        }
        let mut list = Vec::new();
        loop {
            list.push(self.value()?);
            if self.peek().is_sym(Sym::Comma) {
                self.bump();
            } else {
                self.close(open, "the value list")?;
                return Ok(list);
            }
        }
    }

    /// `all(P)`
    pub(super) fn all(&mut self) -> PResult<Assertion> {
        let start = self.bump().span;
        let open = self.open("all")?;
        let predicate = self.predicate("all(")?;
        self.close(open, "all(")?;
        let span = start.to(self.prev_span());
        Ok(Assertion::All { predicate, span })
    }
}
