//! Tokens of the rule language.
//!
//! The lexer turns rule-file text into a flat list of [`Token`]s with byte
//! spans. It knows the one piece of layout the language has: a statement ends
//! at a newline while no parenthesis is open, so a [`TokenKind::Newline`] is
//! emitted only at parenthesis depth 0 (inside parentheses newlines are
//! whitespace). `#` comments are dropped but their spans are kept, because SQL
//! predicates are handed on as raw source text with comments blanked out.
//!
//! Characters the rule language does not use still become tokens
//! ([`TokenKind::Other`]): they are legal inside SQL predicates. The lexer never
//! fails; an unterminated string or quoted name becomes a diagnostic and a
//! [`TokenKind::Invalid`] token, which the parser skips without a second message.
//!
//! When the text ends with a parenthesis still open, the file is broken anyway;
//! the lexer then lexes it again treating a line that starts (in column 1) with
//! `check`/`warn`/`table` as a new statement, so one missing `)` does not hide
//! every statement after it.

use crate::diagnostic::{codes, Diagnostic, Span};

/// Operators and punctuation of the rule language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sym {
    /// `=`
    Eq,
    /// `==`
    EqEq,
    /// `!=`
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Plus,
    Minus,
    Star,
    Slash,
    LParen,
    RParen,
    Comma,
    Dot,
    Percent,
}

impl Sym {
    /// The symbol as written.
    pub fn text(self) -> &'static str {
        match self {
            Sym::Eq => "=",
            Sym::EqEq => "==",
            Sym::Ne => "!=",
            Sym::Lt => "<",
            Sym::Le => "<=",
            Sym::Gt => ">",
            Sym::Ge => ">=",
            Sym::Plus => "+",
            Sym::Minus => "-",
            Sym::Star => "*",
            Sym::Slash => "/",
            Sym::LParen => "(",
            Sym::RParen => ")",
            Sym::Comma => ",",
            Sym::Dot => ".",
            Sym::Percent => "%",
        }
    }
}

/// What a token is. Text-carrying kinds hold the decoded value; the raw text is
/// always `&source[span.start..span.end]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenKind {
    /// `[A-Za-z_][A-Za-z0-9_]*`; keywords are identifiers with lower-case text.
    Ident(String),
    /// `"double quoted"` name, `""` unescaped to `"`.
    QuotedIdent(String),
    /// A number with underscores removed (`1_000` → `1000`).
    Number(String),
    /// `'single quoted'` string, `''` unescaped to `'`.
    Str(String),
    Sym(Sym),
    /// A character (or `<>`, `||`, `::`) the rule language does not use.
    Other(String),
    /// An unterminated string or quoted name; already reported.
    Invalid,
    /// End of a statement (a newline at parenthesis depth 0).
    Newline,
    Eof,
}

/// A token and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub span: Span,
}

impl Token {
    /// True for an identifier with exactly this text (keywords are lower case).
    pub fn is_word(&self, word: &str) -> bool {
        matches!(&self.kind, TokenKind::Ident(s) if s == word)
    }

    pub fn is_sym(&self, sym: Sym) -> bool {
        self.kind == TokenKind::Sym(sym)
    }

    /// True for a token that ends a statement.
    pub fn is_end(&self) -> bool {
        matches!(self.kind, TokenKind::Newline | TokenKind::Eof)
    }
}

/// The lexer's output: tokens (ending with one [`TokenKind::Eof`]), the spans
/// of `#` comments (without the line break), and lexical diagnostics.
#[derive(Debug, Clone, Default)]
pub struct Lexed {
    pub tokens: Vec<Token>,
    pub comments: Vec<Span>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Splits `source` into tokens. Never fails and never panics.
pub fn lex(source: &str) -> Lexed {
    let (lexed, depth) = Lexer::new(source, false).run();
    if depth == 0 {
        return lexed;
    }
    Lexer::new(source, true).run().0
}

/// Replaces every comment inside `span` with spaces (same byte length), so
/// that offsets into the result map to `span.start + offset` in the source.
pub fn blank_comments(source: &str, span: Span, comments: &[Span]) -> String {
    let mut out = String::with_capacity(span.end - span.start);
    let mut at = span.start;
    for c in comments
        .iter()
        .filter(|c| c.start < span.end && c.end > span.start)
    {
        let (start, end) = (c.start.max(span.start), c.end.min(span.end));
        out.push_str(&source[at..start]);
        out.extend(std::iter::repeat_n(' ', end - start));
        at = end;
    }
    out.push_str(&source[at..span.end]);
    out
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
    recover: bool,
    out: Lexed,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str, recover: bool) -> Self {
        Lexer {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            depth: 0,
            recover,
            out: Lexed::default(),
        }
    }

