//! `dqgate publish --target delta` on the real binary and real files: the
//! Delta log it writes is replayed here by a reader of the protocol's JSON
//! (add/remove/txn), independent of the `deltalake` crate dqgate commits with.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value as Json;

use crate::common::*;

const RULES: &str =
    "table t\npartitioned by d\ncheck row_count > 0\ncheck distinct_count(version) = 1\n";

struct Lake {
    tmp: tempfile::TempDir,
    rules: PathBuf,
}

impl Lake {
    fn new() -> Lake {
        let tmp = tempfile::tempdir().unwrap();
        let rules = tmp.path().join("t.dq");
        fs::write(&rules, RULES).unwrap();
        Lake { tmp, rules }
    }

    fn root(&self) -> PathBuf {
        self.tmp.path().join("lake")
    }

    /// Stages `files` files whose rows all carry `version` (fresh directory).
    fn stage(&self, name: &str, version: i64, files: usize) -> PathBuf {
        let dir = self.tmp.path().join("staging").join(name);
        fs::remove_dir_all(&dir).ok();
        stage_into(&dir, version, files);
        dir
    }

    fn command(&self, rules: &Path, staged: &Path, part: &str) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
        cmd.arg("publish")
            .arg(rules)
            .arg("--staged")
            .arg(staged)
            .args(["--partition", &format!("d={part}"), "--table"])
            .arg(self.root())
            .args(["--target", "delta"]);
        cmd
    }

    fn publish(&self, staged: &Path, part: &str) -> Output {
        self.command(&self.rules, staged, part).output().unwrap()
    }

    /// The log entries, in version order.
    fn log(&self) -> Vec<Vec<Json>> {
        let dir = self.root().join("_delta_log");
        let mut names: Vec<PathBuf> = fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        names.retain(|p| p.extension().is_some_and(|e| e == "json"));
        names.sort();
        names
            .iter()
            .enumerate()
            .map(|(i, p)| {
                assert_eq!(
                    p.file_name().unwrap().to_string_lossy(),
                    format!("{i:020}.json"),
                    "log entries are numbered without gaps"
                );
                fs::read_to_string(p)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect()
            })
            .collect()
    }

    /// Replays the log: the active files (path → partition value of `d`)
    /// and the latest txn version per appId.
    fn state(&self) -> (BTreeMap<String, String>, BTreeMap<String, i64>) {
        let mut files = BTreeMap::new();
        let mut txns = BTreeMap::new();
        for entry in self.log() {
            for action in entry {
                if let Some(a) = action.get("add") {
                    let d = a["partitionValues"]["d"].as_str().unwrap().to_string();
                    files.insert(a["path"].as_str().unwrap().to_string(), d);
                } else if let Some(r) = action.get("remove") {
                    files.remove(r["path"].as_str().unwrap());
                } else if let Some(t) = action.get("txn") {
                    txns.insert(
                        t["appId"].as_str().unwrap().to_string(),
                        t["version"].as_i64().unwrap(),
                    );
                }
            }
        }
        (files, txns)
    }

    /// The `version` values of the rows a Delta reader sees in partition `d`.
    fn versions_of(&self, d: &str) -> BTreeSet<i64> {
        let (files, _) = self.state();
        let mut out = BTreeSet::new();
        for (path, part) in &files {
            if part == d {
                out.extend(versions_in(&self.root().join(path)).unwrap());
            }
        }
        out
    }

    fn files_of(&self, d: &str) -> BTreeSet<String> {
        let (files, _) = self.state();
        files
            .into_iter()
            .filter(|(_, p)| p == d)
            .map(|(f, _)| f)
            .collect()
    }
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn verify(lake: &Lake, d: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .arg("verify")
        .arg(lake.root())
        .args(["--partition", &format!("d={d}")])
        .output()
        .unwrap()
}

