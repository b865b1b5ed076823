//! A key column's staged values as bytes, for pruning: a text or binary
//! column's own (footer ranges of such a column, its row format and its
//! bytes all order the same way: bytes compared unsigned, a prefix first,
//! so they need no row format), any other column's row format. They are
//! appended to one buffer as they are read, sorted once into their exact
//! order ([`sorted`]), and a range `[min, max]` holds a staged
//! value exactly when the first value not below `min` is not above `max`.

use datafusion::arrow::array::{Array, ArrayRef, AsArray as _};
use datafusion::arrow::datatypes::DataType;

use crate::keyindex::shared_len;

/// Whether the values of `t` are kept as bytes here.
pub(super) fn is_bytes(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8
            | DataType::LargeUtf8
            | DataType::Utf8View
            | DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
    )
}

/// The closure a column's values are read through.
pub(super) type ValueOf<'a> = Box<dyn Fn(usize) -> Option<&'a [u8]> + 'a>;

/// The bytes of each value of `array` (`None` for a null); `None` when its
/// type is not [`is_bytes`].
pub(super) fn bytes_of(array: &ArrayRef) -> Option<ValueOf<'_>> {
    let a = array.as_ref();
    let valid = move |i: usize| a.is_valid(i);
    Some(match a.data_type() {
        DataType::Utf8 => {
            let s = a.as_string::<i32>();
            Box::new(move |i| valid(i).then(|| s.value(i).as_bytes()))
        }
        DataType::LargeUtf8 => {
            let s = a.as_string::<i64>();
            Box::new(move |i| valid(i).then(|| s.value(i).as_bytes()))
        }
        DataType::Utf8View => {
            let s = a.as_string_view();
            Box::new(move |i| valid(i).then(|| s.value(i).as_bytes()))
        }
        DataType::Binary => {
            let s = a.as_binary::<i32>();
            Box::new(move |i| valid(i).then(|| s.value(i)))
        }
        DataType::LargeBinary => {
            let s = a.as_binary::<i64>();
            Box::new(move |i| valid(i).then(|| s.value(i)))
        }
        DataType::BinaryView => {
            let s = a.as_binary_view();
            Box::new(move |i| valid(i).then(|| s.value(i)))
        }
        _ => return None,
    })
}

/// The staged values of a bytes column while they are read: all of them
/// while they fit the budget, then only their range.
#[derive(Default)]
pub(super) struct BytesValues {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    range: Option<(Vec<u8>, Vec<u8>)>,
    /// Too many values: only `range` is kept.
    ranged: bool,
    /// A batch of another type: every range is admitted.
    unknown: bool,
}

impl BytesValues {
    /// Adds the non-null values of `array` (of an [`is_bytes`] type) and
    /// keeps only their range once the values take more than `most`
    /// bytes. An array of another type makes every range admitted.
    /// Adds the non-null values of `array` that `keep` holds.
    pub(super) fn push(&mut self, array: &ArrayRef, most: usize, keep: impl Fn(&[u8]) -> bool) {
        let Some(value) = bytes_of(array) else {
            self.unknown = true;
            return;
        };
        self.extend((0..array.len()).filter_map(value).filter(|v| keep(v)), most);
    }

    /// Adds `values` (bytes that order as the values do: their own, or
    /// their row format) and keeps only their range once they take more
    /// than `most` bytes.
    pub(super) fn extend<'a>(&mut self, values: impl Iterator<Item = &'a [u8]>, most: usize) {
        for v in values {
            if self.ranged {
                widen(&mut self.range, v);
            } else {
                self.bytes.extend_from_slice(v);
                self.ends.push(self.bytes.len());
            }
        }
        if !self.ranged && self.bytes.len() + 8 * self.ends.len() > most {
            let mut range = None;
            for i in 0..self.ends.len() {
                widen(&mut range, self.value(i));
            }
            *self = BytesValues {
                range,
                ranged: true,
                unknown: self.unknown,
                ..BytesValues::default()
            };
        }
    }

    fn value(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// What the values admit; `None` when there is none.
    pub(super) fn finish(self) -> Option<StagedBytes> {
        if self.unknown {
            return Some(StagedBytes::All);
        }
        if self.ranged {
            return self.range.map(|(lo, hi)| StagedBytes::Range(lo, hi));
        }
        if self.ends.is_empty() {
            return None;
        }
        let data = |i: u32| self.value(i as usize);
        let order = sorted(&data, self.ends.len() as u32);
        Some(StagedBytes::Sorted {
            bytes: self.bytes,
            ends: self.ends,
            order,
        })
    }
}

