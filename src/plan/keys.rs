//! How each key check runs: the strategy chosen from what the footers say.
//!
//! A key check (`unique`, `primary_key`, `duplicate_count`, in either null
//! mode) counts the keys that occur more than once. Which algorithm does that
//! cheapest depends on the key's types and on the footer statistics:
//!
//! - **packed**: every part is fixed-width (integers, dates, timestamps,
//!   booleans, floats, decimals of up to 18 digits) and, offset by its footer
//!   minimum, the parts fit 64 or 128 bits together. The packed key is its own
//!   exact fingerprint: 8 (or 16) bytes a row, no second pass.
//! - **fingerprint**: wide keys (text, binary, wide composites). A 64-bit hash
//!   a row; hashes seen more than once are candidates, and one verification
//!   pass counts the exact keys behind them. No candidates, no second pass.
//!   A single text key read from its pages also tables its exact values in
//!   the first pass while enough of them repeat (or bins them by hash, to
//!   be tabled a bin at a time at its end, when the table would outgrow
//!   the caches), and when they fit, they are the answer: no second pass
//!   either.
//! - **text**: a single text key whose footer bounds look like hex digits
//!   of one length (md5, sha ids), UUIDs, short codes (at most 15 bytes), or
//!   generated ids whose hex digits sit between shared bytes (a
//!   [`Template`]). Every
//!   value then packs exactly and in order into a 64- or 128-bit word, so it
//!   runs as packed does, with no second pass. The first value that does not
//!   fit stops it, and the fingerprint strategy runs instead.
//! - **ordered**: the footers say the rows arrive in order of an integer-like
//!   key column (ranges that never go back across row groups and files), so
//!   the rows of one leading value arrive together and each such run is
//!   counted on its own: the memory of one run, verified while streaming.
//! - **grouped**: DataFusion's hash aggregate (on a Ballista cluster, and for
//!   key types the engine does not pack or hash).
//!
//! The dense bitmap of `exec::dense` and the skip of key sets implied by a
//! unique subset come before all of these and are unchanged.

use std::fmt;

use datafusion::arrow::datatypes::{DataType, Schema};

mod template;

use template::is_hex;
pub use template::{Template, TEMPLATE_LEN};

/// What the engine needs to know about one key part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub column: String,
    pub kind: PartKind,
    /// The smallest code value: the footer minimum, or the type's minimum.
    pub offset: i128,
    /// Bits of this part in the packed key (null code included).
    pub bits: u32,
    /// Whether code 0 stands for null (only for `nulls not distinct` keys
    /// whose column can hold nulls); values then start at 1.
    pub null_code: bool,
    /// Whether `offset` and the span come from exact footer statistics (and
    /// a value outside them means the files are inconsistent).
    pub from_footers: bool,
}

/// How a fixed-width value becomes an integer code that orders like the
/// value does in Arrow's row format (ascending, nulls first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKind {
    /// Signed integers and everything stored as one: dates, timestamps,
    /// times, durations, decimals up to 18 digits (unscaled).
    Signed,
    /// Unsigned integers.
    Unsigned,
    Bool,
    /// The total order of IEEE floats (NaN and -0.0 distinct, as in the
    /// grouped pass), 64 or 32 bits.
    Float64,
    Float32,
}

/// The packing of a key: parts in key-set order, the first in the most
/// significant bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packing {
    pub parts: Vec<Part>,
}

impl Packing {
    pub fn bits(&self) -> u32 {
        self.parts.iter().map(|p| p.bits).sum()
    }
}

/// How every value of a text key packs exactly into one word, in the byte
/// order of the values (so packed words order like the keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextForm {
    /// Exactly `len` hex digits (1 to 32), lowercase, or uppercase with
    /// `upper`: 4 bits a digit.
    Hex { len: u8, upper: bool },
    /// A UUID in its canonical text, 8-4-4-4-12 hex digits of one case:
    /// the 32 digits, 4 bits each.
    Uuid { upper: bool },
    /// At most [`SHORT_TEXT`] bytes: the bytes, then the length plus one.
    Short,
    /// Values of one length made of hex digits of one case and of bytes
    /// every value holds at the same place (see [`Template`]).
    Template(Template),
}

/// The longest value of [`TextForm::Short`]: 15 bytes and a length byte.
pub const SHORT_TEXT: usize = 15;

