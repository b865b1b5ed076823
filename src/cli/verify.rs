//! `dqgate verify`: a published partition's fingerprint recomputed and
//! compared with its audit record.

use std::path::PathBuf;

use super::free_run_key;
use crate::error::Error;
use crate::publish::Table;
use crate::runkey::RunKey;

pub(super) fn verify(root: PathBuf, partition: Vec<String>) -> Result<u8, Error> {
    let key = free_run_key(&partition)?;
    let report = Table::open(&root)?.verify(&key)?;
    Ok(show_verify(&key, &report))
}

pub(super) fn show_verify(key: &RunKey, report: &crate::publish::VerifyReport) -> u8 {
    if report.differences.is_empty() {
        println!(
            "verified: {} is version {} ({})",
            key.rel_dir(),
            report.version,
            report.fingerprint
        );
        if let Some(read) = &report.read {
            println!("  {read}");
        }
        0
    } else {
        println!(
            "NOT verified: {} differs from its audit record:",
            key.rel_dir()
        );
        for d in &report.differences {
            println!("  {d}");
        }
        1
    }
}
