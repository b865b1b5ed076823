//! An independent oracle: for generated data written in random layouts, every
//! metric dqgate reports is recomputed with plain Arrow kernels over the same
//! files and compared.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, Decimal128Array, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{
    DataType, Decimal128Type, Field, Float64Type, Int32Type, Int64Type, Schema,
};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
use dqgate::engine::EngineOptions;
use dqgate::value::Value;
use proptest::prelude::*;

#[path = "../support/splitmix.rs"]
pub(crate) mod splitmix;
use splitmix::Rng;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("k", DataType::Int32, true),
        Field::new("f", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("d", DataType::Decimal128(10, 2), true),
    ]))
}

fn batch(rng: &mut Rng, rows: usize) -> RecordBatch {
    let nullish = |rng: &mut Rng| rng.below(10) == 0;
    let mut a = Vec::new();
    let mut k = Vec::new();
    let mut f = Vec::new();
    let mut s = Vec::new();
    let mut d = Vec::new();
    for _ in 0..rows {
        a.push((!nullish(rng)).then(|| rng.below(2000) as i64 - 1000));
        k.push((!nullish(rng)).then(|| rng.below(rows as u64 * 2 + 1) as i32));
        f.push((!nullish(rng)).then(|| match rng.below(20) {
            0 => f64::NAN,
            _ => (rng.below(1_000_000) as f64) / 997.0 - 300.0,
        }));
        s.push((!nullish(rng)).then(|| format!("v{}", rng.below(40))));
        d.push((!nullish(rng)).then(|| rng.below(100_000) as i128 - 20_000));
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(a)),
        Arc::new(Int32Array::from(k)),
        Arc::new(Float64Array::from(f)),
        Arc::new(StringArray::from(s)),
        Arc::new(
            Decimal128Array::from(d)
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
    ];
    RecordBatch::try_new(schema(), cols).unwrap()
}

/// Writes 1–4 files (some empty) with random row groups and statistics.
fn write_layout(rng: &mut Rng, dir: &Path) {
    let files = 1 + rng.below(4) as usize;
    for i in 0..files {
        let rows = if rng.below(6) == 0 {
            0
        } else {
            1 + rng.below(700) as usize
        };
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(1 + rng.below(300) as usize))
            .set_statistics_enabled(if rng.below(2) == 0 {
                EnabledStatistics::None
            } else {
                EnabledStatistics::Page
            })
            .build();
        let sub = if i % 2 == 1 { "nested/" } else { "" };
        let path = dir.join(format!("{sub}part-{i}.parquet"));
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut w =
            ArrowWriter::try_new(fs::File::create(path).unwrap(), schema(), Some(props)).unwrap();
        w.write(&batch(rng, rows)).unwrap();
        w.close().unwrap();
    }
}

fn read_all(dir: &Path) -> RecordBatch {
    let mut batches = Vec::new();
    for (_, path) in dqgate::staged::list_parquet_files(dir).unwrap() {
        let reader = ParquetRecordBatchReaderBuilder::try_new(fs::File::open(path).unwrap())
            .unwrap()
            .build()
            .unwrap();
        batches.extend(reader.map(|b| b.unwrap()));
    }
    concat_batches(&schema(), &batches).unwrap()
}

const RULES: &str = "table t
check row_count >= 0
check null_count(a) >= 0
check null_rate(s) >= 0
check distinct_count(s) >= 0
check distinct_count(k) >= 0
check duplicate_count(k) >= 0
check primary_key(k, s)
check min(a) >= -1000000
check max(a) >= -1000000
check sum(a) >= -1000000000
check sum(d) >= -1000000000
check max(s) >= ''
check count(where a > 0 and s <> 'v3') >= 0
check all(a < 500)
check avg(f) >= -1000000000
";