#[test]
fn first_publish_creates_the_table_in_one_commit() {
    let lake = Lake::new();
    let staged = lake.stage("a", 1, 2);
    let out = lake.publish(&staged, "1");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let log = lake.log();
    assert_eq!(log.len(), 1);
    let kinds: Vec<&str> = log[0]
        .iter()
        .map(|a| a.as_object().unwrap().keys().next().unwrap().as_str())
        .collect();
    assert_eq!(
        kinds,
        ["commitInfo", "protocol", "metaData", "add", "add", "txn"]
    );
    let meta = &log[0][2]["metaData"];
    assert_eq!(meta["partitionColumns"], serde_json::json!(["d"]));
    let schema: Json = serde_json::from_str(meta["schemaString"].as_str().unwrap()).unwrap();
    let names: Vec<&str> = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["version", "id", "d"]);
    // The audit record travels in commitInfo and beside the files.
    let audit = &log[0][0]["commitInfo"]["dqgateAudit"];
    assert_eq!(audit["verdict"], "pass");
    assert_eq!(audit["partition"]["d"], "1");
    let beside: Json = serde_json::from_str(
        &fs::read_to_string(lake.root().join("d=1/_dqgate_audit.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(&beside, audit);
    // Added files: version-unique names under d=1/, with their sizes.
    for a in log[0].iter().filter_map(|a| a.get("add")) {
        let path = a["path"].as_str().unwrap();
        assert!(path.starts_with("d=1/part-0000"), "{path}");
        assert!(!staged.join(path.trim_start_matches("d=1/")).exists());
        let len = fs::metadata(lake.root().join(path)).unwrap().len();
        assert_eq!(a["size"].as_u64(), Some(len));
        let stats: Json = serde_json::from_str(a["stats"].as_str().unwrap()).unwrap();
        let rows = if path.contains("part-00000") { 10 } else { 11 };
        assert_eq!(stats["numRecords"], rows, "{path}");
    }
    assert_eq!(lake.versions_of("1"), BTreeSet::from([1]));
    // The staged files stay where they were (copied, not moved).
    assert_eq!(list_parquet_files_count(&staged), 2);
    let v = verify(&lake, "1");
    assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));
}

fn list_parquet_files_count(dir: &Path) -> usize {
    glob_parquet(dir).len()
}

#[test]
fn republish_replaces_exactly_one_partition() {
    let lake = Lake::new();
    assert_eq!(code(&lake.publish(&lake.stage("a", 1, 2), "1")), 0);
    assert_eq!(code(&lake.publish(&lake.stage("b", 2, 3), "2")), 0);
    let other_before = lake.files_of("2");
    let first_d1 = lake.files_of("1");
    let out = lake.publish(&lake.stage("c", 3, 1), "1");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let log = lake.log();
    assert_eq!(log.len(), 3);
    for (i, entry) in log.iter().enumerate() {
        let read = &entry[0]["commitInfo"]["dqgateReadVersion"];
        assert_eq!(read.as_i64(), Some(i as i64 - 1), "commit {i}");
    }
    // One commit: removes of exactly d=1's files, adds of the new ones.
    let removed: BTreeSet<String> = log[2]
        .iter()
        .filter_map(|a| a.get("remove"))
        .map(|r| r["path"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(removed, first_d1);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([3]));
    assert_eq!(lake.files_of("1").len(), 1);
    assert_eq!(lake.files_of("2"), other_before);
    assert_eq!(lake.versions_of("2"), BTreeSet::from([2]));
    for d in ["1", "2"] {
        let v = verify(&lake, d);
        assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));
    }
}

#[test]
fn a_retry_of_the_same_files_commits_nothing() {
    let lake = Lake::new();
    let staged = lake.stage("a", 1, 2);
    assert_eq!(code(&lake.publish(&staged, "1")), 0);
    let (_, txns) = lake.state();
    let out = lake.publish(&staged, "1");
    assert_eq!(code(&out), 0);
    assert!(
        stderr(&out).contains("already published"),
        "{}",
        stderr(&out)
    );
    assert_eq!(lake.log().len(), 1, "no second commit");
    assert_eq!(lake.state().1, txns);
    // A different version, then the first again: that is a change, committed.
    assert_eq!(code(&lake.publish(&lake.stage("b", 2, 2), "1")), 0);
    let again = lake.publish(&staged, "1");
    assert_eq!(code(&again), 0);
    assert!(!stderr(&again).contains("already published"));
    assert_eq!(lake.log().len(), 3);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([1]));
    // The txn names the current fingerprint.
    assert_eq!(lake.state().1, txns);
}

#[test]
fn a_failing_verdict_commits_nothing() {
    let lake = Lake::new();
    assert_eq!(code(&lake.publish(&lake.stage("a", 1, 2), "1")), 0);
    // Two versions in one partition: distinct_count(version) = 1 fails.
    let bad = lake.stage("bad", 5, 1);
    write_parquet(&bad.join("part-00009.parquet"), 6, 4);
    let before = glob_parquet(&lake.root());
    let out = lake.publish(&bad, "1");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(lake.log().len(), 1);
    assert_eq!(glob_parquet(&lake.root()), before, "no file copied");
    // A failing first publish creates no table at all.
    let empty = Lake::new();
    let out = empty.publish(&bad, "1");
    assert_eq!(code(&out), 1);
    assert!(!empty.root().join("_delta_log").exists());
}

fn check_against(lake: &Lake, rules: &str, staged: &Path, part: &str) -> Output {
    let file = lake.tmp.path().join("published-side.dq");
    fs::write(&file, rules).unwrap();
    Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .arg("check")
        .arg(&file)
        .arg("--staged")
        .arg(staged)
        .args([
            "--partition",
            &format!("d={part}"),
            "--format",
            "json",
            "--table",
        ])
        .arg(lake.root())
        .output()
        .unwrap()
}

