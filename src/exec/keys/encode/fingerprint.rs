//! Fingerprints of wide keys: one seeded 64-bit hash a row.

use std::hash::{BuildHasher, Hash, Hasher};

use datafusion::arrow::array::{ArrayRef, AsArray as _};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::hash_utils::{combine_hashes, create_hashes, HashState, RandomState};
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
    let state = RandomState::with_seed(SEED);
    match columns.iter().any(large_dictionary) {
        false => create_hashes(columns, &state, out)?,
        true => {
            let unpacked = (columns.iter())
                .map(|c| match large_dictionary(c) {
                    true => cast(c, dictionary_values(c.data_type())),
                    false => Ok(c.clone()),
                })
                .collect::<Result<Vec<_>, _>>()?;
            create_hashes(&unpacked, &state, out)?
        }
    };
    if bits.is_some() {
        let mask = mask(bits);
        out.iter_mut().for_each(|h| *h &= mask);
    }
    Ok(())
}

/// Whether `column` is text in an Arrow dictionary of more values than
/// rows. DataFusion hashes every value of a dictionary for every batch, so
/// a key written as a dictionary of millions of values (pyarrow writes an
/// Arrow dictionary whole into every row group) cost 58.7 s at 10M rows
/// against 1.6 s. Its values hash as `str` and fold with `combine_hashes`,
/// as a `Utf8` or `LargeUtf8` array's do, so the column is hashed as that
/// array, with the same fingerprints.
fn large_dictionary(column: &ArrayRef) -> bool {
    column.as_any_dictionary_opt().is_some_and(|d| {
        matches!(d.values().data_type(), DataType::Utf8 | DataType::LargeUtf8)
            && d.values().len() > column.len()
    })
}

/// The type of a dictionary's values (`t` itself if it is none).
fn dictionary_values(t: &DataType) -> &DataType {
    match t {
        DataType::Dictionary(_, v) => v,
        t => t,
    }
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
    /// Text in an Arrow dictionary: DataFusion hashes the dictionary's
    /// values as `str` and folds them into a key's earlier parts with
    /// `combine_hashes`.
    Str,
}

/// The fingerprint DataFusion gives `value` in a `Utf8View` array: a value
/// of at most 12 bytes is hashed as its view (length and bytes inline),
/// a longer one as its bytes.
#[inline]
fn of_text(state: &RandomState, value: &[u8]) -> u64 {
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
        Kind::Str => state.hash_one(StrBytes(value)),
        Kind::I32 => state.hash_one(i32::from_le_bytes(value.try_into().unwrap_or_default())),
        Kind::I64 => state.hash_one(i64::from_le_bytes(value.try_into().unwrap_or_default())),
    }
}

/// The fingerprint of a row whose earlier key parts hashed to `before`,
/// with `value` as its next part: DataFusion folds `before` into a hasher
/// seeded with it, then hashes the value into that (a dictionary's value:
/// its hash combined with `before`).
#[inline]
pub fn then(kind: Kind, state: &RandomState, before: u64, value: &[u8]) -> u64 {
    let mut h = state.seeded_state(before).build_hasher();
    match kind {
        Kind::Str => return combine_hashes(first(kind, state, value), before),
        Kind::Text => match view(value) {
            Some(view) => view.hash(&mut h),
            None => value.hash(&mut h),
        },
        Kind::I32 => i32::from_le_bytes(value.try_into().unwrap_or_default()).hash(&mut h),
        Kind::I64 => i64::from_le_bytes(value.try_into().unwrap_or_default()).hash(&mut h),
    }
    h.finish()
}

/// UTF-8 bytes hashed as the `str` they are: the bytes, then `0xff`.
struct StrBytes<'a>(&'a [u8]);

impl Hash for StrBytes<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write(self.0);
        h.write_u8(0xff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{DictionaryArray, Int32Array, Int64Array};
    use datafusion::arrow::datatypes::Int32Type;
    use std::sync::Arc;

    /// A dictionary of more values than rows is hashed as its values'
    /// array, with DataFusion's fingerprints of the dictionary itself, as
    /// a first part and as a later one, nulls included.
    #[test]
    fn large_dictionaries_hash_as_datafusion_hashes_them() {
        let values: Vec<String> = (0..500).map(|i| format!("value {i}")).collect();
        let values = Arc::new(datafusion::arrow::array::StringArray::from(values));
        let keys = Int32Array::from(vec![Some(3), None, Some(499), Some(3), Some(0)]);
        let dict: ArrayRef = Arc::new(DictionaryArray::<Int32Type>::try_new(keys, values).unwrap());
        let int: ArrayRef = Arc::new(Int64Array::from(vec![
            Some(1),
            Some(2),
            None,
            Some(1),
            Some(5),
        ]));
        assert!(large_dictionary(&dict));
        for columns in [
            vec![dict.clone()],
            vec![dict.clone(), int.clone()],
            vec![int, dict],
        ] {
            let mut want = vec![0; 5];
            create_hashes(&columns, &RandomState::with_seed(SEED), &mut want).unwrap();
            let mut got = Vec::new();
            fingerprints(&columns, None, &mut got).unwrap();
            assert_eq!(got, want);
        }
    }
}