    /// Lexes everything; returns the result and the final parenthesis depth.
    fn run(mut self) -> (Lexed, usize) {
        while self.pos < self.bytes.len() {
            self.next_token();
        }
        let end = self.src.len();
        self.push(TokenKind::Eof, end, end);
        (self.out, self.depth)
    }

    fn peek_at(&self, offset: usize) -> u8 {
        self.bytes.get(self.pos + offset).copied().unwrap_or(0)
    }

    fn push(&mut self, kind: TokenKind, start: usize, end: usize) {
        self.out.tokens.push(Token {
            kind,
            span: Span::new(start, end),
        });
        self.pos = end;
    }

    fn next_token(&mut self) {
        let start = self.pos;
        match self.bytes[start] {
            b' ' | b'\t' | b'\r' | b'\x0c' => self.pos += 1,
            b'\n' => self.newline(),
            b'#' => self.comment(),
            b'\'' => self.quoted(b'\''),
            b'"' => self.quoted(b'"'),
            b'0'..=b'9' => self.number(),
            b'A'..=b'Z' | b'a'..=b'z' | b'_' => self.ident(),
            _ => self.symbol(),
        }
    }

    fn newline(&mut self) {
        let start = self.pos;
        if self.depth > 0 && self.recover && self.starts_statement(start + 1) {
            self.depth = 0;
        }
        if self.depth == 0 {
            // A CRLF line break is one token, so carets land after the text.
            let from = if start > 0 && self.bytes[start - 1] == b'\r' {
                start - 1
            } else {
                start
            };
            self.push(TokenKind::Newline, from, start + 1);
        } else {
            self.pos += 1;
        }
    }

    /// Whether the line at `at` begins with a statement keyword followed by a
    /// blank and a word (used only to recover from an unclosed parenthesis).
    fn starts_statement(&self, at: usize) -> bool {
        let rest = &self.bytes[at..];
        ["check", "warn", "table"].iter().any(|w| {
            let w = w.as_bytes();
            rest.starts_with(w)
                && matches!(rest.get(w.len()), Some(b' ' | b'\t'))
                && rest[w.len()..]
                    .iter()
                    .find(|b| !matches!(b, b' ' | b'\t'))
                    .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
        })
    }

    fn comment(&mut self) {
        let start = self.pos;
        let mut end = self.find_line_end(start);
        if end > start && self.bytes[end - 1] == b'\r' {
            end -= 1;
        }
        self.out.comments.push(Span::new(start, end));
        self.pos = end.max(start + 1);
    }

    /// Offset of the next `\n` at or after `from`, or the end of the text.
    fn find_line_end(&self, from: usize) -> usize {
        self.bytes[from..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.bytes.len(), |i| from + i)
    }

    /// A `'string'` or `"name"`; the quote doubled inside is one quote. Both
    /// end at the end of the line at the latest.
    fn quoted(&mut self, quote: u8) {
        let start = self.pos;
        let mut text = String::new();
        let mut i = start + 1;
        loop {
            match self.bytes.get(i) {
                Some(&b) if b == quote && self.bytes.get(i + 1) == Some(&quote) => {
                    text.push(quote as char);
                    i += 2;
                }
                Some(&b) if b == quote => break,
                Some(b'\n') | None => return self.unterminated(quote, start, i),
                Some(_) => {
                    let ch = self.src[i..].chars().next().unwrap_or('\u{fffd}');
                    text.push(ch);
                    i += ch.len_utf8().max(1);
                }
            }
        }
        let kind = if quote == b'\'' {
            TokenKind::Str(text)
        } else {
            TokenKind::QuotedIdent(text)
        };
        self.push(kind, start, i + 1);
    }

    fn unterminated(&mut self, quote: u8, start: usize, end: usize) {
        let end = if end > start + 1 && self.bytes[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        let (what, q) = if quote == b'\'' {
            ("string", '\'')
        } else {
            ("quoted name", '"')
        };
        let d = Diagnostic::new(
            codes::UNTERMINATED,
            Span::new(start, end),
            format!("unterminated {what}: missing closing `{q}`"),
        )
        .with_help(format!(
            "close it with `{q}` on the same line; write `{q}{q}` for a literal `{q}`"
        ));
        self.out.diagnostics.push(d);
        self.push(TokenKind::Invalid, start, end);
    }

    /// `42`, `1_000`, `0.25`, `1e6`, `2.5E-3`. A `.` or `e` is part of the
    /// number only when a digit follows (so `1.x` is `1`, `.`, `x`).
    fn number(&mut self) {
        let start = self.pos;
        let mut i = self.digits(start);
        if self.bytes.get(i) == Some(&b'.') && self.is_digit(i + 1) {
            i = self.digits(i + 1);
        }
        if matches!(self.bytes.get(i), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(self.bytes.get(i + 1), Some(b'+' | b'-')));
            if self.is_digit(i + 1 + sign) {
                i = self.digits(i + 1 + sign);
            }
        }
        let text = self.src[start..i].replace('_', "");
        self.push(TokenKind::Number(text), start, i);
    }

