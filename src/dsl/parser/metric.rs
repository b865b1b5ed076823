//! Metrics, comparisons and `where (...)` predicates: `null_rate(c) < 1%`,
//! `row_count between 1 and 10`.

use super::{Failed, PResult, Parser, ASSERTIONS, METRICS, SILENT};
use crate::diagnostic::{codes, suggest, Diagnostic, Span};
use crate::dsl::ast::{CmpOp, Comparison, Ident, Metric, MetricKind, Predicate};
use crate::dsl::lexer::{self, Sym, Token, TokenKind};

impl Parser<'_> {
    /// A metric: `row_count`, `null_rate(c)`, `count(where P)`, ...
    pub(super) fn metric(&mut self) -> PResult<Metric> {
        let tok = self.peek().clone();
        let name = match &tok.kind {
            TokenKind::Ident(n) if METRICS.contains(&n.as_str()) => n.clone(),
            _ => return Err(self.expected_metric(&tok)),
        };
        self.bump();
        let kind = match name.as_str() {
            "duplicate_count" if self.nulls_after_keys_at(0) => {
                let keys = self.key_list(&name)?;
                MetricKind::DuplicateCountNulls(keys, self.nulls_clause()?)
            }
            "row_count" => self.row_count()?,
            "duplicate_count" => MetricKind::DuplicateCount(self.key_list(&name)?),
            "count" => MetricKind::CountWhere(self.where_predicate(&name)?),
            "rate" => MetricKind::RateWhere(self.where_predicate(&name)?),
            _ => one_column_metric(&name, self.column_arg(&name)?),
        };
        Ok(Metric {
            kind,
            span: tok.span.to(self.prev_span()),
        })
    }

    pub(super) fn row_count(&mut self) -> PResult<MetricKind> {
        if self.peek().is_sym(Sym::LParen) {
            let span = self.peek().span;
            let d = Diagnostic::new(codes::SYNTAX, span, "`row_count` takes no arguments")
                .with_help("write `row_count` without parentheses");
            return Err(self.fail(d));
        }
        Ok(MetricKind::RowCount)
    }

    pub(super) fn expected_metric(&mut self, tok: &Token) -> Failed {
        if tok.kind == TokenKind::Invalid {
            return SILENT;
        }
        let found = self.describe(tok);
        let msg = format!("expected a metric such as `row_count` or `null_rate(col)` after `published.`, found {found}");
        let mut d = Diagnostic::new(codes::SYNTAX, tok.span, msg);
        if let TokenKind::Ident(w) = &tok.kind {
            if ASSERTIONS.contains(&w.as_str()) {
                d = d.with_help(format!("`{w}` is an assertion, not a metric"));
            } else if let Some(s) = suggest(w, METRICS) {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
        }
        self.fail(d)
    }

    /// `(where P)` of `count` and `rate`.
    pub(super) fn where_predicate(&mut self, name: &str) -> PResult<Predicate> {
        let open = self.open(name)?;
        if !self.peek().is_word("where") {
            let e = self.expected("`where`", &format!("{name}("));
            let help = format!("`{name}` takes a condition, e.g. `{name}(where amount > 0)`");
            return Err(self.help(e, &help));
        }
        self.bump();
        let predicate = self.predicate(&format!("{name}(where"))?;
        self.close(open, &format!("{name}("))?;
        Ok(predicate)
    }

    /// The raw SQL text up to the `)` that closes the enclosing parenthesis
    /// (left unconsumed). Strings and quoted names are single tokens, so their
    /// parentheses do not count.
    pub(super) fn predicate(&mut self, after: &str) -> PResult<Predicate> {
        let first = self.pos;
        let mut depth = 0usize;
        loop {
            match self.peek().kind {
                TokenKind::Sym(Sym::RParen) if depth == 0 => break,
                TokenKind::Sym(Sym::RParen) => depth -= 1,
                TokenKind::Sym(Sym::LParen) => depth += 1,
                TokenKind::Invalid => return Err(SILENT),
                TokenKind::Newline | TokenKind::Eof => {
                    return Err(self.expected("`)` closing the condition", after))
                }
                _ => {}
            }
            self.pos += 1;
        }
        if self.pos == first {
            let e = self.expected("a SQL condition", after);
            return Err(self.help(e, "for example `amount > 0 and currency = 'EUR'`"));
        }
        let span = Span::new(self.toks[first].span.start, self.prev_end());
        Ok(Predicate {
            sql: lexer::blank_comments(self.src, span, &self.comments),
            span,
            partition_refs: partition_refs(&self.toks[first..self.pos]),
        })
    }

    /// `CMP`: an operator and a value, or `between V and V`.
    pub(super) fn comparison(&mut self, metric: &Metric) -> PResult<Comparison> {
        let tok = self.peek().clone();
        let op = match &tok.kind {
            TokenKind::Sym(s) => cmp_op(*s),
            _ => None,
        };
        if let Some(op) = op {
            self.bump();
            let rhs = self.value()?;
            return Ok(Comparison::Op { op, rhs });
        }
        if tok.is_word("between") {
            return self.between();
        }
        let after = self.text(metric.span);
        let e = self.expected("a comparison (`=`, `<`, `between` ...)", &after);
        Err(match &tok.kind {
            TokenKind::Other(o) if o == "<>" => self.help(e, "write `!=` for \"not equal\""),
            _ => e,
        })
    }

    pub(super) fn between(&mut self) -> PResult<Comparison> {
        self.bump();
        let low = self.value()?;
        if !self.peek().is_word("and") {
            let after = format!("between {}", self.text(low.span));
            let e = self.expected("`and`", &after);
            return Err(self.help(e, "write `between LOW and HIGH`"));
        }
        self.bump();
        let high = self.value()?;
        Ok(Comparison::Between { low, high })
    }
}

/// The metric `name` (one of the single-column ones) over column `c`.
pub(super) fn one_column_metric(name: &str, c: Ident) -> MetricKind {
    match name {
        "null_count" => MetricKind::NullCount(c),
        "null_rate" => MetricKind::NullRate(c),
        "distinct_count" => MetricKind::DistinctCount(c),
        "min" => MetricKind::Min(c),
        "max" => MetricKind::Max(c),
        "sum" => MetricKind::Sum(c),
        _ => MetricKind::Avg(c),
    }
}

pub(super) fn cmp_op(sym: Sym) -> Option<CmpOp> {
    Some(match sym {
        Sym::Eq | Sym::EqEq => CmpOp::Eq,
        Sym::Ne => CmpOp::Ne,
        Sym::Lt => CmpOp::Lt,
        Sym::Le => CmpOp::Le,
        Sym::Gt => CmpOp::Gt,
        Sym::Ge => CmpOp::Ge,
        _ => return None,
    })
}

/// Every `partition . KEY` token sequence in a predicate's tokens.
pub(super) fn partition_refs(toks: &[Token]) -> Vec<(Ident, Span)> {
    let mut refs = Vec::new();
    let mut i = 0;
    while i + 2 < toks.len() {
        let key = match &toks[i + 2].kind {
            TokenKind::Ident(n) => Some((n.clone(), false)),
            TokenKind::QuotedIdent(n) => Some((n.clone(), true)),
            _ => None,
        };
        match key {
            Some((name, quoted))
                if toks[i].is_word("partition") && toks[i + 1].is_sym(Sym::Dot) =>
            {
                let span = toks[i + 2].span;
                refs.push((Ident { name, span, quoted }, toks[i].span.to(span)));
                i += 3;
            }
            _ => i += 1,
        }
    }
    refs
}
