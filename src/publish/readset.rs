//! The read set of an audit: what it read of the table beyond its own
//! partition, so that the publish can check, at the instant of its swap or
//! commit, that the verdict still holds (`spec/publish.md`, invariant 10).
//!
//! Every read of other partitions that a rule file can make is table-wide:
//! `across published` reads every other partition, `history(N)` reads the
//! audit records of the partitions before the run key (which ones depends
//! on which exist), and `schema matches published` on a new run key reads
//! the partition that sorts last (which depends on which exist). So a read
//! set is the table's whole set of published partitions other than the run
//! key's, each with the version read: a partition replaced since is a
//! conflict, and so is one published since (a phantom) or one gone.
//!
//! A rule file that reads only its own partition has an empty read set; its
//! publish stays under the per-partition compare-and-swap alone (invariant 4)
//! and runs concurrently with publishes of other partitions.

use std::collections::BTreeMap;

use serde::Serialize;

/// The version of one partition that an audit read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartVersion {
    /// `published.version` of its audit record (Hive), or the version token
    /// of its files (Delta).
    pub version: String,
    /// `input.fingerprint` of its audit record.
    pub fingerprint: String,
}

/// What an audit read of the table beyond its own partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadSet {
    /// Why the table was read: the statements that read it, in rule-file
    /// order (`line 4: unique(order_id) across published`). Empty: the audit
    /// read only its own partition, and nothing needs validating.
    pub reads: Vec<String>,
    /// Every published partition but the run key's (`k1=v1/k2=v2`), with
    /// the version read.
    pub partitions: BTreeMap<String, PartVersion>,
    /// Delta: the table version the audit read.
    pub table_version: Option<u64>,
}

impl ReadSet {
    /// Whether the audit read other partitions (then the table state must
    /// still hold when it publishes).
    pub fn reads_table(&self) -> bool {
        !self.reads.is_empty()
    }

    /// The first difference between the partitions read and the partitions
    /// published `now` (the run key's own partition left out of both), or
    /// `None` when the read set still holds.
    pub fn changed(&self, now: &BTreeMap<String, PartVersion>) -> Option<String> {
        if !self.reads_table() {
            return None;
        }
        for (rel, read) in &self.partitions {
            match now.get(rel) {
                None => return Some(format!("partition `{rel}` is no longer published")),
                Some(v) if v != read => {
                    return Some(format!(
                        "partition `{rel}` is now version {} (the audit read {})",
                        v.version, read.version
                    ))
                }
                Some(_) => {}
            }
        }
        now.keys()
            .find(|rel| !self.partitions.contains_key(*rel))
            .map(|rel| format!("partition `{rel}` was published since the audit"))
    }
}

/// The read set as the audit record states it (`read`).
#[derive(Serialize)]
struct ReadWire<'a> {
    reads: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    table_version: Option<u64>,
    partitions: Vec<PartWire<'a>>,
}

#[derive(Serialize)]
struct PartWire<'a> {
    partition: &'a str,
    version: &'a str,
    fingerprint: &'a str,
}

impl ReadSet {
    /// The `read` object of the audit record; `None` for an empty read set.
    pub fn to_json(&self) -> Option<serde_json::Value> {
        if !self.reads_table() {
            return None;
        }
        let wire = ReadWire {
            reads: &self.reads,
            table_version: self.table_version,
            partitions: self
                .partitions
                .iter()
                .map(|(rel, v)| PartWire {
                    partition: rel,
                    version: &v.version,
                    fingerprint: &v.fingerprint,
                })
                .collect(),
        };
        serde_json::to_value(wire).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(version: &str) -> PartVersion {
        PartVersion {
            version: version.into(),
            fingerprint: format!("sha256:{version}"),
        }
    }

    fn set(parts: &[(&str, &str)]) -> BTreeMap<String, PartVersion> {
        parts.iter().map(|(r, x)| (r.to_string(), v(x))).collect()
    }

    #[test]
    fn a_read_set_holds_only_for_the_state_it_read() {
        let read = ReadSet {
            reads: vec!["line 3: unique(k) across published".into()],
            partitions: set(&[("d=1", "v1")]),
            table_version: None,
        };
        assert_eq!(read.changed(&set(&[("d=1", "v1")])), None);
        assert!(read
            .changed(&set(&[("d=1", "v2")]))
            .unwrap()
            .contains("now version v2"));
        assert!(read
            .changed(&set(&[("d=1", "v1"), ("d=2", "v1")]))
            .unwrap()
            .contains("`d=2` was published since"));
        assert!(read
            .changed(&set(&[]))
            .unwrap()
            .contains("no longer published"));
        let own_only = ReadSet::default();
        assert_eq!(own_only.changed(&set(&[("d=9", "v1")])), None);
        assert_eq!(own_only.to_json(), None);
        let json = read.to_json().unwrap();
        assert_eq!(json["partitions"][0]["partition"], "d=1");
        assert_eq!(json["reads"][0], "line 3: unique(k) across published");
    }
}
