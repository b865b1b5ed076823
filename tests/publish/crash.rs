//! Crash safety: a child process (this test binary, re-executed) publishes
//! (with a read set, so the table lock and the validation are among the
//! steps) or rolls back and aborts at the start of each step
//! (`DQGATE_TEST_CRASH_AT`, no clean-up runs, like SIGKILL). After each crash the partition must be
//! the old or the new version, complete; nothing but published files may
//! match `ROOT/**/*.parquet`; and `gc` or the next publish must converge.

use std::path::{Path, PathBuf};
use std::process::Command;

use dqgate::publish::{PublishOptions, PublishOutcome, ReadSet, Table};

use crate::common::*;

const PUBLISH_PHASES: &[&str] = &[
    "lock", "journal", "rename", "fsync", "record", "recheck", "validate", "compare", "swap",
    "displace", "prune", "commit", "done",
];
const ROLLBACK_PHASES: &[&str] = &["journal", "swap", "displace", "commit", "done"];

/// The child: does one publish or rollback described by the environment;
/// a no-op when run as an ordinary test.
#[test]
fn crash_child() {
    let Some(root) = std::env::var_os("DQGATE_CHILD_ROOT") else {
        return;
    };
    let table = Table::open(Path::new(&root)).unwrap();
    let k = key(&[("d", "1")]);
    match std::env::var_os("DQGATE_CHILD_STAGED") {
        Some(staged) => {
            let staged = PathBuf::from(staged);
            let cur = table.current(&k).unwrap().map(|c| c.fingerprint);
            let opts = PublishOptions { keep_versions: 1 };
            // An audit that read the table (as `across published` does), so
            // that the swap validates a read set under the table lock.
            let read = ReadSet {
                reads: vec!["line 3: unique(id) across published".into()],
                partitions: table.snapshot(&["d".into()]).unwrap().versions("d=1"),
                table_version: None,
            };
            table
                .publish_read(
                    &k,
                    &staged,
                    &passed(&staged),
                    cur.as_deref(),
                    &read,
                    &[],
                    &opts,
                )
                .unwrap();
        }
        None => {
            table.rollback(&k).unwrap();
        }
    }
}

fn run_child(root: &Path, staged: Option<&Path>, crash_at: &str) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "crash::crash_child",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("DQGATE_CHILD_ROOT", root)
    .env("DQGATE_TEST_CRASH_AT", crash_at)
    .env_remove("DQGATE_CHILD_STAGED");
    if let Some(s) = staged {
        cmd.env("DQGATE_CHILD_STAGED", s);
    }
    let out = cmd.output().unwrap();
    let aborted = !out.status.success();
    assert!(
        aborted || crash_at == "none",
        "child did not crash at {crash_at}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The partition holds exactly one complete version; returns it.
fn one_complete_version(part: &Path) -> i64 {
    let seen = read_partition(part);
    assert_eq!(seen.len(), 1, "{seen:?}");
    *seen.iter().next().unwrap()
}

fn crash_publish_at(phase: &str, replace: bool, recover_with_gc: bool) {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let part = env.root().join("d=1");
    if replace {
        env.publish_version(&k, 1, &PublishOptions::default());
    }
    let staged = env.stage("s2", 2, 3);
    let audited = passed(&staged);
    run_child(env.root(), Some(&staged), phase);

    let swapped = PUBLISH_PHASES.iter().position(|p| *p == phase).unwrap()
        > PUBLISH_PHASES.iter().position(|p| *p == "swap").unwrap();
    if replace || swapped {
        let v = one_complete_version(&part);
        assert_eq!(v, if swapped { 2 } else { 1 }, "crash at {phase}");
    } else {
        assert!(
            !part.exists(),
            "crash at {phase}: a first publish left a partition"
        );
    }
    assert_only_published(env.root());

    assert_eq!(
        staged.exists(),
        !swapped || phase == "displace" && replace,
        "crash at {phase}"
    );
    if recover_with_gc {
        env.table.gc().unwrap();
        assert!(!env.root().join("_dqgate/tx/d=1.json").exists());
        if !swapped {
            assert_eq!(
                passed(&staged).input.fingerprint,
                audited.input.fingerprint,
                "crash at {phase}: gc restores the staged files as audited"
            );
        }
    }
    // Re-running the pipeline converges: the producer stages the same files
    // again if the swap took them, and publish runs with the same verdict.
    // Re-running the pipeline converges. After the swap the producer stages
    // the same files again (in a fresh staging directory: the old path may
    // still hold the displaced version until recovery moves it).
    let (staged, audited) = if swapped {
        let again = env.stage("s2-again", 2, 3);
        let audited = passed(&again);
        (again, audited)
    } else {
        (staged.clone(), audited)
    };
    let cur = env.table.current(&k).unwrap().map(|c| c.fingerprint);
    let out = env
        .table
        .publish(
            &k,
            &staged,
            &audited,
            cur.as_deref(),
            &PublishOptions::default(),
        )
        .unwrap();
    assert!(
        !env.tmp.path().join("staging/s2").exists() || !swapped,
        "crash at {phase}: the displaced version was left at the staged path"
    );
    match out {
        PublishOutcome::Published { .. } => assert!(!swapped, "crash at {phase}"),
        PublishOutcome::AlreadyPublished { .. } => assert!(swapped, "crash at {phase}"),
    }
    assert_eq!(one_complete_version(&part), 2);
    assert!(env.table.verify(&k).unwrap().differences.is_empty());
    assert_eq!(
        kept_dirs(&env, "d=1").len(),
        usize::from(replace),
        "crash at {phase}"
    );
    assert_only_published(env.root());
    assert!(env
        .table
        .gc()
        .unwrap()
        .iter()
        .all(|d| !d.contains("interrupted")));
}

#[test]
fn publish_killed_at_every_step_of_a_first_publish() {
    for (i, phase) in PUBLISH_PHASES.iter().enumerate() {
        crash_publish_at(phase, false, i % 2 == 0);
    }
}

#[test]
fn publish_killed_at_every_step_of_a_replacement() {
    for (i, phase) in PUBLISH_PHASES.iter().enumerate() {
        crash_publish_at(phase, true, i % 2 == 1);
        crash_publish_at(phase, true, i % 2 == 0);
    }
}

#[test]
fn rollback_killed_at_every_step() {
    for phase in ROLLBACK_PHASES {
        let env = Env::new();
        let k = key(&[("d", "1")]);
        let part = env.root().join("d=1");
        env.publish_version(&k, 1, &PublishOptions::default());
        env.publish_version(&k, 2, &PublishOptions::default());
        run_child(env.root(), None, phase);
        let v = one_complete_version(&part);
        let swapped = !matches!(*phase, "journal" | "swap");
        assert_eq!(v, if swapped { 1 } else { 2 }, "crash at {phase}");
        assert_only_published(env.root());
        env.table.gc().unwrap();
        let kept = kept_dirs(&env, "d=1");
        assert_eq!(kept.len(), 1, "crash at {phase}: {kept:?}");
        assert_eq!(read_partition(&kept[0]), [3 - v].into_iter().collect());
        assert!(env.table.verify(&k).unwrap().differences.is_empty());
        // And a rollback after recovery works.
        env.table.rollback(&k).unwrap();
        assert_eq!(one_complete_version(&part), 3 - v);
    }
}
