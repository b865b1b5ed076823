//! The command line: subcommands over the library, results mapped to exit codes.
//!
//! Verdicts go to stdout (text or JSON); diagnostics, errors and timings go to
//! stderr. With `--format json` an error also prints `{"verdict": "error"}` on
//! stdout, so a pipeline that archives stdout always has a record.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, Subcommand, ValueEnum};

use crate::audit::{self, Published, RuleSource};
use crate::engine::{Engine, EngineOptions};
use crate::error::Error;
use crate::exec::remote::{is_url, Location, LocationError};
use crate::publish::{PublishOptions, PublishOutcome, Table};
use crate::runkey::{self, RunKey};
use crate::verdict::{json, junit, markdown, text, Verdict};

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    /// JUnit XML: one testcase per check, for CI test-report collectors.
    Junit,
    /// A GitHub-flavoured Markdown table, for pull-request comments.
    Markdown,
}

/// What `publish --target` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// `ROOT/k=v/` directories swapped atomically by rename.
    Hive,
    /// A Delta Lake table: one transaction per publish.
    Delta,
}

#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// The rule file (.dq).
    pub rules: PathBuf,
    /// The staged partition: a directory, or an object-store URL (s3://, gs://,
    /// az://, file://) of a prefix; Parquet files are searched recursively.
    #[arg(long)]
    pub staged: PathBuf,
    /// An object-store setting, KEY=VALUE (e.g. aws_region=eu-west-1); repeatable.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_option: Vec<String>,
    /// The run key, KEY=VALUE, once per `partitioned by` column.
    #[arg(long = "partition", value_name = "KEY=VALUE")]
    pub partition: Vec<String>,
    /// Output format of the verdict.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Threads for scanning (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Memory bound for the engine, e.g. 2GiB; larger work spills to disk.
    #[arg(long, value_parser = parse_size)]
    pub memory_limit: Option<usize>,
    /// Scan for every metric, even those the Parquet footers answer exactly.
    #[arg(long)]
    pub scan_only: bool,
    /// Where the plans run: `local` (in this process) or
    /// `ballista://HOST:PORT` (an Apache DataFusion Ballista cluster's
    /// scheduler; see `dqgate ballista`).
    #[arg(long, default_value = "local", value_parser = Engine::parse, value_name = "ENGINE")]
    pub engine: Engine,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Audit the staged files and print the verdict. Writes nothing.
    Check {
        #[command(flatten)]
        audit: AuditArgs,
        /// The published table root, to resolve `published.*` references.
        #[arg(long)]
        table: Option<PathBuf>,
    },
    /// Audit, and on pass atomically publish the staged partition into the table.
    Publish {
        #[command(flatten)]
        audit: AuditArgs,
        /// The published table root.
        #[arg(long)]
        table: PathBuf,
        /// How many displaced versions to keep for rollback.
        #[arg(long, default_value_t = 3)]
        keep: usize,
        /// The table format: a Hive directory swapped by rename, or a Delta
        /// Lake table (one commit per publish). Default: delta when ROOT
        /// holds `_delta_log/`, else hive.
        #[arg(long, value_enum)]
        target: Option<Target>,
    },
    /// Recompute a published partition's fingerprint and compare it with its audit record.
    Verify {
        root: PathBuf,
        #[arg(long = "partition", value_name = "KEY=VALUE", required = true)]
        partition: Vec<String>,
        /// An object-store setting for a Delta table on an object store, KEY=VALUE; repeatable.
        #[arg(long = "storage-option", value_name = "KEY=VALUE")]
        storage_option: Vec<String>,
    },
    /// Atomically restore the version the last publish displaced.
    Rollback {
        root: PathBuf,
        #[arg(long = "partition", value_name = "KEY=VALUE", required = true)]
        partition: Vec<String>,
        /// An object-store setting for a Delta table on an object store, KEY=VALUE; repeatable.
        #[arg(long = "storage-option", value_name = "KEY=VALUE")]
        storage_option: Vec<String>,
    },
    /// Render verdict JSON files (and a table's published history) as one static HTML page.
    Report {
        /// Verdicts as written by `check --format json` or `publish --format json`.
        #[arg(required = true, value_name = "VERDICT.json")]
        verdicts: Vec<PathBuf>,
        /// A published table root: chart each metric across its published partitions.
        #[arg(long, value_name = "ROOT")]
        table: Option<PathBuf>,
        /// Write the page here instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// An object-store setting for a Delta table on an object store, KEY=VALUE; repeatable.
        #[arg(long = "storage-option", value_name = "KEY=VALUE")]
        storage_option: Vec<String>,
    },
    /// Clean leftovers of interrupted publishes under a table root.
    Gc {
        root: PathBuf,
        /// Delta tables: only files at least this old are removed (copies of
        /// a publish in flight are not yet in the log), e.g. 7d, 12h, 30m, 0s.
        #[arg(long, value_parser = parse_age, default_value = "7d")]
        min_age: std::time::Duration,
        /// An object-store setting for a Delta table on an object store, KEY=VALUE; repeatable.
        #[arg(long = "storage-option", value_name = "KEY=VALUE")]
        storage_option: Vec<String>,
    },
    /// Parse and type-check a rule file (against the staged schema with --staged), reading no data.
    Lint {
        rules: PathBuf,
        #[arg(long)]
        staged: Option<PathBuf>,
        #[arg(long = "storage-option", value_name = "KEY=VALUE")]
        storage_option: Vec<String>,
        /// `json` prints the diagnostics (code, line, column, message) on
        /// stdout as one JSON object; text or json only.
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Run a Ballista scheduler or executor that can run dqgate's plans
    /// (for `--engine ballista://HOST:PORT`).
    #[command(subcommand)]
    Ballista(crate::exec::ballista::Role),
    /// Print the plans the rule file compiles to.
    Explain {
        rules: PathBuf,
        #[arg(long)]
        staged: PathBuf,
        #[arg(long = "partition", value_name = "KEY=VALUE")]
        partition: Vec<String>,
        /// The published table root, to plan `unique(...) across published`.
        #[arg(long)]
        table: Option<PathBuf>,
        #[arg(long = "storage-option", value_name = "KEY=VALUE")]
        storage_option: Vec<String>,
    },
}