fn check_named<'a>(verdict: &'a Json, name: &str) -> &'a Json {
    verdict["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().is_some_and(|n| n.contains(name)))
        .unwrap_or_else(|| panic!("no check named {name} in {verdict}"))
}

#[test]
fn rules_read_the_published_side_from_the_current_snapshot() {
    let lake = Lake::new();
    // d=1: 10 rows, then re-published with 21 rows (10 + 11): the removed
    // file stays on disk beside the two live ones.
    assert_eq!(code(&lake.publish(&lake.stage("a", 1, 1), "1")), 0);
    let v2 = lake.stage("b", 2, 2);
    let rules = "table t\npartitioned by d\ncheck row_count >= published.row_count\n\
                 check schema matches published\ncheck max(version) > published.max(version)\n";
    let file = lake.tmp.path().join("p.dq");
    fs::write(&file, rules).unwrap();
    let out = lake.command(&file, &v2, "1").output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(lake.log().len(), 2);
    assert_eq!(fs::read_dir(lake.root().join("d=1")).unwrap().count(), 4); // 3 files + record

    // 10 staged rows against the snapshot's 21 (not the 31 on disk).
    let out = check_against(&lake, rules, &lake.stage("c", 3, 1), "1");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let verdict: Json = serde_json::from_slice(&out.stdout).unwrap();
    let rows = check_named(&verdict, "row_count >= published.row_count");
    assert_eq!(rows["status"], "fail", "{verdict}");
    assert!(rows.to_string().contains("21"), "{rows}");
    assert_eq!(
        check_named(&verdict, "schema matches published")["status"],
        "pass"
    );
    assert_eq!(check_named(&verdict, "max(version)")["status"], "pass");

    // history(N) reads the partitions' audit records: d=1 had 21 rows.
    let out = check_against(
        &lake,
        "table t\npartitioned by d\ncheck row_count >= min(history(3).row_count)\n",
        &lake.stage("d", 4, 1),
        "2",
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("21"));

    // across published reads d=1's live files only: ids 0..10 and 0..11.
    let out = check_against(
        &lake,
        "table t\npartitioned by d\ncheck unique(id) across published\n",
        &lake.stage("e", 5, 1),
        "2",
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let verdict: Json = serde_json::from_slice(&out.stdout).unwrap();
    let across = check_named(&verdict, "across published");
    assert_eq!(across["value"], 10, "{across}");
    assert!(across.to_string().contains("\"partition\""), "{across}");

    // The same rule file publishes d=2 when it holds.
    let ok = "table t\npartitioned by d\ncheck row_count > 0\ncheck row_count <= min(history(3).row_count)\n";
    fs::write(&file, ok).unwrap();
    let out = lake
        .command(&file, &lake.stage("f", 6, 1), "2")
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(lake.log().len(), 3);
}

#[test]
fn an_existing_delta_table_is_detected_without_the_flag() {
    let lake = Lake::new();
    assert_eq!(code(&lake.publish(&lake.stage("a", 1, 1), "1")), 0);
    let out = Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .arg("publish")
        .arg(&lake.rules)
        .arg("--staged")
        .arg(lake.stage("b", 2, 1))
        .args(["--partition", "d=2", "--table"])
        .arg(lake.root())
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(lake.log().len(), 2);
    assert_eq!(lake.versions_of("2"), BTreeSet::from([2]));
}

#[test]
fn verify_finds_a_changed_file() {
    let lake = Lake::new();
    assert_eq!(code(&lake.publish(&lake.stage("a", 1, 2), "1")), 0);
    let victim = lake.files_of("1").into_iter().next().unwrap();
    write_parquet(&lake.root().join(&victim), 9, 50);
    let v = verify(&lake, "1");
    assert_eq!(code(&v), 1);
    assert!(String::from_utf8_lossy(&v.stdout).contains("NOT verified"));
}

/// Two real processes that audited against the same table version race for
/// the next log entry (each pauses after reading the table, so both have
/// read it before either commits).
fn race(lake: &Lake, a: (&Path, &str), b: (&Path, &str)) -> (Output, Output) {
    let spawn = |staged: &Path, part: &str| {
        lake.command(&lake.rules, staged, part)
            .env("DQGATE_TEST_DELTA_PAUSE_MS", "1500")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let pa = spawn(a.0, a.1);
    let pb = spawn(b.0, b.1);
    (
        pa.wait_with_output().unwrap(),
        pb.wait_with_output().unwrap(),
    )
}

#[test]
fn racing_publishers_of_one_partition_one_wins_the_other_exits_4() {
    for existing in [false, true] {
        let lake = Lake::new();
        if existing {
            assert_eq!(code(&lake.publish(&lake.stage("z", 0, 1), "1")), 0);
        }
        let before = lake.log().len();
        let (a, b) = race(
            &lake,
            (&lake.stage("a", 1, 2), "1"),
            (&lake.stage("b", 2, 2), "1"),
        );
        let mut codes = [code(&a), code(&b)];
        codes.sort();
        assert_eq!(
            codes,
            [0, 4],
            "existing table: {existing}\n{}\n{}",
            stderr(&a),
            stderr(&b)
        );
        let loser = if code(&a) == 4 { &a } else { &b };
        assert!(
            stderr(loser).contains("changed since the audit"),
            "{}",
            stderr(loser)
        );
        assert_eq!(lake.log().len(), before + 1, "exactly one commit");
        let winner = if code(&a) == 0 { 1 } else { 2 };
        assert_eq!(lake.versions_of("1"), BTreeSet::from([winner]));
        // The loser's copies were removed: only committed files (and the
        // files of earlier versions) are in the partition directory.
        let (active, _) = lake.state();
        let on_disk = glob_parquet(&lake.root().join("d=1")).len();
        let removed_earlier = usize::from(existing);
        assert_eq!(on_disk, active.len() + removed_earlier);
        assert_eq!(code(&verify(&lake, "1")), 0);
    }
}

#[test]
fn racing_publishers_of_two_partitions_both_commit() {
    let lake = Lake::new();
    assert_eq!(code(&lake.publish(&lake.stage("z", 0, 1), "0")), 0);
    let (a, b) = race(
        &lake,
        (&lake.stage("a", 1, 2), "1"),
        (&lake.stage("b", 2, 2), "2"),
    );
    assert_eq!(
        (code(&a), code(&b)),
        (0, 0),
        "{}\n{}",
        stderr(&a),
        stderr(&b)
    );
    assert_eq!(lake.log().len(), 3);
    assert_eq!(lake.versions_of("0"), BTreeSet::from([0]));
    assert_eq!(lake.versions_of("1"), BTreeSet::from([1]));
    assert_eq!(lake.versions_of("2"), BTreeSet::from([2]));
}

fn rollback(lake: &Lake, d: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .arg("rollback")
        .arg(lake.root())
        .args(["--partition", &format!("d={d}")])
        .output()
        .unwrap()
}

#[test]
fn rollback_is_a_new_commit_restoring_the_previous_files() {
    let lake = Lake::new();
    let first = lake.stage("a", 1, 2);
    assert_eq!(code(&lake.publish(&first, "1")), 0);
    assert_eq!(code(&lake.publish(&lake.stage("o", 7, 1), "2")), 0);
    let v1_files = lake.files_of("1");
    let second = lake.stage("b", 2, 3);
    assert_eq!(code(&lake.publish(&second, "1")), 0);
    let v2_files = lake.files_of("1");
    let other = lake.files_of("2");

    let out = rollback(&lake, "1");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(lake.log().len(), 4, "a new commit, no history rewritten");
    assert_eq!(lake.files_of("1"), v1_files);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([1]));
    assert_eq!(lake.files_of("2"), other);
    // The restored adds carry their stats again.
    let stats = |entry: &Vec<Json>| -> BTreeSet<String> {
        entry
            .iter()
            .filter_map(|a| a.get("add"))
            .map(|a| format!("{} {}", a["path"], a["stats"]))
            .collect()
    };
    let log = lake.log();
    assert_eq!(stats(&log[3]), stats(&log[0]));
    assert_eq!(code(&verify(&lake, "1")), 0);
    let record: Json = serde_json::from_str(
        &fs::read_to_string(lake.root().join("d=1/_dqgate_audit.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(record, log[0][0]["commitInfo"]["dqgateAudit"]);
    assert_eq!(log[3][0]["commitInfo"]["dqgateAudit"], record);
    // The txn names the restored fingerprint: re-publishing it is a no-op.
    let again = lake.publish(&first, "1");
    assert!(stderr(&again).contains("already published"));
    assert_eq!(lake.log().len(), 4);

    // A second rollback undoes the first.
    assert_eq!(code(&rollback(&lake, "1")), 0);
    assert_eq!(lake.files_of("1"), v2_files);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([2]));
    assert_eq!(code(&verify(&lake, "1")), 0);

    // One published version only: nothing to roll back (exit 2).
    let out = rollback(&lake, "2");
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("nothing to roll back"));
    assert_eq!(lake.log().len(), 5);
}

#[test]
fn partition_values_the_log_cannot_hold_as_they_are_are_refused() {
    let lake = Lake::new();
    let staged = lake.stage("a", 1, 1);
    let out = lake.publish(&staged, "2025-03-05T10:00");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("contains `:`"), "{}", stderr(&out));
    assert!(!lake.root().join("_delta_log").exists());
    // A partition column the staged files carry as a date needs a date (the
    // audit checks the run key: exit 2 before anything is scanned), and
    // keeps its type in the Delta schema.
    let rules = lake.tmp.path().join("sales.dq");
    fs::write(
        &rules,
        "table sales\npartitioned by sales_date\ncheck row_count > 0\n",
    )
    .unwrap();
    let sales = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/data/sales_ok");
    let run = |value: &str| {
        let mut cmd = lake.command(&rules, &sales, "x");
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| {
                a.to_string_lossy()
                    .replace("d=x", &format!("sales_date={value}"))
            })
            .collect();
        cmd = Command::new(cmd.get_program());
        cmd.args(args).output().unwrap()
    };
    let out = run("20250305");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not a valid Date32"),
        "{}",
        stderr(&out)
    );
    assert!(!lake.root().join("_delta_log").exists());
    let out = run("2025-03-05");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let meta = &lake.log()[0][2]["metaData"];
    let schema: Json = serde_json::from_str(meta["schemaString"].as_str().unwrap()).unwrap();
    let date = schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "sales_date")
        .unwrap();
    assert_eq!(date["type"], "date");
}

