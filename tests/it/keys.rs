//! The key engine against the grouped pass and a plain oracle: for random
//! key data in random layouts (1 to 8 files, row groups, statistics on or
//! off, rows in key order, shuffled, or in overlapping sorted files), every
//! strategy forced in turn gives a verdict byte-identical to DataFusion's
//! grouped aggregate, and the duplicate counts equal a HashMap's over the
//! rows read back. Fingerprints are also forced to collide (2 bits), and
//! runs under a small memory limit spill.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float64Array,
    Int32Array, Int64Array, LargeStringArray, RecordBatch, StringArray, StringViewArray,
    TimestampMicrosecondArray,
};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int32Type, Schema, TimeUnit};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
use dqgate::engine::EngineOptions;
use dqgate::plan::keys::Forced;
use proptest::prelude::*;

use super::oracle::splitmix::Rng;

/// Key sets of every shape: single fixed-width, single wide, composites
/// that pack into 64 or 128 bits or not at all, both null modes.
const RULES: &str = "table keys
check duplicate_count(i) = 0
check duplicate_count(s) = 0
check duplicate_count(f) = 0
check primary_key(i, k)
check duplicate_count(k, d, b) nulls not distinct = 0
check duplicate_count(s, t) = 0
check duplicate_count(dec, f) nulls not distinct = 0
check unique(i, s, k)
check duplicate_count(s, k) nulls not distinct = 0
check duplicate_count(s) nulls not distinct = 0
check distinct_count(s) > 0
";

/// The key sets of `RULES` (columns sorted) and their null mode, in order.
const KEY_SETS: &[(&[&str], bool)] = &[
    (&["i"], false),
    (&["s"], false),
    (&["f"], false),
    (&["i", "k"], false),
    (&["b", "d", "k"], true),
    (&["s", "t"], false),
    (&["dec", "f"], true),
    (&["i", "k", "s"], false),
    (&["k", "s"], true),
    (&["s"], true),
];

#[derive(Clone, Copy, Debug)]
enum Text {
    Utf8,
    Large,
    View,
    Dictionary,
}

fn schema(text: Text) -> Arc<Schema> {
    let s = match text {
        Text::Utf8 => DataType::Utf8,
        Text::Large => DataType::LargeUtf8,
        Text::View => DataType::Utf8View,
        Text::Dictionary => {
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
        }
    };
    Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        Field::new("k", DataType::Int32, true),
        Field::new("s", s, true),
        Field::new("f", DataType::Float64, true),
        Field::new("d", DataType::Date32, true),
        Field::new(
            "t",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("dec", DataType::Decimal128(10, 2), true),
        Field::new("b", DataType::Boolean, true),
    ]))
}

/// Rows as plain values; `i` is the ordering column of sorted layouts.
#[derive(Clone)]
struct Row {
    i: Option<i64>,
    k: Option<i32>,
    s: Option<String>,
    f: Option<f64>,
    d: Option<i32>,
    t: Option<i64>,
    dec: Option<i128>,
    b: Option<bool>,
}

/// How the text column looks: md5-like hex (the text strategy's hex
/// form), UUIDs (its UUID form), short codes (its short form), generated
/// ids between fixed bytes (its template form; with a value of the other
/// case now and then, a template that falls back), hex with a value of another
/// shape now and then (a text strategy that starts and falls back), or
/// anything: 0 to 39 characters of letters, punctuation and multi-byte
/// UTF-8 (the fingerprint strategy and its verification pass).
#[derive(Clone, Copy, Debug)]
enum Shape {
    Hex,
    Uuid,
    Short,
    Template,
    TemplateMixed,
    Mixed,
    Any,
}

