//! Writes the Parquet fixtures under `testdata/data/` (deterministic: same
//! bytes on every run with the same Cargo.lock).
//!
//! ```text
//! cargo run --example gen_fixtures
//! ```
//!
//! Each dataset imitates what a real writer leaves behind: several files,
//! nested directories, several row groups, files with and without
//! statistics, dictionary-encoded strings, `_SUCCESS` markers and hidden files.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int16Array,
    Int32Array, Int64Array, Int8Array, LargeStringArray, RecordBatch, StringArray,
    StringDictionaryBuilder, TimestampMicrosecondArray, TimestampMillisecondArray,
    TimestampNanosecondArray, TimestampSecondArray, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema, TimeUnit};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};

#[path = "../tests/support/splitmix.rs"]
mod splitmix;
use splitmix::Rng;

const DAY_2025_03_05: i32 = 20152;
const TS_2025_03_05: i64 = 1_741_132_800; // 2025-03-05T00:00:00Z in seconds

fn write(path: &Path, batches: &[RecordBatch], row_group: usize, stats: bool) {
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(row_group))
        .set_statistics_enabled(if stats {
            EnabledStatistics::Page
        } else {
            EnabledStatistics::None
        })
        .set_created_by("dqgate gen_fixtures".into())
        .build();
    let file = fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batches[0].schema(), Some(props)).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

fn sales_schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("sales_date", DataType::Date32, false),
        Field::new("store_id", DataType::Int32, true),
        Field::new("order_id", DataType::Int64, false),
        Field::new("customer_id", DataType::Int64, true),
        Field::new("sku", DataType::Utf8, true),
        Field::new("amount", DataType::Decimal128(12, 2), true),
        Field::new(
            "currency",
            DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            true,
        ),
        Field::new(
            "order_ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
    ]))
}

/// One sales row; `Option`s are nullable columns.
#[derive(Clone)]
struct Sale {
    date: i32,
    store: Option<i32>,
    order: i64,
    customer: Option<i64>,
    sku: Option<String>,
    amount: Option<i128>,
    currency: Option<&'static str>,
    ts: Option<i64>,
}

fn sale(rng: &mut Rng, order: i64) -> Sale {
    let currencies = ["EUR", "USD", "GBP"];
    Sale {
        date: DAY_2025_03_05,
        store: Some(1 + rng.below(50) as i32),
        order,
        customer: (!rng.chance(10)).then(|| 10_000 + rng.below(5_000) as i64),
        sku: (!rng.chance(3)).then(|| format!("SKU-{:05}", rng.below(800))),
        amount: Some(100 + rng.below(2_000_000) as i128),
        currency: Some(currencies[rng.below(3) as usize]),
        ts: Some(
            (TS_2025_03_05 + rng.below(86_400) as i64) * 1_000_000 + rng.below(1_000_000) as i64,
        ),
    }
}

fn sales_batch(rows: &[Sale]) -> RecordBatch {
    let mut cur = StringDictionaryBuilder::<Int32Type>::new();
    for r in rows {
        cur.append_option(r.currency);
    }
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Date32Array::from_iter_values(rows.iter().map(|r| r.date))),
        Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.store))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.order))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.customer))),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.sku.clone()))),
        Arc::new(
            Decimal128Array::from_iter(rows.iter().map(|r| r.amount))
                .with_precision_and_scale(12, 2)
                .unwrap(),
        ),
        Arc::new(cur.finish()),
        Arc::new(
            TimestampMicrosecondArray::from_iter(rows.iter().map(|r| r.ts)).with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(sales_schema(), cols).unwrap()
}

