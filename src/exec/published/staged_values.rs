//! The staged key columns' values, read once for pruning the published
//! side: per key column, the sorted values (integer-like columns as
//! order-preserving codes; text and binary columns as their own bytes,
//! other columns as their row format, see `staged_bytes`), or only their
//! range when there are too many, and which footer ranges `[min, max]`
//! they admit: those that hold a staged value.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int64Array, StringArray, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::execution::SendableRecordBatchStream;
use datafusion::logical_expr::{cast as cast_expr, Expr};
use datafusion::prelude::{ident, SessionContext};
use futures::StreamExt;

use super::staged_bytes::{bytes_of, is_bytes, BytesValues, StagedBytes};
use crate::exec::ExecError as Error;
use crate::keyindex::{Within, Zones};
use crate::staged::StagedInput;

/// Staged values kept for pruning, in bytes of the row format a key
/// column: beyond it, only the column's range is kept.
const VALUES_BYTES: usize = 256 << 20;

/// What the staged keys admit of one key column.
enum Admit {
    /// The sorted distinct codes of an integer-like column (see
    /// [`int_codes`]), or (too many to keep) only their range.
    Ints(Vec<u64>, Option<(u64, u64)>),
    /// The non-null staged values as bytes, sorted, or (too many to keep)
    /// only their range.
    Bytes(StagedBytes),
    /// No staged value: no staged key, nothing is admitted.
    Nothing,
}

/// One key column's staged values and the converter they were made with.
pub(super) struct Column {
    converter: RowConverter,
    admit: Admit,
    /// Whether the values' bytes are their rows of `converter` (else their
    /// own bytes, [`is_bytes`]).
    rows: bool,
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
            Admit::Bytes(staged) => {
                let n = mins.len();
                let (Ok(mins), Ok(maxes)) = (cast(mins, ty), cast(maxes, ty)) else {
                    return vec![true; n];
                };
                let admitted: Option<Vec<bool>> = if self.rows {
                    let convert =
                        |a: &ArrayRef| self.converter.convert_columns(std::slice::from_ref(a)).ok();
                    convert(&mins).zip(convert(&maxes)).map(|(lo, hi)| {
                        let within = |i| staged.admits(lo.row(i).data(), hi.row(i).data());
                        (0..n)
                            .map(|i| mins.is_null(i) || maxes.is_null(i) || within(i))
                            .collect()
                    })
                } else {
                    bytes_of(&mins).zip(bytes_of(&maxes)).map(|(lo, hi)| {
                        (0..n)
                            .map(|i| match (lo(i), hi(i)) {
                                (Some(lo), Some(hi)) => staged.admits(lo, hi),
                                _ => true,
                            })
                            .collect()
                    })
                };
                let Some(admitted) = admitted else {
                    return vec![true; n];
                };
                Box::new(move |i| admitted[i])
            }
        };
        (0..mins.len())
            .map(|i| nulls(i).is_none_or(|k| k < rows(i)) && within(i))
            .collect()
    }
}

/// The staged key columns' values, for pruning.
pub struct StagedValues {
    pub(super) columns: Vec<Column>,
}

impl StagedValues {
    /// The expressions the staged key columns are read by: cast to
    /// `types`, except text and binary columns, read as they come (their
    /// bytes order the same in every layout): no copy of each value into a
    /// new buffer, by the scan or by a cast.
    fn exprs(staged: &StagedInput, keys: &[String], types: &[DataType]) -> Vec<Expr> {
        // A column already of its compared type, or text compared as text,
        // is read as it comes.
        let as_is = |k: &String, t: &DataType| {
            let field = staged.schema.field_with_name(k).ok();
            field.is_some_and(|f| {
                f.data_type() == t
                    || is_bytes(t) && is_bytes(&crate::exec::scan::as_view(f.data_type()))
            })
        };
        keys.iter()
            .zip(types)
            .map(|(k, t)| match as_is(k, t) {
                true => ident(k),
                false => cast_expr(ident(k), t.clone()).alias(k),
            })
            .collect()
    }

    /// Whether the key columns are read as they come (no cast): then a
    /// scan of them that serves another reader too can serve this one
    /// ([`StagedValues::from_stream`]).
    pub fn reads_as_is(staged: &StagedInput, keys: &[String], types: &[DataType]) -> bool {
        StagedValues::exprs(staged, keys, types)
            .iter()
            .all(|e| matches!(e, Expr::Column(_)))
    }

