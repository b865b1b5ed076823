//! `--failed-rows DIR` end to end on the real binary: (file, row) order and
//! byte-identical files whatever the thread count, the limit and its `cut`
//! flag, a DIR inside the table or the staged directory refused before
//! anything is read, and an unwritable DIR that leaves the verdict and the
//! exit code as they were. The rows themselves are compared with DuckDB's
//! own `SELECT` of the offending rows in `tests/crosscheck/failed_rows.py`.

use std::fs::{self, File};
use std::path::Path;

use datafusion::arrow::array::{Array, Int64Array, StringArray};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::Value as Json;

use crate::support::{data, dqgate, repo, stage};

fn run(cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out = dqgate(cwd, args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `check rules/daily_sales.dq` of `sales_bad` as JSON, with `extra` args.
fn check_bad(cwd: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["--format", "json"];
    args.extend_from_slice(extra);
    check_of(cwd, "sales_bad", &args)
}

/// `check rules/daily_sales.dq` of a fixture, with `extra` args.
fn check_of(cwd: &Path, fixture: &str, extra: &[&str]) -> (i32, String, String) {
    let rules = repo().join("rules/daily_sales.dq");
    let staged = data(fixture);
    let mut args = vec![
        "check",
        rules.to_str().unwrap(),
        "--staged",
        staged.to_str().unwrap(),
        "--partition",
        "sales_date=2025-03-05",
    ];
    args.extend_from_slice(extra);
    run(cwd, &args)
}

/// `publish rules/daily_sales.dq` of `staged` into `table` (both under
/// `cwd`), as JSON, with `--failed-rows dir`.
fn publish(cwd: &Path, dir: &str) -> (i32, String, String) {
    let rules = repo().join("rules/daily_sales.dq");
    run(
        cwd,
        &[
            "publish",
            rules.to_str().unwrap(),
            "--staged",
            "staged",
            "--partition",
            "sales_date=2025-03-05",
            "--table",
            "table",
            "--format",
            "json",
            "--failed-rows",
            dir,
        ],
    )
}

/// (file, row) of every row of a failed-rows file, in file order.
fn positions(path: &Path) -> Vec<(String, i64)> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let file = batch.column_by_name("_dqgate_file").unwrap();
        let file = file.as_any().downcast_ref::<StringArray>().unwrap();
        let row = batch.column_by_name("_dqgate_row").unwrap();
        let row = row.as_any().downcast_ref::<Int64Array>().unwrap();
        for i in 0..batch.num_rows() {
            out.push((file.value(i).to_string(), row.value(i)));
        }
    }
    out
}

/// The `failed_rows` objects of the verdict, by line.
fn failed_rows(verdict: &str) -> Vec<(u64, Json)> {
    let v: Json = serde_json::from_str(verdict).unwrap();
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("failed_rows").is_some())
        .map(|c| (c["line"].as_u64().unwrap(), c["failed_rows"].clone()))
        .collect()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn two_runs_write_identical_files_in_file_then_row_order() {
    let tmp = tempfile::tempdir().unwrap();
    let (code1, out1, err1) = check_bad(tmp.path(), &["--failed-rows", "a", "--threads", "1"]);
    let (code2, out2, err2) = check_bad(tmp.path(), &["--failed-rows", "b", "--threads", "4"]);
    assert_eq!((code1, code2), (1, 1), "{err1}{err2}");
    assert_eq!(out1, out2, "the verdict names the same files");
    let names = listing(&tmp.path().join("a"));
    assert_eq!(names, listing(&tmp.path().join("b")));
    let named: Vec<String> = failed_rows(&out1)
        .iter()
        .map(|(_, f)| f["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        names, named,
        "exactly the files the verdict names, no temporaries"
    );
    // Every failing check of sales_bad with offending rows, and no other.
    let lines: Vec<u64> = failed_rows(&out1).iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [6, 7, 8, 9, 11, 12, 13, 15]);
    for name in &names {
        let a = fs::read(tmp.path().join("a").join(name)).unwrap();
        let b = fs::read(tmp.path().join("b").join(name)).unwrap();
        assert!(a == b, "{name} differs between two runs");
        let p = positions(&tmp.path().join("a").join(name));
        let mut sorted = p.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(p, sorted, "{name}: rows in (file, row) order, each once");
    }
    for (_, f) in failed_rows(&out1) {
        let p = positions(&tmp.path().join("a").join(f["path"].as_str().unwrap()));
        assert_eq!(p.len() as u64, f["rows"].as_u64().unwrap());
        assert_eq!(f["cut"], Json::Bool(false));
    }
}

#[test]
fn without_the_flag_the_verdict_is_unchanged_and_with_it_only_gains_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, plain, _) = check_bad(tmp.path(), &[]);
    let (_, with, _) = check_bad(tmp.path(), &["--failed-rows", "out"]);
    let mut stripped: Json = serde_json::from_str(&with).unwrap();
    for c in stripped["checks"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("failed_rows");
    }
    let plain: Json = serde_json::from_str(&plain).unwrap();
    assert_eq!(stripped, plain);
}

