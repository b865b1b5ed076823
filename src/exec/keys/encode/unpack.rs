//! A packed key word back to the key's values, for samples.

use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::common::ScalarValue;

use super::float::{from_total_order32, from_total_order64};
use crate::exec::keys::key::Key;
use crate::plan::keys::{Packing, Part};
use crate::value::Value;

/// The key values a packed word stands for, in packing order.
pub fn unpack<K: Key>(packing: &Packing, types: &[DataType], word: K) -> Vec<Value> {
    let mut shift = packing.bits();
    packing
        .parts
        .iter()
        .zip(types)
        .map(|(part, ty)| {
            shift -= part.bits;
            let mut code = word.field(shift, part.bits);
            if part.null_code {
                if code == 0 {
                    return Value::Null;
                }
                code -= 1;
            }
            let s = scalar(part, ty, code);
            crate::scalar::from_scalar(&s).unwrap_or_else(|| Value::Text(s.to_string()))
        })
        .collect()
}

fn scalar(part: &Part, ty: &DataType, code: u128) -> ScalarValue {
    use DataType as T;
    use ScalarValue as S;
    let v = part.offset + code as i128;
    match ty {
        T::Boolean => S::Boolean(Some(code != 0)),
        T::Int8 => S::Int8(Some(v as i8)),
        T::Int16 => S::Int16(Some(v as i16)),
        T::Int32 => S::Int32(Some(v as i32)),
        T::Int64 => S::Int64(Some(v as i64)),
        T::UInt8 => S::UInt8(Some(v as u8)),
        T::UInt16 => S::UInt16(Some(v as u16)),
        T::UInt32 => S::UInt32(Some(v as u32)),
        T::UInt64 => S::UInt64(Some(v as u64)),
        T::Date32 => S::Date32(Some(v as i32)),
        T::Date64 => S::Date64(Some(v as i64)),
        T::Time32(TimeUnit::Second) => S::Time32Second(Some(v as i32)),
        T::Time32(_) => S::Time32Millisecond(Some(v as i32)),
        T::Time64(TimeUnit::Microsecond) => S::Time64Microsecond(Some(v as i64)),
        T::Time64(_) => S::Time64Nanosecond(Some(v as i64)),
        T::Timestamp(TimeUnit::Second, tz) => S::TimestampSecond(Some(v as i64), tz.clone()),
        T::Timestamp(TimeUnit::Millisecond, tz) => {
            S::TimestampMillisecond(Some(v as i64), tz.clone())
        }
        T::Timestamp(TimeUnit::Microsecond, tz) => {
            S::TimestampMicrosecond(Some(v as i64), tz.clone())
        }
        T::Timestamp(TimeUnit::Nanosecond, tz) => {
            S::TimestampNanosecond(Some(v as i64), tz.clone())
        }
        T::Duration(TimeUnit::Second) => S::DurationSecond(Some(v as i64)),
        T::Duration(TimeUnit::Millisecond) => S::DurationMillisecond(Some(v as i64)),
        T::Duration(TimeUnit::Microsecond) => S::DurationMicrosecond(Some(v as i64)),
        T::Duration(TimeUnit::Nanosecond) => S::DurationNanosecond(Some(v as i64)),
        T::Decimal32(p, s) => S::Decimal32(Some(v as i32), *p, *s),
        T::Decimal64(p, s) => S::Decimal64(Some(v as i64), *p, *s),
        T::Decimal128(p, s) => S::Decimal128(Some(v), *p, *s),
        T::Float64 => S::Float64(Some(from_total_order64(code as u64))),
        T::Float32 => S::Float32(Some(from_total_order32(code as u32))),
        other => S::try_from(other).unwrap_or(S::Null),
    }
}