/// A string of any shape that depends only on `v` (so equal values give
/// equal keys): empty strings, one-character strings and long ones, with
/// characters of 1 to 4 bytes.
fn any_text(v: u64) -> String {
    const ALPHABET: [char; 16] = [
        'a', 'Z', '0', '-', '/', '.', ' ', '_', 'é', 'ß', 'Ω', '日', '本', '🙂', '\u{0}', '\'',
    ];
    let mut h = v;
    let mut next = || {
        h = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let len = (next() % 40) as usize;
    (0..len).map(|_| ALPHABET[(next() % 16) as usize]).collect()
}

fn text(rng: &mut Rng, shape: Shape, v: u64) -> String {
    match shape {
        Shape::Hex => format!("{v:032x}"),
        Shape::Uuid => {
            let h = v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            format!(
                "{:08x}-{:04x}-4{:03x}-a{:03x}-{v:012x}",
                h >> 32,
                h & 0xffff,
                v & 0xfff,
                h & 0xfff
            )
        }
        Shape::Short => format!("c-{}", v % 100_000_007),
        Shape::Template => format!("cust-{:08}@mail.example", v % 100_000_000),
        Shape::TemplateMixed if rng.below(40) == 0 => {
            format!("SKU-{:04x}-{:06}", v % 65_536, v % 999_983)
        }
        Shape::TemplateMixed => format!("SKU-{:04X}-{:06}", v % 65_536, v % 999_983),
        Shape::Mixed if rng.below(40) == 0 => format!("{v:X}"),
        Shape::Mixed => format!("{v:032x}"),
        Shape::Any => any_text(v),
    }
}

fn rows(rng: &mut Rng, n: usize) -> Vec<Row> {
    let shape = [
        Shape::Hex,
        Shape::Uuid,
        Shape::Short,
        Shape::Template,
        Shape::TemplateMixed,
        Shape::Mixed,
        Shape::Any,
    ][rng.below(7) as usize];
    // A pool of keys a few times the row count: some repeat, most do not;
    // scattered over 2^40 so that no bitmap applies.
    let pool = (n as u64 * 3).max(4);
    let nullish = |rng: &mut Rng| rng.below(12) == 0;
    (0..n)
        .map(|_| Row {
            i: (!nullish(rng)).then(|| (rng.below(pool) as i64) * 1_048_573 - (1 << 39)),
            k: (!nullish(rng)).then(|| rng.below(5) as i32 - 2),
            s: (!nullish(rng)).then(|| {
                let v = rng.below(pool) * 0x9E37_79B9;
                text(rng, shape, v)
            }),
            f: (!nullish(rng)).then(|| match rng.below(8) {
                0 => f64::NAN,
                1 => -0.0,
                2 => 0.0,
                _ => rng.below(pool) as f64 / 7.0 - 3.0,
            }),
            d: (!nullish(rng)).then(|| 20_000 + rng.below(4) as i32),
            t: (!nullish(rng)).then(|| 1_700_000_000_000_000 + rng.below(pool) as i64 * 1_000_003),
            dec: (!nullish(rng)).then(|| rng.below(6) as i128 * 25 - 50),
            b: (!nullish(rng)).then(|| rng.below(2) == 0),
        })
        .collect()
}

fn batch(schema: &Arc<Schema>, text: Text, rows: &[Row]) -> RecordBatch {
    let s: Vec<Option<&str>> = rows.iter().map(|r| r.s.as_deref()).collect();
    let s: ArrayRef = match text {
        Text::Utf8 => Arc::new(StringArray::from(s)),
        Text::Large => Arc::new(LargeStringArray::from(s)),
        Text::View => Arc::new(StringViewArray::from(s)),
        Text::Dictionary => Arc::new(s.into_iter().collect::<DictionaryArray<Int32Type>>()),
    };
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(
            rows.iter().map(|r| r.i).collect::<Vec<_>>(),
        )),
        Arc::new(Int32Array::from(
            rows.iter().map(|r| r.k).collect::<Vec<_>>(),
        )),
        s,
        Arc::new(Float64Array::from(
            rows.iter().map(|r| r.f).collect::<Vec<_>>(),
        )),
        Arc::new(Date32Array::from(
            rows.iter().map(|r| r.d).collect::<Vec<_>>(),
        )),
        Arc::new(
            TimestampMicrosecondArray::from(rows.iter().map(|r| r.t).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ),
        Arc::new(
            Decimal128Array::from(rows.iter().map(|r| r.dec).collect::<Vec<_>>())
                .with_precision_and_scale(10, 2)
                .unwrap(),
        ),
        Arc::new(BooleanArray::from(
            rows.iter().map(|r| r.b).collect::<Vec<_>>(),
        )),
    ];
    RecordBatch::try_new(schema.clone(), cols).unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Order {
    /// All rows sorted by `i` across files: the ordered strategy's case.
    Sorted,
    Shuffled,
    /// Each file sorted by `i`, files overlapping.
    Overlapping,
}

fn write_layout(rng: &mut Rng, dir: &Path, text: Text, order: Order) {
    fs::create_dir_all(dir).unwrap();
    let schema = schema(text);
    let files = 1 + rng.below(8) as usize;
    let n = rng.below(400) as usize;
    let mut all = rows(rng, n);
    let by_i = |a: &Row, b: &Row| a.i.cmp(&b.i);
    if let Order::Sorted = order {
        all.sort_by(by_i);
    }
    let per = n.div_ceil(files).max(1);
    for (f, chunk) in (0..files).zip(all.chunks(per).chain(std::iter::repeat(&[][..]))) {
        let mut chunk = chunk.to_vec();
        if let Order::Overlapping = order {
            chunk.sort_by(by_i);
        }
        let stats = if rng.below(4) == 0 {
            EnabledStatistics::None
        } else {
            EnabledStatistics::Page
        };
        let props = WriterProperties::builder()
            .set_statistics_enabled(stats)
            .set_max_row_group_row_count(Some(8 + rng.below(120) as usize))
            .build();
        let file = fs::File::create(dir.join(format!("part-{f}.parquet"))).unwrap();
        let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
        w.write(&batch(&schema, text, &chunk)).unwrap();
        w.close().unwrap();
    }
}

fn read_all(dir: &Path) -> RecordBatch {
    let mut batches = Vec::new();
    let mut schema = None;
    for e in fs::read_dir(dir).unwrap() {
        let b =
            ParquetRecordBatchReaderBuilder::try_new(fs::File::open(e.unwrap().path()).unwrap())
                .unwrap();
        schema = Some(b.schema().clone());
        for batch in b.build().unwrap() {
            batches.push(batch.unwrap());
        }
    }
    concat_batches(&schema.unwrap(), &batches).unwrap()
}

/// Keys occurring more than once, counted with a HashMap over Arrow rows;
/// floats compare as in SQL grouping (-0.0 is 0.0, NaN payloads differ).
fn oracle(all: &RecordBatch, keys: &[&str], nulls_equal: bool) -> usize {
    let cols: Vec<ArrayRef> = keys
        .iter()
        .map(|k| {
            let c = all.column_by_name(k).unwrap().clone();
            match c.as_any().downcast_ref::<Float64Array>() {
                Some(f) => Arc::new(f.unary::<_, Float64Type>(|v| if v == 0.0 { 0.0 } else { v })),
                None => c,
            }
        })
        .collect();
    let conv = RowConverter::new(
        cols.iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect(),
    )
    .unwrap();
    let rows = conv.convert_columns(&cols).unwrap();
    let mut counts: HashMap<Vec<u8>, usize> = HashMap::new();
    for i in 0..all.num_rows() {
        if !nulls_equal && cols.iter().any(|c| c.is_null(i)) {
            continue;
        }
        *counts.entry(rows.row(i).as_ref().to_vec()).or_default() += 1;
    }
    counts.values().filter(|n| **n > 1).count()
}

fn audit(rt: &tokio::runtime::Runtime, rules: &Path, dir: &Path, opts: &EngineOptions) -> String {
    dqgate::verdict::json::to_json(&crate::support::audit_in_process(rt, rules, dir, opts))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn options(
    threads: usize,
    forced: Option<Forced>,
    bits: Option<u32>,
    limit: Option<usize>,
) -> EngineOptions {
    EngineOptions {
        threads: Some(threads),
        memory_limit: limit,
        forced_key_strategy: forced,
        fingerprint_bits: bits,
        ..Default::default()
    }
}

fn duplicate_counts(json: &str) -> Vec<i64> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["value"].as_i64().unwrap())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_gives_the_grouped_verdict(
        seed in any::<u64>(),
        threads in 1usize..4,
        text in prop_oneof![Just(Text::Utf8), Just(Text::Large), Just(Text::View), Just(Text::Dictionary)],
        order in prop_oneof![Just(Order::Sorted), Just(Order::Shuffled), Just(Order::Overlapping)],
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let rules = tmp.path().join("k.dq");
        fs::write(&rules, RULES).unwrap();
        let dir = tmp.path().join("staged");
        let mut rng = Rng(seed);
        write_layout(&mut rng, &dir, text, order);
        let rt = runtime();
        let grouped = audit(&rt, &rules, &dir, &options(threads, Some(Forced::Grouped), None, None));
        let all = read_all(&dir);
        let want: Vec<i64> = KEY_SETS
            .iter()
            .map(|(k, ne)| oracle(&all, k, *ne) as i64)
            .collect();
        let got = duplicate_counts(&grouped);
        // primary_key adds its rows with a null key part; compare the rest.
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            if n != 3 {
                prop_assert_eq!(g, w, "key set {:?}", KEY_SETS[n]);
            }
        }
        let runs = [
            ("auto", options(threads, None, None, None)),
            ("packed", options(threads, Some(Forced::Packed), None, None)),
            ("text", options(threads, Some(Forced::Text), None, None)),
            ("text, colliding fallback", options(threads, Some(Forced::Text), Some(2), None)),
            ("fingerprint", options(threads, Some(Forced::Fingerprint), None, None)),
            ("colliding fingerprints", options(threads, Some(Forced::Fingerprint), Some(2), None)),
            // The whole 64 bits, 8 bytes a row (what inputs past 600M rows
            // keep), not the 4 bytes of a cut fingerprint.
            ("whole fingerprints", options(threads, Some(Forced::Fingerprint), Some(64), None)),
            ("ordered", options(threads, Some(Forced::Ordered), None, None)),
        ];
        for (name, opts) in runs {
            let got = audit(&rt, &rules, &dir, &opts);
            prop_assert!(got == grouped, "{} differs from the grouped pass:\n{}\n---\n{}", name, got, grouped);
        }
    }
}

