//! Resource bounds and unusual shapes of data: a distinct count over long
//! text under a memory limit, a rule file of 1,000 checks, 10,000 tiny files,
//! a 10 MB value, deeply nested unused columns, unicode column names, and a
//! footer that claims more rows than its pages hold. Each gives a correct
//! verdict or a clear error; none panics, hangs or passes wrongly.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{new_null_array, ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::metadata::{
    ParquetMetaData, ParquetMetaDataReader, ParquetMetaDataWriter,
};
use datafusion::parquet::file::properties::WriterProperties;

use crate::support::dqgate;

fn write(path: &Path, batches: &[RecordBatch], props: Option<WriterProperties>) {
    let mut w =
        ArrowWriter::try_new(fs::File::create(path).unwrap(), batches[0].schema(), props).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

fn batch(schema: &SchemaRef, cols: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(schema.clone(), cols).unwrap()
}

/// Runs `check` with JSON output; returns exit code, stdout, stderr.
fn check(dir: &Path, rules: &str, extra: &[&str]) -> (i32, String, String) {
    fs::write(dir.join("r.dq"), rules).unwrap();
    let mut args = vec!["check", "r.dq", "--staged", "staged", "--format", "json"];
    args.extend_from_slice(extra);
    let out = dqgate(dir, &args);
    (
        out.status.code().expect("exited, not killed"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn staged(tmp: &tempfile::TempDir) -> std::path::PathBuf {
    let dir = tmp.path().join("staged");
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn distinct_count_of_long_text_spills_under_a_memory_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = staged(&tmp);
    let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
    // 240,000 rows, 200,000 distinct values of ~160 bytes: about 32 MB of
    // distinct text, more than the 16 MiB limit below.
    let pad = "x".repeat(150);
    let batches: Vec<RecordBatch> = (0..4)
        .map(|chunk| {
            let values: Vec<Option<String>> = (0..60_000)
                .map(|i| {
                    let n = chunk * 60_000 + i;
                    match n % 6 {
                        0 => None,
                        _ => Some(format!("{pad}-{:08}", (n * 7_919) % 200_000)),
                    }
                })
                .collect();
            batch(&schema, vec![Arc::new(StringArray::from(values))])
        })
        .collect();
    write(&dir.join("part-0.parquet"), &batches, None);
    // The expected count, computed here independently of dqgate.
    let expected: std::collections::BTreeSet<i64> = (0..240_000i64)
        .filter(|n| n % 6 != 0)
        .map(|n| (n * 7_919) % 200_000)
        .collect();
    let rules = format!(
        "table t\ncheck distinct_count(s) = {}\ncheck null_count(s) = 40_000\n",
        expected.len()
    );
    // -v: the key passes' lines say whether the verification ran in rounds.
    let (code, stdout, stderr) = check(
        tmp.path(),
        &rules,
        &["--memory-limit", "16MiB", "--threads", "2", "-v"],
    );
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    // The key engine bounds it: its verification files the repeated
    // fingerprints' exact keys in rounds (a grouped pass would spill).
    assert!(
        stderr.contains("spilled") || stderr.contains(" rounds"),
        "the distinct values fit in memory, nothing was spilled or split: {stderr}"
    );
    // Without a limit the fused aggregate gives the same verdict.
    let (code, unlimited, _) = check(tmp.path(), &rules, &["--threads", "2"]);
    assert_eq!(code, 0, "{unlimited}");
    let body = |s: &str| s[s.find("\"checks\"").unwrap()..].to_string();
    assert_eq!(body(&stdout), body(&unlimited));
    // With nowhere to write them, each round reads the columns again.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .args(["check", "r.dq", "--staged", "staged", "--format", "json"])
        .args(["--memory-limit", "8MiB", "--threads", "2", "-v"])
        .current_dir(tmp.path())
        .env("TMPDIR", tmp.path().join("no such directory"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("of one read") && stderr.contains(" rounds"),
        "{stderr}"
    );
    assert_eq!(
        body(&String::from_utf8_lossy(&out.stdout)),
        body(&unlimited)
    );
}

/// Under a small memory limit a verification of many repeated fingerprints
/// runs in rounds, and the rounds share one read of the key columns: each
/// candidate row is written to disk under its round, and each round reads
/// its own back. A text key (walked page by page), and a composite with a
/// text part (read as Arrow batches; with bins off, since most of its rows
/// are a candidate's, it is otherwise binned) give the counts of a plain
/// map, and the verdict, samples included, of a run without a limit.
#[test]
fn rounds_of_a_verification_share_one_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = staged(&tmp);
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("n", DataType::Int64, false),
    ]));
    // 240,000 rows of 160,000 keys: the first 80,000 rows' keys come back
    // in the last 80,000, scattered; a null key, an empty one, and the
    // composite's second part telling some of the repeats apart.
    let key = |i: u64| match (i * 7_919) % 160_000 {
        0 => None,
        5 => Some(String::new()),
        k => Some(format!("customer-{k:08}@example-mail.com")),
    };
    let part = |i: u64| i.is_multiple_of(5) as i64;
    let (mut singles, mut pairs) = (
        std::collections::HashMap::new(),
        std::collections::HashMap::new(),
    );
    for f in 0..3u64 {
        let rows = f * 80_000..(f + 1) * 80_000;
        let s: Vec<Option<String>> = rows.clone().map(key).collect();
        let n: Vec<i64> = rows.clone().map(part).collect();
        for (i, s) in rows.zip(&s) {
            if let Some(s) = s {
                *singles.entry(s.clone()).or_insert(0) += 1;
                *pairs.entry((s.clone(), part(i))).or_insert(0) += 1;
            }
        }
        let b = batch(
            &schema,
            vec![
                Arc::new(StringArray::from(s)),
                Arc::new(Int64Array::from(n)),
            ],
        );
        write(&dir.join(format!("part-{f}.parquet")), &[b], None);
    }
    fn repeated<K>(m: &std::collections::HashMap<K, i32>) -> usize {
        m.values().filter(|n| **n > 1).count()
    }
    let rules = format!(
        "table t\ncheck distinct_count(s) = {}\ncheck duplicate_count(s) = {}\ncheck duplicate_count(s, n) = {}\n",
        singles.len(),
        repeated(&singles),
        repeated(&pairs)
    );
    let (code, stdout, stderr) = check(
        tmp.path(),
        &rules,
        &["--memory-limit", "8MiB", "--threads", "2", "-v"],
    );
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert_eq!(
        stderr.matches("rounds of one read").count(),
        2,
        "each text key check's verification ran in rounds of one read: {stderr}"
    );
    // Two rows in three are a candidate's: the composite is read again
    // into bins, written to disk past the limit's share.
    let binned = stderr
        .lines()
        .find(|l| l.contains("keys (n, s)") && l.contains("binning"));
    assert!(
        binned.is_some_and(|l| l.contains("read every row again") && l.contains("written to disk")),
        "{stderr}"
    );
    let (code, unlimited, _) = check(tmp.path(), &rules, &["--threads", "2"]);
    assert_eq!(code, 0, "{unlimited}");
    let body = |s: &str| s[s.find("\"checks\"").unwrap()..].to_string();
    assert_eq!(body(&stdout), body(&unlimited));
    // With bins off, the composite's verification runs in rounds too.
    fs::write(tmp.path().join("r.dq"), &rules).unwrap();
    let args = ["check", "r.dq", "--staged", "staged", "--format", "json"];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .args(args)
        .args(["--memory-limit", "8MiB", "--threads", "2", "-v"])
        .env("DQGATE_TEST_BIN_ROWS", "0")
        .current_dir(tmp.path())
        .output()
        .unwrap();
    let (rounds, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(stderr.matches("rounds of one read").count(), 3, "{stderr}");
    assert_eq!(body(&rounds), body(&unlimited));
}

#[test]
fn a_thousand_checks_compile_to_one_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = staged(&tmp);
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, false),
        Field::new("b", DataType::Int64, true),
        Field::new("c", DataType::Utf8, true),
    ]));
    let n = 20_000i64;
    let a: Vec<i64> = (0..n).collect();
    let b: Vec<Option<i64>> = (0..n).map(|i| (i % 10 != 0).then_some(i % 997)).collect();
    let c: Vec<Option<String>> = (0..n).map(|i| Some(format!("v{}", i % 50))).collect();
    write(
        &dir.join("part-0.parquet"),
        &[batch(
            &schema,
            vec![
                Arc::new(Int64Array::from(a)),
                Arc::new(Int64Array::from(b)),
                Arc::new(StringArray::from(c)),
            ],
        )],
        None,
    );
    let mut rules = String::from("table t\n");
    let mut expected_failures = 0;
    for i in 0..1_000i64 {
        let line = match i % 4 {
            // rows with a > i: n - i - 1
            0 => format!("check count(where a > {i}) = {}\n", n - i - 1),
            1 => format!("check rate(where b < {i}) <= 100%\n"),
            2 => format!(
                "check count(where c = 'v{}' and b is not null) >= 0\n",
                i % 60
            ),
            _ => {
                // Every 100th of these is planted to fail.
                if i % 100 == 3 {
                    expected_failures += 1;
                    format!("check count(where a + {i} < 0) > 0\n")
                } else {
                    format!("check count(where a + {i} < 0) = 0\n")
                }
            }
        };
        rules.push_str(&line);
    }
    fs::write(tmp.path().join("r.dq"), &rules).unwrap();
    let started = Instant::now();
    let out = dqgate(tmp.path(), &["explain", "r.dq", "--staged", "staged"]);
    let explain_time = started.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("1000 statement(s) compile to 1 pass(es)"),
        "{}",
        &text[..text.len().min(300)]
    );
    let started = Instant::now();
    let (code, stdout, stderr) = check(tmp.path(), &rules, &["--scan-only"]);
    let check_time = started.elapsed();
    assert_eq!(code, 1, "{stderr}");
    let failed = stdout.matches("\"status\": \"fail\"").count();
    let passed = stdout.matches("\"status\": \"pass\"").count();
    assert_eq!(
        (passed, failed),
        (1_000 - expected_failures, expected_failures)
    );
    eprintln!("1,000 checks: explain {explain_time:?}, check {check_time:?} (debug build)");
}

