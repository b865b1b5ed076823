//! The prefix and suffix that most values of a text key share
//! (`customer-` and `@example-mail.com`, an order number's `ORD-2026-`, a
//! URL's scheme and host), which a run's bins ([`super::binned`]) keep
//! once instead of in every entry.
//!
//! The affixes are chosen once for every run of a check, from a sample of
//! the first run to bin, and never change. A value that has both (and is
//! at least as long as the two) is stored as a byte 1 and the bytes
//! between them; any other as a byte 0 and all of its bytes. So a value is
//! always stored the same way, two values are equal exactly when their
//! stored bytes are, and the value is rebuilt from them whole: nothing
//! depends on the sample, only how much room the entries take.

use crate::keyindex::shared_len;

/// The affixes of a check's runs, chosen by the first to bin (`None`
/// inside: it found none worth keeping).
pub(super) type Chosen = std::sync::Arc<std::sync::OnceLock<Option<std::sync::Arc<Affixes>>>>;

/// Values sampled to choose the affixes.
pub(super) const SAMPLE: usize = 4096;

/// The share of the sample, in tenths, that must have an affix for it to
/// be kept (the others are stored whole).
const SHARED_TENTHS: usize = 9;

/// The longest affix kept.
const LONGEST: usize = 255;

/// The fewest bytes the two affixes must take together for them to be
/// kept: below it the byte that says how a value is stored costs more
/// than they save.
const LEAST: usize = 4;

/// A text key's prefix and suffix, kept once.
#[derive(Debug, PartialEq)]
pub(super) struct Affixes {
    prefix: Box<[u8]>,
    suffix: Box<[u8]>,
}

impl Affixes {
    /// The longest prefix and suffix that one of the first, middle and
    /// last values of `sample` shares with nine in ten of its values, or
    /// `None` when they take fewer than [`LEAST`] bytes together.
    pub(super) fn of(sample: &[&[u8]]) -> Option<Affixes> {
        let best = firsts(sample).map(|first| Affixes::of_first(sample, first));
        best.max_by_key(|a| a.prefix.len() + a.suffix.len())
            .filter(|a| a.prefix.len() + a.suffix.len() >= LEAST)
    }

    /// The prefix and suffix of `first` that nine in ten of `sample`'s
    /// values share.
    fn of_first(sample: &[&[u8]], first: &[u8]) -> Affixes {
        let prefix = shared(sample, SHARED_TENTHS, |v| shared_len(first, v));
        let suffix = suffix_shared(sample, first, SHARED_TENTHS).min(first.len() - prefix);
        Affixes {
            prefix: first[..prefix].into(),
            suffix: first[first.len() - suffix..].into(),
        }
    }

    /// The bytes a value with both affixes saves as stored.
    pub(super) fn saved(&self) -> usize {
        (self.prefix.len() + self.suffix.len()).saturating_sub(1)
    }

    /// `value` as stored, in `out` (emptied first).
    #[inline]
    pub(super) fn store(&self, value: &[u8], out: &mut Vec<u8>) {
        let (p, s) = (self.prefix.len(), self.suffix.len());
        out.clear();
        if value.len() >= p + s && value.starts_with(&self.prefix) && value.ends_with(&self.suffix)
        {
            out.push(1);
            out.extend_from_slice(&value[p..value.len() - s]);
        } else {
            out.push(0);
            out.extend_from_slice(value);
        }
    }

    /// The value stored as `stored` (rebuilt in `out` when it had the
    /// affixes).
    #[inline]
    pub(super) fn value<'a>(&self, stored: &'a [u8], out: &'a mut Vec<u8>) -> &'a [u8] {
        match stored.split_first() {
            Some((1, between)) => {
                out.clear();
                out.extend_from_slice(&self.prefix);
                out.extend_from_slice(between);
                out.extend_from_slice(&self.suffix);
                out
            }
            Some((_, whole)) => whole,
            None => stored,
        }
    }
}

/// The longest suffix that one of the first, middle and last values of
/// `sample` shares with half its values: a run's sorted stretches keep
/// their keys without it ([`super::stretches`]; front-coded, they keep
/// their shared prefixes once already, and a key without the suffix costs
/// them nothing, so half the sample is enough).
pub(super) fn suffix<'a>(sample: &[&'a [u8]]) -> &'a [u8] {
    (firsts(sample))
        .map(|first| &first[first.len() - suffix_shared(sample, first, 5)..])
        .max_by_key(|s| s.len())
        .unwrap_or_default()
}

/// The first, middle and last values of `sample`: those the affixes are
/// taken from.
fn firsts<'a>(sample: &[&'a [u8]]) -> impl Iterator<Item = &'a [u8]> {
    let n = sample.len();
    let firsts = [0, n / 2, n.saturating_sub(1)].map(|i| sample.get(i).copied());
    firsts.into_iter().flatten()
}