#[test]
fn a_publish_killed_before_or_after_its_commit_converges_on_retry() {
    let lake = Lake::new();
    assert_eq!(code(&lake.publish(&lake.stage("a", 1, 2), "1")), 0);
    let second = lake.stage("b", 2, 2);
    // Killed (abort, no clean-up) after copying, before the commit: the
    // table is at the old version; the copies are not in the log.
    let out = lake
        .command(&lake.rules, &second, "1")
        .env("DQGATE_TEST_CRASH_AT", "commit")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(lake.log().len(), 1);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([1]));
    assert_eq!(code(&verify(&lake, "1")), 0);
    // Killed after the commit, before the record beside the files: the new
    // version is published; the retry recognises it and writes the record.
    let third = lake.stage("c", 3, 2);
    let out = lake
        .command(&lake.rules, &third, "1")
        .env("DQGATE_TEST_CRASH_AT", "record")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(lake.log().len(), 2);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([3]));
    assert_eq!(code(&verify(&lake, "1")), 1, "the record is the old one");
    let retry = lake.publish(&third, "1");
    assert_eq!(code(&retry), 0, "{}", stderr(&retry));
    assert!(stderr(&retry).contains("already published"));
    assert_eq!(lake.log().len(), 2);
    let v = verify(&lake, "1");
    assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));
    // And the publish killed before its commit converges too.
    assert_eq!(code(&lake.publish(&second, "1")), 0);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([2]));
    assert_eq!(code(&verify(&lake, "1")), 0);
}

