//! Keys: the columns, or the pairs of columns, whose values are unique.
//!
//! A single column is unique when its distinct count (from the profile's
//! fused pass) equals its non-null count; no further pass is needed. Only
//! when no column is unique are pairs tried, each as the audit's own key
//! check (`duplicate_count(a, b)`, run by the key engine), most promising
//! first, stopping at the first pair without duplicates.

use datafusion::prelude::SessionContext;

use super::profile::{Column, Profile};
use crate::check::Metric;
use crate::error::Error;
use crate::exec;
use crate::plan::AuditPlan;
use crate::staged::StagedInput;

/// At most this many pairs are tried (one pass each).
const PAIRS_TRIED: usize = 6;

/// A unique key found in the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub columns: Vec<String>,
    /// No key part has a null: a primary key.
    pub primary: bool,
}

/// The single unique columns, in schema order; or, when there is none, the
/// first unique pair; and the passes the pairs cost.
pub async fn find(
    ctx: &SessionContext,
    input: &StagedInput,
    profile: &Profile,
) -> Result<(Vec<Key>, usize), Error> {
    let rows = profile.rows;
    let single: Vec<Key> = profile
        .columns
        .iter()
        .filter(|c| c.unique(rows))
        .map(|c| Key {
            columns: vec![c.name().to_string()],
            primary: c.nulls == Some(0),
        })
        .collect();
    if !single.is_empty() || rows < 2 {
        return Ok((single, 0));
    }
    let mut passes = 0;
    for (a, b) in candidate_pairs(&profile.columns, rows) {
        let keys = vec![a.name().to_string(), b.name().to_string()];
        let plan = AuditPlan::for_metrics(&[Metric::DuplicateCount(keys.clone())])
            .key_strategies_from_footers(
                &input.schema,
                &|c| exec::stats::column_facts(input, c),
                None,
                None,
            );
        let obs = exec::observe(ctx, input, &plan).await?;
        passes += plan.scans();
        let sorted = crate::plan::sorted(&keys);
        let unique = obs.duplicates.get(&sorted).is_some_and(|d| d.keys == 0);
        let present = a.present(rows).min(b.present(rows));
        if unique && present >= 2 {
            return Ok((
                vec![Key {
                    columns: keys,
                    primary: a.nulls == Some(0) && b.nulls == Some(0),
                }],
                passes,
            ));
        }
    }
    Ok((Vec::new(), passes))
}

/// Pairs of key-like columns with more than one value whose distinct counts
/// could make every row unique, the largest products first (then schema
/// order), at most [`PAIRS_TRIED`].
fn candidate_pairs(columns: &[Column], rows: u64) -> Vec<(&Column, &Column)> {
    let keylike: Vec<(usize, &Column)> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| c.kind.keylike() && c.distinct.is_some_and(|d| d >= 2))
        .collect();
    let mut pairs = Vec::new();
    for (i, (ia, a)) in keylike.iter().enumerate() {
        for (ib, b) in &keylike[i + 1..] {
            let product = u128::from(a.distinct.unwrap_or(0)) * u128::from(b.distinct.unwrap_or(0));
            if product >= u128::from(rows) {
                pairs.push((product, *ia, *ib));
            }
        }
    }
    pairs.sort_by(|x, y| y.0.cmp(&x.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    pairs
        .into_iter()
        .take(PAIRS_TRIED)
        .map(|(_, a, b)| (&columns[a], &columns[b]))
        .collect()
}
