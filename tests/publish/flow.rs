//! Publish: first publish, replacement, unique names, gate checks (staged
//! changed, compare-and-swap, lock), idempotence, other file system.

use std::fs;

use dqgate::publish::{PublishError, PublishOptions, PublishOutcome};

use crate::common::*;

fn opts() -> PublishOptions {
    PublishOptions::default()
}

#[test]
fn first_publish_makes_the_staged_files_the_partition() {
    let env = Env::new();
    let k = key(&[("d", "2025-03-04")]);
    let staged = env.stage("a", 1, 2);
    let passed = passed(&staged);
    let out = env
        .table
        .publish(&k, &staged, &passed, None, &opts())
        .unwrap();
    let PublishOutcome::Published { version, displaced } = out else {
        panic!("{out:?}")
    };
    assert_eq!(displaced, None);
    let part = env.root().join("d=2025-03-04");
    let names = manifest_names(&part);
    assert_eq!(
        names,
        [
            format!("part-00000.{version}.parquet"),
            format!("part-00001.{version}.parquet")
        ]
        .into_iter()
        .collect()
    );
    assert_eq!(read_partition(&part), [1].into_iter().collect());
    assert!(
        !staged.exists(),
        "the staged directory was renamed into place"
    );
    let cur = env.table.current(&k).unwrap().unwrap();
    assert_eq!(cur.version, version);
    assert_eq!(cur.fingerprint, passed.input.fingerprint);
    assert_eq!(cur.dir, part);
    assert!(env.table.verify(&k).unwrap().differences.is_empty());
    assert_only_published(env.root());
}

#[test]
fn two_level_run_key() {
    let env = Env::new();
    let k = key(&[("region", "eu"), ("d", "1")]);
    env.publish_version(&k, 1, &opts());
    env.publish_version(&k, 2, &opts());
    assert_eq!(
        read_partition(&env.root().join("region=eu/d=1")),
        [2].into_iter().collect()
    );
    assert_eq!(kept_dirs(&env, "region=eu/d=1").len(), 1);
    assert_only_published(env.root());
}

#[test]
fn replacement_swaps_versions_with_unique_names() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let part = env.root().join("d=1");
    let mut seen_names = Vec::new();
    let mut previous = None;
    for v in 1..=4 {
        let out = env.publish_version(&k, v, &opts());
        let PublishOutcome::Published { version, displaced } = out else {
            panic!("{out:?}")
        };
        assert_eq!(displaced, previous);
        let names = manifest_names(&part);
        for old in &seen_names {
            assert!(
                names.is_disjoint(old),
                "a name was reused: {names:?} vs {old:?}"
            );
        }
        assert_eq!(read_partition(&part), [v].into_iter().collect());
        assert_only_published(env.root());
        seen_names.push(names);
        previous = Some(version);
    }
    // The displaced versions are kept whole, beside ROOT.
    let kept = kept_dirs(&env, "d=1");
    assert_eq!(kept.len(), 3);
    assert_eq!(
        read_partition(kept.last().unwrap()),
        [3].into_iter().collect()
    );
}

#[test]
fn staged_files_changed_since_audit_exit_4_and_nothing_published() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    env.publish_version(&k, 1, &opts());
    let staged = env.stage("b", 2, 2);
    let audited = passed(&staged);
    write_parquet(&staged.join("part-00001.parquet"), 99, 3); // rewritten after the audit
    let cur = env.table.current(&k).unwrap().unwrap();
    let err = env
        .table
        .publish(&k, &staged, &audited, Some(&cur.fingerprint), &opts())
        .unwrap_err();
    assert!(matches!(err, PublishError::StagedChanged { .. }), "{err}");
    assert_eq!(err.exit_code(), 4);
    assert_eq!(env.table.current(&k).unwrap().unwrap(), cur);
    assert_eq!(read_partition(&cur.dir), [1].into_iter().collect());
    // A file added after the audit is a change too.
    let staged = env.stage("c", 3, 1);
    let audited = passed(&staged);
    write_parquet(&staged.join("part-extra.parquet"), 3, 1);
    let err = env
        .table
        .publish(&k, &staged, &audited, Some(&cur.fingerprint), &opts())
        .unwrap_err();
    assert_eq!(err.exit_code(), 4, "{err}");
    assert!(
        staged.join("part-00000.parquet").exists(),
        "staged files keep their names"
    );
    assert_only_published(env.root());
}

