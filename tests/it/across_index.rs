//! `unique(...) across published` through the key indexes that `publish`
//! writes beside each version: the verdict equals DataFusion's grouped semi
//! join over the partitions' files, byte for byte, for text of random
//! alphabets and layouts, composites and integers, with fingerprints cut to
//! three bits too; and an index that is corrupt, missing, or not the index
//! of the files beside it is never trusted.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use datafusion::arrow::array::{Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::parquet::arrow::ArrowWriter;

use super::across_text::{pool, rules, write};
use super::oracle::splitmix::Rng;
use crate::support::{check_across, check_across_with, dqgate};

/// `dqgate publish rules.dq` of `staged` as `day=DAY` into `table`, with
/// `env`; it must publish.
pub(super) fn publish(cwd: &Path, staged: &Path, day: &str, env: &[(&str, &str)]) {
    let out = Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .current_dir(cwd)
        .args(["publish", "rules.dq", "--staged"])
        .arg(staged)
        .args(["--partition", &format!("day={day}"), "--table", "table"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "publish day={day}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The key index files of a published day.
fn indexes(cwd: &Path, day: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(cwd.join(format!("table/day={day}")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("_dqgate_keys_")
        })
        .collect();
    out.sort();
    out
}

const USED: &str = "look them up in the key indexes of";

#[test]
fn key_indexes_give_the_grouped_verdict() {
    let text = "table t\npartitioned by day\n\
                warn unique(s) across published\n\
                warn unique(s, n) across published\n\
                warn unique(n, s) across published\n\
                warn unique(n) across published\n";
    for (seed, bits) in [(31u64, None), (32, Some("3")), (33, None), (34, Some("3"))] {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path();
        let mut rng = Rng(seed);
        let keys = pool(&mut rng, 400);
        rules(cwd, text);
        let env: Vec<(&str, &str)> = bits
            .map(|b| ("DQGATE_TEST_FINGERPRINT_BITS", b))
            .into_iter()
            .collect();
        for day in 1..=3usize {
            let dir = cwd.join(format!("s{day}"));
            let layout = rng.below(4);
            write(&mut rng, &dir, &keys, ((day - 1) * 80, 200, 160), layout);
            publish(cwd, &dir, &day.to_string(), &env);
            assert_eq!(indexes(cwd, &day.to_string()).len(), 4, "an index a key");
        }
        let staged = cwd.join("new");
        let layout = rng.below(4);
        write(&mut rng, &staged, &keys, (120, 200, 160), layout);
        for day in ["2", "9"] {
            let (grouped, _) = check_across(cwd, &staged, day, Some("grouped"));
            assert!(grouped.contains("\"partition\""), "keys clash:\n{grouped}");
            let (indexed, log) = check_across(cwd, &staged, day, None);
            assert_eq!(indexed, grouped, "seed {seed}, day {day}");
            assert_eq!(
                log.matches(USED).count(),
                4,
                "every check used the indexes:\n{log}"
            );
        }
        // Day 2 without its indexes: its files are read beside the other
        // days' indexes, fingerprints cut as the indexes' are.
        for i in indexes(cwd, "2") {
            fs::remove_file(i).unwrap();
        }
        let (grouped, _) = check_across(cwd, &staged, "9", Some("grouped"));
        let (mixed, log) = check_across_with(cwd, &staged, "9", &env, &[]);
        assert_eq!(mixed, grouped, "seed {seed}, day 2 without indexes");
        let line = "1 of 3 published partition(s) have no key index";
        assert_eq!(log.matches(USED).count(), 4, "{log}");
        assert_eq!(log.matches(line).count(), 4, "{log}");
    }
}

/// Writes `batch` to `path` as one Parquet file.
fn parquet(path: &Path, batch: &RecordBatch) {
    let mut w = ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// Writes a file of int64 keys `k` to `path`.
fn ints(path: &Path, keys: impl IntoIterator<Item = i64>) {
    let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
    let batch =
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(keys))]).unwrap();
    parquet(path, &batch);
}

/// Three published days of integer keys (day d holds d*100 to d*100+99)
/// and a staged day holding 150, 250 and 999.
fn three_days(cwd: &Path) -> PathBuf {
    rules(
        cwd,
        "table t\npartitioned by day\nwarn unique(k) across published\n",
    );
    for day in 1..=3i64 {
        let dir = cwd.join(format!("s{day}"));
        fs::create_dir_all(&dir).unwrap();
        ints(&dir.join("part-0.parquet"), day * 100..day * 100 + 100);
        publish(cwd, &dir, &day.to_string(), &[]);
    }
    let staged = cwd.join("new");
    fs::create_dir_all(&staged).unwrap();
    ints(&staged.join("part-0.parquet"), [150, 250, 999, 5000]);
    staged
}

/// The verdict through the indexes equals the grouped one, and the log
/// says why the indexes were not used (`None`: they were).
fn same_as_grouped(cwd: &Path, staged: &Path, why: Option<&str>) -> String {
    let (grouped, _) = check_across(cwd, staged, "9", Some("grouped"));
    let (got, log) = check_across(cwd, staged, "9", None);
    assert_eq!(got, grouped);
    match why {
        None => assert!(log.contains(USED), "{log}"),
        Some(why) => assert!(
            !log.contains(USED) && log.contains("key indexes not used") && log.contains(why),
            "{log}"
        ),
    }
    got
}

#[test]
fn an_index_that_does_not_match_its_files_is_never_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let staged = three_days(cwd);
    let got = same_as_grouped(cwd, &staged, None);
    assert!(
        got.contains("\"k\": 150") && got.contains("\"k\": 250"),
        "{got}"
    );
    let out = explain(cwd, "9");
    assert!(
        out.contains("the key zones in 3 index header(s) rule out 1 of 3 published partition(s)")
            && out.contains("the rest by the key indexes beside the 2 published version(s)"),
        "{out}"
    );

    // A flipped bit in day 2's index: refused, and `verify` says so.
    let index = indexes(cwd, "2").pop().unwrap();
    let good = fs::read(&index).unwrap();
    let mut bad = good.clone();
    let last = bad.len() - 3;
    bad[last] ^= 1;
    fs::write(&index, &bad).unwrap();
    same_as_grouped(cwd, &staged, Some("is corrupt"));
    let out = dqgate(cwd, &["verify", "table", "--partition", "day=2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("changed: key index"));
    fs::write(&index, &good).unwrap();
    let out = dqgate(cwd, &["verify", "table", "--partition", "day=2"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // Day 1's file replaced by hand (same name): its index is stale. It
    // would say 150 is there; the file now holds 999 instead. Day 1's file
    // is read, beside the other days' indexes.
    let file = fs::read_dir(cwd.join("table/day=1"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    ints(&file, 990..1000);
    let got = same_as_grouped_mixed(cwd, &staged, "1 of 3", "does not match its files");
    assert!(
        got.contains("\"k\": 999") && !got.contains("\"k\": 150"),
        "{got}"
    );

    // Day 3 without an index too (as an older dqgate published it).
    for i in indexes(cwd, "3") {
        fs::remove_file(i).unwrap();
    }
    same_as_grouped_mixed(cwd, &staged, "2 of 3", "does not match its files");
    let out = explain(cwd, "9");
    assert!(
        out.contains("by the key indexes beside the 1 published version(s)")
            && out.contains("2 of 3 published partition(s) have no key index"),
        "{out}"
    );

    // No day with an index: every day's files are read as before.
    for i in indexes(cwd, "2") {
        fs::remove_file(i).unwrap();
    }
    same_as_grouped(
        cwd,
        &staged,
        Some("3 of 3 published partition(s) have no key index"),
    );
    let out = explain(cwd, "9");
    assert!(out.contains("key indexes not used: 3 of 3"), "{out}");
}

/// The verdict through the indexes of some parts and the files of `count`
/// others (`why` the first has no usable index) equals the grouped one.
fn same_as_grouped_mixed(cwd: &Path, staged: &Path, count: &str, why: &str) -> String {
    let (grouped, _) = check_across(cwd, staged, "9", Some("grouped"));
    let (got, log) = check_across(cwd, staged, "9", None);
    assert_eq!(got, grouped);
    let line = format!("{count} published partition(s) have no key index");
    assert!(
        log.contains(USED) && log.contains(&line) && log.contains(why),
        "{log}"
    );
    got
}

#[test]
fn a_rolled_back_version_brings_its_own_index_back() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let staged = three_days(cwd);
    let again = cwd.join("again");
    fs::create_dir_all(&again).unwrap();
    ints(&again.join("part-0.parquet"), 5000..5010);
    publish(cwd, &again, "1", &[]);
    let got = same_as_grouped(cwd, &staged, None);
    assert!(
        got.contains("\"k\": 5000") && !got.contains("\"k\": 150"),
        "{got}"
    );
    let out = dqgate(cwd, &["rollback", "table", "--partition", "day=1"]);
    assert!(out.status.success(), "{out:?}");
    let got = same_as_grouped(cwd, &staged, None);
    assert!(
        got.contains("\"k\": 150") && !got.contains("\"k\": 5000"),
        "{got}"
    );
}

/// Keys that rise with time: the footers leave little to read (here
/// nothing), so the partitions' pruned files are read rather than every
/// index.
#[test]
fn footers_that_prune_well_are_read_instead_of_the_indexes() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    three_days(cwd);
    let later = cwd.join("later");
    fs::create_dir_all(&later).unwrap();
    ints(&later.join("part-0.parquet"), [5000, 5001]);
    let got = same_as_grouped(
        cwd,
        &later,
        Some("the footers leave 0 of the 0 published row(s) the key zones leave to read"),
    );
    assert!(got.contains("\"value\": 0"), "{got}");
    let (_, log) = check_across(cwd, &later, "9", None);
    let zones = "the key zones in 3 index header(s) rule out 3 of 3 published partition(s)";
    assert!(log.contains(zones), "{log}");
}

/// Writes rows of (`s` text, null where `None`; `n` int64) to `path`, in
/// row groups of 5 rows.
fn texts(path: &Path, rows: &[(Option<String>, i64)]) {
    use datafusion::arrow::array::StringArray;
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("n", DataType::Int64, false),
    ]));
    let s = StringArray::from_iter(rows.iter().map(|r| r.0.as_deref()));
    let n = Int64Array::from_iter_values(rows.iter().map(|r| r.1));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(s), Arc::new(n)]).unwrap();
    let props = datafusion::parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(5))
        .build();
    let file = File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// Keys that rise with time, stale keys among the staged ones: the key
