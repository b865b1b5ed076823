//! `unique(...) across published` reads only the published row groups and
//! pages whose footer ranges can hold a staged key. Against a plain oracle
//! (a HashSet of the published keys): random published days with keys that
//! rise with time, scattered keys, text keys (multi-byte, empty strings) and
//! `(date, seq)` composites; row groups and pages of random sizes, files
//! with a page index, with row-group statistics only, and with none; nulls;
//! stale keys picked at row-group and page boundaries and at the ends of a
//! day's range. The engine's verdict equals the grouped join's too.

use std::collections::HashSet;
use std::fs::{self, File};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Date32Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::{EnabledStatistics, WriterProperties};
use serde_json::Value as Json;

use super::oracle::splitmix::Rng;
use crate::support::{check_across, check_across_with, publish_into};

/// One row: a rising id, a scattered id, a text id, and `(d, seq)`.
#[derive(Clone, Debug)]
struct Row {
    id: Option<i64>,
    hashed: Option<i64>,
    text: Option<String>,
    d: Option<i32>,
    seq: Option<i64>,
}

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("hashed", DataType::Int64, true),
        Field::new("text", DataType::Utf8, true),
        Field::new("d", DataType::Date32, true),
        Field::new("seq", DataType::Int64, true),
    ]))
}

const ALPHABET: [&str; 8] = ["a", "Z", "0", "-", "é", "ß", "日", "🙂"];

