//! The command line: subcommands over the library, results mapped to exit codes.
//!
//! Verdicts go to stdout (text or JSON); diagnostics, errors and a one-line
//! summary go to stderr (with `-v`, what each pass did and cost). With
//! `--format json` an error also prints `{"verdict": "error"}` on stdout, so
//! a pipeline that archives stdout always has a record.

use clap::Parser;

use crate::audit::{self, RuleSource};
use crate::engine::EngineOptions;
use crate::error::Error;
use crate::staged::Location;
use crate::verdict::{json, junit, markdown};

mod args;
mod ballista;
mod check;
mod failed_rows;
mod lint;
mod options;
mod output;
mod publish;
mod report;
mod suggest;
mod verify;

pub use args::{AuditArgs, ColorWhen, Command, Format, SuggestArgs};
pub use ballista::Role;
use check::{check, compare_with};
use lint::lint;
use options::free_run_key;
use output::print_stdout;
use publish::publish;
use report::report;
use verify::verify;

#[derive(Debug, Parser)]
#[command(
    name = "dqgate",
    version,
    about = "Audit a staged Parquet partition against a rule file; publish it atomically only if it passes."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Runs the command line; returns the exit code.
pub fn run(cli: Cli) -> u8 {
    if let Command::Check { audit, .. } | Command::Publish { audit, .. } = &cli.command {
        output::set_verbose(audit.verbose);
    }
    let format = match &cli.command {
        Command::Check { audit, .. } | Command::Publish { audit, .. } => audit.format,
        Command::Lint { format, .. } => *format,
        _ => Format::Text,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("dqgate: cannot start the runtime: {e}");
            return 3;
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            report_error(&e, format);
            e.exit_code()
        }
    }
}

fn report_error(e: &Error, format: Format) {
    match e {
        Error::Rules { .. } => eprint!("{e}"),
        _ => eprintln!("dqgate: error: {e}"),
    }
    if format != Format::Text {
        let msg = match e {
            Error::Rules {
                diagnostics, file, ..
            } => format!(
                "invalid rule file {file}: {}",
                diagnostics
                    .iter()
                    .map(|d| d.message.clone())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            other => other.to_string(),
        };
        print_stdout(&match (format, e) {
            (Format::Junit, _) => junit::error(&msg),
            (Format::Markdown, _) => markdown::error(&msg),
            (
                _,
                Error::Rules {
                    file,
                    source_text,
                    diagnostics,
                },
            ) => json::rule_error_json(&msg, file, source_text, diagnostics),
            _ => json::error_json(&msg),
        });
    }
}

async fn dispatch(command: Command) -> Result<u8, Error> {
    match command {
        Command::Check { audit, table } => check(audit, table).await,
        Command::Publish {
            audit,
            table,
            keep,
            target,
            reaudits,
        } => publish(audit, table, keep, target, reaudits).await,
        Command::Verify {
            root,
            partition,
            storage_option,
        } => verify(root, partition, storage_option).await,
        Command::Rollback {
            root,
            partition,
            storage_option,
        } => {
            let kind = crate::publish::choose(None, &root);
            kind.refuse_options(&storage_option)?;
            let key = free_run_key(&partition)?;
            let target = kind.open(&root, &storage_option, None).await?;
            let rolled = target.rollback(&key).await?;
            let how = rolled.how.map_or(String::new(), |h| format!(" ({h})"));
            println!(
                "rolled back {} to version {}{how}",
                key.rel_dir(),
                rolled.version
            );
            Ok(0)
        }
        Command::Gc {
            root,
            min_age,
            storage_option,
        } => {
            let kind = crate::publish::choose(None, &root);
            kind.refuse_options(&storage_option)?;
            let target = kind.open(&root, &storage_option, None).await?;
            let removed = target.gc(min_age).await?;
            for r in &removed {
                println!("removed {r}");
            }
            println!("{} leftover(s) removed", removed.len());
            Ok(0)
        }
        Command::Lint {
            rules,
            staged,
            storage_option,
            format,
        } => lint(rules, staged, storage_option, format).await,
        Command::Report {
            verdicts,
            table,
            output,
            storage_option,
            failed_rows,
        } => {
            report(
                &verdicts,
                table.as_deref(),
                output.as_deref(),
                &storage_option,
                failed_rows.as_deref(),
            )
            .await
        }
        Command::Ballista(role) => ballista::serve(role).await,
        Command::Suggest(args) => suggest::suggest(args).await,
        Command::Explain {
            rules,
            staged,
            partition,
            table,
            storage_option,
        } => {
            let mut prepared = audit::prepare_at(
                RuleSource::read(&rules)?,
                &Location::parse_beside_table(&staged, table.as_deref(), &storage_option)?,
                &partition,
                false,
                &EngineOptions::default(),
            )
            .await?;
            if let Some(root) = &table {
                compare_with(&mut prepared, root, &storage_option).await?;
            }
            print_stdout(&prepared.explain().await?);
            Ok(0)
        }
    }
}
