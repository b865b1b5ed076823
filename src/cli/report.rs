//! `dqgate report`: verdict JSON files (and a table's history) as one HTML page.

use std::path::PathBuf;

use super::output::print_stdout;
use crate::error::Error;
use crate::staged::remote::is_url;

pub(super) async fn report(
    verdicts: &[PathBuf],
    table: Option<&std::path::Path>,
    output: Option<&std::path::Path>,
    options: &[String],
    failed_rows: Option<&std::path::Path>,
) -> Result<u8, Error> {
    // Storage options are for a table on an object store only.
    match table {
        Some(root) => crate::publish::choose(None, root).refuse_options(options)?,
        None => crate::publish::target::no_options(options)?,
    }
    let page = match table {
        // A Delta table's history comes from its snapshot and its log.
        Some(root) if crate::publish::delta::is_delta_arg(root) => {
            let shown = match root.to_str().filter(|s| is_url(s)) {
                Some(url) => url.to_string(),
                None => crate::report::shown_path(root),
            };
            let history = crate::report::history::read_delta(crate::publish::root::Root::parse(
                root, options,
            )?)
            .await?;
            crate::report::render_with(
                verdicts,
                Some(crate::report::TableHistory { shown, history }),
                failed_rows,
            )?
        }
        _ => crate::report::render_files(verdicts, table, failed_rows)?,
    };
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
