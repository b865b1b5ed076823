//! Keys as canonical bytes: the same key gives the same bytes whatever the
//! Arrow layout or integer width it was read in, so an index written from
//! one version's types stays valid when the table's types widen.
//!
//! - An integer part is 9 bytes: `0` then the two's complement (big
//!   endian) for a negative value, `1` then the value (big endian) for any
//!   other, so that byte order is numeric order up to `u64::MAX`.
//! - A text part is its UTF-8 bytes; in a key of more than one part it is
//!   preceded by its length (4 bytes, little endian).
//!
//! Rows with a null part have no key (they are left out of every join).

use std::cmp::Ordering;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringViewArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, UInt64Type};
use datafusion::arrow::error::ArrowError;
use serde::{Deserialize, Serialize};

use crate::value::Value;

/// What a key part is, as far as the index is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Any signed or unsigned integer width.
    Int,
    /// Text in any layout (string, large string, view, dictionary).
    Text,
}

impl Kind {
    /// The kind of a column type; `None` for the types no index holds.
    pub fn of(t: &DataType) -> Option<Kind> {
        match t {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(Kind::Text),
            DataType::Dictionary(_, v) => Kind::of(v),
            t if t.is_integer() => Some(Kind::Int),
            _ => None,
        }
    }

    /// The kinds of `types`, when every one has a kind.
    pub fn all(types: &[DataType]) -> Option<Vec<Kind>> {
        types.iter().map(Kind::of).collect()
    }
}

enum Part {
    Signed(datafusion::arrow::array::PrimitiveArray<Int64Type>),
    Unsigned(datafusion::arrow::array::PrimitiveArray<UInt64Type>),
    Text(StringViewArray),
}

/// A batch's key columns, ready to be encoded a row at a time.
pub struct Columns {
    parts: Vec<Part>,
}

impl Columns {
    pub fn new(columns: &[ArrayRef], kinds: &[Kind]) -> Result<Columns, ArrowError> {
        let parts = columns
            .iter()
            .zip(kinds)
            .map(|(c, k)| {
                Ok(match k {
                    Kind::Int if c.data_type() == &DataType::UInt64 => {
                        Part::Unsigned(c.as_primitive::<UInt64Type>().clone())
                    }
                    Kind::Int => Part::Signed(
                        cast(c, &DataType::Int64)?
                            .as_primitive::<Int64Type>()
                            .clone(),
                    ),
                    Kind::Text => {
                        Part::Text(cast(c, &DataType::Utf8View)?.as_string_view().clone())
                    }
                })
            })
            .collect::<Result<Vec<_>, ArrowError>>()?;
        Ok(Columns { parts })
    }

    /// Calls `f(row, value)` for each non-null value of integer part `c`
    /// (nothing for a text part), in row order.
    pub(super) fn each_int(&self, c: usize, mut f: impl FnMut(usize, i128)) {
        fn each<T: Copy>(values: &[T], nulls: Option<&NullBuffer>, mut f: impl FnMut(usize, T)) {
            match nulls.filter(|n| n.null_count() > 0) {
                None => values.iter().enumerate().for_each(|(r, v)| f(r, *v)),
                Some(n) => n.valid_indices().for_each(|r| f(r, values[r])),
            }
        }
        match self.parts.get(c) {
            Some(Part::Signed(a)) => each(a.values(), a.nulls(), |r, v| f(r, v as i128)),
            Some(Part::Unsigned(a)) => each(a.values(), a.nulls(), |r, v| f(r, v as i128)),
            _ => {}
        }
    }

    /// Calls `f(row, bytes)` for each non-null value of text part `c`
    /// (nothing for an integer part), in row order.
    pub(super) fn each_text(&self, c: usize, mut f: impl FnMut(usize, &[u8])) {
        if let Some(Part::Text(a)) = self.parts.get(c) {
            match a.nulls().filter(|n| n.null_count() > 0) {
                None => (0..a.len()).for_each(|r| f(r, a.value(r).as_bytes())),
                Some(n) => n.valid_indices().for_each(|r| f(r, a.value(r).as_bytes())),
            }
        }
    }

