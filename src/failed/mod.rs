//! `--failed-rows DIR`: the rows behind each check that did not hold, whole,
//! as one Parquet file per check.
//!
//! Runs after the verdict, and only for checks that failed or warned:
//! `request` says which checks have offending rows and what selects them;
//! `select` plans them over the staged files with each row's file and
//! position ([`FILE_COLUMN`], [`ROW_COLUMN`]); `collect` keeps each
//! check's first rows in (file, row) order; [`write()`] writes each file
//! atomically. The passes: one filtered scan for every row predicate
//! together (`values`, `all`, `count(where)`, nulls, the keys the verdict's
//! samples already list), and one for each other key set, reference and
//! `across published` check that did not hold.
//!
//! Writing the rows never changes the verdict: what could not be written is
//! returned as errors beside the files that were.

mod collect;
mod request;
mod select;
mod write;

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use datafusion::arrow::array::{Array, BooleanArray, Int64Array, RecordBatch};
use datafusion::dataframe::DataFrame;
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use crate::check::CheckedRules;
use crate::exec::join::PublishedPart;
use crate::exec::ExecError;
use crate::staged::reference::Dataset;
use crate::staged::StagedInput;
use crate::verdict::{FailedRows, Verdict};
use collect::{Kept, Locations, RouteError};
pub use collect::{FILE_COLUMN, PARTITION_COLUMN, ROW_COLUMN};
pub use request::{requests, Request, Rows};
pub use write::{file_name, MARK};

/// How many rows a check's file holds at most (`--failed-rows-limit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Rows(usize),
    All,
}

impl Limit {
    /// The default: enough rows to see a pattern and fix a producer, few
    /// enough that a check failing on every row of a large partition
    /// writes a small file.
    pub const DEFAULT: Limit = Limit::Rows(10_000);

    /// `N` (at least 1) or `all`.
    pub fn parse(s: &str) -> Result<Limit, OptionError> {
        if s == "all" {
            return Ok(Limit::All);
        }
        match s.replace('_', "").parse::<usize>() {
            Ok(0) => Err(OptionError::ZeroLimit),
            Ok(n) => Ok(Limit::Rows(n)),
            Err(_) => Err(OptionError::NotALimit(s.to_string())),
        }
    }

    fn rows(self) -> Option<usize> {
        match self {
            Limit::Rows(n) => Some(n),
            Limit::All => None,
        }
    }
}

/// Why `--failed-rows` or `--failed-rows-limit` is refused (exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error("the limit must be at least 1 row (or `all`)")]
    ZeroLimit,
    #[error("`{0}` is neither a row count nor `all`")]
    NotALimit(String),
    #[error("--failed-rows takes a local directory, not `{}`", .0.display())]
    NotLocal(PathBuf),
    #[error(
        "--failed-rows `{}` is inside the {what} `{}`: its files would be read as data there; \
         choose a directory outside it",
        .dir.display(),
        .root.display()
    )]
    Inside {
        dir: PathBuf,
        what: &'static str,
        root: PathBuf,
    },
}

/// Where the files go and how many rows each holds.
#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    pub limit: Limit,
}

impl Options {
    /// Refuses a DIR inside `root` (the table root or the staged
    /// directory): files written there would be read as the table's or the
    /// partition's data. Both are compared as absolute paths with symlinks
    /// resolved as far as they exist.
    pub fn refuse_inside(&self, root: &Path, what: &'static str) -> Result<(), OptionError> {
        let as_text = |p: &Path| p.to_str().is_some_and(crate::staged::remote::is_url);
        if as_text(&self.dir) {
            return Err(OptionError::NotLocal(self.dir.clone()));
        }
        if as_text(root) {
            return Ok(());
        }
        let (dir, root_abs) = (resolved(&self.dir), resolved(root));
        if dir.starts_with(&root_abs) {
            return Err(OptionError::Inside {
                dir: self.dir.clone(),
                what,
                root: root.to_path_buf(),
            });
        }
        Ok(())
    }
}

/// `path` absolute, `.` and `..` resolved, symlinks resolved in the part
/// that exists.
fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut clean = PathBuf::new();
    for c in absolute.components() {
        match c {
            Component::ParentDir => {
                clean.pop();
            }
            Component::CurDir => {}
            c => clean.push(c),
        }
    }
    let mut existing = clean.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return clean,
        }
    }
    let mut out = std::fs::canonicalize(&existing).unwrap_or(existing);
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    out
}

