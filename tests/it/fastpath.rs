//! Footer statistics never change an answer: every golden rule file gives
//! the same values with `--scan-only` as with metrics answered from footers.

use crate::support::{dqgate, repo};

/// The verdict JSON without the `source` lines, which say which path was taken.
fn values(args: &[&str]) -> (String, usize) {
    let out = dqgate(&repo(), args);
    let text = String::from_utf8(out.stdout).unwrap();
    let metadata = text.matches("\"source\": \"metadata\"").count();
    let kept: Vec<&str> = text.lines().filter(|l| !l.contains("\"source\"")).collect();
    (kept.join("\n"), metadata)
}

#[test]
fn footer_answers_equal_scan_answers() {
    let cases = [
        (
            "rules/daily_sales.dq",
            "testdata/data/sales_ok",
            "sales_date=2025-03-05",
        ),
        (
            "rules/daily_sales.dq",
            "testdata/data/sales_bad",
            "sales_date=2025-03-05",
        ),
        (
            "rules/daily_sales.dq",
            "testdata/data/sales_empty",
            "sales_date=2025-03-05",
        ),
        (
            "testdata/cases/types_json/rules.dq",
            "testdata/data/types",
            "",
        ),
        (
            "testdata/cases/empty_partition/rules.dq",
            "testdata/data/sales_empty",
            "sales_date=2025-03-05",
        ),
    ];
    let mut answered_from_footers = 0;
    for (rules, staged, key) in cases {
        let mut args = vec!["check", rules, "--staged", staged, "--format", "json"];
        if !key.is_empty() {
            args.extend(["--partition", key]);
        }
        let (fast, metadata) = values(&args);
        args.push("--scan-only");
        let (slow, none) = values(&args);
        assert_eq!(none, 0, "--scan-only still used footers");
        assert_eq!(
            fast, slow,
            "{rules} on {staged}: footer path and scan disagree"
        );
        answered_from_footers += metadata;
    }
    assert!(
        answered_from_footers >= 10,
        "the footer path was hardly exercised"
    );
}