/// A first publish killed after its copies, before its commit (or cut off
/// there by a power loss): the root holds copies and an empty `_delta_log/`,
/// which the retry takes for a table in the making, not for a directory
/// that is neither empty nor a Delta table (it exited 2 there, forever), and
/// `gc` removes the copies no commit names.
#[test]
fn a_first_publish_killed_before_its_commit_converges_on_retry_and_gc() {
    let lake = Lake::new();
    let staged = lake.stage("a", 1, 2);
    let out = lake
        .command(&lake.rules, &staged, "1")
        .env("DQGATE_TEST_CRASH_AT", "commit")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(lake.log().is_empty());
    let orphans = files_on_disk(&lake, "1");
    assert_eq!(orphans.len(), 2, "the copies, which no commit names");
    let retry = lake.publish(&staged, "1");
    assert_eq!(code(&retry), 0, "{}", stderr(&retry));
    assert_eq!(lake.log().len(), 1);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([1]));
    let out = gc(&lake, &["--min-age", "0s"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 leftover(s) removed"));
    assert!(files_on_disk(&lake, "1").is_disjoint(&orphans));
    assert_eq!(code(&verify(&lake, "1")), 0);
}

/// A first publish killed after its commit, before it wrote the record
/// beside the files: the retry takes the record from the commit's
/// `commitInfo` (it exited 3 here, "no audit record", forever), recognises
/// its fingerprint and writes the record.
#[test]
fn a_first_publish_killed_before_its_record_converges_on_retry() {
    let lake = Lake::new();
    let staged = lake.stage("a", 1, 2);
    let out = lake
        .command(&lake.rules, &staged, "1")
        .env("DQGATE_TEST_CRASH_AT", "record")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(lake.log().len(), 1);
    assert!(!lake.root().join("d=1/_dqgate_audit.json").exists());
    let retry = lake.publish(&staged, "1");
    assert_eq!(code(&retry), 0, "{}", stderr(&retry));
    assert!(
        stderr(&retry).contains("already published"),
        "{}",
        stderr(&retry)
    );
    assert_eq!(lake.log().len(), 1);
    let v = verify(&lake, "1");
    assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));
}

