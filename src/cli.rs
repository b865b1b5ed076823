//! The command line: subcommands over the library, results mapped to exit codes.
//!
//! Verdicts go to stdout (text or JSON); diagnostics, errors and a one-line
//! summary go to stderr (with `-v`, what each pass did and cost). With
//! `--format json` an error also prints `{"verdict": "error"}` on stdout, so
//! a pipeline that archives stdout always has a record.

use std::io::Write as _;

use clap::Parser;

use crate::audit::{self, RuleSource};
use crate::engine::{Engine, EngineOptions};
use crate::error::Error;
use crate::runkey::{self, RunKey};
use crate::staged::remote::Location;
use crate::verdict::{json, junit, markdown, text, Verdict};

mod args;
mod ballista;
mod check;
mod failed_rows;
mod lint;
mod publish;
mod report;
mod suggest;
mod verify;

pub use args::{AuditArgs, ColorWhen, Command, Format, SuggestArgs, Target};
pub use ballista::Role;
use check::{check, compare_with, staged_location};
use lint::lint;
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

/// `-v`: the process's log level, set once from the arguments (as ripgrep
/// sets `log`'s maximum level); a normal run prints its result and one
/// summary line on stderr.
static VERBOSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn verbose() -> bool {
    VERBOSE.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs the command line; returns the exit code.
pub fn run(cli: Cli) -> u8 {
    if let Command::Check { audit, .. } | Command::Publish { audit, .. } = &cli.command {
        VERBOSE.store(audit.verbose, std::sync::atomic::Ordering::Relaxed);
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

fn print_stdout(s: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
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
                &staged_location(&staged, table.as_deref(), &storage_option)?,
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

fn engine_options(a: &AuditArgs) -> Result<EngineOptions, Error> {
    if let Engine::Ballista(_) = &a.engine {
        if a.memory_limit.is_some() {
            return Err(Error::Usage(
                "--memory-limit bounds the local engine only; on Ballista each executor's memory \
                 is bounded by its own pool (`dqgate ballista executor --memory-pool-size`)"
                    .into(),
            ));
        }
    }
    Ok(EngineOptions {
        threads: a.threads,
        memory_limit: a.memory_limit,
        scan_only: a.scan_only,
        engine: a.engine.clone(),
        forced_key_strategy: crate::hooks::key_strategy()
            .and_then(|s| crate::plan::keys::Forced::parse(&s)),
        fingerprint_bits: crate::hooks::fingerprint_bits(),
    })
}

/// With a Ballista engine: the scheduler accepts connections. Checked once
/// the rule file, run key and staged footers are known good, so those errors
/// come first, as with the local engine.
fn reach_engine(a: &AuditArgs) -> Result<(), Error> {
    match &a.engine {
        Engine::Local => Ok(()),
        Engine::Ballista(scheduler) => Ok(crate::exec::ballista::reach(scheduler)?),
    }
}

fn emit(v: &Verdict, format: Format, color: ColorWhen) {
    match format {
        Format::Json => print_stdout(&json::to_json(v)),
        Format::Text => print_stdout(&text::render_with(v, color.for_stdout())),
        Format::Junit => print_stdout(&junit::render(v)),
        Format::Markdown => print_stdout(&markdown::render(v)),
    }
}

/// `--staged` as a location: a directory or an object-store prefix.
fn location(staged: &std::path::Path, options: &[String]) -> Result<Location, Error> {
    Ok(Location::parse(staged, options)?)
}

/// A run key without a rule file (verify, rollback): validated, in the order given.
fn free_run_key(args: &[String]) -> Result<RunKey, Error> {
    let keys = args
        .iter()
        .map(|a| runkey::parse_pair(a).map(|(k, _)| k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RunKey::parse(args, &keys)?)
}
