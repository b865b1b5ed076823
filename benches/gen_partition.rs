//! Deterministic generator of a realistic "daily partition" for the benchmark.
//!
//! Every value is a pure function of `(seed, row index, column)`: a SplitMix64
//! hash, no shared random state. So the output is byte-identical for the same
//! options, files can be written in any order (and in parallel), and memory
//! stays bounded: rows are produced in batches of 64k and streamed into
//! snappy-compressed Parquet with row groups of about a million rows.
//!
//! ```text
//! cargo bench --bench gen_partition -- --rows 10000000 --files 8 --out /work/benchdata/10M
//! ```
//!
//! Rows are written in arrival order: `order_ts` grows with the row index
//! across the whole partition. `order_id` is a bijective shuffle of `1..=N`
//! (unique, not sorted) unless `--sorted` makes it ascending across files.
//! `--dup-rate X` gives a fraction `X` of the rows the key
//! (`order_id`, `store_id`) of the row before, so `unique` and `primary_key`
//! fail.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use datafusion::arrow::array::{
    ArrayRef, Date32Array, Decimal128Array, DictionaryArray, Int32Array, Int64Array, StringArray,
    StringBuilder, TimestampMicrosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};

/// 2025-03-05 as days since the Unix epoch.
const SALES_DATE_DAYS: i32 = 20_152;
const MICROS_PER_DAY: i64 = 86_400_000_000;
const BATCH_ROWS: u64 = 65_536;
const STORES: u64 = 1_000;
const SKUS: u64 = 100_000;
const CUSTOMERS: u64 = 5_000_000;
/// Currencies with their share of rows in per-mille.
const CURRENCIES: [(&str, u64); 5] = [
    ("EUR", 500),
    ("USD", 250),
    ("GBP", 120),
    ("CHF", 80),
    ("JPY", 50),
];

#[derive(Parser, Debug)]
#[command(about = "Write a deterministic daily_sales partition as Parquet")]
struct Args {
    /// Total rows in the partition.
    #[arg(long, default_value_t = 10_000_000)]
    rows: u64,
    /// Number of Parquet files; rows are split into contiguous ranges.
    #[arg(long, default_value_t = 8)]
    files: u64,
    /// Output directory (created; existing part files are overwritten).
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// order_id ascending across files instead of shuffled.
    #[arg(long)]
    sorted: bool,
    /// Write no column statistics.
    #[arg(long)]
    no_stats: bool,
    /// Fraction of rows that repeat the previous row's key (order_id, store_id).
    #[arg(long, default_value_t = 0.0)]
    dup_rate: f64,
    #[arg(long, default_value_t = 1_048_576)]
    row_group_rows: usize,
    /// Writer threads (default: available cores, at most one per file).
    #[arg(long)]
    threads: Option<usize>,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// SplitMix64's finaliser: a bijective, well-mixed hash of one 64-bit word.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Column salts, so that each column draws independent values for a row.
#[derive(Clone, Copy)]
enum Col {
    Store = 1,
    CustomerNull,
    Customer,
    SkuNull,
    Sku,
    Amount,
    BigAmount,
    Currency,
    Jitter,
    Dup,
}

/// A bijection of `0..n`: mix bits inside the next power of two, and walk the
/// cycle until the value falls inside the range (fewer than two steps on
/// average).
struct Shuffle {
    n: u64,
    bits: u32,
    mask: u64,
    key: u64,
}

impl Shuffle {
    fn new(n: u64, seed: u64) -> Self {
        let bits = n.max(2).next_power_of_two().trailing_zeros();
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1 << bits) - 1
        };
        Shuffle {
            n,
            bits,
            mask,
            key: mix(seed ^ 0x5eed),
        }
    }

    /// One round: xor with a key, multiply by an odd constant, xor-shift;
    /// each step is a bijection modulo 2^bits.
    fn round(&self, x: u64) -> u64 {
        let half = self.bits.div_ceil(2);
        let mut x = (x ^ self.key) & self.mask;
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15 | 1) & self.mask;
        x ^= x >> half;
        x = x.wrapping_mul(0xd6e8_feb8_6659_fd93) & self.mask;
        x ^ (x >> half)
    }

    fn apply(&self, i: u64) -> u64 {
        let mut x = self.round(i);
        while x >= self.n {
            x = self.round(x);
        }
        x
    }
}

