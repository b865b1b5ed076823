//! `dqgate report`: verdict JSON files (and a table's history) as one HTML page.

use std::path::PathBuf;

use super::output::print_stdout;
use crate::error::Error;

pub(super) async fn report(
    verdicts: &[PathBuf],
    table: Option<&std::path::Path>,
    output: Option<&std::path::Path>,
    options: &[String],
    failed_rows: Option<&std::path::Path>,
) -> Result<u8, Error> {
    // Storage options are for a table on an object store only.
    let history = match table {
        Some(root) => {
            let kind = crate::publish::choose(None, root);
            kind.refuse_options(options)?;
            let target = kind.open(root, options, None).await?;
            Some(crate::report::TableHistory {
                shown: crate::report::shown_path(root),
                history: crate::report::history::read(&*target).await?,
            })
        }
        None => {
            crate::publish::target::no_options(options)?;
            None
        }
    };
    let page = crate::report::render(verdicts, history, failed_rows)?;
    match output {
        None => print_stdout(&page),
        Some(path) => std::fs::write(path, page).map_err(|e| {
            Error::Audit(format!(
                "cannot write the report to {}: {e}",
                path.display()
            ))
        })?,
    }
    Ok(0)
}
