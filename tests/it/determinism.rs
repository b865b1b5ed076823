//! The verdict JSON is byte-identical for the same staged files, rule file
//! and run key: wherever the files live, in whatever order they were
//! written, with any thread count, time zone or locale.

use std::fs;
use std::path::Path;

use crate::support::{data, dqgate, repo};

fn copy_tree_reversed(from: &Path, to: &Path) {
    let mut entries: Vec<_> = fs::read_dir(from)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    entries.reverse();
    fs::create_dir_all(to).unwrap();
    for p in entries {
        let target = to.join(p.file_name().unwrap());
        if p.is_dir() {
            copy_tree_reversed(&p, &target);
        } else {
            fs::copy(&p, &target).unwrap();
        }
    }
}

fn verdict(staged: &Path, extra: &[&str]) -> Vec<u8> {
    let rules = repo().join("rules/daily_sales.dq");
    let mut args = vec![
        "check",
        "rules/daily_sales.dq",
        "--staged",
        staged.to_str().unwrap(),
        "--partition",
        "sales_date=2025-03-05",
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    assert!(rules.exists());
    let out = dqgate(&repo(), &args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn same_inputs_give_byte_identical_json() {
    let original = data("sales_bad");
    let first = verdict(&original, &[]);
    assert_eq!(first, verdict(&original, &[]), "two runs differ");
    assert_eq!(
        first,
        verdict(&original, &["--threads", "1"]),
        "thread count changes the verdict"
    );
    assert_eq!(
        first,
        verdict(&original, &["--threads", "7"]),
        "thread count changes the verdict"
    );

    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("elsewhere/staged");
    copy_tree_reversed(&original, &copy);
    assert_eq!(
        first,
        verdict(&copy, &[]),
        "location or write order changes the verdict"
    );

    let text = String::from_utf8(first).unwrap();
    assert!(!text.contains(tmp.path().to_str().unwrap()));
    assert!(
        !text.contains("/work/") && !text.contains("/tmp/"),
        "absolute path in verdict"
    );
}