#[test]
fn ten_thousand_tiny_files() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = staged(&tmp);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("tag", DataType::Utf8, true),
    ]));
    for i in 0..10_000i64 {
        // Ids 0..9998, with 4242 written twice.
        let id = if i == 9_999 { 4_242 } else { i };
        write(
            &dir.join(format!("part-{i:05}.parquet")),
            &[batch(
                &schema,
                vec![
                    Arc::new(Int64Array::from(vec![id])),
                    Arc::new(StringArray::from(vec![(i % 3 != 0).then_some("t")])),
                ],
            )],
            None,
        );
    }
    let rules = "table t\ncheck row_count = 10_000\ncheck sum(id) = 49_989_243\ncheck null_count(tag) = 3_334\ncheck unique(id)\n";
    let (code, stdout, stderr) = check(tmp.path(), rules, &[]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(
        stdout.matches("\"status\": \"pass\"").count(),
        3,
        "{stdout}"
    );
    assert!(stdout.contains("\"id\": 4242"), "{stdout}");
    assert_eq!(stdout.matches("\"path\": \"part-").count(), 10_000);
}

#[test]
fn a_ten_megabyte_value() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = staged(&tmp);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("s", DataType::Utf8, true),
    ]));
    let big = "é".repeat(5 * 1024 * 1024); // 10 MiB of UTF-8
    let values = vec![Some(big.as_str()), Some("short"), None, Some(big.as_str())];
    write(
        &dir.join("part-0.parquet"),
        &[batch(
            &schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, 4])),
                Arc::new(StringArray::from(values)),
            ],
        )],
        None,
    );
    let rules = "table t\ncheck count(where octet_length(s) = 10485760) = 2\ncheck distinct_count(s) = 2\ncheck null_count(s) = 1\ncheck unique(id)\ncheck duplicate_count(s) = 1\n";
    let (code, stdout, stderr) = check(tmp.path(), rules, &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(stdout.matches("\"status\": \"pass\"").count(), 5);
    let (code, stdout, _) = check(
        tmp.path(),
        rules,
        &["--scan-only", "--memory-limit", "64MiB"],
    );
    assert_eq!(code, 0, "{stdout}");
}