/// Why some failed rows could not be written. The verdict stands; the
/// command line reports these on stderr.
#[derive(Debug, thiserror::Error)]
pub enum FailedRowsError {
    /// DIR cannot be created.
    #[error("cannot create the failed-rows directory `{dir}`: {source}")]
    Dir {
        dir: String,
        #[source]
        source: std::io::Error,
    },
    /// A staged column has the name of a column the files add.
    #[error("the staged files have a column `{0}`, the name the failed-rows files give each row's position; no failed rows were written")]
    ColumnClash(String),
    /// A pass selecting rows failed, or what it needed could not be read
    /// (the published partitions of `across published`).
    #[error("selecting the failed rows of line {lines}: {source}")]
    Select {
        lines: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file could not be written.
    #[error("cannot write the failed rows of line {line} to `{path}`: {source}")]
    Write {
        line: usize,
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// After DIR refused a file for a reason that holds for every file
    /// (read-only, full, no permission), the other files were not tried.
    #[error("{count} more failed-rows file(s) not written to `{dir}` (lines {lines}) for the same reason")]
    NotTried {
        count: usize,
        dir: String,
        lines: String,
    },
}

/// Whether a write error holds for every file of DIR.
fn whole_dir(e: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(
        e.kind(),
        K::ReadOnlyFilesystem | K::StorageFull | K::PermissionDenied | K::QuotaExceeded
    ) || e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<datafusion::parquet::errors::ParquetError>())
        .is_some_and(|p| p.to_string().contains("No space left on device"))
}

/// What the other passes need besides the staged files.
pub struct Sources<'a> {
    /// The `reference` tables, by name.
    pub references: &'a [(String, Dataset)],
    /// The other published partitions (`across published`), when read.
    pub published: Option<&'a [PublishedPart]>,
    /// Whether the joins run on the key engine (not forced to DataFusion's),
    /// and the test-only bits its fingerprints keep, as the audit's joins.
    pub engine: (bool, Option<u32>),
}

/// The files written, by check index, and what could not be.
#[derive(Debug, Default)]
pub struct Written {
    pub files: Vec<(usize, FailedRows)>,
    pub errors: Vec<FailedRowsError>,
    /// Passes over the staged files that selected the rows.
    pub passes: usize,
}

/// Selects and writes the offending rows of every check of `verdict` that
/// did not hold and has some.
pub async fn write(
    ctx: &SessionContext,
    input: &StagedInput,
    rules: &CheckedRules,
    verdict: &Verdict,
    sources: &Sources<'_>,
    opts: &Options,
) -> Written {
    let mut out = Written::default();
    let wanted = requests(rules, verdict, &input.schema);
    if wanted.is_empty() {
        return out;
    }
    for name in [FILE_COLUMN, ROW_COLUMN, PARTITION_COLUMN] {
        if input.schema.field_with_name(name).is_ok() {
            out.errors.push(FailedRowsError::ColumnClash(name.into()));
            return out;
        }
    }
    if let Err(source) = std::fs::create_dir_all(&opts.dir) {
        out.errors.push(FailedRowsError::Dir {
            dir: opts.dir.display().to_string(),
            source,
        });
        return out;
    }
    let ctx = &late_materializing(ctx);
    let mut kept: HashMap<usize, Kept> = wanted
        .iter()
        .map(|r| (r.check, Kept::new(opts.limit.rows())))
        .collect();
    let planned = passes(ctx, input, &wanted, sources).await;
    out.passes = planned.len();
    for pass in planned {
        let lines = pass.lines.clone();
        if let Err(source) = pass.run(input, &mut kept).await {
            out.errors.push(FailedRowsError::Select {
                lines,
                source: source.into(),
            });
        }
    }
    let files: Vec<String> = input.files.iter().map(|f| f.path.clone()).collect();
    let mut not_tried = Vec::new();
    for r in &wanted {
        let Some(k) = kept.remove(&r.check) else {
            continue;
        };
        let name = file_name(r.line, &r.name);
        let path = opts.dir.join(&name).display().to_string();
        let error = |source| FailedRowsError::Write {
            line: r.line,
            path: path.clone(),
            source,
        };
        let finished = match k.finish(&files) {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(e) => {
                out.errors.push(error(std::io::Error::other(e)));
                continue;
            }
        };
        if out.errors.last().is_some_and(
            |e| matches!(e, FailedRowsError::Write { source, .. } if whole_dir(source)),
        ) || !not_tried.is_empty()
        {
            not_tried.push(r.line.to_string());
            continue;
        }
        let meta = serde_json::json!({"line": r.line, "check": r.name}).to_string();
        match write::write_atomically(&opts.dir, &name, &finished.batch, &meta) {
            Ok(()) => out.files.push((
                r.check,
                FailedRows {
                    path: name,
                    rows: finished.batch.num_rows() as u64,
                    cut: finished.cut,
                },
            )),
            Err(e) => out.errors.push(error(e)),
        }
    }
    if !not_tried.is_empty() {
        out.errors.push(FailedRowsError::NotTried {
            count: not_tried.len(),
            dir: opts.dir.display().to_string(),
            lines: not_tried.join(", "),
        });
    }
    out
}

