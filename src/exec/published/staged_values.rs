//! The staged key columns' values, read once for pruning the published
//! side: per key column, the sorted distinct values (integer-like columns
//! as order-preserving codes; other columns as 16 bytes of their row
//! format after the prefix all of them share), or only their range when
//! there are too many, and which footer ranges `[min, max]` they admit.

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::{OwnedRow, Row, RowConverter, Rows, SortField};
use datafusion::logical_expr::{cast as cast_expr, Expr};
use datafusion::prelude::{ident, SessionContext};
use futures::StreamExt;

use crate::exec::ExecError as Error;
use crate::staged::StagedInput;

/// Staged values kept for pruning, in bytes of the row format a key
/// column: beyond it, only the column's range is kept.
const VALUES_BYTES: usize = 256 << 20;

/// What the staged keys admit of one key column.
enum Admit {
    /// The sorted distinct codes of an integer-like column (see
    /// [`int_codes`]), or (too many to keep) only their range.
    Ints(Vec<u64>, Option<(u64, u64)>),
    /// The non-null staged values as [`Cut`] keys, sorted and distinct.
    Values(Cut, Vec<u128>),
    /// Only the range of the staged values (too many to keep).
    Range(OwnedRow, OwnedRow),
    /// No staged value: no staged key, nothing is admitted.
    Nothing,
}

/// One key column's staged values and the converter they were made with.
pub(super) struct Column {
    converter: RowConverter,
    admit: Admit,
}

impl Column {
    /// For each entry of the footer ranges `mins`/`maxes` (of `rows` rows,
    /// `nulls` of them null): whether it can hold a staged value. A range
    /// of only nulls holds no key; a range that is missing or cannot be
    /// compared is read.
    pub(super) fn admits_ranges(
        &self,
        ty: &DataType,
        mins: &ArrayRef,
        maxes: &ArrayRef,
        nulls: &dyn Fn(usize) -> Option<u64>,
        rows: &dyn Fn(usize) -> u64,
    ) -> Vec<bool> {
        let within: Box<dyn Fn(usize) -> bool + '_> = match &self.admit {
            Admit::Nothing => Box::new(|_| false),
            Admit::Ints(codes, range) => {
                let bounds = (|| {
                    let lo = int_codes(&cast(mins, ty).ok()?)?;
                    let hi = int_codes(&cast(maxes, ty).ok()?)?;
                    Some((lo, hi))
                })();
                let Some((lo, hi)) = bounds else {
                    return vec![true; mins.len()];
                };
                Box::new(move |i| match (lo[i], hi[i], range) {
                    (Some(lo), Some(hi), Some((a, b))) => lo <= *b && hi >= *a,
                    (Some(lo), Some(hi), None) => {
                        let at = codes.partition_point(|c| *c < lo);
                        at < codes.len() && codes[at] <= hi
                    }
                    _ => true,
                })
            }
            Admit::Values(..) | Admit::Range(..) => {
                let bounds = (|| {
                    let mins = cast(mins, ty).ok()?;
                    let maxes = cast(maxes, ty).ok()?;
                    let convert =
                        |a: &ArrayRef| self.converter.convert_columns(std::slice::from_ref(a)).ok();
                    let (lo, hi) = (convert(&mins)?, convert(&maxes)?);
                    Some((mins, maxes, lo, hi))
                })();
                let Some((mins, maxes, lo, hi)) = bounds else {
                    return vec![true; mins.len()];
                };
                Box::new(move |i| {
                    mins.is_null(i) || maxes.is_null(i) || self.admits(lo.row(i), hi.row(i))
                })
            }
        };
        (0..mins.len())
            .map(|i| nulls(i).is_none_or(|k| k < rows(i)) && within(i))
            .collect()
    }

    /// Whether some staged value (kept as rows) lies within `[min, max]`.
    fn admits(&self, min: Row<'_>, max: Row<'_>) -> bool {
        match &self.admit {
            Admit::Range(lo, hi) => min <= hi.row() && max >= lo.row(),
            Admit::Values(cut, keys) => {
                let (lo, hi) = (cut.key(min.as_ref()), cut.key(max.as_ref()));
                let at = keys.partition_point(|k| *k < lo);
                at < keys.len() && keys[at] <= hi
            }
            Admit::Ints(..) | Admit::Nothing => unreachable!("answered by admits_ranges"),
        }
    }
}