impl TextForm {
    /// Bits of a packed value, the null code included.
    pub fn bits(&self, null_code: bool) -> u32 {
        match self {
            TextForm::Hex { len, .. } => 4 * u32::from(*len) + u32::from(null_code),
            TextForm::Uuid { .. } => 128 + u32::from(null_code),
            // Length 0 stands for null; values store their length + 1.
            TextForm::Short => 128,
            TextForm::Template(t) => 4 * t.digits() + u32::from(null_code),
        }
    }

    /// The length of every value, for the forms that fix it.
    pub fn fixed_len(&self) -> Option<usize> {
        match self {
            TextForm::Hex { len, .. } => Some(usize::from(*len)),
            TextForm::Uuid { .. } => Some(36),
            TextForm::Short => None,
            TextForm::Template(t) => Some(t.width()),
        }
    }

    /// The form the footer bounds of a text column suggest: the first and
    /// the last value in byte order. Values between them may still not fit.
    /// Values of at most [`SHORT_TEXT`] bytes take the short form rather
    /// than a template's, which more values fit.
    pub fn suggested(min: &str, max: &str) -> Option<TextForm> {
        let hex = |s: &str, upper: bool| s.bytes().all(|b| is_hex(b, upper));
        let uuid = |s: &str, upper: bool| {
            let b = s.as_bytes();
            b.len() == 36
                && [8, 13, 18, 23].iter().all(|&i| b[i] == b'-')
                && hex(&s.replace('-', ""), upper)
        };
        for upper in [false, true] {
            if uuid(min, upper) && uuid(max, upper) {
                return Some(TextForm::Uuid { upper });
            }
        }
        let len = min.len();
        if len == max.len() && (1..=32).contains(&len) {
            for upper in [false, true] {
                if hex(min, upper) && hex(max, upper) {
                    return Some(TextForm::Hex {
                        len: len as u8,
                        upper,
                    });
                }
            }
        }
        if min.len() <= SHORT_TEXT && max.len() <= SHORT_TEXT {
            return Some(TextForm::Short);
        }
        [false, true]
            .into_iter()
            .find_map(|upper| Template::of(min.as_bytes(), max.as_bytes(), upper))
            .map(TextForm::Template)
    }
}

impl fmt::Display for TextForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TextForm::Hex { len, upper } => write!(
                f,
                "{len} {} hex digits",
                if *upper { "uppercase" } else { "lowercase" }
            ),
            TextForm::Uuid { upper } => write!(
                f,
                "UUIDs (8-4-4-4-12 {} hex digits)",
                if *upper { "uppercase" } else { "lowercase" }
            ),
            TextForm::Short => write!(f, "at most {SHORT_TEXT} bytes"),
            TextForm::Template(t) => t.fmt(f),
        }
    }
}

/// The strategy of one key check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyStrategy {
    Packed(Packing),
    /// One text column whose values pack exactly (see [`TextForm`]).
    Text {
        column: String,
        form: TextForm,
        /// Whether code 0 stands for null (`nulls not distinct`, nullable).
        null_code: bool,
        /// The footer bounds behind the choice.
        bounds: (String, String),
        /// The strategy used from the first value that does not fit.
        fallback: Box<KeyStrategy>,
    },
    Fingerprint {
        /// The test-only collision switch: keep only this many bits.
        test_bits: Option<u32>,
    },
    /// Rows arrive in order of `leading`; equal keys are adjacent runs.
    Ordered {
        leading: String,
        /// How many row groups the footer ranges were checked over.
        row_groups: usize,
        /// The strategy used if the order breaks while streaming.
        fallback: Box<KeyStrategy>,
    },
    Grouped,
}

/// One key check: the key set (columns sorted by name) and its null mode.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyJob {
    pub keys: Vec<String>,
    pub nulls_equal: bool,
}

