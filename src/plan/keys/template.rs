//! The template form of text keys: generated ids whose hex digits sit
//! between bytes every value shares.

use std::fmt;

/// The longest value of a [`Template`].
pub const TEMPLATE_LEN: usize = 64;

/// The shape of generated ids: values of one length whose bytes are hex
/// digits of one case, but at the places where every value holds the same
/// byte (a prefix, a suffix, separators): `customer-00012345@example.com`,
/// `SKU-1A2B-000123`, `user.123019.81d8a2c19f@example.com`, `2024-12-07`.
/// A value packs as its hex digits, 4 bits each, in order; the fixed bytes
/// are checked, not stored. Words order like the values' bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Template {
    /// The value's bytes at the fixed places (`0` at the digits').
    bytes: [u8; TEMPLATE_LEN],
    len: u8,
    /// Bit `i` set: byte `i` is fixed.
    fixed: u64,
    pub upper: bool,
}

impl Template {
    /// The template the first and the last value in byte order share. Their
    /// common prefix is fixed (every value between them starts with it).
    /// After it, where they differ both must hold hex digits of the case;
    /// a stretch where they agree is fixed from its first byte that is no
    /// hex digit to its last (`@example-mail.com`, a separator), or to the
    /// value's end, and its hex digits outside those are digits that
    /// happen to agree. `None` without a fixed byte (plain hex is
    /// [`super::TextForm::Hex`]), or with more than 32 digits.
    pub fn of(min: &[u8], max: &[u8], upper: bool) -> Option<Template> {
        let len = min.len();
        if len != max.len() || len > TEMPLATE_LEN {
            return None;
        }
        let mut t = Template {
            bytes: [0; TEMPLATE_LEN],
            len: len as u8,
            fixed: 0,
            upper,
        };
        let fix = |t: &mut Template, i: usize| {
            t.bytes[i] = min[i];
            t.fixed |= 1 << i;
        };
        let prefix = min.iter().zip(max).take_while(|(a, b)| a == b).count();
        (0..prefix).for_each(|i| fix(&mut t, i));
        let mut i = prefix;
        while i < len {
            if min[i] != max[i] {
                if !(is_hex(min[i], upper) && is_hex(max[i], upper)) {
                    return None;
                }
                i += 1;
                continue;
            }
            let end = (i..len).find(|&j| min[j] != max[j]).unwrap_or(len);
            let other = |j: &usize| !is_hex(min[*j], upper);
            if let (Some(first), Some(last)) = ((i..end).find(other), (i..end).rev().find(other)) {
                let last = if end == len { end - 1 } else { last };
                (first..=last).for_each(|j| fix(&mut t, j));
            }
            i = end;
        }
        (t.fixed != 0 && (1..=32).contains(&t.digits())).then_some(t)
    }

    /// The length of every value.
    pub fn width(&self) -> usize {
        usize::from(self.len)
    }

    /// How many hex digits a value holds.
    pub fn digits(&self) -> u32 {
        u32::from(self.len) - self.fixed.count_ones()
    }

    /// Whether byte `i` is fixed, and which byte it is then.
    pub fn fixed_at(&self, i: usize) -> Option<u8> {
        (self.fixed >> i & 1 == 1).then_some(self.bytes[i])
    }
}

/// Whether `b` is a hex digit of the case.
pub(super) fn is_hex(b: u8, upper: bool) -> bool {
    b.is_ascii_digit()
        || if upper {
            (b'A'..=b'F').contains(&b)
        } else {
            (b'a'..=b'f').contains(&b)
        }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape: String = (0..self.width())
            .map(|i| self.fixed_at(i).map_or('#', char::from))
            .collect();
        let case = if self.upper { "uppercase" } else { "lowercase" };
        write!(
            f,
            "{}-byte values shaped {shape}, each # a hex digit ({case})",
            self.len
        )
    }
}
