//! `dqgate report`: saved verdicts (and a table's published history) →
//! one self-contained static HTML page.
//!
//! The inputs are verdict JSON files as `check --format json` and
//! `publish --format json` print them (also error records, and audit records
//! `_dqgate_audit.json`), read back by [`model`]. With a table root,
//! [`history`] reads every published partition's audit record, and the page
//! charts each metric across them ([`chart`]). The page ([`html`]) has inline
//! CSS and SVG, no script and no external resource, and is deterministic:
//! the same files give the same bytes (nothing from the clock, no absolute
//! path that was not given).

pub mod chart;
mod error;
pub mod history;
pub mod html;
mod input;
pub mod model;
pub mod rows;

use std::fs;
use std::path::{Path, PathBuf};

pub use error::ReportError;
pub use history::History;
pub use input::{escape, Input, TableHistory};
pub use model::Doc;

/// Reads the verdict files and renders the page, with the table's history
/// when one was read ([`history::read`]). With `failed_rows` (the
/// `--failed-rows` directory of the audits), the first rows of each check's
/// failed-rows file are shown under it.
pub fn render(
    verdicts: &[PathBuf],
    history: Option<TableHistory>,
    failed_rows: Option<&Path>,
) -> Result<String, ReportError> {
    let mut inputs = Vec::new();
    for path in verdicts {
        inputs.extend(read_inputs(path)?);
    }
    if let Some(dir) = failed_rows {
        rows::attach(&mut inputs, dir);
    }
    Ok(html::page(&inputs, history.as_ref()))
}

/// The documents of one file (a verdict, maybe followed by an error record).
fn read_inputs(path: &Path) -> Result<Vec<Input>, ReportError> {
    let text = fs::read_to_string(path).map_err(|e| ReportError::read(path, &e.to_string()))?;
    let docs = model::parse_all(&text).map_err(|e| ReportError::read(path, &e.to_string()))?;
    Ok(docs
        .into_iter()
        .map(|doc| Input {
            shown: shown_path(path),
            doc,
        })
        .collect())
}

/// A relative path as given; an absolute one by its file name only, so
/// that a page does not depend on where its inputs lived.
pub fn shown_path(p: &Path) -> String {
    if p.is_absolute() {
        p.file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| p.display().to_string())
    } else {
        p.display().to_string()
    }
}