/// Writes rows as Spark would: several part files, one nested, one without
/// statistics, plus `_SUCCESS`, a hidden checksum file and a `_temporary`
/// directory holding junk that must be ignored.
fn write_sales(dir: &Path, rows: &[Sale]) {
    let _ = fs::remove_dir_all(dir);
    let n = rows.len();
    let (a, b) = (n * 5 / 12, n * 10 / 12);
    write(
        &dir.join("part-00000.parquet"),
        &[sales_batch(&rows[..a])],
        500,
        true,
    );
    write(
        &dir.join("part-00001.parquet"),
        &[sales_batch(&rows[a..b])],
        400,
        false,
    );
    write(
        &dir.join("batch=2/part-00002.parquet"),
        &[sales_batch(&rows[b..])],
        10_000,
        true,
    );
    fs::write(dir.join("_SUCCESS"), b"").unwrap();
    fs::write(dir.join(".part-00000.parquet.crc"), b"crc junk").unwrap();
    fs::create_dir_all(dir.join("_temporary/0")).unwrap();
    fs::write(
        dir.join("_temporary/0/part-00003.parquet"),
        b"half written, not parquet",
    )
    .unwrap();
}

fn sales(root: &Path) {
    let mut rng = Rng(42);
    let good: Vec<Sale> = (0..2400)
        .map(|i| sale(&mut rng, 1_000_000 + i * 7))
        .collect();
    write_sales(&root.join("sales_ok"), &good);

    let mut bad = good.clone();
    // Duplicated order ids: 1000700 three times, 1000014 and 1000021 twice.
    bad[100].order = 1_000_700;
    bad[200].order = 1_000_700;
    bad[400].order = 1_000_700;
    bad[300].order = 1_000_014;
    bad[301].order = 1_000_021;
    for (i, r) in bad.iter_mut().enumerate() {
        if i % 20 == 7 {
            r.customer = None; // 5% + the 1% already null
        }
        if i % 100 == 50 {
            r.sku = None;
        }
        if i % 200 == 13 {
            r.amount = Some(20_000_000 + i as i128); // > 100000.00
        }
    }
    bad[5].currency = Some("JPY" as &'static str);
    bad[6].currency = Some("JPY");
    bad[7].currency = Some("CHF");
    bad[8].amount = Some(-1250);
    bad[9].store = None;
    for r in bad.iter_mut().skip(1000).take(4) {
        r.date = DAY_2025_03_05 - 1;
    }
    write_sales(&root.join("sales_bad"), &bad);

    // A later, smaller version of the good partition (a sudden drop).
    let small: Vec<Sale> = good[..1100].to_vec();
    write_sales(&root.join("sales_small"), &small);

    // The next day: new order ids, except three rows that repeat two of
    // 2025-03-05's (a retried append), for `unique(...) across published`.
    let mut next: Vec<Sale> = (0..600)
        .map(|i| {
            let mut s = sale(&mut rng, 1_100_000 + i * 7);
            s.date = DAY_2025_03_05 + 1;
            s
        })
        .collect();
    next[10].order = 1_000_007;
    next[20].order = 1_000_007;
    next[30].order = 1_002_100;
    write_sales(&root.join("sales_next"), &next);

    // Two days later: order ids interleaved with 2025-03-05's, none equal.
    let later: Vec<Sale> = (0..600)
        .map(|i| {
            let mut s = sale(&mut rng, 1_000_003 + i * 7);
            s.date = DAY_2025_03_05 + 2;
            s
        })
        .collect();
    write_sales(&root.join("sales_later"), &later);
}

/// Reference tables for `values(...) in REF(...)`: stores 1..=45 of the 50
/// that sales use, Hive-partitioned by region, with `int64` ids (the sales
/// have `int32`); (store, currency) pairs without GBP, with `int16` ids and
/// plain strings (the sales' currency is dictionary-encoded); and stores with
/// text ids, which cannot be compared with the sales' numbers.
fn dimensions(root: &Path) {
    let stores = |ids: std::ops::RangeInclusive<i64>| {
        let schema = Arc::new(Schema::new(vec![
            Field::new("store_id", DataType::Int64, false),
            Field::new("store_name", DataType::Utf8, true),
        ]));
        let names: Vec<String> = ids.clone().map(|i| format!("Store {i}")).collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(ids)) as ArrayRef,
                Arc::new(StringArray::from_iter_values(names)),
            ],
        )
        .unwrap()
    };
    let dir = root.join("dim_stores");
    let _ = fs::remove_dir_all(&dir);
    write(
        &dir.join("region=EU/part-00000.parquet"),
        &[stores(1..=20)],
        100,
        true,
    );
    write(
        &dir.join("region=US/part-00000.parquet"),
        &[stores(21..=45)],
        100,
        true,
    );
    fs::write(dir.join("_SUCCESS"), b"").unwrap();

    let schema = Arc::new(Schema::new(vec![
        Field::new("store_id", DataType::Int16, true),
        Field::new("currency", DataType::Utf8, true),
    ]));
    let pairs: Vec<(i16, &str)> = (1..=50).flat_map(|s| [(s, "EUR"), (s, "USD")]).collect();
    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int16Array::from_iter(
                pairs.iter().map(|p| Some(p.0)).chain([None]),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter(
                pairs.iter().map(|p| Some(p.1)).chain([Some("GBP")]),
            )),
        ],
    )
    .unwrap();
    let dir = root.join("dim_store_currency");
    let _ = fs::remove_dir_all(&dir);
    write(&dir.join("store_currency.parquet"), &[batch], 1000, true);

    let schema = Arc::new(Schema::new(vec![Field::new(
        "store_id",
        DataType::Utf8,
        false,
    )]));
    let batch = RecordBatch::try_new(
        schema,
        vec![Arc::new(StringArray::from_iter_values(["1", "2"])) as ArrayRef],
    )
    .unwrap();
    let dir = root.join("dim_stores_text");
    let _ = fs::remove_dir_all(&dir);
    write(&dir.join("stores.parquet"), &[batch], 1000, true);
}