/// The session, with Parquet filter pushdown: the scans of the passes
/// evaluate their predicates first and decode the other columns only for
/// the rows that match (most rows do not). Only these passes use it; the
/// audit's own scans read every row anyway. `DQGATE_TEST_FAILED_ROWS_PUSHDOWN=0`
/// turns it off, for the benchmark's comparison.
fn late_materializing(ctx: &SessionContext) -> SessionContext {
    let state = ctx.state();
    let mut config = state.config().clone();
    config.options_mut().execution.parquet.pushdown_filters = crate::hooks::failed_rows_pushdown();
    SessionContext::new_with_state(
        datafusion::execution::SessionStateBuilder::new_from_existing(state)
            .with_config(config)
            .build(),
    )
}

/// One pass: a plan, and which checks its rows go to (by a flag column, or
/// all of them to one check).
struct Pass {
    frame: Result<DataFrame, ExecError>,
    targets: Targets,
    /// The lines it serves, for errors (`9, 12`).
    lines: String,
}

enum Targets {
    /// Rows go to check `.1` where flag column `.0` is true.
    Flags(Vec<(String, usize)>),
    /// Every row goes to this check.
    One(usize),
}

/// The passes of `wanted`: one filtered scan for every [`Rows::Where`],
/// then one per other selection.
async fn passes(
    ctx: &SessionContext,
    input: &StagedInput,
    wanted: &[Request],
    sources: &Sources<'_>,
) -> Vec<Pass> {
    let mut predicates = Vec::new();
    let mut flags = Vec::new();
    let mut lines = Vec::new();
    let mut out = Vec::new();
    for r in wanted {
        for rows in &r.rows {
            let frame = match rows {
                Rows::Where(p) => {
                    flags.push((select::flag(predicates.len()), r.check));
                    predicates.push(p.clone());
                    lines.push(r.line.to_string());
                    continue;
                }
                Rows::Duplicated { keys, nulls_equal } => {
                    select::duplicated(ctx, input, keys, *nulls_equal)
                }
                Rows::Orphans(lookup) => orphans(ctx, input, lookup, sources).await,
                Rows::Published(keys) => match sources.published {
                    None => continue,
                    Some(parts) => clashing(ctx, input, parts, keys).await,
                },
            };
            out.push(Pass {
                frame,
                targets: Targets::One(r.check),
                lines: r.line.to_string(),
            });
        }
    }
    if !predicates.is_empty() {
        lines.dedup();
        out.insert(
            0,
            Pass {
                frame: select::meeting(ctx, input, &predicates),
                targets: Targets::Flags(flags),
                lines: lines.join(", "),
            },
        );
    }
    out
}

/// The staged rows whose key the reference lacks: on the key engine, the
/// rows of the exact missing keys its spread lookup finds (in bounded
/// memory: it writes to disk past its budget), semi-joined with the
/// staged rows (a join whose table holds only those keys); else, or when
/// they are too many, DataFusion's anti-join of the staged rows with the
/// reference (a hash join, which does not spill).
async fn orphans(
    ctx: &SessionContext,
    input: &StagedInput,
    lookup: &crate::check::RefLookup,
    sources: &Sources<'_>,
) -> Result<DataFrame, ExecError> {
    let reference = sources
        .references
        .iter()
        .find(|(n, _)| *n == lookup.reference)
        .map(|(_, d)| d)
        .ok_or_else(|| {
            ExecError::Audit(format!("reference `{}` was not opened", lookup.reference))
        })?;
    if let (true, bits) = sources.engine {
        let missing = crate::exec::join::missing_keys(ctx, input, reference, lookup, bits).await?;
        if let Some(keys) = missing {
            let keys = select::keys_frame(ctx, &keys, &lookup.key_types)?;
            return select::matching(ctx, input, keys, &lookup.columns, &lookup.key_types);
        }
    }
    let other = crate::exec::join::reference_keys(ctx, reference, lookup)?;
    select::orphans(ctx, input, other, &lookup.columns, &lookup.key_types)
}

