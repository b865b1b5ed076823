//! What a key check found, and how repeated keys become [`Duplicates`]:
//! ranked as the grouped pass ranks them, from packed words or from rows,
//! with the key columns' types to decode them.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringViewArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};

use super::count;
use super::key::Key;
use crate::exec::topk::TopK;
use crate::exec::Duplicates;
use crate::exec::ExecError as Error;
use crate::exec::SAMPLES;
use crate::plan::keys::KeyJob;
use crate::staged::StagedInput;
use crate::value::Value;

/// What a key check found, and what it cost.
#[derive(Debug, Clone, Default)]
pub struct Found {
    pub duplicates: Duplicates,
    /// Distinct keys among the counted rows.
    pub distinct: u64,
    pub spilled_bytes: u64,
    /// One line a pass: what it did and how long it took.
    pub passes: Vec<String>,
}

/// The number of repeated packed words and the top samples, each word
/// decoded by `decode` into the key's values: packed words order like their
/// keys, so ranking needs no decoding.
/// `keys` repeated keys, of which `repeated` holds at least the first
/// [`SAMPLES`].
pub(super) fn rank_words<K: Key>(
    (mut repeated, keys): (Vec<(K, u64)>, u64),
    decode: impl Fn(K) -> Vec<Value>,
) -> Duplicates {
    count::rank_top(&mut repeated, SAMPLES);
    let samples = repeated.into_iter().map(|(w, n)| (decode(w), n)).collect();
    Duplicates { keys, samples }
}

pub(super) fn key_types(input: &StagedInput, job: &KeyJob) -> Result<Vec<DataType>, Error> {
    job.keys
        .iter()
        .map(|k| {
            input
                .schema
                .field_with_name(k)
                .map(|f| f.data_type().clone())
                .map_err(|e| Error::Audit(format!("key column `{k}`: {e}")))
        })
        .collect()
}

/// The number of repeated keys and the top samples, ranked as the grouped
/// pass ranks them.
pub(super) fn rank(
    converter: &RowConverter,
    names: &[String],
    repeated: Vec<(OwnedRow, u64)>,
) -> Result<Duplicates, Error> {
    if repeated.is_empty() {
        return Ok(Duplicates::default());
    }
    let mut columns = converter.convert_rows(repeated.iter().map(|(r, _)| r.row()))?;
    // Dictionary keys come back as their values.
    let mut fields: Vec<Field> = names
        .iter()
        .zip(&columns)
        .map(|(n, c)| Field::new(n, c.data_type().clone(), true))
        .collect();
    fields.push(Field::new(crate::plan::ROWS, DataType::Int64, false));
    let schema = Arc::new(Schema::new(fields));
    columns.push(Arc::new(Int64Array::from_iter_values(
        repeated.iter().map(|(_, n)| *n as i64),
    )));
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    let mut top = TopK::new(&schema, names.len(), SAMPLES)?;
    top.push(&batch)?;
    let top = top.finish()?;
    Ok(Duplicates {
        keys: top.groups,
        samples: top.best,
    })
}

/// The number of repeated exact keys of key columns `names` of `types`
/// (each key a tag byte and bytes, as [`super::filed`] files them, with
/// its rows) and the top samples, ranked as the grouped pass ranks them,
/// from the `best` of the `repeated` keys.
fn rank_best(
    names: &[String],
    types: &[DataType],
    best: Best,
    repeated: u64,
) -> Result<Duplicates, Error> {
    let types = values_of(types);
    let converter = converter(&types)?;
    let rows = owned_rows(&converter, &types, best.0)?;
    let ranked = rank(&converter, names, rows)?;
    Ok(Duplicates {
        keys: repeated,
        samples: ranked.samples,
    })
}

/// `types` with each dictionary type replaced by its values' type: a
/// dictionary's keys are filed and ranked as their values. (Arrow's row
/// format of a dictionary encodes every value of the dictionary each time,
/// which for a dictionary of millions of values, as pyarrow writes an
/// Arrow dictionary into every row group, took 34 s over 10M rows.)
pub(super) fn values_of(types: &[DataType]) -> Vec<DataType> {
    (types.iter())
        .map(|t| match t {
            DataType::Dictionary(_, v) => v.as_ref().clone(),
            t => t.clone(),
        })
        .collect()
}

/// A row converter of keys of `types`.
pub(super) fn converter(types: &[DataType]) -> Result<RowConverter, Error> {
    RowConverter::new(types.iter().map(|t| SortField::new(t.clone())).collect())
        .map_err(Error::from)
}

/// The repeated exact keys as rows of `converter`, for ranking.
pub(super) fn owned_rows(
    converter: &RowConverter,
    types: &[DataType],
    keys: Vec<(Box<[u8]>, u64)>,
) -> Result<Vec<(OwnedRow, u64)>, Error> {
    let [t @ (DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)] = types else {
        let parser = converter.parser();
        return Ok(keys
            .iter()
            .map(|(k, n)| (parser.parse(&k[1..]).owned(), *n))
            .collect());
    };
    let values = keys
        .iter()
        .map(|(k, _)| match k[0] {
            0 => Ok(None),
            _ => std::str::from_utf8(&k[1..]).map(Some),
        })
        .collect::<Result<StringViewArray, _>>()
        .map_err(|e| Error::Audit(format!("a text key is not UTF-8: {e}")))?;
    let column = cast(&values, t)?;
    let rows = converter.convert_columns(&[column])?;
    Ok(rows
        .iter()
        .zip(&keys)
        .map(|(r, (_, n))| (r.owned(), *n))
        .collect())
}

