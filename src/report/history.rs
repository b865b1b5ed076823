//! A table's published history as a report reads it: every published
//! partition's audit record (which carries the verdict and so each metric's
//! value), in run-key order, with a count of the publishes and rollbacks its
//! audit trail lists. The target ([`Target::history`]) finds the records
//! and the counts; this module parses the records and orders them.
//!
//! Only published partitions have records, so failed or never-published runs
//! never appear.

use std::cmp::Ordering;
use std::path::Path;

use super::error::ReportError;
use super::model::{self, Doc, VerdictDoc};
use crate::publish::{HistoryError, HistorySink, Target};

#[derive(Debug, Clone, PartialEq)]
pub struct History {
    /// Published partitions in run-key order.
    pub partitions: Vec<PublishedPartition>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PublishedPartition {
    /// `k1=v1/k2=v2`, relative to ROOT.
    pub rel: String,
    /// The partition's audit record (a passed verdict plus `published`).
    pub record: VerdictDoc,
    /// Lines of the audit trail: how often a version was published into the
    /// partition and how often one was rolled back.
    pub publishes: usize,
    pub rollbacks: usize,
}

/// Reads every published partition of `target`.
pub async fn read(target: &dyn Target) -> Result<History, ReportError> {
    let mut partitions = Vec::new();
    target.history(&mut Parsed(&mut partitions)).await?;
    partitions.sort_by(|a, b| run_key_order(&a.record.partition, &b.record.partition));
    Ok(History { partitions })
}

/// Parses each record as the target reads it, so that an unreadable one
/// stops the reading there.
struct Parsed<'a>(&'a mut Vec<PublishedPartition>);

impl HistorySink for Parsed<'_> {
    fn record(&mut self, rel: &str, path: &Path, text: &str) -> Result<(), HistoryError> {
        let record =
            match model::parse(text).map_err(|e| HistoryError::read(path, &e.to_string()))? {
                Doc::Verdict(v) => v,
                Doc::Error { .. } => {
                    return Err(HistoryError::read(
                        path,
                        "an audit record is never an error",
                    ))
                }
            };
        self.0.push(PublishedPartition {
            rel: rel.to_string(),
            record,
            publishes: 0,
            rollbacks: 0,
        });
        Ok(())
    }

    fn trail(&mut self, publishes: usize, rollbacks: usize) {
        if let Some(last) = self.0.last_mut() {
            last.publishes = publishes;
            last.rollbacks = rollbacks;
        }
    }
}

/// Run keys compare part by part, in `partitioned by` order: integers by
/// value (so `hour=9` comes before `hour=10`), everything else by bytes
/// (ISO dates sort as dates).
pub fn run_key_order(a: &[(String, String)], b: &[(String, String)]) -> Ordering {
    for ((ka, va), (kb, vb)) in a.iter().zip(b) {
        let o = ka.cmp(kb).then_with(|| value_order(va, vb));
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

fn value_order(a: &str, b: &str) -> Ordering {
    match (a.parse::<i128>(), b.parse::<i128>()) {
        (Ok(x), Ok(y)) => x.cmp(&y),
        _ => a.as_bytes().cmp(b.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn run_keys_order_numbers_by_value() {
        let nine = key(&[("day", "2025-03-05"), ("hour", "9")]);
        let ten = key(&[("day", "2025-03-05"), ("hour", "10")]);
        let next_day = key(&[("day", "2025-03-06"), ("hour", "1")]);
        assert_eq!(run_key_order(&nine, &ten), Ordering::Less);
        assert_eq!(run_key_order(&ten, &next_day), Ordering::Less);
        assert_eq!(run_key_order(&ten, &ten), Ordering::Equal);
    }
}
