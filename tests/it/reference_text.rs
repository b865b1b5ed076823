//! `values(...) in REF(...)` on text keys that pack into no word, on the
//! key engine's fingerprinted lookup, against DataFusion's grouped
//! anti-join: random alphabets and lengths (the empty string, keys of 16
//! and 17 bytes, multi-byte UTF-8 included), nulls on both sides, the four
//! Arrow layouts of text, composites with an integer part, and
//! fingerprints cut to a few bits so that nearly every key collides.
//! Verdicts are byte-identical, samples included, whether the lookup
//! probes its table in place or spreads both sides into radix partitions
//! (`DQGATE_TEST_LOOKUP_KEYS=0` forces the spread lookup on small files).
//! A reference of more rows than the in-place table keeps, and staged keys
//! that outgrow it, are spread with the same verdict.

use std::fs;
use std::path::Path;
use std::process::Command;

use super::across_text::{pool, write};
use super::oracle::splitmix::Rng;
use crate::support::{files_in, verdict_and_log};

/// `check` of `rules.dq` in `cwd` against `staged` (JSON verdict, and the
/// `-v` log), with `env`; `grouped` forces DataFusion's joins.
fn check(cwd: &Path, staged: &Path, grouped: bool, env: &[(&str, &str)]) -> (String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
    cmd.current_dir(cwd)
        .args(["check", "rules.dq", "--staged"])
        .arg(staged)
        .args(["--format", "json", "--threads", "2", "-v"])
        .envs(env.iter().copied());
    if grouped {
        cmd.env("DQGATE_TEST_KEY_STRATEGY", "grouped");
    }
    verdict_and_log(&mut cmd)
}

const ENGINE: &str = "staged row(s) whose key is not there";

/// Every fingerprinted lookup spread into radix partitions.
const SPREAD: (&str, &str) = ("DQGATE_TEST_LOOKUP_KEYS", "0");

/// What the spread lookup's `-v` line says.
const SPREAD_LOG: &str = "radix partitions:";

/// The spread lookup's records written to disk past 256 bytes.
const SPILL: (&str, &str) = ("DQGATE_TEST_SPREAD_BYTES", "256");

/// What the `-v` line of a spread lookup that spilled says.
const SPILL_LOG: &str = "MB written to disk) into";

#[test]
fn text_reference_lookups_on_the_engine_give_the_grouped_verdict() {
    for seed in [31u64, 32, 33, 34, 35, 36] {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path();
        let mut rng = Rng(seed);
        let mut keys = pool(&mut rng, 400);
        // Keys at the edge of a slot's head: 16 and 17 bytes that differ
        // in their last byte only, and 8 that differ in their middle.
        keys.extend(["0123456789abcdeX", "0123456789abcdeY"].map(String::from));
        keys.extend(["0123456789abcdefX", "0123456789abcdefY"].map(String::from));
        keys.extend(["abcXdefgh", "abcYdefgh"].map(String::from));
        keys.extend(["é", "ée", ""].map(String::from));
        let n = keys.len();
        // The reference holds keys 100.. , the staged rows 0..; they share
        // about half, and the edge keys fall on both sides.
        let layout = rng.below(4);
        write(
            &mut rng,
            &cwd.join("ref"),
            &keys,
            (100, n - 100, 300),
            layout,
        );
        let layout = rng.below(4);
        write(&mut rng, &cwd.join("new"), &keys, (0, n, 300), layout);
        fs::write(
            cwd.join("rules.dq"),
            "table t\nreference r at 'ref'\n\
             check values(s) in r(s)\n\
             check values(s, n) in r(s, n)\n\
             check values(n, s) in r(n, s)\n",
        )
        .unwrap();
        let staged = cwd.join("new");
        let (grouped, _) = check(cwd, &staged, true, &[]);
        assert!(
            grouped.contains("\"fail\""),
            "some keys are missing:\n{grouped}"
        );
        let (engine, log) = check(cwd, &staged, false, &[]);
        assert_eq!(engine, grouped, "seed {seed}");
        assert_eq!(log.matches(ENGINE).count(), 3, "the engine ran:\n{log}");
        // Three bits of fingerprint: eight fingerprints for every key.
        let bits = [("DQGATE_TEST_FINGERPRINT_BITS", "3")];
        let (collided, log) = check(cwd, &staged, false, &bits);
        assert_eq!(collided, grouped, "seed {seed}, colliding");
        assert!(log.contains(ENGINE), "{log}");
        let (spread, log) = check(cwd, &staged, false, &[SPREAD]);
        assert_eq!(spread, grouped, "seed {seed}, spread");
        assert_eq!(log.matches(SPREAD_LOG).count(), 3, "spread:\n{log}");
        let (spread, log) = check(cwd, &staged, false, &[SPREAD, bits[0]]);
        assert_eq!(spread, grouped, "seed {seed}, spread and colliding");
        assert_eq!(log.matches(SPREAD_LOG).count(), 3, "spread:\n{log}");
        // Partitions written to disk and read back, colliding or not.
        for env in [&[SPREAD, SPILL][..], &[SPREAD, SPILL, bits[0]]] {
            let (spilled, log) = check(cwd, &staged, false, env);
            assert_eq!(spilled, grouped, "seed {seed}, spilled, {env:?}");
            assert_eq!(log.matches(SPILL_LOG).count(), 3, "spilled:\n{log}");
        }
    }
}

