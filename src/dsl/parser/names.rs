//! Names and parentheses: column and key lists, `( ... )`, the end of a statement.

use super::{PResult, Parser};
use crate::diagnostic::{codes, line_col, Diagnostic, Span};
use crate::dsl::ast::Ident;
use crate::dsl::lexer::{Sym, TokenKind};

impl Parser<'_> {
    /// A plain or `"quoted"` name.
    pub(super) fn name(&mut self, what: &str, after: &str) -> PResult<Ident> {
        let tok = self.peek().clone();
        let (name, quoted) = match tok.kind {
            TokenKind::Ident(n) => (n, false),
            TokenKind::QuotedIdent(n) if !n.is_empty() => (n, true),
            _ => return Err(self.expected(what, after)),
        };
        self.bump();
        Ok(Ident {
            name,
            span: tok.span,
            quoted,
        })
    }

    /// `name, name, ...` (at least one).
    pub(super) fn names(&mut self, after: &str) -> PResult<Vec<Ident>> {
        let mut names = vec![self.name("a column name", after)?];
        while self.peek().is_sym(Sym::Comma) {
            self.bump();
            names.push(self.name("a column name", ",")?);
        }
        Ok(names)
    }

    /// `(k, ...)` after `name`.
    pub(super) fn key_list(&mut self, name: &str) -> PResult<Vec<Ident>> {
        let open = self.open(name)?;
        let keys = self.names(&format!("{name}("))?;
        self.close(open, &format!("{name}("))?;
        Ok(keys)
    }

    /// `(c)` after `name`: exactly one column.
    pub(super) fn column_arg(&mut self, name: &str) -> PResult<Ident> {
        let open = self.open(name)?;
        let column = self.name("a column name", &format!("{name}("))?;
        if self.peek().is_sym(Sym::Comma) {
            let span = self.peek().span;
            let msg = format!("`{name}` takes exactly one column");
            return Err(self.fail(Diagnostic::new(codes::SYNTAX, span, msg)));
        }
        self.close(open, &format!("{name}("))?;
        Ok(column)
    }

    /// Expects `(`, returning its span.
    pub(super) fn open(&mut self, after: &str) -> PResult<Span> {
        if !self.peek().is_sym(Sym::LParen) {
            return Err(self.expected("`(`", after));
        }
        Ok(self.bump().span)
    }

    /// Expects the `)` matching the `(` at `open`.
    pub(super) fn close(&mut self, open: Span, what: &str) -> PResult<()> {
        if self.peek().is_sym(Sym::RParen) {
            self.bump();
            return Ok(());
        }
        let (line, col) = line_col(self.src, open.start);
        let e = self.expected(&format!("`)` to close `{what}`"), &self.prev_text());
        Err(self.help(
            e,
            &format!("the `(` at line {line}, column {col} is not closed"),
        ))
    }

    pub(super) fn expect_end(&mut self, after: &str) -> PResult<()> {
        if self.peek().is_end() {
            return Ok(());
        }
        let e = self.expected("end of line", after);
        Err(self.help(
            e,
            "each statement is one line; write further checks as new statements",
        ))
    }
}
