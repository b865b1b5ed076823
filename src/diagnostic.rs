//! Rule-file diagnostics: a byte span, a stable code and a message, rendered by
//! one pure function with `file:line:col`, the source line and a caret.
//!
//! Every stage that reads a rule file (lexer, parser, checker) reports problems as
//! [`Diagnostic`] values and keeps going, so an analyst sees all errors of a file
//! at once. Rendering happens only at the edge (the CLI), and tests compare the
//! rendered text byte for byte.

use std::fmt::Write as _;

/// A half-open byte range `[start, end)` into the rule file's source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// One problem found in a rule file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Stable code, e.g. `E101`; see [`codes`].
    pub code: &'static str,
    pub message: String,
    pub span: Span,
    /// A suggestion such as "did you mean `amount`?".
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn new(code: &'static str, span: Span, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            message: message.into(),
            span,
            help: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }
}

/// The stable diagnostic codes. Lexical and syntax errors are `E1xx`, name
/// errors `E2xx`, type errors `E3xx`, run-key errors `E4xx`.
pub mod codes {
    pub const LEX: &str = "E101";
    pub const UNTERMINATED: &str = "E102";
    pub const SYNTAX: &str = "E110";
    pub const HEADER: &str = "E111";
    pub const UNKNOWN_COLUMN: &str = "E201";
    pub const UNKNOWN_PARTITION_KEY: &str = "E202";
    pub const DUPLICATE_NAME: &str = "E203";
    pub const UNKNOWN_REFERENCE: &str = "E204";
    pub const TYPE: &str = "E301";
    pub const PREDICATE: &str = "E302";
    pub const LITERAL: &str = "E303";
    pub const RUN_KEY: &str = "E401";
    pub const NOT_PARTITIONED: &str = "E402";
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = &source[..floor_char_boundary(source, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Renders diagnostics the way compilers do:
///
/// ```text
/// error[E201]: unknown column `amout`
///  --> rules/daily_sales.dq:8:11
///   |
/// 8 | check min(amout) >= 0
///   |           ^^^^^
///   = help: did you mean `amount`?
/// ```
pub fn render(file: &str, source: &str, diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        render_one(&mut out, file, source, d);
    }
    let n = diagnostics.len();
    let _ = writeln!(out, "{n} error{} in {file}", if n == 1 { "" } else { "s" });
    out
}

fn render_one(out: &mut String, file: &str, source: &str, d: &Diagnostic) {
    let (line, col) = line_col(source, d.span.start);
    let text = source.lines().nth(line - 1).unwrap_or("");
    let text = text.strip_suffix('\r').unwrap_or(text);
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    // The caret covers the span on its first line, at least one character.
    let line_start = source[..floor_char_boundary(source, d.span.start.min(source.len()))]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let line_end = line_start + text.len();
    // A span may start past the shown text (in the `\r`s of a CRLF or CR line
    // ending): then the caret is one character wide.
    let start = floor_char_boundary(source, d.span.start.min(source.len()));
    let end = d.span.end.min(line_end).max(start);
    let width = source
        .get(start..end)
        .map_or(1, |s| s.chars().count())
        .max(1);
    let _ = writeln!(out, "error[{}]: {}", d.code, d.message);
    let _ = writeln!(out, "{pad}--> {file}:{line}:{col}");
    let _ = writeln!(out, "{pad} |");
    let _ = writeln!(out, "{line} | {}", text.replace('\t', " "));
    let _ = writeln!(out, "{pad} | {}{}", " ".repeat(col - 1), "^".repeat(width));
    if let Some(help) = &d.help {
        let _ = writeln!(out, "{pad} = help: {help}");
    }
    out.push('\n');
}

/// A diagnostic as JSON carries it (`lint --format json`, and the error
/// record of an invalid rule file): 1-based line and column instead of bytes.
#[derive(Debug, serde::Serialize)]
pub struct DiagnosticWire<'a> {
    pub code: &'a str,
    pub line: usize,
    pub column: usize,
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<&'a str>,
}

/// The wire form of each diagnostic, in order.
pub fn wire<'a>(source: &str, diagnostics: &'a [Diagnostic]) -> Vec<DiagnosticWire<'a>> {
    diagnostics
        .iter()
        .map(|d| {
            let (line, column) = line_col(source, d.span.start);
            DiagnosticWire {
                code: d.code,
                line,
                column,
                message: &d.message,
                help: d.help.as_deref(),
            }
        })
        .collect()
}

/// The closest candidate to `name` when it is close enough to be a likely typo.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let mut best: Option<(f64, &str)> = None;
    for c in candidates {
        let score = if c.to_lowercase() == lower {
            2.0
        } else {
            strsim::jaro_winkler(&lower, &c.to_lowercase())
        };
        if score >= 0.8 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let src = "table t\ncheck min(é) > 0\n";
        let off = src.find("> 0").unwrap();
        assert_eq!(line_col(src, off), (2, 14));
        assert_eq!(line_col(src, 0), (1, 1));
    }

    #[test]
    fn renders_caret_under_span() {
        let src = "table t\ncheck min(amout) >= 0\n";
        let start = src.find("amout").unwrap();
        let d = Diagnostic::new(
            codes::UNKNOWN_COLUMN,
            Span::new(start, start + 5),
            "unknown column `amout`",
        )
        .with_help("did you mean `amount`?");
        let got = render("r.dq", src, &[d]);
        let want = "error[E201]: unknown column `amout`\n --> r.dq:2:11\n  |\n2 | check min(amout) >= 0\n  |           ^^^^^\n  = help: did you mean `amount`?\n\n1 error in r.dq\n";
        assert_eq!(got, want);
    }

    #[test]
    fn spans_inside_line_endings_do_not_panic() {
        // Found by the fuzzer: a span in the second `\r` of `\r\r\n`.
        let src = "check all(x\r\r\n";
        let d = Diagnostic::new(codes::SYNTAX, Span::new(12, 13), "x");
        assert!(render("r.dq", src, &[d]).contains("r.dq:1:13"));
    }

    #[test]
    fn suggests_close_names_only() {
        let cols = ["amount", "currency", "store_id"];
        assert_eq!(suggest("amout", cols), Some("amount"));
        assert_eq!(suggest("Amount", cols), Some("amount"));
        assert_eq!(suggest("zzz", cols), None);
    }
}
