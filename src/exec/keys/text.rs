//! Text keys that pack exactly into a 128-bit word (see
//! [`TextForm`]): hex digits of one length, 4 bits a digit, eight digits at
//! a time in one 64-bit register; or values of at most 15 bytes, stored with
//! their length; or values of a [`Template`], their fixed bytes checked
//! eight at a time and their hex digits packed. Words order like the
//! values' bytes, and code 0 is free for null, so packed text is counted
//! and ranked as packed keys are (in 64-bit words when they fit).

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, GenericStringArray, OffsetSizeTrait, StringViewArray,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;

use super::key::Key;
use crate::plan::keys::{Template, TextForm, SHORT_TEXT};
use crate::value::Value;

/// A non-null value that does not fit the form (or a null that the form
/// has no code for), shown as in a report.
#[derive(Debug, PartialEq, Eq)]
pub struct Misfit(pub String);

impl std::fmt::Display for Misfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `x` (whose high bits are clear) that lies
/// in `lo..=hi`, without carries between bytes.
#[inline]
fn in_range(x: u64, lo: u8, hi: u8) -> u64 {
    (x + ONES * u64::from(0x80 - lo)) & !(x + ONES * u64::from(0x7f - hi)) & HIGH
}

/// Eight hex characters (the first in the low byte of `x`) as 32 bits, the
/// first digit highest, and whether all eight are digits of the form's case.
#[inline]
fn hex8(x: u64, upper: bool) -> (u32, bool) {
    let low = x & !HIGH;
    let letters = if upper {
        in_range(low, b'A', b'F')
    } else {
        in_range(low, b'a', b'f')
    };
    let ok = (in_range(low, b'0', b'9') | letters) & !x;
    // '0'..'9' keep their low nibble; letters (bit 6 set) add 9.
    let nibbles = (x & (ONES * 0x0f)) + ((x >> 6) & ONES) * 9;
    let s = nibbles.swap_bytes();
    let s = ((s >> 4) | s) & 0x00ff_00ff_00ff_00ff;
    let s = ((s >> 8) | s) & 0x0000_ffff_0000_ffff;
    let s = ((s >> 16) | s) & 0xffff_ffff;
    (s as u32, ok == HIGH)
}

#[inline]
fn hex_digit(b: u8, upper: bool) -> (u32, bool) {
    let letter = if upper { b'A' } else { b'a' };
    match b {
        b'0'..=b'9' => (u32::from(b - b'0'), true),
        _ if (letter..letter + 6).contains(&b) => (u32::from(b - letter + 10), true),
        _ => (0, false),
    }
}

/// The word of one value, `None` when it does not fit.
#[inline]
fn word(form: TextForm, v: &[u8]) -> Option<u128> {
    match form {
        TextForm::Hex { len, upper } => {
            if v.len() != usize::from(len) {
                return None;
            }
            let (w, ok) = hex_digits(v, upper);
            ok.then_some(w)
        }
        TextForm::Uuid { upper } => {
            let (w, ok) = uuid_value(v, upper, hex_value::<32>)?;
            ok.then_some(w)
        }
        TextForm::Short => {
            if v.len() > SHORT_TEXT {
                return None;
            }
            let mut bytes = [0u8; 16];
            bytes[..v.len()].copy_from_slice(v);
            bytes[15] = v.len() as u8 + 1;
            Some(u128::from_be_bytes(bytes))
        }
        TextForm::Template(t) => Matcher::new(&t).word(v),
    }
}

/// A [`Template`]'s checks, made once a batch: its fixed bytes compared
/// eight at a time under a mask, its digits read eight at a time.
struct Matcher {
    len: usize,
    /// (where, the fixed bytes, their mask): 8-byte windows over the value
    /// that hold fixed bytes (the last may overlap the one before).
    windows: Vec<(usize, u64, u64)>,
    /// (where, the mask of its digits' bytes, how many digits, the bits
    /// of `0` digits read after them): 8-byte windows over the value that
    /// hold up to 8 digits of a run, first to last; their other bytes read
    /// as `0` digits.
    digits: Vec<(usize, u64, u32, u32)>,
    upper: bool,
}

impl Matcher {
    fn new(t: &Template) -> Matcher {
        let len = t.width();
        // Values shorter than a window are padded to one (see `word`).
        let room = len.max(8);
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for i in (0..len).filter(|&i| t.fixed_at(i).is_none()) {
            match runs.last_mut() {
                Some((start, n)) if *start + *n == i && *n < 8 => *n += 1,
                _ => runs.push((i, 1)),
            }
        }
        let mask = |from: usize, to: usize, at: usize| {
            (from..to).fold(0u64, |m, j| m | 0xff << (8 * (j - at)))
        };
        let digits = runs
            .into_iter()
            .map(|(start, n)| {
                // The window ends with the run where it can, else starts
                // with it (its last bytes then read as low `0` digits).
                let at = (start + n).saturating_sub(8).min(room - 8);
                let after = 4 * (at + 8 - start - n) as u32;
                (at, mask(start, start + n, at), n as u32, after)
            })
            .collect();
        let starts = (0..room - 7).step_by(8).chain([room - 8]);
        let mut windows: Vec<(usize, u64, u64)> = Vec::new();
        for at in starts {
            let (mut bytes, mut mask) = ([0u8; 8], [0u8; 8]);
            for k in 0..8 {
                if let Some(b) = t.fixed_at(at + k).filter(|_| at + k < len) {
                    (bytes[k], mask[k]) = (b, 0xff);
                }
            }
            let window = (at, u64::from_le_bytes(bytes), u64::from_le_bytes(mask));
            if window.2 != 0 && !windows.contains(&window) {
                windows.push(window);
            }
        }
        Matcher {
            len,
            windows,
            digits,
            upper: t.upper,
        }
    }