/// The partition's values as functions of the row index.
struct Generator {
    seed: u64,
    rows: u64,
    sorted: bool,
    /// Rows that repeat the previous key, per 2^32.
    dup_threshold: u64,
    shuffle: Shuffle,
}

impl Generator {
    fn new(args: &Args) -> Self {
        Generator {
            seed: args.seed,
            rows: args.rows,
            sorted: args.sorted,
            dup_threshold: (args.dup_rate.clamp(0.0, 1.0) * 4_294_967_296.0) as u64,
            shuffle: Shuffle::new(args.rows, args.seed),
        }
    }

    fn draw(&self, col: Col, row: u64) -> u64 {
        mix(self.seed ^ mix(row ^ ((col as u64) << 56)))
    }

    /// The row whose key this row carries: itself, or for a duplicate the
    /// row before (following chains of duplicates).
    fn key_row(&self, mut row: u64) -> u64 {
        while row > 0 && (self.draw(Col::Dup, row) >> 32) < self.dup_threshold {
            row -= 1;
        }
        row
    }

    fn order_id(&self, key_row: u64) -> i64 {
        let id = if self.sorted {
            key_row
        } else {
            self.shuffle.apply(key_row)
        };
        id as i64 + 1
    }

    fn store_id(&self, key_row: u64) -> i32 {
        (self.draw(Col::Store, key_row) % STORES) as i32 + 1
    }

    /// About 2% nulls.
    fn customer_id(&self, row: u64) -> Option<i64> {
        let null = self.draw(Col::CustomerNull, row) % 10_000 < 200;
        (!null).then(|| (self.draw(Col::Customer, row) % CUSTOMERS) as i64 + 1)
    }

    /// About 0.5% nulls; else one of 100k SKUs, a few of them much more
    /// popular than the rest (the square of a uniform draw).
    fn sku(&self, row: u64, buf: &mut String) -> bool {
        if self.draw(Col::SkuNull, row) % 10_000 < 50 {
            return false;
        }
        let u = (self.draw(Col::Sku, row) >> 11) as f64 / (1u64 << 53) as f64;
        let k = ((u * u) * SKUS as f64) as u64;
        buf.clear();
        write!(buf, "SKU-{:02}-{k:06}", k % 97).unwrap();
        true
    }

    /// Cents: mostly below 1,000.00, about one row per million above
    /// 100,000.00.
    fn amount_cents(&self, row: u64) -> i128 {
        let h = self.draw(Col::Amount, row);
        if self.draw(Col::BigAmount, row).is_multiple_of(1_000_000) {
            10_000_001 + (h % 90_000_000) as i128
        } else {
            (h % 100_000) as i128
        }
    }

    fn currency_key(&self, row: u64) -> i32 {
        let mut pick = self.draw(Col::Currency, row) % 1_000;
        for (i, (_, share)) in CURRENCIES.iter().enumerate() {
            if pick < *share {
                return i as i32;
            }
            pick -= share;
        }
        unreachable!("currency shares add up to 1000")
    }

    /// Non-decreasing in the row index, spread over the day.
    fn order_ts(&self, row: u64) -> i64 {
        let rows = self.rows.max(1) as i128;
        let step = (MICROS_PER_DAY as i128 / rows).max(1) as u64;
        let offset = row as i128 * MICROS_PER_DAY as i128 / rows;
        let jitter = self.draw(Col::Jitter, row) % step;
        SALES_DATE_DAYS as i64 * MICROS_PER_DAY + offset as i64 + jitter as i64
    }