/// zones rule out 37 of 40 days, the footers leave 3 row groups of the
/// other days' 60, which are probed with the distinct staged keys read
/// for the indexes (not read again), and the verdict, samples and the
/// partitions they name included, is the grouped one.
#[test]
fn rising_keys_with_indexes_probe_the_pruned_rows_with_the_staged_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    rules(
        cwd,
        "table t\npartitioned by day\n\
         warn unique(s) across published\n\
         warn unique(n) across published\n\
         warn unique(s, n) across published\n",
    );
    let row = |i: i64| (Some(format!("k{i:06}")), i);
    for day in 1..=40i64 {
        let dir = cwd.join(format!("s{day}"));
        fs::create_dir_all(&dir).unwrap();
        let mut rows: Vec<_> = (day * 100..day * 100 + 100).map(row).collect();
        if day == 3 {
            rows.push(row(205)); // a key of day 2 published again
        }
        texts(&dir.join("part-0.parquet"), &rows);
        publish(cwd, &dir, &day.to_string(), &[]);
    }
    let staged = cwd.join("new");
    fs::create_dir_all(&staged).unwrap();
    let mut rows: Vec<_> = (5000..5100).map(row).collect();
    for i in [205, 205, 205, 799] {
        rows.push(row(i));
    }
    rows.push((None, 260));
    texts(&staged.join("part-0.parquet"), &rows);
    let (grouped, _) = check_across(cwd, &staged, "99", Some("grouped"));
    // Fingerprints cut to 3 bits: every key's bytes are compared.
    let cut = [("DQGATE_TEST_FINGERPRINT_BITS", "3")];
    let (collided, log) = check_across_with(cwd, &staged, "99", &cut, &[]);
    assert_eq!(collided, grouped, "{log}");
    let (got, log) = check_across(cwd, &staged, "99", None);
    assert_eq!(got, grouped);
    assert!(
        got.contains("\"k000205\"") && got.contains("day=3") && got.contains("\"k000799\""),
        "{got}"
    );
    assert!(!log.contains(USED), "{log}");
    assert!(
        log.matches("probe them with the published rows the footers left")
            .count()
            >= 2,
        "{log}"
    );
    let zones = "the key zones in 40 index header(s) rule out 37 of 40 published partition(s)";
    assert!(log.matches(zones).count() >= 2, "{log}");
    // `explain` says the same, and what the footers leave of the 3 days:
    // what the run reads, not what they leave of the whole table.
    let out = explain(cwd, "99");
    let line = format!(
        "{zones}: no staged key lies within them; of the rest, footer ranges of each published row group (and page, in files with a page index) compared with the sorted staged keys: reads 3 of 40 file(s)"
    );
    assert!(out.matches(&line).count() >= 2, "{out}");
    let probed = "the rows read are probed with the distinct staged keys read for the indexes";
    assert_eq!(
        out.matches("footer ranges of each").count(),
        out.matches(probed).count(),
        "{out}"
    );
}