/// Parses an age: a whole number with `s`, `m`, `h` or `d` (`7d`, `0s`).
pub fn parse_age(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let (num, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not an age such as 7d, 12h, 30m or 0s"))?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{s}` is not an age such as 7d, 12h, 30m or 0s")),
    };
    n.checked_mul(seconds)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("`{s}` is too long an age"))
}

/// Parses `2GiB`, `512MB`, `1g`, `1048576`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size like 2GiB"))?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tb" | "tib" => 1024f64.powi(4),
        other => return Err(format!("unknown size unit `{other}`")),
    };
    Ok((n * mult) as usize)
}

/// Runs the command line; returns the exit code.
pub fn run(cli: Cli) -> u8 {
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
        } => {
            let delta = match target {
                Some(t) => t == Target::Delta,
                None => crate::publish::delta::is_delta_arg(&table),
            };
            if delta {
                publish_delta(audit, table).await
            } else {
                publish(audit, table, keep).await
            }
        }
        Command::Verify {
            root,
            partition,
            storage_option,
        } if crate::publish::delta::is_delta_arg(&root) => {
            let key = free_run_key(&partition)?;
            let root = delta_root(&root, &storage_option)?;
            let report = crate::publish::delta::verify(&root, &key).await?;
            Ok(show_verify(&key, &report))
        }
        Command::Verify {
            root,
            partition,
            storage_option,
        } => {
            no_options(&storage_option)?;
            verify(root, partition)
        }
        Command::Rollback {
            root,
            partition,
            storage_option,
        } if crate::publish::delta::is_delta_arg(&root) => {
            let key = free_run_key(&partition)?;
            let root = delta_root(&root, &storage_option)?;
            let version = crate::publish::delta::rollback(&root, &key).await?;
            println!(
                "rolled back {} to version {version} (a new Delta commit)",
                key.rel_dir()
            );
            Ok(0)
        }
        Command::Rollback {
            root,
            partition,
            storage_option,
        } => {
            no_options(&storage_option)?;
            let key = free_run_key(&partition)?;
            let version = Table::open(&root)?.rollback(&key)?;
            println!("rolled back {} to version {version}", key.rel_dir());
            Ok(0)
        }
        Command::Gc {
            root,
            min_age,
            storage_option,
        } => {
            let removed = if crate::publish::delta::is_delta_arg(&root) {
                let root = delta_root(&root, &storage_option)?;
                crate::publish::delta::gc(&root, min_age).await?
            } else {
                no_options(&storage_option)?;
                Table::open(&root)?.gc()?
            };
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
        } => {
            report(
                &verdicts,
                table.as_deref(),
                output.as_deref(),
                &storage_option,
            )
            .await
        }
        Command::Ballista(role) => crate::exec::ballista::serve(role).await,
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
                let keys = &prepared.checked.partitioned_by;
                prepared.table = Some(published_table(root, &storage_option, keys).await?);
            }
            print_stdout(&prepared.explain().await?);
            Ok(0)
        }
    }
}

