//! Concurrency in-process: two publishers racing for one partition, and
//! readers of both kinds while versions are swapped.

use std::fs::File;
use std::path::Path;
use std::thread;

use dqgate::publish::{PublishOptions, PublishOutcome};
use rustix::fs::{openat, Mode, OFlags};

use crate::common::*;

#[test]
fn two_publishers_exactly_one_wins_each_round() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    for round in 0..20i64 {
        let a = env.stage(&format!("a{round}"), 2 * round, 2);
        let b = env.stage(&format!("b{round}"), 2 * round + 1, 2);
        let cur = env.table.current(&k).unwrap().map(|c| c.fingerprint);
        let results: [_; 2] = thread::scope(|s| {
            [a.clone(), b.clone()]
                .map(|staged| {
                    let (table, k, cur) = (&env.table, &k, cur.clone());
                    s.spawn(move || {
                        table.publish(
                            k,
                            &staged,
                            &passed(&staged),
                            cur.as_deref(),
                            &PublishOptions::default(),
                        )
                    })
                })
                .map(|h| h.join().unwrap())
        });
        let wins = results
            .iter()
            .filter(|r| matches!(r, Ok(PublishOutcome::Published { .. })))
            .count();
        for r in &results {
            if let Err(e) = r {
                assert_eq!(e.exit_code(), 4, "{e}");
            }
        }
        assert_eq!(wins, 1, "round {round}: {results:?}");
        let seen = read_partition(&env.root().join("d=1"));
        assert!(
            seen == [2 * round].into() || seen == [2 * round + 1].into(),
            "{seen:?}"
        );
        assert_only_published(env.root());
    }
}

/// Resolves the partition once: opens the directory, then reads the record
/// and the files it lists relative to that directory.
pub fn read_resolved_once(part: &Path) -> Option<Result<std::collections::BTreeSet<i64>, String>> {
    let dir = File::open(part).ok()?;
    let open = |name: &str| -> Result<File, String> {
        openat(&dir, name, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
            .map(File::from)
            .map_err(|e| format!("{name}: {e}"))
    };
    let record = match std::io::read_to_string(open("_dqgate_audit.json").ok()?) {
        Ok(r) => r,
        Err(e) => return Some(Err(e.to_string())),
    };
    let json: serde_json::Value = serde_json::from_str(&record).unwrap();
    let mut files = Vec::new();
    for f in json["published"]["files"].as_array().unwrap() {
        match open(f["path"].as_str().unwrap()) {
            Ok(file) => files.push(file),
            Err(e) => return Some(Err(e)),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for f in files {
        seen.extend(read_versions(f).unwrap());
    }
    Some(Ok(seen))
}

#[test]
fn readers_see_one_version_while_versions_are_swapped() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    env.publish_version(&k, 0, &PublishOptions::default());
    let (resolved, listed, missing) = with_readers(env.root(), || {
        // Keep every version: a displaced version is deleted only when it
        // falls out of the kept count, and a reader slower than that many
        // publishes could lose its files (the grace is by count, not time).
        for v in 1..=40 {
            env.publish_version(&k, v, &PublishOptions { keep_versions: 64 });
        }
    });
    println!(
        "readers: {resolved} resolve-once reads, {listed} listing reads, {missing} listing reads hit a swapped-out file (retryable)"
    );
}
