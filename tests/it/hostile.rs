//! Hostile data: truncated and corrupted files, files that are not files,
//! symlinks. Each gives a clear error or a correct verdict; none panics,
//! hangs or passes wrongly.

use std::fs;
use std::path::Path;

use dqgate::audit::{prepare, Published, RuleSource};
use dqgate::engine::EngineOptions;

use crate::support::{data, dqgate};

const RULES: &str = "table t\ncheck row_count > 0\ncheck unique(order_id)\ncheck min(amount) >= 0\ncheck null_rate(sku) < 50%\n";

/// Audits `staged` in-process; `Ok(true)` for a passing verdict, `Ok(false)`
/// for a failing one, `Err` with the exit code for an error. Panics propagate.
fn audit(rules: &Path, staged: &Path) -> Result<bool, u8> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let opts = EngineOptions {
        threads: Some(2),
        memory_limit: None,
        scan_only: true,
        ..Default::default()
    };
    let prepared = rt
        .block_on(prepare(
            RuleSource::read(rules).unwrap(),
            staged,
            &[],
            false,
            &opts,
        ))
        .map_err(|e| e.exit_code())?;
    rt.block_on(prepared.run(&Published::NotGiven))
        .map(|v| v.passed())
        .map_err(|e| e.exit_code())
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let rules = tmp.path().join("r.dq");
    fs::write(&rules, RULES).unwrap();
    let original = fs::read(data("sales_ok").join("batch=2/part-00002.parquet")).unwrap();
    (tmp, rules, original)
}

#[test]
fn truncated_at_every_offset_is_an_error_never_a_pass() {
    let (tmp, rules, original) = setup();
    let staged = tmp.path().join("staged");
    fs::create_dir_all(&staged).unwrap();
    let file = staged.join("part.parquet");
    let step = (original.len() / 400).max(1);
    let mut cases = 0;
    for len in (0..original.len())
        .step_by(step)
        .chain(original.len() - 16..original.len())
    {
        fs::write(&file, &original[..len]).unwrap();
        assert_eq!(audit(&rules, &staged), Err(3), "truncated to {len} bytes");
        cases += 1;
    }
    fs::write(&file, &original).unwrap();
    assert_eq!(audit(&rules, &staged), Ok(true), "the intact file passes");
    assert!(cases > 400);
}

#[test]
fn corrupted_bytes_give_an_error_or_a_verdict_never_a_panic() {
    let (tmp, rules, original) = setup();
    let staged = tmp.path().join("staged");
    fs::create_dir_all(&staged).unwrap();
    let file = staged.join("part.parquet");
    let footer_len = u32::from_le_bytes(
        original[original.len() - 8..original.len() - 4]
            .try_into()
            .unwrap(),
    ) as usize;
    let data_end = original.len() - 8 - footer_len;
    let mut outcomes = [0usize; 3];
    for (i, at) in (4..original.len() - 8).step_by(23).enumerate() {
        let mut bytes = original.clone();
        bytes[at] ^= [0xFF, 0x01, 0x80, 0x55][i % 4];
        fs::write(&file, &bytes).unwrap();
        match audit(&rules, &staged) {
            Ok(true) => outcomes[0] += 1,
            Ok(false) => outcomes[1] += 1,
            Err(code) => {
                assert_eq!(code, 3, "flipped byte {at} (data ends at {data_end})");
                outcomes[2] += 1;
            }
        }
    }
    println!(
        "corrupted files: {} passed, {} failed, {} errors",
        outcomes[0], outcomes[1], outcomes[2]
    );
    assert!(outcomes[2] > 0);
}

#[test]
fn not_files_and_symlinks_are_refused() {
    let (tmp, rules, original) = setup();
    // A directory named like a data file.
    let staged = tmp.path().join("dir_named_parquet");
    fs::create_dir_all(staged.join("part.parquet")).unwrap();
    fs::write(staged.join("real.parquet"), &original).unwrap();
    assert_eq!(
        audit(&rules, &staged),
        Ok(true),
        "a directory named *.parquet is walked into, and holds nothing"
    );

    // A symlink to a file outside the staged directory.
    let outside = tmp.path().join("outside.parquet");
    fs::write(&outside, &original).unwrap();
    let staged = tmp.path().join("with_link");
    fs::create_dir_all(&staged).unwrap();
    std::os::unix::fs::symlink(&outside, staged.join("part.parquet")).unwrap();
    assert_eq!(audit(&rules, &staged), Err(3));
    let out = dqgate(tmp.path(), &["check", "r.dq", "--staged", "with_link"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("symbolic link"));

    // A staged path that is a file, and one that does not exist.
    assert_eq!(audit(&rules, &outside), Err(3));
    assert_eq!(audit(&rules, &tmp.path().join("nope")), Err(3));
}

#[test]
fn unreadable_files_are_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let (tmp, rules, original) = setup();
    let staged = tmp.path().join("staged");
    fs::create_dir_all(&staged).unwrap();
    let file = staged.join("part.parquet");
    fs::write(&file, &original).unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o000)).unwrap();
    // Root reads anyway; only assert when the permission bites.
    if fs::File::open(&file).is_err() {
        assert_eq!(audit(&rules, &staged), Err(3));
    } else {
        assert_eq!(audit(&rules, &staged), Ok(true));
    }
}