/// The row numbered `n` (global, rising with the day).
fn row(rng: &mut Rng, n: i64) -> Row {
    let nullish = |rng: &mut Rng| rng.below(25) == 0;
    let mut text = format!("{n:07}");
    for _ in 0..rng.below(4) {
        text.push_str(ALPHABET[rng.below(8) as usize]);
    }
    if n % 97 == 0 {
        text = String::new(); // the empty string, a valid key
    }
    Row {
        id: (!nullish(rng)).then_some(n),
        hashed: (!nullish(rng)).then_some((n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64),
        text: (!nullish(rng)).then_some(text),
        d: (!nullish(rng)).then_some(19_000 + (n / 100) as i32),
        seq: (!nullish(rng)).then_some(n % 100),
    }
}

fn write(rng: &mut Rng, dir: &Path, rows: &[Row]) {
    fs::create_dir_all(dir).unwrap();
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.id).collect::<Vec<_>>(),
            )) as ArrayRef,
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.hashed).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.text.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(Date32Array::from(
                rows.iter().map(|r| r.d).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.seq).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let stats = match rng.below(4) {
        0 => EnabledStatistics::None,
        1 => EnabledStatistics::Chunk,
        _ => EnabledStatistics::Page, // with a page index
    };
    let props = WriterProperties::builder()
        .set_statistics_enabled(stats)
        .set_max_row_group_row_count(Some(20 + rng.below(120) as usize))
        .set_data_page_row_count_limit(4 + rng.below(30) as usize)
        .set_write_batch_size(4)
        .build();
    let file = File::create(dir.join("part-0.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(file, schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

type Key = Vec<String>;

/// The key of `r` on `columns`, `None` when a part is null.
fn key(r: &Row, columns: &[&str]) -> Option<Key> {
    columns
        .iter()
        .map(|c| match *c {
            "id" => r.id.map(|v| v.to_string()),
            "hashed" => r.hashed.map(|v| v.to_string()),
            "text" => r.text.clone(),
            "d" => r.d.map(|v| v.to_string()),
            "seq" => r.seq.map(|v| v.to_string()),
            _ => unreachable!(),
        })
        .collect()
}

const KEYS: [&[&str]; 4] = [&["id"], &["hashed"], &["text"], &["d", "seq"]];

#[test]
fn pruned_reads_find_every_clash_a_full_read_finds() {
    for seed in 1u64..=6 {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path();
        let mut rng = Rng(seed);
        fs::write(
            cwd.join("rules.dq"),
            "table t\npartitioned by day\ncheck row_count >= 0\n",
        )
        .unwrap();
        let days = 3 + rng.below(3) as i64;
        let per_day = 150 + rng.below(150) as i64;
        let mut published: Vec<Row> = Vec::new();
        for day in 0..days {
            let rows: Vec<Row> = (day * per_day..(day + 1) * per_day)
                .map(|n| row(&mut rng, n))
                .collect();
            let dir = cwd.join(format!("s{day}"));
            write(&mut rng, &dir, &rows);
            published.extend(rows);
            publish_into(cwd, "rules.dq", &dir, &format!("day={day}"));
        }
        // The new day, and stale rows: ends of days, row-group and page
        // boundaries (multiples of small numbers), and a few at random.
        let mut staged: Vec<Row> = (days * per_day..(days + 1) * per_day)
            .map(|n| row(&mut rng, n))
            .collect();
        let total = days * per_day;
        let mut picks: Vec<i64> = vec![0, total - 1, per_day - 1, per_day];
        for _ in 0..rng.below(6) {
            let edge = [4, 8, 16, 20, 32, 64][rng.below(6) as usize];
            picks.push((rng.below((total / edge) as u64) as i64) * edge);
        }
        if seed % 3 == 0 {
            picks.clear(); // no stale key at all
        }
        for p in picks {
            staged.push(published[p.clamp(0, total - 1) as usize].clone());
        }
        write(&mut rng, &cwd.join("new"), &staged);
        let rules: String = KEYS
            .iter()
            .map(|k| format!("check unique({}) across published\n", k.join(", ")))
            .collect();
        fs::write(
            cwd.join("rules.dq"),
            format!("table t\npartitioned by day\n{rules}"),
        )
        .unwrap();
        let (engine, stderr) = check_across(cwd, &cwd.join("new"), "99", None);
        let (grouped, _) = check_across(cwd, &cwd.join("new"), "99", Some("grouped"));
        assert_eq!(engine, grouped, "seed {seed}");
        // The footers compared with a sample of 4 staged keys first: when
        // it does not admit every range, all the keys are read.
        let sample = [("DQGATE_TEST_SAMPLE_ROWS", "4")];
        let (sampled, log) = check_across_with(cwd, &cwd.join("new"), "99", &sample, &[]);
        assert_eq!(sampled, engine, "seed {seed}, sampled\n{log}");
        let v: Json = serde_json::from_str(&engine).unwrap();
        for (i, k) in KEYS.iter().enumerate() {
            let theirs: HashSet<Key> = published.iter().filter_map(|r| key(r, k)).collect();
            let ours: HashSet<Key> = staged.iter().filter_map(|r| key(r, k)).collect();
            let want = ours.intersection(&theirs).count();
            assert_eq!(
                v["checks"][i]["value"],
                want,
                "seed {seed}, unique({}) across published\n{engine}\n{stderr}",
                k.join(", ")
            );
        }
        assert!(
            stderr.contains("row group(s)"),
            "the timing line says what was read:\n{stderr}"
        );
    }
}

/// Writes `batch` as `dir/part-0.parquet` in row groups of `group` rows
/// and pages of `page` rows (with a page index).
fn put(dir: &Path, batch: RecordBatch, group: usize, page: usize) {
    fs::create_dir_all(dir).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group))
        .set_data_page_row_count_limit(page)
        .set_write_batch_size(page)
        .build();
    let file = File::create(dir.join("part-0.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// A batch of one column `name`.
fn column(name: &str, values: ArrayRef) -> RecordBatch {
    let field = Field::new(name, values.data_type().clone(), false);
    RecordBatch::try_new(Arc::new(Schema::new(vec![field])), vec![values]).unwrap()
}

/// Publishes each of `days` (day 0, 1, ...) into `cwd`'s table, then
/// stages `new` with `unique(key) across published` as the rule file:
/// `explain`'s text and `check`'s verdict for the staged day 9.
fn explain_and_check(
    cwd: &Path,
    days: Vec<RecordBatch>,
    new: RecordBatch,
    key: &str,
) -> (String, Json) {
    explain_and_check_with(cwd, days, new, key, &[])
}

/// [`explain_and_check`] with the variables `env` set.
fn explain_and_check_with(
    cwd: &Path,
    days: Vec<RecordBatch>,
    new: RecordBatch,
    key: &str,
    env: &[(&str, &str)],
) -> (String, Json) {
    fs::write(
        cwd.join("rules.dq"),
        "table t\npartitioned by day\ncheck row_count >= 0\n",
    )
    .unwrap();
    let (group, page) = (1000, 100);
    for (day, batch) in days.into_iter().enumerate() {
        let dir = cwd.join(format!("s{day}"));
        put(&dir, batch, group, page);
        publish_into(cwd, "rules.dq", &dir, &format!("day={day}"));
    }
    put(&cwd.join("new"), new, group, page);
    fs::write(
        cwd.join("rules.dq"),
        format!("table t\npartitioned by day\ncheck unique({key}) across published\n"),
    )
    .unwrap();
    let args = [
        "rules.dq",
        "--staged",
        "new",
        "--partition",
        "day=9",
        "--table",
        "table",
    ];
    let run = |args: Vec<&str>| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_dqgate"))
            .args(args)
            .current_dir(cwd)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(out.status.code().is_some_and(|c| c < 2), "{out:?}");
        out.stdout
    };
    let text = String::from_utf8_lossy(&run([&["explain"][..], &args[..]].concat())).into_owned();
    let out = run([&["check"][..], &args[..], &["--format", "json"][..]].concat());
    (text, serde_json::from_slice(&out).unwrap())
}

/// Days whose ids rise: a staged day with two stale ids of day 1 reads
/// day 1's file only, and only the pages that hold them when the file has
/// a page index; `explain` says so.
#[test]
fn rising_keys_read_only_the_row_groups_and_pages_that_hold_staged_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let ids = |ids: Vec<i64>| column("id", Arc::new(Int64Array::from(ids)));
    let days = (0..5)
        .map(|day| ids((day * 10_000..(day + 1) * 10_000).collect()))
        .collect();
    let mut new: Vec<i64> = (50_000..60_000).collect();
    new.extend([12_345, 12_999]); // day 1, row group 2, pages 3 and 9
    let (text, v) = explain_and_check(tmp.path(), days, ids(new), "id");
    assert!(
        text.contains("reads 1 of 5 file(s), 1 of 50 row group(s), 2 of 10 page(s) in files with a page index, 200 of 50000 row(s)"),
        "{text}"
    );
    assert!(
        text.contains("day=1/part-0") && text.contains(".parquet (row group(s) 2, pages picked"),
        "{text}"
    );
    assert_eq!(v["checks"][0]["value"], 2);
    assert_eq!(v["checks"][0]["samples"][0]["partition"], "day=1");
}

/// Region-prefixed order numbers in files sorted by key: the staged keys'
/// least and greatest differ in their first byte, so all of them share
/// the 16 bytes that follow (`eu-warehouse-or…`). Two stale keys of day 1
/// still read only the two pages that hold them.
#[test]
fn text_keys_that_share_a_long_part_read_only_the_pages_that_hold_staged_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let order = |n: i64| {
        let region = if n % 2 == 0 { "eu" } else { "us" };
        format!("{region}-warehouse-orders-{n:013}")
    };
    let orders = |range: std::ops::Range<i64>, extra: &[i64]| {
        let mut keys: Vec<String> = range.chain(extra.iter().copied()).map(order).collect();
        keys.sort();
        column("k", Arc::new(StringArray::from(keys)))
    };
    let days = (0..5)
        .map(|day| orders(day * 10_000..(day + 1) * 10_000, &[]))
        .collect();
    // Day 1's 1,173rd eu key and 1,173rd us key: row groups 2 and 7.
    let new = orders(50_000..60_000, &[12_345, 12_346]);
    let (text, v) = explain_and_check(tmp.path(), days, new, "k");
    assert!(
        text.contains("reads 1 of 5 file(s), 2 of 50 row group(s), 2 of 20 page(s) in files with a page index, 200 of 50000 row(s)"),
        "{text}"
    );
    assert!(text.contains("day=1/part-0"), "{text}");
    assert_eq!(v["checks"][0]["value"], 2);
    assert_eq!(v["checks"][0]["samples"][0]["partition"], "day=1");
}

/// Scattered ids: every row group's and page's range spans nearly every
/// id, so a sample of 64 staged ids already falls within each, and the
/// other 10,000 are not read to learn that nothing can be pruned. Rising
/// ids: the sample (the first staged rows) falls outside the older days,
/// so every staged id is read, and only day 1's two pages are.
#[test]
fn a_sample_of_scattered_staged_keys_spares_reading_them_all() {
    let ids = |ids: Vec<i64>| column("id", Arc::new(Int64Array::from(ids)));
    let scatter = |n: i64| (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as i64;
    let sample = [("DQGATE_TEST_SAMPLE_ROWS", "64")];
    let days = || {
        (0..5)
            .map(|day| ids((day * 10_000..(day + 1) * 10_000).map(scatter).collect()))
            .collect()
    };
    let mut new: Vec<i64> = (50_000..60_000).map(scatter).collect();
    new.extend([scatter(12_345), scatter(40_000)]);
    let tmp = tempfile::tempdir().unwrap();
    let (text, v) = explain_and_check_with(tmp.path(), days(), ids(new.clone()), "id", &sample);
    assert!(
        text.contains("the first 64 staged key(s) already fall within every published footer range and key zone, so the rest are not read for pruning"),
        "{text}"
    );
    assert!(text.contains("50000 of 50000 row(s)"), "{text}");
    assert_eq!(v["checks"][0]["value"], 2);
    let tmp = tempfile::tempdir().unwrap();
    let (text, all) = explain_and_check(tmp.path(), days(), ids(new), "id");
    assert!(!text.contains("already fall within"), "{text}");
    assert_eq!(all, v);

    let days = (0..5)
        .map(|day| ids((day * 10_000..(day + 1) * 10_000).collect()))
        .collect();
    let mut new: Vec<i64> = (50_000..60_000).collect();
    new.extend([12_345, 12_999]);
    let tmp = tempfile::tempdir().unwrap();
    let (text, v) = explain_and_check_with(tmp.path(), days, ids(new), "id", &sample);
    assert!(!text.contains("already fall within"), "{text}");
    assert!(
        text.contains("2 of 10 page(s) in files with a page index, 200 of 50000 row(s)"),
        "{text}"
    );
    assert_eq!(v["checks"][0]["value"], 2);
}