async fn clashing(
    ctx: &SessionContext,
    input: &StagedInput,
    parts: &[PublishedPart],
    keys: &[String],
) -> Result<DataFrame, ExecError> {
    match crate::exec::join::published_keys_frame(ctx, input, parts, keys).await? {
        // Pruning by footer ranges: no published file can hold a staged key.
        None => Err(ExecError::Audit(
            "no published file can hold a staged key, yet the check found some".into(),
        )),
        Some((types, published)) => select::clashing(ctx, input, published, keys, &types),
    }
}

impl Pass {
    async fn run(
        mut self,
        input: &StagedInput,
        kept: &mut HashMap<usize, Kept>,
    ) -> Result<(), ExecError> {
        let frame = std::mem::replace(&mut self.frame, Err(ExecError::Audit("taken".into())))?;
        let locations = Locations::new(
            crate::exec::scan::file_locations(input)?,
            input.files.iter().map(|f| f.path.clone()).collect(),
        );
        let context = format!("selecting the failed rows of line {}", self.lines);
        let mut stream = frame
            .execute_stream()
            .await
            .map_err(|e| ExecError::engine(context.clone(), e))?;
        while let Some(batch) = stream.next().await {
            let batch = batch.map_err(|e| ExecError::engine(context.clone(), e))?;
            self.route(&batch, &locations, kept)
                .map_err(|e| ExecError::Audit(format!("{context}: {e}")))?;
        }
        Ok(())
    }

    /// Hands each row of `batch` to the checks it offends.
    fn route(
        &self,
        batch: &RecordBatch,
        locations: &Locations,
        kept: &mut HashMap<usize, Kept>,
    ) -> Result<(), RouteError> {
        let schema = batch.schema();
        let index = |name: &str| {
            schema
                .index_of(name)
                .map_err(|_| RouteError::NoColumn(name.to_string()))
        };
        let (file_at, row_at) = (index(select::FILE_LOCATION)?, index(ROW_COLUMN)?);
        let files = locations.indexes(batch.column(file_at).as_ref())?;
        let rows = batch
            .column(row_at)
            .as_any()
            .downcast_ref::<Int64Array>()
            .ok_or(RouteError::RowPositions)?;
        let flag_names: Vec<&str> = match &self.targets {
            Targets::Flags(f) => f.iter().map(|(n, _)| n.as_str()).collect(),
            Targets::One(_) => Vec::new(),
        };
        let payload: Vec<usize> = (0..schema.fields().len())
            .filter(|&i| i != file_at && i != row_at)
            .filter(|&i| !flag_names.contains(&schema.field(i).name().as_str()))
            .collect();
        let rows_only = batch.project(&payload)?;
        match &self.targets {
            Targets::One(check) => {
                if let Some(k) = kept.get_mut(check) {
                    k.push(&rows_only, &files, rows, None)?;
                }
            }
            Targets::Flags(flags) => {
                for (name, check) in flags {
                    let mask = batch
                        .column(index(name)?)
                        .as_any()
                        .downcast_ref::<BooleanArray>()
                        .ok_or(RouteError::FlagNotBoolean)?
                        .clone();
                    if mask.true_count() == 0 {
                        continue;
                    }
                    if let Some(k) = kept.get_mut(check) {
                        k.push(&rows_only, &files, rows, Some(&mask))?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse() {
        assert_eq!(Limit::parse("all"), Ok(Limit::All));
        assert_eq!(Limit::parse("1_000"), Ok(Limit::Rows(1000)));
        assert!(Limit::parse("0").is_err());
        assert!(Limit::parse("-3").is_err());
        assert!(Limit::parse("many").is_err());
    }

    #[test]
    fn a_directory_inside_the_table_is_refused() {
        let tmp = std::env::temp_dir().join(format!("dqgate-failed-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("table/k=1")).unwrap();
        let table = tmp.join("table");
        let refused = |d: &Path| {
            let opts = Options {
                dir: d.to_path_buf(),
                limit: Limit::DEFAULT,
            };
            opts.refuse_inside(&table, "table root").is_err()
        };
        assert!(refused(&tmp.join("table/out")));
        assert!(refused(&tmp.join("table")));
        assert!(refused(&tmp.join("elsewhere/../table/k=1/new")));
        assert!(!refused(&tmp.join("out")));
        assert!(!refused(&tmp.join("tablet")));
        assert!(refused(Path::new("s3://bucket/out")));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