/// Keys that differ in one byte, at every place a slot's head and the
/// bytes beside it split a key (8, 16 and 17 bytes), with every key's
/// fingerprint the same or one of two: only their bytes tell them apart.
/// The reference holds the first of each pair; the staged rows both.
#[test]
fn keys_that_differ_in_one_byte_are_told_apart_when_every_fingerprint_collides() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let pairs: Vec<(String, String)> = [3usize, 7, 8, 9, 12, 15, 16, 17, 24, 40]
        .iter()
        .flat_map(|&n| {
            let base: Vec<char> = (0..n).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            (0..n).map(move |at| {
                let mut a = base.clone();
                let mut b = base.clone();
                a[at] = 'X';
                b[at] = 'Y';
                (a.into_iter().collect(), b.into_iter().collect())
            })
        })
        .collect();
    text_file(&cwd.join("ref"), pairs.iter().map(|(a, _)| a.clone()));
    let staged = cwd.join("new");
    text_file(
        &staged,
        pairs
            .iter()
            .flat_map(|(a, b)| [a.clone(), b.clone(), b.clone()]),
    );
    fs::write(
        cwd.join("rules.dq"),
        "table t\nreference r at 'ref'\ncheck values(s) in r(s)\n",
    )
    .unwrap();
    let (grouped, _) = check(cwd, &staged, true, &[]);
    assert!(
        grouped.contains(&format!("\"value\": {}", 2 * pairs.len())),
        "{grouped}"
    );
    for bits in ["0", "1", "64"] {
        let (got, log) = check(
            cwd,
            &staged,
            false,
            &[("DQGATE_TEST_FINGERPRINT_BITS", bits)],
        );
        assert_eq!(got, grouped, "{bits} bit(s) of fingerprint");
        assert!(log.contains(ENGINE), "{log}");
        let env = [("DQGATE_TEST_FINGERPRINT_BITS", bits), SPREAD];
        let (got, log) = check(cwd, &staged, false, &env);
        assert_eq!(got, grouped, "{bits} bit(s) of fingerprint, spread");
        assert!(log.contains(SPREAD_LOG), "{log}");
        let env = [("DQGATE_TEST_FINGERPRINT_BITS", bits), SPREAD, SPILL];
        let (got, log) = check(cwd, &staged, false, &env);
        assert_eq!(got, grouped, "{bits} bit(s) of fingerprint, spilled");
        assert!(log.contains(SPILL_LOG), "{log}");
    }
}

