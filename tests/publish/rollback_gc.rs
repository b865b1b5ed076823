//! Kept versions: pruning to `keep_versions`, rollback, and `gc` of what a
//! killed process left.

use std::fs;

use dqgate::publish::{PublishError, PublishOptions, PublishOutcome};

use crate::common::*;

#[test]
fn keeps_n_displaced_versions_and_prunes_older() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let opts = PublishOptions { keep_versions: 2 };
    let mut versions = Vec::new();
    for v in 1..=5 {
        let PublishOutcome::Published { version, .. } = env.publish_version(&k, v, &opts) else {
            panic!()
        };
        versions.push(version);
    }
    let kept = kept_dirs(&env, "d=1");
    assert_eq!(kept.len(), 2, "{kept:?}");
    assert_eq!(read_partition(&kept[0]), [3].into_iter().collect());
    assert_eq!(read_partition(&kept[1]), [4].into_iter().collect());
    let none = PublishOptions { keep_versions: 0 };
    env.publish_version(&k, 6, &none);
    assert!(kept_dirs(&env, "d=1").is_empty());
    assert_only_published(env.root());
}

#[test]
fn rollback_swaps_the_last_displaced_version_back() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let part = env.root().join("d=1");
    let opts = PublishOptions::default();
    let PublishOutcome::Published { version: v1, .. } = env.publish_version(&k, 1, &opts) else {
        panic!()
    };
    let PublishOutcome::Published { version: v2, .. } = env.publish_version(&k, 2, &opts) else {
        panic!()
    };
    assert_eq!(env.table.rollback(&k).unwrap(), v1);
    assert_eq!(env.table.current(&k).unwrap().unwrap().version, v1);
    assert_eq!(read_partition(&part), [1].into_iter().collect());
    assert!(env.table.verify(&k).unwrap().differences.is_empty());
    assert_only_published(env.root());
    assert_eq!(kept_dirs(&env, "d=1").len(), 1);
    // A second rollback undoes the first.
    assert_eq!(env.table.rollback(&k).unwrap(), v2);
    assert_eq!(read_partition(&part), [2].into_iter().collect());
    // Publishing after a rollback never reuses a kept version's names.
    let PublishOutcome::Published { version: v3, .. } = env.publish_version(&k, 3, &opts) else {
        panic!()
    };
    assert!(v3.starts_with("v3-"), "{v3}");
    assert_only_published(env.root());
}

#[test]
fn rollback_with_nothing_kept_is_refused() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let err = env.table.rollback(&k).unwrap_err();
    assert!(
        matches!(err, PublishError::NothingToRollBack { .. }),
        "{err}"
    );
    assert_eq!(err.exit_code(), 2);
    env.publish_version(&k, 1, &PublishOptions::default());
    assert_eq!(env.table.rollback(&k).unwrap_err().exit_code(), 2);
}

#[test]
fn gc_removes_stale_locks_and_trash() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    env.publish_version(&k, 1, &PublishOptions::default());
    let lock = env.root().join("_dqgate/locks/d=1.lock");
    assert!(lock.exists());
    let trash = env
        .tmp
        .path()
        .join(".table.dqgate/trash/d=1/000001.v9-deadbeef");
    fs::create_dir_all(&trash).unwrap();
    fs::write(trash.join("x.parquet"), b"half deleted").unwrap();
    let done = env.table.gc().unwrap();
    assert!(!lock.exists(), "{done:?}");
    assert!(!trash.exists(), "{done:?}");
    // A publish after gc still works (the lock file is recreated).
    env.publish_version(&k, 2, &PublishOptions::default());
    assert_only_published(env.root());
}

#[test]
fn the_audit_trail_records_publishes_and_rollbacks_in_order() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let mut versions = Vec::new();
    for v in 1..=2 {
        let PublishOutcome::Published { version, .. } =
            env.publish_version(&k, v, &PublishOptions::default())
        else {
            panic!()
        };
        versions.push(version);
    }
    let restored = env.table.rollback(&k).unwrap();
    assert_eq!(restored, versions[0]);
    let trail = fs::read_to_string(env.root().join("_dqgate/trail/d=1.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = trail
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary: Vec<(String, String, Option<String>)> = lines
        .iter()
        .map(|l| {
            (
                l["action"].as_str().unwrap().to_string(),
                l["version"].as_str().unwrap().to_string(),
                l["displaced"].as_str().map(String::from),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("publish".into(), versions[0].clone(), None),
            (
                "publish".into(),
                versions[1].clone(),
                Some(versions[0].clone())
            ),
            (
                "rollback".into(),
                versions[0].clone(),
                Some(versions[1].clone())
            ),
        ]
    );
    assert_only_published(env.root());
}
