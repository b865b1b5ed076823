//! Value expressions: literals, arithmetic, `partition.KEY`, `published.METRIC`,
//! nested at most [`super::MAX_DEPTH`] levels deep.

use super::{Failed, PResult, Parser, MAX_DEPTH, METRICS};
use crate::diagnostic::{codes, suggest, Diagnostic, Span};
use crate::dsl::ast::{ArithOp, Literal, ValueExpr, ValueKind};
use crate::dsl::lexer::{Sym, Token, TokenKind};

impl Parser<'_> {
    /// A value: `+ -` over `* /` over unary minus over primaries.
    pub(super) fn value(&mut self) -> PResult<ValueExpr> {
        self.nested(|p| p.sum())
    }

    pub(super) fn sum(&mut self) -> PResult<ValueExpr> {
        let mut lhs = self.product()?;
        while let Some(op) = self.arith_op(&[Sym::Plus, Sym::Minus]) {
            let rhs = self.product()?;
            lhs = binary(op, lhs, rhs);
        }
        Ok(lhs)
    }

    pub(super) fn product(&mut self) -> PResult<ValueExpr> {
        let mut lhs = self.unary()?;
        while let Some(op) = self.arith_op(&[Sym::Star, Sym::Slash]) {
            let rhs = self.unary()?;
            lhs = binary(op, lhs, rhs);
        }
        Ok(lhs)
    }

    /// Consumes and returns the next token's operator if it is one of `syms`.
    pub(super) fn arith_op(&mut self, syms: &[Sym]) -> Option<ArithOp> {
        let sym = syms.iter().find(|s| self.peek().is_sym(**s))?;
        self.bump();
        Some(match sym {
            Sym::Plus => ArithOp::Add,
            Sym::Minus => ArithOp::Sub,
            Sym::Star => ArithOp::Mul,
            _ => ArithOp::Div,
        })
    }

    pub(super) fn unary(&mut self) -> PResult<ValueExpr> {
        if !self.peek().is_sym(Sym::Minus) {
            return self.postfix();
        }
        let minus = self.bump().span;
        let inner = self.nested(|p| p.unary())?;
        Ok(ValueExpr {
            span: minus.to(inner.span),
            kind: ValueKind::Neg(Box::new(inner)),
        })
    }

    /// A primary; a `%` after anything but a number literal is an error.
    pub(super) fn postfix(&mut self) -> PResult<ValueExpr> {
        let value = self.primary()?;
        if self.peek().is_sym(Sym::Percent) {
            let span = self.peek().span;
            let d = if matches!(self.toks[self.pos - 1].kind, TokenKind::Number(_)) {
                Diagnostic::new(codes::SYNTAX, span, "`%` must directly follow the number")
                    .with_help("write the percentage without a space, e.g. `2%`")
            } else {
                Diagnostic::new(codes::SYNTAX, span, "`%` can only follow a number")
                    .with_help("a percentage is a number literal such as `2%` or `0.5%`")
            };
            return Err(self.fail(d));
        }
        Ok(value)
    }

    pub(super) fn primary(&mut self) -> PResult<ValueExpr> {
        let tok = self.peek().clone();
        match &tok.kind {
            TokenKind::Number(text) => Ok(self.number(text.clone(), tok.span)),
            TokenKind::Str(s) => {
                self.bump();
                Ok(literal(Literal::String(s.clone()), tok.span))
            }
            TokenKind::Sym(Sym::LParen) => self.parenthesized(),
            TokenKind::Ident(w) if w == "date" || w == "timestamp" => self.typed_literal(w),
            TokenKind::Ident(w) if w == "partition" => self.partition_ref(),
            TokenKind::Ident(w) if w == "published" => self.published_ref(),
            TokenKind::Ident(w) if self.history_ahead(w) => self.history_ref(),
            TokenKind::Ident(w) if w == "history" => Err(self.bare_history()),
            TokenKind::Ident(w)
                if self.peek_at(1).is_sym(Sym::LParen) && self.peek_at(2).is_word("history") =>
            {
                Err(self.unknown_statistic(&tok, w))
            }
            _ => Err(self.expected_value(&tok)),
        }
    }

    pub(super) fn number(&mut self, text: String, span: Span) -> ValueExpr {
        self.bump();
        let next = self.peek();
        let percent = next.is_sym(Sym::Percent) && next.span.start == span.end;
        let span = if percent {
            span.to(self.bump().span)
        } else {
            span
        };
        literal(Literal::Number { text, percent }, span)
    }

    pub(super) fn parenthesized(&mut self) -> PResult<ValueExpr> {
        let open = self.bump().span;
        let inner = self.value()?;
        self.close(open, "(")?;
        Ok(ValueExpr {
            kind: inner.kind,
            span: open.to(self.prev_span()),
        })
    }

    /// `date '...'` or `timestamp '...'`.
    pub(super) fn typed_literal(&mut self, word: &str) -> PResult<ValueExpr> {
        let start = self.bump().span;
        let TokenKind::Str(text) = self.peek().kind.clone() else {
            let e = self.expected("a quoted literal", word);
            let example = if word == "date" {
                "date '2025-03-05'"
            } else {
                "timestamp '2025-03-05 12:00:00'"
            };
            return Err(self.help(e, &format!("for example `{example}`")));
        };
        let end = self.bump().span;
        let lit = if word == "date" {
            Literal::Date(text)
        } else {
            Literal::Timestamp(text)
        };
        Ok(literal(lit, start.to(end)))
    }

    /// `partition.KEY`
    pub(super) fn partition_ref(&mut self) -> PResult<ValueExpr> {
        let start = self.bump().span;
        self.dot("partition")?;
        let key = self.name("a partition key", "partition.")?;
        Ok(ValueExpr {
            span: start.to(key.span),
            kind: ValueKind::PartitionRef(key),
        })
    }

    /// `published.METRIC`
    pub(super) fn published_ref(&mut self) -> PResult<ValueExpr> {
        let start = self.bump().span;
        self.dot("published")?;
        let metric = self.metric()?;
        Ok(ValueExpr {
            span: start.to(metric.span),
            kind: ValueKind::PublishedRef(Box::new(metric)),
        })
    }

    pub(super) fn dot(&mut self, after: &str) -> PResult<()> {
        if !self.peek().is_sym(Sym::Dot) {
            return Err(self.expected("`.`", after));
        }
        self.bump();
        Ok(())
    }

    pub(super) fn expected_value(&mut self, tok: &Token) -> Failed {
        let what = "a value (a number, a 'string', `partition.KEY` or `published.METRIC`)";
        let after = self.toks[..self.pos]
            .last()
            .map_or(String::new(), |t| self.text(t.span));
        let e = self.expected(what, &after);
        let TokenKind::Ident(w) = &tok.kind else {
            return e;
        };
        if METRICS.contains(&w.as_str()) {
            let help = format!("to compare with the published partition write `published.{w}`");
            return self.help(e, &help);
        }
        match suggest(w, ["partition", "published", "date", "timestamp"]) {
            Some(s) => self.help(e, &format!("did you mean `{s}`?")),
            None => e,
        }
    }

    /// Runs `f` one nesting level deeper, refusing beyond [`MAX_DEPTH`].
    pub(super) fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.depth >= MAX_DEPTH {
            let span = self.peek().span;
            let msg = format!("expression nested too deeply (more than {MAX_DEPTH} levels)");
            return Err(self.fail(Diagnostic::new(codes::SYNTAX, span, msg)));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }
}

pub(super) fn literal(lit: Literal, span: Span) -> ValueExpr {
    ValueExpr {
        kind: ValueKind::Literal(lit),
        span,
    }
}

pub(super) fn binary(op: ArithOp, lhs: ValueExpr, rhs: ValueExpr) -> ValueExpr {
    ValueExpr {
        span: lhs.span.to(rhs.span),
        kind: ValueKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
    }
}
