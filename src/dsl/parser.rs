//! Tokens → [`RuleFile`], collecting every syntax error.

use super::ast::RuleFile;
use crate::diagnostic::Diagnostic;

/// Parses a rule file. Returns the tree of what parsed (statements with errors
/// are left out) and every diagnostic found; the file is valid only when the
/// list is empty.
pub fn parse(source: &str) -> (RuleFile, Vec<Diagnostic>) {
    let _ = source;
    todo!("parser")
}
