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

/// The bitmap strategy for dense integer keys finds the same duplicates, with
/// the same samples, as the hash aggregate: negative keys, nulls, keys
/// repeated up to five times, several files and row groups.
#[test]
fn dense_key_bitmap_equals_hash_aggregate() {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Int32Array, RecordBatch};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;

    let tmp = tempfile::tempdir().unwrap();
    let staged = tmp.path().join("staged");
    std::fs::create_dir_all(&staged).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int32, true)]));
    for f in 0..3 {
        let ids: Vec<Option<i32>> = (0..5000)
            .map(|i: i32| {
                let n = f * 5000 + i;
                match n % 997 {
                    0 => None,
                    r if r < 6 => Some(-500 + r), // a handful of keys repeated in every file
                    _ => Some(n * 3 - 20_000),
                }
            })
            .collect();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(1200))
            .build();
        let path = staged.join(format!("part-{f}.parquet"));
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(path).unwrap(),
            schema.clone(),
            Some(props),
        )
        .unwrap();
        let cols: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(ids))];
        w.write(&RecordBatch::try_new(schema.clone(), cols).unwrap())
            .unwrap();
        w.close().unwrap();
    }
    std::fs::write(
        tmp.path().join("r.dq"),
        "table t\ncheck unique(id)\ncheck duplicate_count(id) = 0\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["check", "r.dq", "--staged", "staged", "--format", "json"];
        args.extend_from_slice(extra);
        let out = dqgate(tmp.path(), &args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .filter(|l| !l.contains("\"source\""))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let explain = dqgate(tmp.path(), &["explain", "r.dq", "--staged", "staged"]);
    assert!(
        String::from_utf8_lossy(&explain.stdout).contains("by a bitmap"),
        "the bitmap strategy was not chosen"
    );
    let (dense, hashed) = (run(&[]), run(&["--scan-only"]));
    assert_eq!(dense, hashed);
    assert!(dense.contains("\"id\": -497"), "{dense}");
}