/// Widens `range` to hold `v`.
fn widen(range: &mut Option<(Vec<u8>, Vec<u8>)>, v: &[u8]) {
    match range {
        None => *range = Some((v.to_vec(), v.to_vec())),
        Some((lo, hi)) => {
            if v < &lo[..] {
                *lo = v.to_vec();
            } else if v > &hi[..] {
                *hi = v.to_vec();
            }
        }
    }
}

/// What a bytes column's staged values admit.
pub(super) enum StagedBytes {
    /// The values, and their exact order (indexes into `ends`).
    Sorted {
        bytes: Vec<u8>,
        ends: Vec<usize>,
        order: Vec<u32>,
    },
    /// Only the least and greatest value (too many to keep).
    Range(Vec<u8>, Vec<u8>),
    /// Values that could not be read as bytes: every range.
    All,
}

impl StagedBytes {
    /// Whether a staged value lies within `[min, max]` (exactly, for kept
    /// values).
    pub(super) fn admits(&self, min: &[u8], max: &[u8]) -> bool {
        match self {
            StagedBytes::All => true,
            StagedBytes::Range(lo, hi) => min <= &hi[..] && max >= &lo[..],
            StagedBytes::Sorted { bytes, ends, order } => {
                let value = |i: u32| {
                    let i = i as usize;
                    let start = if i == 0 { 0 } else { ends[i - 1] };
                    &bytes[start..ends[i]]
                };
                let at = order.partition_point(|i| value(*i) < min);
                order.get(at).is_some_and(|i| value(*i) <= max)
            }
        }
    }
}

/// The 16 bytes of `data` from `at`, zero-padded (a value that is a prefix
/// of another sorts first), as a big-endian integer.
pub(crate) fn window(data: &[u8], at: usize) -> u128 {
    let rest = data.get(at..).unwrap_or_default();
    let mut p = [0u8; 16];
    let k = rest.len().min(16);
    p[..k].copy_from_slice(&rest[..k]);
    u128::from_be_bytes(p)
}

/// The indexes `0..n` of the values `data` in the order of their bytes.
///
/// Each value gets one integer to sort: the two bytes after the prefix all
/// values share (its group; zero where the value ends), then as many bytes
/// of the value from the end of the prefix its group's values share as
/// leave room for its index in the low bits. One pass finds each group's
/// shared prefix, in the order the values lie in memory: the windows of
/// values that all begin alike (one region's keys, one day's time prefix)
/// then already differ, the sort moves plain integers, and it does not
/// look at the values again. Values whose integers tie above the index
/// (equal windows) are ordered by [`sort_by_windows`].
fn sorted<'a>(data: &impl Fn(u32) -> &'a [u8], n: u32) -> Vec<u32> {
    let first = data(0);
    let shared = (1..n).fold(first.len(), |k, i| shared_len(&first[..k], data(i)));
    let group = |v: &[u8]| crate::keyindex::two_bytes_after(v, shared);
    // Each group's first value and the length of the prefix its values
    // share (at least the common prefix and the group's bytes, unless a
    // value ends before them).
    let mut heads: Vec<(u32, usize)> = vec![(u32::MAX, 0); 1 << 16];
    for i in 0..n {
        let v = data(i);
        let (head, len) = &mut heads[group(v)];
        if *head == u32::MAX {
            (*head, *len) = (i, v.len());
        } else if v.get(..*len) != Some(&data(*head)[..*len]) {
            *len = shared_len(&data(*head)[..*len], v);
        }
    }
    let bits = u32::BITS - (n - 1).leading_zeros();
    let mut keys: Vec<u128> = (0..n)
        .map(|i| {
            let v = data(i);
            let g = group(v);
            let key = (g as u128) << 112 | window(v, heads[g].1) >> 16;
            key >> bits << bits | u128::from(i)
        })
        .collect();
    keys.sort_unstable();
    let index = |k: &u128| (k & ((1u128 << bits) - 1)) as u32;
    let mut order: Vec<u32> = keys.iter().map(index).collect();
    let mut at = 0;
    for run in keys.chunk_by(|a, b| a >> bits == b >> bits) {
        if run.len() > 1 {
            // Equal windows, in the order of their bytes from here.
            let mut tied: Vec<(u128, u32)> = run.iter().map(|k| (0, index(k))).collect();
            sort_by_windows(data, &mut tied);
            for (o, (_, i)) in order[at..].iter_mut().zip(tied) {
                *o = i;
            }
        }
        at += run.len();
    }
    order
}

