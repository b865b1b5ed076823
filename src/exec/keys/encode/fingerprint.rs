//! Fingerprints of wide keys: one seeded 64-bit hash a row.

use datafusion::arrow::array::ArrayRef;
use datafusion::common::hash_utils::{create_hashes, RandomState};
use datafusion::error::DataFusionError;

/// The fingerprint seed: fixed, so runs are reproducible.
pub const SEED: u64 = 0x6471_6761_7465_6b65;

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
    if bits.is_some() {
        let mask = mask(bits);
        out.iter_mut().for_each(|h| *h &= mask);
    }
    Ok(())
}

/// The bits of a whole fingerprint that `bits` keeps.
pub fn mask(bits: Option<u32>) -> u64 {
    match bits {
        Some(b) if b < 64 => (1u64 << b) - 1,
        _ => u64::MAX,
    }
}