    fn is_digit(&self, i: usize) -> bool {
        self.bytes.get(i).is_some_and(u8::is_ascii_digit)
    }

    /// End of a run of digits and underscores starting at `i`.
    fn digits(&self, mut i: usize) -> usize {
        while self
            .bytes
            .get(i)
            .is_some_and(|b| b.is_ascii_digit() || *b == b'_')
        {
            i += 1;
        }
        i
    }

    fn ident(&mut self) {
        let start = self.pos;
        let len = self.bytes[start..]
            .iter()
            .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
            .unwrap_or(self.bytes.len() - start);
        let text = self.src[start..start + len].to_string();
        self.push(TokenKind::Ident(text), start, start + len);
    }

    fn symbol(&mut self) {
        let start = self.pos;
        let (a, b) = (self.peek_at(0), self.peek_at(1));
        let two = match (a, b) {
            (b'=', b'=') => Some(Sym::EqEq),
            (b'!', b'=') => Some(Sym::Ne),
            (b'<', b'=') => Some(Sym::Le),
            (b'>', b'=') => Some(Sym::Ge),
            _ => None,
        };
        if let Some(sym) = two {
            return self.push(TokenKind::Sym(sym), start, start + 2);
        }
        if let (Some(sym), false) = (one_char_sym(a), (a, b) == (b'<', b'>')) {
            self.track_depth(sym);
            return self.push(TokenKind::Sym(sym), start, start + 1);
        }
        self.other(start)
    }

