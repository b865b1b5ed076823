//! Arrow key columns → one key word a row: packed codes or fingerprints.
//!
//! Packing works a column at a time (`acc = acc << bits | code`), so each
//! inner loop is a tight loop over one primitive buffer: about 1 ns a row
//! and part. Codes order like Arrow's row format (ascending, nulls first),
//! so packed words order like the keys they stand for, and a packed word
//! decodes back to the key's values for samples.
//!
//! Beside this file: `float` (float codes in total order, and `-0.0` folded
//! into `+0.0`), `unpack` (a packed word back to its key's values) and
//! `fingerprint` (the 64-bit fingerprints of wide keys).

mod fingerprint;
mod float;
mod unpack;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, PrimitiveArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::*;
use datafusion::common::ScalarValue;

use super::key::Key;
use crate::plan::keys::{Packing, Part, PartKind};
use float::{total_order32, total_order64, zero, zero32};

pub use fingerprint::{fingerprints, first, mask as fingerprint_mask, then, Kind, SEED};
pub use float::fold_zeros;
pub use unpack::unpack;

/// The rows whose key counts: in `nulls distinct` mode, rows without a null
/// key part (`None`: all rows).
pub fn counted_rows(columns: &[ArrayRef], nulls_equal: bool) -> Option<NullBuffer> {
    if nulls_equal {
        return None;
    }
    columns.iter().fold(None, |acc, c| {
        NullBuffer::union(acc.as_ref(), c.logical_nulls().as_ref())
    })
}

/// Why a batch could not be packed.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    /// A value lies outside the range the footers declared.
    #[error("key value {value} of `{column}` lies outside the range that the Parquet statistics declare: the files are inconsistent")]
    OutOfRange { column: String, value: String },
    /// A null where the footers declared none (`nulls not distinct`).
    #[error("`{column}` holds a null that the Parquet statistics say it does not hold: the files are inconsistent")]
    UnexpectedNull { column: String },
    #[error("key column `{column}` arrived as {found}, which the packing did not plan for")]
    Type { column: String, found: DataType },
}

/// Packs every row of `columns` (in packing order) into `out`.
pub fn pack<K: Key>(
    packing: &Packing,
    columns: &[ArrayRef],
    nulls_equal: bool,
    out: &mut Vec<K>,
) -> Result<(), PackError> {
    let rows = columns.first().map_or(0, |c| c.len());
    out.clear();
    out.resize(rows, K::ZERO);
    for (part, column) in packing.parts.iter().zip(columns) {
        pack_part(part, column, nulls_equal, out)?;
    }
    Ok(())
}

fn pack_part<K: Key>(
    part: &Part,
    column: &ArrayRef,
    nulls_equal: bool,
    acc: &mut [K],
) -> Result<(), PackError> {
    let nulls = column.logical_nulls();
    // Rows with a null part are not counted in nulls-distinct mode, so their
    // code does not matter; with nulls not distinct, a null where the
    // footers declared none would be packed like a value.
    if nulls_equal && !part.null_code && nulls.as_ref().is_some_and(|n| n.null_count() > 0) {
        return Err(PackError::UnexpectedNull {
            column: part.column.clone(),
        });
    }
    if part.bits == 0 && !part.null_code {
        return check_constant(part, column);
    }
    let limit = (u128::MAX >> (128 - part.bits)) - u128::from(part.null_code);
    let mut codes = Vec::new();
    if codes_into(part, column, limit, &mut codes)? {
        // Some code is out of range: an error if a valid row's is.
        first_valid_where(part, column, |d| d > limit)?;
    }
    let (bits, plus) = (part.bits, part.null_code);
    match nulls.as_ref().filter(|n| n.null_count() > 0) {
        None => acc
            .iter_mut()
            .zip(&codes)
            .for_each(|(a, c)| *a = a.shl(bits).add(*c, plus)),
        Some(n) => acc
            .iter_mut()
            .zip(&codes)
            .enumerate()
            .for_each(|(i, (a, c))| {
                let valid = n.is_valid(i);
                *a = a.shl(bits).add(if valid { *c } else { 0 }, plus && valid);
            }),
    }
    Ok(())
}