/// `dqgate explain` of the staged directory `new` as `day=DAY`.
fn explain(cwd: &Path, day: &str) -> String {
    let day = format!("day={day}");
    let args = [
        "explain",
        "rules.dq",
        "--staged",
        "new",
        "--partition",
        &day,
    ];
    let out = dqgate(cwd, &[&args[..], &["--table", "table"]].concat());
    String::from_utf8(out.stdout).unwrap()
}

/// The first bytes of every key index of `day`.
fn magics(cwd: &Path, day: &str) -> Vec<Vec<u8>> {
    (indexes(cwd, day).iter())
        .map(|p| fs::read(p).unwrap()[..8].to_vec())
        .collect()
}

/// Indexes written in format 1 (by the dqgate of 2026-12-03, before format
/// 2) are still read, beside those written now. The fixture is a table of two
/// days published by that dqgate (`testdata/keyindex-format1`).
#[test]
fn indexes_of_the_first_format_are_still_read() {
    older_indexes_are_still_read("keyindex-format1", b"DQGKEYS1", 4);
}

/// Indexes written in format 2 (without key zones, until 2026-12-03) are
/// still read, beside those written now: `testdata/keyindex-format2` holds the
/// same table as published by that dqgate.
#[test]
fn indexes_of_the_second_format_are_still_read() {
    older_indexes_are_still_read("keyindex-format2", b"DQGKEYS2", 1 + 16 + 4);
}