/// The staged key columns' values, for pruning.
pub struct StagedValues {
    pub(super) columns: Vec<Column>,
}

impl StagedValues {
    /// Reads the staged key columns (cast to `types`) once.
    pub async fn read(
        ctx: &SessionContext,
        staged: &StagedInput,
        keys: &[String],
        types: &[DataType],
    ) -> Result<StagedValues, Error> {
        let exprs: Vec<Expr> = keys
            .iter()
            .zip(types)
            .map(|(k, t)| cast_expr(ident(k), t.clone()).alias(k))
            .collect();
        let frame = crate::exec::table(ctx, staged)?
            .select(exprs)
            .map_err(|e| Error::engine("planning the staged keys", e))?;
        let mut stream = frame
            .execute_stream()
            .await
            .map_err(|e| Error::engine("reading the staged keys", e))?;
        let mut columns = Vec::new();
        for t in types {
            let converter = RowConverter::new(vec![SortField::new(t.clone())])
                .map_err(|e| Error::Audit(format!("comparing keys of type {t}: {e}")))?;
            let values = if is_int(t) {
                Values::Ints(IntValues::default())
            } else {
                Values::Rows {
                    kept: Some(converter.empty_rows(0, 0)),
                    range: None,
                }
            };
            columns.push((converter, values));
        }
        while let Some(batch) = stream.next().await {
            let batch = batch.map_err(|e| Error::engine("reading the staged keys", e))?;
            for ((converter, values), array) in columns.iter_mut().zip(batch.columns()) {
                let (kept, range) = match values {
                    Values::Ints(acc) => {
                        acc.push(int_codes(array));
                        continue;
                    }
                    Values::Rows { kept, range } => (kept, range),
                };
                let rows = converter
                    .convert_columns(std::slice::from_ref(array))
                    .map_err(|e| Error::Audit(format!("comparing staged keys: {e}")))?;
                for r in (0..array.len()).filter(|r| array.is_valid(*r)) {
                    let row = rows.row(r);
                    match range {
                        None => *range = Some((row.owned(), row.owned())),
                        Some((lo, hi)) => {
                            if row < lo.row() {
                                *lo = row.owned();
                            }
                            if row > hi.row() {
                                *hi = row.owned();
                            }
                        }
                    }
                    if let Some(k) = kept {
                        k.push(row);
                    }
                }
                if kept.as_ref().is_some_and(|k| k.size() > VALUES_BYTES) {
                    *kept = None;
                }
            }
        }
        let columns = columns
            .into_iter()
            .map(|(converter, values)| {
                let admit = match values {
                    Values::Ints(acc) => acc.admit(),
                    Values::Rows { range: None, .. } => Admit::Nothing,
                    Values::Rows {
                        kept: None,
                        range: Some((lo, hi)),
                    } => Admit::Range(lo, hi),
                    Values::Rows {
                        kept: Some(rows),
                        range: Some((lo, hi)),
                    } => {
                        let cut = Cut::of(lo.row().as_ref(), hi.row().as_ref());
                        let mut keys: Vec<u128> = (0..rows.num_rows())
                            .map(|i| cut.key(rows.row(i).as_ref()))
                            .collect();
                        keys.sort_unstable();
                        keys.dedup();
                        Admit::Values(cut, keys)
                    }
                };
                Column { converter, admit }
            })
            .collect();
        Ok(StagedValues { columns })
    }
}

/// One key column's staged values while they are read.
enum Values {
    Ints(IntValues),
    /// In the row format: all of them while they fit [`VALUES_BYTES`], and
    /// their range.
    Rows {
        kept: Option<Rows>,
        range: Option<(OwnedRow, OwnedRow)>,
    },
}

/// An integer-like column's staged codes: all of them while they fit
/// [`VALUES_BYTES`], then only their range.
#[derive(Default)]
struct IntValues {
    codes: Vec<u64>,
    range: Option<(u64, u64)>,
    /// Too many codes: only `range` is kept.
    ranged: bool,
    /// A batch that could not be coded: everything is admitted.
    unknown: bool,
}

