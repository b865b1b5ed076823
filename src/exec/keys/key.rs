//! The fixed-width words the engine stores a row's key as: a packed key
//! (64 or 128 bits) or a 64-bit fingerprint.

use std::hash::Hash;

/// A key word. `EMPTY` marks a free slot in the counting tables; a real key
/// equal to it is counted on the side.
///
/// # Safety
///
/// Every bit pattern, all zeros included, is a valid value of the type (it
/// is a plain unsigned integer): the store views zeroed anonymous memory as
/// words.
pub unsafe trait Key:
    Copy + Eq + Ord + Hash + Send + Sync + std::fmt::Debug + 'static
{
    const EMPTY: Self;
    const ZERO: Self;
    const BYTES: usize;
    /// A write-combining line of the radix store: 64 bytes of words, or 8
    /// words when a word is wider than 8 bytes.
    type Line: Copy + Send + Sync + AsRef<[Self]> + AsMut<[Self]>;
    const LINE: Self::Line;

    /// A well-mixed 64-bit hash: its high bits pick the radix partition,
    /// its low bits the slot in a partition's table.
    fn mix(self) -> u64;
    /// `self << bits`, 0 when `bits` is the word's width (the word was 0).
    fn shl(self, bits: u32) -> Self;
    /// `self + code + plus`, where `self`'s low bits are free.
    fn add(self, code: u64, plus: bool) -> Self;
    /// The `bits` wide field of `self` that starts `shift` bits up.
    fn field(self, shift: u32, bits: u32) -> u128;
    /// The word of a 128-bit value that fits it (its low bits).
    fn from_wide(w: u128) -> Self;
    /// The word as a 128-bit value.
    fn wide(self) -> u128;
    fn write_le(self, out: &mut Vec<u8>);
    fn read_le(bytes: &[u8]) -> Self;
}

/// Multiplier of Fibonacci hashing (2^64 / golden ratio), then a xor-shift
/// so that low bits depend on high bits too.
#[inline]
fn mix64(x: u64) -> u64 {
    let h = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    h ^ (h >> 29)
}

// SAFETY: every bit pattern is a u32.
unsafe impl Key for u32 {
    const EMPTY: u32 = u32::MAX;
    const ZERO: u32 = 0;
    const BYTES: usize = 4;
    type Line = [u32; 16];
    const LINE: [u32; 16] = [0; 16];

    #[inline]
    fn mix(self) -> u64 {
        mix64(u64::from(self))
    }
    #[inline]
    fn shl(self, bits: u32) -> u32 {
        self.checked_shl(bits).unwrap_or(0)
    }
    #[inline]
    fn add(self, code: u64, plus: bool) -> u32 {
        self.wrapping_add(code as u32).wrapping_add(u32::from(plus))
    }
    #[inline]
    fn field(self, shift: u32, bits: u32) -> u128 {
        (u128::from(self) >> shift) & ((1u128 << bits) - 1)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn from_wide(w: u128) -> u32 {
        w as u32
    }
    #[inline]
    fn wide(self) -> u128 {
        u128::from(self)
    }
    fn read_le(bytes: &[u8]) -> u32 {
        u32::from_le_bytes(bytes.try_into().expect("4 bytes"))
    }
}

// SAFETY: every bit pattern is a u64.
unsafe impl Key for u64 {
    const EMPTY: u64 = u64::MAX;
    const ZERO: u64 = 0;
    const BYTES: usize = 8;
    type Line = [u64; 8];
    const LINE: [u64; 8] = [0; 8];

    #[inline]
    fn mix(self) -> u64 {
        mix64(self)
    }
    #[inline]
    fn shl(self, bits: u32) -> u64 {
        self.checked_shl(bits).unwrap_or(0)
    }
    #[inline]
    fn add(self, code: u64, plus: bool) -> u64 {
        self.wrapping_add(code).wrapping_add(u64::from(plus))
    }
    #[inline]
    fn field(self, shift: u32, bits: u32) -> u128 {
        (u128::from(self) >> shift) & ((1u128 << bits) - 1)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn from_wide(w: u128) -> u64 {
        w as u64
    }
    #[inline]
    fn wide(self) -> u128 {
        u128::from(self)
    }
    fn read_le(bytes: &[u8]) -> u64 {
        u64::from_le_bytes(bytes.try_into().expect("8 bytes"))
    }
}

// SAFETY: every bit pattern is a u128.
unsafe impl Key for u128 {
    const EMPTY: u128 = u128::MAX;
    const ZERO: u128 = 0;
    const BYTES: usize = 16;
    type Line = [u128; 8];
    const LINE: [u128; 8] = [0; 8];

    #[inline]
    fn mix(self) -> u64 {
        mix64((self as u64) ^ mix64((self >> 64) as u64))
    }
    #[inline]
    fn shl(self, bits: u32) -> u128 {
        self.checked_shl(bits).unwrap_or(0)
    }
    #[inline]
    fn add(self, code: u64, plus: bool) -> u128 {
        self.wrapping_add(u128::from(code))
            .wrapping_add(u128::from(plus))
    }
    #[inline]
    fn field(self, shift: u32, bits: u32) -> u128 {
        let v = self >> shift;
        if bits >= 128 {
            v
        } else {
            v & ((1u128 << bits) - 1)
        }
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    #[inline]
    fn from_wide(w: u128) -> u128 {
        w
    }
    #[inline]
    fn wide(self) -> u128 {
        self
    }
    fn read_le(bytes: &[u8]) -> u128 {
        u128::from_le_bytes(bytes.try_into().expect("16 bytes"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_through_packing() {
        let k = 5u64.shl(10).add(1000, false).shl(3).add(6, true);
        assert_eq!(k.field(0, 3), 7);
        assert_eq!(k.field(3, 10), 1000);
        assert_eq!(k.field(13, 40), 5);
        assert_eq!(0u64.shl(64), 0, "a full-width first part");
        // 63 bits, then a 65-bit part (64 bits with a null code): 128 bits.
        let w = u128::ZERO
            .shl(64)
            .add(u64::MAX >> 1, false)
            .shl(65)
            .add(u64::MAX, true);
        assert_eq!(w.field(0, 65), u128::from(u64::MAX) + 1);
        assert_eq!(w.field(65, 63), u128::from(u64::MAX >> 1));
    }

    #[test]
    fn spill_bytes_round_trip() {
        let mut b = Vec::new();
        0x0123_4567_89ab_cdefu64.write_le(&mut b);
        (u128::MAX - 5).write_le(&mut b);
        assert_eq!(u64::read_le(&b[..8]), 0x0123_4567_89ab_cdef);
        assert_eq!(u128::read_le(&b[8..]), u128::MAX - 5);
    }
}