    /// The word of `v`, `None` when it does not fit.
    #[inline]
    fn word(&self, v: &[u8]) -> Option<u128> {
        if v.len() != self.len {
            return None;
        }
        let mut padded = [0u8; 8];
        let v = match v.len() < 8 {
            true => {
                padded[..v.len()].copy_from_slice(v);
                &padded[..]
            }
            false => v,
        };
        let load = |at: usize| u64::from_le_bytes(v[at..at + 8].try_into().expect("8 bytes"));
        let mut ok = true;
        for &(at, bytes, mask) in &self.windows {
            ok &= (load(at) ^ bytes) & mask == 0;
        }
        let mut w = 0u128;
        for &(at, mask, n, after) in &self.digits {
            let (d, good) = hex8((load(at) & mask) | (ZEROS & !mask), self.upper);
            w = (w << (4 * n)) | u128::from(d >> after);
            ok &= good;
        }
        ok.then_some(w)
    }
}

/// Eight `0` digits.
const ZEROS: u64 = ONES * b'0' as u64;

/// One word a row of `column` into `out`: a value's word, plus one with a
/// null code; 0 for null rows (which, without a null code, only
/// `nulls distinct` checks may hold, and they do not count them).
pub fn pack<K: Key>(
    form: TextForm,
    null_code: bool,
    nulls_equal: bool,
    column: &ArrayRef,
    out: &mut Vec<K>,
) -> Result<(), Misfit> {
    out.clear();
    let plus = u128::from(null_code);
    match column.data_type() {
        DataType::Dictionary(_, value_type) => {
            let dict = column.as_any_dictionary();
            // Every batch of a column chunk brings the chunk's whole
            // dictionary: one larger than the batch is not packed whole for
            // each batch (150,000 short codes 1,220 times took 1.3 s), only
            // the batch's values are.
            if dict.values().len() > column.len() {
                let plain = cast(column, value_type).map_err(|e| {
                    Misfit(format!(
                        "a dictionary that does not cast to its values ({e})"
                    ))
                })?;
                return pack(form, null_code, nulls_equal, &plain, out);
            }
            let mut values = Vec::new();
            pack_plain(form, plus, dict.values(), &mut values)?;
            let keys = dict.keys();
            if values.is_empty() {
                // No value at all: every row is null (arrow's
                // `normalized_keys` refuses an empty dictionary).
                out.resize(column.len(), K::ZERO);
            } else {
                out.extend(
                    dict.normalized_keys()
                        .into_iter()
                        .enumerate()
                        .map(|(i, k)| if keys.is_valid(i) { values[k] } else { K::ZERO }),
                );
            }
            Ok(())
        }
        _ => pack_plain(form, plus, column, out),
    }?;
    if nulls_equal && !null_code && column.logical_null_count() > 0 {
        return Err(Misfit("null".into()));
    }
    Ok(())
}

/// Every value of a string array (of any of the three layouts), nulls as 0.
fn pack_plain<K: Key>(
    form: TextForm,
    plus: u128,
    values: &ArrayRef,
    out: &mut Vec<K>,
) -> Result<(), Misfit> {
    match values.data_type() {
        DataType::Utf8 => pack_offsets(form, plus, values.as_string::<i32>(), out),
        DataType::LargeUtf8 => pack_offsets(form, plus, values.as_string::<i64>(), out),
        DataType::Utf8View => pack_view(form, plus, values.as_string_view(), out),
        other => Err(Misfit(format!("a value of type {other}"))),
    }
}

fn misfit(v: &[u8]) -> Misfit {
    Misfit(Value::Text(String::from_utf8_lossy(v).into_owned()).to_string())
}

