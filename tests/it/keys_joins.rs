//! The join passes on the key engine against DataFusion's joins: for random
//! staged and reference data (scattered int64 ids, small ints, dates,
//! timestamps, composites that take the bitmap, 64-bit and 128-bit words,
//! nulls, values outside the staged footer ranges), `values(...) in REF(...)`
//! and `unique(...) across published` give verdicts byte-identical to the
//! grouped anti- and semi-join, samples included; and under a small memory
//! limit too.

use std::fs::{self, File};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::TimestampMicrosecondArray;
use datafusion::arrow::array::{ArrayRef, Date32Array, Int32Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
use dqgate::engine::EngineOptions;
use dqgate::plan::keys::Forced;
use proptest::prelude::*;

use super::oracle::splitmix::Rng;
use crate::support::{check_across, publish_into};

fn schema(narrow_ids: bool) -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int64, true),
        // A narrower type on one side: compared as int64.
        Field::new(
            "k",
            if narrow_ids {
                DataType::Int32
            } else {
                DataType::Int64
            },
            true,
        ),
        Field::new("d", DataType::Date32, true),
        Field::new("t", DataType::Timestamp(TimeUnit::Microsecond, None), true),
    ]))
}

/// `files` files of about `rows` rows in all, from a pool of `pool` ids
/// shifted by `shift` (so the sides overlap only in part).
fn write(rng: &mut Rng, dir: &Path, rows: usize, pool: u64, shift: i64, narrow: bool) {
    fs::create_dir_all(dir).unwrap();
    let schema = schema(narrow);
    let files = 1 + rng.below(4) as usize;
    for f in 0..files {
        let n = rng.below(2 * rows as u64 / files as u64 + 1) as usize;
        let nullish = |rng: &mut Rng| rng.below(15) == 0;
        let mut i = Vec::new();
        let mut k = Vec::new();
        let mut d = Vec::new();
        let mut t = Vec::new();
        for _ in 0..n {
            let id = rng.below(pool) as i64 + shift;
            i.push((!nullish(rng)).then_some(id * 1_048_573 - (1 << 39)));
            k.push((!nullish(rng)).then_some(id % 1000 - 20));
            d.push((!nullish(rng)).then_some(19_000 + (id % 300) as i32));
            t.push((!nullish(rng)).then_some(1_700_000_000_000_000 + id * 999_983));
        }
        let k: ArrayRef = if narrow {
            Arc::new(Int32Array::from(
                k.iter().map(|v| v.map(|x| x as i32)).collect::<Vec<_>>(),
            ))
        } else {
            Arc::new(Int64Array::from(k))
        };
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(i)),
                k,
                Arc::new(Date32Array::from(d)),
                Arc::new(TimestampMicrosecondArray::from(t)),
            ],
        )
        .unwrap();
        let stats = if rng.below(4) == 0 {
            EnabledStatistics::None
        } else {
            EnabledStatistics::Page
        };
        let props = WriterProperties::builder()
            .set_statistics_enabled(stats)
            .set_max_row_group_row_count(Some(16 + rng.below(200) as usize))
            .build();
        let file = File::create(dir.join(format!("part-{f}.parquet"))).unwrap();
        let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
    }
}

fn options(forced: Option<Forced>, limit: Option<usize>) -> EngineOptions {
    EngineOptions {
        threads: Some(2),
        memory_limit: limit,
        forced_key_strategy: forced,
        ..Default::default()
    }
}

fn audit(rt: &tokio::runtime::Runtime, rules: &Path, dir: &Path, opts: &EngineOptions) -> String {
    dqgate::verdict::json::to_json(&crate::support::audit_in_process(rt, rules, dir, opts))
}

/// How the engine's verdict (without a memory limit, and under `limit`)
/// differs from the grouped join's; `None` when it does not.
fn engine_differs(rules: &Path, staged: &Path, limit: usize) -> Option<String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let grouped = audit(&rt, rules, staged, &options(Some(Forced::Grouped), None));
    [options(None, None), options(None, Some(limit))]
        .iter()
        .map(|opts| audit(&rt, rules, staged, opts))
        .find(|got| *got != grouped)
        .map(|got| format!("the engine differs from the grouped join:\n{got}\n---\n{grouped}"))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn reference_lookups_on_the_engine_give_the_grouped_verdict(
        seed in any::<u64>(),
        narrow in any::<bool>(),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let mut rng = Rng(seed);
        let staged = tmp.path().join("staged");
        let reference = tmp.path().join("ref");
        let pool = 50 + rng.below(400);
        write(&mut rng, &staged, 300, pool, 0, false);
        let shift = rng.below(60) as i64 - 30;
        write(&mut rng, &reference, 300, pool, shift, narrow);
        let rules = tmp.path().join("r.dq");
        fs::write(&rules, format!(
            "table t\nreference r at '{}'\n\
             check values(i) in r(i)\n\
             check values(k) in r(k)\n\
             check values(d) in r(d)\n\
             check values(d, k) in r(d, k)\n\
             check values(i, t) in r(i, t)\n\
             check values(t) in r(t)\n",
            reference.display()
        )).unwrap();
        let differs = engine_differs(&rules, &staged, 1 << 20);
        prop_assert!(differs.is_none(), "{}", differs.unwrap_or_default());
    }
}

#[test]
fn across_published_on_the_engine_gives_the_grouped_verdict() {
    for seed in [1u64, 2, 3, 4] {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path();
        let mut rng = Rng(seed);
        let pool = 200 + rng.below(300);
        fs::write(
            cwd.join("rules.dq"),
            "table t\npartitioned by day\ncheck row_count >= 0\n",
        )
        .unwrap();
        for day in 1..=3 {
            let dir = cwd.join(format!("s{day}"));
            write(&mut rng, &dir, 200, pool, day * 40, day == 2);
            publish_into(cwd, "rules.dq", &dir, &format!("day={day}"));
        }
        fs::write(
            cwd.join("rules.dq"),
            "table t\npartitioned by day\n\
             check unique(i) across published\n\
             check unique(k) across published\n\
             check unique(d, k) across published\n\
             check unique(i, t) across published\n",
        )
        .unwrap();
        let staged = cwd.join("new");
        write(&mut rng, &staged, 200, pool, 60, false);
        for day in ["2", "9"] {
            let (grouped, _) = check_across(cwd, &staged, day, Some("grouped"));
            let (engine, _) = check_across(cwd, &staged, day, None);
            assert_eq!(engine, grouped, "seed {seed}, day {day}");
            assert!(
                grouped.contains("\"partition\""),
                "some keys clash:\n{grouped}"
            );
        }
    }
}