/// Footer facts about one key column, gathered by `exec::stats`.
#[derive(Debug, Clone, Default)]
pub struct ColumnFacts {
    /// The exact `[min, max]` of the column's integer code (unscaled
    /// decimals, days, timestamp units), when every row group gives it.
    pub range: Option<(i128, i128)>,
    /// Whether the column can hold nulls (no footer says it holds none).
    pub may_hold_nulls: bool,
    /// Per row group, in scan order, the exact `[min, max]`; `None` when any
    /// row group lacks them.
    pub row_group_ranges: Option<Vec<(i128, i128)>>,
    /// For a text column, the smallest and the largest value the footers
    /// give (bounds, perhaps truncated; only a hint).
    pub text_bounds: Option<(String, String)>,
    /// For a text column, whether its row groups' bounds, two or more, lie
    /// apart but for an eighth of them, once taken in order: sorted files,
    /// or a write by key ranges.
    pub text_ranges_apart: bool,
}

impl KeyStrategy {
    /// The strategy with the test-only collision switch set on its
    /// fingerprints (a fallback's included).
    pub fn with_test_bits(mut self, bits: Option<u32>) -> KeyStrategy {
        self.set_test_bits(bits);
        self
    }

    fn set_test_bits(&mut self, bits: Option<u32>) {
        match self {
            KeyStrategy::Fingerprint { test_bits } => *test_bits = bits,
            KeyStrategy::Text { fallback, .. } => fallback.set_test_bits(bits),
            _ => {}
        }
    }
}

/// A strategy forced on every key check, for tests (`EngineOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forced {
    Packed,
    /// The text strategy for every single text key (the short form when
    /// the footers suggest none), falling back as it would.
    Text,
    Fingerprint,
    Ordered,
    Grouped,
}

impl Forced {
    /// `packed`, `text`, `fingerprint`, `ordered` or `grouped`.
    pub fn parse(s: &str) -> Option<Forced> {
        match s {
            "packed" => Some(Forced::Packed),
            "text" => Some(Forced::Text),
            "fingerprint" => Some(Forced::Fingerprint),
            "ordered" => Some(Forced::Ordered),
            "grouped" => Some(Forced::Grouped),
            _ => None,
        }
    }
}

/// Whether values of `ty` are floating-point (a dictionary's values too),
/// whose NaN and -0.0 `count(distinct)` counts its own way.
pub fn floating(ty: &DataType) -> bool {
    match ty {
        DataType::Dictionary(_, v) => v.is_floating(),
        t => t.is_floating(),
    }
}

/// Whether the strategy counts distinct keys exactly as `count(distinct)`
/// does: packed words of parts that are not floating-point (whose NaN and
/// -0.0 the fused aggregate counts its own way), and text (packed, or, from
/// the first value that does not fit, fingerprints whose repeats are
/// counted by their exact keys).
pub fn exact_distinct(s: &KeyStrategy) -> bool {
    let packing = match s {
        KeyStrategy::Text { .. } => return true,
        KeyStrategy::Packed(p) => p,
        KeyStrategy::Ordered { fallback, .. } => match fallback.as_ref() {
            KeyStrategy::Packed(p) => p,
            _ => return false,
        },
        _ => return false,
    };
    packing
        .parts
        .iter()
        .all(|p| !matches!(p.kind, PartKind::Float32 | PartKind::Float64))
}

/// Picks the strategy of `job` from the schema and the footer facts.
pub fn choose(
    job: &KeyJob,
    schema: &Schema,
    facts: &dyn Fn(&str) -> ColumnFacts,
    forced: Option<Forced>,
) -> KeyStrategy {
    let packing = packing(job, schema, facts);
    let general = match (&packing, forced) {
        (_, Some(Forced::Grouped)) => return KeyStrategy::Grouped,
        (_, Some(Forced::Fingerprint)) => KeyStrategy::Fingerprint { test_bits: None },
        (Some(p), _) if p.bits() <= 128 => KeyStrategy::Packed(p.clone()),
        _ if hashable(job, schema) => KeyStrategy::Fingerprint { test_bits: None },
        _ => return KeyStrategy::Grouped,
    };
    if matches!(general, KeyStrategy::Fingerprint { .. }) && forced != Some(Forced::Fingerprint) {
        if let Some(text) = text(job, schema, facts, forced == Some(Forced::Text)) {
            return text;
        }
    }
    // Runs of equal keys are compared as packed words.
    if !matches!(general, KeyStrategy::Packed(_)) {
        return general;
    }
    match ordered_by(job, schema, facts) {
        Some((leading, row_groups)) if forced != Some(Forced::Packed) => KeyStrategy::Ordered {
            leading,
            row_groups,
            fallback: Box::new(general),
        },
        _ if forced == Some(Forced::Ordered) => KeyStrategy::Ordered {
            leading: job.keys[0].clone(),
            row_groups: 0,
            fallback: Box::new(general),
        },
        _ => general,
    }
}