/// The most bytes (at most [`LONGEST`]) that `common` finds `tenths` in
/// ten of `sample`'s values share.
fn shared(sample: &[&[u8]], tenths: usize, common: impl Fn(&[u8]) -> usize) -> usize {
    let mut lens: Vec<usize> = sample.iter().map(|v| common(v)).collect();
    lens.sort_unstable();
    lens[lens.len() * (10 - tenths) / 10].min(LONGEST)
}

/// How many of the last bytes of `first` `tenths` in ten of `sample`'s
/// values end with.
fn suffix_shared(sample: &[&[u8]], first: &[u8], tenths: usize) -> usize {
    shared(sample, tenths, |v| {
        let (a, b) = (first.iter().rev(), v.iter().rev());
        a.zip(b).take_while(|(a, b)| a == b).count()
    })
}

impl std::fmt::Display for Affixes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "values stored without a prefix of {} and a suffix of {} bytes",
            self.prefix.len(),
            self.suffix.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::next;
    use super::*;

    fn stored(a: &Affixes, v: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        a.store(v, &mut out);
        out
    }

    /// The affixes nine in ten values share, whatever the rest; none when
    /// they would save too little; and a value too short for both, or
    /// with one only, stored whole.
    #[test]
    fn affixes_are_those_most_values_share() {
        // The first value one of those without: the middle one is taken.
        let values: Vec<Vec<u8>> = (0..1000)
            .map(|i| match i % 20 {
                0 | 7 => format!("unknown-{i}").into_bytes(),
                _ => format!("customer-{i:08}@example-mail.com").into_bytes(),
            })
            .collect();
        let sample: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
        let a = Affixes::of(&sample).unwrap();
        assert_eq!(&a.prefix[..], b"customer-00000");
        assert_eq!(&a.suffix[..], b"@example-mail.com");
        assert_eq!(
            stored(&a, b"customer-00000234@example-mail.com"),
            b"\x01234"
        );
        let other = b"customer-00001234@example-mail.com";
        assert_eq!(stored(&a, other), [&[0u8][..], &other[..]].concat());
        assert_eq!(stored(&a, b"unknown-7"), b"\x00unknown-7");
        // Both affixes, overlapping in a value too short for both.
        let short = b"customer-0000@example-mail.com";
        assert_eq!(stored(&a, &short[..]), [&[0u8][..], &short[..]].concat());
        assert!(Affixes::of(&[&b"abc"[..], &b"xyz"[..], &b"abd"[..]]).is_none());
        assert!(Affixes::of(&[] as &[&[u8]]).is_none());
        // Prefix and suffix shared whole: they do not overlap in the value
        // they come from (the last, the longest), and a shorter value is
        // stored whole.
        let a = Affixes::of(&[&b"aaaa"[..], &b"aaaaaa"[..], &b"aaaaaaaa"[..]]).unwrap();
        assert_eq!((a.prefix.len(), a.suffix.len()), (4, 4));
        assert_eq!(stored(&a, b"aaaaaa"), b"\x00aaaaaa");
        assert_eq!(stored(&a, b"aaaaaaaaa"), b"\x01a");
    }

    /// The stretches' suffix: one that six in ten values share (too few
    /// for the bins' affixes), none of an empty sample.
    #[test]
    fn the_stretches_suffix_is_one_half_the_values_share() {
        let values: Vec<Vec<u8>> = (0..1000)
            .map(|i| match i % 10 {
                0..=3 => format!("x{i}").into_bytes(),
                _ => format!("k{i}@shop.example").into_bytes(),
            })
            .collect();
        let sample: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
        assert_eq!(suffix(&sample), b"@shop.example");
        assert!(Affixes::of(&sample).is_none());
        assert_eq!(suffix(&[]), b"");
    }

    /// Random values of few bytes, affixes chosen from some of them:
    /// every value is rebuilt from its stored bytes, and two values are
    /// stored alike exactly when they are equal.
    #[test]
    fn stored_values_are_rebuilt_and_equal_only_when_the_values_are() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..50 {
            let values: Vec<Vec<u8>> = (0..300)
                .map(|_| {
                    let len = next(&mut state) % 12;
                    (0..len)
                        .map(|_| b"ab"[(next(&mut state) % 2) as usize])
                        .collect()
                })
                .collect();
            let mut sample: Vec<&[u8]> = values.iter().map(|v| &v[..]).collect();
            sample.truncate(1 + (next(&mut state) % 300) as usize);
            // Affixes of the sample, or made up where it has none.
            let a = Affixes::of(&sample).unwrap_or(Affixes {
                prefix: b"ab"[..].into(),
                suffix: b"ba"[..].into(),
            });
            let mut out = Vec::new();
            for v in &values {
                assert_eq!(a.value(&stored(&a, v), &mut out), &v[..]);
                for w in &values {
                    assert_eq!(stored(&a, v) == stored(&a, w), v == w);
                }
            }
        }
    }
}
