//! What a page is made of: the verdict files read, a table's history, and
//! the escaping every text from outside goes through.

use super::history::History;
use super::model::Doc;

/// Escapes text for HTML content and quoted attributes: the XML escaping of
/// [`crate::verdict::junit::attr`] is valid HTML too. The page (`html`) and
/// its charts (`chart`) write every text from outside through it.
pub fn escape(s: &str) -> String {
    crate::verdict::junit::attr(s)
}

/// One verdict file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// The path as given when relative, else its file name.
    pub shown: String,
    pub doc: Doc,
}

/// A table's history and the name the page shows for its root.
#[derive(Debug, Clone, PartialEq)]
pub struct TableHistory {
    pub shown: String,
    pub history: History,
}