/// Prepares the audit of a `publish`, which always needs a run key.
async fn prepare_publish(a: &AuditArgs) -> Result<audit::Prepared, Error> {
    audit::prepare(
        RuleSource::read(&a.rules)?,
        &a.staged,
        &a.partition,
        true,
        &engine_options(a)?,
    )
    .await
    .and_then(|prepared| reach_engine(a).map(|()| prepared))
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
    })
}

/// With a Ballista engine: the scheduler accepts connections. Checked once
/// the rule file, run key and staged footers are known good, so those errors
/// come first, as with the local engine.
fn reach_engine(a: &AuditArgs) -> Result<(), Error> {
    match &a.engine {
        Engine::Local => Ok(()),
        Engine::Ballista(scheduler) => crate::exec::ballista::reach(scheduler),
    }
}

fn emit(v: &Verdict, format: Format) {
    match format {
        Format::Json => print_stdout(&json::to_json(v)),
        Format::Text => print_stdout(&text::render(v)),
        Format::Junit => print_stdout(&junit::render(v)),
        Format::Markdown => print_stdout(&markdown::render(v)),
    }
}

/// `--staged` as a location: a directory or an object-store prefix.
fn location(staged: &std::path::Path, options: &[String]) -> Result<Location, Error> {
    Location::parse(staged, options).map_err(location_error)
}

fn location_error(e: LocationError) -> Error {
    match e {
        // The store's configuration (credentials files, account names) is
        // unusable: the data cannot be read (exit 3), like wrong credentials.
        LocationError::Build { .. } => Error::Audit(e.to_string()),
        _ => Error::Usage(e.to_string()),
    }
}

/// A Delta table's root: a directory or an object-store prefix.
fn delta_root(
    root: &std::path::Path,
    options: &[String],
) -> Result<crate::publish::store::Root, Error> {
    crate::publish::store::Root::parse(root, options).map_err(location_error)
}

/// `--storage-option` given where no object store is.
fn no_options(options: &[String]) -> Result<(), Error> {
    match options {
        [] => Ok(()),
        _ => Err(Error::Usage(LocationError::OptionsWithoutStore.to_string())),
    }
}

/// A Hive publish's `--table`: never a Delta table (a Hive swap of its
/// directories would break it), never an object store (no rename there).
fn hive_publish_table(root: &std::path::Path) -> Result<(), Error> {
    match root.to_str().filter(|s| is_url(s)) {
        None if crate::publish::delta::is_delta(root) => Err(Error::Usage(format!(
            "`{}` is a Delta table: publish to it with --target delta (or without --target), never as a Hive table",
            root.display()
        ))),
        None => Ok(()),
        Some(url) => Err(refuse_remote_publish(url)),
    }
}

fn refuse_remote_publish(url: &str) -> Error {
    Error::Usage(format!(
        "cannot publish with `{url}`: a plain directory on an object store cannot be swapped atomically \
         (there is no rename), and dqgate never degrades to copy-and-delete; publish into a Delta Lake table \
         instead (`--target delta`: one atomic, conditional commit), or stage and publish on a local file system"
    ))
}