#[test]
fn the_limit_keeps_the_first_rows_and_says_it_cut() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, all, err) = check_bad(
        tmp.path(),
        &["--failed-rows", "all", "--failed-rows-limit", "all"],
    );
    assert_eq!(code, 1, "{err}");
    let (code, five, err) = check_bad(
        tmp.path(),
        &["--failed-rows", "five", "--failed-rows-limit", "5"],
    );
    assert_eq!(code, 1, "{err}");
    let all = failed_rows(&all);
    let five = failed_rows(&five);
    assert_eq!(all.len(), five.len());
    let mut cut_seen = false;
    for ((line, a), (_, f)) in all.iter().zip(&five) {
        let rows = a["rows"].as_u64().unwrap();
        assert_eq!(f["rows"].as_u64().unwrap(), rows.min(5), "line {line}");
        assert_eq!(f["cut"], Json::Bool(rows > 5), "line {line}");
        cut_seen |= rows > 5;
        let whole = positions(&tmp.path().join("all").join(a["path"].as_str().unwrap()));
        let first = positions(&tmp.path().join("five").join(f["path"].as_str().unwrap()));
        assert_eq!(
            first,
            whole[..whole.len().min(5)],
            "line {line}: the first rows"
        );
    }
    assert!(cut_seen, "null_rate(customer_id) has 142 null rows");
    // 142 null customer ids: the verdict's rate says so too.
    assert!(all.iter().any(|(l, a)| *l == 7 && a["rows"] == 142));
    let (code, _, err) = check_bad(
        tmp.path(),
        &["--failed-rows", "x", "--failed-rows-limit", "0"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("at least 1 row"), "{err}");
}

#[test]
fn a_directory_inside_the_table_or_the_staged_files_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("table")).unwrap();
    let (code, out, err) = check_bad(
        tmp.path(),
        &["--table", "table", "--failed-rows", "table/out"],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("inside the table root"), "{err}");
    assert!(out.contains("\"verdict\": \"error\""), "{out}");
    assert!(!tmp.path().join("table/out").exists());
    // Through `..` and a symlink to the table, too.
    std::os::unix::fs::symlink(tmp.path().join("table"), tmp.path().join("link")).unwrap();
    let (code, _, err) = check_bad(
        tmp.path(),
        &["--table", "table", "--failed-rows", "x/../link/out"],
    );
    assert_eq!(code, 2, "{err}");
    let staged_out = data("sales_bad").join("failed");
    let (code, _, err) = check_bad(tmp.path(), &["--failed-rows", staged_out.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("inside the staged directory"), "{err}");
    assert!(!staged_out.exists());
    // publish refuses the same before auditing.
    fs::create_dir_all(tmp.path().join("staged")).unwrap();
    let (code, _, err) = publish(tmp.path(), "table/sales_date=2025-03-05");
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("inside the table root"), "{err}");
    assert!(fs::read_dir(tmp.path().join("table"))
        .unwrap()
        .next()
        .is_none());
}

#[test]
fn an_unwritable_directory_keeps_the_verdict_and_the_exit_code() {
    let tmp = tempfile::tempdir().unwrap();
    fs::write(tmp.path().join("a-file"), "not a directory").unwrap();
    let (code0, plain, _) = check_bad(tmp.path(), &[]);
    let (code, out, err) = check_bad(tmp.path(), &["--failed-rows", "a-file/out"]);
    assert_eq!((code0, code), (1, 1), "{err}");
    assert_eq!(
        out, plain,
        "no file was written: the verdict is byte for byte the same"
    );
    assert!(
        err.contains("cannot create the failed-rows directory `a-file/out`")
            && err.contains("the verdict and the exit code are unchanged"),
        "{err}"
    );
    // A file that cannot be renamed into place (a directory holds its
    // name): the others are written and named, that one is not.
    fs::create_dir_all(tmp.path().join("out/line-0009-unique_order_id.parquet/x")).unwrap();
    let (code, out, err) = check_bad(tmp.path(), &["--failed-rows", "out"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot write the failed rows of line 9"),
        "{err}"
    );
    let lines: Vec<u64> = failed_rows(&out).iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [6, 7, 8, 11, 12, 13, 15]);
    let names = listing(&tmp.path().join("out"));
    assert!(
        names.iter().all(|n| !n.starts_with('.')),
        "no temporary left: {names:?}"
    );
}

#[test]
fn a_passing_verdict_writes_nothing_and_the_text_names_the_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = check_of(tmp.path(), "sales_ok", &["--failed-rows", "out"]);
    assert_eq!(code, 0, "{err}");
    assert!(!tmp.path().join("out").exists() || listing(&tmp.path().join("out")).is_empty());
    let limit = ["--failed-rows", "out", "--failed-rows-limit", "100"];
    let (_, text, _) = check_of(tmp.path(), "sales_bad", &limit);
    assert!(
        text.contains(
            "failed rows: line-0007-null_rate_customer_id_2.parquet  (100 rows, cut at the limit)"
        ),
        "{text}"
    );
}

#[test]
fn a_failing_publish_writes_the_rows_and_publishes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    stage(&data("sales_bad"), &tmp.path().join("staged"));
    let (code, out, err) = publish(tmp.path(), "out");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing was published"), "{err}");
    let lines: Vec<u64> = failed_rows(&out).iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [6, 7, 8, 9, 11, 12, 13, 15]);
    assert_eq!(listing(&tmp.path().join("out")).len(), 8);
    assert!(!tmp.path().join("table/sales_date=2025-03-05").exists());
    // The same rows as `check` writes for the same files.
    let (_, checked, _) = check_bad(tmp.path(), &["--failed-rows", "by-check"]);
    for (_, f) in failed_rows(&checked) {
        let name = f["path"].as_str().unwrap();
        let a = fs::read(tmp.path().join("out").join(name)).unwrap();
        let b = fs::read(tmp.path().join("by-check").join(name)).unwrap();
        assert!(a == b, "{name}: publish and check wrote different files");
    }
}