fn pack_offsets<O: OffsetSizeTrait, K: Key>(
    form: TextForm,
    plus: u128,
    a: &GenericStringArray<O>,
    out: &mut Vec<K>,
) -> Result<(), Misfit> {
    let offsets = a.value_offsets();
    let data = a.value_data();
    let value = |i: usize| &data[offsets[i].as_usize()..offsets[i + 1].as_usize()];
    if let TextForm::Template(t) = form {
        let m = Matcher::new(&t);
        return pack_values(|v| m.word(v), plus, a.len(), a.nulls(), value, out);
    }
    if let Some(len) = form.fixed_len() {
        let (first, last) = (offsets[0].as_usize(), offsets[a.len()].as_usize());
        // Without nulls, and every value `len` bytes: one stride over the bytes.
        if a.null_count() == 0
            && last - first == a.len() * len
            && offsets.windows(2).all(|w| (w[1] - w[0]).as_usize() == len)
            && hex_words(Values::Stride(&data[first..last]), form, plus, out)
        {
            return Ok(());
        }
        out.clear();
    }
    pack_values(|v| word(form, v), plus, a.len(), a.nulls(), value, out)
}

/// Hex values of one length without nulls: back to back in a byte buffer,
/// or in the buffers of a view array.
#[derive(Clone, Copy)]
enum Values<'a> {
    Stride(&'a [u8]),
    Views(&'a StringViewArray),
}

/// The words of `values` in a hex or UUID `form`, or `false` when some
/// value does not fit (or the form has no fast loop: hex lengths other than
/// 8, 16, 24 and 32).
fn hex_words<K: Key>(values: Values, form: TextForm, plus: u128, out: &mut Vec<K>) -> bool {
    #[cfg(target_arch = "x86_64")]
    if matches!(form, TextForm::Hex { len: 32, .. } | TextForm::Uuid { .. })
        && std::arch::is_x86_feature_detected!("avx2")
    {
        // SAFETY: the CPU has AVX2.
        return unsafe { avx2::hex_words32(values, form, plus, out) };
    }
    match form {
        TextForm::Hex { len: 32, upper } => {
            hex_each::<32, K>(values, plus, out, |v| hex_value::<32>(v, upper))
        }
        TextForm::Hex { len: 24, upper } => {
            hex_each::<24, K>(values, plus, out, |v| hex_value::<24>(v, upper))
        }
        TextForm::Hex { len: 16, upper } => {
            hex_each::<16, K>(values, plus, out, |v| hex_value::<16>(v, upper))
        }
        TextForm::Hex { len: 8, upper } => {
            hex_each::<8, K>(values, plus, out, |v| hex_value::<8>(v, upper))
        }
        TextForm::Uuid { upper } => hex_each::<36, K>(values, plus, out, |v| {
            uuid_value(v, upper, hex_value::<32>).unwrap_or((0, false))
        }),
        _ => false,
    }
}

/// A UUID's 32 hex digits (8-4-4-4-12, the dashes checked), read by `hex`.
#[inline(always)]
fn uuid_value(
    v: &[u8],
    upper: bool,
    hex: impl Fn(&[u8], bool) -> (u128, bool),
) -> Option<(u128, bool)> {
    let v: &[u8; 36] = v.try_into().ok()?;
    let dashes = v[8] == b'-' && v[13] == b'-' && v[18] == b'-' && v[23] == b'-';
    let mut digits = [0u8; 32];
    digits[..8].copy_from_slice(&v[..8]);
    digits[8..12].copy_from_slice(&v[9..13]);
    digits[12..16].copy_from_slice(&v[14..18]);
    digits[16..20].copy_from_slice(&v[19..23]);
    digits[20..].copy_from_slice(&v[24..]);
    let (w, ok) = hex(&digits, upper);
    Some((w, ok && dashes))
}

#[inline(always)]
fn hex_each<const L: usize, K: Key>(
    values: Values,
    plus: u128,
    out: &mut Vec<K>,
    word: impl Fn(&[u8]) -> (u128, bool),
) -> bool {
    let mut ok = true;
    let mut one = |v: Option<&[u8]>| match v {
        Some(v) => {
            let (w, good) = word(v);
            ok &= good;
            // (A value that is no hex may read as any word: it is dropped.)
            K::from_wide(w.wrapping_add(plus))
        }
        None => {
            ok = false;
            K::ZERO
        }
    };
    match values {
        Values::Stride(bytes) => out.extend(bytes.chunks_exact(L).map(|v| one(Some(v)))),
        // Values of up to 12 bytes sit inside their views.
        Values::Views(_) if L <= 12 => return false,
        Values::Views(a) => {
            let buffers = a.data_buffers();
            out.extend(a.views().iter().map(|&view| {
                // A view: length (32 bits), prefix, buffer index, offset.
                let len = view as u32 as usize;
                let (buffer, offset) = ((view >> 64) as u32 as usize, (view >> 96) as u32 as usize);
                one(buffers
                    .get(buffer)
                    .and_then(|b| b.get(offset..offset + L))
                    .filter(|_| len == L))
            }))
        }
    }
    ok
}

/// 32 hex digits in one AVX2 register: checked, turned into nibbles, and
/// pairs of nibbles into bytes with one multiply-add.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use crate::exec::keys::key::Key;
    use crate::exec::keys::text::{hex_each, uuid_value, Values};
    use crate::plan::keys::TextForm;

    /// The word of the first 32 bytes of `v` and whether they are hex.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) fn hex32(v: &[u8], upper: bool) -> (u128, bool) {
        let v = &v[..32];
        // SAFETY: `v` holds 32 bytes; unaligned loads and stores.
        unsafe {
            let x = _mm256_loadu_si256(v.as_ptr().cast());
            let d = _mm256_sub_epi8(x, _mm256_set1_epi8(b'0' as i8));
            let digit = _mm256_cmpeq_epi8(_mm256_min_epu8(d, _mm256_set1_epi8(9)), d);
            let a = if upper { b'A' } else { b'a' };
            let l = _mm256_sub_epi8(x, _mm256_set1_epi8(a as i8));
            let letter = _mm256_cmpeq_epi8(_mm256_min_epu8(l, _mm256_set1_epi8(5)), l);
            let ok = _mm256_movemask_epi8(_mm256_or_si256(digit, letter)) == -1;
            let nibbles = _mm256_blendv_epi8(d, _mm256_add_epi8(l, _mm256_set1_epi8(10)), letter);
            // Each 16-bit lane: first nibble * 16 + second.
            let pairs = _mm256_maddubs_epi16(nibbles, _mm256_set1_epi16(0x0110));
            let packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(pairs, pairs), 0b1000);
            let mut bytes = [0u8; 16];
            _mm_storeu_si128(bytes.as_mut_ptr().cast(), _mm256_castsi256_si128(packed));
            (u128::from_be_bytes(bytes), ok)
        }
    }

    /// [`super::hex_words`] for 32 hex digits and UUIDs.
    #[target_feature(enable = "avx2")]
    pub(super) fn hex_words32<K: Key>(
        values: Values,
        form: TextForm,
        plus: u128,
        out: &mut Vec<K>,
    ) -> bool {
        match form {
            TextForm::Hex { len: 32, upper } => {
                hex_each::<32, K>(values, plus, out, |v| hex32(v, upper))
            }
            TextForm::Uuid { upper } => hex_each::<36, K>(values, plus, out, |v| {
                uuid_value(v, upper, |d, u| hex32(d, u)).unwrap_or((0, false))
            }),
            _ => false,
        }
    }
}

