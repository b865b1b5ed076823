//! Files as real producers write them (testdata/data/writers/, written by
//! tests/writers/fixtures.py with fastparquet and DuckDB), staged the way
//! pipelines stage them: through symbolic links, in Hive-style
//! subdirectories. Expected values are DuckDB's over the same files.

use std::fs;
use std::path::Path;

use crate::support::{data, dqgate};

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn values(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["value"].clone())
        .collect()
}

fn check(dir: &Path, rules: &str, staged: &Path, extra: &[&str]) -> std::process::Output {
    let path = dir.join("r.dq");
    fs::write(&path, rules).unwrap();
    let staged = staged.to_str().unwrap();
    let mut args = vec!["check", "r.dq", "--staged", staged, "--format", "json"];
    args.extend(extra);
    dqgate(dir, &args)
}

const FASTPARQUET_RULES: &str = "table t\ncheck row_count >= 0\ncheck null_count(name) >= 0\ncheck min(id) >= 0\ncheck max(name) >= ''\ncheck distinct_count(name) >= 0\n";

#[test]
fn fastparquet_file_without_row_groups_is_zero_rows() {
    let tmp = tempfile::tempdir().unwrap();
    for extra in [&[][..], &["--scan-only"][..]] {
        let out = check(
            tmp.path(),
            FASTPARQUET_RULES,
            &data("writers/fastparquet_empty"),
            extra,
        );
        // Audited (not refused): it fails only because min and max of no
        // values are null, and a null metric never holds.
        exits(&out, 1);
        let v = json(&out);
        assert_eq!(v["input"]["row_count"], 0);
        assert_eq!(
            values(&v),
            serde_json::json!([0, 0, null, null, 0])
                .as_array()
                .unwrap()
                .clone()
        );
        // Beside a file with rows it changes nothing.
        let out = check(
            tmp.path(),
            FASTPARQUET_RULES,
            &data("writers/fastparquet_mixed"),
            extra,
        );
        exits(&out, 0);
        let v = json(&out);
        assert_eq!(v["input"]["row_count"], 3);
        assert_eq!(
            values(&v),
            serde_json::json!([3, 1, 1, "c", 2])
                .as_array()
                .unwrap()
                .clone()
        );
    }
}

#[test]
fn fastparquet_empty_file_publishes_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let staged = tmp.path().join("staged");
    copy_dir(&data("writers/fastparquet_mixed"), &staged);
    fs::write(
        tmp.path().join("p.dq"),
        "table t\npartitioned by day\ncheck row_count = 3\n",
    )
    .unwrap();
    let out = publish(tmp.path(), "staged", "day=1");
    exits(&out, 0);
    let out = dqgate(tmp.path(), &["verify", "root", "--partition", "day=1"]);
    exits(&out, 0);
}

