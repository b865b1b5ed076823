//! Schema checks (`schema matches published`, `column c is TYPE`), declared
//! null semantics (`nulls distinct`) and `history(N)` references.

use super::{Failed, PResult, Parser, MAX_HISTORY, SILENT};
use crate::diagnostic::{codes, suggest, Diagnostic, Span};
use crate::dsl::ast::{Assertion, HistoryStat, Nulls, TypeSpec, ValueExpr, ValueKind};
use crate::dsl::lexer::{Sym, Token, TokenKind};
use crate::dsl::types::{self, TypeArg};

impl Parser<'_> {
    /// The token `n` places ahead.
    pub(super) fn peek_at(&self, n: usize) -> &Token {
        let last = self.toks.len() - 1;
        &self.toks[(self.pos + n).min(last)]
    }

    /// Whether the `(k, ...)` after the current word is followed by `nulls`.
    pub(super) fn nulls_after_keys(&self) -> bool {
        self.nulls_after_keys_at(1)
    }

    /// Whether the `(k, ...)` starting `open` tokens ahead is followed by
    /// `nulls`.
    pub(super) fn nulls_after_keys_at(&self, open: usize) -> bool {
        if !self.peek_at(open).is_sym(Sym::LParen) {
            return false;
        }
        let mut i = open + 1;
        loop {
            let t = self.peek_at(i);
            if t.is_sym(Sym::RParen) {
                return self.peek_at(i + 1).is_word("nulls");
            }
            if t.is_end() || t.is_sym(Sym::LParen) {
                return false;
            }
            i += 1;
        }
    }

    /// `nulls distinct` or `nulls not distinct`.
    pub(super) fn nulls_clause(&mut self) -> PResult<Nulls> {
        self.bump();
        let nulls = if self.peek().is_word("not") {
            self.bump();
            Nulls::NotDistinct
        } else {
            Nulls::Distinct
        };
        if !self.peek().is_word("distinct") {
            let after = if nulls == Nulls::Distinct {
                "nulls"
            } else {
                "nulls not"
            };
            let e = self.expected("`distinct`", after);
            return Err(self.help(e, "write `nulls distinct` or `nulls not distinct`"));
        }
        self.bump();
        Ok(nulls)
    }

    /// `unique(k, ...) nulls [not] distinct`
    pub(super) fn unique_nulls(&mut self) -> PResult<Assertion> {
        let start = self.bump().span;
        let keys = self.key_list("unique")?;
        let nulls = self.nulls_clause()?;
        Ok(Assertion::UniqueNulls {
            keys,
            nulls,
            span: start.to(self.prev_span()),
        })
    }

    /// `primary_key(k, ...) nulls ...`: refused, a primary key has no nulls.
    pub(super) fn primary_key_nulls(&mut self) -> Failed {
        self.bump();
        if let Err(f) = self.key_list("primary_key") {
            return f;
        }
        let span = self.peek().span;
        let d = Diagnostic::new(
            codes::SYNTAX,
            span,
            "`primary_key` takes no `nulls` clause: a primary key has no null parts",
        )
        .with_help("every row with a null key part already counts as a violation; for a key that may hold nulls write `unique(...) nulls distinct` or `unique(...) nulls not distinct`");
        self.fail(d)
    }

    /// `schema matches published`
    pub(super) fn schema_matches(&mut self) -> PResult<Assertion> {
        let start = self.bump().span;
        for (word, after) in [("matches", "schema"), ("published", "schema matches")] {
            if !self.peek().is_word(word) {
                let e = self.expected(&format!("`{word}`"), after);
                return Err(self.help(e, "write `schema matches published`"));
            }
            self.bump();
        }
        Ok(Assertion::SchemaMatches {
            span: start.to(self.prev_span()),
        })
    }

    /// `column c is TYPE [null | not null]`
    pub(super) fn column_type(&mut self) -> PResult<Assertion> {
        let start = self.bump().span;
        let column = self.name("a column name", "column")?;
        if !self.peek().is_word("is") {
            let e = self.expected("`is`", &format!("column {}", self.text(column.span)));
            return Err(self.help(e, "for example `column amount is decimal(12, 2) not null`"));
        }
        self.bump();
        let ty = self.type_spec()?;
        let nullable = if self.peek().is_word("null") {
            self.bump();
            Some(true)
        } else if self.peek().is_word("not") {
            self.bump();
            if !self.peek().is_word("null") {
                return Err(self.expected("`null`", "not"));
            }
            self.bump();
            Some(false)
        } else {
            None
        };
        Ok(Assertion::ColumnType {
            column,
            ty,
            nullable,
            span: start.to(self.prev_span()),
        })
    }

    /// A type name with optional arguments, resolved.
    pub(super) fn type_spec(&mut self) -> PResult<TypeSpec> {
        let tok = self.peek().clone();
        let TokenKind::Ident(name) = &tok.kind else {
            let e = self.expected("a type name", "is");
            return Err(self.help(e, "for example `int64`, `string`, `decimal(12, 2)`, `date`"));
        };
        self.bump();
        let args = if self.peek().is_sym(Sym::LParen) {
            Some(self.type_args(name)?)
        } else {
            None
        };
        let span = tok.span.to(self.prev_span());
        match types::resolve(name, args.as_deref()) {
            Ok(ty) => Ok(TypeSpec { ty, span }),
            Err(msg) => {
                let unknown = !types::is_type_name(name);
                let mut d = Diagnostic::new(
                    codes::SYNTAX,
                    if unknown { tok.span } else { span },
                    msg.to_string(),
                );
                if unknown {
                    d = d.with_help(match suggest(name, types::names()) {
                        Some(s) => format!("did you mean `{s}`?"),
                        None => format!(
                            "known types: {}",
                            types::names().collect::<Vec<_>>().join(", ")
                        ),
                    });
                }
                Err(self.fail(d))
            }
        }
    }

    /// `(arg, ...)` of a type name: numbers, words or strings.
    pub(super) fn type_args(&mut self, name: &str) -> PResult<Vec<TypeArg>> {
        let open = self.bump().span;
        let mut args = Vec::new();
        loop {
            let tok = self.peek().clone();
            let arg = match tok.kind {
                TokenKind::Number(n) => TypeArg::Number(n),
                TokenKind::Ident(w) => TypeArg::Word(w),
                TokenKind::Str(s) => TypeArg::Str(s),
                _ => return Err(self.expected("a type argument", &format!("{name}("))),
            };
            self.bump();
            args.push(arg);
            if self.peek().is_sym(Sym::Comma) {
                self.bump();
            } else {
                self.close(open, &format!("{name}("))?;
                return Ok(args);
            }
        }
    }

    /// `STAT ( history (` ahead, with `word` the current token's text.
    pub(super) fn history_ahead(&self, word: &str) -> bool {
        HistoryStat::from_name(word).is_some()
            && self.peek_at(1).is_sym(Sym::LParen)
            && self.peek_at(2).is_word("history")
    }

    /// `STAT(history(N).METRIC)`
    pub(super) fn history_ref(&mut self) -> PResult<ValueExpr> {
        let tok = self.bump();
        let TokenKind::Ident(word) = &tok.kind else {
            return Err(SILENT);
        };
        let stat = HistoryStat::from_name(word).unwrap_or(HistoryStat::Avg);
        let open = self.bump().span;
        let history = self.bump().span;
        let inner = self.open("history")?;
        let n = self.history_count(history)?;
        self.close(inner, "history(")?;
        self.dot(&format!("history({n})"))?;
        let metric = self.metric()?;
        self.close(open, &format!("{word}("))?;
        Ok(ValueExpr {
            span: tok.span.to(self.prev_span()),
            kind: ValueKind::History {
                stat,
                n,
                metric: Box::new(metric),
            },
        })
    }

    /// The `N` of `history(N)`: a whole number from 1 to [`MAX_HISTORY`].
    pub(super) fn history_count(&mut self, history: Span) -> PResult<u32> {
        let tok = self.peek().clone();
        let n = match &tok.kind {
            TokenKind::Number(t) => t.parse::<u32>().ok(),
            _ => return Err(self.expected("a number of partitions", "history(")),
        };
        match n {
            Some(n) if (1..=MAX_HISTORY).contains(&n) => {
                self.bump();
                Ok(n)
            }
            _ => {
                let msg = format!(
                    "`history(N)` needs a whole number of partitions from 1 to {MAX_HISTORY}"
                );
                let d = Diagnostic::new(codes::SYNTAX, history.to(tok.span), msg);
                Err(self.fail(d))
            }
        }
    }

    /// `WORD(history(...` with a word that is no statistic.
    pub(super) fn unknown_statistic(&mut self, tok: &Token, word: &str) -> Failed {
        let names = HistoryStat::ALL.map(HistoryStat::as_str);
        let msg = format!(
            "unknown statistic `{word}`: history offers {}",
            names.join(", ")
        );
        let mut d = Diagnostic::new(codes::SYNTAX, tok.span, msg);
        if let Some(s) = suggest(word, names) {
            d = d.with_help(format!("did you mean `{s}`?"));
        }
        self.fail(d)
    }

    /// `history(...)` without a statistic around it.
    pub(super) fn bare_history(&mut self) -> Failed {
        let span = self.peek().span;
        let d = Diagnostic::new(
            codes::SYNTAX,
            span,
            "`history(N).METRIC` is a series of values: take a statistic of it",
        )
        .with_help("write `avg(...)`, `median(...)`, `min(...)`, `max(...)` or `stddev(...)` around it, e.g. `median(history(7).row_count)`");
        self.fail(d)
    }
}