fn sensors(root: &Path) {
    let mut rng = Rng(7);
    let schema = Arc::new(Schema::new(vec![
        Field::new("day", DataType::Date32, false),
        Field::new("device_id", DataType::LargeUtf8, false),
        Field::new(
            "reading_ts",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            false,
        ),
        Field::new("temperature", DataType::Float64, true),
        Field::new("humidity", DataType::Float32, true),
        Field::new("battery", DataType::Float64, true),
        Field::new("status", DataType::Utf8, false),
    ]));
    let dir = root.join("sensors_ok");
    let _ = fs::remove_dir_all(&dir);
    for file in 0..2 {
        let n = 600;
        let mut dev = Vec::new();
        let mut ts = Vec::new();
        let mut temp = Vec::new();
        let mut hum = Vec::new();
        let mut bat = Vec::new();
        let mut status = Vec::new();
        for i in 0..n {
            let device = (file * n + i) % 40;
            dev.push(format!("dev-{device:03}"));
            ts.push((TS_2025_03_05 * 1000) + ((file * n + i) as i64 / 40) * 60_000 + device as i64);
            temp.push((!rng.chance(4)).then(|| (rng.below(5000) as f64) / 100.0 - 10.0));
            hum.push(Some(30.0 + (rng.below(4000) as f32) / 100.0));
            bat.push(Some((rng.below(1000) as f64) / 1000.0));
            status.push(["ok", "ok", "ok", "degraded", "offline"][rng.below(5) as usize]);
        }
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Date32Array::from_iter_values(std::iter::repeat_n(
                DAY_2025_03_05,
                n,
            ))),
            Arc::new(LargeStringArray::from_iter_values(dev)),
            Arc::new(TimestampMillisecondArray::from_iter_values(ts).with_timezone("UTC")),
            Arc::new(Float64Array::from(temp)),
            Arc::new(Float32Array::from(hum)),
            Arc::new(Float64Array::from(bat)),
            Arc::new(StringArray::from_iter_values(status)),
        ];
        let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
        write(
            &dir.join(format!("site=berlin/part-{file}.parquet")),
            &[batch],
            256,
            file == 0,
        );
    }
}