/// Each row's code as 64 bits; returns whether any row's code (null rows
/// included, whose values are arbitrary) exceeds `limit`.
pub(super) fn codes_into(
    part: &Part,
    column: &ArrayRef,
    limit: u128,
    out: &mut Vec<u64>,
) -> Result<bool, PackError> {
    if let Some(over) = integer_codes(part, column, limit, out) {
        return Ok(over);
    }
    out.clear();
    out.reserve(column.len());
    let mut over = false;
    for_each_code(part, column, |_, d| {
        over |= d > limit;
        out.push(d as u64);
    })?;
    Ok(over)
}

/// [`codes_into`] for integer-like columns of up to 64 bits (integers,
/// dates, times, timestamps, durations: not decimals, whose cast would
/// rescale), as one tight loop over their values buffer, widened to `i64`
/// (or `u64`) in the loop; `None` for other columns. A value below the
/// offset is out of range, as its wrapped code is in [`for_each_code`].
fn integer_codes(part: &Part, column: &ArrayRef, limit: u128, out: &mut Vec<u64>) -> Option<bool> {
    use DataType as T;
    if !matches!(part.kind, PartKind::Signed | PartKind::Unsigned) {
        return None;
    }
    let range = Range {
        lim: u64::try_from(limit).unwrap_or(u64::MAX),
        capped: limit > u128::from(u64::MAX),
    };
    let data = column.to_data();
    let len = column.len();
    let signed = || i64::try_from(part.offset).ok();
    let unsigned = || u64::try_from(part.offset).ok();
    Some(match column.data_type() {
        T::Int8 => range.codes(&data.buffer::<i8>(0)[..len], signed()?, out),
        T::Int16 => range.codes(&data.buffer::<i16>(0)[..len], signed()?, out),
        T::Int32 | T::Date32 | T::Time32(_) => {
            range.codes(&data.buffer::<i32>(0)[..len], signed()?, out)
        }
        T::Int64 | T::Date64 | T::Time64(_) | T::Timestamp(..) | T::Duration(_) => {
            range.codes(&data.buffer::<i64>(0)[..len], signed()?, out)
        }
        T::UInt8 => range.codes(&data.buffer::<u8>(0)[..len], unsigned()?, out),
        T::UInt16 => range.codes(&data.buffer::<u16>(0)[..len], unsigned()?, out),
        T::UInt32 => range.codes(&data.buffer::<u32>(0)[..len], unsigned()?, out),
        T::UInt64 => range.codes(&data.buffer::<u64>(0)[..len], unsigned()?, out),
        _ => return None,
    })
}

/// A part's codes `0..=lim` (`capped`: every 64-bit code fits).
#[derive(Clone, Copy)]
struct Range {
    lim: u64,
    capped: bool,
}

/// An integer value widened to the 64 bits its code is computed in.
trait Widen: Copy {
    type Wide: Copy + Ord + Code;
    fn widen(self) -> Self::Wide;
}

/// `value - offset` as a code, wrapping.
trait Code {
    fn minus(self, offset: Self) -> u64;
}

impl Code for i64 {
    #[inline(always)]
    fn minus(self, offset: i64) -> u64 {
        self.wrapping_sub(offset) as u64
    }
}

impl Code for u64 {
    #[inline(always)]
    fn minus(self, offset: u64) -> u64 {
        self.wrapping_sub(offset)
    }
}

macro_rules! widen {
    ($($t:ty => $w:ty),*) => {$(
        impl Widen for $t {
            type Wide = $w;
            #[inline(always)]
            fn widen(self) -> $w {
                <$w>::from(self)
            }
        }
    )*};
}
widen!(i8 => i64, i16 => i64, i32 => i64, i64 => i64, u8 => u64, u16 => u64, u32 => u64, u64 => u64);