/// The word of the first `L` hex bytes of `v`, and whether they are hex:
/// [`hex_digits`] on a length the compiler knows, so its loop unrolls.
#[inline(always)]
fn hex_value<const L: usize>(v: &[u8], upper: bool) -> (u128, bool) {
    hex_digits(&v[..L], upper)
}

/// The word of hex digits `v` (at most 32), eight at a time and then one
/// at a time, and whether they are all hex of the case.
#[inline(always)]
fn hex_digits(v: &[u8], upper: bool) -> (u128, bool) {
    let mut w = 0u128;
    let mut ok = true;
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        let (n, good) = hex8(u64::from_le_bytes(c.try_into().expect("8 bytes")), upper);
        w = (w << 32) | u128::from(n);
        ok &= good;
    }
    for &b in chunks.remainder() {
        let (n, good) = hex_digit(b, upper);
        w = (w << 4) | u128::from(n);
        ok &= good;
    }
    (w, ok)
}

fn pack_view<K: Key>(
    form: TextForm,
    plus: u128,
    a: &StringViewArray,
    out: &mut Vec<K>,
) -> Result<(), Misfit> {
    let value = |i: usize| a.value(i).as_bytes();
    if let TextForm::Template(t) = form {
        let m = Matcher::new(&t);
        return pack_values(|v| m.word(v), plus, a.len(), a.nulls(), value, out);
    }
    if form.fixed_len().is_some() {
        if a.null_count() == 0 && hex_words(Values::Views(a), form, plus, out) {
            return Ok(());
        }
        out.clear();
    }
    pack_values(|v| word(form, v), plus, a.len(), a.nulls(), value, out)
}

/// Every row's word by `word`, or the first value that does not fit.
fn pack_values<'a, K: Key>(
    word: impl Fn(&[u8]) -> Option<u128>,
    plus: u128,
    rows: usize,
    nulls: Option<&datafusion::arrow::buffer::NullBuffer>,
    value: impl Fn(usize) -> &'a [u8],
    out: &mut Vec<K>,
) -> Result<(), Misfit> {
    out.reserve(rows);
    match nulls.filter(|n| n.null_count() > 0) {
        None => {
            let mut fits = true;
            out.extend((0..rows).map(|i| match word(value(i)) {
                Some(w) => K::from_wide(w + plus),
                None => {
                    fits = false;
                    K::ZERO
                }
            }));
            if !fits {
                let bad = (0..rows).find(|&i| word(value(i)).is_none());
                return Err(misfit(value(bad.unwrap_or(0))));
            }
        }
        Some(n) => {
            for i in 0..rows {
                if n.is_null(i) {
                    out.push(K::ZERO);
                    continue;
                }
                let v = value(i);
                out.push(K::from_wide(word(v).ok_or_else(|| misfit(v))? + plus));
            }
        }
    }
    Ok(())
}

