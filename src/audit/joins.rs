//! The join passes of a run: opening `reference` tables, finding the other
//! published partitions for `across published`, running both kinds of pass,
//! and what the verdict takes from them (values, skips, samples).

use std::collections::HashMap;
use std::fmt::Write as _;

use super::prepare::{read_failed, Prepared};
use crate::check::{CheckedRules, Metric};
use crate::error::Error;
use crate::exec::join::{self, IndexPlan, JoinResult, PublishedPart};
use crate::plan::join::JoinPass;
use crate::plan::PassKind;
use crate::staged::reference::Dataset;
use crate::value::Value;
use crate::verdict::Sample;

/// What the join passes observed, and which were skipped and why.
#[derive(Debug, Default)]
pub(super) struct JoinObservations {
    pub results: HashMap<JoinPass, JoinResult>,
    pub skipped: HashMap<JoinPass, String>,
    /// What each key engine pass of the joins did and cost.
    pub passes: Vec<String>,
}

impl JoinObservations {
    /// The observed values, by metric.
    pub fn values(&self, rules: &CheckedRules) -> Vec<(Metric, Value)> {
        rules
            .statements
            .iter()
            .filter_map(|s| {
                let r = self.results.get(&JoinPass::of(&s.metric)?)?;
                Some((s.metric.clone(), Value::Int(r.value as i128)))
            })
            .collect()
    }

    pub fn skip_reason(&self, m: &Metric) -> Option<String> {
        self.skipped.get(&JoinPass::of(m)?).cloned()
    }

    /// The samples of a join statement, by its metric: its keys named by
    /// their columns; `None` for any other statement.
    pub fn samples_of(&self, metric: &Metric) -> Option<Vec<Sample>> {
        let result = self.results.get(&JoinPass::of(metric)?)?;
        let columns = match metric {
            Metric::NotInReference(r) => &r.columns,
            Metric::DuplicateAcrossPublished(k) => k,
            _ => return None,
        };
        Some(
            result
                .samples
                .iter()
                .map(|j| Sample {
                    key: columns.iter().cloned().zip(j.key.iter().cloned()).collect(),
                    rows: j.rows,
                    partition: j.partition.clone(),
                })
                .collect(),
        )
    }
}

/// Why an audit has no other published partition to compare with (the
/// `across published` checks are skipped, with this note).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoOthers {
    #[error("no --table given, so the published partitions cannot be read")]
    NoTable,
    #[error("no other partition of the table is published yet")]
    NonePublished,
}

/// How many published partitions are opened at once.
const OPEN_AT_ONCE: usize = 8;

/// The other published partitions, or why there are none to compare with.
pub(super) async fn other_partitions(
    p: &Prepared,
) -> Result<Result<Vec<PublishedPart>, NoOthers>, Error> {
    let Some(table) = &p.table else {
        return Ok(Err(NoOthers::NoTable));
    };
    let sources = table.others(&p.own_rel())?;
    crate::hooks::phase("read-others");
    // Each partition's footers are read on a blocking thread of its own,
    // a few at once (a year of partitions is a year of footers, and on an
    // object store as many requests); the first error in order stops it.
    use futures::StreamExt as _;
    let handle = tokio::runtime::Handle::current();
    let mut opened = futures::stream::iter(sources.into_iter().map(|(rel, source)| {
        let handle = handle.clone();
        tokio::task::spawn_blocking(move || {
            let input = handle.block_on(source.open());
            (rel, input)
        })
    }))
    .buffered(OPEN_AT_ONCE);
    let mut parts = Vec::new();
    while let Some(done) = opened.next().await {
        let (rel, input) = done
            .map_err(|e| Error::Audit(format!("reading the published partitions stopped: {e}")))?;
        let input = input.map_err(|e| read_failed(table.as_ref(), &rel, e))?;
        parts.push(PublishedPart { rel, input });
    }
    if parts.is_empty() {
        return Ok(Err(NoOthers::NonePublished));
    }
    Ok(Ok(parts))
}

fn reference<'a>(p: &'a Prepared, name: &str) -> Result<&'a Dataset, Error> {
    p.references
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, d)| d)
        .ok_or_else(|| Error::Audit(format!("reference `{name}` was not opened")))
}