impl Range {
    /// Writes every value's code into `out`; returns whether any is out of
    /// range. With AVX2 where the CPU has it (a 64-bit compare in one
    /// instruction, which the x86-64 baseline emulates in five).
    fn codes<T: Widen>(self, values: &[T], offset: T::Wide, out: &mut Vec<u64>) -> bool {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { self.codes_avx2(values, offset, out) };
        }
        self.codes_loop(values, offset, out)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn codes_avx2<T: Widen>(self, values: &[T], offset: T::Wide, out: &mut Vec<u64>) -> bool {
        self.codes_loop(values, offset, out)
    }

    #[inline(always)]
    fn codes_loop<T: Widen>(self, values: &[T], offset: T::Wide, out: &mut Vec<u64>) -> bool {
        let Range { lim, capped } = self;
        let mut over = false;
        out.clear();
        out.extend(values.iter().map(|v| {
            let v = v.widen();
            let d = v.minus(offset);
            over |= !capped & ((v < offset) | (d > lim));
            d
        }));
        over
    }
}

/// An integer-like column of up to 64 bits as `i64` (or `u64`) values, with
/// the part's offset in that type.
enum Widened {
    Signed(PrimitiveArray<Int64Type>, i64),
    Unsigned(PrimitiveArray<UInt64Type>, u64),
}

fn widened(part: &Part, column: &ArrayRef) -> Option<Widened> {
    use DataType as T;
    if !matches!(part.kind, PartKind::Signed | PartKind::Unsigned) {
        return None;
    }
    let cast = |to: &DataType| datafusion::arrow::compute::cast(column, to).ok();
    match column.data_type() {
        T::Int8
        | T::Int16
        | T::Int32
        | T::Int64
        | T::Date32
        | T::Date64
        | T::Time32(_)
        | T::Time64(_)
        | T::Timestamp(..)
        | T::Duration(_) => Some(Widened::Signed(
            cast(&T::Int64)?.as_primitive::<Int64Type>().clone(),
            i64::try_from(part.offset).ok()?,
        )),
        T::UInt8 | T::UInt16 | T::UInt32 | T::UInt64 => Some(Widened::Unsigned(
            cast(&T::UInt64)?.as_primitive::<UInt64Type>().clone(),
            u64::try_from(part.offset).ok()?,
        )),
        _ => None,
    }
}

/// Packs another table's key rows against `packing` (the staged side's, in
/// `nulls distinct` mode): a row with a null part, or with a part outside
/// the staged footer range, cannot equal any staged key and is left out.
/// `out` gets the packed words of the rows kept.
pub fn pack_in_range<K: Key>(
    packing: &Packing,
    columns: &[ArrayRef],
    out: &mut Vec<K>,
) -> Result<(), PackError> {
    if let ([part], [column, ..]) = (&packing.parts[..], columns) {
        if let Some(w) = widened(part, column) {
            pack_one_in_range(part, column, w, out);
            return Ok(());
        }
    }
    let rows = columns.first().map_or(0, |c| c.len());
    let mut acc = vec![K::ZERO; rows];
    let mut keep = vec![true; rows];
    for (part, column) in packing.parts.iter().zip(columns) {
        if let Some(n) = column.logical_nulls().filter(|n| n.null_count() > 0) {
            keep.iter_mut()
                .enumerate()
                .for_each(|(i, k)| *k &= n.is_valid(i));
        }
        let limit = limit_of(part);
        let bits = part.bits;
        let mut put = |i: usize, below: bool, d: u64| {
            keep[i] &= !below & (u128::from(d) <= limit);
            acc[i] = acc[i].shl(bits).add(d, false);
        };
        match widened(part, column) {
            Some(Widened::Signed(values, off)) => {
                for (i, v) in values.values().iter().enumerate() {
                    put(i, *v < off, v.wrapping_sub(off) as u64);
                }
            }
            Some(Widened::Unsigned(values, off)) => {
                for (i, v) in values.values().iter().enumerate() {
                    put(i, *v < off, v.wrapping_sub(off));
                }
            }
            None => for_each_code(part, column, |i, d| {
                put(i, d > u128::from(u64::MAX), d as u64)
            })?,
        }
    }
    out.clear();
    out.extend(acc.iter().zip(&keep).filter(|(_, k)| **k).map(|(w, _)| *w));
    Ok(())
}

