//! `dqgate verify`: a published partition's fingerprint recomputed and
//! compared with its audit record.

use std::path::PathBuf;

use super::options::free_run_key;
use crate::error::Error;
use crate::runkey::RunKey;

pub(super) async fn verify(
    root: PathBuf,
    partition: Vec<String>,
    options: Vec<String>,
) -> Result<u8, Error> {
    let kind = crate::publish::choose(None, &root);
    kind.refuse_options(&options)?;
    let key = free_run_key(&partition)?;
    let target = kind.open(&root, &options, None).await?;
    let report = target.verify(&key).await?;
    Ok(show_verify(&key, &report))
}

fn show_verify(key: &RunKey, report: &crate::publish::VerifyReport) -> u8 {
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