/// Runs every join pass of the plan.
pub(super) async fn observe(p: &Prepared) -> Result<JoinObservations, Error> {
    let mut obs = JoinObservations::default();
    if p.plan.joins.is_empty() {
        return Ok(obs);
    }
    let mut others: Option<Result<Vec<PublishedPart>, NoOthers>> = None;
    for (i, pass) in p.plan.joins.iter().enumerate() {
        let label = format!(
            "{}: {}",
            p.plan.pass_label(PassKind::Joins, i),
            pass.describe()
        );
        let result = match pass {
            JoinPass::Reference(r) => {
                let d = reference(p, &r.reference)?;
                let engine = (p.plan.join_engine, p.plan.join_test_bits);
                join::not_in_reference(&p.ctx, &p.input, d, r, engine, &label).await?
            }
            JoinPass::AcrossPublished(keys) => {
                if others.is_none() {
                    others = Some(other_partitions(p).await?);
                }
                match others.as_ref().expect("set above") {
                    Err(why) => {
                        obs.skipped.insert(pass.clone(), why.to_string());
                        continue;
                    }
                    Ok(parts) => {
                        let engine = (p.plan.join_engine, p.plan.join_test_bits);
                        join::across_published(&p.ctx, &p.input, parts, keys, engine, &label)
                            .await?
                    }
                }
            }
        };
        obs.passes.extend(
            result
                .passes
                .iter()
                .map(|x| format!("({}): {x}", pass.describe())),
        );
        obs.results.insert(pass.clone(), result);
    }
    Ok(obs)
}

/// `explain`'s section for the join passes.
pub(super) async fn explain(p: &Prepared) -> Result<String, Error> {
    let mut out = String::new();
    for (i, pass) in p.plan.joins.iter().enumerate() {
        let users: Vec<String> = p
            .checked
            .statements
            .iter()
            .filter(|s| JoinPass::of(&s.metric).as_ref() == Some(pass))
            .map(|s| format!("line {}", s.line))
            .collect();
        let _ = writeln!(
            out,
            "\npass {}: {}, for {}",
            p.plan.pass_number(PassKind::Joins, i),
            pass.describe(),
            users.join(", ")
        );
        match pass {
            JoinPass::Reference(r) => {
                let d = reference(p, &r.reference)?;
                let _ = writeln!(
                    out,
                    "  reference `{}`: {} file(s) in {} part(s), only the key columns read",
                    r.reference,
                    d.file_count(),
                    d.parts.len()
                );
                if p.plan.join_engine {
                    if let Some(how) = join::reference_on_engine(&p.input, d, r)? {
                        let _ = writeln!(out, "  {how}");
                    }
                }
                let frame = join::not_in_reference_frame(&p.ctx, &p.input, d, r)?;
                crate::exec::explain::render(&mut out, frame).await?;
            }
            JoinPass::AcrossPublished(keys) => match other_partitions(p).await? {
                Err(why) => {
                    let _ = writeln!(out, "  skipped at run time: {why}");
                }
                Ok(parts) => {
                    let files: usize = parts.iter().map(|q| q.input.files.len()).sum();
                    let _ = writeln!(
                        out,
                        "  {} other published partition(s), {files} file(s); only the key columns read",
                        parts.len()
                    );
                    let side =
                        join::published_side(&p.ctx, &p.input, &parts, keys, (None, None)).await?;
                    if p.plan.join_engine {
                        match join::across_by_index_plan(&p.input, &parts, keys, &side)? {
                            IndexPlan::Indexes(how) => {
                                let _ = writeln!(out, "  {how}");
                                continue;
                            }
                            IndexPlan::Footers(why, reading) => {
                                let _ = writeln!(out, "  key indexes not used: {why}");
                                let _ = writeln!(out, "  {reading}");
                                let _ = writeln!(
                                    out,
                                    "  the rows read are probed with the distinct staged keys read for the indexes"
                                );
                                continue;
                            }
                            IndexPlan::Files(why) => {
                                let _ = writeln!(out, "  key indexes not used: {why}");
                            }
                        }
                    }
                    let _ = writeln!(out, "  {}", side.describe());
                    if p.plan.join_engine {
                        if let Some(how) = join::across_on_engine(&p.input, &parts, keys)? {
                            let _ = writeln!(out, "  {how}");
                        }
                    }
                    match join::across_published_frames(&p.ctx, &p.input, (&side, &parts), keys)? {
                        None => {
                            let _ = writeln!(
                                out,
                                "  no published row group can hold a staged key: nothing to read"
                            );
                        }
                        Some((frame, _)) => {
                            crate::exec::explain::render(&mut out, frame).await?;
                        }
                    }
                }
            },
        }
    }
    Ok(out)
}