/// The largest code a part of `part.bits` bits holds.
fn limit_of(part: &Part) -> u128 {
    if part.bits == 0 {
        0
    } else {
        u128::MAX >> (128 - part.bits)
    }
}

/// [`pack_in_range`] of a key of one integer-like part: each kept value's
/// word is its offset from the staged minimum, pushed straight to `out`
/// (no per-batch word and mask vectors: the published side of `across
/// published` packs hundreds of millions of rows).
fn pack_one_in_range<K: Key>(part: &Part, column: &ArrayRef, w: Widened, out: &mut Vec<K>) {
    out.clear();
    let limit = limit_of(part);
    let nulls = column.logical_nulls().filter(|n| n.null_count() > 0);
    macro_rules! each {
        ($values:expr, $off:expr, $d:expr) => {
            match &nulls {
                None => {
                    for v in $values.values().iter() {
                        let d = $d(*v);
                        if *v >= $off && u128::from(d) <= limit {
                            out.push(K::ZERO.add(d, false));
                        }
                    }
                }
                Some(n) => {
                    for (i, v) in $values.values().iter().enumerate() {
                        let d = $d(*v);
                        if *v >= $off && u128::from(d) <= limit && n.is_valid(i) {
                            out.push(K::ZERO.add(d, false));
                        }
                    }
                }
            }
        };
    }
    match w {
        Widened::Signed(values, off) => each!(values, off, |v: i64| v.wrapping_sub(off) as u64),
        Widened::Unsigned(values, off) => each!(values, off, |v: u64| v.wrapping_sub(off)),
    }
}

/// A part of zero bits holds one value: check that every value is it.
fn check_constant(part: &Part, column: &ArrayRef) -> Result<(), PackError> {
    first_valid_where(part, column, |d| d != 0)
}

/// An out-of-range error naming the first valid row whose code `bad` says
/// is out of range.
fn first_valid_where(
    part: &Part,
    column: &ArrayRef,
    bad: impl Fn(u128) -> bool,
) -> Result<(), PackError> {
    let nulls = column.logical_nulls();
    let mut first = None;
    for_each_code(part, column, |i, d| {
        if first.is_none() && bad(d) && nulls.as_ref().is_none_or(|n| n.is_valid(i)) {
            first = Some(i);
        }
    })?;
    match first {
        Some(i) => Err(PackError::OutOfRange {
            column: part.column.clone(),
            value: display_at(column, i),
        }),
        None => Ok(()),
    }
}

fn display_at(column: &ArrayRef, i: usize) -> String {
    ScalarValue::try_from_array(column, i).map_or_else(|_| "?".into(), |s| s.to_string())
}