/// `depth` levels of alternating structs and lists around an integer.
fn nested(depth: usize) -> DataType {
    (0..depth).fold(DataType::Int32, |inner, level| {
        if level % 2 == 0 {
            DataType::Struct(Fields::from(vec![
                Field::new("v", inner, true),
                Field::new("w", DataType::Utf8, true),
            ]))
        } else {
            DataType::List(Arc::new(Field::new("item", inner, true)))
        }
    })
}

#[test]
fn deeply_nested_unused_columns_are_not_in_the_way() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = staged(&tmp);
    let deep = nested(40);
    let map = DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", nested(9), true),
            ])),
            false,
        )),
        false,
    );
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("deep", deep.clone(), true),
        Field::new("m", map.clone(), true),
    ]));
    write(
        &dir.join("part-0.parquet"),
        &[batch(
            &schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3])),
                new_null_array(&deep, 3),
                new_null_array(&map, 3),
            ],
        )],
        None,
    );
    let (code, stdout, stderr) = check(
        tmp.path(),
        "table t\ncheck unique(id)\ncheck row_count = 3\ncheck sum(id) = 6\n",
        &["--scan-only"],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (code, stdout, stderr) = check(
        tmp.path(),
        "table t\ncheck unique(id)\ncheck row_count = 3\ncheck sum(id) = 6\n",
        &[],
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    // A check on the nested column itself: a verdict or a clear rule error.
    let (code, stdout, stderr) = check(tmp.path(), "table t\ncheck null_count(deep) = 3\n", &[]);
    assert!(
        code == 0 || (code == 2 && stderr.contains("deep")),
        "{code}\n{stdout}\n{stderr}"
    );
}

#[test]
fn column_names_with_spaces_and_unicode() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = staged(&tmp);
    let schema = Arc::new(Schema::new(vec![
        Field::new("order id", DataType::Int64, true),
        Field::new("größe €", DataType::Int64, true),
        Field::new("名前", DataType::Utf8, true),
        Field::new("Größe €", DataType::Int64, true),
    ]));
    write(
        &dir.join("part-0.parquet"),
        &[batch(
            &schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), Some(2), Some(2), None])),
                Arc::new(Int64Array::from(vec![Some(5), Some(7), None, Some(9)])),
                Arc::new(StringArray::from(vec!["山", "川", "山", "海"])),
                Arc::new(Int64Array::from(vec![-1, -1, -1, -1])),
            ],
        )],
        None,
    );
    let rules = r#"table t
