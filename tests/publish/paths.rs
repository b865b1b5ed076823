//! Security of paths: run-key values, staged paths and links can never make
//! `publish` (or `gc`, `rollback`) write or delete outside ROOT, its kept
//! area and the staging area.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::*;

/// Every path under `dir` (not following links).
fn tree(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            out.insert(p.strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out
}

fn dqgate(cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_dqgate"))
        .args(args)
        .current_dir(cwd)
        .output()
        .unwrap()
}

/// `dqgate publish r.dq` of `staged` into `table` under `cwd`, for one run key.
fn publish(cwd: &Path, staged: &Path, partition: &str) -> std::process::Output {
    publish_as(cwd, "r.dq", staged.to_str().unwrap(), partition)
}

/// `dqgate publish RULES --staged STAGED --table table --partition P`.
fn publish_as(cwd: &Path, rules: &str, staged: &str, partition: &str) -> std::process::Output {
    dqgate(
        cwd,
        &[
            "publish",
            rules,
            "--staged",
            staged,
            "--table",
            "table",
            "--partition",
            partition,
        ],
    )
}

#[test]
fn hostile_run_keys_are_refused_before_anything_is_written() {
    let env = Env::new();
    let rules = env.tmp.path().join("r.dq");
    fs::write(&rules, "table t\npartitioned by d\ncheck row_count > 0\n").unwrap();
    let staged = env.stage("s", 1, 1);
    // A bystander directory next to the table that must stay untouched.
    let bystander = env.tmp.path().join("bystander");
    fs::create_dir_all(&bystander).unwrap();
    fs::write(bystander.join("keep.txt"), "x").unwrap();
    let before = tree(env.tmp.path());
    // (A NUL cannot even be passed as an argument; `RunKey` rejects it too:
    // see the unit tests of `runkey`.)
    for bad in [
        "d=..",
        "d=../bystander",
        "d=/etc",
        "d=a/../../bystander",
        "d=",
        "d=..\\..",
        "e=1",
    ] {
        let out = publish(env.tmp.path(), &staged, bad);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            tree(env.tmp.path()),
            before,
            "{bad:?} changed the file system"
        );
    }
}

#[test]
fn look_alike_characters_stay_one_directory_under_root() {
    let env = Env::new();
    let rules = env.tmp.path().join("r.dq");
    fs::write(&rules, "table t\npartitioned by d\ncheck row_count > 0\n").unwrap();
    // Fullwidth solidus and full stops, a division slash, a one-dot leader:
    // not path separators, so each value is a single directory name.
    for (i, value) in [
        "２０２５／０３",
        "．．",
        "a\u{2215}b",
        "\u{2024}\u{2024}",
        "Zürich",
    ]
    .iter()
    .enumerate()
    {
        let staged = env.stage(&format!("s{i}"), i as i64, 1);
        let arg = format!("d={value}");
        let out = publish(env.tmp.path(), &staged, &arg);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{value}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let part = env.root().join(format!("d={value}"));
        assert!(
            part.join("_dqgate_audit.json").is_file(),
            "{value} not published at {}",
            part.display()
        );
        assert_eq!(part.parent().unwrap(), env.root());
    }
    // Only the table, its kept area, the staging area and the rule file.
    let top: BTreeSet<String> = fs::read_dir(env.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        top,
        ["r.dq", "staging", "table", ".table.dqgate"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
    assert_only_published(env.root());
}

#[test]
fn a_partition_that_is_a_symlink_is_never_followed_out_of_root() {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    env.publish_version(&k, 1, &Default::default());
    // Someone replaces the partition with a link to a directory outside ROOT.
    let outside = env.tmp.path().join("outside");
    fs::create_dir_all(&outside).unwrap();
    fs::write(outside.join("precious.txt"), "do not touch").unwrap();
    let part = env.root().join("d=1");
    fs::rename(&part, env.tmp.path().join("moved-away")).unwrap();
    std::os::unix::fs::symlink(&outside, &part).unwrap();
    let before = tree(&outside);
    let staged = env.stage("s2", 2, 1);
    let passed = passed(&staged);
    let result = env
        .table
        .publish(&k, &staged, &passed, None, &Default::default());
    assert!(
        result.is_err(),
        "published through a symlinked partition: {result:?}"
    );
    let _ = env.table.gc();
    assert_eq!(tree(&outside), before, "something outside ROOT changed");
    assert_eq!(
        fs::read_to_string(outside.join("precious.txt")).unwrap(),
        "do not touch"
    );
}

#[test]
fn staged_and_rule_file_paths_cannot_reach_outside_root_and_staging() {
    let env = Env::new();
    let elsewhere = env.tmp.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::write(
        elsewhere.join("r.dq"),
        "table t\npartitioned by d\ncheck row_count > 0\n",
    )
    .unwrap();
    fs::write(
        env.tmp.path().join("r.dq"),
        "table t\npartitioned by d\ncheck row_count > 0\n",
    )
    .unwrap();
    let bystander = env.tmp.path().join("bystander");
    fs::create_dir_all(&bystander).unwrap();
    fs::write(bystander.join("keep.txt"), "x").unwrap();
    let outside = |env: &Env| {
        let mut t = tree(env.tmp.path());
        t.retain(|p| {
            !["table", ".table.dqgate", "staging"]
                .iter()
                .any(|top| p == top || p.starts_with(&format!("{top}/")))
        });
        t
    };
    let before = outside(&env);

    // A staged path with `..` in it, and an absolute one; a rule file
    // reached through `..`: each publishes into ROOT and nowhere else.
    let s1 = env.stage("s1", 1, 1);
    let dotted = format!(
        "staging/../staging/{}",
        s1.file_name().unwrap().to_str().unwrap()
    );
    let out = publish_as(
        env.tmp.path(),
        "elsewhere/../elsewhere/r.dq",
        &dotted,
        "d=1",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s2 = env.stage("s2", 2, 1);
    let out = publish(env.tmp.path(), &s2, "d=2");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(env.root().join("d=1/_dqgate_audit.json").is_file());
    assert!(env.root().join("d=2/_dqgate_audit.json").is_file());
    assert_eq!(
        outside(&env),
        before,
        "something outside ROOT and staging changed"
    );
    let published = tree(&env.root().join("d=1"));

    // Staging the published partition itself, the table root, a directory
    // that holds the table, or a link to any of them: refused, nothing moves.
    std::os::unix::fs::symlink(env.root().join("d=1"), env.tmp.path().join("staging/link"))
        .unwrap();
    let snapshot = tree(env.tmp.path());
    for staged in [
        "table/d=1",
        "table",
        ".",
        "staging/link",
        "staging/../table/d=2",
    ] {
        let out = publish_as(env.tmp.path(), "r.dq", staged, "d=1");
        let code = out.status.code();
        assert!(
            code == Some(2) || code == Some(3),
            "--staged {staged}: exit {code:?}, {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            tree(env.tmp.path()),
            snapshot,
            "--staged {staged} changed the file system"
        );
    }
    assert_eq!(tree(&env.root().join("d=1")), published);
    assert_only_published(env.root());
}