/// The oracle's values, in the order of RULES.
fn expected(b: &RecordBatch) -> Vec<Value> {
    let a = b.column(0).as_primitive::<Int64Type>();
    let k = b.column(1).as_primitive::<Int32Type>();
    let f = b.column(2).as_primitive::<Float64Type>();
    let s = b.column(3).as_string::<i32>();
    let d = b.column(4).as_primitive::<Decimal128Type>();
    let rows = b.num_rows() as i128;
    let int = |v: usize| Value::Int(v as i128);
    let distinct = |it: Vec<String>| it.into_iter().collect::<HashSet<_>>().len();
    let mut k_counts: HashMap<i32, usize> = HashMap::new();
    k.iter()
        .flatten()
        .for_each(|v| *k_counts.entry(v).or_default() += 1);
    let mut ks_counts: HashMap<(i32, String), usize> = HashMap::new();
    let mut ks_nulls = 0;
    for i in 0..b.num_rows() {
        if k.is_null(i) || s.is_null(i) {
            ks_nulls += 1;
        } else {
            *ks_counts
                .entry((k.value(i), s.value(i).to_string()))
                .or_default() += 1;
        }
    }
    let non_null_f: Vec<f64> = f.iter().flatten().collect();
    let avg_f = if non_null_f.is_empty() {
        Value::Null
    } else if non_null_f.iter().any(|x| x.is_nan()) {
        Value::Float(f64::NAN)
    } else {
        // A plain sum: compared with a relative tolerance, as the order of
        // rounding differs from dqgate's exact sum.
        let plain: f64 = non_null_f.iter().sum();
        Value::Float(plain / non_null_f.len() as f64)
    };
    vec![
        Value::Int(rows),
        int(a.null_count()),
        if rows == 0 {
            Value::Float(0.0)
        } else {
            Value::Float(s.null_count() as f64 / rows as f64)
        },
        int(distinct(s.iter().flatten().map(String::from).collect())),
        int(distinct(
            k.iter().flatten().map(|v| v.to_string()).collect(),
        )),
        int(k_counts.values().filter(|c| **c > 1).count()),
        int(ks_counts.values().filter(|c| **c > 1).count() + ks_nulls),
        a.iter()
            .flatten()
            .min()
            .map_or(Value::Null, |v| Value::Int(v as i128)),
        a.iter()
            .flatten()
            .max()
            .map_or(Value::Null, |v| Value::Int(v as i128)),
        if a.len() == a.null_count() {
            Value::Null
        } else {
            Value::Int(a.iter().flatten().map(|v| v as i128).sum())
        },
        if d.len() == d.null_count() {
            Value::Null
        } else {
            Value::Decimal {
                value: d.iter().flatten().sum(),
                scale: 2,
            }
        },
        s.iter()
            .flatten()
            .max()
            .map_or(Value::Null, |v| Value::Text(v.to_string())),
        int((0..b.num_rows())
            .filter(|&i| !a.is_null(i) && a.value(i) > 0 && !s.is_null(i) && s.value(i) != "v3")
            .count()),
        int(a.iter().flatten().filter(|v| *v >= 500).count()),
        avg_f,
    ]
}

fn close(got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Float(x), Value::Float(y)) => {
            (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * y.abs().max(1.0)
        }
        (Value::Decimal { value: a, scale: 2 }, Value::Decimal { value: b, scale: 2 }) => a == b,
        (Value::Decimal { .. }, Value::Decimal { .. }) => {
            got.compare(want) == Some(std::cmp::Ordering::Equal)
        }
        _ => got == want,
    }
}

/// Audits `dir` in-process and returns the metric values in rule order.
fn audit(
    rt: &tokio::runtime::Runtime,
    rules: &Path,
    dir: &Path,
    engine: &EngineOptions,
) -> Vec<(String, Value)> {
    crate::support::audit_in_process(rt, rules, dir, engine)
        .checks
        .into_iter()
        .map(|c| (c.metric, c.value))
        .collect()
}

proptest! {
    // Each case writes 1-4 files and audits them twice.
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Random data in random layouts (files, empty files, row groups,
    /// statistics on or off, nulls, NaN): the footer path, the scan path and,
    /// under a memory limit, the spillable plan all agree with the oracle.
    #[test]
    fn metrics_agree_with_arrow_kernels(
        seed in any::<u64>(),
        threads in 1usize..4,
        limited in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let rules_path = tmp.path().join("t.dq");
        fs::write(&rules_path, RULES).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut rng = Rng(seed);
        let dir = tmp.path().join("staged");
        write_layout(&mut rng, &dir);
        let want = expected(&read_all(&dir));
        let engine = |scan_only| EngineOptions {
            threads: Some(threads),
            memory_limit: limited.then_some(64 << 20),
            scan_only,
            ..Default::default()
        };
        let footers = audit(&rt, &rules_path, &dir, &engine(false));
        let scanned = audit(&rt, &rules_path, &dir, &engine(true));
        prop_assert_eq!(footers.len(), want.len());
        for (((metric, fast), (_, slow)), want) in footers.iter().zip(&scanned).zip(&want) {
            prop_assert!(
                close(fast, want) && close(slow, want),
                "{}: footers {:?}, scan {:?}, the oracle says {:?}",
                metric,
                fast,
                slow,
                want
            );
        }
    }
}
