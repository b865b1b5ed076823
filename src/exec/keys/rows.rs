//! `values(k) in REF(k)` for keys the engine does not pack: text of any
//! form, binary, and composites with such parts. Exact: keys are compared as
//! their bytes in Arrow's row format, never by a hash alone.
//!
//! The reference is the build side: its distinct keys go into one set while
//! it streams (each scan task its own, merged after). The staged side then
//! streams past it, and only the staged keys the reference lacks are
//! counted, by key, for the value and the samples. Unlike the grouped
//! anti-join (which builds its table on the staged side and groups every
//! missing key after), nothing of the staged side is held but what fails.
//!
//! Memory is taken from DataFusion's pool as the sets grow; when the pool
//! refuses, the pass gives up and the grouped anti-join runs instead, which
//! spills.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::row::{RowConverter, Rows, SortField};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::prelude::SessionContext;

use super::join::{side_streams, Joined, Side};
use super::{scan, SAMPLES};
use crate::exec::topk::TopK;
use crate::exec::ExecError as Error;

/// What stops a pass whose sets outgrew the memory pool.
const GAVE_UP: &str = "\u{0}row join over memory";

/// Bytes a set entry costs beyond its key bytes (the box, the map slot).
const ENTRY: usize = 48;

type Set = HashMap<Box<[u8]>, u64, foldhash::fast::FixedState>;

fn new_set() -> Set {
    HashMap::with_hasher(foldhash::fast::FixedState::with_seed(0x5EED))
}

/// Whether a key of parts typed `staged` (compared in `compared`) joins
/// here: no float part (NaN and -0.0 compare their own way in the grouped
/// join), and each part compared in a type of its own family, so the cast
/// changes no value.
pub fn usable(staged: &[DataType], compared: &[DataType]) -> bool {
    fn family(t: &DataType) -> Option<u8> {
        match t {
            DataType::Dictionary(_, v) => family(v),
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Some(0),
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => Some(1),
            t if t.is_floating() => None,
            t if t.is_primitive() => Some(2),
            DataType::Boolean => Some(3),
            _ => None,
        }
    }
    let fields = |types: &[DataType]| -> Vec<SortField> {
        types.iter().map(|t| SortField::new(t.clone())).collect()
    };
    staged.len() == compared.len()
        && staged.iter().zip(compared).all(|(s, c)| {
            let same = s == c || matches!(family(s), Some(0 | 1)) && family(s) == family(c);
            same && family(s).is_some()
        })
        && RowConverter::supports_fields(&fields(staged))
        && RowConverter::supports_fields(&fields(compared))
}

/// How the pass runs, for `explain`.
pub fn describe() -> String {
    "by the key engine: the reference's distinct keys in one set (exact bytes in Arrow's row format), the staged keys streamed past it; only the missing ones counted".into()
}

/// One scan task's set and its share of the memory pool.
struct Task {
    set: Set,
    reservation: MemoryReservation,
    converter: RowConverter,
    /// Rows of the staged types, when they differ from the compared ones.
    staged: Option<RowConverter>,
}

impl Task {
    fn new(
        pool: &Arc<dyn MemoryPool>,
        compared: &[DataType],
        staged: &[DataType],
    ) -> Result<Task, Error> {
        let converter = |types: &[DataType]| {
            RowConverter::new(types.iter().map(|t| SortField::new(t.clone())).collect())
                .map_err(|e| Error::Audit(format!("comparing keys: {e}")))
        };
        Ok(Task {
            set: new_set(),
            reservation: MemoryConsumer::new("dqgate row join").register(pool),
            converter: converter(compared)?,
            staged: (staged != compared)
                .then(|| converter(staged))
                .transpose()?,
        })
    }

    fn rows(&self, columns: &[ArrayRef], types: &[DataType]) -> Result<Rows, Error> {
        let cast = columns
            .iter()
            .zip(types)
            .map(|(c, t)| cast(c, t))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Error::Audit(format!("comparing keys: {e}")))?;
        self.converter
            .convert_columns(&cast)
            .map_err(|e| Error::Audit(format!("comparing keys: {e}")))
    }

    /// Counts `key` in the set, taking memory for a new entry.
    fn count(&mut self, key: &[u8]) -> Result<(), Error> {
        if let Some(n) = self.set.get_mut(key) {
            *n += 1;
            return Ok(());
        }
        self.reservation
            .try_grow(key.len() + ENTRY)
            .map_err(|_| Error::Audit(GAVE_UP.into()))?;
        self.set.insert(key.into(), 1);
        Ok(())
    }
}

/// Rows of `columns` without a null part.
fn counted(columns: &[ArrayRef], n: usize) -> impl Iterator<Item = usize> + '_ {
    (0..n).filter(move |i| columns.iter().all(|c| c.is_valid(*i)))
}

/// The key parts' types on the staged side and as compared, and the pass's
/// progress label.
pub struct Lookup<'a> {
    pub staged_types: &'a [DataType],
    pub compared: &'a [DataType],
    pub label: &'a str,
}

/// Runs the anti-join; `None` when the memory pool refused its sets.
pub async fn missing(
    ctx: &SessionContext,
    staged: Side,
    other: Side,
    lookup: Lookup<'_>,
) -> Result<Option<Joined>, Error> {
    match run(ctx, staged, other, lookup).await {
        Err(Error::Audit(m)) if m == GAVE_UP => Ok(None),
        r => r.map(Some),
    }
}

