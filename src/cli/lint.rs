//! `dqgate lint`: parse and type-check a rule file, reading no data.

use std::path::PathBuf;

use super::args::Format;
use super::output::print_stdout;
use crate::audit::{self, RuleSource};
use crate::engine::EngineOptions;
use crate::error::Error;
use crate::staged::Location;
use crate::verdict::json;

pub(super) async fn lint(
    rules: PathBuf,
    staged: Option<PathBuf>,
    options: Vec<String>,
    format: Format,
) -> Result<u8, Error> {
    if !matches!(format, Format::Text | Format::Json) {
        return Err(Error::Usage("lint --format is text or json".into()));
    }
    let source = RuleSource::read(&rules)?;
    let shown = source.display.clone();
    match staged {
        None if !options.is_empty() => {
            return Err(Error::Usage(
                "--storage-option needs an object-store --staged".into(),
            ))
        }
        None => audit::lint_without_data(&source)?,
        Some(dir) => {
            let staged = Location::parse(&dir, &options)?;
            audit::prepare_at(source, &staged, &[], false, &EngineOptions::default()).await?;
        }
    }
    match format {
        Format::Json => print_stdout(&json::lint_ok_json(&shown)),
        _ => println!("{shown}: ok"),
    }
    Ok(0)
}