/// The value a word stands for.
pub fn unpack(form: TextForm, null_code: bool, word: u128) -> Value {
    if null_code && word == 0 {
        return Value::Null;
    }
    let w = word - u128::from(null_code);
    match form {
        TextForm::Hex { len, upper } => Value::Text(hex_text(w, len, upper)),
        TextForm::Uuid { upper } => {
            let hex = hex_text(w, 32, upper);
            let parts = [
                &hex[..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..],
            ];
            Value::Text(parts.join("-"))
        }
        TextForm::Short => {
            let bytes = w.to_be_bytes();
            let len = usize::from(bytes[15].saturating_sub(1)).min(SHORT_TEXT);
            Value::Text(String::from_utf8_lossy(&bytes[..len]).into_owned())
        }
        TextForm::Template(t) => {
            let mut digits = hex_text(w, t.digits() as u8, t.upper)
                .into_bytes()
                .into_iter();
            let bytes: Vec<u8> = (0..t.width())
                .map(|i| t.fixed_at(i).or_else(|| digits.next()).unwrap_or(b'0'))
                .collect();
            Value::Text(String::from_utf8_lossy(&bytes).into_owned())
        }
    }
}

/// The `len` low hex digits of `w`, the highest first.
fn hex_text(w: u128, len: u8, upper: bool) -> String {
    let digits: &[u8; 16] = if upper {
        b"0123456789ABCDEF"
    } else {
        b"0123456789abcdef"
    };
    (0..u32::from(len))
        .rev()
        .map(|d| char::from(digits[((w >> (4 * d)) & 15) as usize]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{DictionaryArray, LargeStringArray, StringArray};
    use datafusion::arrow::datatypes::Int8Type;
    use std::sync::Arc;

    const LOWER32: TextForm = TextForm::Hex {
        len: 32,
        upper: false,
    };

    fn packed(form: TextForm, null_code: bool, a: ArrayRef) -> Result<Vec<u128>, Misfit> {
        let mut out: Vec<u128> = Vec::new();
        pack(form, null_code, null_code, &a, &mut out).map(|_| out)
    }

    /// The words of `values` (fast loop and general one alike) decode back
    /// to them and sort as they do.
    fn round_trips_in_order(form: TextForm, values: &[String]) {
        let words = packed(form, false, Arc::new(StringArray::from(values.to_vec()))).unwrap();
        let slow: Vec<u128> = values
            .iter()
            .map(|v| word(form, v.as_bytes()).unwrap())
            .collect();
        assert_eq!(words, slow, "the fast loop and the general one agree");
        for (v, w) in values.iter().zip(&words) {
            assert_eq!(unpack(form, false, *w), Value::Text(v.clone()));
        }
        let mut by_word: Vec<_> = values.iter().zip(&words).collect();
        by_word.sort_by_key(|(_, w)| **w);
        let mut sorted = values.to_vec();
        sorted.sort();
        let by_word: Vec<String> = by_word.into_iter().map(|(v, _)| v.clone()).collect();
        assert_eq!(by_word, sorted);
    }

    /// Every hex string of a sample round-trips, and words order like the
    /// strings' bytes; the SWAR digit test agrees with a plain one on all
    /// 256 bytes in every position.
    #[test]
    fn hex_words_round_trip_and_order_like_the_text() {
        for upper in [false, true] {
            for b in 0..=255u8 {
                for pos in 0..8 {
                    let mut chunk = *b"00000000";
                    chunk[pos] = b;
                    let (_, ok) = hex8(u64::from_le_bytes(chunk), upper);
                    assert_eq!(
                        ok,
                        hex_digit(b, upper).1,
                        "byte {b:#x} at {pos}, upper {upper}"
                    );
                }
            }
        }
        let mut values: Vec<String> = (0..500u64)
            .map(|i| {
                format!(
                    "{:032x}",
                    i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as u128 * 977
                )
            })
            .collect();
        values.push("f".repeat(32));
        values.push("0".repeat(32));
        round_trips_in_order(LOWER32, &values);
        // Odd lengths and the other case.
        let upper7 = TextForm::Hex {
            len: 7,
            upper: true,
        };
        let w = packed(
            upper7,
            true,
            Arc::new(StringArray::from(vec![Some("0A1B2C3"), None])),
        )
        .unwrap();
        assert_eq!(w[1], 0, "the null code");
        assert_eq!(unpack(upper7, true, w[0]), Value::Text("0A1B2C3".into()));
        assert_eq!(unpack(upper7, true, 0), Value::Null);
    }

    /// A dictionary column of only nulls may have no values at all (a
    /// page of nulls decodes so): its rows pack as nulls, no panic.
    #[test]
    fn a_dictionary_without_values_packs_as_nulls() {
        let keys = datafusion::arrow::array::Int8Array::from(vec![None, None, None]);
        let values: ArrayRef = Arc::new(StringArray::from(Vec::<&str>::new()));
        let dict: ArrayRef = Arc::new(DictionaryArray::<Int8Type>::try_new(keys, values).unwrap());
        assert_eq!(packed(LOWER32, true, dict.clone()), Ok(vec![0, 0, 0]));
        let mut out: Vec<u128> = Vec::new();
        assert_eq!(
            pack(LOWER32, false, true, &dict, &mut out),
            Err(Misfit("null".into()))
        );
        assert_eq!(pack(LOWER32, false, false, &dict, &mut out), Ok(()));
        assert_eq!(out, vec![0, 0, 0]);
    }

    /// The AVX2 word and check agree with the portable ones, one wrong
    /// byte in every position and of every value.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_hex_agrees_with_the_portable_loop() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        for upper in [false, true] {
            let mut base = *b"0123456789abcdeffedcba9876543210";
            if upper {
                base.make_ascii_uppercase();
            }
            let (word, ok) = hex_value::<32>(&base, upper);
            assert!(ok);
            // SAFETY: the CPU has AVX2.
            assert_eq!(unsafe { avx2::hex32(&base, upper) }, (word, true));
            for pos in 0..32 {
                for b in (0..=255u8).step_by(3).chain(*b"09afAF/:`g@G") {
                    let mut v = base;
                    v[pos] = b;
                    // SAFETY: the CPU has AVX2.
                    let fast = unsafe { avx2::hex32(&v, upper) };
                    let slow = hex_value::<32>(&v, upper);
                    assert_eq!(fast.1, slow.1, "{v:?} upper {upper}");
                    if slow.1 {
                        assert_eq!(fast.0, slow.0);
                    }
                }
            }
        }
    }

    #[test]
    fn uuid_words_round_trip_order_and_check_their_dashes() {
        let form = TextForm::Uuid { upper: false };
        let mut values: Vec<String> = (0..300u64)
            .map(|i| {
                let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                format!(
                    "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                    h >> 32,
                    (h >> 16) & 0xffff,
                    h & 0xffff,
                    i & 0xffff,
                    h & 0xffff_ffff_ffff
                )
            })
            .collect();
        values.push("ffffffff-ffff-ffff-ffff-ffffffffffff".into());
        round_trips_in_order(form, &values);
        let ok = "123e4567-e89b-12d3-a456-426614174000";
        for bad in [
            "123e4567e-89b-12d3-a456-426614174000",
            "123e4567-e89b-12d3-a456-42661417400",
            "123E4567-e89b-12d3-a456-426614174000",
            "123e4567-e89b-12d3-a456_426614174000",
        ] {
            let got = packed(form, false, Arc::new(StringArray::from(vec![ok, bad])));
            assert_eq!(got, Err(Misfit(format!("'{bad}'"))));
        }
    }

    #[test]
    fn short_words_order_like_the_text_prefixes_first() {
        let values = [
            "",
            "a",
            "a\u{0}",
            "ab",
            "abc",
            "b",
            "fifteen bytes!!",
            "\u{e9}t\u{e9}",
        ];
        let words = packed(
            TextForm::Short,
            false,
            Arc::new(LargeStringArray::from(values.to_vec())),
        )
        .unwrap();
        assert!(words.windows(2).all(|w| w[0] < w[1]), "{words:x?}");
        assert!(words.iter().all(|w| *w != 0), "0 is left for null");
        for (v, w) in values.iter().zip(&words) {
            assert_eq!(
                unpack(TextForm::Short, false, *w),
                Value::Text(v.to_string())
            );
        }
    }

    #[test]
    fn a_value_that_does_not_fit_is_named() {
        let a = |v: Vec<&str>| -> ArrayRef { Arc::new(StringArray::from(v)) };
        let ok = "0123456789abcdef0123456789abcdef";
        for (bad, shown) in [
            (
                "0123456789abcdef0123456789abcdeF",
                "'0123456789abcdef0123456789abcdeF'",
            ),
            (
                "0123456789abcdef0123456789abcdeg",
                "'0123456789abcdef0123456789abcdeg'",
            ),
            (
                "0123456789abcdef0123456789abcde",
                "'0123456789abcdef0123456789abcde'",
            ),
            (
                "0123456789abcdef0123456789abcd\u{e9}",
                "'0123456789abcdef0123456789abcd\u{e9}'",
            ),
        ] {
            assert_eq!(
                packed(LOWER32, false, a(vec![ok, bad, ok])),
                Err(Misfit(shown.into()))
            );
        }
        assert!(packed(TextForm::Short, false, a(vec!["sixteen bytes!!!"])).is_err());
        // A null without a null code, in a nulls-not-distinct check.
        let mut out: Vec<u128> = Vec::new();
        let nullable: ArrayRef = Arc::new(StringArray::from(vec![Some(ok), None]));
        assert_eq!(
            pack(LOWER32, false, true, &nullable, &mut out),
            Err(Misfit("null".into()))
        );
        assert!(pack(LOWER32, false, false, &nullable, &mut out).is_ok());
    }

    /// A dictionary larger than its batch packs its rows' values alone: a
    /// value no row holds does not stop the packing.
    #[test]
    fn a_dictionary_larger_than_its_batch_packs_its_rows() {
        let values: ArrayRef = Arc::new(StringArray::from(vec!["beef", "not hex", "c0de"]));
        let keys = datafusion::arrow::array::Int8Array::from(vec![Some(2), None]);
        let dict: ArrayRef = Arc::new(DictionaryArray::<Int8Type>::try_new(keys, values).unwrap());
        let form = TextForm::Hex {
            len: 4,
            upper: false,
        };
        let plain = packed(
            form,
            true,
            Arc::new(StringArray::from(vec![Some("c0de"), None])),
        );
        assert_eq!(packed(form, true, dict), plain);
    }

    #[test]
    fn dictionaries_and_views_pack_like_plain_strings() {
        let values = vec![Some("c0de"), None, Some("beef"), Some("c0de")];
        let form = TextForm::Hex {
            len: 4,
            upper: false,
        };
        let plain = packed(form, true, Arc::new(StringArray::from(values.clone()))).unwrap();
        let dict: DictionaryArray<Int8Type> = values.iter().copied().collect();
        assert_eq!(packed(form, true, Arc::new(dict)).unwrap(), plain);
        let view = StringViewArray::from(values);
        assert_eq!(packed(form, true, Arc::new(view)).unwrap(), plain);
    }

    fn template(min: &str, max: &str, upper: bool) -> TextForm {
        TextForm::Template(Template::of(min.as_bytes(), max.as_bytes(), upper).unwrap())
    }

    /// Prefixed, suffixed and separated ids round-trip, order like their
    /// bytes, and pack alike through every layout and word width.
    #[test]
    fn template_words_round_trip_and_order_like_the_text() {
        let email = template(
            "customer-00000000@example-mail.com",
            "customer-09999999@example-mail.com",
            false,
        );
        let mut values: Vec<String> = (0..400u64)
            .map(|i| format!("customer-{:08}@example-mail.com", i * 24_999 % 10_000_000))
            .collect();
        values.push("customer-0fffffff@example-mail.com".into());
        round_trips_in_order(email, &values);
        let sku = template("SKU-0000-000000", "SKU-FFFF-999999", true);
        let skus: Vec<String> = (0..300u64)
            .map(|i| format!("SKU-{:04X}-{:06}", i * 211 % 65_536, i * 7919 % 1_000_000))
            .collect();
        round_trips_in_order(sku, &skus);
        // Shorter than a window of fixed bytes, and 32 digits behind a prefix.
        let tiny = template("a-0", "a-f", false);
        round_trips_in_order(tiny, &["a-0".into(), "a-7".into(), "a-f".into()]);
        let long = template(
            &format!("c-{}", "0".repeat(32)),
            &format!("c-{}", "f".repeat(32)),
            false,
        );
        round_trips_in_order(long, &[format!("c-{}", "0123456789abcdef".repeat(2))]);
        let values: Vec<Option<&str>> = vec![
            Some("customer-00000042@example-mail.com"),
            None,
            Some("customer-0000a042@example-mail.com"),
        ];
        let plain: Vec<u128> =
            packed(email, true, Arc::new(StringArray::from(values.clone()))).unwrap();
        assert_eq!(plain[1], 0, "the null code");
        assert_eq!(
            unpack(email, true, plain[2]),
            Value::Text(values[2].unwrap().into())
        );
        let dict: DictionaryArray<Int8Type> = values.iter().copied().collect();
        assert_eq!(packed(email, true, Arc::new(dict)).unwrap(), plain);
        let view = StringViewArray::from(values.clone());
        assert_eq!(packed(email, true, Arc::new(view)).unwrap(), plain);
        let mut narrow: Vec<u64> = Vec::new();
        let large: ArrayRef = Arc::new(LargeStringArray::from(values));
        pack(email, true, true, &large, &mut narrow).unwrap();
        assert_eq!(
            narrow.iter().map(|w| u128::from(*w)).collect::<Vec<_>>(),
            plain
        );
    }

    /// Characters the property below draws values from: hex digits of both
    /// cases, bytes a template fixes, and multi-byte UTF-8.
    const DRAWN: &[char] = &[
        '0',
        '1',
        '7',
        '9',
        'a',
        'c',
        'f',
        'A',
        'F',
        'g',
        'G',
        'x',
        '-',
        '@',
        '.',
        '/',
        ' ',
        '\u{e9}',
        '\u{1F600}',
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]
        /// Values drawn around a random shape (each place fixed to one
        /// character or drawn, mostly a hex digit), of one length or not,
        /// some null: the form their least and greatest value suggest, as
        /// a footer's bounds would, packs each value to a word that unpacks
        /// to it, or refuses it; words order like the values; a batch packs
        /// whole exactly when every value fits, alike in every layout and
        /// word width, with and without a null code.
        #[test]
        fn every_suggested_form_packs_exactly_or_refuses(
            shape in proptest::collection::vec(
                proptest::option::weighted(0.4, proptest::sample::select(DRAWN)), 1..48),
            uuid in proptest::bool::weighted(0.1),
            case in 0usize..2,
            rows in proptest::collection::vec(
                (proptest::collection::vec(proptest::sample::select(DRAWN), 48),
                 0u8..100, 1usize..3), 1..40),
        ) {
            let shape: Vec<Option<char>> = match uuid {
                true => (0..36).map(|i| [8, 13, 18, 23].contains(&i).then_some('-')).collect(),
                false => shape,
            };
            let hex = [b"0123456789abcdef", b"0123456789ABCDEF"][case];
            let values: Vec<Option<String>> = rows
                .iter()
                .map(|(drawn, roll, cut)| {
                    // Mostly hex digits of one case where the shape draws;
                    // now and then any character, or a value cut short.
                    (*roll >= 6).then(|| {
                        let v: String = shape
                            .iter()
                            .zip(drawn)
                            .map(|(fixed, d)| match fixed {
                                Some(c) => *c,
                                None if *roll < 12 => *d,
                                None => char::from(hex[*d as usize % 16]),
                            })
                            .collect();
                        let keep = v.chars().count().saturating_sub(usize::from(*roll < 9) * cut);
                        v.chars().take(keep.max(1)).collect()
                    })
                })
                .collect();
            let present: Vec<&String> = values.iter().flatten().collect();
            proptest::prop_assume!(!present.is_empty());
            let (least, most) = (present.iter().min().unwrap(), present.iter().max().unwrap());
            let Some(form) = TextForm::suggested(least, most) else {
                return Ok(());
            };
            let words: Vec<Option<u128>> = present.iter().map(|v| word(form, v.as_bytes())).collect();
            for (v, w) in present.iter().zip(&words) {
                if let Some(w) = w {
                    proptest::prop_assert_eq!(unpack(form, false, *w), Value::Text((*v).clone()), "{}", form);
                }
            }
            let mut fitting: Vec<(&String, u128)> = present
                .iter()
                .zip(&words)
                .filter_map(|(v, w)| w.map(|w| (*v, w)))
                .collect();
            fitting.sort_by_key(|(_, w)| *w);
            proptest::prop_assert!(fitting.windows(2).all(|p| p[0].0 < p[1].0 || p[0] == p[1]));
            let all_fit = words.iter().all(Option::is_some);
            let strs: Vec<Option<&str>> = values.iter().map(|v| v.as_deref()).collect();
            let layouts: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from(strs.clone())),
                Arc::new(LargeStringArray::from(strs.clone())),
                Arc::new(StringViewArray::from(strs.clone())),
                Arc::new(strs.iter().copied().collect::<DictionaryArray<Int8Type>>()),
            ];
            // (A null code is given to forms whose words then fit 128 bits.)
            for null_code in [false, true].into_iter().filter(|&n| form.bits(n) <= 128) {
                let expected: Vec<u128> = values
                    .iter()
                    .map(|v| v.as_ref().map_or(0, |v| word(form, v.as_bytes()).unwrap_or(0) + u128::from(null_code)))
                    .collect();
                for a in &layouts {
                    let got = packed(form, null_code, a.clone());
                    proptest::prop_assert_eq!(got.is_ok(), all_fit, "{} {:?}", form, a.data_type());
                    if let Ok(got) = got {
                        proptest::prop_assert_eq!(&got, &expected);
                        if form.bits(null_code) <= 64 {
                            let mut narrow: Vec<u64> = Vec::new();
                            pack(form, null_code, null_code, a, &mut narrow).unwrap();
                            let wide: Vec<u128> = narrow.iter().map(|w| u128::from(*w)).collect();
                            proptest::prop_assert_eq!(&wide, &expected);
                        }
                    }
                }
            }
        }
    }

    /// A value that differs from the template anywhere is named: a fixed
    /// byte in any place, a digit of the other case or no digit, a length.
    #[test]
    fn a_value_off_the_template_is_named() {
        let ok = "customer-00000042@example-mail.com";
        let form = template(ok, "customer-99999999@example-mail.com", false);
        let mut bad: Vec<String> = (0..ok.len())
            .map(|i| {
                let mut b = ok.as_bytes().to_vec();
                b[i] = if b[i] == b'0' { b'g' } else { b'X' };
                String::from_utf8(b).unwrap()
            })
            .collect();
        bad.push("customer-0000004A@example-mail.com".into());
        bad.push("customer-00000042@example-mail.co".into());
        bad.push("customer-00000042@example-mail.com ".into());
        bad.push("customer-0000004\u{e9}@example-mail.com".into());
        for bad in bad {
            let got = packed(form, false, Arc::new(StringArray::from(vec![ok, &bad, ok])));
            assert_eq!(
                got,
                Err(Misfit(Value::Text(bad.clone()).to_string())),
                "{bad}"
            );
            let view = StringViewArray::from(vec![ok, &bad]);
            assert!(packed(form, false, Arc::new(view)).is_err(), "{bad}");
        }
    }
}
