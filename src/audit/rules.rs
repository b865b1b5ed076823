//! The rule file as read from disk: its text, hash and displayed path, parsed
//! with its syntax errors.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::diagnostic::Diagnostic;
use crate::dsl::{self, ast::RuleFile};
use crate::error::Error;

/// A rule file read from disk.
#[derive(Debug, Clone)]
pub struct RuleSource {
    /// The path as the verdict shows it: as given when relative, else the
    /// file name (a verdict carries no absolute path).
    pub display: String,
    pub text: String,
    pub sha256: String,
    /// The path as given (`reference` paths are resolved against its
    /// directory).
    pub path: PathBuf,
}

impl RuleSource {
    pub fn read(path: &Path) -> Result<RuleSource, Error> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::Usage(format!("cannot read rule file `{}`: {e}", path.display()))
        })?;
        let text = String::from_utf8(bytes.clone()).map_err(|_| {
            Error::Usage(format!("rule file `{}` is not UTF-8 text", path.display()))
        })?;
        let display = if path.is_absolute() {
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        } else {
            path.to_string_lossy().replace('\\', "/")
        };
        Ok(RuleSource {
            display,
            text,
            sha256: hex::encode(Sha256::digest(&bytes)),
            path: path.to_path_buf(),
        })
    }

    /// Parses; any syntax error is an [`Error::Rules`].
    pub fn parse(&self) -> Result<RuleFile, Error> {
        let (file, diagnostics) = dsl::parse(&self.text);
        if diagnostics.is_empty() {
            Ok(file)
        } else {
            Err(self.rules_error(diagnostics))
        }
    }

    /// Parses what parses: the statements without syntax errors, and the
    /// syntax errors, to be reported together with the name and type errors
    /// of the rest. An error (the syntax errors alone) when not even the
    /// `table` header parsed.
    pub fn parse_partial(&self) -> Result<(RuleFile, Vec<Diagnostic>), Error> {
        let (file, diagnostics) = dsl::parse(&self.text);
        if !diagnostics.is_empty() && file.table.name.is_empty() {
            return Err(self.rules_error(diagnostics));
        }
        Ok((file, diagnostics))
    }

    /// The rule error of `syntax` and `more` together, in source order, or
    /// `Ok` when both are empty.
    pub(super) fn all_errors(
        &self,
        mut syntax: Vec<Diagnostic>,
        more: Vec<Diagnostic>,
    ) -> Result<(), Error> {
        syntax.extend(more);
        if syntax.is_empty() {
            return Ok(());
        }
        syntax.sort_by_key(|d| d.span.start);
        Err(self.rules_error(syntax))
    }

    pub fn rules_error(&self, diagnostics: Vec<crate::diagnostic::Diagnostic>) -> Error {
        Error::Rules {
            file: self.display.clone(),
            source_text: self.text.clone(),
            diagnostics,
        }
    }
}