impl IntValues {
    fn push(&mut self, codes: Option<Vec<Option<u64>>>) {
        let Some(codes) = codes else {
            self.unknown = true;
            return;
        };
        for c in codes.into_iter().flatten() {
            self.range = Some(match self.range {
                None => (c, c),
                Some((lo, hi)) => (lo.min(c), hi.max(c)),
            });
            if !self.ranged {
                self.codes.push(c);
            }
        }
        if self.codes.len() > VALUES_BYTES / 8 {
            self.ranged = true;
            self.codes = Vec::new();
        }
    }

    fn admit(mut self) -> Admit {
        match self.range {
            _ if self.unknown => Admit::Ints(Vec::new(), Some((0, u64::MAX))),
            None => Admit::Nothing,
            Some(r) if self.ranged => Admit::Ints(Vec::new(), Some(r)),
            Some(_) => {
                self.codes.sort_unstable();
                self.codes.dedup();
                Admit::Ints(self.codes, None)
            }
        }
    }
}

/// Whether `t` is integer-like: its values order as their [`int_codes`].
fn is_int(t: &DataType) -> bool {
    t.is_integer()
        || matches!(
            t,
            DataType::Date32 | DataType::Date64 | DataType::Timestamp(_, _)
        )
}

/// Order-preserving codes of an integer-like array: signed values (dates
/// and timestamps as their integers) with the sign bit flipped, unsigned
/// values as they are; `None` for a null. `None` for other types.
fn int_codes(array: &ArrayRef) -> Option<Vec<Option<u64>>> {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Int64Type, UInt64Type};
    if !is_int(array.data_type()) {
        return None;
    }
    if array.data_type().is_unsigned_integer() {
        let a = cast(array, &DataType::UInt64).ok()?;
        return Some(a.as_primitive::<UInt64Type>().iter().collect());
    }
    let a = cast(array, &DataType::Int64).ok()?;
    Some(
        a.as_primitive::<Int64Type>()
            .iter()
            .map(|v| v.map(|v| (v as u64) ^ (1 << 63)))
            .collect(),
    )
}

/// Values in the row format cut to one `u128` each, in an order-keeping
/// way (`a <= b` gives `key(a) <= key(b)`): the bytes all staged values
/// share (those of their least and greatest) are skipped, and the next 16
/// are the key. A range `[min, max]` is admitted when some staged key lies
/// within `[key(min), key(max)]`: never less than the values admit, more
/// only when values differ beyond those 16 bytes. A sort of these keys is
/// a sort of 16-byte integers; the rows themselves, with an index each,
/// spent most of their sort in `memcmp`.
pub(super) struct Cut {
    shared: Vec<u8>,
}

impl Cut {
    /// The cut of values from `lo` to `hi` (the least and the greatest).
    fn of(lo: &[u8], hi: &[u8]) -> Cut {
        let n = lo.iter().zip(hi).take_while(|(a, b)| a == b).count();
        Cut {
            shared: lo[..n].to_vec(),
        }
    }