#[test]
fn a_corrupted_list_header_is_still_refused() {
    // The same file with its `row_groups` header claiming one element: not
    // the writer's quirk but a broken footer; refused, never read as empty.
    let tmp = tempfile::tempdir().unwrap();
    let staged = tmp.path().join("staged");
    fs::create_dir(&staged).unwrap();
    let mut bytes = fs::read(data("writers/fastparquet_empty/part-0.parquet")).unwrap();
    let n = bytes.len();
    let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let footer = n - 8 - len;
    // `16 00 19 00`: num_rows 0, then row_groups as an empty list.
    let at = (footer..n - 8)
        .find(|&i| bytes[i..i + 4] == [0x16, 0x00, 0x19, 0x00])
        .expect("the empty row_groups header");
    bytes[at + 3] = 0x1c;
    fs::write(staged.join("part-0.parquet"), &bytes).unwrap();
    let out = check(tmp.path(), FASTPARQUET_RULES, &staged, &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn symlinked_staged_directory_is_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("mnt/volume/staged");
    copy_dir(&data("writers/fastparquet_mixed"), &real);
    std::os::unix::fs::symlink(tmp.path().join("mnt/volume"), tmp.path().join("data")).unwrap();
    std::os::unix::fs::symlink(&real, tmp.path().join("staged-link")).unwrap();
    fs::write(
        tmp.path().join("p.dq"),
        "table t\npartitioned by day\ncheck row_count = 3\n",
    )
    .unwrap();
    for staged in ["staged-link", "data/staged"] {
        for cmd in [
            &["check", "p.dq", "--staged", staged, "--partition", "day=1"][..],
            &["lint", "p.dq", "--staged", staged],
            &[
                "explain",
                "p.dq",
                "--staged",
                staged,
                "--partition",
                "day=1",
            ],
        ] {
            let out = dqgate(tmp.path(), cmd);
            assert_eq!(
                out.status.code(),
                Some(0),
                "{cmd:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    // The verdict is the one of the directory itself: same fingerprint.
    let through = json(&check(
        tmp.path(),
        FASTPARQUET_RULES,
        Path::new("staged-link"),
        &[],
    ));
    let direct = json(&check(tmp.path(), FASTPARQUET_RULES, &real, &[]));
    assert_eq!(through, direct);
    // publish follows the link: the directory it names is swapped in whole,
    // and the link is left dangling, as a staged path is gone after publish.
    let out = publish(tmp.path(), "staged-link", "day=1");
    exits(&out, 0);
    assert!(!real.exists());
    assert!(fs::symlink_metadata(tmp.path().join("staged-link"))
        .unwrap()
        .is_symlink());
    let published = tmp.path().join("root/day=1");
    assert!(!fs::symlink_metadata(&published).unwrap().is_symlink());
    let out = dqgate(tmp.path(), &["verify", "root", "--partition", "day=1"]);
    exits(&out, 0);
}

/// DuckDB's `read_parquet('duckdb_hive/**/*.parquet', hive_partitioning = true)`:
/// `store_id` BIGINT, `day` DATE, `region` VARCHAR.
const HIVE_RULES: &str = "table t
check row_count = 30
check null_count(store_id) = 6
check min(store_id) = 1
check max(store_id) = 2
check min(day) = date '2025-03-05'
check max(day) = date '2025-03-06'
check distinct_count(region) = 3
check min(region) = 'a b'
check count(where store_id = 2 and day = date '2025-03-06') = 12
check values(region) in ('a b', 'x:y', 'plain')
check all(store_id + 0 <= 2)
check unique(id)
check duplicate_count(store_id, day) nulls not distinct = 4
";

#[test]
fn hive_subdirectories_are_typed_columns() {
    let tmp = tempfile::tempdir().unwrap();
    for extra in [&[][..], &["--scan-only"][..]] {
        let out = check(tmp.path(), HIVE_RULES, &data("writers/duckdb_hive"), extra);
        let v = json(&out);
        assert_eq!(v["verdict"], "pass", "{extra:?}: {v:#}");
        assert_eq!(v["input"]["files"].as_array().unwrap().len(), 12);
    }
    // A type error names the inferred type: `region` is text.
    fs::write(
        tmp.path().join("bad.dq"),
        "table t\ncheck min(region) >= 0\n",
    )
    .unwrap();
    let staged = data("writers/duckdb_hive");
    let out = dqgate(
        tmp.path(),
        &["lint", "bad.dq", "--staged", staged.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn hive_subdirectories_publish_as_they_are() {
    let tmp = tempfile::tempdir().unwrap();
    let staged = tmp.path().join("staged");
    copy_dir(&data("writers/duckdb_hive"), &staged);
    let rules =
        format!("{HIVE_RULES}\n").replacen("table t\n", "table t\npartitioned by sales_date\n", 1);
    fs::write(tmp.path().join("p.dq"), rules).unwrap();
    let out = publish(tmp.path(), "staged", "sales_date=2025-03-05");
    exits(&out, 0);
    let part = tmp.path().join("root/sales_date=2025-03-05");
    let mut names: Vec<String> = walk(&part)
        .into_iter()
        .filter(|p| p.ends_with(".parquet"))
        .collect();
    names.sort();
    assert_eq!(names.len(), 12);
    assert!(
        names[0].starts_with("store_id=1/day=2025-03-05/region=a%20b/data_0.v1-"),
        "{names:?}"
    );
    let out = dqgate(
        tmp.path(),
        &["verify", "root", "--partition", "sales_date=2025-03-05"],
    );
    exits(&out, 0);
}

/// Asserts the exit code, showing stderr otherwise.
fn exits(out: &std::process::Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `dqgate publish p.dq --staged STAGED --partition KEY --table root`.
fn publish(dir: &Path, staged: &str, key: &str) -> std::process::Output {
    let args = [
        "publish",
        "p.dq",
        "--staged",
        staged,
        "--partition",
        key,
        "--table",
        "root",
    ];
    dqgate(dir, &args)
}

fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()).into_iter().map(|p| format!("{name}/{p}")));
        } else {
            out.push(name);
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
