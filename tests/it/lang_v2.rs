//! Rule language v2 (schema checks, `history(N)`, declared null semantics):
//! parsing and printing of the new statements, `nulls not distinct` against
//! an independent oracle, and history baselines over a table published by
//! the real binary.

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use dqgate::audit::{prepare, Published, RuleSource};
use dqgate::dsl::ast::{Assertion, DeclaredType, HistoryStat, Nulls, ValueKind};
use dqgate::dsl::{parse, print};
use dqgate::engine::EngineOptions;
use dqgate::value::Value;

use crate::support::dqgate;

use crate::oracle::splitmix::Rng;

#[test]
fn new_statements_parse_and_print_canonically() {
    let src = "table t partitioned by d
check schema   matches published
check column amount is NUMERIC(12,2) not null
check column \"order id\" is bigint null
check column ts is timestamp(millisecond, 'UTC')
check unique(a, b)   nulls not distinct
warn  duplicate_count(a) nulls distinct <= 3
check row_count between 0.7 * median( history(7).row_count ) and max(history(3).row_count)
";
    // Type names are lower case, like keywords.
    let (_, diags) = parse(src);
    assert_eq!(diags.len(), 1, "{diags:?}");
    assert!(diags[0].message.contains("unknown type `NUMERIC`"));
    let src = src.replace("NUMERIC", "numeric");
    let (file, diags) = parse(&src);
    assert!(diags.is_empty(), "{diags:?}");
    let printed = print::print(&file);
    assert_eq!(
        printed,
        "table t
partitioned by d

check schema matches published
check column amount is decimal(12, 2) not null
check column \"order id\" is int64 null
check column ts is timestamp(ms, 'UTC')
check unique(a, b) nulls not distinct
warn duplicate_count(a) nulls distinct <= 3
check row_count between 0.7 * median(history(7).row_count) and max(history(3).row_count)
"
    );
    let (again, diags) = parse(&printed);
    assert!(diags.is_empty());
    assert_eq!(print::normalized(&again), print::normalized(&file));
    // The v1 source text (the check's name) keeps what was written.
    assert_eq!(
        file.statements[4].source_text,
        "unique(a, b) nulls not distinct"
    );
    assert!(matches!(
        &file.statements[1].assertion,
        Assertion::ColumnType { ty, nullable: Some(false), .. }
            if ty.ty == DeclaredType::Decimal { precision: 12, scale: 2 }
    ));
    assert!(matches!(
        &file.statements[4].assertion,
        Assertion::UniqueNulls {
            nulls: Nulls::NotDistinct,
            ..
        }
    ));
    let Assertion::Compare { cmp, .. } = &file.statements[6].assertion else {
        panic!("not a comparison");
    };
    let dqgate::dsl::ast::Comparison::Between { high, .. } = cmp else {
        panic!("not between");
    };
    assert!(matches!(
        &high.kind,
        ValueKind::History {
            stat: HistoryStat::Max,
            n: 3,
            ..
        }
    ));
}

#[test]
fn v1_statements_keep_their_meaning() {
    // `nulls`, `schema`, `column`, `history`, `median` are no keywords: v1
    // files that use them as column names still parse as before.
    let src = "table t
check unique(nulls, schema)
check null_rate(column) < 1%
check max(history) >= 0
check min(median) >= published.min(median)
";
    let (file, diags) = parse(src);
    assert!(diags.is_empty(), "{diags:?}");
    assert!(matches!(
        file.statements[0].assertion,
        Assertion::Unique { .. }
    ));
}

fn write_keys(dir: &Path, rng: &mut Rng, files: usize, rows: usize) {
    fs::create_dir_all(dir).unwrap();
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int32, true),
        Field::new("s", DataType::Utf8, true),
    ]));
    for f in 0..files {
        let k: Vec<Option<i32>> = (0..rows)
            .map(|_| (rng.below(5) != 0).then(|| rng.below(rows as u64) as i32))
            .collect();
        let s: Vec<Option<String>> = (0..rows)
            .map(|_| (rng.below(4) != 0).then(|| format!("v{}", rng.below(3))))
            .collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(k)),
            Arc::new(StringArray::from(s)),
        ];
        let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
        let file = File::create(dir.join(format!("part-{f}.parquet"))).unwrap();
        let mut w = ArrowWriter::try_new(file, schema.clone(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }
}

