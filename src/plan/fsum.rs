//! `exact_sum`: an order-independent sum of floating-point values.
//!
//! DataFusion sums floats in whatever order its threads finish, so the last
//! bits of `sum(f)` and `avg(f)` could differ between two runs over the same
//! files. A verdict must be byte-identical, so dqgate keeps Shewchuk's exact
//! partials (as Python's `math.fsum` does): the result is the exact sum
//! rounded once, whatever the order of rows, batches and partitions.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Float64Array, ListArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};

/// The UDAF: `exact_sum(Float64) -> Float64`, null when there are no values.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct ExactSum {
    signature: Signature,
}

impl ExactSum {
    pub fn udaf() -> AggregateUDF {
        AggregateUDF::from(ExactSum {
            signature: Signature::exact(vec![DataType::Float64], Volatility::Immutable),
        })
    }
}

impl AggregateUDFImpl for ExactSum {
    fn name(&self) -> &str {
        "exact_sum"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::<Partials>::default())
    }

    fn state_fields(&self, _: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let item = Arc::new(Field::new_list_field(DataType::Float64, true));
        Ok(vec![
            Arc::new(Field::new("partials", DataType::List(item), true)),
            Arc::new(Field::new("seen", DataType::Boolean, true)),
            Arc::new(Field::new("nan", DataType::Boolean, true)),
            Arc::new(Field::new("pos_inf", DataType::Boolean, true)),
            Arc::new(Field::new("neg_inf", DataType::Boolean, true)),
        ])
    }
}

/// Non-overlapping partials whose exact sum is the sum so far, plus the
/// special values seen.
#[derive(Debug, Default, Clone)]
pub struct Partials {
    partials: Vec<f64>,
    seen: bool,
    nan: bool,
    pos_inf: bool,
    neg_inf: bool,
}

impl Partials {
    pub fn add(&mut self, x: f64) {
        self.seen = true;
        if x.is_nan() {
            self.nan = true;
        } else if x.is_infinite() {
            if x > 0.0 {
                self.pos_inf = true;
            } else {
                self.neg_inf = true;
            }
        } else {
            self.add_finite(x);
        }
    }

    fn add_finite(&mut self, mut x: f64) {
        let mut i = 0;
        for j in 0..self.partials.len() {
            let mut y = self.partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                self.partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        self.partials.truncate(i);
        self.partials.push(x);
    }

    /// The exact sum, correctly rounded (`None` without values).
    pub fn total(&self) -> Option<f64> {
        if !self.seen {
            return None;
        }
        if self.nan || (self.pos_inf && self.neg_inf) {
            return Some(f64::NAN);
        }
        if self.pos_inf {
            return Some(f64::INFINITY);
        }
        if self.neg_inf {
            return Some(f64::NEG_INFINITY);
        }
        let p = &self.partials;
        let Some(mut n) = p.len().checked_sub(1) else {
            return Some(0.0);
        };
        let mut hi = p[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = p[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        // Round half to even across the remaining partials.
        if n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            if y == x - hi {
                hi = x;
            }
        }
        Some(hi)
    }
}

impl Accumulator for Partials {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let arr = values[0].as_primitive::<Float64Type>();
        for v in arr.iter().flatten() {
            self.add(v);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(ScalarValue::Float64(self.total()))
    }

    fn size(&self) -> usize {
        std::mem::size_of::<Self>() + self.partials.capacity() * 8
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let list = ScalarValue::new_list_nullable(
            &self
                .partials
                .iter()
                .map(|p| ScalarValue::Float64(Some(*p)))
                .collect::<Vec<_>>(),
            &DataType::Float64,
        );
        Ok(vec![
            ScalarValue::List(list),
            ScalarValue::Boolean(Some(self.seen)),
            ScalarValue::Boolean(Some(self.nan)),
            ScalarValue::Boolean(Some(self.pos_inf)),
            ScalarValue::Boolean(Some(self.neg_inf)),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists: &ListArray = states[0].as_list();
        let flag = |i: usize| -> &BooleanArray { states[i].as_boolean() };
        for row in 0..lists.len() {
            if lists.is_valid(row) {
                let inner = lists.value(row);
                let floats: &Float64Array = inner.as_primitive();
                for p in floats.iter().flatten() {
                    self.add_finite(p);
                }
            }
            self.seen |= flag(1).value(row);
            self.nan |= flag(2).value(row);
            self.pos_inf |= flag(3).value(row);
            self.neg_inf |= flag(4).value(row);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(values: &[f64]) -> f64 {
        let mut p = Partials::default();
        values.iter().for_each(|v| p.add(*v));
        p.total().unwrap()
    }

    #[test]
    fn exact_and_order_independent() {
        let v = [1e100, 1.0, -1e100, 1e-3, 0.1, 0.2, 0.3];
        let a = sum(&v);
        let mut r = v;
        r.reverse();
        assert_eq!(a.to_bits(), sum(&r).to_bits());
        assert_eq!(sum(&[0.1, 0.2, 0.3]), 0.6);
        assert_eq!(sum(&[1e308, -1e308, 1e308]), 1e308);
        // Known limit: an intermediate sum beyond f64 range (1e308 + 1e308) is not
        // representable in the partials; such sums end as infinity or NaN.
        assert!(!sum(&[1e308, 1e308, -1e308]).is_finite());
    }

    #[test]
    fn special_values() {
        assert!(sum(&[1.0, f64::NAN]).is_nan());
        assert!(sum(&[f64::INFINITY, f64::NEG_INFINITY]).is_nan());
        assert_eq!(sum(&[f64::INFINITY, 1.0]), f64::INFINITY);
        assert_eq!(Partials::default().total(), None);
    }

    #[test]
    fn merged_halves_equal_one_pass() {
        let values: Vec<f64> = (0..1000)
            .map(|i| (i as f64).sin() * 10f64.powi(i % 17 - 8))
            .collect();
        let mut left = Partials::default();
        let mut right = Partials::default();
        values[..500].iter().for_each(|v| left.add(*v));
        values[500..].iter().for_each(|v| right.add(*v));
        let state = right.state().unwrap();
        let arrays: Vec<ArrayRef> = state.iter().map(|s| s.to_array().unwrap()).collect();
        left.merge_batch(&arrays).unwrap();
        assert_eq!(left.total().unwrap().to_bits(), sum(&values).to_bits());
    }
}