/// The packing of the key, or `None` when a part is not fixed-width.
pub fn packing(
    job: &KeyJob,
    schema: &Schema,
    facts: &dyn Fn(&str) -> ColumnFacts,
) -> Option<Packing> {
    let parts = job
        .keys
        .iter()
        .map(|c| {
            let ty = schema.field_with_name(c).ok()?.data_type();
            part(c, ty, &facts(c), job.nulls_equal)
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Packing { parts })
}

/// The kind and full bit width of a fixed-width type.
pub fn fixed_width(ty: &DataType) -> Option<(PartKind, u32)> {
    use DataType as T;
    Some(match ty {
        T::Boolean => (PartKind::Bool, 1),
        T::Int8 => (PartKind::Signed, 8),
        T::Int16 => (PartKind::Signed, 16),
        T::Int32 | T::Date32 | T::Time32(_) => (PartKind::Signed, 32),
        T::Int64 | T::Date64 | T::Time64(_) | T::Timestamp(..) | T::Duration(_) => {
            (PartKind::Signed, 64)
        }
        T::UInt8 => (PartKind::Unsigned, 8),
        T::UInt16 => (PartKind::Unsigned, 16),
        T::UInt32 => (PartKind::Unsigned, 32),
        T::UInt64 => (PartKind::Unsigned, 64),
        T::Float32 => (PartKind::Float32, 32),
        T::Float64 => (PartKind::Float64, 64),
        T::Decimal32(..) => (PartKind::Signed, 32),
        T::Decimal64(..) => (PartKind::Signed, 64),
        T::Decimal128(p, _) if *p <= 18 => (PartKind::Signed, 64),
        _ => return None,
    })
}

fn part(column: &str, ty: &DataType, facts: &ColumnFacts, nulls_equal: bool) -> Option<Part> {
    let (kind, width) = fixed_width(ty)?;
    let null_code = nulls_equal && facts.may_hold_nulls;
    let ranged = matches!(kind, PartKind::Signed | PartKind::Unsigned);
    let (offset, span, from_footers) = match facts.range {
        Some((min, max)) if ranged && max >= min => (min, (max - min) as u128, true),
        _ => {
            let offset = match kind {
                PartKind::Signed => -(1i128 << (width - 1)),
                _ => 0,
            };
            (offset, (1u128 << width) - 1, false)
        }
    };
    // Codes run from 0 (or 1, with a null code) to `span` (+ 1).
    let top = span + u128::from(null_code);
    let bits = 128 - top.leading_zeros();
    Some(Part {
        column: column.to_string(),
        kind,
        offset,
        bits,
        null_code,
        from_footers,
    })
}

/// The text strategy for a single text key whose footer bounds suggest a
/// form (with `forced`, the short form when they suggest none).
fn text(
    job: &KeyJob,
    schema: &Schema,
    facts: &dyn Fn(&str) -> ColumnFacts,
    forced: bool,
) -> Option<KeyStrategy> {
    let [column] = job.keys.as_slice() else {
        return None;
    };
    let ty = schema.field_with_name(column).ok()?.data_type();
    if !is_text(ty) {
        return None;
    }
    let f = facts(column);
    let null_code = job.nulls_equal && f.may_hold_nulls;
    let suggested = f
        .text_bounds
        .as_ref()
        .and_then(|(min, max)| TextForm::suggested(min, max));
    let form = match suggested {
        // A template is left to the fingerprint strategy where its first
        // pass does better: values in order, counted in order with neither
        // hash nor table; words wider than a fingerprint's 4 bytes a row
        // (the first pass tables values that repeat exactly, storing no
        // row: 150,000 e-mail ids of 16 digits in 10M rows took 156 MB
        // as words, 81 MB so); and a dictionary-typed column, whose pages'
        // dictionaries that pass tallies by index.
        Some(form @ TextForm::Template(_))
            if !forced
                && (f.text_ranges_apart
                    || form.bits(null_code) > TEMPLATE_BITS
                    || matches!(ty, DataType::Dictionary(..))) =>
        {
            return None
        }
        Some(form) if form.bits(null_code) <= 128 => form,
        _ if forced => TextForm::Short,
        _ => return None,
    };
    let bounds = f.text_bounds.unwrap_or_default();
    Some(KeyStrategy::Text {
        column: column.clone(),
        form,
        null_code,
        bounds,
        fallback: Box::new(KeyStrategy::Fingerprint { test_bits: None }),
    })
}

/// The widest template the text strategy packs: 4 bytes a row in the
/// radix partitions from 256 of them (10M rows) on, as a fingerprint.
pub const TEMPLATE_BITS: u32 = 40;

/// The text types the text strategy reads (a dictionary's values too).
pub fn is_text(ty: &DataType) -> bool {
    match ty {
        DataType::Dictionary(_, v) => is_text(v),
        t => matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View),
    }
}

