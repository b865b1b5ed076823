//! Duplicate detection for an integer key whose range is known and dense:
//! one bit per possible key value instead of a hash table.
//!
//! When the footers give the exact min and max of an integer key column and
//! the range is not much larger than the row count, a bitmap of `max - min + 1`
//! bits finds every repeated key in one streaming pass over that column alone:
//! each partition of the scan sets bits with an atomic `fetch_or`, and a value
//! whose bit was already set is a duplicate occurrence, counted in a small map
//! of duplicated keys only. For 50M unique keys the bitmap is 8 MiB, where a
//! hash aggregate holds every key.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type};
use datafusion::prelude::SessionContext;
use futures::StreamExt;

use super::ExecError as Error;
use super::{Duplicates, SAMPLES};
use crate::staged::StagedInput;
use crate::value::Value;

/// The largest bitmap dqgate builds: 2^32 bits, 512 MiB.
pub const MAX_BITS: u64 = 1 << 32;

/// Whether a key range of `span` values suits a bitmap for `rows` rows
/// within `memory_limit` bytes.
pub fn worthwhile(span: u64, rows: u64, memory_limit: Option<usize>) -> bool {
    let bytes = span.div_ceil(8);
    span <= MAX_BITS
        && span <= rows.saturating_mul(64).max(1 << 20)
        && memory_limit.is_none_or(|limit| bytes <= limit as u64 / 2)
}

/// Finds duplicated values of `column`, all within `[min, max]`.
pub async fn duplicates(
    ctx: &SessionContext,
    input: &StagedInput,
    column: &str,
    (min, max): (i64, i64),
    label: &str,
) -> Result<Duplicates, Error> {
    let span = (max as i128 - min as i128 + 1) as u64;
    let (streams, _bar) = super::keys::streams(ctx, input, &[column.to_string()], label).await?;
    let bits: Arc<Vec<AtomicU64>> =
        Arc::new((0..span.div_ceil(64)).map(|_| AtomicU64::new(0)).collect());
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|stream| tokio::spawn(mark_partition(stream, bits.clone(), min, max)))
        .collect();
    let mut extra: HashMap<i64, u64> = HashMap::new();
    for t in tasks {
        let part = t
            .await
            .map_err(|e| Error::Audit(format!("a key check task failed: {e}")))??;
        for (k, n) in part {
            *extra.entry(k).or_default() += n;
        }
    }
    let mut ranked: Vec<(i64, u64)> = extra.into_iter().map(|(k, n)| (k, n + 1)).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(Duplicates {
        keys: ranked.len() as u64,
        samples: ranked
            .into_iter()
            .take(SAMPLES)
            .map(|(k, n)| (vec![Value::Int(k as i128)], n))
            .collect(),
    })
}

/// Sets the bits of one partition's keys; returns each duplicated key with
/// how many extra times this partition saw it.
async fn mark_partition(
    mut stream: datafusion::execution::SendableRecordBatchStream,
    bits: Arc<Vec<AtomicU64>>,
    min: i64,
    max: i64,
) -> Result<HashMap<i64, u64>, Error> {
    let mut extra: HashMap<i64, u64> = HashMap::new();
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(|e| Error::engine("running a key check", e))?;
        let column = batch.column(0);
        let keys = if column.data_type() == &DataType::Int64 {
            column.clone()
        } else {
            cast(column, &DataType::Int64).map_err(|e| Error::Audit(format!("key column: {e}")))?
        };
        let keys = keys.as_primitive::<Int64Type>();
        for i in 0..keys.len() {
            if keys.is_null(i) {
                continue;
            }
            let k = keys.value(i);
            if k < min || k > max {
                return Err(Error::Audit(format!(
                    "key value {k} lies outside the range [{min}, {max}] that the Parquet statistics declare: the files are inconsistent"
                )));
            }
            let at = (k as i128 - min as i128) as u64;
            let bit = 1u64 << (at & 63);
            if bits[(at >> 6) as usize].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
                *extra.entry(k).or_default() += 1;
            }
        }
    }
    Ok(extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_only_where_they_pay() {
        assert!(worthwhile(50_000_000, 50_000_000, None));
        assert!(worthwhile(1000, 10, None), "tiny ranges are always fine");
        assert!(!worthwhile(1 << 40, 1 << 30, None), "beyond 512 MiB");
        assert!(!worthwhile(1 << 30, 1000, None), "sparse keys");
        assert!(
            !worthwhile(1 << 30, 1 << 30, Some(64 << 20)),
            "over the memory limit"
        );
    }
}