/// One Parquet file of the text column `s` at `dir/part-0.parquet`.
fn text_file(dir: &Path, values: impl Iterator<Item = String>) {
    use datafusion::arrow::array::{ArrayRef, RecordBatch, StringArray};
    use datafusion::parquet::arrow::ArrowWriter;
    fs::create_dir_all(dir).unwrap();
    let array: ArrayRef = std::sync::Arc::new(values.map(Some).collect::<StringArray>());
    let batch = RecordBatch::try_from_iter([("s", array)]).unwrap();
    let file = fs::File::create(dir.join("part-0.parquet")).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// A reference of more rows than the in-place table keeps is spread at
/// once; staged keys that outgrow it in a scan task send the lookup there
/// too. Same verdict either way, and `-v` says why.
#[test]
fn lookups_beyond_the_in_place_table_are_spread() {
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    let key = |i: usize| format!("K-{i:07}-{}", i % 7);
    // 300,000 keys, and the first 1,000 of them without every tenth.
    text_file(&cwd.join("big"), (0..300_000).map(key));
    text_file(
        &cwd.join("small"),
        (0..1000).filter(|i| i % 10 != 3).map(key),
    );
    fs::write(
        cwd.join("rules.dq"),
        "table t\nreference big at 'big'\nreference small at 'small'\n\
         check values(s) in big(s)\ncheck values(s) in small(s)\n",
    )
    .unwrap();
    // Few distinct staged keys: the small reference in place, the big one
    // (more rows than the in-place table keeps) spread.
    let few = cwd.join("few");
    text_file(&few, (0..5000).map(|i| key(i * 7919 % 1100)));
    let (grouped, _) = check(cwd, &few, true, &[]);
    assert!(grouped.contains("\"fail\""), "{grouped}");
    let (got, log) = check(cwd, &few, false, &[]);
    assert_eq!(got, grouped);
    assert_eq!(log.matches(ENGINE).count(), 2, "{log}");
    assert_eq!(log.matches(SPREAD_LOG).count(), 1, "{log}");
    assert!(
        log.contains("the reference has 300000 rows, more than the 262144 keys"),
        "{log}"
    );
    // However many staged rows there are: the table is reserved for the
    // keys a lookup may hold (it once was for every row, and past 16M
    // rows, here 100, the lookup was spread).
    let (got, log) = check(cwd, &few, false, &[("DQGATE_TEST_PROBE_ROWS", "100")]);
    assert_eq!(got, grouped);
    assert_eq!(log.matches(SPREAD_LOG).count(), 1, "{log}");
    // Many distinct staged keys: the in-place table for the small
    // reference gives up, and the spread lookup answers both.
    let many = cwd.join("many");
    text_file(&many, (0..300_000).rev().map(key));
    let (grouped, _) = check(cwd, &many, true, &[]);
    assert!(grouped.contains("\"fail\""), "{grouped}");
    let (got, log) = check(cwd, &many, false, &[]);
    assert_eq!(got, grouped);
    assert_eq!(log.matches(SPREAD_LOG).count(), 2, "{log}");
    assert!(
        log.contains("more than 262144 distinct staged keys"),
        "{log}"
    );
    // A memory limit under what the spread lookup's partitions need (about
    // 9 MB here): they are written to disk past a quarter of it (1 MiB at
    // least), and read back a partition at a time, with the same verdict.
    // (DataFusion's anti-join answered here before they spilled.)
    fs::write(
        cwd.join("rules.dq"),
        "table t\nreference big at 'big'\ncheck values(s) in big(s)\n",
    )
    .unwrap();
    let third = cwd.join("third");
    let absent = ["K-9999999-0".to_string(), "zz".to_string()];
    text_file(&third, (0..300_000).step_by(3).map(key).chain(absent));
    let (grouped, _) = check(cwd, &third, true, &[]);
    assert!(grouped.contains("\"value\": 2"), "{grouped}");
    let (got, log) = check(cwd, &third, false, &[]);
    assert_eq!(got, grouped);
    assert!(log.contains(SPREAD_LOG), "{log}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
    cmd.current_dir(cwd)
        .args(["check", "rules.dq", "--staged"])
        .arg(&third)
        .args(["--format", "json", "--threads", "2", "-v"])
        .args(["--memory-limit", "4MB"]);
    let (got, log) = verdict_and_log(&mut cmd);
    assert_eq!(got, grouped);
    assert!(log.contains(SPILL_LOG) && log.contains(SPREAD_LOG), "{log}");
}

/// The failed rows of a text reference check, selected by the key
/// engine's exact missing keys (spread, and written to disk past 256
/// bytes under a memory limit), are byte for byte those DataFusion's
/// anti-join selects, composites and every Arrow layout of text included.
#[test]
fn failed_rows_by_the_missing_keys_equal_the_anti_join() {
    for seed in [41u64, 42, 43] {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path();
        let mut rng = Rng(seed);
        let keys = pool(&mut rng, 300);
        let n = keys.len();
        let layout = rng.below(4);
        write(&mut rng, &cwd.join("ref"), &keys, (60, n - 60, 200), layout);
        let layout = rng.below(4);
        write(&mut rng, &cwd.join("new"), &keys, (0, n, 200), layout);
        fs::write(
            cwd.join("rules.dq"),
            "table t\nreference r at 'ref'\n\
             check values(s) in r(s)\n\
             check values(s, n) in r(s, n)\n",
        )
        .unwrap();
        let run = |dir: &str, env: &[(&str, &str)], extra: &[&str]| {
            let out = Command::new(env!("CARGO_BIN_EXE_dqgate"))
                .current_dir(cwd)
                .args(["check", "rules.dq", "--staged", "new", "--format", "json"])
                .args(["--failed-rows", dir, "--failed-rows-limit", "all"])
                .args(extra)
                .envs(env.iter().copied())
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(1),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            (
                String::from_utf8(out.stdout).unwrap(),
                files_in(&cwd.join(dir)),
            )
        };
        let grouped = run("grouped", &[("DQGATE_TEST_KEY_STRATEGY", "grouped")], &[]);
        assert_eq!(grouped.1.len(), 2, "both checks have rows");
        let engine = run("engine", &[], &[]);
        assert_eq!(engine, grouped, "seed {seed}");
        let spilled = run(
            "spilled",
            &[SPILL, ("DQGATE_TEST_FINGERPRINT_BITS", "3")],
            &["--memory-limit", "16MiB"],
        );
        assert_eq!(spilled, grouped, "seed {seed}, spilled and colliding");
    }
}
