//! `verify`: untouched, modified, removed, extra, no record.

use std::fs;

use dqgate::publish::{PublishError, PublishOptions};

use crate::common::*;

fn published() -> (Env, dqgate::runkey::RunKey, std::path::PathBuf) {
    let env = Env::new();
    let k = key(&[("d", "1")]);
    env.publish_version(&k, 1, &PublishOptions::default());
    let part = env.root().join("d=1");
    (env, k, part)
}

fn first_file(part: &std::path::Path) -> std::path::PathBuf {
    part.join(manifest_names(part).into_iter().next().unwrap())
}

#[test]
fn untouched_partition_verifies() {
    let (env, k, _) = published();
    let r = env.table.verify(&k).unwrap();
    assert!(r.differences.is_empty(), "{:?}", r.differences);
    assert!(r.version.starts_with("v1-"));
    assert_eq!(
        r.fingerprint,
        env.table.current(&k).unwrap().unwrap().fingerprint
    );
}

#[test]
fn modified_file_is_reported() {
    let (env, k, part) = published();
    write_parquet(&first_file(&part), 5, 10); // other rows, same row count
    let r = env.table.verify(&k).unwrap();
    assert!(!r.differences.is_empty());
    assert!(
        r.differences.iter().all(|d| d.starts_with("changed")),
        "{:?}",
        r.differences
    );
}

#[test]
fn removed_file_is_reported() {
    let (env, k, part) = published();
    let f = first_file(&part);
    fs::remove_file(&f).unwrap();
    let r = env.table.verify(&k).unwrap();
    let name = f.file_name().unwrap().to_string_lossy().to_string();
    assert_eq!(r.differences, vec![format!("missing: {name}")]);
}

#[test]
fn extra_files_are_reported_hidden_ones_too() {
    let (env, k, part) = published();
    write_parquet(&part.join("stray.parquet"), 9, 1);
    fs::create_dir_all(part.join("_tmp")).unwrap();
    write_parquet(&part.join("_tmp/hidden.parquet"), 9, 1);
    let r = env.table.verify(&k).unwrap();
    assert_eq!(
        r.differences,
        vec![
            "extra: _tmp/hidden.parquet is not in the record".to_string(),
            "extra: stray.parquet is not in the record".to_string()
        ]
    );
}

#[test]
fn no_record_is_exit_3() {
    let (env, k, part) = published();
    fs::remove_file(part.join("_dqgate_audit.json")).unwrap();
    let err = env.table.verify(&k).unwrap_err();
    assert!(matches!(err, PublishError::MissingRecord { .. }), "{err}");
    assert_eq!(err.exit_code(), 3);
    let err = env.table.verify(&key(&[("d", "never")])).unwrap_err();
    assert!(matches!(err, PublishError::NotPublished { .. }), "{err}");
    assert_eq!(err.exit_code(), 3, "{err}");
}
