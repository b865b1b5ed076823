//! What a verification ([`super::verify`], [`super::spilled`]) reads and
//! files with: its budget, the rows of a batch of key columns it picks by
//! their fingerprint, and their exact keys as bytes ([`Form`]).

use datafusion::arrow::array::{Array, ArrayRef, AsArray as _, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::RowConverter;

use std::sync::Arc;

use datafusion::execution::memory_pool::MemoryLimit;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::prelude::SessionContext;

use super::encode;
use super::filed::{Candidates, Filed};
use super::found::{converter, key_types, values_of};
use crate::exec::ExecError as Error;
use crate::plan::keys::KeyJob;
use crate::staged::StagedInput;

/// A batch's candidate rows and their ordinals.
#[derive(Default)]
pub(super) struct Hits {
    rows: Vec<u32>,
    ordinals: Vec<u32>,
}

impl Hits {
    /// The counted rows of a batch whose fingerprint (`hashes`) `pick`
    /// gives an ordinal.
    pub(super) fn pick(
        &mut self,
        (columns, hashes): (&[ArrayRef], &[u64]),
        nulls_equal: bool,
        pick: impl Fn(u64) -> Option<u32>,
    ) {
        let counted = encode::counted_rows(columns, nulls_equal);
        self.rows.clear();
        self.ordinals.clear();
        for (i, &w) in hashes.iter().enumerate() {
            if !counted.as_ref().is_none_or(|v| v.is_valid(i)) {
                continue;
            }
            if let Some(o) = pick(w) {
                self.rows.push(i as u32);
                self.ordinals.push(o);
            }
        }
    }

    /// Each picked row's exact key: `f(row, ordinal, tag, bytes)`.
    pub(super) fn keys(
        &self,
        columns: &[ArrayRef],
        form: &Form,
        f: impl FnMut(usize, u32, u8, &[u8]),
    ) -> Result<(), Error> {
        if self.rows.is_empty() {
            return Ok(());
        }
        match form {
            Form::Text => text_keys(self, &columns[0], f),
            Form::Rows(conv) => row_keys(self, columns, conv, f),
        }
    }
}

/// A text value's tag and bytes (see [`Form`]).
fn text_key(value: Option<&[u8]>) -> (u8, &[u8]) {
    match value {
        Some(v) => (1, v),
        None => (0, &[]),
    }
}

fn text_keys(
    hits: &Hits,
    column: &ArrayRef,
    mut f: impl FnMut(usize, u32, u8, &[u8]),
) -> Result<(), Error> {
    let each = hits.rows.iter().map(|&i| i as usize).zip(&hits.ordinals);
    let mut file = |i: usize, o: u32, v: Option<&[u8]>| {
        let (tag, bytes) = text_key(v);
        f(i, o, tag, bytes)
    };
    if let DataType::Dictionary(..) = column.data_type() {
        let taken = cast(
            &taken_values(std::slice::from_ref(column), &hits.rows)?[0],
            &DataType::Utf8View,
        )?;
        let a = taken.as_string_view();
        for (j, (i, &o)) in each.enumerate() {
            file(i, o, a.is_valid(j).then(|| a.value(j).as_bytes()));
        }
        return Ok(());
    }
    match column.data_type() {
        DataType::Utf8View => {
            let a = column.as_string_view();
            each.for_each(|(i, &o)| file(i, o, a.is_valid(i).then(|| a.value(i).as_bytes())));
        }
        DataType::LargeUtf8 => {
            let a = column.as_string::<i64>();
            each.for_each(|(i, &o)| file(i, o, a.is_valid(i).then(|| a.value(i).as_bytes())));
        }
        _ => {
            let a = column.as_string::<i32>();
            each.for_each(|(i, &o)| file(i, o, a.is_valid(i).then(|| a.value(i).as_bytes())));
        }
    }
    Ok(())
}

fn row_keys(
    hits: &Hits,
    columns: &[ArrayRef],
    converter: &RowConverter,
    mut f: impl FnMut(usize, u32, u8, &[u8]),
) -> Result<(), Error> {
    let taken = taken_values(&encode::fold_zeros(columns), &hits.rows)?;
    let rows = converter.convert_columns(&taken)?;
    for ((row, &o), &i) in rows.iter().zip(&hits.ordinals).zip(&hits.rows) {
        f(i as usize, o, 1, row.as_ref());
    }
    Ok(())
}

/// `columns` at rows `hit`, each dictionary as its values.
fn taken_values(columns: &[ArrayRef], hit: &[u32]) -> Result<Vec<ArrayRef>, Error> {
    let idx = UInt32Array::from(hit.to_vec());
    (columns.iter())
        .map(|c| {
            let taken = take(c.as_ref(), &idx, None)?;
            Ok(match c.data_type() {
                DataType::Dictionary(_, v) => cast(&taken, v)?,
                _ => taken,
            })
        })
        .collect()
}

/// Files the counted rows of one batch whose fingerprint (`hashes`) is a
/// candidate; returns how many there were.
pub(super) fn file_batch(
    filed: &mut Filed,
    batch: (&[ArrayRef], &[u64]),
    hits: &mut Hits,
    (form, candidates): (&Form, &Candidates),
    nulls_equal: bool,
) -> Result<usize, Error> {
    hits.pick(batch, nulls_equal, |w| candidates.index(w));
    hits.keys(batch.0, form, |_, o, tag, bytes| {
        filed.file(o, tag, bytes, 1)
    })?;
    Ok(hits.rows.len())
}

/// The fewest candidates whose rows are written to disk by round even
/// when their keys fit the budget.
pub(super) const SPILL: usize = 1 << 18;

/// Budget for the filed keys when no memory limit is set.
const DEFAULT_BUDGET: u64 = 1 << 30;

/// The bytes the exact keys may take: a quarter of `--memory-limit` (at
/// least 1 MiB), or [`DEFAULT_BUDGET`].
pub(crate) fn budget(ctx: &SessionContext) -> u64 {
    match ctx.runtime_env().memory_pool.memory_limit() {
        MemoryLimit::Finite(limit) => (limit as u64 / 4).max(1 << 20),
        _ => DEFAULT_BUDGET,
    }
}

/// How a row's exact key becomes bytes. Filed here, a key carries a tag
/// byte before them: 0 for a null text value, 1 otherwise.
pub(super) enum Form {
    /// A single text column: the value's bytes.
    Text,
    /// Arrow's row format.
    Rows(RowConverter),
}

impl Form {
    /// The form of keys of `types`: text (in a dictionary too) as text,
    /// anything else as rows of the types' values ([`values_of`]).
    pub(super) fn of(types: &[DataType]) -> Result<Form, Error> {
        Ok(match values_of(types).as_slice() {
            [DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View] => Form::Text,
            types => Form::Rows(converter(types)?),
        })
    }
}

/// The key types as `streams` decode them (as the footers say when there
/// is no stream).
pub(super) fn decoded_types(
    streams: &[SendableRecordBatchStream],
    input: &StagedInput,
    job: &KeyJob,
) -> Result<Vec<DataType>, Error> {
    Ok(match streams.first() {
        Some(s) => (s.schema().fields().iter())
            .map(|f| f.data_type().clone())
            .collect(),
        None => key_types(input, job)?,
    })
}

/// `file` of every scan task's kept rows, each in a blocking task of its
/// own, merged in task order.
pub(super) async fn file_each<T: Send + Sync + 'static>(
    kept: &[Arc<T>],
    file: impl Fn(&T) -> Result<Filed, Error> + Send + Sync + 'static,
) -> Result<Vec<Filed>, Error> {
    let file = Arc::new(file);
    let mut tasks = tokio::task::JoinSet::new();
    for (i, r) in kept.iter().enumerate() {
        let (r, file) = (r.clone(), file.clone());
        tasks.spawn_blocking(move || Ok::<_, Error>((i, file(&r)?)));
    }
    let mut parts = Vec::new();
    while let Some(done) = tasks.join_next().await {
        parts.push(done.map_err(|e| Error::Audit(format!("a key check task failed: {e}")))??);
    }
    parts.sort_by_key(|(i, _)| *i);
    Ok(parts.into_iter().map(|(_, f)| f).collect())
}