/// Writes `values` as the text column `s` of `TMP/staged/part-0.parquet`
/// and `rules` as `TMP/k.dq`; returns both paths.
fn string_column(
    tmp: &Path,
    values: Vec<Option<String>>,
    rules: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = tmp.join("staged");
    fs::create_dir_all(&dir).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("s", DataType::Utf8, true)]));
    let file = fs::File::create(dir.join("part-0.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(file, schema.clone(), None).unwrap();
    let array: ArrayRef = Arc::new(StringArray::from(values));
    w.write(&RecordBatch::try_new(schema, vec![array]).unwrap())
        .unwrap();
    w.close().unwrap();
    let path = tmp.join("k.dq");
    fs::write(&path, rules).unwrap();
    (dir, path)
}

/// Many keys behind few fingerprints: 2,000 distinct 32-character strings,
/// 7 of them repeated, hashed into 8 fingerprints. The verification pass
/// counts the exact keys, so the verdict is the grouped one.
#[test]
fn colliding_fingerprints_never_change_the_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let mut values: Vec<Option<String>> = (0..2000)
        .map(|i| Some(format!("{:032x}", i * 7919)))
        .collect();
    for r in 0..7 {
        for _ in 0..=r {
            values.push(Some(format!("{:032x}", r * 100 * 7919)));
        }
    }
    let (dir, rules) = string_column(
        tmp.path(),
        values,
        "table t\ncheck unique(s)\ncheck distinct_count(s) = 2000\n",
    );
    let rt = runtime();
    let grouped = audit(
        &rt,
        &rules,
        &dir,
        &options(2, Some(Forced::Grouped), None, None),
    );
    let colliding = audit(
        &rt,
        &rules,
        &dir,
        &options(2, Some(Forced::Fingerprint), Some(3), None),
    );
    assert_eq!(colliding, grouped);
    assert_eq!(duplicate_counts(&grouped)[0], 7);
    assert!(
        grouped.contains("\"rows\": 7"),
        "the most repeated key first:\n{grouped}"
    );
}