#[test]
fn hive_and_delta_tables_are_never_mixed_up() {
    let lake = Lake::new();
    assert_eq!(code(&lake.publish(&lake.stage("a", 1, 1), "1")), 0);
    let staged = lake.stage("b", 2, 1);
    // A Hive swap inside a Delta table would break it.
    let out = Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .arg("publish")
        .arg(&lake.rules)
        .arg("--staged")
        .arg(&staged)
        .args(["--partition", "d=1", "--target", "hive", "--table"])
        .arg(lake.root())
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("is a Delta table"));
    assert_eq!(lake.log().len(), 1);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([1]));
    // A Delta table is never created over a Hive table's partitions.
    let hive = Lake::new();
    fs::create_dir_all(hive.root().join("d=0")).unwrap();
    let out = hive.publish(&hive.stage("a", 1, 1), "1");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("neither empty nor a Delta table"));
    assert!(!hive.root().join("_delta_log").exists());
}

#[test]
fn every_tenth_commit_writes_a_checkpoint_that_readers_and_retries_use() {
    let lake = Lake::new();
    let mut last = None;
    for v in 1..=11 {
        let staged = lake.stage(&format!("v{v}"), v, 1 + (v as usize % 2));
        let out = lake.publish(&staged, "1");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        last = Some(staged);
    }
    let log = lake.root().join("_delta_log");
    assert!(log
        .join("00000000000000000009.checkpoint.parquet")
        .is_file());
    assert!(log.join("_last_checkpoint").is_file());
    let created = lake.log()[0].clone();
    assert!(
        created.iter().any(
            |a| a.pointer("/metaData/configuration/delta.checkpointInterval")
                == Some(&Json::String("10".into()))
        ),
        "{created:?}"
    );
    // The txn of version 11 is found through the checkpoint plus one commit.
    let out = lake.publish(last.as_ref().unwrap(), "1");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already published"),
        "{}",
        stderr(&out)
    );
    assert_eq!(lake.log().len(), 11);
    assert_eq!(code(&verify(&lake, "1")), 0);
    assert_eq!(code(&rollback(&lake, "1")), 0);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([10]));
}

fn gc(lake: &Lake, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .arg("gc")
        .arg(lake.root())
        .args(extra)
        .output()
        .unwrap()
}

/// All data files under the partition directory, relative to it.
fn files_on_disk(lake: &Lake, d: &str) -> BTreeSet<String> {
    fs::read_dir(lake.root().join(format!("d={d}")))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".parquet"))
        .collect()
}

