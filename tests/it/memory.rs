//! `--memory-limit`: a uniqueness check whose distinct keys do not fit in the
//! limit still completes, by spilling, with the right answer: on the grouped
//! pass (DataFusion's hash aggregate) and on the key engine's stores.

use std::fs;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;

/// 600,000 rows: `id` a permutation with key 5 three times, `tag` its text.
fn write_keys(tmp: &std::path::Path) {
    let staged = tmp.join("staged");
    fs::create_dir_all(&staged).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("tag", DataType::Utf8, false),
    ]));
    let rows: i64 = 600_000;
    let mut w = ArrowWriter::try_new(
        fs::File::create(staged.join("part-0.parquet")).unwrap(),
        schema.clone(),
        None,
    )
    .unwrap();
    for chunk in 0..6 {
        let ids: Vec<i64> = (0..rows / 6)
            .map(|i| {
                let n = chunk * (rows / 6) + i;
                // A permutation of 0..rows, plus two planted duplicates.
                if n == 77 || n == 99_999 {
                    5
                } else {
                    (n * 7_919) % rows
                }
            })
            .collect();
        let tags: Vec<String> = ids.iter().map(|i| format!("tag-{i:012}")).collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(tags)),
        ];
        w.write(&RecordBatch::try_new(schema.clone(), cols).unwrap())
            .unwrap();
    }
    w.close().unwrap();
    fs::write(
        tmp.join("r.dq"),
        "table t\ncheck unique(tag)\ncheck duplicate_count(id, tag) = 1\ncheck unique(id)\n",
    )
    .unwrap();
}

fn check(tmp: &std::path::Path, limit: Option<&str>, strategy: &str) -> std::process::Output {
    let mut args = vec![
        "check",
        "r.dq",
        "--staged",
        "staged",
        "--format",
        "json",
        "--threads",
        "2",
        // The key passes' lines (with the bytes they spilled) are printed
        // with `-v` only.
        "-v",
    ];
    if let Some(l) = limit {
        args.extend(["--memory-limit", l]);
    }
    std::process::Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .args(&args)
        .current_dir(tmp)
        .env("DQGATE_TEST_KEY_STRATEGY", strategy)
        .output()
        .expect("run dqgate")
}

#[test]
fn unique_spills_under_a_small_memory_limit() {
    let tmp = tempfile::tempdir().unwrap();
    write_keys(tmp.path());
    let out = check(tmp.path(), Some("32MiB"), "grouped");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    // Key 5 appears three times: once from the permutation, twice planted.
    assert!(stdout.contains("\"value\": 1,"), "{stdout}");
    assert!(stdout.contains("\"tag\": \"tag-000000000005\""), "{stdout}");
    assert!(
        stderr.contains("spilled"),
        "the key set fit in memory, nothing was spilled: {stderr}"
    );
    assert!(stdout.contains("\"rows\": 3"), "{stdout}");
}

/// The key engine holds 8 bytes a row; under a 2 MiB limit its stores spill
/// (packed words for `id`, fingerprints for `tag`), and the verdict is the
/// one without a limit, byte for byte.
#[test]
fn the_key_engine_spills_under_a_small_memory_limit_with_the_same_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    write_keys(tmp.path());
    let free = check(tmp.path(), None, "auto");
    for strategy in ["auto", "fingerprint"] {
        let out = check(tmp.path(), Some("2MiB"), strategy);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("bytes spilled"),
            "{strategy}: nothing spilled: {stderr}"
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&free.stdout),
            "{strategy}"
        );
    }
}