/// Exact keys counted one at a time: how many, how many of more than one
/// row, and the best samples of those.
#[derive(Default)]
pub(super) struct Tallied {
    pub distinct: u64,
    pub repeated: u64,
    best: Best,
}

impl Tallied {
    /// Counts the key `tag`, `bytes` of `rows` rows.
    pub(super) fn key(&mut self, tag: u8, bytes: &[u8], rows: u64) {
        self.distinct += 1;
        if rows > 1 {
            self.repeated += 1;
            self.best.offer(tag, bytes, rows);
        }
    }

    /// [`Self::key`] for keys that come in ascending order of their tag
    /// and bytes: once the samples are full, a key of no more rows than the
    /// last of them comes after it, so it is not compared.
    #[inline]
    pub(super) fn key_ascending(&mut self, tag: u8, bytes: &[u8], rows: u64) {
        match self.best.0.len() == SAMPLES && self.best.0.last().is_some_and(|b| rows <= b.1) {
            true => {
                self.distinct += 1;
                self.repeated += u64::from(rows > 1);
            }
            false => self.key(tag, bytes, rows),
        }
    }

    /// Counts what `other` counted (keys it did not share with this one).
    pub(super) fn absorb(&mut self, other: Tallied) {
        self.distinct += other.distinct;
        self.repeated += other.repeated;
        self.best.absorb(other.best);
    }

    /// Whether a key of `rows` rows would be a sample ([`Best::takes`]).
    pub(super) fn sample(&self, tag: u8, bytes: &[u8], rows: u64) -> bool {
        rows > 1 && self.best.takes(tag, bytes, rows)
    }

    /// Offers a key as a sample only (counted otherwise).
    pub(super) fn offer(&mut self, tag: u8, bytes: &[u8], rows: u64) {
        self.best.offer(tag, bytes, rows);
    }

    /// The repeated keys of key columns `names` of `types` ([`rank_best`]).
    pub(super) fn duplicates(
        self,
        names: &[String],
        types: &[DataType],
    ) -> Result<Duplicates, Error> {
        rank_best(names, types, self.best, self.repeated)
    }

    /// [`Self::duplicates`] of keys whose bytes are of a form of their
    /// own, ordered as `ORDER BY key` too: `decode` gives the key columns
    /// (of `types`, dictionaries as their values) of the kept keys' bytes.
    pub(super) fn duplicates_decoded(
        self,
        names: &[String],
        types: &[DataType],
        decode: impl FnOnce(&[&[u8]]) -> Result<Vec<ArrayRef>, Error>,
    ) -> Result<Duplicates, Error> {
        let converter = converter(&values_of(types))?;
        let keys: Vec<&[u8]> = self.best.0.iter().map(|(k, _)| &k[1..]).collect();
        let rows = converter.convert_columns(&decode(&keys)?)?;
        let kept = (rows.iter().zip(&self.best.0)).map(|(r, (_, n))| (r.owned(), *n));
        let ranked = rank(&converter, names, kept.collect())?;
        Ok(Duplicates {
            keys: self.repeated,
            samples: ranked.samples,
        })
    }

    /// The samples kept, best first: (tag, bytes, rows).
    #[cfg(test)]
    pub(super) fn samples(&self) -> Vec<(u8, &[u8], u64)> {
        self.best.samples()
    }
}

/// The [`SAMPLES`] best of the repeated exact keys offered (each a tag
/// byte, 0 for a null text value, and bytes, with its rows), kept as they
/// come: by rows descending, then by their bytes ascending, which is the
/// order [`rank_best`] gives them (a key's bytes after its tag are Arrow's
/// row format, or a text value's UTF-8, both ordered as `ORDER BY key`; the
/// tag puts a null text value first, as nulls sort there). So only these
/// few are converted and ranked: converting and ranking every key took 3 s
/// for 5M keys repeated twice, and copying each out to be ranked 0.4 s.
#[derive(Default)]
struct Best(Vec<(Box<[u8]>, u64)>);

impl Best {
    /// Whether [`Best::offer`] would keep (tag, bytes, rows).
    fn takes(&self, tag: u8, bytes: &[u8], rows: u64) -> bool {
        self.0.len() < SAMPLES || self.0.last().is_some_and(|b| before((tag, bytes, rows), b))
    }

    /// Offers the key `tag`, `bytes` of `rows` rows.
    fn offer(&mut self, tag: u8, bytes: &[u8], rows: u64) {
        if !self.takes(tag, bytes, rows) {
            return;
        }
        let at = (self.0.iter())
            .position(|b| before((tag, bytes, rows), b))
            .unwrap_or(self.0.len());
        let mut key = Vec::with_capacity(bytes.len() + 1);
        key.push(tag);
        key.extend_from_slice(bytes);
        self.0.insert(at, (key.into_boxed_slice(), rows));
        self.0.truncate(SAMPLES);
    }

    /// Offers every key `other` kept.
    fn absorb(&mut self, other: Best) {
        for (key, rows) in other.0 {
            self.offer(key[0], &key[1..], rows);
        }
    }

    /// The keys kept, best first: (tag, bytes, rows).
    #[cfg(test)]
    fn samples(&self) -> Vec<(u8, &[u8], u64)> {
        (self.0.iter()).map(|(k, n)| (k[0], &k[1..], *n)).collect()
    }
}

/// Whether (tag, bytes, rows) ranks before the kept key `b`.
fn before((tag, bytes, rows): (u8, &[u8], u64), b: &(Box<[u8]>, u64)) -> bool {
    rows.cmp(&b.1)
        .reverse()
        .then_with(|| (tag, bytes).cmp(&(b.0[0], &b.0[1..])))
        .is_lt()
}
