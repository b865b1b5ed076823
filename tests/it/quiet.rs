//! Quiet by default: a normal run prints its verdict and one summary line on
//! stderr; `-v` adds what each key pass did and cost.

use crate::support::{data, dqgate, repo};

fn stderr_lines(args: &[&str]) -> (Option<i32>, Vec<String>, String) {
    let out = dqgate(&repo(), args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    (
        out.status.code(),
        stderr.lines().map(str::to_string).collect(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn check_prints_one_summary_line_and_the_passes_only_with_verbose() {
    let staged = data("sales_ok");
    let staged = staged.to_str().unwrap();
    let base = [
        "check",
        "rules/daily_sales.dq",
        "--staged",
        staged,
        "--partition",
        "sales_date=2025-03-05",
        "--format",
        "json",
    ];
    let (code, quiet, quiet_out) = stderr_lines(&base);
    assert_eq!(code, Some(0), "{quiet:?}");
    assert_eq!(quiet.len(), 1, "one summary line: {quiet:?}");
    assert!(
        quiet[0].starts_with("dqgate: audited 3 files, 2,400 rows in "),
        "{quiet:?}"
    );
    for flag in ["-v", "--verbose"] {
        let (code, loud, loud_out) = stderr_lines(&[&base[..], &[flag]].concat());
        assert_eq!(code, Some(0), "{loud:?}");
        assert!(loud[0].starts_with("dqgate: audited "), "{loud:?}");
        assert!(
            loud[1..]
                .iter()
                .any(|l| l.starts_with("dqgate:   keys (order_id): ")),
            "{flag}: the key pass's lines: {loud:?}"
        );
        assert_eq!(loud_out, quiet_out, "{flag} changes nothing on stdout");
    }
}

#[test]
fn publish_prints_the_summary_and_the_outcome_only() {
    let tmp = tempfile::tempdir().unwrap();
    let staged = tmp.path().join("staged");
    std::fs::create_dir(&staged).unwrap();
    for f in ["part-00000.parquet", "part-00001.parquet"] {
        std::fs::copy(data("sales_ok").join(f), staged.join(f)).unwrap();
    }
    let table = tmp.path().join("table");
    let out = dqgate(
        &repo(),
        &[
            "publish",
            "rules/daily_sales.dq",
            "--staged",
            staged.to_str().unwrap(),
            "--partition",
            "sales_date=2025-03-05",
            "--table",
            table.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("dqgate: audited 2 files, "),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with("dqgate: published sales_date=2025-03-05 as version "),
        "{stderr}"
    );
}