    fn batch(&self, schema: &SchemaRef, rows: std::ops::Range<u64>) -> RecordBatch {
        let n = (rows.end - rows.start) as usize;
        let key_rows: Vec<u64> = rows.clone().map(|r| self.key_row(r)).collect();
        let mut sku = StringBuilder::with_capacity(n, n * 12);
        let mut buf = String::new();
        for r in rows.clone() {
            match self.sku(r, &mut buf) {
                true => sku.append_value(&buf),
                false => sku.append_null(),
            }
        }
        let currency = DictionaryArray::<Int32Type>::try_new(
            rows.clone().map(|r| self.currency_key(r)).collect(),
            Arc::new(StringArray::from_iter_values(CURRENCIES.map(|c| c.0))),
        )
        .unwrap();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Date32Array::from(vec![SALES_DATE_DAYS; n])),
            Arc::new(Int32Array::from_iter_values(
                key_rows.iter().map(|&k| self.store_id(k)),
            )),
            Arc::new(Int64Array::from_iter_values(
                key_rows.iter().map(|&k| self.order_id(k)),
            )),
            Arc::new(
                rows.clone()
                    .map(|r| self.customer_id(r))
                    .collect::<Int64Array>(),
            ),
            Arc::new(sku.finish()),
            Arc::new(
                Decimal128Array::from_iter_values(rows.clone().map(|r| self.amount_cents(r)))
                    .with_precision_and_scale(12, 2)
                    .unwrap(),
            ),
            Arc::new(currency),
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(rows.map(|r| self.order_ts(r)))
                    .with_timezone("UTC"),
            ),
        ];
        RecordBatch::try_new(schema.clone(), columns).unwrap()
    }
}

fn schema() -> SchemaRef {
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    Arc::new(Schema::new(vec![
        Field::new("sales_date", DataType::Date32, false),
        Field::new("store_id", DataType::Int32, false),
        Field::new("order_id", DataType::Int64, false),
        Field::new("customer_id", DataType::Int64, true),
        Field::new("sku", DataType::Utf8, true),
        Field::new("amount", DataType::Decimal128(12, 2), false),
        Field::new("currency", dict, false),
        Field::new(
            "order_ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            false,
        ),
    ]))
}

fn writer_properties(args: &Args) -> WriterProperties {
    let stats = match args.no_stats {
        true => EnabledStatistics::None,
        false => EnabledStatistics::Page,
    };
    WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(args.row_group_rows))
        .set_statistics_enabled(stats)
        .set_created_by("dqgate gen_partition".into())
        .build()
}

/// Writes rows `range` to one file, batch by batch.
fn write_file(gen: &Generator, props: &WriterProperties, path: &Path, range: std::ops::Range<u64>) {
    let schema = schema();
    let file = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props.clone())).unwrap();
    let mut start = range.start;
    while start < range.end {
        let end = (start + BATCH_ROWS).min(range.end);
        writer.write(&gen.batch(&schema, start..end)).unwrap();
        start = end;
    }
    writer.close().unwrap();
}

fn main() {
    let args = Args::parse();
    assert!(args.files > 0, "--files must be at least 1");
    fs::create_dir_all(&args.out).unwrap();
    let gen = Generator::new(&args);
    let props = writer_properties(&args);
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, args.files as usize);
    let started = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..threads as u64 {
            let (gen, props, args) = (&gen, &props, &args);
            scope.spawn(move || {
                for f in (t..args.files).step_by(threads) {
                    let range = f * args.rows / args.files..(f + 1) * args.rows / args.files;
                    let path = args.out.join(format!("part-{f:05}.parquet"));
                    write_file(gen, props, &path, range);
                }
            });
        }
    });
    eprintln!(
        "wrote {} rows in {} files to {} in {:.1}s",
        args.rows,
        args.files,
        args.out.display(),
        started.elapsed().as_secs_f64()
    );
}
