//! Rule file + staged files → a prepared audit: parsed, checked against the
//! staged schema and planned, with no data page read; and what the audit
//! knows of the published table it compares with.

use std::path::Path;

use datafusion::prelude::SessionContext;

use crate::check::{self, CheckInput, CheckedRules, Metric};
use crate::diagnostic::Diagnostic;
use crate::dsl::ast::RuleFile;
use crate::engine::{self, EngineOptions};
use crate::error::Error;
use crate::exec::{self};
use crate::plan::AuditPlan;
use crate::publish::{Current, Read, Snapshot, Target};
use crate::runkey::RunKey;
use crate::staged::{Location, StagedInput};
use crate::verdict::history::PastRuns;

use super::references::{self, References};
use super::rules::RuleSource;

/// The published version a run compares against.
#[derive(Debug, Clone)]
pub enum Published {
    /// No `--table` given: `published.*` checks are skipped.
    NotGiven,
    /// Nothing is published for the run key yet.
    Absent,
    /// The version readers see now.
    Version(Current),
}

/// Why reading partition `rel` of the snapshot `table` failed with `e`:
/// when the partition was replaced or removed since the snapshot was taken
/// (Hive: its files moved away with the displaced version), the table
/// changed under the audit, a conflict that a publish answers by auditing
/// again; otherwise the read error itself (exit 3).
pub(crate) fn read_failed(table: &dyn Snapshot, rel: &str, e: impl std::fmt::Display) -> Error {
    if let Some(detail) = table.changed_since(rel) {
        return Error::Publish(crate::publish::PublishError::ReadSetChanged {
            reads: "while it was reading them".into(),
            detail,
        });
    }
    Error::Audit(format!("reading the published partition `{rel}`: {e}"))
}

/// A parsed, checked and planned audit, ready to run.
pub struct Prepared {
    pub rules: RuleSource,
    pub checked: CheckedRules,
    pub run_key: RunKey,
    pub input: StagedInput,
    pub plan: AuditPlan,
    pub ctx: SessionContext,
    /// Under a memory limit: `distinct_count` as a grouped pass that can spill.
    pub spill_distinct: bool,
    /// The `reference` tables, opened (footers only).
    pub references: References,
    /// The published table (`--table`) as one snapshot: everything the
    /// audit reads of other partitions comes from it, so its read set
    /// ([`crate::publish::ReadSet`]) is exactly what it read. Set it before
    /// [`Prepared::run_with`].
    pub table: Option<Box<dyn Snapshot>>,
}

/// Parses the rule file, validates the run key, reads the staged footers and
/// checks names and types. No data page is read.
pub async fn prepare(
    rules: RuleSource,
    staged: &Path,
    partition_args: &[String],
    require_partition: bool,
    engine_opts: &EngineOptions,
) -> Result<Prepared, Error> {
    let (file, run_key, syntax) = begin(&rules, partition_args, require_partition)?;
    let input = opened(&rules, &syntax, StagedInput::open(staged))?;
    finish(rules, file, run_key, syntax, input, engine_opts).await
}

/// [`prepare`] for a staged location that may be on an object store.
pub async fn prepare_at(
    rules: RuleSource,
    staged: &Location,
    partition_args: &[String],
    require_partition: bool,
    engine_opts: &EngineOptions,
) -> Result<Prepared, Error> {
    let (file, run_key, syntax) = begin(&rules, partition_args, require_partition)?;
    let input = opened(&rules, &syntax, StagedInput::open_at(staged).await)?;
    finish(rules, file, run_key, syntax, input, engine_opts).await
}

/// The staged input, or, when the rule file has syntax errors and the input
/// cannot be read, the rule errors (exit 2: an invalid rule file is reported
/// before unreadable data).
fn opened(
    rules: &RuleSource,
    syntax: &[Diagnostic],
    input: Result<StagedInput, crate::staged::InputError>,
) -> Result<StagedInput, Error> {
    match input {
        Ok(input) => Ok(input),
        Err(_) if !syntax.is_empty() => Err(rules.rules_error(syntax.to_vec())),
        Err(e) => Err(e.into()),
    }
}

