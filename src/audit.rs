//! Rule text → verdict: the stages run in order, with their errors.
//!
//! Parse errors stop before the staged files are opened; name and type errors
//! stop after only their footers were read (exit 2, nothing scanned). Then the
//! fused plans run, `published.*` metrics are computed over the published
//! version when there is one, and the judge produces the verdict.

mod failed;
mod joins;
pub mod publish;

use std::path::{Path, PathBuf};

use datafusion::prelude::SessionContext;
use sha2::{Digest, Sha256};

use crate::check::{self, CheckInput, CheckedRules, Metric, SampleSpec};
use crate::diagnostic::Diagnostic;
use crate::dsl::{self, ast::RuleFile};
use crate::engine::{self, EngineOptions};
use crate::error::Error;
use crate::exec::{self, Observations};
use crate::plan::{self, Atom, AuditPlan};
use crate::publish::{Current, Read, Snapshot, Target};
use crate::runkey::RunKey;
use crate::staged::{Location, StagedInput};
use crate::value::Value;
use crate::verdict::history::{History, PastRun, PastRuns};
use crate::verdict::judge::{self, Extra, Measurements, MetricValues, RunInfo};
use crate::verdict::{InputFile, InputSummary, Sample, Source, Status, Verdict};

/// A rule file read from disk.
#[derive(Debug, Clone)]
pub struct RuleSource {
    /// The path as the verdict shows it: as given when relative, else the
    /// file name (a verdict carries no absolute path).
    pub display: String,
    pub text: String,
    pub sha256: String,
    /// The path as given (`reference` paths are resolved against its
    /// directory).
    pub path: PathBuf,
}

impl RuleSource {
    pub fn read(path: &Path) -> Result<RuleSource, Error> {
        let bytes = std::fs::read(path).map_err(|e| {
            Error::Usage(format!("cannot read rule file `{}`: {e}", path.display()))
        })?;
        let text = String::from_utf8(bytes.clone()).map_err(|_| {
            Error::Usage(format!("rule file `{}` is not UTF-8 text", path.display()))
        })?;
        let display = if path.is_absolute() {
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        } else {
            path.to_string_lossy().replace('\\', "/")
        };
        Ok(RuleSource {
            display,
            text,
            sha256: hex::encode(Sha256::digest(&bytes)),
            path: path.to_path_buf(),
        })
    }

    /// Parses; any syntax error is an [`Error::Rules`].
    pub fn parse(&self) -> Result<RuleFile, Error> {
        let (file, diagnostics) = dsl::parse(&self.text);
        if diagnostics.is_empty() {
            Ok(file)
        } else {
            Err(self.rules_error(diagnostics))
        }
    }

    /// Parses what parses: the statements without syntax errors, and the
    /// syntax errors, to be reported together with the name and type errors
    /// of the rest. An error (the syntax errors alone) when not even the
    /// `table` header parsed.
    pub fn parse_partial(&self) -> Result<(RuleFile, Vec<Diagnostic>), Error> {
        let (file, diagnostics) = dsl::parse(&self.text);
        if !diagnostics.is_empty() && file.table.name.is_empty() {
            return Err(self.rules_error(diagnostics));
        }
        Ok((file, diagnostics))
    }

    /// The rule error of `syntax` and `more` together, in source order, or
    /// `Ok` when both are empty.
    fn all_errors(&self, mut syntax: Vec<Diagnostic>, more: Vec<Diagnostic>) -> Result<(), Error> {
        syntax.extend(more);
        if syntax.is_empty() {
            return Ok(());
        }
        syntax.sort_by_key(|d| d.span.start);
        Err(self.rules_error(syntax))
    }

