//! A prepared audit run: the fused passes, the join passes, the published
//! version's metrics, the judge, and the samples the verdict shows.

use crate::check::Metric;
use crate::error::Error;
use crate::exec::{self, Observations};
use crate::plan::{self, Atom, AuditPlan};
use crate::publish::Current;
use crate::staged::StagedInput;
use crate::value::Value;
use crate::verdict::history::{History, PastRun, PastRuns};
use crate::verdict::judge::SampleRequest;
use crate::verdict::judge::{self, Extra, Measurements, MetricValues, RunInfo};
use crate::verdict::{InputFile, InputSummary, Sample, Source, Verdict};

use super::joins;
use super::prepare::{read_failed, Prepared, Published};

impl Prepared {
    /// Runs the plans and judges. `published` says what `published.*` refers to.
    pub async fn run(&self, published: &Published) -> Result<Verdict, Error> {
        Ok(self.run_with(published, None).await?.0)
    }

    /// [`run`](Self::run), with the table's published partitions for
    /// `history(N)` (`None`: no `--table`, history checks are skipped); the
    /// verdict, and what the run cost.
    pub async fn run_with(
        &self,
        published: &Published,
        past: Option<&PastRuns>,
    ) -> Result<(Verdict, Telemetry), Error> {
        let obs = exec::observe(&self.ctx, &self.input, &self.plan).await?;
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
            schema_from: schema_from.as_deref(),
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
            joined: &|m: &Metric| joined.samples_of(m),
            extra,
        };
        let judged = judge::judge(
            &self.checked,
            &measurements,
            self.run_info(compared_against),
        );
        let samples = self.read_samples(&judged, &obs).await?;
        let mut key_passes = obs.key_passes.clone();
        key_passes.extend(joined.passes.iter().cloned());
        let telemetry = Telemetry {
            spilled_bytes: obs.spilled_bytes,
            key_passes,
        };
        Ok((judged.complete(samples), telemetry))
    }

    /// The rows of the staged files the failed checks show as samples: a
    /// check whose samples are rows; and a failing `primary_key` whose
    /// duplicated keys leave room among the samples shows its keys with a
    /// null part, most frequent first.
    async fn read_samples(
        &self,
        judged: &judge::Judged,
        obs: &Observations,
    ) -> Result<Vec<(usize, Vec<Sample>)>, Error> {
        let mut out = Vec::new();
        for request in judged.requests(&self.checked) {
            match request {
                SampleRequest::Rows {
                    check,
                    filter,
                    columns,
                } => {
                    let rows = exec::row_samples(&self.ctx, &self.input, filter, columns).await?;
                    out.push((check, samples_of(columns, rows, usize::MAX)));
                }
                SampleRequest::NullKeys { check, keys, shown } => {
                    let null_keys = crate::plan::any_null(keys);
                    let has_nulls = matches!(
                        obs.atoms.get(&crate::plan::Atom::CountIf(null_keys.clone())),
                        Some(crate::value::Value::Int(n)) if *n > 0
                    );
                    if shown >= exec::SAMPLES || !has_nulls {
                        continue;
                    }
                    let rows = exec::row_samples(&self.ctx, &self.input, &null_keys, keys).await?;
                    out.push((check, samples_of(keys, rows, exec::SAMPLES - shown)));
                }
            }
        }
        Ok(out)
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

/// What a run cost, for the timing line: bytes spilled to disk, and what
/// each key engine pass did.
#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub spilled_bytes: u64,
    pub key_passes: Vec<String>,
}

/// Row samples as the verdict shows them: the first `limit` groups, each
/// key named by its columns.
fn samples_of(columns: &[String], rows: Vec<(Vec<Value>, u64)>, limit: usize) -> Vec<Sample> {
    rows.into_iter()
        .take(limit)
        .map(|(values, rows)| Sample {
            key: columns.iter().cloned().zip(values).collect(),
            rows,
            partition: None,
        })
        .collect()
}
