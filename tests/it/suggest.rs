//! `dqgate suggest`: on every fixture in `testdata/data/`, the suggested rule
//! file passes `lint`, and `check` passes on the data it was suggested from,
//! every statement holding (none skipped); the text is deterministic.
//! Rules suggested from a good partition catch a bad one; `--table` adds
//! `history(N)` baselines over the partitions published before the run key.

use std::fs;
use std::path::{Path, PathBuf};

use crate::golden::copy_dir;
use crate::support::{data, dqgate, repo};

/// Every staged partition under `testdata/data/` (the writers' fixtures are
/// one level further down).
fn fixtures() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in [data(""), data("writers")] {
        for e in fs::read_dir(&root).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() && path != data("writers") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = dqgate(&repo(), args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `--partition` arguments the suggestion proposes, when it does.
fn candidate(text: &str) -> Vec<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("# run key candidate: "))
        .map(|c| c.split(' ').map(str::to_string).collect())
        .unwrap_or_default()
}

fn statements(text: &str) -> usize {
    text.lines()
        .filter(|l| l.starts_with("check ") || l.starts_with("warn "))
        .count()
}

/// Suggests for `dir` (with the run key it proposes), then lints and checks
/// the result on `dir`; the problems found.
fn round_trip(dir: &Path, tmp: &Path) -> Result<(), String> {
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    let staged = dir.to_str().unwrap();
    let (code, first, err) = run(&["suggest", "--staged", staged]);
    if code != 0 {
        // Unreadable data: suggest fails as check does, with exit 3.
        let probe = tmp.join(format!("{name}-probe.dq"));
        fs::write(&probe, "table t\ncheck row_count >= 0\n").unwrap();
        let (check_code, _, _) = run(&["check", probe.to_str().unwrap(), "--staged", staged]);
        return match (code, check_code) {
            (3, 3) if err.starts_with("dqgate: error: ") && !err.contains("panicked") => Ok(()),
            _ => Err(format!(
                "{name}: suggest exited {code}, check {check_code}: {err}"
            )),
        };
    }
    let key = candidate(&first);
    let mut args = vec!["suggest", "--staged", staged];
    args.extend(key.iter().map(String::as_str));
    let (code, text, err) = run(&args);
    if code != 0 {
        return Err(format!("{name}: suggest {key:?} exited {code}: {err}"));
    }
    let (_, again, _) = run(&args);
    if again != text {
        return Err(format!("{name}: two suggestions differ"));
    }
    if !key.is_empty() && !text.contains("\npartitioned by ") {
        return Err(format!("{name}: no `partitioned by` with {key:?}:\n{text}"));
    }
    let rules = tmp.join(format!("{name}.dq"));
    fs::write(&rules, &text).unwrap();
    let rules = rules.to_str().unwrap();
    let (code, out, err) = run(&["lint", rules, "--staged", staged]);
    if code != 0 {
        return Err(format!("{name}: lint exited {code}:\n{out}{err}\n{text}"));
    }
    let mut check = vec!["check", rules, "--staged", staged, "--format", "json"];
    check.extend(key.iter().map(String::as_str));
    let (code, out, err) = run(&check);
    let verdict: serde_json::Value = serde_json::from_str(&out)
        .map_err(|e| format!("{name}: verdict is not JSON ({e}): {out}{err}"))?;
    let summary = &verdict["summary"];
    let all_hold =
        summary["passed"] == summary["checks"] && summary["checks"] == statements(&text) as u64;
    if code != 0 || !all_hold {
        return Err(format!(
            "{name}: check exited {code}, {summary}\n{text}\n{out}"
        ));
    }
    Ok(())
}

