//! `dqgate lint`: parse and type-check a rule file, reading no data.

use std::path::PathBuf;

use super::location;
use crate::audit::{self, RuleSource};
use crate::engine::EngineOptions;
use crate::error::Error;

pub(super) async fn lint(
    rules: PathBuf,
    staged: Option<PathBuf>,
    options: Vec<String>,
) -> Result<u8, Error> {
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
            let staged = location(&dir, &options)?;
            audit::prepare_at(source, &staged, &[], false, &EngineOptions::default()).await?;
        }
    }
    println!("{shown}: ok");
    Ok(0)
}