    /// Appends the key of `row` to `out`; `false` (and nothing appended)
    /// when a part is null.
    pub fn encode(&self, row: usize, out: &mut Vec<u8>) -> bool {
        let valid = self.parts.iter().all(|p| match p {
            Part::Signed(a) => a.is_valid(row),
            Part::Unsigned(a) => a.is_valid(row),
            Part::Text(a) => a.is_valid(row),
        });
        if !valid {
            return false;
        }
        let single = self.parts.len() == 1;
        for p in &self.parts {
            match p {
                Part::Signed(a) => out.extend_from_slice(&int_bytes(a.value(row) as i128)),
                Part::Unsigned(a) => out.extend_from_slice(&int_bytes(a.value(row) as i128)),
                Part::Text(a) => {
                    let v = a.value(row).as_bytes();
                    if !single {
                        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
                    }
                    out.extend_from_slice(v);
                }
            }
        }
        true
    }
}

fn int_bytes(v: i128) -> [u8; 9] {
    let mut b = [0u8; 9];
    b[0] = u8::from(v >= 0);
    b[1..].copy_from_slice(&(v as u64).to_be_bytes());
    b
}

/// The parts of an encoded key, as slices (an integer part with its tag);
/// `None` when the bytes are not a key of `kinds`.
pub(super) fn parts<'a>(kinds: &[Kind], key: &'a [u8]) -> Option<Vec<&'a [u8]>> {
    let mut out = Vec::with_capacity(kinds.len());
    each_part(kinds, key, |_, part| out.push(part))?;
    Some(out)
}

/// Part `c` of an encoded key (see [`parts`]), without collecting the
/// others; `None` when the bytes are not a key of `kinds`.
pub(super) fn part<'a>(kinds: &[Kind], key: &'a [u8], c: usize) -> Option<&'a [u8]> {
    let mut found = None;
    each_part(kinds, key, |i, part| {
        if i == c {
            found = Some(part);
        }
    })?;
    found
}

/// Calls `f(i, part)` for each part of an encoded key, in order; `None`
/// when the bytes are not a key of `kinds`. A key of one text column is
/// its bytes alone, without a length.
fn each_part<'a>(
    kinds: &[Kind],
    mut key: &'a [u8],
    mut f: impl FnMut(usize, &'a [u8]),
) -> Option<()> {
    if let [Kind::Text] = kinds {
        f(0, key);
        return Some(());
    }
    for (i, k) in kinds.iter().enumerate() {
        let len = match k {
            Kind::Int => 9,
            Kind::Text => {
                let (len, rest) = key.split_first_chunk::<4>()?;
                key = rest;
                u32::from_le_bytes(*len) as usize
            }
        };
        if key.len() < len {
            return None;
        }
        let (part, rest) = key.split_at(len);
        f(i, part);
        key = rest;
    }
    key.is_empty().then_some(())
}

/// The value of an integer part (9 bytes, see [`int_bytes`]).
pub(super) fn int_of(part: &[u8]) -> Option<i128> {
    let v = u64::from_be_bytes(part.get(1..9)?.try_into().ok()?);
    Some(match part[0] {
        0 => v as i64 as i128,
        _ => v as i128,
    })
}

/// The key's values, as the staged columns give them; `None` when the
/// bytes are not a key of `kinds`.
pub fn decode(kinds: &[Kind], key: &[u8]) -> Option<Vec<Value>> {
    parts(kinds, key)?
        .into_iter()
        .zip(kinds)
        .map(|(p, k)| match k {
            Kind::Int => int_of(p).map(Value::Int),
            Kind::Text => std::str::from_utf8(p).ok().map(|s| Value::Text(s.into())),
        })
        .collect()
}