check unique("order id")
check sum("größe €") = 21
check min("Größe €") = -1
check values("名前") in ('山', '川', '海')
check all("größe €" > 0)
check count(where "名前" = '山' and "order id" is not null) = 2
check distinct_count("名前") = 3
"#;
    let (code, stdout, stderr) = check(tmp.path(), rules, &[]);
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    // Only the uniqueness check fails, on key 2.
    assert_eq!(
        stdout.matches("\"status\": \"pass\"").count(),
        6,
        "{stdout}"
    );
    assert!(stdout.contains("\"order id\": 2"), "{stdout}");
    // A name that differs only in case is another column.
    let (code, _, stderr) = check(tmp.path(), "table t\ncheck sum(\"GRÖSSE €\") = 0\n", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("GRÖSSE €"), "{stderr}");
}

/// Rewrites the footer of `file` with every row group's row count raised by
/// `extra`, and, when `consistent`, every column chunk's value count too.
fn forge_footer(file: &Path, extra: i64, consistent: bool) {
    let bytes = fs::read(file).unwrap();
    let md: ParquetMetaData = ParquetMetaDataReader::new()
        .parse_and_finish(&fs::File::open(file).unwrap())
        .unwrap();
    let footer_len =
        u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap());
    let data_end = bytes.len() - 8 - footer_len as usize;
    let row_groups = md
        .row_groups()
        .iter()
        .map(|rg| {
            let columns = rg
                .columns()
                .iter()
                .map(|c| {
                    let mut b = c.clone().into_builder();
                    if consistent {
                        b = b.set_num_values(c.num_values() + extra);
                    }
                    b.build().unwrap()
                })
                .collect();
            rg.clone()
                .into_builder()
                .set_num_rows(rg.num_rows() + extra)
                .set_column_metadata(columns)
                .build()
                .unwrap()
        })
        .collect();
    let forged = ParquetMetaData::new(md.file_metadata().clone(), row_groups);
    let mut out = bytes[..data_end].to_vec();
    let mut footer = Vec::new();
    ParquetMetaDataWriter::new(&mut footer, &forged)
        .finish()
        .unwrap();
    out.extend_from_slice(&footer);
    fs::write(file, out).unwrap();
}

#[test]
fn a_footer_that_claims_more_rows_than_exist() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = staged(&tmp);
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let file = dir.join("part-0.parquet");
    let write_honest = || {
        write(
            &file,
            &[batch(
                &schema,
                vec![Arc::new(Int64Array::from_iter_values(0..1_000))],
            )],
            None,
        )
    };
    let rules = "table t\ncheck row_count >= 1_500\n";
    write_honest();
    let (code, _, _) = check(tmp.path(), rules, &[]);
    assert_eq!(code, 1, "the honest file has 1,000 rows");

    // Row counts raised, value counts not: caught when the footer is read.
    forge_footer(&file, 1_000, false);
    let (code, stdout, stderr) = check(tmp.path(), rules, &[]);
    assert_eq!(code, 3, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("declares 2000 rows but its column `id` holds 1000 values"),
        "{stderr}"
    );

    // A footer forged consistently, value counts too. Like every Parquet
    // reader, dqgate takes the row count from it (DataFusion's own count(*)
    // does not read pages either); but a check that reads the column counts
    // the 1,000 values the pages really hold, so it does not pass.
    write_honest();
    forge_footer(&file, 1_000, true);
    let reads = "table t\ncheck count(where id >= 0) >= 1_500\n";
    for extra in [&[][..], &["--scan-only"][..]] {
        let (code, stdout, stderr) = check(tmp.path(), reads, extra);
        assert_eq!(code, 1, "{extra:?}\n{stdout}\n{stderr}");
        assert!(stdout.contains("\"value\": 1000,"), "{stdout}");
    }
}