async fn run(
    ctx: &SessionContext,
    staged: Side,
    other: Side,
    lookup: Lookup<'_>,
) -> Result<Joined, Error> {
    let Lookup {
        staged_types,
        compared,
        label,
    } = lookup;
    let started = Instant::now();
    let pool = ctx.runtime_env().memory_pool.clone();
    let (streams, bar) = side_streams(other, &format!("{label}, other side")).await?;
    let (p, c) = (pool.clone(), compared.to_vec());
    let tasks = scan(
        streams,
        move || Task::new(&p, &c, &c).expect("types checked by usable()"),
        {
            let compared = compared.to_vec();
            move |t: &mut Task, columns| {
                let rows = t.rows(columns, &compared)?;
                let n = columns.first().map_or(0, |c| c.len());
                for i in counted(columns, n) {
                    t.count(rows.row(i).as_ref())?;
                }
                Ok(())
            }
        },
    )
    .await?;
    drop(bar);
    let mut tasks = tasks.into_iter();
    let Some(mut reference) = tasks.next() else {
        return Err(Error::Audit("a join pass read no stream".into()));
    };
    for t in tasks {
        for (k, _) in t.set {
            if !reference.set.contains_key(&k) {
                reference
                    .reservation
                    .try_grow(k.len() + ENTRY)
                    .map_err(|_| Error::Audit(GAVE_UP.into()))?;
                reference.set.insert(k, 1);
            }
        }
    }
    let keys = reference.set.len();
    let built = started.elapsed();

    let probing = Instant::now();
    let reference = Arc::new(reference);
    let (streams, bar) = side_streams(staged, label).await?;
    let (p, c, s) = (pool.clone(), compared.to_vec(), staged_types.to_vec());
    let shared = reference.clone();
    let found = scan(
        streams,
        move || {
            (
                Task::new(&p, &c, &s).expect("types checked by usable()"),
                0u64,
            )
        },
        {
            let compared = compared.to_vec();
            move |(t, missing): &mut (Task, u64), columns| {
                let rows = t.rows(columns, &compared)?;
                let own = match &t.staged {
                    None => None,
                    Some(conv) => Some(
                        conv.convert_columns(columns)
                            .map_err(|e| Error::Audit(format!("comparing keys: {e}")))?,
                    ),
                };
                let n = columns.first().map_or(0, |c| c.len());
                for i in counted(columns, n) {
                    if !shared.set.contains_key(rows.row(i).as_ref()) {
                        *missing += 1;
                        let key = own.as_ref().map_or(rows.row(i), |o| o.row(i));
                        t.count(key.as_ref())?;
                    }
                }
                Ok(())
            }
        },
    )
    .await?;
    drop(bar);
    drop(reference);
    let probed = probing.elapsed();

    // The missing keys, merged, ranked as the grouped pass ranks them.
    let value: u64 = found.iter().map(|(_, m)| *m).sum();
    let mut merged = new_set();
    let mut converter = None;
    for (t, _) in found {
        converter.get_or_insert(t.staged.unwrap_or(t.converter));
        for (k, n) in t.set {
            *merged.entry(k).or_insert(0) += n;
        }
    }
    let samples = match converter {
        Some(conv) if !merged.is_empty() => top(&conv, staged_types.len(), merged)?,
        _ => Vec::new(),
    };
    Ok(Joined {
        value,
        samples,
        located: None,
        passes: vec![
            format!(
                "set of the reference's {keys} distinct key(s): {:.2} s",
                built.as_secs_f64()
            ),
            format!(
                "stream the staged keys past it, {value} row(s) missing: {:.2} s",
                probed.as_secs_f64()
            ),
        ],
    })
}

/// The [`SAMPLES`] keys with the most rows, count descending then key
/// ascending (as the grouped pass's top-k ranks them).
fn top(
    converter: &RowConverter,
    parts: usize,
    keys: Set,
) -> Result<Vec<(Vec<crate::value::Value>, u64)>, Error> {
    let parser = converter.parser();
    let (keys, counts): (Vec<Box<[u8]>>, Vec<u64>) = keys.into_iter().unzip();
    let arrays = converter
        .convert_rows(keys.iter().map(|k| parser.parse(k)))
        .map_err(|e| Error::Audit(format!("decoding keys: {e}")))?;
    // Dictionary parts come back as their values' type.
    let mut fields: Vec<Field> = arrays
        .iter()
        .enumerate()
        .map(|(i, a)| Field::new(format!("k{i}"), a.data_type().clone(), true))
        .collect();
    fields.push(Field::new("rows", DataType::Int64, false));
    let schema = Arc::new(Schema::new(fields));
    let mut columns = arrays;
    columns.push(Arc::new(Int64Array::from_iter_values(
        counts.iter().map(|n| *n as i64),
    )));
    let batch = RecordBatch::try_new(schema.clone(), columns)
        .map_err(|e| Error::Audit(format!("decoding keys: {e}")))?;
    let mut topk = TopK::new(&schema, parts, SAMPLES)
        .map_err(|e| Error::Audit(format!("ranking keys: {e}")))?;
    topk.push(&batch)
        .map_err(|e| Error::Audit(format!("ranking keys: {e}")))?;
    Ok(topk
        .finish()
        .map_err(|e| Error::Audit(format!("ranking keys: {e}")))?
        .best)
}
