//! The command line's arguments: the subcommands and the audit options they
//! share.

use std::path::PathBuf;

use clap::{Subcommand, ValueEnum};

use crate::engine::Engine;
use crate::units::{parse_age, parse_size};
use crate::verdict::text::Colour;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    /// JUnit XML: one testcase per check, for CI test-report collectors.
    Junit,
    /// A GitHub-flavoured Markdown table, for pull-request comments.
    Markdown,
}

/// When the text verdict's marks are coloured (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless `NO_COLOR` is set or `TERM` is `dumb`.
    #[default]
    Auto,
    Always,
    Never,
}

impl ColorWhen {
    /// Whether to colour, as ripgrep decides: `always` and `never` as they
    /// say; `auto` only when stdout is a terminal, `NO_COLOR` is unset or
    /// empty (no-color.org) and `TERM` is not `dumb`.
    pub fn resolve(
        self,
        terminal: bool,
        no_color: Option<&std::ffi::OsStr>,
        term: Option<&std::ffi::OsStr>,
    ) -> Colour {
        let on = match self {
            ColorWhen::Always => true,
            ColorWhen::Never => false,
            ColorWhen::Auto => {
                terminal
                    && no_color.is_none_or(|v| v.is_empty())
                    && term.is_none_or(|t| t != "dumb")
            }
        };
        if on {
            Colour::On
        } else {
            Colour::Off
        }
    }

    /// [`ColorWhen::resolve`] for this process's stdout and environment.
    pub fn for_stdout(self) -> Colour {
        use std::io::IsTerminal as _;
        self.resolve(
            std::io::stdout().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
            std::env::var_os("TERM").as_deref(),
        )
    }
}

/// What `publish --target` writes.
/// `--target`: the names of the publish target kinds
/// (`publish::open::KINDS`), each with what it is; listed catch-all first.
fn target_kinds() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        crate::publish::open::KINDS
            .iter()
            .rev()
            .map(|k| clap::builder::PossibleValue::new(k.name()).help(k.about())),
    )
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
    /// Colour the text verdict's marks: auto (a terminal, unless NO_COLOR
    /// is set), always or never.
    #[arg(long, value_enum, default_value = "auto", value_name = "WHEN")]
    pub color: ColorWhen,
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
    /// Write the offending rows of each check that fails or warns, whole
    /// (plus `_dqgate_file` and `_dqgate_row`), as one Parquet file per
    /// check in DIR (never inside the table or the staged directory).
    #[arg(long = "failed-rows", value_name = "DIR")]
    pub failed_rows: Option<PathBuf>,
    /// At most N rows per check in the --failed-rows files (the first by
    /// file, then row), or `all`.
    #[arg(long = "failed-rows-limit", value_name = "N|all", default_value = "10000",
          value_parser = crate::failed::Limit::parse)]
    pub failed_rows_limit: crate::failed::Limit,
    /// After the one-line summary on stderr, print what each pass did and
    /// what it cost.
    #[arg(short = 'v', long)]
    pub verbose: bool,
}

/// `dqgate suggest`'s arguments.
#[derive(Debug, clap::Args)]
pub struct SuggestArgs {
    /// The staged partition: a directory or an object-store URL.
    #[arg(long)]
    pub staged: PathBuf,
    /// The run key, KEY=VALUE: `partitioned by` and a check that rows
    /// belong to it.
    #[arg(long = "partition", value_name = "KEY=VALUE")]
    pub partition: Vec<String>,
    /// A published table root: `history(N)` baselines from its partitions'
    /// audit records.
    #[arg(long)]
    pub table: Option<PathBuf>,
    /// The name on the `table` line (default: the name of the --table
    /// directory, else of the staged one).
    #[arg(long)]
    pub name: Option<String>,
    /// An object-store setting, KEY=VALUE (e.g. aws_region=eu-west-1); repeatable.
    #[arg(long = "storage-option", value_name = "KEY=VALUE")]
    pub storage_option: Vec<String>,
    /// Threads for scanning (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
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
        #[arg(long, value_parser = target_kinds())]
        target: Option<String>,
        /// How many times a publish whose audit read other partitions
        /// (`across published`, `history(N)`, the table's schema) audits again
        /// when another publish changed them before its swap; then exit 4.
        #[arg(long, default_value_t = 3)]
        reaudits: usize,
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
        /// The --failed-rows directory of the audits: show the first rows of
        /// each failed-rows file the verdicts name under its check.
        #[arg(long = "failed-rows", value_name = "DIR")]
        failed_rows: Option<PathBuf>,
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
    Ballista(super::ballista::Role),
    /// Print a rule file proposed from the staged data: every statement holds
    /// on it, and a comment on each says what was observed.
    Suggest(SuggestArgs),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn colour_follows_ripgrep() {
        let tty = |w: ColorWhen, no: Option<&str>, term: Option<&str>| {
            w.resolve(true, no.map(OsStr::new), term.map(OsStr::new))
        };
        assert_eq!(tty(ColorWhen::Auto, None, Some("xterm")), Colour::On);
        assert_eq!(tty(ColorWhen::Auto, Some("1"), None), Colour::Off);
        assert_eq!(tty(ColorWhen::Auto, Some(""), None), Colour::On);
        assert_eq!(tty(ColorWhen::Auto, None, Some("dumb")), Colour::Off);
        assert_eq!(tty(ColorWhen::Always, Some("1"), Some("dumb")), Colour::On);
        assert_eq!(tty(ColorWhen::Never, None, None), Colour::Off);
        assert_eq!(ColorWhen::Auto.resolve(false, None, None), Colour::Off);
        assert_eq!(ColorWhen::Always.resolve(false, None, None), Colour::On);
    }
}