    pub fn rules_error(&self, diagnostics: Vec<crate::diagnostic::Diagnostic>) -> Error {
        Error::Rules {
            file: self.display.clone(),
            source_text: self.text.clone(),
            diagnostics,
        }
    }
}

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
    pub references: joins::References,
    /// The published table (`--table`) as one snapshot: everything the
    /// audit reads of other partitions comes from it, so its read set
    /// ([`crate::publish::ReadSet`]) is exactly what it read. Set it before
    /// [`Prepared::run_with`].
    pub table: Option<Box<dyn Snapshot>>,
    /// Bytes the last run spilled to disk (reported on stderr).
    pub spilled_bytes: std::sync::atomic::AtomicU64,
    /// What each key engine pass did and cost (`exec::keys`), for the
    /// timing line.
    pub key_passes: std::sync::Mutex<Vec<String>>,
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
    let references = joins::open_references(&file, &rules).await?;
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
        let rows = input.row_count();
        plan = plan
            .answer_from_footers(|a| exec::stats::answer(a, &input))
            .dense_keys_from_footers(
                |c| exec::stats::integer_range(&input, c),
                // On a cluster the grouped pass runs on the executors; the
                // bitmap would stream the whole key column to this process.
                |span| {
                    engine_opts.engine == engine::Engine::Local
                        && exec::dense::worthwhile(span, rows, engine_opts.memory_limit)
                },
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
        spilled_bytes: Default::default(),
        key_passes: Default::default(),
    })
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
    /// Runs the plans and judges. `published` says what `published.*` refers to.
    pub async fn run(&self, published: &Published) -> Result<Verdict, Error> {
        self.run_with(published, None).await
    }

    /// [`run`](Self::run), with the table's published partitions for
    /// `history(N)` (`None`: no `--table`, history checks are skipped).
    pub async fn run_with(
        &self,
        published: &Published,
        past: Option<&PastRuns>,
    ) -> Result<Verdict, Error> {
        let obs = exec::observe(&self.ctx, &self.input, &self.plan).await?;
        self.spilled_bytes
            .store(obs.spilled_bytes, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut passes) = self.key_passes.lock() {
            passes.clone_from(&obs.key_passes);
        }
        let (published_schema, schema_from) = self.published_schema(published).await?;
        let baseline = past.map(|p| self.baseline(p));
        let dups_nulls_equal = |keys: &[String]| {
            obs.duplicates_nulls_equal
                .get(keys)
                .map(|d| d.samples.clone())
                .unwrap_or_default()
        };
        let extra = Extra {
            staged_schema: &self.input.schema,
            published_schema: published_schema.as_ref().map_err(|why| *why),
            duplicates_nulls_equal: &dups_nulls_equal,
            history: baseline.as_ref().map_or(History::NotGiven, History::Runs),
        };
        let joined = joins::observe(self).await?;
        let mut staged = metric_values(
            &self
                .checked
                .statements
                .iter()
                .map(|s| s.metric.clone())
                .collect::<Vec<_>>(),
            &self.input,
            &obs,
        );
        staged.extend(joined.values(&self.checked));
        let (published_values, absent, compared_against) = self.published_values(published).await?;
        let duplicates = |keys: &[String]| {
            obs.duplicates
                .get(keys)
                .map(|d| d.samples.clone())
                .unwrap_or_default()
        };
        let source = |m: &Metric| {
            if self.plan.from_footers_only(m) {
                Source::Metadata
            } else {
                Source::Scan
            }
        };
        let measurements = Measurements {
            staged: &staged,
            published: published_values.as_ref(),
            published_absent: absent,
            duplicates: &duplicates,
            source: &source,
            skipped: &|m: &Metric| joined.skip_reason(m),
            extra,
        };
        let mut verdict = judge::judge(
            &self.checked,
            &measurements,
            self.run_info(compared_against),
        );
        for (i, spec) in judge::row_sample_requests(&self.checked, &verdict) {
            if let SampleSpec::Rows { filter, columns } = spec {
                let rows = exec::row_samples(&self.ctx, &self.input, filter, columns).await?;
                verdict.checks[i].samples = Some(
                    rows.into_iter()
                        .map(|(values, rows)| Sample {
                            key: columns.iter().cloned().zip(values).collect(),
                            rows,
                            partition: None,
                        })
                        .collect(),
                );
            }
        }
        self.sample_null_keys(&obs, &mut verdict).await?;
        joined.attach_samples(&self.checked, &mut verdict);
        if let Some(rel) = schema_from {
            for (s, c) in self
                .checked
                .statements
                .iter()
                .zip(verdict.checks.iter_mut())
            {
                if s.metric == Metric::SchemaDrift && c.status != Status::Skipped {
                    c.note = Some(format!(
                        "nothing is published for this run key: compared with the table's current schema, \
                         that of partition {rel}"
                    ));
                    c.compared_with = Some(rel.clone());
                }
            }
        }
        Ok(verdict)
    }

    /// A failing `primary_key` whose duplicated keys leave room among the
    /// samples also shows its keys with a null part, most frequent first.
    async fn sample_null_keys(
        &self,
        obs: &Observations,
        verdict: &mut Verdict,
    ) -> Result<(), Error> {
        for (s, check) in self
            .checked
            .statements
            .iter()
            .zip(verdict.checks.iter_mut())
        {
            let Metric::PrimaryKeyViolations(keys) = &s.metric else {
                continue;
            };
            let shown = check.samples.as_ref().map_or(0, Vec::len);
            let null_keys = crate::plan::any_null(keys);
            let has_nulls = matches!(
                obs.atoms.get(&crate::plan::Atom::CountIf(null_keys.clone())),
                Some(crate::value::Value::Int(n)) if *n > 0
            );
            if check.status != Status::Fail || shown >= exec::SAMPLES || !has_nulls {
                continue;
            }
            let rows = exec::row_samples(&self.ctx, &self.input, &null_keys, keys).await?;
            let samples = check.samples.get_or_insert_with(Vec::new);
            samples.extend(
                rows.into_iter()
                    .take(exec::SAMPLES - shown)
                    .map(|(values, rows)| Sample {
                        key: keys.iter().cloned().zip(values).collect(),
                        rows,
                        partition: None,
                    }),
            );
        }
        Ok(())
    }

    async fn published_values(
        &self,
        published: &Published,
    ) -> Result<(Option<MetricValues>, &'static str, Option<String>), Error> {
        let metrics = self.checked.published_metrics();
        match published {
            Published::NotGiven => Ok((
                None,
                "no --table given, so published.* cannot be resolved",
                None,
            )),
            Published::Absent => Ok((None, "nothing is published for this run key yet", None)),
            Published::Version(Current {
                source,
                fingerprint,
            }) => {
                if metrics.is_empty() {
                    return Ok((None, "", Some(fingerprint.clone())));
                }
                let input = source
                    .open()
                    .await
                    .map_err(|e| Error::Audit(format!("reading the published version: {e}")))?;
                let mut plan = AuditPlan::for_metrics(&metrics)
                    .answer_from_footers(|a| exec::stats::answer(a, &input));
                if self.spill_distinct {
                    plan = plan.distinct_by_grouping(&input.schema);
                }
                let obs = exec::observe(&self.ctx, &input, &plan)
                    .await
                    .map_err(|e| Error::Audit(format!("computing published metrics: {e}")))?;
                Ok((
                    Some(metric_values(&metrics, &input, &obs)),
                    "",
                    Some(fingerprint.clone()),
                ))
            }
        }
    }

    /// The schema `schema matches published` compares with, or why there is
    /// none, and the other partition it was read from (`k=v`), if any: the
    /// run key's published version, else (a new run key) the table's
    /// current schema, that of its partition that sorts last by run key.
    /// Only footers are read.
    async fn published_schema(
        &self,
        published: &Published,
    ) -> Result<
        (
            Result<datafusion::arrow::datatypes::Schema, &'static str>,
            Option<String>,
        ),
        Error,
    > {
        if !self.checked.uses_published_schema() {
            return Ok((Err("not needed"), None));
        }
        let (source, other) = match published {
            Published::NotGiven => {
                return Ok((
                    Err("no --table given, so the published schema cannot be compared"),
                    None,
                ))
            }
            Published::Absent => match (&self.table, self.latest_other_partition()) {
                (Some(table), Some(rel)) => (table.source_of(&rel)?, Some(rel)),
                _ => return Ok((Err("no partition of the table is published yet"), None)),
            },
            Published::Version(current) => (current.source.clone(), None),
        };
        let input = source
            .open()
            .await
            .map_err(|e| match (&other, &self.table) {
                (Some(rel), Some(table)) => read_failed(table.as_ref(), rel, e),
                _ => Error::Audit(format!("reading the published version: {e}")),
            })?;
        Ok((Ok(input.schema.as_ref().clone()), other))
    }

    /// The published partition, other than the run key's, that sorts last by
    /// run key (typed as [`Self::baseline`] orders them).
    fn latest_other_partition(&self) -> Option<String> {
        let own = self.own_rel();
        self.table
            .as_ref()?
            .other_keys(&own)
            .into_iter()
            .map(|(rel, pairs)| (self.typed_key(&pairs), rel))
            .max_by(|a, b| compare_keys(&a.0, &b.0))
            .map(|(_, rel)| rel)
    }

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

    /// The published partitions whose run key sorts before this run's, oldest
    /// first. Run-key values compare in the type of their column (as
    /// `partition.KEY` is typed), tuple-wise in `partitioned by` order; a key
    /// that is no column of the files compares whole numbers by value, other
    /// text bytewise; a value that does not parse compares as text.
    fn baseline(&self, past: &PastRuns) -> PastRuns {
        let current = self.typed_key(self.run_key.pairs());
        let mut runs: Vec<(Vec<Value>, &PastRun)> = past
            .runs
            .iter()
            .map(|r| (self.typed_key(&r.partition), r))
            .filter(|(k, _)| compare_keys(k, &current) == std::cmp::Ordering::Less)
            .collect();
        runs.sort_by(|a, b| compare_keys(&a.0, &b.0));
        PastRuns {
            runs: runs.into_iter().map(|(_, r)| r.clone()).collect(),
            unrecorded: past.unrecorded,
            unreadable: past.unreadable,
        }
    }

    fn typed_key(&self, pairs: &[(String, String)]) -> Vec<Value> {
        self.checked
            .partitioned_by
            .iter()
            .map(|k| {
                let raw = pairs
                    .iter()
                    .find(|(n, _)| n == k)
                    .map_or("", |(_, v)| v.as_str());
                match self.input.schema.field_with_name(k) {
                    Ok(f) => crate::scalar::parse_as(raw, f.data_type()).ok(),
                    // A directory-only key: whole numbers by value.
                    Err(_) => raw.parse::<i128>().ok().map(Value::Int),
                }
                .unwrap_or_else(|| Value::Text(raw.to_string()))
            })
            .collect()
    }

    fn run_info(&self, compared_against: Option<String>) -> RunInfo {
        RunInfo {
            partition: self.run_key.pairs().to_vec(),
            rules_path: self.rules.display.clone(),
            rules_sha256: self.rules.sha256.clone(),
            input: InputSummary {
                row_count: self.input.row_count(),
                files: self
                    .input
                    .files
                    .iter()
                    .map(|f| InputFile {
                        path: f.path.clone(),
                        bytes: f.bytes,
                    })
                    .collect(),
                fingerprint: self.input.fingerprint.clone(),
            },
            compared_against,
        }
    }

    /// The plans this audit runs, as `dqgate explain` prints them.
    pub async fn explain(&self) -> Result<String, Error> {
        let mut out =
            crate::exec::explain::explain(&self.ctx, &self.input, &self.checked, &self.plan)
                .await?;
        out.push_str(&joins::explain(self).await?);
        Ok(out)
    }
}

fn metric_values(metrics: &[Metric], input: &StagedInput, obs: &Observations) -> MetricValues {
    let atom = |a: &Atom| obs.atoms.get(a).cloned().unwrap_or(Value::Null);
    let dups = |k: &[String]| {
        obs.duplicates
            .get(k)
            .map_or(Value::Null, |d| Value::Int(d.keys as i128))
    };
    let dups_nulls_equal = |k: &[String]| {
        obs.duplicates_nulls_equal
            .get(k)
            .map_or(Value::Null, |d| Value::Int(d.keys as i128))
    };
    metrics
        .iter()
        .map(|m| {
            let v = plan::derive_with(m, &input.schema, &atom, &dups, &dups_nulls_equal);
            (m.clone(), v)
        })
        .collect()
}

/// Run keys in order: value by value; values of different kinds (one did
/// not parse as the column's type) by their text.
fn compare_keys(a: &[Value], b: &[Value]) -> std::cmp::Ordering {
    for (x, y) in a.iter().zip(b) {
        let o = x
            .compare(y)
            .unwrap_or_else(|| x.to_string().cmp(&y.to_string()));
        if o != std::cmp::Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}