    /// Reads the staged key columns (cast to `types`) once, or only about
    /// their first `most` rows (a sample: it admits a subset of what all
    /// the values admit).
    pub async fn read(
        ctx: &SessionContext,
        staged: &StagedInput,
        keys: &[String],
        types: &[DataType],
        (most, within): (Option<usize>, Option<&Within>),
    ) -> Result<StagedValues, Error> {
        let frame = crate::exec::scan::table_of_views(ctx, staged)?
            .select(StagedValues::exprs(staged, keys, types))
            .and_then(|f| match most {
                Some(n) => f.limit(0, Some(n)),
                None => Ok(f),
            })
            .map_err(|e| Error::engine("planning the staged keys", e))?;
        let stream = frame
            .execute_stream()
            .await
            .map_err(|e| Error::engine("reading the staged keys", e))?;
        StagedValues::from_stream(stream, types, within).await
    }

    /// The values of a stream of the staged key columns, read as
    /// [`StagedValues::read`] reads them (one column a key, cast to
    /// `types`). `within`: the published partitions' key zones, when every
    /// one has them; a value outside them is in no partition, so it cannot
    /// make one be read, and is left out.
    pub async fn from_stream(
        mut stream: SendableRecordBatchStream,
        types: &[DataType],
        within: Option<&Within>,
    ) -> Result<StagedValues, Error> {
        let mut columns = Vec::new();
        for t in types {
            let converter = RowConverter::new(vec![SortField::new(t.clone())])
                .map_err(|e| Error::Audit(format!("comparing keys of type {t}: {e}")))?;
            let values = match is_int(t) {
                true => Values::Ints(IntValues::default()),
                false => Values::Bytes(BytesValues::default(), !is_bytes(t)),
            };
            columns.push((converter, values));
        }
        while let Some(batch) = stream.next().await {
            let batch = batch.map_err(|e| Error::engine("reading the staged keys", e))?;
            let columns = columns.iter_mut().zip(batch.columns()).enumerate();
            for (c, ((converter, values), array)) in columns {
                match values {
                    Values::Ints(acc) => {
                        acc.push(array, |v| within.is_none_or(|w| w.holds_int(c, v)))
                    }
                    Values::Bytes(acc, false) => acc.push(array, VALUES_BYTES, |v| {
                        within.is_none_or(|w| w.holds_text(c, v))
                    }),
                    Values::Bytes(acc, true) => {
                        let rows = converter
                            .convert_columns(std::slice::from_ref(array))
                            .map_err(|e| Error::Audit(format!("comparing staged keys: {e}")))?;
                        let valid = (0..array.len()).filter(|r| array.is_valid(*r));
                        acc.extend(valid.map(|r| rows.row(r).data()), VALUES_BYTES);
                    }
                }
            }
        }
        let columns = columns
            .into_iter()
            .map(|(converter, values)| {
                let (admit, rows) = match values {
                    Values::Ints(acc) => (acc.admit(), false),
                    Values::Bytes(acc, rows) => {
                        (acc.finish().map_or(Admit::Nothing, Admit::Bytes), rows)
                    }
                };
                Column {
                    converter,
                    admit,
                    rows,
                }
            })
            .collect();
        Ok(StagedValues { columns })
    }
}

impl StagedValues {
    /// Whether a partition whose key zones are `zones` (one entry a key
    /// column, of the compared `types`; see `keyindex::Zones`) can hold a
    /// staged key: each column with zones has a staged value within one.
    pub fn admits_zones(&self, zones: &[Option<Zones>], types: &[DataType]) -> bool {
        if zones.len() != self.columns.len() || types.len() != zones.len() {
            return true;
        }
        let columns = self.columns.iter().zip(zones).zip(types);
        columns.into_iter().all(|((column, zones), ty)| {
            let Some((mins, maxes)) = zones.as_ref().and_then(zone_bounds) else {
                return true;
            };
            let admitted = column.admits_ranges(ty, &mins, &maxes, &|_| Some(0), &|_| 1);
            admitted.into_iter().any(|a| a)
        })
    }
}

/// Zones as the footer ranges' arrays of least and greatest values;
/// `None` when an integer zone fits neither 64-bit type.
fn zone_bounds(zones: &Zones) -> Option<(ArrayRef, ArrayRef)> {
    let arrays: (ArrayRef, ArrayRef) = match zones {
        Zones::Text(z) => (
            Arc::new(StringArray::from_iter_values(z.iter().map(|b| &b.0))),
            Arc::new(StringArray::from_iter_values(z.iter().map(|b| &b.1))),
        ),
        Zones::Int(z) => {
            let all = || z.iter().flat_map(|(lo, hi)| [*lo, *hi]);
            if all().all(|v| i64::try_from(v).is_ok()) {
                (
                    Arc::new(Int64Array::from_iter_values(z.iter().map(|b| b.0 as i64))),
                    Arc::new(Int64Array::from_iter_values(z.iter().map(|b| b.1 as i64))),
                )
            } else if all().all(|v| u64::try_from(v).is_ok()) {
                (
                    Arc::new(UInt64Array::from_iter_values(z.iter().map(|b| b.0 as u64))),
                    Arc::new(UInt64Array::from_iter_values(z.iter().map(|b| b.1 as u64))),
                )
            } else {
                return None;
            }
        }
    };
    Some(arrays)
}