#[test]
fn suggestions_lint_and_pass_on_every_fixture() {
    let tmp = tempfile::tempdir().unwrap();
    let all = fixtures();
    assert!(all.len() >= 20, "fixtures missing: {all:?}");
    let failures: Vec<String> = all
        .iter()
        .filter_map(|d| round_trip(d, tmp.path()).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_suggestion_does_not_depend_on_where_the_files_are() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("elsewhere").join("sales_ok");
    copy_dir(&data("sales_ok"), &copy).unwrap();
    let key = "sales_date=2025-03-05";
    let here = run(&[
        "suggest",
        "--staged",
        "testdata/data/sales_ok",
        "--partition",
        key,
    ]);
    let there = run(&[
        "suggest",
        "--staged",
        copy.to_str().unwrap(),
        "--partition",
        key,
    ]);
    assert_eq!(here.0, 0, "{}", here.2);
    assert_eq!(here.1, there.1);
    assert!(
        here.2.starts_with("dqgate: suggested ") && here.2.lines().count() == 1,
        "one summary line: {}",
        here.2
    );
}

#[test]
fn rules_suggested_from_a_good_partition_catch_a_bad_one() {
    let tmp = tempfile::tempdir().unwrap();
    let key = "sales_date=2025-03-05";
    let (code, text, err) = run(&[
        "suggest",
        "--staged",
        "testdata/data/sales_ok",
        "--partition",
        key,
    ]);
    assert_eq!(code, 0, "{err}");
    for line in [
        "table sales_ok\npartitioned by sales_date\n",
        "check all(sales_date = partition.sales_date) as 'rows belong to the run key'",
        "check primary_key(order_id) ",
        "check values(currency) in ('EUR', 'GBP', 'USD') ",
        "check min(amount) >= 0 ",
        "check null_rate(customer_id) <= 1.9% ",
        "check column amount is decimal(12, 2) ",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    let rules = tmp.path().join("sales.dq");
    fs::write(&rules, &text).unwrap();
    let (code, out, _) = run(&[
        "check",
        rules.to_str().unwrap(),
        "--staged",
        "testdata/data/sales_bad",
        "--partition",
        key,
        "--format",
        "json",
    ]);
    assert_eq!(code, 1, "{out}");
    let verdict: serde_json::Value = serde_json::from_str(&out).unwrap();
    let failed: Vec<&str> = verdict["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    for name in [
        "rows belong to the run key",
        "primary_key(order_id)",
        "values(currency) in ('EUR', 'GBP', 'USD')",
        "min(amount) >= 0",
        "null_rate(customer_id) <= 1.9%",
    ] {
        assert!(failed.contains(&name), "{name} did not fail: {failed:?}");
    }
}

#[test]
fn with_a_table_history_baselines_come_from_the_partitions_before_the_run_key() {
    let tmp = tempfile::tempdir().unwrap();
    let table = tmp.path().join("daily_sales");
    let table = table.to_str().unwrap();
    let base = tmp.path().join("base.dq");
    fs::write(
        &base,
        "table sales\npartitioned by sales_date\ncheck row_count > 0\ncheck null_rate(customer_id) < 50%\n",
    )
    .unwrap();
    for (day, from) in [
        ("2025-03-01", "sales_ok"),
        ("2025-03-02", "sales_small"),
        ("2025-03-03", "sales_ok"),
        ("2025-03-09", "sales_small"),
    ] {
        let staged = tmp.path().join(day);
        copy_dir(&data(from), &staged).unwrap();
        let (code, _, err) = run(&[
            "publish",
            base.to_str().unwrap(),
            "--staged",
            staged.to_str().unwrap(),
            "--partition",
            &format!("sales_date={day}"),
            "--table",
            table,
        ]);
        assert_eq!(code, 0, "{day}: {err}");
    }
    let key = ["--partition", "sales_date=2025-03-05", "--table", table];
    let (code, text, err) =
        run(&[&["suggest", "--staged", "testdata/data/sales_ok"][..], &key].concat());
    assert_eq!(code, 0, "{err}");
    assert!(text.starts_with("# Suggested"), "{text}");
    assert!(
        text.contains("\ntable daily_sales\n"),
        "named after --table: {text}"
    );
    let history: Vec<&str> = text.lines().filter(|l| l.contains("history(7)")).collect();
    assert!(
        history
            .iter()
            .any(|l| l.starts_with("check row_count between ")
                && l.contains("median(history(7).row_count)")
                && l.contains("sales_date=2025-03-01 .. sales_date=2025-03-03")),
        "{text}"
    );
    assert!(
        history.iter().any(|l| l.starts_with(
            "check null_rate(customer_id) <= 2 * max(history(7).null_rate(customer_id)) + 0.1%"
        )),
        "{text}"
    );
    let rules = tmp.path().join("suggested.dq");
    fs::write(&rules, &text).unwrap();
    let (code, out, err) = run(&[
        &[
            "check",
            rules.to_str().unwrap(),
            "--staged",
            "testdata/data/sales_ok",
            "--format",
            "json",
        ][..],
        &key,
    ]
    .concat());
    assert_eq!(code, 0, "{out}{err}");
    let verdict: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        verdict["summary"]["passed"], verdict["summary"]["checks"],
        "{out}"
    );
}

#[test]
fn a_run_key_value_of_the_wrong_type_is_a_usage_error() {
    let (code, out, err) = run(&[
        "suggest",
        "--staged",
        "testdata/data/sales_ok",
        "--partition",
        "sales_date=yesterday",
    ]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.starts_with("dqgate: error: --partition sales_date=yesterday: the column `sales_date`"),
        "{err}"
    );
}