    fn track_depth(&mut self, sym: Sym) {
        match sym {
            Sym::LParen => self.depth += 1,
            Sym::RParen => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
    }

    /// Anything else: `<>`, `||`, `::` as one token, otherwise one character.
    fn other(&mut self, start: usize) {
        let rest = &self.src[start..];
        let len = ["<>", "||", "::"]
            .iter()
            .find(|p| rest.starts_with(*p))
            .map_or_else(
                || rest.chars().next().map_or(1, char::len_utf8),
                |p| p.len(),
            );
        let text = rest[..len].to_string();
        self.push(TokenKind::Other(text), start, start + len);
    }
}

fn one_char_sym(b: u8) -> Option<Sym> {
    Some(match b {
        b'=' => Sym::Eq,
        b'<' => Sym::Lt,
        b'>' => Sym::Gt,
        b'+' => Sym::Plus,
        b'-' => Sym::Minus,
        b'*' => Sym::Star,
        b'/' => Sym::Slash,
        b'(' => Sym::LParen,
        b')' => Sym::RParen,
        b',' => Sym::Comma,
        b'.' => Sym::Dot,
        b'%' => Sym::Percent,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        lex(src).tokens.into_iter().map(|t| t.kind).collect()
    }

    fn ident(s: &str) -> TokenKind {
        TokenKind::Ident(s.into())
    }

    fn num(s: &str) -> TokenKind {
        TokenKind::Number(s.into())
    }

    #[test]
    fn numbers_in_all_forms() {
        assert_eq!(
            kinds("42 1_000_000 0.25 1e6 2.5E-3 3e+2"),
            vec![
                num("42"),
                num("1000000"),
                num("0.25"),
                num("1e6"),
                num("2.5E-3"),
                num("3e+2"),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn number_stops_before_dot_or_e_without_digit() {
        assert_eq!(
            kinds("1.x 2e"),
            vec![
                num("1"),
                TokenKind::Sym(Sym::Dot),
                ident("x"),
                num("2"),
                ident("e"),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn percent_is_its_own_token() {
        let l = lex("2%");
        assert_eq!(l.tokens[1].kind, TokenKind::Sym(Sym::Percent));
        assert_eq!(l.tokens[1].span, Span::new(1, 2));
    }

    #[test]
    fn operators() {
        let got = kinds("= == != < <= > >= + - * / ( ) , .");
        let syms: Vec<_> = got
            .iter()
            .filter_map(|k| match k {
                TokenKind::Sym(s) => Some(s.text()),
                _ => None,
            })
            .collect();
        assert_eq!(syms.join(" "), "= == != < <= > >= + - * / ( ) , .");
    }

    #[test]
    fn strings_and_quoted_names_unescape_doubled_quotes() {
        assert_eq!(
            kinds(r#"'O''Hara' "order ""id""" ''"#),
            vec![
                TokenKind::Str("O'Hara".into()),
                TokenKind::QuotedIdent("order \"id\"".into()),
                TokenKind::Str(String::new()),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn unicode_inside_strings() {
        assert_eq!(kinds("'é€'")[0], TokenKind::Str("é€".into()));
    }

    #[test]
    fn unterminated_string_reports_and_stops_at_line_end() {
        let l = lex("check 'abc\r\ncheck x");
        assert_eq!(l.diagnostics.len(), 1);
        assert_eq!(l.diagnostics[0].code, codes::UNTERMINATED);
        assert_eq!(l.diagnostics[0].span, Span::new(6, 10));
        assert_eq!(l.tokens[1].kind, TokenKind::Invalid);
        assert_eq!(l.tokens[2].kind, TokenKind::Newline);
    }

    #[test]
    fn unterminated_quoted_name() {
        let l = lex("null_rate(\"abc");
        assert_eq!(l.diagnostics.len(), 1);
        assert!(l.diagnostics[0].message.contains("quoted name"));
    }

    #[test]
    fn comments_are_dropped_and_recorded() {
        let src = "a # one\r\nb #two";
        let l = lex(src);
        assert_eq!(
            l.tokens.iter().map(|t| t.kind.clone()).collect::<Vec<_>>(),
            vec![ident("a"), TokenKind::Newline, ident("b"), TokenKind::Eof]
        );
        assert_eq!(&src[l.comments[0].start..l.comments[0].end], "# one");
        assert_eq!(&src[l.comments[1].start..l.comments[1].end], "#two");
    }

    #[test]
    fn hash_inside_string_is_not_a_comment() {
        assert_eq!(kinds("'a#b'")[0], TokenKind::Str("a#b".into()));
    }

    #[test]
    fn newlines_inside_parentheses_are_whitespace() {
        let got = kinds("f(a,\n b # c\n)\ng");
        let newlines = got.iter().filter(|k| **k == TokenKind::Newline).count();
        assert_eq!(newlines, 1);
    }

    #[test]
    fn unknown_characters_become_other_tokens() {
        assert_eq!(
            kinds("a || b :: c ~ [ ] ; ! @ <> é"),
            vec![
                ident("a"),
                TokenKind::Other("||".into()),
                ident("b"),
                TokenKind::Other("::".into()),
                ident("c"),
                TokenKind::Other("~".into()),
                TokenKind::Other("[".into()),
                TokenKind::Other("]".into()),
                TokenKind::Other(";".into()),
                TokenKind::Other("!".into()),
                TokenKind::Other("@".into()),
                TokenKind::Other("<>".into()),
                TokenKind::Other("é".into()),
                TokenKind::Eof
            ]
        );
    }

    #[test]
    fn unclosed_paren_recovers_at_statement_keyword() {
        let got = kinds("check min(a > 0\n  and b\ncheck row_count > 0\n");
        let newlines = got.iter().filter(|k| **k == TokenKind::Newline).count();
        assert_eq!(newlines, 2);
    }

    #[test]
    fn balanced_file_never_uses_recovery() {
        // `check x` at column 1 inside an open parenthesis is a column here.
        let got = kinds("check all(a > 0 and\ncheck x)\n");
        let newlines = got.iter().filter(|k| **k == TokenKind::Newline).count();
        assert_eq!(newlines, 1);
    }

    #[test]
    fn blank_comments_keeps_offsets() {
        let src = "(a # c\n and b)";
        let l = lex(src);
        let s = blank_comments(src, Span::new(1, src.len() - 1), &l.comments);
        assert_eq!(s, "a    \n and b");
    }

    #[test]
    fn never_panics() {
        for src in [
            "",
            "#",
            "\r",
            "'",
            "\"",
            "1e",
            "1e+",
            "9_",
            "\u{0}\u{ffff}",
            "é'é",
        ] {
            let l = lex(src);
            assert_eq!(l.tokens.last().map(|t| &t.kind), Some(&TokenKind::Eof));
        }
        let deep = "(".repeat(100_000);
        assert_eq!(lex(&deep).tokens.len(), 100_001);
    }
}