/// Every value type the verdict encodes, with nulls, NaN and a row group
/// boundary, in a single small file.
fn types(root: &Path) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("i8", DataType::Int8, true),
        Field::new("i64", DataType::Int64, true),
        Field::new("u64", DataType::UInt64, true),
        Field::new("f32", DataType::Float32, true),
        Field::new("f64", DataType::Float64, true),
        Field::new("dec", DataType::Decimal128(12, 2), true),
        Field::new("d", DataType::Date32, true),
        Field::new(
            "ts_s",
            DataType::Timestamp(TimeUnit::Second, Some("UTC".into())),
            true,
        ),
        Field::new(
            "ts_ms",
            DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "ts_ns",
            DataType::Timestamp(TimeUnit::Nanosecond, Some("+00:00".into())),
            true,
        ),
        Field::new("s", DataType::Utf8, true),
        Field::new("ls", DataType::LargeUtf8, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("all_null", DataType::Int64, true),
        Field::new("order id", DataType::Int64, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int8Array::from(vec![
            Some(-3),
            Some(7),
            None,
            Some(127),
            Some(0),
        ])),
        Arc::new(Int64Array::from(vec![
            Some(i64::MAX),
            Some(i64::MAX),
            None,
            Some(1),
            Some(-5),
        ])),
        Arc::new(UInt64Array::from(vec![
            Some(u64::MAX),
            Some(1),
            Some(2),
            None,
            Some(3),
        ])),
        Arc::new(Float32Array::from(vec![
            Some(1.5),
            Some(f32::NAN),
            None,
            Some(-2.25),
            Some(0.0),
        ])),
        Arc::new(Float64Array::from(vec![
            Some(0.1),
            Some(0.2),
            Some(f64::NAN),
            None,
            Some(f64::NAN),
        ])),
        Arc::new(
            Decimal128Array::from(vec![
                Some(1250),
                Some(-5),
                None,
                Some(99_999_999_999),
                Some(0),
            ])
            .with_precision_and_scale(12, 2)
            .unwrap(),
        ),
        Arc::new(Date32Array::from(vec![
            Some(DAY_2025_03_05),
            Some(0),
            None,
            Some(-1),
            Some(DAY_2025_03_05),
        ])),
        Arc::new(
            TimestampSecondArray::from(vec![Some(TS_2025_03_05), None, Some(0), Some(-1), Some(1)])
                .with_timezone("UTC"),
        ),
        Arc::new(
            TimestampMillisecondArray::from(vec![
                Some(TS_2025_03_05 * 1000 + 250),
                None,
                Some(5),
                Some(6),
                Some(7),
            ])
            .with_timezone("UTC"),
        ),
        Arc::new(
            TimestampNanosecondArray::from(vec![
                Some(1),
                Some(2),
                None,
                Some(3),
                Some(1_741_132_800_123_456_789),
            ])
            .with_timezone("+00:00"),
        ),
        Arc::new(StringArray::from(vec![
            Some("O'Hara"),
            Some("b"),
            None,
            Some(""),
            Some("Zürich"),
        ])),
        Arc::new(LargeStringArray::from(vec![
            Some("x"),
            Some("y"),
            Some("x"),
            None,
            Some("z"),
        ])),
        Arc::new(BooleanArray::from(vec![
            Some(true),
            Some(false),
            None,
            Some(true),
            Some(true),
        ])),
        Arc::new(Int64Array::from(vec![None::<i64>, None, None, None, None])),
        Arc::new(Int64Array::from(vec![
            Some(1),
            Some(2),
            Some(2),
            None,
            Some(3),
        ])),
    ];
    let batch = RecordBatch::try_new(schema, cols).unwrap();
    let dir = root.join("types");
    let _ = fs::remove_dir_all(&dir);
    write(&dir.join("types.parquet"), &[batch], 3, true);
}

/// Zero-row files: an empty partition is a valid measurement.
fn empty(root: &Path) {
    let dir = root.join("sales_empty");
    let _ = fs::remove_dir_all(&dir);
    write(
        &dir.join("part-00000.parquet"),
        &[sales_batch(&[])],
        100,
        true,
    );
    write(
        &dir.join("part-00001.parquet"),
        &[sales_batch(&[])],
        100,
        true,
    );
}