/// Whether the engine can fingerprint every key column: it hashes Arrow
/// arrays of any flat type (half floats stay with the grouped pass, whose
/// folding of -0.0 the verification pass does not repeat for them).
fn hashable(job: &KeyJob, schema: &Schema) -> bool {
    job.keys.iter().all(|c| {
        schema.field_with_name(c).is_ok_and(|f| {
            let t = f.data_type();
            !t.is_nested() && *t != DataType::Float16
        })
    })
}

/// A key column by whose order the rows arrive, with the number of row
/// groups behind that claim: every row group's range starts no lower than
/// the previous one ends. In `nulls not distinct` mode a nullable leading
/// column does not qualify (the footers say nothing about where nulls are).
fn ordered_by(
    job: &KeyJob,
    schema: &Schema,
    facts: &dyn Fn(&str) -> ColumnFacts,
) -> Option<(String, usize)> {
    job.keys.iter().find_map(|c| {
        let ty = schema.field_with_name(c).ok()?.data_type();
        if !matches!(fixed_width(ty)?.0, PartKind::Signed | PartKind::Unsigned) {
            return None;
        }
        let f = facts(c);
        if job.nulls_equal && f.may_hold_nulls {
            return None;
        }
        let groups = f.row_group_ranges?;
        follow_one_another(&groups).then(|| (c.clone(), groups.len()))
    })
}

/// Whether row groups' ranges (two or more, in scan order) follow one
/// another: each starts where the last ended or later.
pub fn follow_one_another(groups: &[(i128, i128)]) -> bool {
    groups.len() >= 2 && groups.windows(2).all(|w| w[0].1 <= w[1].0)
}

