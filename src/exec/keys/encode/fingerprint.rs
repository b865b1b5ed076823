//! Fingerprints of wide keys: one seeded 64-bit hash a row.

use datafusion::arrow::array::ArrayRef;
use datafusion::common::hash_utils::{create_hashes, RandomState};
use datafusion::error::DataFusionError;

/// The fingerprint seed: fixed, so runs are reproducible.
const SEED: u64 = 0x6471_6761_7465_6b65;

/// One 64-bit fingerprint a row of `columns`. With `bits` (the test-only
/// collision switch) only the low `bits` bits are kept.
pub fn fingerprints(
    columns: &[ArrayRef],
    bits: Option<u32>,
    out: &mut Vec<u64>,
) -> Result<(), DataFusionError> {
    let rows = columns.first().map_or(0, |c| c.len());
    out.clear();
    out.resize(rows, 0);
    create_hashes(columns, &RandomState::with_seed(SEED), out)?;
    if let Some(b) = bits {
        let mask = if b >= 64 { u64::MAX } else { (1u64 << b) - 1 };
        out.iter_mut().for_each(|h| *h &= mask);
    }
    Ok(())
}
