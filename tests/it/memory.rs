//! `--memory-limit`: a uniqueness check whose distinct keys do not fit in the
//! limit still completes, by spilling, with the right answer.

use std::fs;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;

use crate::support::dqgate;

#[test]
fn unique_spills_under_a_small_memory_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let staged = tmp.path().join("staged");
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
        tmp.path().join("r.dq"),
        "table t\ncheck unique(tag)\ncheck duplicate_count(id, tag) = 1\n",
    )
    .unwrap();
    let out = dqgate(
        tmp.path(),
        &[
            "check",
            "r.dq",
            "--staged",
            "staged",
            "--format",
            "json",
            "--memory-limit",
            "32MiB",
            "--threads",
            "2",
        ],
    );
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