#[test]
fn compare_and_swap_mismatch_exit_4() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let s1 = env.stage("a", 1, 1);
    let s2 = env.stage("b", 2, 1);
    let (p1, p2) = (passed(&s1), passed(&s2));
    // Both audited against "nothing published"; the first wins.
    env.table.publish(&k, &s1, &p1, None, &opts()).unwrap();
    let err = env.table.publish(&k, &s2, &p2, None, &opts()).unwrap_err();
    assert!(
        matches!(err, PublishError::PublishedChanged { .. }),
        "{err}"
    );
    assert_eq!(err.exit_code(), 4);
    let err = env
        .table
        .publish(&k, &s2, &p2, Some("sha256:someotherversion"), &opts())
        .unwrap_err();
    assert_eq!(err.exit_code(), 4);
    assert_eq!(
        read_partition(&env.root().join("d=1")),
        [1].into_iter().collect()
    );
    assert!(s2.join("part-00000.parquet").exists());
}

#[test]
fn lock_contention_exit_4() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let lock_path = env.root().join("_dqgate/locks/d=1.lock");
    fs::create_dir_all(lock_path.parent().unwrap()).unwrap();
    let held = fs::File::create(&lock_path).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let staged = env.stage("a", 1, 1);
    let passed = passed(&staged);
    let err = env
        .table
        .publish(&k, &staged, &passed, None, &opts())
        .unwrap_err();
    assert!(matches!(err, PublishError::Busy { .. }), "{err}");
    assert_eq!(err.exit_code(), 4);
    assert_eq!(env.table.current(&k).unwrap(), None);
    drop(held);
    env.table
        .publish(&k, &staged, &passed, None, &opts())
        .unwrap();
}

#[test]
fn republishing_the_same_files_is_a_no_op() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let a = env.stage("a", 7, 2);
    let b = env.stage("b", 7, 2); // same names, same bytes
    let (pa, pb) = (passed(&a), passed(&b));
    assert_eq!(pa.input.fingerprint, pb.input.fingerprint);
    let PublishOutcome::Published { version, .. } =
        env.table.publish(&k, &a, &pa, None, &opts()).unwrap()
    else {
        panic!()
    };
    let fp = pa.input.fingerprint.clone();
    let out = env.table.publish(&k, &b, &pb, Some(&fp), &opts()).unwrap();
    assert_eq!(out, PublishOutcome::AlreadyPublished { version });
    assert!(
        b.join("part-00000.parquet").exists(),
        "a no-op touches nothing"
    );
    assert!(kept_dirs(&env, "d=1").is_empty());
}

#[test]
fn hidden_parquet_files_in_staging_are_refused() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let staged = env.stage("a", 1, 1);
    let passed = passed(&staged);
    fs::create_dir_all(staged.join("_temporary")).unwrap();
    write_parquet(&staged.join("_temporary/part-9.parquet"), 1, 1);
    let err = env
        .table
        .publish(&k, &staged, &passed, None, &opts())
        .unwrap_err();
    assert!(
        matches!(err, PublishError::UnpublishableStaged { .. }),
        "{err}"
    );
    assert_eq!(err.exit_code(), 2);
    assert_eq!(env.table.current(&k).unwrap(), None);
}

/// Spark's `_SUCCESS` and Hadoop's `.crc` sidecars stay out of the
/// published partition (a `.crc` would name a file renamed away), while the
/// staged files' hidden directories and the audit record are untouched.
#[test]
fn writer_byproducts_are_not_published() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    let staged = env.stage("a", 1, 2);
    fs::create_dir_all(staged.join("g=1")).unwrap();
    write_parquet(&staged.join("g=1/part-00000.parquet"), 1, 1);
    for f in [
        "_SUCCESS",
        "._SUCCESS.crc",
        ".part-00000.parquet.crc",
        "g=1/.part-00000.parquet.crc",
    ] {
        fs::write(staged.join(f), b"crc").unwrap();
    }
    let passed = passed(&staged);
    env.table
        .publish(&k, &staged, &passed, None, &opts())
        .unwrap();
    let part = env.root().join("d=1");
    let mut left: Vec<String> = walkdir(&part)
        .into_iter()
        .filter(|n| !n.ends_with(".parquet"))
        .collect();
    left.sort();
    assert_eq!(left, ["_dqgate_audit.json"]);
    assert_eq!(manifest_names(&part).len(), 3);
    assert!(env.table.verify(&k).unwrap().differences.is_empty());
}