/// Indexes written in format 3 (integer keys too, until 2026-12-06) are
/// still read, beside the format 4 index a day published now has of its
/// integer key: `testdata/keyindex-format3` holds the same table as
/// published by that dqgate.
#[test]
fn indexes_of_the_third_format_are_still_read() {
    older_indexes_are_still_read("keyindex-format3", b"DQGKEYS3", 1 + 16 + 4);
}

/// A table of two days published with indexes of an older format
/// (`fixture`, whose indexes start with `magic` and have names of
/// `name_len` bytes after the prefix and before `.idx`), read alone and
/// beside a day published now.
fn older_indexes_are_still_read(fixture: &str, magic: &[u8], name_len: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(fixture);
    let copied = Command::new("cp")
        .arg("-a")
        .arg(fixture.join("."))
        .arg(cwd)
        .status()
        .unwrap();
    assert!(copied.success());
    for day in ["1", "2"] {
        assert_eq!(magics(cwd, day), vec![magic.to_vec(); 2], "day={day}");
    }
    // `staged` holds 200 new keys and 5, 299, 301 and 599 again.
    let (json, err) = check_across(cwd, &cwd.join("staged"), "3", None);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let values: Vec<&serde_json::Value> = (v["checks"].as_array().unwrap().iter())
        .map(|c| &c["value"])
        .collect();
    assert_eq!(values, [&serde_json::json!(4), &serde_json::json!(4)]);
    assert_eq!(
        err.matches(&format!("{USED} 2 published")).count(),
        2,
        "{err}"
    );
    // Their names are those of then.
    let name = |p: &PathBuf| p.file_name().unwrap().to_string_lossy().into_owned();
    for day in ["1", "2"] {
        for i in indexes(cwd, day) {
            assert_eq!(
                name(&i).len(),
                "_dqgate_keys_".len() + 16 + name_len,
                "{i:?}"
            );
        }
    }
    // A day published now gets format 4 for its integer key and format 3
    // for its text one, under names that hold its version's; all are read
    // together.
    publish(cwd, &cwd.join("next"), "3", &[]);
    let mut now = magics(cwd, "3");
    now.sort();
    assert_eq!(now, [b"DQGKEYS3".to_vec(), b"DQGKEYS4".to_vec()]);
    for i in indexes(cwd, "3") {
        assert_eq!(name(&i).len(), "_dqgate_keys_".len() + 33 + 4, "{i:?}");
    }
    let (json, err) = check_across(cwd, &cwd.join("staged"), "4", None);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["checks"][0]["value"], 4, "{json}");
    // Day 3's zones rule it out (indexes before format 3 have none).
    assert_eq!(
        err.matches(&format!("{USED} 2 published")).count(),
        2,
        "{err}"
    );
    let zoned = if magic == b"DQGKEYS3" { 3 } else { 1 };
    let zones =
        format!("the key zones in {zoned} index header(s) rule out 1 of 3 published partition(s)");
    assert_eq!(err.matches(&zones).count(), 2, "{err}");
    // And a staged day with the keys of day 3, and two of days 1 and 2
    // (so that no footer prunes), finds them through the indexes.
    let ids: Vec<i64> = (800..900).chain([0, 599]).collect();
    let refs: Vec<String> = ids.iter().map(|i| format!("R-{i:05}-x")).collect();
    let batch = RecordBatch::try_from_iter([
        ("order_id", Arc::new(Int64Array::from(ids)) as _),
        ("ref", Arc::new(StringArray::from(refs)) as _),
    ])
    .unwrap();
    fs::create_dir(cwd.join("again")).unwrap();
    parquet(&cwd.join("again/part-0.parquet"), &batch);
    let (json, err) = check_across(cwd, &cwd.join("again"), "4", None);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["checks"][0]["value"], 102, "{json}");
    assert_eq!(v["checks"][1]["value"], 102, "{json}");
    assert!(err.contains(&format!("{USED} 3 published")), "{err}");
}
