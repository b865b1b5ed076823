//! The `reference` tables a rule file declares, opened (footers only), their
//! paths resolved against the rule file's directory.

use std::path::{Path, PathBuf};

use super::rules::RuleSource;
use crate::dsl::ast::RuleFile;
use crate::error::Error;
use crate::staged::reference::Dataset;

/// The opened `reference` tables, by name.
pub type References = Vec<(String, Dataset)>;

/// Where a `reference` path points: relative paths are resolved against the
/// directory of the rule file (as the rule file was given), so a rule file
/// means the same from any working directory.
pub fn resolve(rules_path: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    match rules_path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(p),
        _ => p.to_path_buf(),
    }
}

/// Opens every declared reference (footers only). A reference that cannot
/// be read stops the run with exit 3.
pub(super) async fn open(file: &RuleFile, rules: &RuleSource) -> Result<References, Error> {
    let mut out: References = Vec::new();
    for r in &file.references {
        if out.iter().any(|(n, _)| *n == r.name.name) {
            continue; // declared twice: the checker reports it
        }
        let (opened, shown) = if crate::staged::remote::is_url(&r.path) {
            (Dataset::open_remote(&r.path).await, r.path.clone())
        } else {
            let at = resolve(&rules.path, &r.path);
            (Dataset::open(&at), at.display().to_string())
        };
        let dataset = opened.map_err(|why| {
            Error::Audit(format!(
                "reference `{}` at '{}': cannot read `{shown}`: {why}",
                r.name.name, r.path,
            ))
        })?;
        out.push((r.name.name.clone(), dataset));
    }
    Ok(out)
}