    /// The key of `row`: 0 below every value that shares the prefix,
    /// `u128::MAX` above every one, else the 16 bytes after the prefix
    /// (zero-padded: a row that is a prefix of another sorts first).
    fn key(&self, row: &[u8]) -> u128 {
        let n = self.shared.len();
        let head = &row[..n.min(row.len())];
        match head.cmp(&self.shared[..]) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Greater => u128::MAX,
            std::cmp::Ordering::Equal => {
                let rest = &row[head.len()..];
                let mut p = [0u8; 16];
                let k = rest.len().min(16);
                p[..k].copy_from_slice(&rest[..k]);
                u128::from_be_bytes(p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use std::sync::Arc;

    fn ints(values: Vec<Option<i64>>) -> ArrayRef {
        Arc::new(Int64Array::from(values))
    }

    /// Text keys that share a long prefix and differ within or beyond the
    /// 16 bytes after it: the cut keeps their order, and a range holding
    /// a staged value is always admitted.
    #[test]
    fn cut_keys_keep_the_order_and_never_refuse_a_range_with_a_value() {
        use datafusion::arrow::array::StringArray;
        let shared = "https://shop.example.com/orders/2026-12-03/";
        let mut values: Vec<String> = [
            "",
            "0",
            "00000000000000000001",
            "00000000000000000002",
            "1",
            "9",
            "é",
        ]
        .iter()
        .map(|s| format!("{shared}{s}"))
        .collect();
        values.extend(
            [
                "a",
                "",
                "https://",
                "zz",
                "https://shop.example.com/orders/2026-12-04/1",
            ]
            .map(String::from),
        );
        let array: ArrayRef = Arc::new(StringArray::from(values.clone()));
        let converter = RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap();
        let rows = converter.convert_columns(&[array]).unwrap();
        let mut order: Vec<usize> = (0..values.len()).collect();
        order.sort_by_key(|i| &values[*i]);
        // Staged: the ones under the shared prefix.
        let staged: Vec<usize> = (0..7).collect();
        let (lo, hi) = (
            staged.iter().map(|i| rows.row(*i)).min().unwrap(),
            staged.iter().map(|i| rows.row(*i)).max().unwrap(),
        );
        let cut = Cut::of(lo.as_ref(), hi.as_ref());
        assert!(cut.shared.len() >= shared.len());
        for w in order.windows(2) {
            let (a, b) = (rows.row(w[0]), rows.row(w[1]));
            assert!(
                cut.key(a.as_ref()) <= cut.key(b.as_ref()),
                "{:?} {:?}",
                values[w[0]],
                values[w[1]]
            );
        }
        let mut keys: Vec<u128> = staged
            .iter()
            .map(|i| cut.key(rows.row(*i).as_ref()))
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let column = Column {
            converter,
            admit: Admit::Values(cut, keys),
        };
        // Every range of two of the values: admitted when a staged value
        // lies within it.
        for a in 0..values.len() {
            for b in 0..values.len() {
                if values[a] > values[b] {
                    continue;
                }
                let holds = staged
                    .iter()
                    .any(|s| values[a] <= values[*s] && values[*s] <= values[b]);
                if holds {
                    assert!(
                        column.admits(rows.row(a), rows.row(b)),
                        "{:?}..{:?}",
                        values[a],
                        values[b]
                    );
                }
            }
        }
        // Ranges wholly above the staged values are refused (one below
        // them may be admitted: its key, 0, can be the least value's).
        for above in [values.len() - 2, values.len() - 1] {
            let r = rows.row(above);
            assert!(!column.admits(r, r), "{:?}", values[above]);
        }
    }

    #[test]
    fn int_codes_keep_the_order_of_signed_values() {
        let c = int_codes(&ints(vec![
            Some(-5),
            None,
            Some(0),
            Some(i64::MAX),
            Some(i64::MIN),
        ]))
        .unwrap();
        assert_eq!(c[1], None);
        assert!(c[4] < c[0] && c[0] < c[2] && c[2] < c[3]);
    }

    fn column(staged: Vec<Option<i64>>, ranged: bool) -> Column {
        let mut v = IntValues::default();
        v.push(int_codes(&ints(staged)));
        v.ranged = ranged;
        Column {
            converter: RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap(),
            admit: v.admit(),
        }
    }

    #[test]
    fn a_range_is_read_only_when_a_staged_value_lies_within_it() {
        let mins = ints(vec![Some(0), Some(11), Some(21), Some(31), None, Some(-9)]);
        let maxes = ints(vec![Some(9), Some(19), Some(30), Some(40), None, Some(10)]);
        let nulls = |i: usize| (i == 5).then_some(4);
        let rows = |_| 4;
        let staged = vec![Some(10), None, Some(20), Some(30), Some(10)];
        let got = column(staged.clone(), false).admits_ranges(
            &DataType::Int64,
            &mins,
            &maxes,
            &nulls,
            &rows,
        );
        // 0..9 and 11..19 hold none; 21..30 holds 30; no range: read; all
        // null: nothing to read.
        assert_eq!(got, [false, false, true, false, true, false]);
        let got =
            column(staged, true).admits_ranges(&DataType::Int64, &mins, &maxes, &nulls, &rows);
        assert_eq!(
            got,
            [false, true, true, false, true, false],
            "only 10..=30 kept"
        );
        let none = column(vec![None, None], false);
        assert!(matches!(none.admit, Admit::Nothing));
    }
}
