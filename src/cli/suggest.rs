//! `dqgate suggest`: print a rule file proposed from the staged data, and
//! one summary line on stderr.

use std::path::Path;
use std::time::Instant;

use super::args::SuggestArgs;
use super::options::free_run_key;
use super::output::print_stdout;
use crate::engine::EngineOptions;
use crate::error::Error;
use crate::staged::{Location, StagedInput};
use crate::suggest::{suggest as propose, table_name, Request};
use crate::verdict::human::count_of;

pub(super) async fn suggest(a: SuggestArgs) -> Result<u8, Error> {
    let started = Instant::now();
    let run_key = if a.partition.is_empty() {
        Vec::new()
    } else {
        free_run_key(&a.partition)?.pairs().to_vec()
    };
    let location = Location::parse_beside_table(&a.staged, a.table.as_deref(), &a.storage_option)?;
    let input = StagedInput::open_at(&location).await?;
    let keys: Vec<String> = run_key.iter().map(|(k, _)| k.clone()).collect();
    let past = match &a.table {
        None => None,
        Some(root) => {
            let kind = crate::publish::choose(None, root);
            // The options may belong to staged files on an object store.
            if !crate::staged::remote::is_url(&a.staged.to_string_lossy()) {
                kind.refuse_options(&a.storage_option)?;
            }
            let target = kind.open(root, &a.storage_option, None).await?;
            let snapshot = target
                .snapshot(crate::publish::Read {
                    key: &crate::runkey::RunKey::default(),
                    partitioned_by: &keys,
                    whole: true,
                    to_publish: false,
                })
                .await?;
            Some(snapshot.past_runs().await)
        }
    };
    let request = Request {
        table: a.name.clone().unwrap_or_else(|| default_name(&a)),
        run_key,
        past: past.as_ref(),
    };
    let engine = EngineOptions {
        threads: a.threads,
        ..EngineOptions::default()
    };
    let suggestion = propose(&input, &request, &engine).await?;
    print_stdout(&suggestion.text);
    eprintln!(
        "dqgate: suggested {} from {}, {} in {:.2} s ({})",
        count_of(suggestion.statements as u64, "statement", "statements"),
        count_of(input.files.len() as u64, "file", "files"),
        count_of(input.row_count(), "row", "rows"),
        started.elapsed().as_secs_f64(),
        count_of(suggestion.passes as u64, "pass", "passes")
    );
    Ok(0)
}

/// The `--table` directory's name, else the staged one's (above any
/// `key=value` levels), as an identifier.
fn default_name(a: &SuggestArgs) -> String {
    let path = a.table.as_deref().unwrap_or(&a.staged);
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let name = absolute
        .components()
        .rev()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .find(|n| !n.contains('=') && n != "." && n != "/" && !n.is_empty())
        .unwrap_or_default();
    table_name(Path::new(&name).to_string_lossy().trim_end_matches('/'))
}