/// Broken inputs: schemas that disagree, a truncated file, not Parquet at all.
fn broken(root: &Path) {
    let mut rng = Rng(1);
    let rows: Vec<Sale> = (0..10).map(|i| sale(&mut rng, i)).collect();
    let dir = root.join("schema_mismatch");
    let _ = fs::remove_dir_all(&dir);
    write(&dir.join("a.parquet"), &[sales_batch(&rows)], 100, true);
    let other = Arc::new(Schema::new(vec![Field::new(
        "order_id",
        DataType::Utf8,
        false,
    )]));
    let b = RecordBatch::try_new(
        other,
        vec![Arc::new(StringArray::from(vec!["1"])) as ArrayRef],
    )
    .unwrap();
    write(&dir.join("b.parquet"), &[b], 100, true);

    let dir = root.join("truncated");
    let _ = fs::remove_dir_all(&dir);
    write(
        &dir.join("part-00000.parquet"),
        &[sales_batch(&rows)],
        100,
        true,
    );
    let full = fs::read(dir.join("part-00000.parquet")).unwrap();
    fs::write(dir.join("part-00000.parquet"), &full[..full.len() / 2]).unwrap();

    let dir = root.join("not_parquet");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("part-00000.parquet"), b"id,amount\n1,2\n").unwrap();
}

/// Rule language v2 fixtures: a sales partition whose schema drifted from
/// `sales_ok`'s, and keys with null parts.
fn v2(root: &Path) {
    let mut rng = Rng(5);
    let rows: Vec<Sale> = (0..300).map(|i| sale(&mut rng, 2_000_000 + i)).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("order_id", DataType::Int64, false),
        Field::new("sales_date", DataType::Date32, false),
        Field::new("store_id", DataType::Int32, true),
        // Was nullable.
        Field::new("customer_id", DataType::Int64, false),
        // Was decimal(12, 2).
        Field::new("amount", DataType::Decimal128(14, 2), true),
        // Was dictionary-encoded.
        Field::new("currency", DataType::Utf8, true),
        Field::new(
            "order_ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        // New; `sku` is gone.
        Field::new("channel", DataType::Utf8, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.order))),
        Arc::new(Date32Array::from_iter_values(rows.iter().map(|r| r.date))),
        Arc::new(Int32Array::from_iter(rows.iter().map(|r| r.store))),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|r| r.customer.unwrap_or(10_000)),
        )),
        Arc::new(
            Decimal128Array::from_iter(rows.iter().map(|r| r.amount))
                .with_precision_and_scale(14, 2)
                .unwrap(),
        ),
        Arc::new(StringArray::from_iter(rows.iter().map(|r| r.currency))),
        Arc::new(
            TimestampMicrosecondArray::from_iter(rows.iter().map(|r| r.ts)).with_timezone("UTC"),
        ),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| {
            if r.order % 2 == 0 {
                "web"
            } else {
                "store"
            }
        }))),
    ];
    let dir = root.join("sales_drift");
    let _ = fs::remove_dir_all(&dir);
    let batch = RecordBatch::try_new(schema, cols).unwrap();
    write(&dir.join("part-00000.parquet"), &[batch], 1000, true);

    // (1, x) (1, -) (1, -) (-, x) (-, -) (-, -) (2, y): no duplicate among
    // keys without nulls; with nulls not distinct (1, -) and (-, -) repeat.
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Utf8, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![
            Some(1),
            Some(1),
            Some(1),
            None,
            None,
            None,
            Some(2),
        ])),
        Arc::new(StringArray::from(vec![
            Some("x"),
            None,
            None,
            Some("x"),
            None,
            None,
            Some("y"),
        ])),
    ];
    let dir = root.join("keys_nulls");
    let _ = fs::remove_dir_all(&dir);
    let batch = RecordBatch::try_new(schema, cols).unwrap();
    write(&dir.join("part-00000.parquet"), &[batch], 3, true);
}

fn main() {
    let root: PathBuf = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/data"));
    sales(&root);
    dimensions(&root);
    sensors(&root);
    types(&root);
    empty(&root);
    broken(&root);
    v2(&root);
    println!("fixtures written to {}", root.display());
}