/// Calls `f(row, code)` for every row: the value minus the offset (values
/// below it wrap to codes above any limit), floats in total order. One
/// tight loop over one primitive buffer per type.
fn for_each_code(
    part: &Part,
    column: &ArrayRef,
    mut f: impl FnMut(usize, u128),
) -> Result<(), PackError> {
    let off = part.offset;
    macro_rules! prim {
        ($t:ty) => {
            for (i, v) in column.as_primitive::<$t>().values().iter().enumerate() {
                f(i, (*v as i128).wrapping_sub(off) as u128)
            }
        };
    }
    use DataType as T;
    match column.data_type() {
        T::Boolean => {
            let b: &BooleanArray = column.as_boolean();
            b.values()
                .iter()
                .enumerate()
                .for_each(|(i, v)| f(i, u128::from(v)))
        }
        T::Int8 => prim!(Int8Type),
        T::Int16 => prim!(Int16Type),
        T::Int32 => prim!(Int32Type),
        T::Int64 => prim!(Int64Type),
        T::UInt8 => prim!(UInt8Type),
        T::UInt16 => prim!(UInt16Type),
        T::UInt32 => prim!(UInt32Type),
        T::UInt64 => prim!(UInt64Type),
        T::Date32 => prim!(Date32Type),
        T::Date64 => prim!(Date64Type),
        T::Time32(TimeUnit::Second) => prim!(Time32SecondType),
        T::Time32(_) => prim!(Time32MillisecondType),
        T::Time64(TimeUnit::Microsecond) => prim!(Time64MicrosecondType),
        T::Time64(_) => prim!(Time64NanosecondType),
        T::Timestamp(TimeUnit::Second, _) => prim!(TimestampSecondType),
        T::Timestamp(TimeUnit::Millisecond, _) => prim!(TimestampMillisecondType),
        T::Timestamp(TimeUnit::Microsecond, _) => prim!(TimestampMicrosecondType),
        T::Timestamp(TimeUnit::Nanosecond, _) => prim!(TimestampNanosecondType),
        T::Duration(TimeUnit::Second) => prim!(DurationSecondType),
        T::Duration(TimeUnit::Millisecond) => prim!(DurationMillisecondType),
        T::Duration(TimeUnit::Microsecond) => prim!(DurationMicrosecondType),
        T::Duration(TimeUnit::Nanosecond) => prim!(DurationNanosecondType),
        T::Decimal32(..) => prim!(Decimal32Type),
        T::Decimal64(..) => prim!(Decimal64Type),
        T::Decimal128(..) => prim!(Decimal128Type),
        T::Float64 if part.kind == PartKind::Float64 => {
            let a: &PrimitiveArray<Float64Type> = column.as_primitive();
            for (i, v) in a.values().iter().enumerate() {
                f(i, u128::from(total_order64(zero(*v))))
            }
        }
        T::Float32 if part.kind == PartKind::Float32 => {
            let a: &PrimitiveArray<Float32Type> = column.as_primitive();
            for (i, v) in a.values().iter().enumerate() {
                f(i, u128::from(total_order32(zero32(*v))))
            }
        }
        other => {
            return Err(PackError::Type {
                column: part.column.clone(),
                found: other.clone(),
            })
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tight integer loop gives the codes and the out-of-range answer
    /// of the general one, values below the offset and at the extremes too.
    #[test]
    fn integer_codes_agree_with_the_general_loop() {
        use datafusion::arrow::array::{Int32Array, TimestampMillisecondArray, UInt16Array};
        use std::sync::Arc;
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![
                -5,
                99,
                100,
                200,
                355,
                356,
                i32::MIN,
                i32::MAX,
            ])),
            Arc::new(UInt16Array::from(vec![0, 99, 100, 355, 356, u16::MAX])),
            Arc::new(TimestampMillisecondArray::from(vec![
                i64::MIN,
                -1,
                100,
                i64::MAX,
            ])),
        ];
        for column in &columns {
            for (offset, bits) in [(100i128, 8u32), (0, 16), (-(1i128 << 31), 32), (100, 0)] {
                let part = Part {
                    column: "c".into(),
                    kind: if column.data_type() == &DataType::UInt16 {
                        PartKind::Unsigned
                    } else {
                        PartKind::Signed
                    },
                    offset,
                    bits,
                    null_code: false,
                    from_footers: true,
                };
                let limit = (u128::MAX >> (128 - bits.max(1))) * u128::from(bits > 0);
                let mut fast = Vec::new();
                let over = integer_codes(&part, column, limit, &mut fast);
                let mut slow = Vec::new();
                let mut slow_over = false;
                for_each_code(&part, column, |_, d| {
                    slow_over |= d > limit;
                    slow.push(d as u64);
                })
                .unwrap();
                if over.is_some() {
                    assert_eq!(
                        (over, &fast),
                        (Some(slow_over), &slow),
                        "{column:?} {offset} {bits}"
                    );
                }
            }
        }
    }
}