async fn check(a: AuditArgs, table: Option<PathBuf>) -> Result<u8, Error> {
    let started = Instant::now();
    let mut prepared = audit::prepare_at(
        RuleSource::read(&a.rules)?,
        &staged_location(&a.staged, table.as_deref(), &a.storage_option)?,
        &a.partition,
        false,
        &engine_options(&a)?,
    )
    .await?;
    reach_engine(&a)?;
    if let Some(root) = &table {
        let keys = &prepared.checked.partitioned_by;
        prepared.table = Some(published_table(root, &a.storage_option, keys).await?);
    }
    let published = match &prepared.table {
        None => Published::NotGiven,
        Some(t) => current_version(t, &prepared.run_key).await?,
    };
    let past = past_runs(&prepared).await?;
    let verdict = prepared.run_with(&published, past.as_ref()).await?;
    emit(&verdict, a.format);
    timing(&prepared, started);
    Ok(if verdict.passed() { 0 } else { 1 })
}

/// `--staged` as a location. The `--storage-option`s belong to whichever
/// of `--staged` and `--table` is on an object store (both, when both are).
fn staged_location(
    staged: &std::path::Path,
    table: Option<&std::path::Path>,
    options: &[String],
) -> Result<Location, Error> {
    let remote_table = table.and_then(|t| t.to_str()).is_some_and(is_url);
    let staged_remote = staged.to_str().is_some_and(is_url);
    location(
        staged,
        if remote_table && !staged_remote {
            &[]
        } else {
            options
        },
    )
}

/// `--table` as the audit reads it: a Hive table root, or a Delta table (a
/// directory with `_delta_log/`, or any object-store URL) read through its
/// current snapshot.
async fn published_table(
    root: &std::path::Path,
    options: &[String],
    keys: &[String],
) -> Result<audit::PublishedTable, Error> {
    use crate::publish::delta;
    if delta::is_delta_arg(root) {
        let root = delta_root(root, options)?;
        Ok(audit::PublishedTable::Delta(
            delta::Snapshot::load(root, keys).await?,
        ))
    } else {
        Ok(audit::PublishedTable::Hive(root.to_path_buf()))
    }
}

/// The run key's published version in the table.
async fn current_version(table: &audit::PublishedTable, key: &RunKey) -> Result<Published, Error> {
    Ok(match table {
        audit::PublishedTable::Hive(root) => match Table::open(root)?.current(key)? {
            None => Published::Absent,
            Some(v) => Published::Version {
                source: audit::PartSource::Dir(v.dir),
                fingerprint: v.fingerprint,
            },
        },
        audit::PublishedTable::Delta(snapshot) => match snapshot.current(key).await? {
            None => Published::Absent,
            Some((files, fingerprint)) => Published::Version {
                source: audit::PartSource::Files {
                    root: snapshot.root.clone(),
                    files,
                },
                fingerprint,
            },
        },
    })
}

/// The table's published partitions, read only when a rule uses `history(N)`.
async fn past_runs(
    p: &audit::Prepared,
) -> Result<Option<crate::verdict::history::PastRuns>, Error> {
    if !p.checked.uses_history() {
        return Ok(None);
    }
    Ok(match &p.table {
        None => None,
        Some(audit::PublishedTable::Hive(root)) => {
            Some(Table::open(root)?.past_runs(&p.checked.partitioned_by)?)
        }
        Some(audit::PublishedTable::Delta(snapshot)) => Some(snapshot.past_runs().await),
    })
}

fn timing(p: &audit::Prepared, started: Instant) {
    let spilled = p.spilled_bytes.load(std::sync::atomic::Ordering::Relaxed);
    let spill = if spilled > 0 {
        format!(
            ", spilled {:.1} MiB to disk",
            spilled as f64 / (1024.0 * 1024.0)
        )
    } else {
        String::new()
    };
    let remote = match &p.input.location {
        Location::Remote(r) => {
            let (gets, bytes) = r.store.reads();
            format!(
                " from {}, {gets} GET/HEAD request(s), {:.1} MiB read",
                r.url,
                bytes as f64 / (1024.0 * 1024.0)
            )
        }
        Location::Local(_) => String::new(),
    };
    eprintln!(
        "dqgate: audited {} file(s), {} row(s){remote} in {:.2} s ({} pass(es){spill})",
        p.input.files.len(),
        p.input.row_count(),
        started.elapsed().as_secs_f64(),
        p.plan.scans()
    );
}