/// What needs no data: the parsed rule file (what parsed, and its syntax
/// errors) and the validated run key.
fn begin(
    rules: &RuleSource,
    partition_args: &[String],
    require_partition: bool,
) -> Result<(RuleFile, Option<RunKey>, Vec<Diagnostic>), Error> {
    let (file, syntax) = rules.parse_partial()?;
    let partitioned_by: Vec<String> = file.partitioned_by.iter().map(|i| i.name.clone()).collect();
    let run_key = if partition_args.is_empty() && !require_partition {
        None
    } else {
        Some(RunKey::parse(partition_args, &partitioned_by)?)
    };
    if require_partition && partitioned_by.is_empty() {
        return Err(Error::Usage(
            "this command needs a run key, but the rule file has no `partitioned by`".into(),
        ));
    }
    Ok((file, run_key, syntax))
}

/// Checks the rule file against the staged schema and plans.
async fn finish(
    rules: RuleSource,
    file: RuleFile,
    run_key: Option<RunKey>,
    syntax: Vec<Diagnostic>,
    input: StagedInput,
    engine_opts: &EngineOptions,
) -> Result<Prepared, Error> {
    let ctx = engine::session(engine_opts).map_err(|e| Error::engine("starting the engine", e))?;
    let references = references::open(&file, &rules).await?;
    let reference_schemas: Vec<_> = references
        .iter()
        .map(|(n, d)| (n.clone(), d.schema.clone()))
        .collect();
    engine::distrust_float_statistics(&ctx, &input.schema);
    for (_, schema) in &reference_schemas {
        engine::distrust_float_statistics(&ctx, schema);
    }
    let checked = check::check(&CheckInput {
        source: &rules.text,
        file: &file,
        schema: Some(&input.schema),
        run_key: run_key.as_ref(),
        references: &reference_schemas,
        ctx: &ctx,
    });
    let checked = match checked {
        Ok(checked) => {
            rules.all_errors(syntax, Vec::new())?;
            checked
        }
        Err(d) => return Err(rules.all_errors(syntax, d).unwrap_err()),
    };
    let mut plan = AuditPlan::for_rules(&checked);
    if !engine_opts.scan_only {
        // Duplicates take two bitmaps: keys seen, keys seen twice.
        let suits = bitmap_suits(&input, engine_opts.memory_limit, 2);
        plan = plan
            .answer_from_footers(|a| exec::stats::answer(a, &input))
            .dense_keys_from_footers(
                |c| exec::stats::integer_range(&input, c),
                // On a cluster the grouped pass runs on the executors; the
                // bitmap would stream the whole key column to this process.
                |c, span| engine_opts.engine == engine::Engine::Local && suits(c, span),
            );
    }
    if engine_opts.engine == engine::Engine::Local {
        // The key engine consumes batches in this process; on a cluster the
        // grouped pass runs on the executors instead.
        plan = plan.key_strategies_from_footers(
            &input.schema,
            &|c| exec::stats::column_facts(&input, c),
            engine_opts.forced_key_strategy,
            engine_opts.fingerprint_bits,
        );
        if !engine_opts.scan_only && engine_opts.forced_key_strategy.is_none() {
            plan = plan.dense_distinct_from_footers(
                |c| exec::stats::integer_range(&input, c),
                bitmap_suits(&input, engine_opts.memory_limit, 1),
            );
        }
    }
    if engine_opts.memory_limit.is_some() {
        plan = plan.distinct_by_grouping(&input.schema);
    }
    Ok(Prepared {
        rules,
        checked,
        run_key: run_key.unwrap_or_default(),
        input,
        plan,
        ctx,
        spill_distinct: engine_opts.memory_limit.is_some(),
        references,
        table: None,
    })
}