/// Many repeated keys under a small memory limit: the verification pass
/// files the exact keys behind 30,000 repeated fingerprints in several
/// rounds (each reads the key column again), and the verdict, samples
/// included, is the grouped pass's.
#[test]
fn verification_in_rounds_gives_the_grouped_verdict() {
    let tmp = tempfile::tempdir().unwrap();
    let mut values: Vec<Option<String>> = (0..30_000u64)
        .flat_map(|i| {
            [
                Some(any_text(i)),
                Some(any_text(i)),
                Some(format!("{i:040}")),
            ]
        })
        .collect();
    values.extend([None, None, Some(String::new())]);
    let (dir, rules) = string_column(
        tmp.path(),
        values,
        "table t\ncheck unique(s)\ncheck distinct_count(s) > 0\n",
    );
    let rt = runtime();
    let grouped = audit(
        &rt,
        &rules,
        &dir,
        &options(2, Some(Forced::Grouped), None, None),
    );
    for opts in [
        options(2, Some(Forced::Fingerprint), None, Some(4 << 20)),
        options(1, Some(Forced::Fingerprint), Some(12), Some(4 << 20)),
    ] {
        assert_eq!(audit(&rt, &rules, &dir, &opts), grouped);
    }
    assert!(duplicate_counts(&grouped)[0] > 0, "{grouped}");
}
