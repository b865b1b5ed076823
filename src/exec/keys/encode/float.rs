//! Float key parts: codes that order like `total_cmp` (as Arrow's row
//! format and the grouped pass tell floats apart) and decode back, and
//! `-0.0` folded into `+0.0` (as the grouped pass folds them).

use datafusion::arrow::array::{ArrayRef, AsArray, PrimitiveArray};
use datafusion::arrow::datatypes::{DataType, Float32Type, Float64Type};

/// `-0.0` as `+0.0`: the grouped pass (DataFusion's group values) folds
/// them into one group, and keeps NaN payloads apart; so do packed codes.
pub(super) fn zero(v: f64) -> f64 {
    if v == 0.0 {
        0.0
    } else {
        v
    }
}

pub(super) fn zero32(v: f32) -> f32 {
    if v == 0.0 {
        0.0
    } else {
        v
    }
}

/// Float columns with `-0.0` folded into `+0.0`, for exact comparison of
/// keys in Arrow's row format (which would tell them apart).
pub fn fold_zeros(columns: &[ArrayRef]) -> Vec<ArrayRef> {
    columns
        .iter()
        .map(|c| -> ArrayRef {
            match c.data_type() {
                DataType::Float64 => {
                    let a: &PrimitiveArray<Float64Type> = c.as_primitive();
                    std::sync::Arc::new(a.unary::<_, Float64Type>(zero))
                }
                DataType::Float32 => {
                    let a: &PrimitiveArray<Float32Type> = c.as_primitive();
                    std::sync::Arc::new(a.unary::<_, Float32Type>(zero32))
                }
                _ => c.clone(),
            }
        })
        .collect()
}

/// The bits of `v` as an unsigned integer that orders like `f64::total_cmp`
/// (which is how Arrow's row format and the grouped pass tell floats apart).
pub(super) fn total_order64(v: f64) -> u64 {
    let s = v.to_bits() as i64;
    let t = s ^ ((((s >> 63) as u64) >> 1) as i64);
    (t as u64) ^ (1 << 63)
}

pub(super) fn total_order32(v: f32) -> u32 {
    let s = v.to_bits() as i32;
    let t = s ^ ((((s >> 31) as u32) >> 1) as i32);
    (t as u32) ^ (1 << 31)
}

pub(super) fn from_total_order64(code: u64) -> f64 {
    let t = (code ^ (1 << 63)) as i64;
    let s = t ^ ((((t >> 63) as u64) >> 1) as i64);
    f64::from_bits(s as u64)
}

pub(super) fn from_total_order32(code: u32) -> f32 {
    let t = (code ^ (1 << 31)) as i32;
    let s = t ^ ((((t >> 31) as u32) >> 1) as i32);
    f32::from_bits(s as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_codes_order_like_total_cmp_and_decode() {
        let mut vals = [
            f64::NAN,
            -0.0,
            0.0,
            -1.5,
            f64::INFINITY,
            f64::NEG_INFINITY,
            3.25,
            -f64::NAN,
        ];
        let mut by_code = vals;
        by_code.sort_by_key(|v| total_order64(*v));
        vals.sort_by(f64::total_cmp);
        assert_eq!(
            vals.map(f64::to_bits),
            by_code.map(f64::to_bits),
            "codes order like total_cmp"
        );
        for v in vals {
            assert_eq!(from_total_order64(total_order64(v)).to_bits(), v.to_bits());
            let w = v as f32;
            assert_eq!(from_total_order32(total_order32(w)).to_bits(), w.to_bits());
        }
    }
}