/// Sorts `keyed` (a window of each value, the value's index) into the
/// order of the values' bytes (`data`). Values with equal windows (which
/// share their bytes up to the window's end, or are shorter) are sorted by
/// the window after all the bytes they share, which stands in for theirs
/// meanwhile: a long part they all have is skipped at once. Where one of
/// them ends within the shared bytes, they are compared whole.
fn sort_by_windows<'a>(data: &impl Fn(u32) -> &'a [u8], keyed: &mut [(u128, u32)]) {
    keyed.sort_unstable_by_key(|(w, _)| *w);
    for run in keyed.chunk_by_mut(|a, b| a.0 == b.0) {
        if run.len() < 2 {
            continue;
        }
        let first = data(run[0].1);
        let (mut shared, mut shortest) = (first.len(), first.len());
        for (_, i) in &run[1..] {
            let r = data(*i);
            if r.get(..shared) != Some(&first[..shared]) {
                shared = shared_len(&first[..shared], r);
            }
            shortest = shortest.min(r.len());
        }
        if shared < shortest {
            // Each value has a byte at `shared`, and they are not all the
            // same.
            let this = run[0].0;
            for e in run.iter_mut() {
                e.0 = window(data(e.1), shared);
            }
            sort_by_windows(data, run);
            for e in run.iter_mut() {
                e.0 = this;
            }
        } else {
            run.sort_unstable_by(|a, b| data(a.1).cmp(data(b.1)));
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use datafusion::arrow::array::{BinaryArray, LargeStringArray, StringArray, StringViewArray};
    use std::sync::Arc;

    fn staged(values: &[&[u8]], most: usize) -> StagedBytes {
        let mut v = BytesValues::default();
        let array: ArrayRef = Arc::new(BinaryArray::from(values.to_vec()));
        v.push(&array, most, |_| true);
        v.finish().unwrap()
    }

    /// Every range of two values is admitted exactly when a staged value
    /// lies within it, for kept values; for a kept range, when it meets it.
    fn admits_exactly(values: &[Vec<u8>], picked: &[usize]) {
        let chosen: Vec<&[u8]> = picked.iter().map(|i| &values[*i][..]).collect();
        for most in [usize::MAX, 0] {
            let s = staged(&chosen, most);
            for a in values {
                for b in values.iter().filter(|b| a <= *b) {
                    let holds = chosen.iter().any(|v| a[..] <= **v && **v <= b[..]);
                    let meets = {
                        let (lo, hi) = (chosen.iter().min().unwrap(), chosen.iter().max().unwrap());
                        a[..] <= **hi && b[..] >= **lo
                    };
                    let want = if most == 0 { meets } else { holds };
                    assert_eq!(s.admits(a, b), want, "{a:?}..{b:?} of {chosen:?}");
                }
            }
        }
    }

    #[test]
    fn region_prefixed_keys_and_prefixes_of_each_other_are_admitted_exactly() {
        let mut values: Vec<Vec<u8>> = Vec::new();
        for region in ["eu", "us"] {
            for n in [0u64, 7, 8, 70, 71, 9_999, 10_000, 123_456_789] {
                values.push(format!("{region}-warehouse-orders-{n:013}").into_bytes());
            }
        }
        for extra in [
            &b"eu-warehouse-orders-"[..],
            b"eu-warehouse-orders-0000000000007-b",
            b"us-warehouse-orders-0000000000070\0",
            b"",
            b"\0",
            b"\xff",
            "é".as_bytes(),
        ] {
            values.push(extra.to_vec());
        }
        let odd: Vec<usize> = (0..values.len()).filter(|i| i % 2 == 1).collect();
        admits_exactly(&values, &odd);
        admits_exactly(&values, &[3]);
        admits_exactly(&values, &[16, 17, 19]);
    }

    /// Text from `picks` (head, middle, tail, staged): few letters around
    /// a long part many share, so that windows tie at every depth, with
    /// the empty string, zero bytes and multi-byte UTF-8 among them.
    pub(in crate::exec::published) fn tied_text(
        picks: &[(usize, usize, usize, bool)],
    ) -> Vec<String> {
        let heads = ["", "a", "b\0", "é"];
        let middles = [
            "",
            "-the-same-long-part-of-many-keys-",
            "-the-same-long-part-of-many-keys-x-",
        ];
        let tails = ["", "0", "00000000000000000000000000000001", "zé"];
        picks
            .iter()
            .map(|(h, m, t, _)| format!("{}{}{}", heads[*h], middles[*m], tails[*t]))
            .collect()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]
        /// Random text of few letters around a long part many share, so
        /// that windows tie at every depth, and zero bytes and multi-byte
        /// UTF-8 among them.
        #[test]
        fn random_values_are_admitted_exactly(
            picks in proptest::collection::vec((0usize..4, 0usize..3, 0usize..4, proptest::bool::ANY), 1..40),
        ) {
            let values: Vec<Vec<u8>> = tied_text(&picks).into_iter().map(String::into_bytes).collect();
            let picked: Vec<usize> = (0..values.len()).filter(|i| picks[*i].3).collect();
            if !picked.is_empty() {
                admits_exactly(&values, &picked);
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 256, ..Default::default() })]
        /// Short values of zero, one and 0xff bytes after a prefix they
        /// all share: they end before, within and after their group's two
        /// bytes, and the sort puts them in the order of their bytes.
        #[test]
        fn values_ending_within_their_group_sort_in_order(
            prefix in proptest::collection::vec(proptest::sample::select(vec![0u8, b'p', 0xff]), 0..3),
            tails in proptest::collection::vec(
                proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0xff]), 0..6), 1..40),
        ) {
            let values: Vec<Vec<u8>> = tails.iter().map(|t| [&prefix[..], t].concat()).collect();
            let mut v = BytesValues::default();
            v.extend(values.iter().map(|v| &v[..]), usize::MAX);
            let Some(StagedBytes::Sorted { order, .. }) = v.finish() else {
                panic!("kept values are sorted");
            };
            let got: Vec<&Vec<u8>> = order.iter().map(|i| &values[*i as usize]).collect();
            let mut want: Vec<&Vec<u8>> = values.iter().collect();
            want.sort();
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn every_text_layout_is_read_and_nulls_are_no_values() {
        let arrays: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec![Some("b"), None, Some("a")])),
            Arc::new(LargeStringArray::from(vec![Some("b"), None, Some("a")])),
            Arc::new(StringViewArray::from(vec![Some("b"), None, Some("a")])),
        ];
        for array in arrays {
            let mut v = BytesValues::default();
            v.push(&array, usize::MAX, |_| true);
            let s = v.finish().unwrap();
            assert!(s.admits(b"a", b"a") && s.admits(b"b", b"z"));
            assert!(!s.admits(b"", b"\0") && !s.admits(b"c", b"z"));
        }
        let ints: ArrayRef = Arc::new(datafusion::arrow::array::Int64Array::from(vec![1]));
        let mut v = BytesValues::default();
        v.push(&ints, usize::MAX, |_| true);
        assert!(v.finish().unwrap().admits(b"x", b"x"));
        let nulls: ArrayRef = Arc::new(StringArray::from(vec![None::<&str>]));
        let mut v = BytesValues::default();
        v.push(&nulls, usize::MAX, |_| true);
        assert!(v.finish().is_none());
    }
}