async fn publish(a: AuditArgs, root: PathBuf, keep: usize) -> Result<u8, Error> {
    let started = Instant::now();
    if let Some(url) = a.staged.to_str().filter(|s| is_url(s)) {
        return Err(refuse_remote_publish(url));
    }
    hive_publish_table(&root)?;
    let table = Table::open(&root)?;
    let mut prepared = prepare_publish(&a).await?;
    prepared.table = Some(audit::PublishedTable::Hive(root.clone()));
    let published = current_version(
        prepared.table.as_ref().expect("just set"),
        &prepared.run_key,
    )
    .await?;
    let audited_against = match &published {
        Published::Version { fingerprint, .. } => Some(fingerprint.clone()),
        _ => None,
    };
    let past = past_runs(&prepared).await?;
    let verdict = prepared.run_with(&published, past.as_ref()).await?;
    let Some(passed) = gate(verdict, a.format, &prepared, started) else {
        return Ok(1);
    };
    let opts = PublishOptions {
        keep_versions: keep,
    };
    let outcome = table.publish(
        &prepared.run_key,
        &a.staged,
        &passed,
        audited_against.as_deref(),
        &opts,
    );
    finish_publish(outcome, &passed, a.format, &prepared.run_key)
}

/// Prints the verdict (JUnit waits for the publish outcome) and timings;
/// the passed verdict, or `None` when it failed (exit 1).
fn gate(
    verdict: Verdict,
    format: Format,
    prepared: &audit::Prepared,
    started: Instant,
) -> Option<crate::verdict::PassedVerdict> {
    // JUnit is one XML document: a publish error after a passing verdict
    // becomes an <error> testcase inside it, so it is printed afterwards.
    if format != Format::Junit || !verdict.passed() {
        emit(&verdict, format);
    }
    timing(prepared, started);
    match verdict.into_passed() {
        Ok(p) => Some(p),
        Err(_) => {
            eprintln!("dqgate: verdict failed; nothing was published");
            None
        }
    }
}

/// Reports a publish outcome (on stderr; in the JUnit document too).
fn finish_publish(
    outcome: Result<PublishOutcome, crate::publish::PublishError>,
    passed: &crate::verdict::PassedVerdict,
    format: Format,
    key: &RunKey,
) -> Result<u8, Error> {
    let junit = format == Format::Junit;
    if junit {
        let error = outcome.as_ref().err().map(|e| e.to_string());
        print_stdout(&junit::render_with_error(passed, error.as_deref()));
    }
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) if junit => {
            eprintln!("dqgate: error: {e}");
            return Ok(e.exit_code());
        }
        Err(e) => return Err(e.into()),
    };
    match outcome {
        PublishOutcome::Published { version, displaced } => {
            let shown = displaced.map_or(String::new(), |d| format!(", displacing {d}"));
            eprintln!(
                "dqgate: published {} as version {version}{shown}",
                key.rel_dir()
            );
        }
        PublishOutcome::AlreadyPublished { version } => {
            eprintln!(
                "dqgate: already published: {} is version {version} with the same files; nothing changed",
                key.rel_dir()
            );
        }
    }
    Ok(0)
}