/// Keys in ascending order of their values, part by part (the order that
/// ranks samples of equal row counts).
pub fn cmp(kinds: &[Kind], a: &[u8], b: &[u8]) -> Ordering {
    match (parts(kinds, a), parts(kinds, b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{
        DictionaryArray, Int32Array, Int64Array, LargeStringArray, StringArray, UInt64Array,
    };
    use datafusion::arrow::datatypes::Int8Type;

    use super::*;

    fn keys(columns: &[ArrayRef], kinds: &[Kind]) -> Vec<Option<Vec<u8>>> {
        let c = Columns::new(columns, kinds).unwrap();
        (0..columns[0].len())
            .map(|r| {
                let mut out = Vec::new();
                c.encode(r, &mut out).then_some(out)
            })
            .collect()
    }

    #[test]
    fn one_key_whatever_the_layout_or_width() {
        let narrow: ArrayRef = Arc::new(Int32Array::from(vec![Some(-5), None, Some(7)]));
        let wide: ArrayRef = Arc::new(Int64Array::from(vec![Some(-5), Some(1), Some(7)]));
        let a = keys(&[narrow], &[Kind::Int]);
        let b = keys(&[wide], &[Kind::Int]);
        assert_eq!(a[0], b[0]);
        assert_eq!(a[1], None);
        assert_eq!(a[2], b[2]);

        let plain: ArrayRef = Arc::new(StringArray::from(vec!["é", "", "ab"]));
        let large: ArrayRef = Arc::new(LargeStringArray::from(vec!["é", "", "ab"]));
        let dict: ArrayRef = Arc::new(
            vec!["é", "", "ab"]
                .into_iter()
                .collect::<DictionaryArray<Int8Type>>(),
        );
        let p = keys(&[plain], &[Kind::Text]);
        assert_eq!(p, keys(&[large], &[Kind::Text]));
        assert_eq!(p, keys(&[dict], &[Kind::Text]));
        assert_eq!(p[1], Some(Vec::new()));
    }

    #[test]
    fn decodes_and_orders_by_value() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![i64::MIN, -1, 0, 1, i64::MAX]));
        let big: ArrayRef = Arc::new(UInt64Array::from(vec![u64::MAX]));
        let mut all: Vec<Vec<u8>> = keys(&[ints], &[Kind::Int])
            .into_iter()
            .chain(keys(&[big], &[Kind::Int]))
            .map(Option::unwrap)
            .collect();
        let values: Vec<Vec<Value>> = all
            .iter()
            .map(|k| decode(&[Kind::Int], k).unwrap())
            .collect();
        let want: Vec<i128> = vec![
            i64::MIN as i128,
            -1,
            0,
            1,
            i64::MAX as i128,
            u64::MAX as i128,
        ];
        assert_eq!(
            values,
            want.iter()
                .map(|v| vec![Value::Int(*v)])
                .collect::<Vec<_>>()
        );
        all.reverse();
        all.sort_by(|a, b| cmp(&[Kind::Int], a, b));
        assert_eq!(
            decode(&[Kind::Int], &all[0]).unwrap(),
            vec![Value::Int(i64::MIN as i128)]
        );

        // A composite orders part by part, not by its length prefixes.
        let text: ArrayRef = Arc::new(StringArray::from(vec!["b", "ab", "ab"]));
        let n: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, -3]));
        let kinds = [Kind::Text, Kind::Int];
        let mut k: Vec<Vec<u8>> = keys(&[text, n], &kinds)
            .into_iter()
            .map(Option::unwrap)
            .collect();
        k.sort_by(|a, b| cmp(&kinds, a, b));
        let got: Vec<Vec<Value>> = k.iter().map(|k| decode(&kinds, k).unwrap()).collect();
        assert_eq!(
            got,
            vec![
                vec![Value::Text("ab".into()), Value::Int(-3)],
                vec![Value::Text("ab".into()), Value::Int(2)],
                vec![Value::Text("b".into()), Value::Int(1)],
            ]
        );
        for key in &k {
            let whole = parts(&kinds, key).unwrap();
            for (c, p) in whole.iter().enumerate() {
                assert_eq!(part(&kinds, key, c), Some(*p));
            }
            assert_eq!(part(&kinds, key, 2), None);
            assert_eq!(part(&kinds, &key[..key.len() - 1], 0), None);
        }
        assert_eq!(part(&[Kind::Text], b"ab", 0), Some(&b"ab"[..]));
        assert_eq!(decode(&kinds, b"\x05\0\0\0ab"), None);
    }
}
