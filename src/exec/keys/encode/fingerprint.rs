//! Fingerprints of wide keys: one seeded 64-bit hash a row.

use std::hash::{BuildHasher, Hash, Hasher};

use datafusion::arrow::array::ArrayRef;
use datafusion::common::hash_utils::{create_hashes, HashState, RandomState};
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

/// How DataFusion hashes a key part's value, given as its bytes (little
/// endian for integers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// Text, hashed as its `Utf8View` view.
    #[default]
    Text,
    /// A 32-bit integer (`Int32`, `Date32`).
    I32,
    /// A 64-bit integer (`Int64`, `Timestamp`).
    I64,
}

/// The fingerprint DataFusion gives `value` in a `Utf8View` array: a value
/// of at most 12 bytes is hashed as its view (length and bytes inline),
/// a longer one as its bytes.
#[inline]
pub fn of_text(state: &RandomState, value: &[u8]) -> u64 {
    match view(value) {
        Some(view) => state.hash_one(view),
        None => state.hash_one(value),
    }
}

/// The inline view of a value of at most 12 bytes.
#[inline]
fn view(value: &[u8]) -> Option<u128> {
    (value.len() <= 12).then(|| {
        let mut view = [0u8; 16];
        view[..4].copy_from_slice(&(value.len() as u32).to_le_bytes());
        view[4..4 + value.len()].copy_from_slice(value);
        u128::from_le_bytes(view)
    })
}

/// The fingerprint of a first key part's value (its little-endian bytes
/// for integers), as DataFusion hashes its array.
#[inline]
pub fn first(kind: Kind, state: &RandomState, value: &[u8]) -> u64 {
    match kind {
        Kind::Text => of_text(state, value),
        Kind::I32 => state.hash_one(i32::from_le_bytes(value.try_into().unwrap_or_default())),
        Kind::I64 => state.hash_one(i64::from_le_bytes(value.try_into().unwrap_or_default())),
    }
}

/// The fingerprint of a row whose earlier key parts hashed to `before`,
/// with `value` as its next part: DataFusion folds `before` into a hasher
/// seeded with it, then hashes the value into that.
#[inline]
pub fn then(kind: Kind, state: &RandomState, before: u64, value: &[u8]) -> u64 {
    let mut h = state.seeded_state(before).build_hasher();
    match kind {
        Kind::Text => match view(value) {
            Some(view) => view.hash(&mut h),
            None => value.hash(&mut h),
        },
        Kind::I32 => i32::from_le_bytes(value.try_into().unwrap_or_default()).hash(&mut h),
        Kind::I64 => i64::from_le_bytes(value.try_into().unwrap_or_default()).hash(&mut h),
    }
    h.finish()
}
