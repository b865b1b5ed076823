//! Token access, recovery and the diagnostics of the parser.

use super::{collapse_whitespace, Failed, PResult, Parser, SILENT};
use crate::diagnostic::{codes, Diagnostic, Span};
use crate::dsl::lexer::{self, Token, TokenKind};

impl Parser<'_> {
    pub(super) fn peek(&self) -> &Token {
        let last = self.toks.len() - 1;
        &self.toks[self.pos.min(last)]
    }

    pub(super) fn bump(&mut self) -> Token {
        let tok = self.peek().clone();
        if tok.kind != TokenKind::Eof {
            self.pos += 1;
        }
        tok
    }

    pub(super) fn prev_span(&self) -> Span {
        self.toks[..self.pos]
            .last()
            .map_or_else(Span::default, |t| t.span)
    }

    pub(super) fn prev_end(&self) -> usize {
        self.prev_span().end
    }

    pub(super) fn prev_text(&self) -> String {
        self.text(self.prev_span())
    }

    pub(super) fn skip_newlines(&mut self) {
        while self.peek().kind == TokenKind::Newline {
            self.pos += 1;
        }
    }

    pub(super) fn skip_statement(&mut self) {
        while !self.peek().is_end() {
            self.pos += 1;
        }
    }

    pub(super) fn recover<T>(&mut self, result: PResult<T>) -> Option<T> {
        result.map_err(|_| self.skip_statement()).ok()
    }

    /// Source text of `span`, comments removed and whitespace collapsed.
    pub(super) fn text(&self, span: Span) -> String {
        collapse_whitespace(&lexer::blank_comments(self.src, span, &self.comments))
    }

    /// How a token is named in messages.
    pub(super) fn describe(&self, tok: &Token) -> String {
        let raw = &self.src[tok.span.start..tok.span.end];
        let short: String = raw.chars().take(30).collect();
        let short = if short.len() < raw.len() {
            format!("{short}…")
        } else {
            short
        };
        match tok.kind {
            TokenKind::Newline => "end of line".into(),
            TokenKind::Eof => "end of file".into(),
            TokenKind::Str(_) => format!("string `{short}`"),
            TokenKind::Number(_) => format!("number `{short}`"),
            _ => format!("`{short}`"),
        }
    }

    /// Records "expected WHAT after `AFTER`, found X" at the current token.
    /// An [`TokenKind::Invalid`] token was already reported: nothing is added.
    pub(super) fn expected(&mut self, what: &str, after: &str) -> Failed {
        let tok = self.peek().clone();
        if tok.kind == TokenKind::Invalid {
            return SILENT;
        }
        let found = self.describe(&tok);
        let after = if after.is_empty() {
            String::new()
        } else {
            format!(" after `{after}`")
        };
        let code = match tok.kind {
            TokenKind::Other(_) => codes::LEX,
            _ => self.code,
        };
        let msg = format!("expected {what}{after}, found {found}");
        self.fail(Diagnostic::new(code, tok.span, msg))
    }

    pub(super) fn fail(&mut self, d: Diagnostic) -> Failed {
        let code = if d.code == codes::SYNTAX {
            self.code
        } else {
            d.code
        };
        self.diags.push(Diagnostic { code, ..d });
        Failed { reported: true }
    }

    /// Adds help to the diagnostic just recorded by `failed`.
    pub(super) fn help(&mut self, failed: Failed, help: &str) -> Failed {
        if !failed.reported {
            return failed;
        }
        if let Some(d) = self.diags.last_mut() {
            if d.help.is_none() {
                d.help = Some(help.to_string());
            }
        }
        failed
    }
}