#[test]
fn gc_removes_the_copies_of_killed_publishes_and_keeps_every_file_the_log_names() {
    let lake = Lake::new();
    assert_eq!(code(&lake.publish(&lake.stage("a", 1, 2), "1")), 0);
    assert_eq!(code(&lake.publish(&lake.stage("b", 2, 1), "1")), 0);
    let named = files_on_disk(&lake, "1");
    assert_eq!(
        named.len(),
        3,
        "v1's two files (removed, kept) and v2's one"
    );
    let out = lake
        .command(&lake.rules, &lake.stage("c", 3, 2), "1")
        .env("DQGATE_TEST_CRASH_AT", "commit")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let orphans: BTreeSet<String> = files_on_disk(&lake, "1")
        .difference(&named)
        .cloned()
        .collect();
    assert_eq!(orphans.len(), 2);

    // The default minimum age (7 days) protects copies this young: they
    // could belong to a publish in flight.
    let out = gc(&lake, &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 leftover(s) removed"));
    assert_eq!(files_on_disk(&lake, "1").len(), 5);

    let out = gc(&lake, &["--min-age", "0s"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 leftover(s) removed"), "{text}");
    for o in &orphans {
        assert!(text.contains(o.as_str()), "{text}");
    }
    assert_eq!(files_on_disk(&lake, "1"), named);
    assert_eq!(lake.log().len(), 2, "gc commits nothing");
    assert_eq!(code(&verify(&lake, "1")), 0);
    // The removed version's files are still there for rollback.
    assert_eq!(code(&rollback(&lake, "1")), 0);
    assert_eq!(lake.versions_of("1"), BTreeSet::from([1]));
    assert_eq!(code(&verify(&lake, "1")), 0);

    let out = gc(&lake, &["--min-age", "soon"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}

#[test]
fn report_reads_a_delta_tables_history_from_its_snapshot_and_log() {
    let lake = Lake::new();
    let first = lake
        .command(&lake.rules, &lake.stage("a", 1, 1), "1")
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    let verdict = lake.tmp.path().join("verdict.json");
    fs::write(&verdict, &first.stdout).unwrap();
    assert_eq!(code(&lake.publish(&lake.stage("b", 2, 2), "1")), 0);
    assert_eq!(code(&lake.publish(&lake.stage("c", 3, 1), "2")), 0);
    assert_eq!(code(&rollback(&lake, "1")), 0);
    let out = Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .arg("report")
        .arg(&verdict)
        .arg("--table")
        .arg(lake.root())
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let html = String::from_utf8_lossy(&out.stdout);
    let row = |d: &str| {
        html.lines()
            .find(|l| l.starts_with(&format!("<tr><td><code>d={d}</code>")))
            .unwrap_or_else(|| panic!("no row for d={d} in {html}"))
            .to_string()
    };
    // d=1: published twice, rolled back once, now version 1 (10 rows).
    assert!(
        row("1").ends_with("<td class=\"num\">2</td><td class=\"num\">1</td></tr>"),
        "{}",
        row("1")
    );
    assert!(
        row("1").contains("<td class=\"num\">10</td>"),
        "{}",
        row("1")
    );
    assert!(
        row("2").ends_with("<td class=\"num\">1</td><td class=\"num\">0</td></tr>"),
        "{}",
        row("2")
    );
}

/// The key index files in partition `d` of the lake.
fn key_indexes_of(lake: &Lake, d: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(lake.root().join(format!("d={d}")))
        .unwrap()
        .flatten()
        .map(|e| e.path())
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

/// `check unique(version) across published` of `staged` as `d=9` against
/// the lake, with `-v`: its checks (JSON) and its log; `grouped` runs the
/// grouped DataFusion join instead of the key engine and the indexes.
fn across_check(lake: &Lake, staged: &Path, grouped: bool) -> (Json, String) {
    let file = lake.tmp.path().join("across-check.dq");
    fs::write(
        &file,
        "table t\npartitioned by d\ncheck unique(version) across published\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dqgate"));
    cmd.arg("check")
        .arg(&file)
        .arg("--staged")
        .arg(staged)
        .args(["--partition", "d=9", "--format", "json", "-v", "--table"])
        .arg(lake.root());
    if grouped {
        cmd.env("DQGATE_TEST_KEY_STRATEGY", "grouped");
    }
    let out = cmd.output().unwrap();
    let verdict: Json = serde_json::from_slice(&out.stdout).unwrap();
    (verdict["checks"].clone(), stderr(&out))
}

#[test]
fn key_indexes_beside_delta_versions_answer_across_published() {
    let lake = Lake::new();
    let rules = lake.tmp.path().join("across.dq");
    let text =
        "table t\npartitioned by d\ncheck row_count > 0\nwarn unique(version) across published\n";
    fs::write(&rules, text).unwrap();
    for d in 1..=3i64 {
        let staged = lake.stage(&format!("s{d}"), d * 10, 2);
        let out = lake
            .command(&rules, &staged, &d.to_string())
            .output()
            .unwrap();
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(key_indexes_of(&lake, &d.to_string()).len(), 1, "d={d}");
        let v = verify(&lake, &d.to_string());
        assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));
    }
    let staged = lake.stage("new", 20, 1);
    let used = "look them up in the key indexes of";
    let same = |why: Option<&str>| {
        let (grouped, _) = across_check(&lake, &staged, true);
        let (got, log) = across_check(&lake, &staged, false);
        assert_eq!(got, grouped, "{log}");
        assert!(log.contains(used), "{log}");
        if let Some(why) = why {
            assert!(log.contains(why), "{log}");
        }
        got
    };
    let got = same(None);
    assert_eq!(got[0]["value"], 1, "{got}");

    // d=1 published again with the staged key: the new version's index
    // has a name of its own beside the first version's, and the commit
    // makes it the partition's.
    let first = key_indexes_of(&lake, "1");
    let again = lake.stage("again", 20, 1);
    let out = lake.command(&rules, &again, "1").output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(key_indexes_of(&lake, "1").len(), 2);
    let v = verify(&lake, "1");
    assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));
    let got = same(None);
    assert!(
        got.to_string().contains("d=1") && got.to_string().contains("d=2"),
        "{got}"
    );

    // Rolled back: d=1's files are the first version's again, the undone
    // version's index is gone, and the first version's serves again.
    assert_eq!(code(&rollback(&lake, "1")), 0);
    assert_eq!(key_indexes_of(&lake, "1"), first);
    let v = verify(&lake, "1");
    assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));
    let got = same(None);
    assert!(!got.to_string().contains("d=1"), "{got}");

    // Published again, `gc`, and rolled back once more: `gc` keeps the
    // first version's index (a commit's record lists it and its files are
    // all there), so the restored record lists it and d=1 is read through
    // it again.
    let out = lake.command(&rules, &again, "1").output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let swept = gc(&lake, &["--min-age", "0s"]);
    assert_eq!(code(&swept), 0, "{}", stderr(&swept));
    let current = key_indexes_of(&lake, "1");
    assert_eq!(
        current.len(),
        2,
        "{}",
        String::from_utf8_lossy(&swept.stdout)
    );
    assert_eq!(code(&rollback(&lake, "1")), 0);
    assert_eq!(key_indexes_of(&lake, "1"), first);
    let v = verify(&lake, "1");
    assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));
    let got = same(None);
    assert!(!got.to_string().contains("d=1"), "{got}");

    // Published again, and the first version's files removed as a Delta
    // VACUUM would: no rollback can restore it, and `gc` removes its index
    // (only it: the current version's stays).
    let out = lake.command(&rules, &again, "1").output().unwrap();
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let dir = lake.root().join("d=1");
    let listed = |name: &str| {
        let record: Json =
            serde_json::from_str(&fs::read_to_string(dir.join("_dqgate_audit.json")).unwrap())
                .unwrap();
        record["published"][name].clone()
    };
    let current_files = listed("files").to_string();
    for e in fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".parquet") && !current_files.contains(&name) {
            fs::remove_file(dir.join(name)).unwrap();
        }
    }
    let swept = gc(&lake, &["--min-age", "0s"]);
    assert_eq!(code(&swept), 0, "{}", stderr(&swept));
    let left = key_indexes_of(&lake, "1");
    assert_eq!(left.len(), 1, "{}", String::from_utf8_lossy(&swept.stdout));
    assert_ne!(left, first);
    assert!(listed("key_indexes")
        .to_string()
        .contains(left[0].file_name().unwrap().to_str().unwrap()));
    let v = verify(&lake, "1");
    assert_eq!(code(&v), 0, "{}", String::from_utf8_lossy(&v.stdout));

    // A changed index: `verify` says so, and it is never trusted.
    let index = key_indexes_of(&lake, "2").pop().unwrap();
    let mut bytes = fs::read(&index).unwrap();
    let at = bytes.len() - 2;
    bytes[at] ^= 4;
    fs::write(&index, &bytes).unwrap();
    let v = verify(&lake, "2");
    assert_eq!(code(&v), 1);
    assert!(String::from_utf8_lossy(&v.stdout).contains("changed: key index"));
    let (grouped, _) = across_check(&lake, &staged, true);
    let (got, log) = across_check(&lake, &staged, false);
    assert_eq!(got, grouped, "{log}");
}