impl fmt::Display for KeyStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyStrategy::Packed(p) => {
                let parts: Vec<String> = p
                    .parts
                    .iter()
                    .map(|part| {
                        let source = if part.from_footers {
                            format!("footer range from {}", part.offset)
                        } else {
                            "full type width".into()
                        };
                        let null = if part.null_code { ", null code" } else { "" };
                        format!("{} {} bits ({source}{null})", part.column, part.bits)
                    })
                    .collect();
                let word = if p.bits() <= 64 { 64 } else { 128 };
                write!(
                    f,
                    "packed: {} = {} bits in a {word}-bit word, radix-partitioned and counted exactly, no second pass",
                    parts.join(" + "),
                    p.bits()
                )
            }
            KeyStrategy::Text {
                column,
                form,
                null_code,
                bounds,
                fallback,
            } => {
                let word = if form.bits(*null_code) <= 64 { 64 } else { 128 };
                let null = if *null_code { ", null code" } else { "" };
                write!(
                    f,
                    "text: the footer bounds of {column} ({} to {}) suggest {form}, packed exactly into a {word}-bit word{null}, radix-partitioned and counted, no second pass (if a value does not fit: {fallback})",
                    crate::value::Value::Text(bounds.0.clone()),
                    crate::value::Value::Text(bounds.1.clone()),
                )
            }
            KeyStrategy::Fingerprint { .. } => write!(
                f,
                "fingerprint: a hash a row of 32 bits more than the partition bits (4 bytes a row kept; the whole 64 bits, 8 bytes, past about 600M rows), radix-partitioned; repeated hashes are verified against the exact keys, only when there are any, in a second read of the key columns (a single text key of local files, dictionary-typed text included, hashed straight from its Parquet pages in both reads, its exact values tabled in the first while enough of them repeat and they fit, or binned by hash and tabled a bin at a time at its end when the table would outgrow the caches and the rows take no more room than it would, which then need no second read; a composite of text and integer parts in the first; or, for small or remote files, in the key columns the scan kept); a single text key of local files whose footers say its values come in order is first counted in order alone, with no hash and no table, and if a value comes out of order each row group tabled on its own while their ranges lie apart, read again as above only if they do not"
            ),
            KeyStrategy::Ordered {
                leading,
                row_groups,
                fallback,
            } => write!(
                f,
                "ordered: the footer ranges of {leading} never go back across {row_groups} row group(s), so the rows of one {leading} arrive together and each run of them is counted on its own (the memory of one run; the order is verified while streaming, and if it breaks or a run of different keys passes 1,048,576 rows: {fallback})"
            ),
            KeyStrategy::Grouped => write!(f, "grouped: DataFusion's hash aggregate"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{Field, TimeUnit};

    fn schema() -> Schema {
        Schema::new(vec![
            Field::new("store_id", DataType::Int32, true),
            Field::new("order_id", DataType::Int64, false),
            Field::new("event_id", DataType::Utf8, false),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, None),
                false,
            ),
            Field::new("f", DataType::Float64, true),
        ])
    }

    fn job(keys: &[&str], nulls_equal: bool) -> KeyJob {
        KeyJob {
            keys: keys.iter().map(|s| s.to_string()).collect(),
            nulls_equal,
        }
    }

    fn ranged(min: i128, max: i128) -> ColumnFacts {
        ColumnFacts {
            range: Some((min, max)),
            may_hold_nulls: false,
            ..Default::default()
        }
    }

    #[test]
    fn composite_keys_pack_by_their_footer_ranges() {
        let facts = |c: &str| match c {
            "store_id" => ranged(1, 1000),
            _ => ranged(7, (1 << 40) + 6),
        };
        let s = choose(
            &job(&["order_id", "store_id"], false),
            &schema(),
            &facts,
            None,
        );
        let KeyStrategy::Packed(p) = s else {
            panic!("{s}")
        };
        assert_eq!(p.parts[0].bits, 40, "2^40 values from 7");
        assert_eq!(p.parts[1].bits, 10, "1000 values");
        assert_eq!(p.bits(), 50);
    }

    #[test]
    fn without_statistics_parts_take_their_type_width() {
        let none = |_: &str| ColumnFacts {
            may_hold_nulls: true,
            ..Default::default()
        };
        let KeyStrategy::Packed(p) = choose(
            &job(&["order_id", "store_id"], false),
            &schema(),
            &none,
            None,
        ) else {
            panic!()
        };
        assert_eq!(p.bits(), 96, "a 128-bit word");
        let KeyStrategy::Packed(p) = choose(&job(&["f", "store_id"], true), &schema(), &none, None)
        else {
            panic!()
        };
        assert_eq!(p.bits(), 64 + 1 + 32 + 1, "null codes widen nullable parts");
        assert_eq!(
            choose(&job(&["event_id"], false), &schema(), &none, None),
            KeyStrategy::Fingerprint { test_bits: None }
        );
        assert_eq!(
            choose(
                &job(&["event_id", "ts", "order_id"], false),
                &schema(),
                &none,
                None
            ),
            KeyStrategy::Fingerprint { test_bits: None }
        );
    }

    #[test]
    fn footer_ranges_in_order_choose_the_ordered_strategy() {
        let facts = |c: &str| ColumnFacts {
            range: Some((0, 99)),
            may_hold_nulls: false,
            row_group_ranges: (c == "ts").then(|| vec![(0, 10), (10, 50), (51, 99)]),
            text_bounds: None,
            text_ranges_apart: false,
        };
        let s = choose(&job(&["store_id", "ts"], false), &schema(), &facts, None);
        assert!(
            matches!(&s, KeyStrategy::Ordered { leading, row_groups: 3, .. } if leading == "ts"),
            "{s}"
        );
        let back = |c: &str| ColumnFacts {
            row_group_ranges: (c == "ts").then(|| vec![(0, 10), (5, 50)]),
            ..ranged(0, 99)
        };
        assert!(matches!(
            choose(&job(&["store_id", "ts"], false), &schema(), &back, None),
            KeyStrategy::Packed(_)
        ));
    }

    #[test]
    fn text_bounds_suggest_the_text_form() {
        let bounds = |min: &str, max: &str, nulls: bool| {
            let b = (min.to_string(), max.to_string());
            move |_: &str| ColumnFacts {
                may_hold_nulls: nulls,
                text_bounds: Some(b.clone()),
                ..Default::default()
            }
        };
        let form = |facts: &dyn Fn(&str) -> ColumnFacts, nulls_equal: bool, forced| match choose(
            &job(&["event_id"], nulls_equal),
            &schema(),
            facts,
            forced,
        ) {
            KeyStrategy::Text {
                form, null_code, ..
            } => Some((form, null_code)),
            _ => None,
        };
        let md5 = bounds(&"0".repeat(32), &"f".repeat(32), true);
        let hex32 = TextForm::Hex {
            len: 32,
            upper: false,
        };
        assert_eq!(form(&md5, false, None), Some((hex32, false)));
        assert_eq!(
            form(&md5, true, None),
            None,
            "no bit is left for a null code"
        );
        let upper = bounds("00A1", "FFFF", true);
        let hex4 = TextForm::Hex {
            len: 4,
            upper: true,
        };
        assert_eq!(form(&upper, true, None), Some((hex4, true)));
        assert_eq!(
            form(&bounds("AB-1", "ZZ-9", false), false, None),
            Some((TextForm::Short, false))
        );
        let long = bounds("a", "a much longer value", false);
        assert_eq!(form(&long, false, None), None);
        assert_eq!(
            form(&long, false, Some(Forced::Text)),
            Some((TextForm::Short, false))
        );
        assert_eq!(form(&md5, false, Some(Forced::Fingerprint)), None);
        // Ids of one length: hex digits between fixed bytes.
        let ids = bounds(
            "customer-00000000@example-mail.com",
            "customer-09999999@example-mail.com",
            true,
        );
        match form(&ids, true, None) {
            Some((TextForm::Template(t), true)) => {
                assert_eq!((t.width(), t.digits(), t.upper), (34, 7, false));
                assert_eq!(
                    TextForm::Template(t).to_string(),
                    "34-byte values shaped customer-0#######@example-mail.com, each # a hex digit (lowercase)"
                );
            }
            other => panic!("{other:?}"),
        }
        let sku = bounds("SKU-0000-000000-X", "SKU-FFFF-999999-X", false);
        assert!(matches!(
            form(&sku, false, None),
            Some((TextForm::Template(t), false)) if t.upper && t.digits() == 10
        ));
        // Not a template: lengths differ, a byte that differs and is no
        // digit, no fixed byte, too many digits for the null code.
        for (min, max) in [
            (
                "customer-0@example-mail.com",
                "customer-99@example-mail.com",
            ),
            (
                "customer-00000000@example-mail.com",
                "customer-0000000z@example-mail.com",
            ),
            ("aaaaaaaaaaaaaaaaaaaaaa", "zzzzzzzzzzzzzzzzzzzzzz"),
            ("0000000000000000000000", "ffffffffffffffffffffff"),
        ] {
            let got = form(&bounds(min, max, false), false, None);
            assert!(
                !matches!(got, Some((TextForm::Template(_), _))),
                "{min} {max}: {got:?}"
            );
        }
        // Wider than a fingerprint's 4 bytes a row: left to fingerprints.
        let wide = bounds(
            &format!("customer-{}", "0".repeat(11)),
            &format!("customer-{}", "f".repeat(11)),
            true,
        );
        assert_eq!(form(&wide, false, None), None);
        assert!(matches!(
            form(&wide, false, Some(Forced::Text)),
            Some((TextForm::Template(_), false))
        ));
        let ten = bounds(
            &format!("customer-{}", "0".repeat(10)),
            &format!("customer-{}", "f".repeat(10)),
            true,
        );
        assert!(matches!(
            form(&ten, false, None),
            Some((TextForm::Template(_), false))
        ));
        assert_eq!(
            form(&ten, true, None),
            None,
            "no bit is left for a null code"
        );
        // Composites are not text keys.
        assert!(matches!(
            choose(
                &job(&["event_id", "order_id"], false),
                &schema(),
                &md5,
                None
            ),
            KeyStrategy::Fingerprint { .. }
        ));
    }
}
