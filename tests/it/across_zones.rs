//! The key zones in the index headers rule out the published partitions
//! that cannot hold a staged key, where the footers cannot: each day's
//! keys lie in clusters (region prefixes; negative and positive integers;
//! small and huge unsigned ones) in shuffled rows, so every row group's
//! range spans the new day's keys. The verdict always equals DataFusion's
//! grouped semi join, with stale keys at the clusters' very ends and new
//! keys in the gaps between them.

use std::fs::{self, File};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray, UInt64Array};
use datafusion::parquet::arrow::ArrowWriter;

use super::across_index::publish;
use super::across_text::rules;
use super::oracle::splitmix::Rng;
use crate::support::{check_across, check_across_with, files_in};

const PREFIXES: [&str; 4] = ["eu-", "us-", "", "é"];

/// The row `i` of day `d`: (s, n, u), each in one of its column's
/// clusters.
fn row(d: u64, i: u64) -> (String, i64, u64) {
    let at = d * 100 + i;
    let s = format!("{}{at:05}", PREFIXES[(i % 4) as usize]);
    let n = match i % 2 {
        0 => -((d * 1000 + i) as i64),
        _ => (d * 1000 + i) as i64 + (1 << 40),
    };
    let u = match i % 3 {
        0 => at,
        _ => u64::MAX - at,
    };
    (s, n, u)
}

/// Writes `rows` shuffled to `dir/part-0.parquet`, in row groups of `group`.
fn write(rng: &mut Rng, dir: &Path, mut rows: Vec<(String, i64, u64)>, group: usize) {
    for i in (1..rows.len()).rev() {
        rows.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let batch = RecordBatch::try_from_iter([
        (
            "s",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| &r.0))) as _,
        ),
        (
            "n",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))) as _,
        ),
        (
            "u",
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.2))) as _,
        ),
    ])
    .unwrap();
    fs::create_dir_all(dir).unwrap();
    let props = datafusion::parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(group))
        .build();
    let file = File::create(dir.join("part-0.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn key_zones_rule_out_only_the_partitions_without_a_staged_key() {
    for seed in [1u64, 2, 3] {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path();
        let mut rng = Rng(seed);
        rules(
            cwd,
            "table t\npartitioned by day\n\
             warn unique(s) across published\n\
             warn unique(n) across published\n\
             warn unique(u) across published\n\
             warn unique(s, n) across published\n",
        );
        for day in 1..=6u64 {
            let dir = cwd.join(format!("s{day}"));
            let group = 7 + rng.below(60) as usize;
            write(
                &mut rng,
                &dir,
                (0..60).map(|i| row(day, i)).collect(),
                group,
            );
            publish(cwd, &dir, &day.to_string(), &[]);
        }
        // The new day's keys lie beyond every day's clusters, or between
        // them; stale rows come from two days, at their clusters' ends.
        let stale = [
            (1 + rng.below(3), 0),
            (4 + rng.below(3), 59),
            (2, 58),
            (2, 1),
        ];
        let mut rows: Vec<_> = (0..60).map(|i| row(9, i)).collect();
        rows.extend(stale.iter().map(|(d, i)| row(*d, *i)));
        rows.push(("f".into(), 0, 1 << 63));
        rows.push(("eu-zzz".into(), 1 << 39, 1 << 40));
        let staged = cwd.join("new");
        write(&mut rng, &staged, rows, 13);
        let (grouped, _) = check_across(cwd, &staged, "9", Some("grouped"));
        let (got, log) = check_across(cwd, &staged, "9", None);
        assert_eq!(got, grouped, "seed {seed}");
        let mut days: Vec<u64> = stale.iter().map(|s| s.0).collect();
        days.sort_unstable();
        days.dedup();
        let zones = format!(
            "the key zones in 6 index header(s) rule out {} of 6 published partition(s)",
            6 - days.len()
        );
        assert_eq!(log.matches(&zones).count(), 4, "seed {seed}:\n{log}");
        // The new day's keys beyond or between every day's zones are not
        // looked up at all: the distinct staged keys leave them out.
        assert!(
            log.contains(
                "staged row(s) left out, their keys outside every published partition's key zones"
            ),
            "seed {seed}:\n{log}"
        );
        // A sample of the staged keys falls within every row group's
        // range, but not within every zone: all the staged keys are read,
        // and the zones rule out as many partitions.
        let sample = [("DQGATE_TEST_SAMPLE_ROWS", "2")];
        let (sampled, log) = check_across_with(cwd, &staged, "9", &sample, &[]);
        assert_eq!(sampled, got, "seed {seed}");
        assert_eq!(
            log.matches(&zones).count(),
            4,
            "seed {seed}, sampled:\n{log}"
        );
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        for c in v["checks"].as_array().unwrap() {
            assert_eq!(c["value"], stale.len(), "seed {seed}: {c}");
        }
        // The failed rows read the published side only where the zones
        // leave it, and equal those read from every partition's files (a
        // copy of the table without its key indexes).
        copy_without_indexes(&cwd.join("table"), &cwd.join("plain"));
        let files = |table: &str, out: &str| {
            let run = Command::new(env!("CARGO_BIN_EXE_dqgate"))
                .current_dir(cwd)
                .args([
                    "check",
                    "rules.dq",
                    "--staged",
                    "new",
                    "--partition",
                    "day=9",
                ])
                .args([
                    "--table",
                    table,
                    "--failed-rows",
                    out,
                    "--failed-rows-limit",
                    "all",
                ])
                .output()
                .unwrap();
            assert_eq!(
                run.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&run.stderr)
            );
            files_in(&cwd.join(out))
        };
        let zoned = files("table", "zoned");
        assert_eq!(zoned.len(), 4, "seed {seed}: a file a check");
        assert_eq!(zoned, files("plain", "plain-rows"), "seed {seed}");
    }
}

/// Copies the table `from` to `to`, leaving its key index files out.
fn copy_without_indexes(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_without_indexes(&e.path(), &to.join(&name));
        } else if !(name.starts_with("_dqgate_keys_") && name.ends_with(".idx")) {
            fs::copy(e.path(), to.join(&name)).unwrap();
        }
    }
}
