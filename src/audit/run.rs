//! A prepared audit run: the fused passes, the join passes, the published
//! version's metrics, the judge, and the samples the verdict shows.

use crate::check::{Metric, SampleSpec};
use crate::error::Error;
use crate::exec::{self, Observations};
use crate::plan::{self, Atom, AuditPlan};
use crate::publish::Current;
use crate::staged::StagedInput;
use crate::value::Value;
use crate::verdict::history::{History, PastRun, PastRuns};
use crate::verdict::judge::{self, Extra, Measurements, MetricValues, RunInfo};
use crate::verdict::{InputFile, InputSummary, Sample, Source, Status, Verdict};

use super::joins;
use super::prepare::{read_failed, Prepared, Published};

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