/// One key column's staged values while they are read.
enum Values {
    Ints(IntValues),
    /// As bytes: their own, or (`true`) their row format.
    Bytes(BytesValues, bool),
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
    /// Adds the codes of the non-null values of `array` that `keep` holds.
    fn push(&mut self, array: &ArrayRef, keep: impl Fn(i128) -> bool) {
        let (mut range, ranged, codes) = (self.range, self.ranged, &mut self.codes);
        let coded = each_code(array, |coded| {
            let Some((c, _)) = coded.filter(|(_, v)| keep(*v)) else {
                return;
            };
            range = Some(range.map_or((c, c), |(lo, hi)| (lo.min(c), hi.max(c))));
            if !ranged {
                codes.push(c);
            }
        });
        if !coded {
            self.unknown = true;
            return;
        }
        self.range = range;
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
            Some(range) => {
                sort_distinct(&mut self.codes, range);
                Admit::Ints(self.codes, None)
            }
        }
    }
}

/// Sorts `codes` (all within `range`) and keeps each once. Codes dense in
/// their range (a day's rising ids) are set in a bitmap of the range and
/// read back in order, at a bit or two a code, instead of sorted.
fn sort_distinct(codes: &mut Vec<u64>, (lo, hi): (u64, u64)) {
    let span = hi - lo;
    if span / 16 > codes.len() as u64 {
        codes.sort_unstable();
        codes.dedup();
        return;
    }
    let mut bits = vec![0u64; (span / 64 + 1) as usize];
    for c in codes.iter() {
        let d = c - lo;
        bits[(d >> 6) as usize] |= 1 << (d & 63);
    }
    codes.clear();
    for (w, word) in bits.iter().enumerate() {
        let mut x = *word;
        while x != 0 {
            codes.push(lo + ((w as u64) << 6) + u64::from(x.trailing_zeros()));
            x &= x - 1;
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

/// Calls `f` with the code (see [`int_codes`]) and the value of each
/// value of an integer-like array, in order (`None` for a null); `false`
/// for other types.
fn each_code(array: &ArrayRef, mut f: impl FnMut(Option<(u64, i128)>)) -> bool {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::{Int64Type, UInt64Type};
    if !is_int(array.data_type()) {
        return false;
    }
    if array.data_type().is_unsigned_integer() {
        let Ok(a) = cast(array, &DataType::UInt64) else {
            return false;
        };
        (a.as_primitive::<UInt64Type>().iter()).for_each(|v| f(v.map(|v| (v, v as i128))));
        return true;
    }
    let Ok(a) = cast(array, &DataType::Int64) else {
        return false;
    };
    let a = a.as_primitive::<Int64Type>();
    let signed = |v: i64| ((v as u64) ^ (1 << 63), v as i128);
    match a.null_count() {
        0 => a.values().iter().for_each(|v| f(Some(signed(*v)))),
        _ => a.iter().for_each(|v| f(v.map(signed))),
    }
    true
}

/// Order-preserving codes of an integer-like array: signed values (dates
/// and timestamps as their integers) with the sign bit flipped, unsigned
/// values as they are; `None` for a null. `None` for other types.
fn int_codes(array: &ArrayRef) -> Option<Vec<Option<u64>>> {
    let mut codes = Vec::with_capacity(array.len());
    each_code(array, |c| codes.push(c.map(|(code, _)| code))).then_some(codes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::row::Rows;
    use std::sync::Arc;

    fn ints(values: Vec<Option<i64>>) -> ArrayRef {
        Arc::new(Int64Array::from(values))
    }

    /// The staged values `staged` (indexes into `values`) of a text
    /// column kept as rows (the path of columns that are neither integers
    /// nor text), sorted, and every value's row.
    fn sorted_text(values: &[String], staged: &[usize]) -> (Column, Rows) {
        use datafusion::arrow::array::StringArray;
        let array: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
        let converter = RowConverter::new(vec![SortField::new(DataType::Utf8)]).unwrap();
        let rows = converter.convert_columns(&[array]).unwrap();
        let mut kept = BytesValues::default();
        kept.extend(staged.iter().map(|i| rows.row(*i).data()), usize::MAX);
        let column = Column {
            converter,
            admit: Admit::Bytes(kept.finish().unwrap()),
            rows: true,
        };
        (column, rows)
    }

    /// Every range of two of `values` is admitted exactly when a staged
    /// value lies within it, through the footer ranges' own path.
    fn admits_exactly(values: &[String], staged: &[usize]) {
        use datafusion::arrow::array::StringArray;
        let (column, _) = sorted_text(values, staged);
        let (mut mins, mut maxes, mut want) = (Vec::new(), Vec::new(), Vec::new());
        for a in values {
            for b in values.iter().filter(|b| a <= *b) {
                mins.push(a.clone());
                maxes.push(b.clone());
                want.push(staged.iter().any(|s| a <= &values[*s] && &values[*s] <= b));
            }
        }
        let (lo, hi): (ArrayRef, ArrayRef) = (
            Arc::new(StringArray::from(mins.clone())),
            Arc::new(StringArray::from(maxes.clone())),
        );
        let got = column.admits_ranges(&DataType::Utf8, &lo, &hi, &|_| None, &|_| 1);
        for (i, (got, want)) in got.iter().zip(&want).enumerate() {
            assert_eq!(got, want, "{:?}..{:?}", mins[i], maxes[i]);
        }
    }

    /// Text keys that share a long prefix and differ within or beyond the
    /// 16 bytes after it, and values outside the prefix: the staged values
    /// end up in their order, and a range is admitted exactly when it
    /// holds a staged value.
    #[test]
    fn windows_keep_the_order_and_ranges_are_admitted_exactly() {
        let shared = "https://shop.example.com/orders/2026-12-03/";
        let mut values: Vec<String> = [
            "",
            "0",
            "00000000000000000001",
            "00000000000000000002",
            "0000000000000000000000000000000000000003",
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
                "https://shop.example.com/orders/2026-12-03/00000000000000000001x",
            ]
            .map(String::from),
        );
        let staged: Vec<usize> = (0..8).collect();
        let (column, rows) = sorted_text(&values, &staged);
        let Admit::Bytes(StagedBytes::Sorted { order, .. }) = &column.admit else {
            panic!("values kept")
        };
        let in_order: Vec<_> = order
            .iter()
            .map(|i| rows.row(staged[*i as usize]))
            .collect();
        assert!(in_order.windows(2).all(|w| w[0] <= w[1]));
        admits_exactly(&values, &staged);
    }

    /// Keys whose windows are all equal (a long part the staged keys all
    /// have, after a head that differs) still prune exactly: region-prefixed
    /// order numbers, many of them the same for 16 bytes and more.
    #[test]
    fn values_that_differ_only_past_their_windows_are_admitted_exactly() {
        let mut values = Vec::new();
        for region in ["eu", "us"] {
            for n in [0u64, 7, 8, 70, 71, 9_999, 10_000, 123_456_789] {
                values.push(format!("{region}-warehouse-orders-{n:013}"));
            }
        }
        values.push("eu-warehouse-orders-".into());
        values.push("eu-warehouse-orders-0000000000007-b".into());
        values.push("us-warehouse-orders-0000000000070\0".into());
        // Staged: every other value of each region, and the extras.
        let staged: Vec<usize> = (0..values.len())
            .filter(|i| i % 2 == 1 || *i >= 16)
            .collect();
        admits_exactly(&values, &staged);
        admits_exactly(&values, &[3]);
        admits_exactly(&values, &[16, 17]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]
        /// Random text of few letters (the empty string, a zero byte and
        /// multi-byte UTF-8 among them) around a long part that many share:
        /// windows tie often, at every depth.
        #[test]
        fn random_text_is_admitted_exactly(
            picks in proptest::collection::vec((0usize..4, 0usize..3, 0usize..4, proptest::bool::ANY), 1..40),
        ) {
            let values = super::super::staged_bytes::tests::tied_text(&picks);
            let staged: Vec<usize> = (0..values.len()).filter(|i| picks[*i].3).collect();
            if !staged.is_empty() {
                admits_exactly(&values, &staged);
            }
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
        v.push(&ints(staged), |_| true);
        v.ranged = ranged;
        Column {
            converter: RowConverter::new(vec![SortField::new(DataType::Int64)]).unwrap(),
            admit: v.admit(),
            rows: false,
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

    #[test]
    fn codes_dense_in_their_range_or_not_come_out_sorted_once_each() {
        let mut next = crate::test_rng::below(3);
        for round in 0..300 {
            let lo = [0, 1 << 63, u64::MAX - 5000][next(3) as usize];
            let width = [1, 10, 1000, 1 << 40][next(4) as usize];
            let mut codes: Vec<u64> = (0..1 + next(400))
                .map(|_| lo.saturating_add(next(width)))
                .collect();
            let range = (*codes.iter().min().unwrap(), *codes.iter().max().unwrap());
            let mut want = codes.clone();
            want.sort_unstable();
            want.dedup();
            sort_distinct(&mut codes, range);
            assert_eq!(codes, want, "round {round}");
        }
    }
}