/// `publish --target delta`: the audit, then one Delta commit (see
/// `publish::delta`), on a local file system or an object store; the staged
/// files may be on either. The published side of the rules (`published.*`,
/// `history(N)`, `schema matches published`, `across published`) is read
/// from the table's current snapshot.
async fn publish_delta(a: AuditArgs, table_arg: PathBuf) -> Result<u8, Error> {
    use crate::publish::delta;
    let started = Instant::now();
    let root = delta_root(&table_arg, &a.storage_option)?;
    if root.occupied().await? && !root.has_log().await? {
        return Err(Error::Usage(format!(
            "`{}` is neither empty nor a Delta table (no `_delta_log/`): a Delta table is created in a new or empty location, \
             never over a Hive table's partitions",
            root.show()
        )));
    }
    let mut prepared = audit::prepare_at(
        RuleSource::read(&a.rules)?,
        &staged_location(&a.staged, Some(table_arg.as_path()), &a.storage_option)?,
        &a.partition,
        true,
        &engine_options(&a)?,
    )
    .await?;
    reach_engine(&a)?;
    // The partition's txn before anything is read: the commit must find it
    // unchanged (the snapshot read next is at least as new).
    let audited_against = delta::current_txn(&root, &prepared.run_key).await?;
    let snapshot = delta::Snapshot::load(root.clone(), &prepared.checked.partitioned_by).await?;
    prepared.table = Some(audit::PublishedTable::Delta(snapshot));
    let published = current_version(
        prepared.table.as_ref().expect("just set"),
        &prepared.run_key,
    )
    .await?;
    let past = past_runs(&prepared).await?;
    let verdict = prepared.run_with(&published, past.as_ref()).await?;
    let Some(passed) = gate(verdict, a.format, &prepared, started) else {
        return Ok(1);
    };
    let outcome = delta::publish(
        &root,
        &prepared.run_key,
        &prepared.checked.partitioned_by,
        &prepared.input,
        &passed,
        audited_against,
    )
    .await;
    finish_publish(outcome, &passed, a.format, &prepared.run_key)
}

/// A run key without a rule file (verify, rollback): validated, in the order given.
fn free_run_key(args: &[String]) -> Result<RunKey, Error> {
    let keys = args
        .iter()
        .map(|a| runkey::parse_pair(a).map(|(k, _)| k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RunKey::parse(args, &keys)?)
}

fn verify(root: PathBuf, partition: Vec<String>) -> Result<u8, Error> {
    let key = free_run_key(&partition)?;
    let report = Table::open(&root)?.verify(&key)?;
    Ok(show_verify(&key, &report))
}

fn show_verify(key: &RunKey, report: &crate::publish::VerifyReport) -> u8 {
    if report.differences.is_empty() {
        println!(
            "verified: {} is version {} ({})",
            key.rel_dir(),
            report.version,
            report.fingerprint
        );
        0
    } else {
        println!(
            "NOT verified: {} differs from its audit record:",
            key.rel_dir()
        );
        for d in &report.differences {
            println!("  {d}");
        }
        1
    }
}

async fn report(
    verdicts: &[PathBuf],
    table: Option<&std::path::Path>,
    output: Option<&std::path::Path>,
    options: &[String],
) -> Result<u8, Error> {
    let page = match table {
        // A Delta table's history comes from its snapshot and its log.
        Some(root) if crate::publish::delta::is_delta_arg(root) => {
            let shown = match root.to_str().filter(|s| is_url(s)) {
                Some(url) => url.to_string(),
                None => crate::report::shown_path(root),
            };
            let history = crate::report::history::read_delta(delta_root(root, options)?).await?;
            crate::report::render_with(
                verdicts,
                Some(crate::report::TableHistory { shown, history }),
            )?
        }
        _ => {
            no_options(options)?;
            crate::report::render_files(verdicts, table)?
        }
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

async fn lint(
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
            let staged = location(&dir, &options)?;
            audit::prepare_at(source, &staged, &[], false, &EngineOptions::default()).await?;
        }
    }
    match format {
        Format::Json => print_stdout(&json::lint_ok_json(&shown)),
        _ => println!("{shown}: ok"),
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages() {
        assert_eq!(
            parse_age("7d"),
            Ok(std::time::Duration::from_secs(7 * 86_400))
        );
        assert_eq!(parse_age("0s"), Ok(std::time::Duration::ZERO));
        assert!(parse_age("7").is_err());
        assert!(parse_age("week").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("512mb"), Ok(512 << 20));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("lots").is_err());
    }
}
