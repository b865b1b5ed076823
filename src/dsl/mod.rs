//! Rule-file text → syntax tree ([`ast::RuleFile`]) with spans.
//!
//! `lexer` splits the text into tokens (statements end at newlines outside
//! parentheses), `parser` builds the tree and collects every syntax error,
//! `print` turns a tree back into canonical rule-file text.
//! Nothing here knows about data or schemas.

pub mod ast;
pub mod lexer;
pub mod parser;
pub mod print;
pub mod types;

pub use parser::parse;