/// Whether a column's integer range of `span` values suits `bitmaps`
/// bitmaps of the dense strategy (see [`exec::dense::worthwhile`]), given
/// the row groups' ranges its scan sets bits among.
fn bitmap_suits(
    input: &StagedInput,
    memory_limit: Option<usize>,
    bitmaps: u64,
) -> impl Fn(&str, u64) -> bool + '_ {
    move |column, span| {
        let facts = exec::stats::column_facts(input, column);
        let working = exec::dense::working_span(span, facts.row_group_ranges.as_deref());
        exec::dense::worthwhile((span, working), input.row_count(), memory_limit, bitmaps)
    }
}

/// Checks a rule file without data (`lint` without `--staged`): syntax, run-key
/// references, literals and threshold arithmetic.
pub fn lint_without_data(rules: &RuleSource) -> Result<(), Error> {
    let (file, syntax) = rules.parse_partial()?;
    let ctx = SessionContext::new();
    let diags = match check::check(&CheckInput {
        source: &rules.text,
        file: &file,
        schema: None,
        run_key: None,
        references: &[],
        ctx: &ctx,
    }) {
        Ok(_) => Vec::new(),
        Err(d) => d,
    };
    rules.all_errors(syntax, diags)
}

impl Prepared {
    /// The run key's partition path (`k1=v1/k2=v2`; empty without a key).
    pub(crate) fn own_rel(&self) -> String {
        if self.run_key.is_empty() {
            String::new()
        } else {
            self.run_key.rel_dir()
        }
    }

    /// The statements that read other partitions of the table, given what
    /// is published for the run key (`schema matches published` reads the
    /// table only for a new run key): `line N: NAME`, in rule-file order.
    pub fn table_reads(&self, published: &Published) -> Vec<String> {
        if self.table.is_none() {
            return Vec::new();
        }
        self.checked
            .statements
            .iter()
            .filter(|s| match &s.metric {
                Metric::DuplicateAcrossPublished(_) => true,
                Metric::SchemaDrift => matches!(published, Published::Absent),
                _ => !s.threshold.history_refs().is_empty(),
            })
            .map(|s| format!("line {}: {}", s.line, s.name))
            .collect()
    }

    /// Whether the rule file may read other partitions of the table (then
    /// the whole table is read into the snapshot the audit uses).
    pub fn may_read_table(&self) -> bool {
        self.checked.statements.iter().any(|s| {
            matches!(
                s.metric,
                Metric::DuplicateAcrossPublished(_) | Metric::SchemaDrift
            ) || !s.threshold.history_refs().is_empty()
        })
    }

    /// What a snapshot of the target is read for, for this audit.
    pub fn read(&self, to_publish: bool) -> Read<'_> {
        Read {
            key: &self.run_key,
            partitioned_by: &self.checked.partitioned_by,
            whole: self.may_read_table(),
            to_publish,
        }
    }

    /// Reads the published table (`--table`) the audit compares with, as
    /// one snapshot.
    pub async fn compare_with(&mut self, target: &dyn Target) -> Result<(), Error> {
        self.table = Some(target.snapshot(self.read(false)).await?);
        Ok(())
    }

    /// The run key's published version in the table.
    pub async fn published(&self) -> Result<Published, Error> {
        Ok(match &self.table {
            None => Published::NotGiven,
            Some(t) => match t.current(&self.run_key).await? {
                None => Published::Absent,
                Some(current) => Published::Version(current),
            },
        })
    }

    /// The table's published partitions, read only when a rule uses
    /// `history(N)`.
    pub async fn past_runs(&self) -> Result<Option<PastRuns>, Error> {
        if !self.checked.uses_history() {
            return Ok(None);
        }
        Ok(match &self.table {
            None => None,
            Some(t) => Some(t.past_runs().await),
        })
    }

    /// What this audit read of the table beyond its own partition: the read
    /// set its publish validates at the swap or commit.
    pub fn read_set(&self, published: &Published) -> crate::publish::ReadSet {
        match &self.table {
            None => crate::publish::ReadSet::default(),
            Some(t) => {
                let reads = self.table_reads(published);
                if reads.is_empty() {
                    crate::publish::ReadSet::default()
                } else {
                    t.read_set(&self.own_rel(), reads)
                }
            }
        }
    }
}