/// Duplicated keys of (k, s) by the oracle: grouped with nulls as values
/// (`nulls not distinct`), or leaving out rows with a null part.
fn oracle(dir: &Path, nulls_equal: bool, with_s: bool) -> (i128, u64) {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::Int32Type;
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let mut counts: HashMap<(Option<i32>, Option<String>), u64> = HashMap::new();
    let mut paths: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    for p in paths {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(p).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for b in reader {
            let b = b.unwrap();
            let k = b.column(0).as_primitive::<Int32Type>();
            let s = b.column(1).as_string::<i32>();
            for i in 0..b.num_rows() {
                let kv = k.is_valid(i).then(|| k.value(i));
                let sv = (with_s && s.is_valid(i)).then(|| s.value(i).to_string());
                let has_null = kv.is_none() || (with_s && sv.is_none());
                if has_null && !nulls_equal {
                    continue;
                }
                *counts.entry((kv, sv)).or_default() += 1;
            }
        }
    }
    let dups = counts.values().filter(|c| **c > 1).count() as i128;
    let top = counts
        .values()
        .copied()
        .max()
        .filter(|c| *c > 1)
        .unwrap_or(0);
    (dups, top)
}

#[test]
fn nulls_not_distinct_agrees_with_an_oracle() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = tmp.path().join("keys.dq");
    fs::write(
        &rules,
        "table keys
check unique(k, s) nulls not distinct
check unique(k, s) nulls distinct
check duplicate_count(k) nulls not distinct = 0
check unique(k, s)
",
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    for seed in 0..8u64 {
        let mut rng = Rng(seed * 104_729 + 3);
        let dir = tmp.path().join(format!("staged-{seed}"));
        write_keys(
            &dir,
            &mut rng,
            1 + (seed % 3) as usize,
            40 + 30 * seed as usize,
        );
        let engine = EngineOptions {
            threads: Some(1 + (seed % 3) as usize),
            memory_limit: None,
            scan_only: seed % 2 == 1,
            ..Default::default()
        };
        let prepared = rt
            .block_on(prepare(
                RuleSource::read(&rules).unwrap(),
                &dir,
                &[],
                false,
                &engine,
            ))
            .unwrap();
        let v = rt.block_on(prepared.run(&Published::NotGiven)).unwrap();
        let want = [
            oracle(&dir, true, true),
            oracle(&dir, false, true),
            oracle(&dir, true, false),
            oracle(&dir, false, true),
        ];
        for (check, (dups, top)) in v.checks.iter().zip(want) {
            assert_eq!(check.value, Value::Int(dups), "seed {seed}: {}", check.name);
            let first = check
                .samples
                .as_ref()
                .and_then(|s| s.first())
                .map_or(0, |s| s.rows);
            assert_eq!(first, top, "seed {seed}: top sample of {}", check.name);
        }
        assert_eq!(v.checks[0].nulls, Some(Nulls::NotDistinct));
        assert_eq!(v.checks[1].nulls, Some(Nulls::Distinct));
        assert_eq!(v.checks[3].nulls, None, "v1 syntax reports no `nulls`");
        assert_eq!(v.checks[3].name, "unique(k, s)");
    }
}

fn write_rows(dir: &Path, rows: i64) {
    fs::create_dir_all(dir).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(
        schema.clone(),
        vec![Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef],
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(
        File::create(dir.join("part-0.parquet")).unwrap(),
        schema,
        None,
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Partitions `batch=7, 8, 10, 11` are published, each with as many rows as
/// its number; auditing `batch=9` sees only 7 and 8 (a directory-only key
/// that is a whole number sorts by value, not as text where "10" < "9").
#[test]
fn history_orders_run_keys_by_value_and_reads_only_earlier_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    fs::write(
        t.join("base.dq"),
        "table events\npartitioned by batch\ncheck row_count > 0\n",
    )
    .unwrap();
    fs::write(
        t.join("hist.dq"),
        "table events\npartitioned by batch\ncheck row_count >= avg(history(4).row_count)\n",
    )
    .unwrap();
    for n in [7, 8, 10, 11] {
        let staged = t.join(format!("s{n}"));
        write_rows(&staged, n);
        let part = format!("batch={n}");
        let staged = staged.to_str().unwrap();
        let out = dqgate(
            t,
            &[
                "publish",
                "base.dq",
                "--staged",
                staged,
                "--partition",
                &part,
                "--table",
                "table",
            ],
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    write_rows(&t.join("s9"), 9);
    let check = |part: &str| {
        let out = dqgate(
            t,
            &[
                "check",
                "hist.dq",
                "--staged",
                "s9",
                "--partition",
                part,
                "--table",
                "table",
                "--format",
                "json",
            ],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checks"][0].clone()
    };
    let c = check("batch=9");
    assert_eq!(c["expected"], ">= 7.5", "{c}");
    let note = c["note"].as_str().unwrap();
    assert!(
        note.contains("from 2 of 4 partitions (batch=7 .. batch=8)"),
        "{note}"
    );
    // Re-auditing a published partition leaves itself out of its baseline.
    let c = check("batch=10");
    assert_eq!(c["expected"], ">= 7.5", "{c}");
    let c = check("batch=12");
    assert_eq!(c["expected"], ">= 9.0", "{c}");
    assert_eq!(c["status"], "pass");
    let c = check("batch=7");
    assert_eq!(c["status"], "skipped", "{c}");
}
