//! The top offending keys of a grouped result, in one streaming pass.
//!
//! Groups arrive in any order; the [`TopK`] keeps the `k` largest by row count,
//! ties broken by key ascending (compared in Arrow's row format, which orders
//! like SQL `ORDER BY key ASC`), so samples are deterministic.

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Int64Type, Schema};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use datafusion::common::ScalarValue;

use crate::value::Value;

pub struct TopK {
    converter: RowConverter,
    key_columns: usize,
    k: usize,
    groups: u64,
    rows: u64,
    /// Sorted best first.
    best: Vec<(u64, OwnedRow)>,
}

/// The number of groups and the best ones, key values in column order.
pub struct Top {
    pub groups: u64,
    /// The sum of the groups' row counts.
    pub rows: u64,
    pub best: Vec<(Vec<Value>, u64)>,
    /// Bytes the grouped pass spilled to disk.
    pub spilled_bytes: u64,
}

impl TopK {
    /// `schema` is the grouped result's: key columns first, the count last.
    pub fn new(schema: &Schema, key_columns: usize, k: usize) -> Result<TopK, ArrowError> {
        let fields = schema.fields()[..key_columns]
            .iter()
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        Ok(TopK {
            converter: RowConverter::new(fields)?,
            key_columns,
            k,
            groups: 0,
            rows: 0,
            best: Vec::new(),
        })
    }

    pub fn push(&mut self, batch: &RecordBatch) -> Result<(), ArrowError> {
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        self.groups += n as u64;
        let counts = batch.column(self.key_columns).as_primitive::<Int64Type>();
        let rows = self
            .converter
            .convert_columns(&batch.columns()[..self.key_columns])?;
        for i in 0..n {
            let c = counts.value(i).max(0) as u64;
            self.rows += c;
            if self.best.len() == self.k {
                let (last_c, last_row) = &self.best[self.k - 1];
                if c < *last_c || (c == *last_c && rows.row(i) >= last_row.row()) {
                    continue;
                }
            }
            let row = rows.row(i).owned();
            let at = self
                .best
                .partition_point(|(bc, br)| *bc > c || (*bc == c && br.row() < row.row()));
            self.best.insert(at, (c, row));
            self.best.truncate(self.k);
        }
        Ok(())
    }

    pub fn finish(self) -> Result<Top, ArrowError> {
        let arrays = self
            .converter
            .convert_rows(self.best.iter().map(|(_, r)| r.row()))?;
        let mut best = Vec::with_capacity(self.best.len());
        for (i, (count, _)) in self.best.iter().enumerate() {
            let key = arrays
                .iter()
                .map(|a| value_at(a.as_ref(), i))
                .collect::<Result<Vec<_>, _>>()?;
            best.push((key, *count));
        }
        Ok(Top {
            groups: self.groups,
            rows: self.rows,
            best,
            spilled_bytes: 0,
        })
    }
}

pub(crate) fn value_at(a: &dyn Array, i: usize) -> Result<Value, ArrowError> {
    let s =
        ScalarValue::try_from_array(a, i).map_err(|e| ArrowError::ComputeError(e.to_string()))?;
    Ok(crate::scalar::from_scalar(&s).unwrap_or_else(|| Value::Text(s.to_string())))
}