/// Two publishers of one partition race with key indexes: each writes its
/// index before its commit, under a name of its own, so the loser neither
/// replaces nor removes the winner's. The winner's partition verifies, its
/// index answers `across published`, and the loser's is gone.
#[test]
fn a_losing_publisher_leaves_the_winners_key_index_alone() {
    let lake = Lake::new();
    let rules = lake.tmp.path().join("across.dq");
    let text =
        "table t\npartitioned by d\ncheck row_count > 0\nwarn unique(version) across published\n";
    fs::write(&rules, text).unwrap();
    let first = lake.stage("z", 5, 1);
    assert_eq!(
        code(&lake.command(&rules, &first, "1").output().unwrap()),
        0
    );
    let other = lake.stage("o", 7, 1);
    assert_eq!(
        code(&lake.command(&rules, &other, "2").output().unwrap()),
        0
    );
    for round in 0..3 {
        let spawn = |staged: &Path| {
            lake.command(&rules, staged, "1")
                .env("DQGATE_TEST_DELTA_PAUSE_MS", "1500")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let a = lake.stage(&format!("a{round}"), 100 + round, 2);
        let b = lake.stage(&format!("b{round}"), 200 + round, 2);
        let (pa, pb) = (spawn(&a), spawn(&b));
        let (a, b) = (
            pa.wait_with_output().unwrap(),
            pb.wait_with_output().unwrap(),
        );
        let mut codes = [code(&a), code(&b)];
        codes.sort();
        assert_eq!(codes, [0, 4], "{}\n{}", stderr(&a), stderr(&b));
        let v = verify(&lake, "1");
        assert_eq!(
            code(&v),
            0,
            "round {round}: {}",
            String::from_utf8_lossy(&v.stdout)
        );
        let winner = if code(&a) == 0 {
            100 + round
        } else {
            200 + round
        };
        assert_eq!(lake.versions_of("1"), BTreeSet::from([winner]));
        // The first version's index, and the winner's: the loser's went
        // with its copies.
        assert_eq!(key_indexes_of(&lake, "1").len(), 2 + round as usize);
        let staged = lake.stage(&format!("n{round}"), winner, 1);
        let (grouped, _) = across_check(&lake, &staged, true);
        let (got, log) = across_check(&lake, &staged, false);
        assert_eq!(got, grouped, "{log}");
        assert!(log.contains("look them up in the key indexes of"), "{log}");
        assert!(!log.contains("have no key index"), "{log}");
        assert!(got.to_string().contains("d=1"), "{got}");
    }
    // `gc` keeps them all: each is a committed version's whose files are
    // all still there, which `rollback` could restore.
    let swept = gc(&lake, &["--min-age", "0s"]);
    assert_eq!(code(&swept), 0, "{}", stderr(&swept));
    assert_eq!(key_indexes_of(&lake, "1").len(), 4);
    assert_eq!(code(&verify(&lake, "1")), 0);
}
