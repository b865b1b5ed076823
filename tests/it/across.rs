//! `values(...) in REF(...)` and `unique(...) across published` end to end,
//! on tables published by the real binary: samples naming several
//! partitions, pruning by footer ranges, what `explain` shows, and byte-identical
//! verdicts whatever the thread count.

use std::fs::{self, File};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use serde_json::Value as Json;

use crate::support::{data, dqgate, stage};

fn run(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = dqgate(cwd, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn publish(cwd: &Path, staged: &Path, day: &str) {
    let dir = cwd.join(format!("staging/{day}"));
    stage(staged, &dir);
    let partition = format!("sales_date={day}");
    let (code, out, err) = run(
        cwd,
        &[
            "publish",
            "rules.dq",
            "--staged",
            dir.to_str().unwrap(),
            "--partition",
            &partition,
            "--table",
            "table",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
}

/// `check rules.dq` of `staged` as day `day` against `table`, as JSON.
fn check_json(cwd: &Path, staged: &Path, day: &str) -> (i32, Json) {
    let partition = format!("sales_date={day}");
    let (code, out, err) = run(
        cwd,
        &[
            "check",
            "rules.dq",
            "--staged",
            staged.to_str().unwrap(),
            "--partition",
            &partition,
            "--table",
            "table",
            "--format",
            "json",
        ],
    );
    (
        code,
        serde_json::from_str(&out).unwrap_or_else(|_| panic!("{out}{err}")),
    )
}

const RULES: &str =
    "table daily_sales\npartitioned by sales_date\n\ncheck unique(order_id) across published\n";

#[test]
fn samples_name_every_partition_a_key_lives_in() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    fs::write(cwd.join("rules.dq"), RULES).unwrap();
    publish(cwd, &data("sales_ok"), "2025-03-05");
    // 2025-03-06 repeats two of 2025-03-05's orders, so it is published
    // with a rule file that does not look across.
    fs::write(
        cwd.join("rules.dq"),
        "table daily_sales\npartitioned by sales_date\ncheck row_count > 0\n",
    )
    .unwrap();
    publish(cwd, &data("sales_next"), "2025-03-06");
    fs::write(cwd.join("rules.dq"), RULES).unwrap();
    let small = data("sales_small");
    let (code, v) = check_json(cwd, &small, "2025-03-07");
    assert_eq!(code, 1, "{v}");
    let check = &v["checks"][0];
    // sales_small is the first 1100 orders of sales_ok: every one clashes.
    assert_eq!(check["value"], 1100);
    let samples: Vec<(i64, &str)> = check["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["key"]["order_id"].as_i64().unwrap(),
                s["partition"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        samples,
        [
            (1_000_000, "sales_date=2025-03-05"),
            (1_000_007, "sales_date=2025-03-05"),
            (1_000_007, "sales_date=2025-03-06"),
            (1_000_014, "sales_date=2025-03-05"),
            (1_000_021, "sales_date=2025-03-05"),
        ]
    );
    // Replacing 2025-03-05 itself: only 2025-03-06 counts, where 2 of the
    // small partition's orders live.
    let (_, v) = check_json(cwd, &small, "2025-03-05");
    assert_eq!(v["checks"][0]["value"], 2, "{v}");
}

/// One Parquet file of `ids` (with statistics).
fn ids_file(path: &Path, ids: std::ops::Range<i64>) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from_iter_values(ids))],
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(File::create(path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn published_files_outside_the_staged_key_range_are_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    fs::write(
        cwd.join("rules.dq"),
        "table t\npartitioned by day\ncheck unique(id) across published\n",
    )
    .unwrap();
    // Published without the check, so without key indexes: this is the
    // reading of the partitions' files (across_index.rs has the indexes).
    fs::write(
        cwd.join("publish.dq"),
        "table t\npartitioned by day\ncheck row_count > 0\n",
    )
    .unwrap();
    for (day, ids) in [("1", 0..1000), ("2", 1000..2000)] {
        ids_file(&cwd.join(format!("s{day}/part-0.parquet")), ids);
        let part = format!("day={day}");
        let (code, out, err) = run(
            cwd,
            &[
                "publish",
                "publish.dq",
                "--staged",
                &format!("s{day}"),
                "--partition",
                &part,
                "--table",
                "table",
            ],
        );
        assert_eq!(code, 0, "{out}{err}");
    }
    ids_file(&cwd.join("far/part-0.parquet"), 5000..5010);
    let args = [
        "rules.dq",
        "--staged",
        "far",
        "--partition",
        "day=3",
        "--table",
        "table",
    ];
    let (code, out, _) = run(cwd, &[&["explain"][..], &args[..]].concat());
    assert_eq!(code, 0);
    assert!(
        out.contains("2 other published partition(s), 2 file(s)"),
        "{out}"
    );
    assert!(
        out.contains("no published row group can hold a staged key: nothing to read"),
        "{out}"
    );
    let (code, out, _) = run(cwd, &[&["check"][..], &args[..]].concat());
    assert_eq!(code, 0, "{out}");
    // Overlapping the second day only: its file is read (and clashes),
    // the first day's is pruned.
    ids_file(&cwd.join("near/part-0.parquet"), 1995..2005);
    let args = [
        "rules.dq",
        "--staged",
        "near",
        "--partition",
        "day=3",
        "--table",
        "table",
        "--format",
        "json",
    ];
    let (code, out, _) = run(cwd, &[&["explain"][..], &args[..7]].concat());
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("day=2/part-0"), "{out}");
    assert!(!out.contains("day=1/part-0"), "{out}");
    assert!(out.contains("LeftSemi"), "{out}");
    let (code, out, _) = run(cwd, &[&["check"][..], &args[..]].concat());
    assert_eq!(code, 1, "{out}");
    let v: Json = serde_json::from_str(&out).unwrap();
    assert_eq!(v["checks"][0]["value"], 5);
    assert_eq!(v["checks"][0]["samples"][0]["partition"], "day=2");
    // A partition directory that dqgate did not publish (no audit record):
    // the table cannot be trusted, the audit stops (exit 3).
    ids_file(&cwd.join("table/day=9/part-0.parquet"), 0..10);
    let (code, out, err) = run(cwd, &[&["check"][..], &args[..]].concat());
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        err.contains("day=9") && err.contains("no audit record"),
        "{err}"
    );
}

#[test]
fn explain_shows_the_anti_join_and_verdicts_do_not_depend_on_threads() {
    let rules = crate::support::repo().join("testdata/cases/ref_fail_json/rules.dq");
    let staged = data("sales_ok");
    let base = [
        "check",
        rules.to_str().unwrap(),
        "--staged",
        staged.to_str().unwrap(),
        "--partition",
        "sales_date=2025-03-05",
        "--format",
        "json",
    ];
    let cwd = std::env::temp_dir();
    let one = run(&cwd, &[&base[..], &["--threads", "1"]].concat());
    let four = run(
        &cwd,
        &[&base[..], &["--threads", "4", "--memory-limit", "64MiB"]].concat(),
    );
    assert_eq!(one.0, 1);
    assert_eq!(one.1, four.1);
    let (code, out, err) = run(
        &cwd,
        &[
            "explain",
            rules.to_str().unwrap(),
            "--staged",
            staged.to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("4 statement(s) compile to 2 pass(es)"),
        "{out}"
    );
    assert!(
        out.contains("pass 1: anti-join of (store_id) against reference `stores` (store_id), for line 7, line 9"),
        "{out}"
    );
    assert!(
        out.contains("reference `stores`: 2 file(s) in 2 part(s)"),
        "{out}"
    );
    assert!(out.contains("LeftAnti Join"), "{out}");
}