fn walkdir(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(walkdir(&e.path()));
        } else {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

#[test]
fn partition_dir_without_record_is_exit_3() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    stage_into(&env.root().join("d=1"), 1, 1);
    let err = env.table.current(&k).unwrap_err();
    assert!(matches!(err, PublishError::MissingRecord { .. }), "{err}");
    assert_eq!(err.exit_code(), 3);
    let staged = env.stage("a", 2, 1);
    let err = env
        .table
        .publish(&k, &staged, &passed(&staged), None, &opts())
        .unwrap_err();
    assert_eq!(err.exit_code(), 3);
    fs::write(env.root().join("d=1/_dqgate_audit.json"), "{not json").unwrap();
    let err = env.table.current(&k).unwrap_err();
    assert!(matches!(err, PublishError::BadRecord { .. }), "{err}");
    assert_eq!(err.exit_code(), 3);
}

#[test]
fn staged_dir_on_another_file_system_is_refused() {
    let env = Env::new();
    let shm = std::path::Path::new("/dev/shm");
    let other = shm
        .is_dir()
        .then(|| tempfile::tempdir_in(shm).ok())
        .flatten();
    let dev = |p: &std::path::Path| std::os::unix::fs::MetadataExt::dev(&fs::metadata(p).unwrap());
    let Some(other) = other.filter(|o| dev(o.path()) != dev(env.tmp.path())) else {
        println!(
            "NOTE: no second file system (tried /dev/shm); other-file-system refusal not exercised"
        );
        return;
    };
    let staged = other.path().join("staged");
    stage_into(&staged, 1, 1);
    let k = key(&[("d", "1")]);
    let err = env
        .table
        .publish(&k, &staged, &passed(&staged), None, &opts())
        .unwrap_err();
    assert!(matches!(err, PublishError::OtherFileSystem { .. }), "{err}");
    assert_eq!(err.exit_code(), 2);
    assert!(staged.join("part-00000.parquet").exists());
    assert_eq!(env.table.current(&k).unwrap(), None);
}

#[test]
fn staged_inside_the_partition_is_refused() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    env.publish_version(&k, 1, &opts());
    let inside = env.root().join("d=1/sub");
    stage_into(&inside, 2, 1);
    let cur = env.table.current(&k).unwrap().unwrap();
    let err = env
        .table
        .publish(
            &k,
            &inside,
            &passed(&inside),
            Some(&cur.fingerprint),
            &opts(),
        )
        .unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
}

#[test]
fn every_error_variant_has_its_exit_code_and_message() {
    let io = || std::io::Error::from_raw_os_error(22);
    let cases: Vec<(PublishError, u8, &str)> = vec![
        (PublishError::Refused("no".into()), 2, "no"),
        (
            PublishError::OtherFileSystem {
                staged: "/s".into(),
                root: "/r".into(),
            },
            2,
            "different file systems",
        ),
        (
            PublishError::NoAtomicSwap {
                path: "/r".into(),
                flag: "RENAME_EXCHANGE",
                source: io(),
            },
            2,
            "cannot swap directories atomically",
        ),
        (
            PublishError::UnpublishableStaged {
                staged: "/s".into(),
                detail: "x".into(),
            },
            2,
            "cannot be published",
        ),
        (
            PublishError::NothingToRollBack {
                partition: "d=1".into(),
                detail: "none".into(),
            },
            2,
            "nothing to roll back",
        ),
        (
            PublishError::MissingRecord {
                dir: "/r/d=1".into(),
            },
            3,
            "no audit record",
        ),
        (
            PublishError::NotPublished {
                dir: "/r/d=2".into(),
            },
            3,
            "nothing is published",
        ),
        (
            PublishError::BadRecord {
                path: "/r".into(),
                reason: "eof".into(),
            },
            3,
            "unreadable",
        ),
        (
            PublishError::Input(dqgate::staged::InputError::MissingDir("/s".into())),
            3,
            "does not exist",
        ),
        (
            PublishError::Io {
                action: "cannot rename",
                path: "/x".into(),
                source: io(),
            },
            3,
            "cannot rename `/x`",
        ),
        (
            PublishError::Busy {
                partition: "d=1".into(),
            },
            4,
            "in progress",
        ),
        (
            PublishError::StagedChanged {
                audited: "a".into(),
                now: "b".into(),
            },
            4,
            "changed after the audit",
        ),
        (
            PublishError::PublishedChanged {
                expected: None,
                found: Some("f".into()),
            },
            4,
            "nothing published, now f",
        ),
    ];
    for (e, code, text) in cases {
        assert_eq!(e.exit_code(), code, "{e}");
        assert!(e.to_string().contains(text), "{e}");
    }
}
